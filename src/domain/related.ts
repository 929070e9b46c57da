// Related lists (`/<collection>/{id}/<related>`) and the role attribute lists, read from the policy
// link tables the policy engine keeps exact, the other link tables, references and the role
// attribute index. A related list is the related resource's own list narrowed by a scope (a reference
// equal to the entity's id, or an `id in (subquery)` over link tables), so a filter can narrow it but
// never widen it, and "what identity I reaches" is an indexed join, never a materialised identity ×
// service table. Which lists exist, and over what, is what the resource definitions declare
// (resources/relations.ts).
import { sql, type Expression, type RawBuilder, type SqlBool } from 'kysely';
import { fieldError } from '../errors.js';
import type { FilterSpec } from '../resources/kit.js';
import {
  LISTS_OF_KIND,
  policySpecOf,
  RELATED_LISTS,
  roleListOf,
  ROLE_KINDS,
  type RelatedSpec,
  type RoleKind,
  type RoleListSpec,
} from '../resources/relations.js';
import { tableOf } from '../resources/index.js';
import type { ListQuery } from '../store/repository.js';
import type { Executor } from '../store/store.js';
import type { Resources } from './resources.js';

export type PolicyType = 'Dial' | 'Bind';

/** One policy link table: which policies match which entities of one kind. */
interface LinkTable {
  table: string;
  /** The entity column; the policy column is always `policy_id`. */
  column: string;
}

const link = (l: RoleListSpec): LinkTable => ({ table: l.linkTable, column: l.linkColumn });

const col = (alias: string, column: string) => sql.ref(`${alias}.${column}`);

/** Ids of the entities a policy matches. */
export function policyMembers(link: LinkTable, policyId: string): RawBuilder<unknown> {
  return sql`select ${col('l', link.column)} from ${sql.table(link.table)} as l where ${col('l', 'policy_id')} = ${policyId}`;
}

/** Ids of the policies that match an entity. */
export function entityPolicies(link: LinkTable, entityId: string): RawBuilder<unknown> {
  return sql`select ${col('l', 'policy_id')} from ${sql.table(link.table)} as l where ${col('l', link.column)} = ${entityId}`;
}

/**
 * Ids of the entities on the `to` side of the policies matching `entityId` on the `from` side (both
 * link tables belong to the same kind of policy). With `only`, only the policies (of that table) of
 * that type: the links are read through the policy-first primary keys and the reverse indexes only.
 */
export function reachable(
  from: LinkTable,
  to: LinkTable,
  entityId: string,
  only?: { policyTable: string; type: PolicyType },
): RawBuilder<unknown> {
  const typed =
    only === undefined
      ? sql``
      : sql`join ${sql.table(only.policyTable)} as p on ${col('p', 'id')} = ${col('a', 'policy_id')} and ${col('p', 'type')} = ${only.type} `;
  return sql`select ${col('b', to.column)} from ${sql.table(from.table)} as a ${typed}join ${sql.table(to.table)} as b on ${col('b', 'policy_id')} = ${col('a', 'policy_id')} where ${col('a', from.column)} = ${entityId}`;
}

/** `<table>.id in (<ids>)`: the scope of a related list. */
export function idIn(table: string, ids: RawBuilder<unknown>): Expression<SqlBool> {
  return sql<SqlBool>`${sql.ref(`${table}.id`)} in (${ids})`;
}

/** One related list: the resource `child` reached from an entity of `parent`. */
export interface Relation {
  parent: string;
  /** The path segment after `/<parent>/{id}/`. */
  sub: string;
  child: string;
  operationId: string;
  /** The permission group whose read the list takes; null: administrators only. */
  permission: string | null;
  /** Takes `policyType=dial|bind`. */
  policyType?: boolean;
  /** The entities of `child` related to `parentId`: the scope of the child's list. */
  scope(parentId: string, type?: PolicyType): Expression<SqlBool>;
}

function scopeOf(spec: RelatedSpec): Relation['scope'] {
  const table = tableOf(spec.child);
  switch (spec.via) {
    case 'reference': {
      const column = sql.ref(`${table}.${spec.column}`);
      return (id) => sql<SqlBool>`${column} = ${id}`;
    }
    case 'link': {
      const { parentColumn, childColumn } = spec;
      const linkTable = sql.table(spec.link.table);
      return (id) => idIn(table, sql`select ${col('l', childColumn)} from ${linkTable} as l where ${col('l', parentColumn)} = ${id}`);
    }
    case 'policies':
      return (id) => idIn(table, entityPolicies(link(spec.list), id));
    case 'members':
      return (id) => idIn(table, policyMembers(link(spec.list), id));
    case 'policy': {
      const policyTable = policySpecOf(spec.from.collection).table;
      return (id, type) =>
        idIn(table, reachable(link(spec.from), link(spec.to), id, spec.policyType && type ? { policyTable, type } : undefined));
    }
  }
}

/** Every related list the definitions declare. */
export const RELATIONS: readonly Relation[] = RELATED_LISTS.map((spec) => ({
  parent: spec.parent,
  sub: spec.child,
  child: spec.child,
  operationId: spec.operationId,
  permission: spec.permission,
  ...(spec.policyType ? { policyType: true } : {}),
  scope: scopeOf(spec),
}));

/** The related list `/<parent>/{id}/<sub>`; throws for one the definitions do not declare. */
export function relationOf(parent: string, sub: string): Relation {
  const found = RELATIONS.find((r) => r.parent === parent && r.sub === sub);
  if (!found) throw new Error(`related: no related list ${parent}/${sub}`);
  return found;
}

/** `policyType` of a related list: dial or bind (any case); absent means either. */
export function parsePolicyType(raw: unknown): PolicyType | undefined {
  if (raw === undefined) return undefined;
  const value = typeof raw === 'string' ? raw.toLowerCase() : undefined;
  if (value === 'dial') return 'Dial';
  if (value === 'bind') return 'Bind';
  throw fieldError('policyType', 'must be dial or bind', Array.isArray(raw) ? raw.map(String).join(',') : String(raw).slice(0, 64));
}

// ---- policy advice ----------------------------------------------------------------------------

const servicePolicyIdentities = link(roleListOf('service-policies', 'identities'));
const servicePolicyServices = link(roleListOf('service-policies', 'services'));
const edgeRouterPolicyIdentities = link(roleListOf('edge-router-policies', 'identities'));
const edgeRouterPolicyEdgeRouters = link(roleListOf('edge-router-policies', 'edge-routers'));
const serviceEdgeRouterPolicyServices = link(roleListOf('service-edge-router-policies', 'services'));
const serviceEdgeRouterPolicyEdgeRouters = link(roleListOf('service-edge-router-policies', 'edge-routers'));

/** Whether service policies of each type link the identity and the service. */
export async function accessTypes(ex: Executor, identityId: string, serviceId: string): Promise<Set<PolicyType>> {
  const i = servicePolicyIdentities;
  const s = servicePolicyServices;
  const { rows } = await sql<{ type: string }>`
    select distinct ${col('p', 'type')} as type
    from ${sql.table(i.table)} as i
    join ${sql.table(s.table)} as s on ${col('s', 'policy_id')} = ${col('i', 'policy_id')} and ${col('s', s.column)} = ${serviceId}
    join ${sql.table(policySpecOf('service-policies').table)} as p on ${col('p', 'id')} = ${col('i', 'policy_id')}
    where ${col('i', i.column)} = ${identityId}`.execute(ex);
  return new Set(rows.map((r) => r.type).filter((t): t is PolicyType => t === 'Dial' || t === 'Bind'));
}

/** Edge routers an identity may use (edge router policies), as a subquery of ids. */
export function identityEdgeRouters(identityId: string): RawBuilder<unknown> {
  return reachable(edgeRouterPolicyIdentities, edgeRouterPolicyEdgeRouters, identityId);
}

/** Edge routers that may carry a service (service edge router policies), as a subquery of ids. */
export function serviceEdgeRouters(serviceId: string): RawBuilder<unknown> {
  return reachable(serviceEdgeRouterPolicyServices, serviceEdgeRouterPolicyEdgeRouters, serviceId);
}

/** The number of distinct ids a subquery yields. */
export async function countDistinct(ex: Executor, ids: RawBuilder<unknown>): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*) as n from (select distinct * from (${ids}) as x) as d`.execute(ex);
  return Number(rows[0]?.n ?? 0);
}

// ---- role attribute lists ----------------------------------------------------------------------

/** A policy role list that can name `#attribute`s of a kind. */
export interface RoleSource {
  /** The policy collection. */
  collection: string;
  /** The usage key: the policy collection in camel case, as the established controller names it. */
  source: string;
  table: string;
  /** The role list column. */
  column: string;
}

export interface RoleAttributeKind {
  kind: RoleKind;
  /** Path prefix: `/<prefix>-role-attributes`, `/<prefix>-role-attribute-usage`. */
  prefix: string;
  /** Operation name part: `list<Name>RoleAttributes`, `list<Name>RoleAttributeUsage`. */
  name: string;
  /** The permission group whose read is required. */
  group: string;
  /** The entity collection carrying the attributes. */
  collection: string;
  /** Its usage key: the collection in camel case. */
  source: string;
  policies: readonly RoleSource[];
}

const pascal = (kind: string) => kind.replace(/(^|-)([a-z])/g, (_m, _dash, c: string) => c.toUpperCase());
const camel = (collection: string) => pascal(collection).replace(/^[A-Z]/, (c) => c.toLowerCase());

/** One per kind of entity role lists select, with the role lists that select it. */
export const ROLE_ATTRIBUTE_KINDS: readonly RoleAttributeKind[] = Object.values(ROLE_KINDS).map((k) => ({
  kind: k.kind,
  prefix: k.kind,
  name: pascal(k.kind),
  group: k.permission,
  collection: k.collection,
  source: camel(k.collection),
  policies: (LISTS_OF_KIND[k.kind] ?? []).map((l) => ({
    collection: l.collection,
    source: camel(l.collection),
    table: policySpecOf(l.collection).table,
    column: l.column,
  })),
}));

/** Filter and sort of the role attribute lists: the one symbol `id` is the attribute. */
export const ROLE_ATTRIBUTE_FILTER: FilterSpec = {
  symbols: new Map([['id', { name: 'id', type: 'string', column: 'ra.attribute' }]]),
  sortable: new Set(['id']),
  fields: ['id'],
};

type AttributeTable = ReturnType<typeof carriedAttributes>;

/** The distinct attributes entities of `kind` carry, as a table `ra` of one column `attribute`. */
function carriedAttributes(resources: Resources, kind: RoleKind) {
  return resources.store.db.selectFrom('role_attribute_index as ra').where('ra.kind', '=', kind).select('ra.attribute');
}

/** A page of the distinct attributes of a table, filtered and sorted, and how many there are. */
async function pageOfAttributes(
  table: () => AttributeTable,
  q: Omit<ListQuery, 'scope'>,
): Promise<{ items: string[]; total: number }> {
  const attributes = () => (q.where ? table().where(q.where) : table());
  const counted = await attributes()
    .clearSelect()
    .select(sql<number>`count(distinct ${sql.ref('ra.attribute')})`.as('n'))
    .executeTakeFirstOrThrow();
  const direction = q.sort.find((s) => s.field === 'id')?.direction ?? 'asc';
  let page = attributes().distinct().orderBy('ra.attribute', direction);
  if (q.limit !== null) page = page.limit(q.limit);
  if (q.offset > 0) page = q.limit === null ? page.limit(-1).offset(q.offset) : page.offset(q.offset);
  const rows = await page.execute();
  return { items: rows.map((r) => String(r.attribute)), total: Number(counted.n) };
}

/** A page of the distinct attributes entities of `kind` carry, and how many there are. */
export function listRoleAttributes(
  resources: Resources,
  kind: RoleKind,
  q: Omit<ListQuery, 'scope'>,
): Promise<{ items: string[]; total: number }> {
  return pageOfAttributes(() => carriedAttributes(resources, kind), q);
}

/**
 * A page of the attributes of the usage list, and how many there are: those entities of the kind
 * carry united with those the kind's policy role lists name (`#<attribute>`; `#all` names none), as
 * the established controller lists them, so an attribute only a policy names (a typo, a dangling
 * reference) shows. The filter, sort and paging apply to the union.
 */
export function listUsedRoleAttributes(
  resources: Resources,
  spec: RoleAttributeKind,
  q: Omit<ListQuery, 'scope'>,
): Promise<{ items: string[]; total: number }> {
  const { db, dialect } = resources.store;
  const named = spec.policies.map((source) => {
    const { from, element } = dialect.flavor.arrayElements(sql.ref(`p.${source.column}`), 'e');
    return sql`select substr(${element}, 2) from ${sql.table(source.table)} as p cross join ${from}
      where substr(${element}, 1, 1) = '#' and ${element} <> '#all'`;
  });
  // Written out, not carriedAttributes(): a nested query builder is parenthesised, which SQLite
  // refuses as a part of a union.
  const carried = sql`select ${sql.ref('attribute')} from ${sql.table('role_attribute_index')}
    where ${sql.ref('kind')} = ${spec.kind}`;
  const union = sql<{ attribute: string }>`(${sql.join([carried, ...named], sql` union `)})`;
  return pageOfAttributes(() => db.selectFrom(union.as('ra')).select('ra.attribute'), q);
}

export interface Usage {
  count: number;
  ids?: string[];
}

export interface RoleAttributeUsage {
  roleAttribute: string;
  /** Per source (the entities, then the kinds of policy, camel case): only sources that refer to it. */
  usage: Record<string, Usage>;
}

/**
 * Usage of a page of attributes: the entities carrying each one (from the index) and the policies
 * whose role lists name `#<attribute>` (`#all` names no attribute). Sources with no use are left out.
 */
export async function roleAttributeUsage(
  resources: Resources,
  spec: RoleAttributeKind,
  attributes: readonly string[],
  withIds: boolean,
): Promise<RoleAttributeUsage[]> {
  const { store } = resources;
  const ex = store.db;
  const usage = new Map<string, Map<string, string[] | number>>(attributes.map((a) => [a, new Map()]));
  if (attributes.length === 0) return [];

  if (withIds) {
    const rows = await ex
      .selectFrom('role_attribute_index')
      .select(['attribute', 'entity_id'])
      .where('kind', '=', spec.kind)
      .where('attribute', 'in', attributes)
      .orderBy('attribute')
      .orderBy('entity_id')
      .execute();
    for (const r of rows) {
      const m = usage.get(String(r.attribute))!;
      const ids = (m.get(spec.source) as string[] | undefined) ?? [];
      ids.push(String(r.entity_id));
      m.set(spec.source, ids);
    }
  } else {
    const rows = await ex
      .selectFrom('role_attribute_index')
      .select(['attribute', sql<number>`count(*)`.as('n')])
      .where('kind', '=', spec.kind)
      .where('attribute', 'in', attributes)
      .groupBy('attribute')
      .execute();
    for (const r of rows) usage.get(String(r.attribute))!.set(spec.source, Number(r.n));
  }

  const roles = attributes.map((a) => `#${a}`);
  const flavor = store.dialect.flavor;
  for (const source of spec.policies) {
    const column = sql.ref(`${source.table}.${source.column}`);
    const rows = await ex
      .selectFrom(source.table)
      .select(['id', sql`${column}`.as('roles')])
      .where(flavor.arraySome(column, (element) => sql<SqlBool>`${element} in (${sql.join(roles)})`))
      .orderBy('id')
      .execute();
    for (const row of rows) {
      const named = store.dialect.fromDb('json', row.roles);
      if (!Array.isArray(named)) continue;
      for (const role of new Set(named)) {
        if (typeof role !== 'string' || !role.startsWith('#') || role === '#all') continue;
        const m = usage.get(role.slice(1));
        if (!m) continue;
        const ids = (m.get(source.source) as string[] | undefined) ?? [];
        ids.push(String(row.id));
        m.set(source.source, ids);
      }
    }
  }

  return attributes.map((attribute) => {
    const out: Record<string, Usage> = {};
    for (const [source, value] of usage.get(attribute)!) {
      out[source] = typeof value === 'number' ? { count: value } : withIds ? { count: value.length, ids: value } : { count: value.length };
    }
    return { roleAttribute: attribute, usage: out };
  });
}
