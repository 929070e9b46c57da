// Link maintenance: applies role matching inside a write's transaction, so that the policy link
// tables hold exactly the pairs the pure matcher (roles.ts) selects, and role_attribute_index holds
// exactly each entity's role attributes. Only differences are written.
//
// Entities a policy selects come from the store (role_attribute_index for `#attr`, ids for `@id`,
// the whole table for `#all`). Policies an entity matches come from an in-memory index of every
// policy's role lists (see PolicyIndex), so a change of one entity never scans all policies.
// The policy kinds, their role lists and link tables are those the resource definitions declare.
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import type { WriteContext } from '../kernel/kernel.js';
import {
  isPolicyCollection,
  LISTS_OF_KIND,
  POLICY_COLLECTIONS,
  POLICY_SPECS,
  policySpecOf,
  roleKindOf,
  type PolicyCollection,
  type PolicySpec,
  type RoleField,
  type RoleKind,
  type RoleListSpec,
} from '../resources/relations.js';
import type { Dialect } from '../store/dialect.js';
import type { Entity } from '../store/repository.js';
import type { Executor, Tx } from '../store/store.js';
import { matchesParsed, parseRoles, type ParsedRoles } from './roles.js';

/** What link maintenance needs of a write: its transaction and its after-commit hook. */
export type LinkContext = Pick<WriteContext, 'tx' | 'afterCommit'>;

// ---- the in-memory policy index ----------------------------------------------------------------

interface IndexedPolicy {
  semantic: string;
  lists: Partial<Record<RoleField, ParsedRoles>>;
}

/** Policies of one role list, by what can make them match. */
interface ListIndex {
  all: Set<string>;
  byAttribute: Map<string, Set<string>>;
  byId: Map<string, Set<string>>;
}

function addTo(map: Map<string, Set<string>>, key: string, id: string): void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(id);
}

function removeFrom(map: Map<string, Set<string>>, key: string, id: string): void {
  const set = map.get(key);
  // Stryker: put() removes only the keys it added, so the set is always there; and an empty set left
  // behind selects no candidate, so deleting it only bounds memory.
  if (!set) return;
  set.delete(id);
  if (set.size === 0) map.delete(key);
}

/**
 * Every policy's role lists, inverted by attribute, id and `#all`. Its content is "the committed
 * policies, plus the writes of the transaction `owner`" (just the committed ones when owner is
 * unset). A transaction may use it only when it is loaded and unowned or owned by itself; otherwise
 * it reloads it from its own view of the store. A writer claims it before changing it; the claim is
 * released after its commit. A transaction that rolled back never releases it, so the next writer
 * reloads: that is how rolled-back changes leave the index. SQLite serialises write transactions,
 * so in steady state nothing is reloaded. Policies the change feed reports as written (by this
 * process or, later, another) are read again by the next transaction that uses the index.
 *
 * One transaction may carry several writes (the kernel's group commit), each in a savepoint that is
 * rolled back alone when the write fails, the transaction going on. So the policies the last write
 * changed (`touched`, by `writer`) are read again, from the transaction, by the next write that uses
 * the index: a rolled-back change leaves it there, and a kept one is read back as it is.
 */
class PolicyIndex {
  loaded = false;
  owner: Tx | undefined;
  /** Policies written since they were last read, by collection: read again before the next use. */
  readonly stale = new Map<PolicyCollection, Set<string>>();
  /** The write that changed the policies in `touched`. */
  writer: LinkContext | undefined;
  readonly touched = new Map<PolicyCollection, Set<string>>();
  private readonly policies = new Map<PolicyCollection, Map<string, IndexedPolicy>>();
  private readonly lists = new Map<RoleListSpec, ListIndex>();

  // Stryker: nothing reads the maps before load(), which clears them again.
  constructor(private readonly dialect: Dialect) {
    this.clear();
  }

  private clear(): void {
    for (const c of POLICY_COLLECTIONS) this.policies.set(c, new Map());
    for (const spec of Object.values(POLICY_SPECS)) {
      for (const l of spec.lists) this.lists.set(l, { all: new Set(), byAttribute: new Map(), byId: new Map() });
    }
  }

  async load(ex: Executor): Promise<void> {
    // Stryker: a load that fails leaves the index claimed by a transaction that never commits, so the
    // next one reloads it whatever `loaded` says.
    this.loaded = false;
    this.clear();
    this.stale.clear();
    this.touched.clear();
    this.writer = undefined;
    for (const spec of Object.values(POLICY_SPECS)) {
      const rows = await ex
        .selectFrom(spec.table)
        .select(['id', 'semantic', ...spec.lists.map((l) => l.column)])
        .execute();
      for (const row of rows) this.put(spec.collection, String(row.id), this.fromRow(spec, row));
    }
    this.loaded = true;
  }

  /** Marks the policies another write changed stale (see the class comment). */
  settle(ctx: LinkContext): void {
    // Stryker: without a writer nothing is touched (both are set and cleared together).
    if (this.writer === undefined || this.writer === ctx) return;
    for (const [collection, ids] of this.touched) for (const id of ids) markStale(this.stale, collection, id);
    this.touched.clear();
    this.writer = undefined;
  }

  /** Reads the stale policies again (a policy gone is removed). */
  async refresh(ex: Executor): Promise<void> {
    const stale = [...this.stale];
    this.stale.clear();
    for (const [collection, ids] of stale) {
      const spec = policySpecOf(collection);
      for (const part of chunks([...ids])) {
        const rows = await ex
          .selectFrom(spec.table)
          .select(['id', 'semantic', ...spec.lists.map((l) => l.column)])
          .where('id', 'in', part)
          .execute();
        const found = new Map(rows.map((row) => [String(row.id), row]));
        for (const id of part) {
          const row = found.get(id);
          this.put(collection, id, row ? this.fromRow(spec, row) : undefined);
        }
      }
    }
  }

  private fromRow(spec: PolicySpec, row: Record<string, unknown>): Record<string, unknown> {
    const entity: Record<string, unknown> = { id: row.id, semantic: row.semantic };
    for (const l of spec.lists) entity[l.field] = this.dialect.fromDb('json', row[l.column]);
    return entity;
  }

  /** Sets (or with undefined, removes) the role lists of one policy. */
  put(collection: PolicyCollection, id: string, policy: Record<string, unknown> | undefined): void {
    const spec = policySpecOf(collection);
    const byId = this.policies.get(collection)!;
    const old = byId.get(id);
    if (old) {
      for (const l of spec.lists) {
        const roles = old.lists[l.field];
        const index = this.lists.get(l)!;
        // Stryker: put() sets every list of the policy's kind, so `roles` is always there.
        if (!roles) continue;
        index.all.delete(id);
        for (const a of roles.attributes) removeFrom(index.byAttribute, a, id);
        for (const e of roles.ids) removeFrom(index.byId, e, id);
      }
      // Stryker: a policy left here, in no list's sets, is never a candidate, so it is never looked at.
      byId.delete(id);
    }
    if (!policy) return;
    const entry: IndexedPolicy = { semantic: String(policy.semantic), lists: {} };
    for (const l of spec.lists) {
      const roles = parseRoles(policy[l.field] as string[] | null | undefined);
      entry.lists[l.field] = roles;
      const index = this.lists.get(l)!;
      // Stryker: the candidates only narrow what matchesParsed decides; more of them select no more.
      if (roles.all) index.all.add(id);
      for (const a of roles.attributes) addTo(index.byAttribute, a, id);
      for (const e of roles.ids) addTo(index.byId, e, id);
    }
    byId.set(id, entry);
  }

  /** Ids of the policies whose list `l` names the entity as `@id`. */
  naming(l: RoleListSpec, id: string): string[] {
    return [...(this.lists.get(l)!.byId.get(id) ?? [])];
  }

  /** Ids of the policies whose list `l` selects the entity. */
  matching(l: RoleListSpec, id: string, attributes: ReadonlySet<string>): Set<string> {
    const index = this.lists.get(l)!;
    const candidates = new Set<string>(index.all);
    for (const p of index.byId.get(id) ?? []) candidates.add(p);
    for (const a of attributes) for (const p of index.byAttribute.get(a) ?? []) candidates.add(p);
    const policies = this.policies.get(l.collection)!;
    const out = new Set<string>();
    for (const p of candidates) {
      const policy = policies.get(p)!;
      if (matchesParsed(policy.semantic, policy.lists[l.field]!, id, attributes)) out.add(p);
    }
    return out;
  }
}

function markStale(stale: Map<PolicyCollection, Set<string>>, collection: PolicyCollection, id: string): void {
  let ids = stale.get(collection);
  if (!ids) stale.set(collection, (ids = new Set()));
  ids.add(id);
}

function claim(index: PolicyIndex, ctx: LinkContext): void {
  if (index.owner === ctx.tx) return;
  const tx = ctx.tx;
  index.owner = tx;
  ctx.afterCommit(() => {
    if (index.owner === tx) index.owner = undefined;
    // Another transaction reloaded it meanwhile, possibly without these writes: start over.
    else index.loaded = false;
  });
}

/** Sets (or removes) one policy in the index as the write `ctx` sees it. */
function change(index: PolicyIndex, ctx: LinkContext, collection: PolicyCollection, id: string, policy: Entity | undefined): void {
  // Stryker: with transactions one after another (SQLite), the next write reads again what this one
  // touched whether or not it claimed the index; the claim keeps transactions that run at once apart.
  claim(index, ctx);
  index.writer = ctx;
  markStale(index.touched, collection, id);
  index.put(collection, id, policy);
}

// ---- store helpers -----------------------------------------------------------------------------

/** Values per statement; far below SQLite's 32766 bound parameters, and quick to compile. */
const CHUNK = 2000;

function chunks<T>(items: readonly T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

async function column(ex: Executor, table: string, select: string, where: string, value: string): Promise<Set<string>> {
  const rows = await ex.selectFrom(table).select(select).where(where, '=', value).execute();
  return new Set(rows.map((r) => String(r[select])));
}

/** The given ids that exist in the table. */
export async function existingIds(ex: Executor, table: string, ids: readonly string[]): Promise<Set<string>> {
  const out = new Set<string>();
  for (const part of chunks([...new Set(ids)])) {
    const rows = await ex.selectFrom(table).select('id').where('id', 'in', part).execute();
    for (const r of rows) out.add(String(r.id));
  }
  return out;
}

function difference(a: ReadonlySet<string>, b: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const x of a) if (!b.has(x)) out.push(x);
  return out;
}

/** Makes the rows (fixedColumn = fixed, otherColumn ∈ want) of a link table exactly `want`. */
async function syncRows(
  tx: Tx,
  table: string,
  fixedColumn: string,
  fixed: string,
  otherColumn: string,
  want: ReadonlySet<string>,
  have: ReadonlySet<string>,
): Promise<void> {
  const remove = difference(have, want);
  const add = difference(want, have);
  for (const part of chunks(remove)) {
    await tx.deleteFrom(table).where(fixedColumn, '=', fixed).where(otherColumn, 'in', part).execute();
  }
  // Stryker: any chunk size under SQLite's bound on parameters writes the same rows.
  for (const part of chunks(add, CHUNK / 2)) {
    await tx
      .insertInto(table)
      .values(part.map((other) => ({ [fixedColumn]: fixed, [otherColumn]: other })))
      .execute();
  }
}

/** Ids of the entities of `kind` a role list selects under the semantic. */
export async function entitiesMatching(
  ex: Executor,
  kind: RoleKind,
  semantic: string,
  roles: ParsedRoles,
): Promise<Set<string>> {
  const table = roleKindOf(kind).table;
  if (roles.all) return new Set((await ex.selectFrom(table).select('id').execute()).map((r) => String(r.id)));
  const out = await existingIds(ex, table, roles.ids);
  const attributes = roles.attributes;
  if (attributes.length === 0) return out;
  // A plain range read of the primary key (kind, attribute, entity_id); counting (AllOf) and
  // de-duplicating (AnyOf) happen here, because a GROUP BY or DISTINCT lures SQLite, without
  // statistics, into walking every row of the kind through the (kind, entity_id) index for order.
  const rows = await ex
    .selectFrom('role_attribute_index')
    .select('entity_id')
    .where('kind', '=', kind)
    .where('attribute', 'in', attributes)
    .execute();
  // Stryker: with one attribute, counting to one selects the same entities; the test only saves the map.
  if (semantic === 'AnyOf' || attributes.length === 1) {
    for (const r of rows) out.add(String(r.entity_id));
    return out;
  }
  // Rows are distinct per (kind, attribute, entity), so carrying all n attributes means n rows.
  const counts = new Map<string, number>();
  for (const r of rows) {
    const id = String(r.entity_id);
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  for (const [id, n] of counts) if (n === attributes.length) out.add(id);
  return out;
}

/**
 * Makes the index rows of one entity exactly its attributes: all of them are replaced (a handful of
 * rows). Neither reading them nor a delete that names `attribute` is used, because SQLite without
 * statistics plans both as a scan of every row of the kind through the covering primary key instead
 * of the (kind, entity_id) index; a delete by (kind, entity_id) alone uses that index.
 */
async function syncAttributeIndex(tx: Tx, kind: RoleKind, entityId: string, attributes: readonly string[]): Promise<void> {
  await tx.deleteFrom('role_attribute_index').where('kind', '=', kind).where('entity_id', '=', entityId).execute();
  // Stryker: any chunk size under SQLite's bound on parameters writes the same rows.
  for (const part of chunks(attributes, CHUNK / 3)) {
    await tx
      .insertInto('role_attribute_index')
      .values(part.map((attribute) => ({ kind, attribute, entity_id: entityId })))
      .execute();
  }
}

function attributesOf(entity: Entity): Set<string> {
  const value = entity.roleAttributes;
  return new Set(Array.isArray(value) ? value.map(String) : []);
}

// ---- the operations ----------------------------------------------------------------------------

/**
 * The link maintenance of one controller, over its policy index. The index is a cache like the
 * others: it follows policy changes through the feed and a reset makes the next write reload it.
 */
export class PolicyLinks implements Cache {
  readonly name = 'policy-index';
  private readonly index: PolicyIndex;

  /** `observe` is told how long each recomputation took, in seconds (metrics). */
  constructor(
    dialect: Dialect,
    private readonly observe?: (trigger: 'policy' | 'entity', seconds: number) => void,
  ) {
    this.index = new PolicyIndex(dialect);
  }

  onChange(change: Change): void {
    const collection = change.collection;
    if (!isPolicyCollection(collection)) return;
    markStale(this.index.stale, collection, change.id);
  }

  reset(): void {
    this.index.loaded = false;
  }

  /** The index as `ctx`'s transaction may use it. */
  private async indexFor(ctx: LinkContext): Promise<PolicyIndex> {
    const index = this.index;
    if (!index.loaded || (index.owner !== undefined && index.owner !== ctx.tx)) {
      // What this transaction sees may include its own uncommitted writes, so the result is its own.
      claim(index, ctx);
      await index.load(ctx.tx);
      return index;
    }
    index.settle(ctx);
    if (index.stale.size > 0) {
      // Stryker: a stale policy this transaction has not changed reads as committed; one it has changed,
      // change() claimed for. The claim matters to transactions that run at once, as in change().
      claim(index, ctx);
      await index.refresh(ctx.tx);
    }
    return index;
  }

  /**
   * Makes every link row of `policy` (as just written) exactly the entities its role lists select,
   * and records its role lists in the policy index. Call after writing the policy row.
   */
  async refreshPolicyLinks(ctx: LinkContext, collection: PolicyCollection, policy: Entity): Promise<void> {
    const began = performance.now();
    const spec = policySpecOf(collection);
    const index = await this.indexFor(ctx);
    change(index, ctx, collection, policy.id, policy);
    const semantic = String(policy.semantic);
    for (const l of spec.lists) {
      const want = await entitiesMatching(ctx.tx, l.kind, semantic, parseRoles(policy[l.field] as string[] | null));
      const have = await column(ctx.tx, l.linkTable, l.linkColumn, 'policy_id', policy.id);
      await syncRows(ctx.tx, l.linkTable, 'policy_id', policy.id, l.linkColumn, want, have);
    }
    this.observe?.('policy', (performance.now() - began) / 1000);
  }

  /**
   * Forgets a deleted policy. Its link rows go with it (foreign keys cascade); call after deleting it
   * so later entity writes do not select it.
   */
  async forgetPolicy(ctx: LinkContext, collection: PolicyCollection, policyId: string): Promise<void> {
    const index = await this.indexFor(ctx);
    change(index, ctx, collection, policyId, undefined);
  }

  /**
   * Makes the role attribute index rows of `entity` (as just written) its role attributes, and its
   * link rows exactly the policies that select it.
   */
  async refreshEntityLinks(ctx: LinkContext, kind: RoleKind, entity: Entity): Promise<void> {
    const began = performance.now();
    const attributes = attributesOf(entity);
    await syncAttributeIndex(ctx.tx, kind, entity.id, [...attributes]);

    const index = await this.indexFor(ctx);
    // Stryker: every role kind has lists (relations derive the kinds from them); `?? []` is a guard.
    for (const l of LISTS_OF_KIND[kind] ?? []) {
      const want = index.matching(l, entity.id, attributes);
      const current = await column(ctx.tx, l.linkTable, 'policy_id', l.linkColumn, entity.id);
      const added = difference(want, current);
      // Stryker: existingIds of no ids reads nothing, so the test only skips an empty loop.
      if (added.length > 0) {
        // Guards against a policy row removed without forgetPolicy: it must not be linked (nor fail
        // the write on its foreign key), and the index drops it.
        const present = await existingIds(ctx.tx, policySpecOf(l.collection).table, added);
        for (const p of added) {
          if (present.has(p)) continue;
          change(index, ctx, l.collection, p, undefined);
          want.delete(p);
        }
      }
      await syncRows(ctx.tx, l.linkTable, l.linkColumn, entity.id, 'policy_id', want, current);
    }
    this.observe?.('entity', (performance.now() - began) / 1000);
  }

  /** The role lists that name an entity as `@id`: each with its policy. */
  async naming(ctx: LinkContext, kind: RoleKind, entityId: string): Promise<{ list: RoleListSpec; policyId: string }[]> {
    const index = await this.indexFor(ctx);
    // Stryker: every role kind has lists (relations derive the kinds from them); `?? []` is a guard.
    return (LISTS_OF_KIND[kind] ?? []).flatMap((list) => index.naming(list, entityId).map((policyId) => ({ list, policyId })));
  }

  /** Drops the role attribute index rows of a deleted entity (its link rows cascade). */
  async forgetEntity(ctx: LinkContext, kind: RoleKind, entityId: string): Promise<void> {
    await ctx.tx.deleteFrom('role_attribute_index').where('kind', '=', kind).where('entity_id', '=', entityId).execute();
  }
}
