// Data integrity: checks that the store holds what its declarations say, and repairs what can be
// repaired. Every check is derived from the resource definitions and their relations, not from a
// list per table, so a resource added later is checked too:
//   - references: every stored reference field, every side of a policy link table, of a link list
//     table and of the role attribute index names a row that exists;
//   - unique fields: no two rows share a value, and the unique index is there;
//   - derived rows: the role attribute index holds exactly each entity's role attributes, and each
//     policy link table exactly the entities the policy's roles select, computed here afresh with
//     the pure matcher (policy/roles.ts) from the entity rows, not from the derived tables.
// A repair runs in a kernel write of its own and announces what it changed, so caches follow; it
// re-reads what it repairs inside that write, so a row that changed since the check is never
// "repaired" from a stale finding. A fix checks and repairs one group after the other (references
// first: their repairs may remove rows the later groups would otherwise report).
// One run at a time, check or fix, in the background; its progress and results are kept in memory
// for the results endpoint, like the established controller does.
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { sql, type KyselyPlugin, type RawBuilder } from 'kysely';
import type { Clock } from '../clock.js';
import { iso } from '../clock.js';
import { ApiError } from '../errors.js';
import { MAX_BATCH, type Kernel, type WriteContext } from '../kernel/kernel.js';
import type { PolicyLinks } from '../policy/links.js';
import { matchesParsed, parseRoles } from '../policy/roles.js';
import { resourceDefs, type ResourceName } from '../resources/index.js';
import { columnOf, isNullableColumn, MAX_NAME, type ResourceDef } from '../resources/kit.js';
import {
  LINK_LISTS,
  LINK_TABLES,
  POLICY_COLLECTIONS,
  policySpecOf,
  ROLE_KINDS,
  type KindSpec,
  type RoleKind,
} from '../resources/relations.js';
import type { Db } from '../store/dialect.js';
import type { Snapshots } from './snapshots.js';

/** Results kept at most; more set tooManyErrors (the established controller's bound). */
export const MAX_RESULTS = 1000;
/** Repairs handed to the kernel at once: as many as share one commit. */
const REPAIR_BATCH = MAX_BATCH;
/** Ids named in one description at most. */
const MAX_IDS_SHOWN = 5;

export interface IntegrityResult {
  description: string;
  fixed: boolean;
}

export interface IntegrityRun {
  startTime: string | null;
  endTime: string | null;
  inProgress: boolean;
  fixingErrors: boolean;
  tooManyErrors: boolean;
  error: string | null;
  results: IntegrityResult[];
}

/** Something wrong in the store, and how to repair it when it can be. */
export interface Finding {
  description: string;
  /** Repairs it inside a kernel write; absent when the store cannot repair it alone. */
  repair?: (ctx: WriteContext) => Promise<void>;
}

/** One group of checks; its findings are repaired before the next group looks. */
interface CheckGroup {
  name: string;
  find(db: Db): Promise<Finding[]>;
}

export interface IntegrityDeps {
  kernel: Kernel;
  links: PolicyLinks;
  snapshots: Snapshots;
  clock: Clock;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
}

// ---- helpers -------------------------------------------------------------------------------------

const defByName = new Map<string, ResourceDef>(resourceDefs.map((d) => [d.name, d]));

function defOf(collection: string): ResourceDef {
  const def = defByName.get(collection);
  if (!def) throw new Error(`integrity: no resource ${collection}`);
  return def;
}

/** Each resource table once: collections served twice from one table (transit routers) are one. */
function tableDefs(): ResourceDef[] {
  const seen = new Set<string>();
  return resourceDefs.filter((d) => (seen.has(d.table) ? false : (seen.add(d.table), true)));
}

function shown(ids: readonly string[]): string {
  const head = ids.slice(0, MAX_IDS_SHOWN).join(', ');
  return ids.length > MAX_IDS_SHOWN ? `${head} and ${ids.length - MAX_IDS_SHOWN} more` : head;
}

/** A stored JSON list; text that is not one (damage of its own) reads as empty, so the check goes on. */
function jsonList(value: unknown): string[] {
  let list = value;
  if (typeof value === 'string') {
    try {
      list = JSON.parse(value) as unknown;
    } catch {
      return [];
    }
  }
  return Array.isArray(list) ? list.map(String) : [];
}

async function rowExists(db: Db, table: string, id: string): Promise<boolean> {
  return (await db.selectFrom(table).select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
}

// ---- references ------------------------------------------------------------------------------------

/** Rows a check reads per statement: the driver runs a statement to its end before anything else runs. */
const PAGE = 5000;

/**
 * Visits every row of `table` (as `s`), in pages of at most PAGE rows in the order of `key` (its primary
 * key), so that no statement of a check reads more than a page. `fixed` narrows to rows with these
 * values of the leading key columns (the pages then follow the rest of the key, so each page is one
 * range of the index); `extra` adds a computed column.
 */
async function scan(
  db: Db,
  table: string,
  key: readonly string[],
  columns: readonly string[],
  visit: (rows: Record<string, unknown>[]) => void | Promise<void>,
  opts: { fixed?: Record<string, unknown>; extra?: RawBuilder<unknown> } = {},
): Promise<void> {
  const fixed = Object.entries(opts.fixed ?? {});
  const rest = key.filter((k) => !fixed.some(([f]) => f === k));
  const restRefs = sql.join(rest.map((k) => sql.ref(`s.${k}`)));
  const selected = [...new Set([...key, ...columns])].map((c) => sql.ref(`s.${c}`));
  const list = opts.extra ? sql.join([...selected, opts.extra]) : sql.join(selected);
  let after: unknown[] | undefined;
  for (;;) {
    const conditions: RawBuilder<unknown>[] = fixed.map(([column, value]) => sql`${sql.ref(`s.${column}`)} = ${value}`);
    if (after) conditions.push(sql`(${restRefs}) > (${sql.join(after)})`);
    const where = conditions.length > 0 ? sql`where ${sql.join(conditions, sql` and `)}` : sql``;
    const { rows } = await sql<Record<string, unknown>>`
      select ${list} from ${sql.table(table)} as s ${where} order by ${restRefs} limit ${PAGE}`.execute(db);
    await visit(rows);
    if (rows.length < PAGE) return;
    const last = rows[rows.length - 1]!;
    after = rest.map((k) => last[k]);
  }
}

/** Rows of `table` whose `column` names no row of `target`; `key` is the table's primary key. */
async function dangling(
  db: Db,
  table: string,
  key: readonly string[],
  column: string,
  target: string,
  select: readonly string[],
  fixed?: Record<string, unknown>,
): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  const ref = sql.ref(`s.${column}`);
  const present = sql`(exists (select 1 from ${sql.table(target)} as t where t.id = ${ref})) as integrity_present`;
  await scan(
    db,
    table,
    key,
    [...select, column],
    (rows) => {
      for (const row of rows) if (row[column] !== null && !truthy(row.integrity_present)) out.push(row);
    },
    fixed ? { extra: present, fixed } : { extra: present },
  );
  return out;
}

/** The primary key of the role attribute index. */
const INDEX_KEY = ['kind', 'attribute', 'entity_id'];

/** A boolean as the driver answers it (SQLite: 0 or 1). */
function truthy(value: unknown): boolean {
  return value === true || value === 1 || value === 1n;
}

function referenceChecks(links: PolicyLinks): CheckGroup {
  return {
    name: 'references',
    async find(db) {
      const out: Finding[] = [];
      // Reference fields of the definitions.
      for (const def of tableDefs()) {
        for (const [name, f] of Object.entries(def.fields)) {
          if (f.kind !== 'ref' || f.virtual === true || !f.ref) continue;
          const target = defOf(f.ref.collection);
          const targetTable = target.readFrom ?? target.table;
          const column = columnOf(name, f);
          for (const row of await dangling(db, def.table, ['id'], column, targetTable, ['id'])) {
            const id = String(row.id);
            const ref = String(row[column]);
            const still = async (ctx: WriteContext) =>
              (await ctx.tx.selectFrom(def.table).select('id').where('id', '=', id).where(column, '=', ref).executeTakeFirst()) !== undefined &&
              !(await rowExists(ctx.tx, targetTable, ref));
            const finding: Finding = { description: `${def.label} ${id}: ${name} names ${target.label} ${ref}, which does not exist` };
            const onDelete = f.ref.onDelete;
            if (onDelete === 'cascade') {
              finding.description += '; the record is removed, as deleting that record would have';
              finding.repair = async (ctx) => {
                if (await still(ctx)) await ctx.remove(def.name as ResourceName, id);
              };
            } else if (typeof f.default === 'string') {
              // What a write leaving the field out stores (the default auth policy, say), if that exists.
              const fallback = f.default;
              finding.description += `; ${name} is reset to its default ${fallback}`;
              finding.repair = async (ctx) => {
                if (!(await rowExists(ctx.tx, targetTable, fallback))) throw new Error(`the default ${target.label} ${fallback} does not exist either`);
                if (await still(ctx)) await ctx.update(def.name as ResourceName, id, { [name]: fallback, updatedAt: ctx.now });
              };
            } else if (isNullableColumn(f)) {
              finding.description += `; ${name} is cleared`;
              finding.repair = async (ctx) => {
                if (await still(ctx)) await ctx.update(def.name as ResourceName, id, { [name]: null, updatedAt: ctx.now });
              };
            }
            out.push(finding);
          }
        }
      }
      // Both sides of every policy link table: a row naming a missing policy or entity is removed.
      for (const t of LINK_TABLES) {
        const spec = POLICY_COLLECTIONS.map(policySpecOf).find((p) => p.table === t.policy.table)!;
        for (const [side, other] of [
          [t.policy, t.entity],
          [t.entity, t.policy],
        ] as const) {
          for (const row of await dangling(db, t.table, [t.policy.column, t.entity.column], side.column, side.table, [])) {
            const policyId = String(row[t.policy.column]);
            const entityId = String(row[t.entity.column]);
            const missing = String(row[side.column]);
            out.push({
              description: `${t.table}: the link of ${t.policy.column} ${policyId} and ${t.entity.column} ${entityId} names ${side.table} ${missing}, which does not exist; the link is removed`,
              repair: async (ctx) => {
                if (await rowExists(ctx.tx, side.table, missing)) return;
                await ctx.tx.deleteFrom(t.table).where(t.policy.column, '=', policyId).where(t.entity.column, '=', entityId).execute();
                // What moved is the policy's members (if it still exists, its other side did not).
                if (other === t.policy && (await rowExists(ctx.tx, t.policy.table, policyId))) {
                  ctx.changed({ collection: spec.collection, kind: 'update', id: policyId });
                }
              },
            });
          }
        }
      }
      // Both sides of every link list table.
      for (const l of LINK_LISTS) {
        for (const side of [l.owner, l.member]) {
          for (const row of await dangling(db, l.table, [l.owner.column, l.member.column], side.column, side.table, [])) {
            const ownerId = String(row[l.owner.column]);
            const memberId = String(row[l.member.column]);
            const missing = String(row[side.column]);
            out.push({
              description: `${l.table}: the ${l.field} entry of ${defOf(l.collection).label} ${ownerId} (${memberId}) names ${side.table} ${missing}, which does not exist; the entry is removed`,
              repair: async (ctx) => {
                if (await rowExists(ctx.tx, side.table, missing)) return;
                await ctx.tx.deleteFrom(l.table).where(l.owner.column, '=', ownerId).where(l.member.column, '=', memberId).execute();
                if (side === l.member && (await rowExists(ctx.tx, l.owner.table, ownerId))) {
                  ctx.changed({ collection: l.collection as ResourceName, kind: 'update', id: ownerId });
                }
              },
            });
          }
        }
      }
      // The role attribute index, kind by kind.
      for (const k of Object.values(ROLE_KINDS)) {
        const missing = new Set<string>();
        for (const row of await dangling(db, 'role_attribute_index', INDEX_KEY, 'entity_id', k.table, [], { kind: k.kind })) {
          missing.add(String(row.entity_id));
        }
        for (const id of missing) {
          out.push({
            description: `role_attribute_index: attributes of ${k.label} ${id}, which does not exist; they are removed`,
            repair: async (ctx) => {
              if (await rowExists(ctx.tx, k.table, id)) return;
              await links.forgetEntity(ctx, k.kind, id);
            },
          });
        }
      }
      return out;
    },
  };
}

// ---- unique fields --------------------------------------------------------------------------------

/** A value free in `column` of `table`, made from `value` and the id of the row that must give it up. */
async function freeName(ctx: WriteContext, table: string, column: string, value: string, id: string): Promise<string> {
  for (let n = 1; ; n++) {
    const suffix = n === 1 ? ` (duplicate ${id})` : ` (duplicate ${id} ${n})`;
    const candidate = `${value.slice(0, Math.max(1, MAX_NAME - suffix.length))}${suffix}`;
    if ((await ctx.tx.selectFrom(table).select('id').where(column, '=', candidate).executeTakeFirst()) === undefined) return candidate;
  }
}

function uniqueChecks(kernel: Kernel): CheckGroup {
  return {
    name: 'unique fields',
    async find(db) {
      const dialect = kernel.store.dialect;
      const out: Finding[] = [];
      for (const def of tableDefs()) {
        const indexed = new Set(await dialect.uniqueColumns(def.table, db));
        for (const [name, f] of Object.entries(def.fields)) {
          if (f.unique !== true || f.virtual === true) continue;
          const column = columnOf(name, f);
          const { rows } = await sql<{ value: unknown }>`
            select ${sql.ref(column)} as value from ${sql.table(def.table)}
            where ${sql.ref(column)} is not null group by ${sql.ref(column)} having count(*) > 1`.execute(db);
          // The name field can be renamed: the oldest record keeps the name, the others get it with a suffix.
          const renamable = name === (def.nameField ?? 'name') && f.kind === 'string';
          for (const { value } of rows) {
            const holders = await db
              .selectFrom(def.table)
              .select('id')
              .where(column, '=', value)
              .orderBy('created_at')
              .orderBy('id')
              .execute();
            const [keeper, ...others] = holders.map((h) => String(h.id));
            for (const id of others) {
              const finding: Finding = {
                description: `${def.label} ${id}: ${name} ${JSON.stringify(value)} is also held by ${def.label} ${keeper}`,
              };
              if (renamable) {
                finding.description += '; the younger record is renamed';
                finding.repair = async (ctx) => {
                  const now = await ctx.tx.selectFrom(def.table).select('id').where(column, '=', value).execute();
                  if (now.length < 2 || !now.some((r) => r.id === id)) return;
                  const renamed = await freeName(ctx, def.table, column, String(value), id);
                  await ctx.update(def.name as ResourceName, id, { [name]: renamed, updatedAt: ctx.now });
                };
              }
              out.push(finding);
            }
          }
          if (!indexed.has(column)) {
            // Named as the migrations name unique indexes; created once the values are unique.
            const index = `${def.table}_${column}_unique`;
            out.push({
              description: `${def.table}.${column}: the unique index is missing; it is created`,
              repair: async (ctx) => {
                await ctx.tx.schema.createIndex(index).ifNotExists().on(def.table).column(column).unique().execute();
              },
            });
          }
        }
      }
      return out;
    },
  };
}

// ---- derived rows: the role attribute index and the policy links ------------------------------------

interface KindEntities {
  spec: KindSpec;
  ids: Set<string>;
  attributes: Map<string, Set<string>>;
  /** Entities by attribute. */
  byAttribute: Map<string, Set<string>>;
}

async function loadKind(db: Db, spec: KindSpec): Promise<KindEntities> {
  const kind: KindEntities = { spec, ids: new Set(), attributes: new Map(), byAttribute: new Map() };
  await scan(db, spec.table, ['id'], ['role_attributes'], (rows) => {
    for (const row of rows) {
      const id = String(row.id);
      const attributes = new Set(jsonList(row.role_attributes));
      kind.ids.add(id);
      kind.attributes.set(id, attributes);
      for (const a of attributes) {
        let set = kind.byAttribute.get(a);
        if (!set) kind.byAttribute.set(a, (set = new Set()));
        set.add(id);
      }
    }
  });
  return kind;
}

function derivedChecks(kernel: Kernel, links: PolicyLinks): CheckGroup {
  return {
    name: 'derived rows',
    async find(db) {
      const out: Finding[] = [];
      const kinds = new Map<RoleKind, KindEntities>();
      for (const spec of Object.values(ROLE_KINDS)) kinds.set(spec.kind, await loadKind(db, spec));

      // The role attribute index against each entity's attributes.
      for (const kind of kinds.values()) {
        const indexed = new Map<string, Set<string>>();
        await scan(
          db,
          'role_attribute_index',
          INDEX_KEY,
          [],
          (rows) => {
            for (const r of rows) {
              const id = String(r.entity_id);
              if (!kind.ids.has(id)) continue; // a missing entity: a reference finding
              let set = indexed.get(id);
              if (!set) indexed.set(id, (set = new Set()));
              set.add(String(r.attribute));
            }
          },
          { fixed: { kind: kind.spec.kind } },
        );
        const pace = pacer();
        for (const [id, attributes] of kind.attributes) {
          await pace();
          const have = indexed.get(id) ?? new Set<string>();
          const missing = [...attributes].filter((a) => !have.has(a));
          const extra = [...have].filter((a) => !attributes.has(a));
          if (missing.length === 0 && extra.length === 0) continue;
          const parts = [
            ...(missing.length > 0 ? [`missing ${shown(missing.map((a) => `#${a}`))}`] : []),
            ...(extra.length > 0 ? [`extra ${shown(extra.map((a) => `#${a}`))}`] : []),
          ];
          out.push({
            description: `${kind.spec.label} ${id}: the role attribute index differs from its role attributes (${parts.join('; ')}); it is rebuilt with the entity's policy links`,
            repair: async (ctx) => {
              const entity = await kernel.repoFor(defOf(kind.spec.collection)).get(ctx.tx, id);
              if (!entity) return;
              await links.refreshEntityLinks(ctx, kind.spec.kind, entity);
              ctx.changed({ collection: kind.spec.collection as ResourceName, kind: 'update', id });
            },
          });
        }
      }

      // Each policy's links against what its roles select now.
      for (const collection of POLICY_COLLECTIONS) {
        const spec = policySpecOf(collection);
        const def = defOf(collection);
        const policies = await db
          .selectFrom(spec.table)
          .select(['id', 'semantic', ...spec.lists.map((l) => l.column)])
          .execute();
        for (const l of spec.lists) {
          const kind = kinds.get(l.kind)!;
          const linked = new Map<string, Set<string>>();
          await scan(db, l.linkTable, ['policy_id', l.linkColumn], [], (rows) => {
            for (const r of rows) {
              const entityId = String(r[l.linkColumn]);
              if (!kind.ids.has(entityId)) continue; // a missing entity: a reference finding
              const policyId = String(r.policy_id);
              let set = linked.get(policyId);
              if (!set) linked.set(policyId, (set = new Set()));
              set.add(entityId);
            }
          });
          const pace = pacer();
          for (const p of policies) {
            await pace();
            const policyId = String(p.id);
            const roles = parseRoles(jsonList(p[l.column]));
            const semantic = String(p.semantic);
            // Candidates as the policy index finds them, then the pure matcher decides.
            const candidates = new Set<string>(roles.all ? kind.ids : []);
            for (const id of roles.ids) if (kind.ids.has(id)) candidates.add(id);
            for (const a of roles.attributes) for (const id of kind.byAttribute.get(a) ?? []) candidates.add(id);
            const want = [...candidates].filter((id) => matchesParsed(semantic, roles, id, kind.attributes.get(id)!));
            const have = linked.get(policyId) ?? new Set<string>();
            const wanted = new Set(want);
            const missing = want.filter((id) => !have.has(id));
            const extra = [...have].filter((id) => !wanted.has(id));
            if (missing.length === 0 && extra.length === 0) continue;
            const parts = [
              ...(missing.length > 0 ? [`selects ${kind.spec.label} ${shown(missing)} without a link`] : []),
              ...(extra.length > 0 ? [`is linked to ${kind.spec.label} ${shown(extra)} it does not select`] : []),
            ];
            out.push({
              description: `${def.label} ${policyId}: ${l.field} ${parts.join(', and ')}; its links are recomputed`,
              repair: async (ctx) => {
                const policy = await kernel.repoFor(def).get(ctx.tx, policyId);
                if (!policy) return;
                await links.refreshPolicyLinks(ctx, collection, policy);
                ctx.changed({ collection, kind: 'update', id: policyId });
              },
            });
          }
        }
      }
      return out;
    },
  };
}

// ---- the runs ------------------------------------------------------------------------------------------

/** Lets the event loop run: timers, I/O, requests and the kernel's writes. */
export function breathe(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Time a check computes at most before it lets the event loop run. */
const SLICE_MS = 20;

/** Answers a function to await in long loops: it lets the event loop run once a slice has passed. */
function pacer(): () => Promise<void> {
  let last = performance.now();
  return async () => {
    if (performance.now() - last < SLICE_MS) return;
    await breathe();
    last = performance.now();
  };
}

/**
 * The driver runs each statement synchronously and a chain of awaited results never leaves the
 * microtask queue, so a check of thousands of statements would hold every request and write until
 * it ends: after each statement of a check, the event loop runs first.
 */
const YIELDING: KyselyPlugin = {
  transformQuery: (args) => args.node,
  transformResult: async (args) => {
    await breathe();
    return args.result;
  },
};

/** The check groups, in the order a fix repairs them. */
export function checkGroups(kernel: Kernel, links: PolicyLinks): readonly CheckGroup[] {
  return [referenceChecks(links), uniqueChecks(kernel), derivedChecks(kernel, links)];
}

/** Check and fix runs, one at a time, in the background; the last run's results in memory. */
export class DataIntegrity {
  private run: IntegrityRun = {
    startTime: null,
    endTime: null,
    inProgress: false,
    fixingErrors: false,
    tooManyErrors: false,
    error: null,
    results: [],
  };
  private pending: Promise<void> = Promise.resolve();

  constructor(private readonly deps: IntegrityDeps) {}

  /** Starts a check (fix: and repairs); refused with 429 RATE_LIMITED while a run is in progress. */
  start(fix: boolean): void {
    if (this.run.inProgress) throw new ApiError('RATE_LIMITED', 'a data integrity check or fix is already running');
    this.run = {
      startTime: iso(this.deps.clock()),
      endTime: null,
      inProgress: true,
      fixingErrors: fix,
      tooManyErrors: false,
      error: null,
      results: [],
    };
    const run = this.run;
    this.pending = this.execute(run, fix)
      .catch((err: unknown) => {
        run.error = err instanceof Error ? err.message : String(err);
        this.deps.log.error({ err }, 'data integrity run failed');
      })
      .finally(() => {
        run.endTime = iso(this.deps.clock());
        run.inProgress = false;
      });
  }

  /** The current or last run, as the results endpoint shows it. */
  results(): IntegrityRun {
    return { ...this.run, results: [...this.run.results] };
  }

  /** Resolves once no run is in progress (closing, tests). */
  idle(): Promise<void> {
    return this.pending;
  }

  /**
   * A group's findings, read in one read transaction of a connection of its own: one moment of the
   * store, so writes going on meanwhile neither hold the check up nor show as damage half made.
   */
  private async find(group: CheckGroup): Promise<Finding[]> {
    const reader = this.deps.kernel.store.dialect.reader();
    try {
      return await reader.db.withPlugin(YIELDING).transaction().execute((tx) => group.find(tx));
    } finally {
      await reader.close();
    }
  }

  /** Repairs one finding in a kernel write; answers whether it was repaired. */
  private async repair(finding: Finding): Promise<boolean> {
    if (!finding.repair) return false;
    try {
      await this.deps.kernel.write(finding.repair);
      return true;
    } catch (err) {
      this.deps.log.error({ err, description: finding.description }, 'data integrity repair failed');
      return false;
    }
  }

  private async execute(run: IntegrityRun, fix: boolean): Promise<void> {
    const { kernel, links, log } = this.deps;
    log.info({ fix }, 'data integrity run started');
    // Taken before the first repair, once: a run with nothing to repair writes no copy of the store.
    let snapshotTaken = false;
    const snapshotBeforeRepairs = async (): Promise<void> => {
      if (snapshotTaken) return;
      try {
        await this.deps.snapshots.take();
      } catch (err) {
        throw new Error(`nothing more was repaired: the snapshot taken before repairs failed: ${err instanceof Error ? err.message : String(err)}`, {
          cause: err,
        });
      }
      snapshotTaken = true;
    };
    let found = 0;
    for (const group of checkGroups(kernel, links)) {
      const findings = await this.find(group);
      if (fix && findings.some((f) => f.repair)) await snapshotBeforeRepairs();
      // Repairs are handed to the kernel a batch at a time, so they share its commits (each in a
      // savepoint of its own: one that fails is undone alone); in order, so a unique index is made
      // after the renames that free its values.
      for (let i = 0; i < findings.length; i += REPAIR_BATCH) {
        const batch = findings.slice(i, i + REPAIR_BATCH);
        const fixed = await Promise.all(batch.map((finding) => (fix ? this.repair(finding) : false)));
        for (const [j, finding] of batch.entries()) {
          found++;
          log.warn({ group: group.name, description: finding.description, fixed: fixed[j] }, 'data integrity error found');
          if (run.results.length < MAX_RESULTS) run.results.push({ description: finding.description, fixed: fixed[j]! });
          else run.tooManyErrors = true;
        }
      }
    }
    log.info({ fix, found }, 'data integrity run finished');
  }
}
