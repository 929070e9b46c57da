// Related lists (`/<collection>/{id}/<related>`) and the role attribute lists, read from the policy
// link tables the policy engine keeps exact and from the role attribute index. A related list is the
// related resource's own list narrowed by a scope: an `id in (subquery)` over the link tables, so a
// filter can narrow it but never widen it, and "what identity I reaches" is an indexed join, never a
// materialised identity × service table.
import { sql, type Expression, type RawBuilder, type SqlBool } from 'kysely';
import { fieldError } from '../errors.js';
import type { FilterSpec } from '../resources/kit.js';
import type { ListQuery } from '../store/repository.js';
import type { Executor, Store } from '../store/store.js';

export type PolicyType = 'Dial' | 'Bind';

/** One policy link table: which policies match which entities of one kind. */
interface LinkTable {
  table: string;
  /** The entity column; the policy column is always `policy_id`. */
  column: string;
}

const LINK = {
  servicePolicyIdentities: { table: 'service_policy_identities', column: 'identity_id' },
  servicePolicyServices: { table: 'service_policy_services', column: 'service_id' },
  servicePolicyPostureChecks: { table: 'service_policy_posture_checks', column: 'posture_check_id' },
  edgeRouterPolicyIdentities: { table: 'edge_router_policy_identities', column: 'identity_id' },
  edgeRouterPolicyEdgeRouters: { table: 'edge_router_policy_edge_routers', column: 'edge_router_id' },
  serviceEdgeRouterPolicyServices: { table: 'service_edge_router_policy_services', column: 'service_id' },
  serviceEdgeRouterPolicyEdgeRouters: { table: 'service_edge_router_policy_edge_routers', column: 'edge_router_id' },
} as const satisfies Record<string, LinkTable>;

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
 * link tables belong to the same kind of policy). With `type`, only service policies of that type:
 * the links are read through the policy-first primary keys and the reverse indexes only.
 */
export function reachable(from: LinkTable, to: LinkTable, entityId: string, type?: PolicyType): RawBuilder<unknown> {
  const typed =
    type === undefined
      ? sql``
      : sql`join ${sql.table('service_policies')} as p on ${col('p', 'id')} = ${col('a', 'policy_id')} and ${col('p', 'type')} = ${type} `;
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
  /** Takes `policyType=dial|bind`. */
  policyType?: boolean;
  /** The child ids related to `parentId`, as a subquery. */
  ids(parentId: string, type?: PolicyType): RawBuilder<unknown>;
}

const L = LINK;

export const RELATIONS: readonly Relation[] = [
  // identities
  {
    parent: 'identities',
    sub: 'edge-router-policies',
    child: 'edge-router-policies',
    operationId: 'listIdentitysEdgeRouterPolicies',
    ids: (id) => entityPolicies(L.edgeRouterPolicyIdentities, id),
  },
  {
    parent: 'identities',
    sub: 'edge-routers',
    child: 'edge-routers',
    operationId: 'listIdentityEdgeRouters',
    ids: (id) => reachable(L.edgeRouterPolicyIdentities, L.edgeRouterPolicyEdgeRouters, id),
  },
  {
    parent: 'identities',
    sub: 'service-policies',
    child: 'service-policies',
    operationId: 'listIdentityServicePolicies',
    ids: (id) => entityPolicies(L.servicePolicyIdentities, id),
  },
  {
    parent: 'identities',
    sub: 'services',
    child: 'services',
    operationId: 'listIdentityServices',
    policyType: true,
    ids: (id, type) => reachable(L.servicePolicyIdentities, L.servicePolicyServices, id, type),
  },
  // services
  {
    parent: 'services',
    sub: 'edge-routers',
    child: 'edge-routers',
    operationId: 'listServiceEdgeRouters',
    ids: (id) => reachable(L.serviceEdgeRouterPolicyServices, L.serviceEdgeRouterPolicyEdgeRouters, id),
  },
  {
    parent: 'services',
    sub: 'identities',
    child: 'identities',
    operationId: 'listServiceIdentities',
    policyType: true,
    ids: (id, type) => reachable(L.servicePolicyServices, L.servicePolicyIdentities, id, type),
  },
  {
    parent: 'services',
    sub: 'service-edge-router-policies',
    child: 'service-edge-router-policies',
    operationId: 'listServiceServiceEdgeRouterPolicies',
    ids: (id) => entityPolicies(L.serviceEdgeRouterPolicyServices, id),
  },
  {
    parent: 'services',
    sub: 'service-policies',
    child: 'service-policies',
    operationId: 'listServiceServicePolicies',
    ids: (id) => entityPolicies(L.servicePolicyServices, id),
  },
  // edge routers
  {
    parent: 'edge-routers',
    sub: 'edge-router-policies',
    child: 'edge-router-policies',
    operationId: 'listEdgeRouterEdgeRouterPolicies',
    ids: (id) => entityPolicies(L.edgeRouterPolicyEdgeRouters, id),
  },
  {
    parent: 'edge-routers',
    sub: 'identities',
    child: 'identities',
    operationId: 'listEdgeRouterIdentities',
    ids: (id) => reachable(L.edgeRouterPolicyEdgeRouters, L.edgeRouterPolicyIdentities, id),
  },
  {
    parent: 'edge-routers',
    sub: 'service-edge-router-policies',
    child: 'service-edge-router-policies',
    operationId: 'listEdgeRouterServiceEdgeRouterPolicies',
    ids: (id) => entityPolicies(L.serviceEdgeRouterPolicyEdgeRouters, id),
  },
  {
    parent: 'edge-routers',
    sub: 'services',
    child: 'services',
    operationId: 'listEdgeRouterServices',
    ids: (id) => reachable(L.serviceEdgeRouterPolicyEdgeRouters, L.serviceEdgeRouterPolicyServices, id),
  },
  // policy members
  {
    parent: 'edge-router-policies',
    sub: 'edge-routers',
    child: 'edge-routers',
    operationId: 'listEdgeRouterPolicyEdgeRouters',
    ids: (id) => policyMembers(L.edgeRouterPolicyEdgeRouters, id),
  },
  {
    parent: 'edge-router-policies',
    sub: 'identities',
    child: 'identities',
    operationId: 'listEdgeRouterPolicyIdentities',
    ids: (id) => policyMembers(L.edgeRouterPolicyIdentities, id),
  },
  {
    parent: 'service-edge-router-policies',
    sub: 'edge-routers',
    child: 'edge-routers',
    operationId: 'listServiceEdgeRouterPolicyEdgeRouters',
    ids: (id) => policyMembers(L.serviceEdgeRouterPolicyEdgeRouters, id),
  },
  {
    parent: 'service-edge-router-policies',
    sub: 'services',
    child: 'services',
    operationId: 'listServiceEdgeRouterPolicyServices',
    ids: (id) => policyMembers(L.serviceEdgeRouterPolicyServices, id),
  },
  {
    parent: 'service-policies',
    sub: 'identities',
    child: 'identities',
    operationId: 'listServicePolicyIdentities',
    ids: (id) => policyMembers(L.servicePolicyIdentities, id),
  },
  {
    parent: 'service-policies',
    sub: 'posture-checks',
    child: 'posture-checks',
    operationId: 'listServicePolicyPostureChecks',
    ids: (id) => policyMembers(L.servicePolicyPostureChecks, id),
  },
  {
    parent: 'service-policies',
    sub: 'services',
    child: 'services',
    operationId: 'listServicePolicyServices',
    ids: (id) => policyMembers(L.servicePolicyServices, id),
  },
];

/** `policyType` of a related list: dial or bind (any case); absent means either. */
export function parsePolicyType(raw: unknown): PolicyType | undefined {
  if (raw === undefined) return undefined;
  const value = typeof raw === 'string' ? raw.toLowerCase() : undefined;
  if (value === 'dial') return 'Dial';
  if (value === 'bind') return 'Bind';
  throw fieldError('policyType', 'must be dial or bind', Array.isArray(raw) ? raw.map(String).join(',') : String(raw).slice(0, 64));
}

// ---- policy advice ----------------------------------------------------------------------------

/** Whether service policies of each type link the identity and the service. */
export async function accessTypes(ex: Executor, identityId: string, serviceId: string): Promise<Set<PolicyType>> {
  const { rows } = await sql<{ type: string }>`
    select distinct ${col('p', 'type')} as type
    from ${sql.table(L.servicePolicyIdentities.table)} as i
    join ${sql.table(L.servicePolicyServices.table)} as s on ${col('s', 'policy_id')} = ${col('i', 'policy_id')} and ${col('s', 'service_id')} = ${serviceId}
    join ${sql.table('service_policies')} as p on ${col('p', 'id')} = ${col('i', 'policy_id')}
    where ${col('i', 'identity_id')} = ${identityId}`.execute(ex);
  return new Set(rows.map((r) => r.type).filter((t): t is PolicyType => t === 'Dial' || t === 'Bind'));
}

/** Edge routers an identity may use (edge router policies), as a subquery of ids. */
export function identityEdgeRouters(identityId: string): RawBuilder<unknown> {
  return reachable(L.edgeRouterPolicyIdentities, L.edgeRouterPolicyEdgeRouters, identityId);
}

/** Edge routers that may carry a service (service edge router policies), as a subquery of ids. */
export function serviceEdgeRouters(serviceId: string): RawBuilder<unknown> {
  return reachable(L.serviceEdgeRouterPolicyServices, L.serviceEdgeRouterPolicyEdgeRouters, serviceId);
}

/** The number of distinct ids a subquery yields. */
export async function countDistinct(ex: Executor, ids: RawBuilder<unknown>): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*) as n from (select distinct * from (${ids}) as x) as d`.execute(ex);
  return Number(rows[0]?.n ?? 0);
}

// ---- role attribute lists ----------------------------------------------------------------------

export type RoleKind = 'identity' | 'service' | 'edge-router' | 'posture-check';

/** A policy role list that can name `#attribute`s of a kind. */
export interface RoleSource {
  /** The usage key: the policy collection. */
  collection: string;
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
  /** The entity collection carrying the attributes (the usage key). */
  collection: string;
  policies: readonly RoleSource[];
}

const SP = 'service-policies';
const ERP = 'edge-router-policies';
const SERP = 'service-edge-router-policies';

export const ROLE_ATTRIBUTE_KINDS: readonly RoleAttributeKind[] = [
  {
    kind: 'identity',
    prefix: 'identity',
    name: 'Identity',
    group: 'identity',
    collection: 'identities',
    policies: [
      { collection: SP, table: 'service_policies', column: 'identity_roles' },
      { collection: ERP, table: 'edge_router_policies', column: 'identity_roles' },
    ],
  },
  {
    kind: 'service',
    prefix: 'service',
    name: 'Service',
    group: 'service',
    collection: 'services',
    policies: [
      { collection: SP, table: 'service_policies', column: 'service_roles' },
      { collection: SERP, table: 'service_edge_router_policies', column: 'service_roles' },
    ],
  },
  {
    kind: 'edge-router',
    prefix: 'edge-router',
    name: 'EdgeRouter',
    group: 'router',
    collection: 'edge-routers',
    policies: [
      { collection: ERP, table: 'edge_router_policies', column: 'edge_router_roles' },
      { collection: SERP, table: 'service_edge_router_policies', column: 'edge_router_roles' },
    ],
  },
  {
    kind: 'posture-check',
    prefix: 'posture-check',
    name: 'PostureCheck',
    group: 'posture-check',
    collection: 'posture-checks',
    policies: [{ collection: SP, table: 'service_policies', column: 'posture_check_roles' }],
  },
];

/** Filter and sort of the role attribute lists: the one symbol `id` is the attribute. */
export const ROLE_ATTRIBUTE_FILTER: FilterSpec = {
  symbols: new Map([['id', { name: 'id', type: 'string', column: 'ra.attribute' }]]),
  sortable: new Set(['id']),
  fields: ['id'],
};

function attributesOfKind(ex: Executor, kind: RoleKind, where: Expression<SqlBool> | undefined) {
  let q = ex.selectFrom('role_attribute_index as ra').where('ra.kind', '=', kind);
  if (where) q = q.where(where);
  return q;
}

/** A page of the distinct attributes carried by entities of `kind`, and how many there are. */
export async function listRoleAttributes(
  ex: Executor,
  kind: RoleKind,
  q: Omit<ListQuery, 'scope'>,
): Promise<{ items: string[]; total: number }> {
  const counted = await attributesOfKind(ex, kind, q.where)
    .select(sql<number>`count(distinct ${sql.ref('ra.attribute')})`.as('n'))
    .executeTakeFirstOrThrow();
  const direction = q.sort.find((s) => s.field === 'id')?.direction ?? 'asc';
  let page = attributesOfKind(ex, kind, q.where).select('ra.attribute as attribute').distinct().orderBy('ra.attribute', direction);
  if (q.limit !== null) page = page.limit(q.limit);
  if (q.offset > 0) page = q.limit === null ? page.limit(-1).offset(q.offset) : page.offset(q.offset);
  const rows = await page.execute();
  return { items: rows.map((r) => String(r.attribute)), total: Number(counted.n) };
}

export interface Usage {
  count: number;
  ids?: string[];
}

export interface RoleAttributeUsage {
  roleAttribute: string;
  /** Per source (the entity collection, then policy collections): only sources that refer to it. */
  usage: Record<string, Usage>;
}

/**
 * Usage of a page of attributes: the entities carrying each one (from the index) and the policies
 * whose role lists name `#<attribute>` (`#all` names no attribute). Sources with no use are left out.
 */
export async function roleAttributeUsage(
  store: Store,
  spec: RoleAttributeKind,
  attributes: readonly string[],
  withIds: boolean,
): Promise<RoleAttributeUsage[]> {
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
      const ids = (m.get(spec.collection) as string[] | undefined) ?? [];
      ids.push(String(r.entity_id));
      m.set(spec.collection, ids);
    }
  } else {
    const rows = await ex
      .selectFrom('role_attribute_index')
      .select(['attribute', sql<number>`count(*)`.as('n')])
      .where('kind', '=', spec.kind)
      .where('attribute', 'in', attributes)
      .groupBy('attribute')
      .execute();
    for (const r of rows) usage.get(String(r.attribute))!.set(spec.collection, Number(r.n));
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
        const ids = (m.get(source.collection) as string[] | undefined) ?? [];
        ids.push(String(row.id));
        m.set(source.collection, ids);
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
