// The audit trail: what the kernel writes beside each change a request makes, in the same
// transaction, so a change and its record commit together or not at all. The kernel hands it the
// resource changes of a write with the images it knows (before and after); this file turns them into
// rows: the actor and the request they came from, the action, the entity, and the images with every
// secret removed — the fields the resource definition keeps out of every answer (write-only and
// virtual ones), and, as a second guard, any field whose name says it holds a credential.
//
// Only writes that carry an origin (a request of an Edge API) are recorded; the controller's own
// background work (activity flushes, sweeps, pruning) has none. Retention bounds the rows by age and
// count; prune() runs on a timer the caller may inject.
import type { CompiledQuery } from 'kysely';
import type { ResourceDef } from '../resources/kit.js';
import { auditEvents } from '../resources/audit-events.js';
import { resourceDefs } from '../resources/index.js';
import { Repository } from '../store/repository.js';
import { template, type Template } from '../store/template.js';
import type { Executor, Store, Tx } from '../store/store.js';
import { iso, type Clock } from '../clock.js';
import { randomBytes } from 'node:crypto';
import type { Change } from './changes.js';

/** Who made a change. */
export interface AuditActor {
  identityId: string;
  name?: string | null;
  apiSessionId?: string | null;
  /** How the actor authenticated: password, cert, ext-jwt or oidc. */
  method?: string | null;
}

/** Where a write comes from: the request that asked for it and its caller, when it had one. */
export interface WriteOrigin {
  requestId: string;
  ipAddress: string;
  actor?: AuditActor;
}

/** An event a write records itself, beside those of its changes (a failed login). */
export interface AuditEntry {
  action: string;
  entityType: string;
  entityId: string | null;
  entityName?: string | null;
  before?: Record<string, unknown> | null;
  after?: Record<string, unknown> | null;
}

/** A change of a resource's record within a write, with the images the writer knew. */
export interface ImagedChange {
  change: Change;
  def: ResourceDef;
  before?: Record<string, unknown> | undefined;
  after?: Record<string, unknown> | undefined;
}

export interface AuditSettings {
  /** Off: nothing is recorded (the store's rows stay, and are still pruned). */
  enabled: boolean;
  /** Rows older than this (ms) are pruned. */
  maxAge: number;
  /** Rows beyond this many, oldest first, are pruned. */
  maxEvents: number;
}

export const DEFAULT_AUDIT_SETTINGS: Readonly<AuditSettings> = Object.freeze({
  enabled: true,
  maxAge: 90 * 24 * 60 * 60 * 1000,
  maxEvents: 1_000_000,
});

/** Names that say a field holds a credential, whatever its definition says. */
const SECRET_NAME = /password|secret|token|hash|recovery|private|jwt/i;

/** The fields of a record an audit event may show: those an answer shows, none named like a secret. */
export function scrubbed(def: ResourceDef, entity: Record<string, unknown>): Record<string, unknown> {
  const shown = shownFields(def);
  const out: Record<string, unknown> = {};
  // An absent field reads undefined, which no image keeps (JSON drops it): `in` costs more.
  for (const name of shown) {
    const value = entity[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/** The fields shown of each definition, worked out once. */
const SHOWN = new WeakMap<ResourceDef, readonly string[]>();

function shownFields(def: ResourceDef): readonly string[] {
  let shown = SHOWN.get(def);
  if (!shown) {
    // The id is the record's own, even where a body names it (a revocation's, declared virtual).
    const fields = Object.entries(def.fields).filter(([name, f]) => !f.writeOnly && !f.virtual && name !== 'id').map(([name]) => name);
    shown = [...BASE_FIELDS, ...fields].filter((name) => !SECRET_NAME.test(name));
    SHOWN.set(def, shown);
  }
  return shown;
}

const BASE_FIELDS = new Set(['id', 'createdAt', 'updatedAt', 'tags', 'isSystem']);

/**
 * The action a change records. A login has no caller yet, and a session that ends itself is a
 * logout; everything else is the kind of the change.
 */
function actionOf(c: ImagedChange, actor: AuditActor | undefined): string {
  if (c.change.collection === 'api-sessions') {
    if (c.change.kind === 'create') return 'login';
    if (c.change.kind === 'delete' && actor?.apiSessionId === c.change.id) return 'logout';
  }
  return c.change.kind;
}

export class AuditTrail {
  readonly settings: AuditSettings;
  private readonly repo: Repository;
  /** The rows of the resources whose records are read back. */
  private readonly repos = new WeakMap<ResourceDef, Repository>();
  /** For ids in the order events were written: the last time used, and a count within it. */
  private lastMs = 0;
  private seq = 0;
  /** Compiled inserts by number of rows. */
  private readonly inserts = new Map<number, { compiled: CompiledQuery; order: { row: number; column: string }[] }>();
  /** Tells this process's ids from another's written in the same millisecond with the same count. */
  private readonly processTag = randomBytes(4).toString('hex');
  /** An identity's name by id (a login's actor), compiled once: every login asks it. */
  private readonly nameOf: Template;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    settings: Partial<AuditSettings> = {},
  ) {
    this.settings = { ...DEFAULT_AUDIT_SETTINGS, ...settings };
    this.repo = new Repository(auditEvents, store.dialect);
    this.nameOf = template(store.db.selectFrom('identities').select('name').where('id', '=', ':id').compile(), [':id']);
  }

  private repoOf(def: ResourceDef): Repository {
    let repo = this.repos.get(def);
    if (!repo) this.repos.set(def, (repo = new Repository(def, this.store.dialect)));
    return repo;
  }

  get enabled(): boolean {
    return this.settings.enabled;
  }

  /**
   * The rows of one write's changes and entries, made inside the write (a record it changed without
   * saying how is read as it now is, before a later write of the batch changes it again). Stored
   * rows: column → value.
   */
  async rowsOf(tx: Tx, now: string, origin: WriteOrigin, changes: readonly ImagedChange[], entries: readonly AuditEntry[]): Promise<Record<string, unknown>[]> {
    const rows: Record<string, unknown>[] = [];
    for (const c of merged(changes)) {
      let { after } = c;
      // A writer that recorded only the change: the record as it now is.
      if (after === undefined && c.change.kind !== 'delete') after = await this.repoOf(c.def).get(tx, c.change.id);
      const actor = origin.actor ?? loginActor(c, after);
      const image = after ?? c.before;
      const nameField = c.def.nameField ?? 'name';
      rows.push(
        this.row(now, origin, actor, {
          action: actionOf(c, actor),
          entityType: entityTypeOf(c.change.collection),
          entityId: c.change.id,
          entityName: typeof image?.[nameField] === 'string' ? (image[nameField] as string) : null,
          ...images(c.def, c.before, c.change.kind === 'delete' ? undefined : after),
        }),
      );
    }
    for (const e of entries) rows.push(this.row(now, origin, origin.actor, e));
    if (rows.length === 0) return rows;
    await this.fillActorNames(tx, rows);
    return rows.map((r) => this.repo.toRow(r));
  }

  /**
   * Stores rows made by rowsOf, in the transaction of their writes: the events of a whole batch of
   * writes in a few statements, each compiled once per size (every row has every column). A pass
   * through the query builder per event would cost more than the insert itself.
   */
  async insert(tx: Tx, rows: readonly Record<string, unknown>[]): Promise<void> {
    let at = 0;
    while (at < rows.length) {
      const size = INSERT_SIZES.find((n) => n <= rows.length - at)!;
      await this.store.dialect.execute(tx, this.insertOf(tx, rows.slice(at, at + size)));
      at += size;
    }
  }

  private insertOf(tx: Tx, rows: readonly Record<string, unknown>[]): CompiledQuery {
    const columns = Object.keys(rows[0]!);
    let template = this.inserts.get(rows.length);
    if (!template) {
      // Placeholder values name their row and column; the compiled order says where each goes.
      const placeholders = rows.map((_, i) => Object.fromEntries(columns.map((c) => [c, `${i}:${c}`])));
      const compiled = tx.insertInto(auditEvents.table).values(placeholders).compile();
      const order = compiled.parameters.map((p) => {
        const [row, column] = String(p).split(':') as [string, string];
        if (!columns.includes(column)) throw new Error(`unexpected parameter ${String(p)} in ${compiled.sql}`);
        return { row: Number(row), column };
      });
      template = { compiled, order };
      this.inserts.set(rows.length, template);
    }
    const { compiled, order } = template;
    return { ...compiled, parameters: order.map((o) => rows[o.row]![o.column]) };
  }

  private row(now: string, origin: WriteOrigin, actor: AuditActor | undefined, e: AuditEntry): Record<string, unknown> {
    const changes: Record<string, unknown> = {};
    if (e.before !== undefined) changes.before = e.before;
    if (e.after !== undefined) changes.after = e.after;
    return {
      id: this.nextId(),
      createdAt: now,
      updatedAt: now,
      tags: {},
      actorIdentityId: actor?.identityId ?? null,
      actorName: actor?.name ?? null,
      actorApiSessionId: actor?.apiSessionId ?? null,
      actorMethod: actor?.method ?? null,
      action: e.action,
      entityType: e.entityType,
      entityId: e.entityId,
      entityName: e.entityName ?? null,
      changes,
      requestId: origin.requestId,
      ipAddress: origin.ipAddress,
    };
  }

  /**
   * An id that sorts after every id this trail gave before (time, then a count, then a random tag of
   * this process), so events of the same millisecond list in the order they were written.
   */
  private nextId(): string {
    const ms = Math.max(this.clock(), this.lastMs);
    this.seq = ms === this.lastMs ? this.seq + 1 : 0;
    this.lastMs = ms;
    return `${ms.toString(36).padStart(9, '0')}${this.seq.toString(36).padStart(4, '0')}${this.processTag}`;
  }

  /** An actor known by id only (a login's) is shown by name too. */
  private async fillActorNames(tx: Tx, rows: Record<string, unknown>[]): Promise<void> {
    const unnamed = [...new Set(rows.filter((r) => r.actorIdentityId !== null && r.actorName === null).map((r) => r.actorIdentityId as string))];
    if (unnamed.length === 0) return;
    const names = new Map<string, string>();
    for (const id of unnamed) {
      const [found] = (await this.store.dialect.execute(tx, this.nameOf({ ':id': id }))).rows as { name: string }[];
      if (found) names.set(id, found.name);
    }
    for (const r of rows) if (r.actorName === null && typeof r.actorIdentityId === 'string') r.actorName = names.get(r.actorIdentityId) ?? null;
  }

  /**
   * Deletes the rows older than the maximum age, then the oldest beyond the maximum count; answers
   * how many went. Runs on `ex` (the caller's transaction, or the store).
   */
  async prune(ex: Executor): Promise<number> {
    const table = auditEvents.table;
    const cutoff = iso(this.clock() - this.settings.maxAge);
    const aged = await ex.deleteFrom(table).where('created_at', '<', cutoff).executeTakeFirst();
    // The newest row beyond the bound, found by the (created_at, id) index; it and all older go.
    const first = await ex
      .selectFrom(table)
      .select(['created_at', 'id'])
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .offset(this.settings.maxEvents)
      .executeTakeFirst();
    let counted = 0n;
    if (first) {
      const at = String(first.created_at);
      const id = String(first.id);
      const result = await ex
        .deleteFrom(table)
        .where((eb) => eb.or([eb('created_at', '<', at), eb.and([eb('created_at', '=', at), eb('id', '<=', id)])]))
        .executeTakeFirst();
      counted = result.numDeletedRows;
    }
    return Number(aged.numDeletedRows + counted);
  }
}

/**
 * The entity type an event names: the collection that owns the record's table. One table served
 * under two names (routers at /routers and /transit-routers) is one kind of record, whichever path
 * changed it, so a filter on it finds every event of the record.
 */
const OWNER_OF_TABLE = new Map<string, string>();
for (const def of resourceDefs) if (!OWNER_OF_TABLE.has(def.table)) OWNER_OF_TABLE.set(def.table, def.name);
const ENTITY_TYPE = new Map<string, string>(resourceDefs.map((def) => [def.name, OWNER_OF_TABLE.get(def.table)!]));

function entityTypeOf(collection: string): string {
  return ENTITY_TYPE.get(collection) ?? collection;
}

/**
 * One change per record of a write: a record created and then updated is created, one updated and
 * then deleted is deleted; the first image before and the last after are kept.
 */
function merged(changes: readonly ImagedChange[]): ImagedChange[] {
  const byRecord = new Map<string, ImagedChange>();
  for (const c of changes) {
    const key = `${c.change.collection}\u0000${c.change.id}`;
    const seen = byRecord.get(key);
    if (!seen) {
      byRecord.set(key, c);
      continue;
    }
    const kind = seen.change.kind === 'create' && c.change.kind !== 'delete' ? 'create' : c.change.kind;
    byRecord.set(key, {
      change: { ...c.change, kind },
      def: c.def,
      before: seen.before ?? (seen.change.kind === 'create' ? undefined : c.before),
      after: kind === 'delete' ? undefined : c.after,
    });
  }
  return [...byRecord.values()];
}

/**
 * The images an event shows, secrets removed: a created record after, a deleted one before, and of
 * an updated one the fields that changed, before and after (what an operator asks: what did this
 * change; and the rows of a long log stay small).
 */
function images(def: ResourceDef, before: Record<string, unknown> | undefined, after: Record<string, unknown> | undefined): Pick<AuditEntry, 'before' | 'after'> {
  if (before === undefined) return after === undefined ? {} : { after: scrubbed(def, after) };
  if (after === undefined) return { before: scrubbed(def, before) };
  const was: Record<string, unknown> = {};
  const is: Record<string, unknown> = {};
  const shownBefore = scrubbed(def, before);
  const shownAfter = scrubbed(def, after);
  for (const name of new Set([...Object.keys(shownBefore), ...Object.keys(shownAfter)])) {
    const a = shownBefore[name];
    const b = shownAfter[name];
    if (a === b || (typeof a === 'object' && typeof b === 'object' && JSON.stringify(a) === JSON.stringify(b))) continue;
    was[name] = a ?? null;
    is[name] = b ?? null;
  }
  return { before: was, after: is };
}

/** A login's actor: the identity of the API session it opens. */
function loginActor(c: ImagedChange, after: Record<string, unknown> | undefined): AuditActor | undefined {
  if (c.change.collection !== 'api-sessions' || c.change.kind !== 'create' || !after) return undefined;
  return {
    identityId: String(after.identityId),
    apiSessionId: c.change.id,
    method: typeof after.authMethod === 'string' ? after.authMethod : null,
  };
}

/** Schedules a repeating job; answers how to stop it. Injected by tests. */
export type Scheduler = (job: () => void, everyMs: number) => () => void;

export const intervalScheduler: Scheduler = (job, everyMs) => {
  const timer = setInterval(job, everyMs);
  timer.unref();
  return () => clearInterval(timer);
};

/** Rows per insert statement: a batch's events go in the largest that fit, so few texts are compiled. */
const INSERT_SIZES = [64, 16, 4, 1];

/** How often the retention bounds are applied. */
export const PRUNE_EVERY_MS = 10 * 60_000;

/**
 * Applies the retention bounds in the background: once at start, then every `everyMs`, each time
 * as a write of the controller's own (so never refused and never audited). Failures are logged and
 * tried again at the next turn.
 */
export class AuditRetention {
  private stopTimer: (() => void) | undefined;

  constructor(
    private readonly deps: {
      trail: AuditTrail;
      /** The kernel's write: pruning runs in the write queue like every other write. */
      write: <T>(fn: (ctx: { tx: Tx }) => Promise<T>) => Promise<T>;
      onError: (err: unknown) => void;
      scheduler?: Scheduler;
      everyMs?: number;
    },
  ) {}

  /** Prunes now; answers how many rows went. */
  prune(): Promise<number> {
    return this.deps.write((ctx) => this.deps.trail.prune(ctx.tx));
  }

  start(): void {
    if (this.stopTimer) return;
    const run = () => void this.prune().catch(this.deps.onError);
    this.stopTimer = (this.deps.scheduler ?? intervalScheduler)(run, this.deps.everyMs ?? PRUNE_EVERY_MS);
    run();
  }

  stop(): void {
    this.stopTimer?.();
    this.stopTimer = undefined;
  }
}
