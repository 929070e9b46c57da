// The kernel: the one way anything is written. A write runs in one store transaction with a write
// context; every record it creates, updates or deletes is recorded as a change (the context's row
// helpers record it themselves; other writes call `changed`), and once the transaction has
// committed the change feed delivers them — the write resolves after every listener has handled
// them and its commit is on disk (changes.ts: buffered in process now; an outbox read by sequence
// on PostgreSQL later). A write that throws rolls back and announces nothing. Below everything that
// has behaviour (domain, auth, oidc, policy): it knows the store, the resource definitions and the
// feed, nothing else.
//
// A write started while a request is handled carries that request as its origin (an async context
// the HTTP layer enters once per request): its resource changes are then recorded in the audit trail
// in the same transaction (audit.ts), and it waits in a bounded queue — when the queue is full it is
// refused at once with SERVER_TOO_MANY_REQUESTS and Retry-After rather than waiting ever longer. The
// controller's own writes (no origin) are never refused: they are bounded by what schedules them.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Logger } from 'pino';
import { iso, type Clock } from '../clock.js';
import { resourceDefs, type EntityOf, type ResourceName } from '../resources/index.js';
import type { ResourceDef } from '../resources/kit.js';
import { Repository, type Entity } from '../store/repository.js';
import type { Store, Tx } from '../store/store.js';
import { CompiledQuery } from 'kysely';
import { InProcessFeed, type Change, type ChangeFeed, type ChangeRecord } from './changes.js';
import { ApiError } from '../errors.js';
import type { AuditEntry, AuditTrail, ImagedChange, WriteOrigin } from './audit.js';

/** The caller of a write, for rules that depend on who writes (granting admin, say). */
export interface Actor {
  id: string;
  isAdmin: boolean;
}

export interface WriteContext {
  tx: Tx;
  /** The write's time, ISO. */
  now: string;
  /** Who asked for the write; absent for the controller's own writes. */
  actor?: Actor;
  /** Runs fn once the transaction has committed, before its changes are delivered. */
  afterCommit(fn: () => void): void;
  /**
   * Records a change of this write; the feed delivers it once the transaction has committed. A
   * writer that has the record before and after the change passes them for the audit trail; one
   * that does not leaves the trail to read the record as it ends up.
   */
  /**
   * Records a change, with the images the writer knows. `audited: false` for a change of fields no
   * answer shows (a count of wrong passwords), which the audit log leaves out.
   */
  changed(change: Change, images?: ChangeImages): void;
  /** Records an audit event that is no change of a record (a failed login); nothing when not audited. */
  audit(entry: AuditEntry): void;
  /** Inserts a record of a resource and records its creation. */
  insert(name: ResourceName, entity: Record<string, unknown>): Promise<void>;
  /** Updates fields of a record and records the update; answers false when there is no such record. */
  update(name: ResourceName, id: string, values: Record<string, unknown>, ownerId?: string): Promise<boolean>;
  /** Deletes a record and records the delete; answers false when there was no such record. */
  remove(name: ResourceName, id: string, ownerId?: string): Promise<boolean>;
}

export interface KernelOptions {
  store: Store;
  clock: Clock;
  /** Where changes travel; in process by default. */
  feed?: ChangeFeed;
  log?: Pick<Logger, 'error'>;
  /** Told how long each transaction took, in seconds, and whether it committed (metrics). */
  observeTransaction?: (seconds: number, committed: boolean) => void;
  /** Where the changes of requests are recorded; none: nothing is. */
  audit?: AuditTrail;
  /** Writes of requests waiting at most; one more is refused (429). Unbounded when absent. */
  maxQueuedWrites?: number;
}

/** Seconds a refused write is told to wait: a batch commits in well under that. */
const RETRY_AFTER_SECONDS = 1;

export class Kernel {
  readonly store: Store;
  readonly clock: Clock;
  readonly changes: ChangeFeed;
  private readonly log: Pick<Logger, 'error'> | undefined;
  private readonly observeTransaction: ((seconds: number, committed: boolean) => void) | undefined;
  private readonly repos = new Map<string, Repository>();
  private readonly defs = new Map<string, ResourceDef>();
  readonly audit: AuditTrail | undefined;
  private readonly maxQueuedWrites: number;
  private readonly origins = new AsyncLocalStorage<WriteOrigin>();
  /** Writes of requests in the queue now. */
  private queuedFromRequests = 0;

  constructor(opts: KernelOptions) {
    this.store = opts.store;
    this.clock = opts.clock;
    this.log = opts.log;
    this.observeTransaction = opts.observeTransaction;
    this.audit = opts.audit;
    this.maxQueuedWrites = opts.maxQueuedWrites ?? Infinity;
    this.changes =
      opts.feed ?? new InProcessFeed((err, change) => this.log?.error({ err, change }, 'a change listener failed'));
    for (const def of resourceDefs) this.repoFor(def);
  }

  /** The rows of a resource of the controller. */
  repo<N extends ResourceName>(name: N): Repository<EntityOf<N>> {
    return this.repos.get(name)! as Repository<EntityOf<N>>;
  }

  /** The rows of a definition (one repository per collection name). */
  repoFor(def: ResourceDef): Repository {
    let repo = this.repos.get(def.name);
    if (!repo || this.defs.get(def.name) !== def) {
      repo = new Repository(def, this.store.dialect);
      this.repos.set(def.name, repo);
      this.defs.set(def.name, def);
    }
    return repo;
  }

  /**
   * Runs fn in a store transaction with a write context, atomically: all it writes commits, or
   * (when it throws) none of it does and nothing is announced. After the commit: the after-commit
   * work, then the delivery of the changes, awaited; the write answers once its commit is on disk
   * too. Listener failures are logged by the feed and never fail the write; after-commit failures
   * are logged likewise.
   *
   * Writes that arrive while a transaction is running wait and then share the next one, each in a
   * savepoint of its own (group commit): a durable commit costs a flush to disk, which one flush for
   * many writes pays once. A write that throws is rolled back to its savepoint alone. Changes are
   * delivered in commit order, each write's before the next's, and the next batch starts only once
   * they are: so a change listener must not wait for a write. The next batch does not wait for the
   * disk: while one commit is flushed the next is made, and writes are answered in commit order.
   * (So a read may see a commit a moment before it is on disk; no write is answered before.)
   */
  write<T>(fn: (ctx: WriteContext) => Promise<T>, actor?: Actor, opts: WriteOptions = {}): Promise<T> {
    const origin = this.origins.getStore();
    const bounded = origin !== undefined && opts.bounded !== false;
    if (bounded) {
      if (this.queuedFromRequests >= this.maxQueuedWrites) {
        return Promise.reject(
          new ApiError('SERVER_TOO_MANY_REQUESTS', 'too many writes are waiting; try again later', undefined, {
            'retry-after': String(RETRY_AFTER_SECONDS),
          }),
        );
      }
      this.queuedFromRequests++;
    }
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, actor, origin, bounded, resolve: resolve as (value: unknown) => void, reject } as QueuedWrite);
      // The drain serves every request's writes: it runs outside this one's origin, so nothing it
      // starts (listeners, work after commits) takes this request for its own.
      if (!this.draining) this.origins.exit(() => void this.drain());
    });
  }

  /**
   * Runs fn with `origin` as the origin of every write it starts, however deep: the request's
   * writes are audited as its own and count against the queue bound.
   */
  withOrigin<T>(origin: WriteOrigin, fn: () => T): T {
    return this.origins.run(origin, fn);
  }

  /** Records an audit event in a small write of its own (a failed login has no transaction). */
  async recordAudit(entry: AuditEntry): Promise<void> {
    if (!this.audit?.enabled || !this.origins.getStore()) return;
    // Never refused for a full write queue: a flood of writes must not hide failed logins.
    await this.write(async (ctx) => ctx.audit(entry), undefined, { bounded: false });
  }

  private readonly queue: QueuedWrite[] = [];
  private draining = false;

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.queue.length > 0) {
        // The driver commits synchronously, holding the event loop: requests that arrived meanwhile
        // get to queue their writes before the batch is taken (a few turns of the event loop at
        // most, while the queue still grows; none to speak of for a lone write).
        for (let turn = 0, seen = -1; turn < BATCH_TURNS && this.queue.length !== seen; turn++) {
          seen = this.queue.length;
          await new Promise((resolve) => setImmediate(resolve));
        }
        const batch = this.queue.splice(0, MAX_BATCH);
        for (const write of batch) if (write.bounded) this.queuedFromRequests--;
        const done: { write: QueuedWrite; value: unknown; after: (() => void)[]; record: ChangeRecord }[] = [];
        const failed: { write: QueuedWrite; err: unknown }[] = [];
        const began = performance.now();
        try {
          await this.store.commit(async (tx) => {
            // The audit rows of the batch's writes that succeed, stored together before the commit.
            const auditRows: Record<string, unknown>[] = [];
            for (const write of batch) {
              // One write alone needs no savepoint: its failure rolls the transaction back.
              const alone = batch.length === 1;
              if (!alone) await this.store.dialect.execute(tx, SAVEPOINT);
              const after: (() => void)[] = [];
              const record = this.changes.begin(tx);
              const audited = write.origin && this.audit?.enabled ? { origin: write.origin, changes: [], entries: [] } : undefined;
              try {
                const ctx = this.context(tx, write.actor, after, record, audited);
                const value = await write.fn(ctx);
                const rows = audited ? await this.audit!.rowsOf(tx, ctx.now, audited.origin, audited.changes, audited.entries) : [];
                await record.seal();
                if (!alone) await this.store.dialect.execute(tx, RELEASE);
                for (const row of rows) auditRows.push(row);
                done.push({ write, value, after, record });
              } catch (err) {
                if (alone) throw err;
                await this.store.dialect.execute(tx, ROLLBACK_TO);
                await this.store.dialect.execute(tx, RELEASE);
                failed.push({ write, err });
              }
            }
            if (auditRows.length > 0) await this.audit!.insert(tx, auditRows);
          });
        } catch (err) {
          this.observeTransaction?.((performance.now() - began) / 1000, false);
          // The commit failed (or a write alone threw): nothing of the batch was written.
          for (const write of batch) write.reject(err);
          continue;
        }
        this.observeTransaction?.((performance.now() - began) / 1000, true);
        // The flush to disk starts now, while the changes are delivered (handled below, after them).
        const flushed = this.store.durable();
        flushed.catch(() => undefined);
        for (const { write, err } of failed) write.reject(err);
        const delivered: { write: QueuedWrite; value: unknown }[] = [];
        for (const { write, value, after, record } of done) {
          for (const f of after) {
            try {
              f();
            } catch (err) {
              this.log?.error({ err }, 'work after a commit failed');
            }
          }
          try {
            await record.deliver();
            delivered.push({ write, value });
          } catch (err) {
            write.reject(err);
          }
        }
        // Answered once on disk; the next batch runs meanwhile (its commit shares a later flush).
        flushed.then(
          () => {
            for (const { write, value } of delivered) write.resolve(value);
          },
          (err: unknown) => {
            this.log?.error({ err }, 'a commit could not be flushed to disk');
            for (const { write } of delivered) write.reject(err);
          },
        );
      }
    } finally {
      this.draining = false;
    }
  }

  /** The write context of one write inside the batch's transaction. */
  private context(tx: Tx, actor: Actor | undefined, after: (() => void)[], changes: ChangeRecord, audited: Audited | undefined): WriteContext {
    const changed = (change: Change, images: ChangeImages = {}): void => {
      changes.record(change);
      // Only the records of resources are audited; topics (posture data, grants, state) are not.
      const def = this.defs.get(change.collection);
      if (audited && def && images.audited !== false) audited.changes.push({ change, def, before: images.before, after: images.after });
    };
    // The record before an update or delete, read only when the write is audited.
    const before = async (name: ResourceName, id: string) => (audited ? await this.repo(name).get(tx, id) : undefined);
    return {
      ...(actor ? { actor } : {}),
      tx,
      now: iso(this.clock()),
      afterCommit: (f) => after.push(f),
      changed,
      audit: (entry) => audited?.entries.push(entry),
      insert: async (name, entity) => {
        const repo = this.repo(name);
        await repo.insert(tx, entity);
        changed(withOwner({ collection: name, kind: 'create', id: String(entity.id) }, ownerOf(repo.def, entity)), { after: entity });
      },
      update: async (name, id, values, ownerId) => {
        const prev = await before(name, id);
        if (!(await this.repo(name).update(tx, id, values))) return false;
        changed(withOwner({ collection: name, kind: 'update', id }, ownerId), prev ? { before: prev, after: { ...prev, ...values } } : {});
        return true;
      },
      remove: async (name, id, ownerId) => {
        const prev = await before(name, id);
        if (!(await this.repo(name).delete(tx, id))) return false;
        changed(withOwner({ collection: name, kind: 'delete', id }, ownerId), prev ? { before: prev } : {});
        return true;
      },
    };
  }
}

/** Writes sharing one transaction at most. */
export const MAX_BATCH = 100;
/** Turns of the event loop a batch waits at most for writes still arriving. */
const BATCH_TURNS = 4;

// The savepoint of each write in a batch (compiled once: they run several times per write).
const SAVEPOINT = CompiledQuery.raw('savepoint kernel_write');
const RELEASE = CompiledQuery.raw('release savepoint kernel_write');
const ROLLBACK_TO = CompiledQuery.raw('rollback to savepoint kernel_write');

/** What a write being audited has gathered so far. */
interface Audited {
  origin: WriteOrigin;
  changes: ImagedChange[];
  entries: AuditEntry[];
}

/** What a writer knows of a changed record, and whether the audit log takes the change. */
export interface ChangeImages {
  before?: Record<string, unknown>;
  after?: Record<string, unknown>;
  audited?: boolean;
}

export interface WriteOptions {
  /**
   * false: a request's write that is never refused for a full queue (it still counts as the
   * request's). For the counts of security limits, which a flood of writes must not stop.
   */
  bounded?: boolean;
}

interface QueuedWrite {
  fn: (ctx: WriteContext) => Promise<unknown>;
  actor: Actor | undefined;
  origin: WriteOrigin | undefined;
  /** Counted against the queue bound while queued. */
  bounded: boolean;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** The owner of a record of `def`, when the definition names an owner field. */
export function ownerOf(def: ResourceDef, entity: Record<string, unknown> | Entity): string | undefined {
  const owner = def.owner === undefined ? undefined : entity[def.owner];
  return typeof owner === 'string' ? owner : undefined;
}

export function withOwner(change: Change, ownerId: string | undefined): Change {
  return ownerId === undefined ? change : { ...change, ownerId };
}
