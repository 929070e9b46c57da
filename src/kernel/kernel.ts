// The kernel: the one way anything is written. A write runs in one store transaction with a write
// context; every record it creates, updates or deletes is recorded as a change (the context's row
// helpers record it themselves; other writes call `changed`), and once the transaction has
// committed the change feed delivers them — the write resolves after every listener has handled
// them (changes.ts: buffered in process now; an outbox read by sequence on PostgreSQL later). A
// write that throws rolls back and announces nothing. Below everything that has behaviour
// (domain, auth, oidc, policy): it knows the store, the resource definitions and the feed, nothing else.
import type { Logger } from 'pino';
import { iso, type Clock } from '../clock.js';
import { resourceDefs, type EntityOf, type ResourceName } from '../resources/index.js';
import type { ResourceDef } from '../resources/kit.js';
import { Repository, type Entity } from '../store/repository.js';
import type { Store, Tx } from '../store/store.js';
import { InProcessFeed, type Change, type ChangeFeed } from './changes.js';

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
  /** Records a change of this write; the feed delivers it once the transaction has committed. */
  changed(change: Change): void;
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
}

export class Kernel {
  readonly store: Store;
  readonly clock: Clock;
  readonly changes: ChangeFeed;
  private readonly log: Pick<Logger, 'error'> | undefined;
  private readonly repos = new Map<string, Repository>();
  private readonly defs = new Map<string, ResourceDef>();

  constructor(opts: KernelOptions) {
    this.store = opts.store;
    this.clock = opts.clock;
    this.log = opts.log;
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
   * Runs fn in one transaction with a write context. After the commit: the after-commit work, then
   * the delivery of the changes, awaited. Listener failures are logged by the feed and never fail
   * the write; after-commit failures are logged likewise.
   */
  async write<T>(fn: (ctx: WriteContext) => Promise<T>, actor?: Actor): Promise<T> {
    const after: (() => void)[] = [];
    let record: ReturnType<ChangeFeed['begin']> | undefined;
    const result = await this.store.transaction(async (tx) => {
      const changes = this.changes.begin(tx);
      record = changes;
      const ctx: WriteContext = {
        ...(actor ? { actor } : {}),
        tx,
        now: iso(this.clock()),
        afterCommit: (f) => after.push(f),
        changed: (change) => changes.record(change),
        insert: async (name, entity) => {
          const repo = this.repo(name);
          await repo.insert(tx, entity);
          changes.record(withOwner({ collection: name, kind: 'create', id: String(entity.id) }, ownerOf(repo.def, entity)));
        },
        update: async (name, id, values, ownerId) => {
          if (!(await this.repo(name).update(tx, id, values))) return false;
          changes.record(withOwner({ collection: name, kind: 'update', id }, ownerId));
          return true;
        },
        remove: async (name, id, ownerId) => {
          if (!(await this.repo(name).delete(tx, id))) return false;
          changes.record(withOwner({ collection: name, kind: 'delete', id }, ownerId));
          return true;
        },
      };
      const value = await fn(ctx);
      await changes.seal();
      return value;
    });
    for (const f of after) {
      try {
        f();
      } catch (err) {
        this.log?.error({ err }, 'work after a commit failed');
      }
    }
    await record!.deliver();
    return result;
  }
}

/** The owner of a record of `def`, when the definition names an owner field. */
export function ownerOf(def: ResourceDef, entity: Record<string, unknown> | Entity): string | undefined {
  const owner = def.owner === undefined ? undefined : entity[def.owner];
  return typeof owner === 'string' ? owner : undefined;
}

export function withOwner(change: Change, ownerId: string | undefined): Change {
  return ownerId === undefined ? change : { ...change, ownerId };
}
