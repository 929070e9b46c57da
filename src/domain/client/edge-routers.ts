// Edge routers as clients see them: the answer shape (how to reach a router, nothing of its
// enrollment), the fields a client may filter and sort by, the scopes of the edge routers an
// identity may use, for any service or for one, and a page of them in that shape: list items for
// the caller's edge routers, one object holding them for a service's (the established answer).
import { sql, type SqlBool } from 'kysely';
import { Type } from '@sinclair/typebox';
import { filterSpec, type FilterSpec } from '../../resources/kit.js';
import { edgeRouters as edgeRoutersDef } from '../../resources/routers.js';
import type { SqlFlavor } from '../../query/flavor.js';
import type { ListQuery } from '../../store/repository.js';
import type { EntityOf } from '../../resources/index.js';
import { identityEdgeRouters, idIn, serviceEdgeRouters } from '../related.js';
import type { ResourceService } from '../resources.js';

type EdgeRouter = EntityOf<'edge-routers'>;

/** An edge router in a client answer: how to reach it, nothing of its enrollment. */
export type ClientEdgeRouter = Pick<
  EdgeRouter,
  'id' | 'name' | 'hostname' | 'isOnline' | 'supportedProtocols' | 'syncStatus' | 'cost' | 'noTraversal' | 'disabled'
> & {
  urls: Record<string, string>;
};

export const ClientEdgeRouterSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  hostname: Type.String(),
  isOnline: Type.Boolean(),
  supportedProtocols: Type.Record(Type.String(), Type.String()),
  urls: Type.Record(Type.String(), Type.String(), { description: 'the same as supportedProtocols' }),
  syncStatus: Type.String({ description: 'how far the router has received the network state; SYNC_UNKNOWN while not connected' }),
  cost: Type.Integer(),
  noTraversal: Type.Boolean(),
  disabled: Type.Boolean(),
});

/** The edge router list items of the Client API: the entity base fields too. */
export const ClientEdgeRouterListItemSchema = Type.Composite([
  Type.Object({
    _links: Type.Record(Type.String(), Type.Object({ href: Type.String() })),
    createdAt: Type.String(),
    updatedAt: Type.String(),
    tags: Type.Record(Type.String(), Type.Union([Type.String(), Type.Boolean(), Type.Null()])),
  }),
  ClientEdgeRouterSchema,
]);

export function clientEdgeRouter(e: EdgeRouter): ClientEdgeRouter {
  return {
    id: e.id,
    name: e.name,
    hostname: e.hostname,
    isOnline: e.isOnline,
    supportedProtocols: e.supportedProtocols,
    urls: e.supportedProtocols,
    syncStatus: e.syncStatus,
    cost: e.cost,
    noTraversal: e.noTraversal,
    disabled: e.disabled,
  };
}

export function clientEdgeRouterListItem(e: EdgeRouter): Record<string, unknown> {
  return {
    _links: { self: { href: `./edge-routers/${e.id}` } },
    createdAt: e.createdAt,
    updatedAt: e.updatedAt,
    tags: e.tags,
    ...clientEdgeRouter(e),
  };
}

/** Filter and sort of client edge router lists: only the fields a client sees. */
export const CLIENT_EDGE_ROUTER_FILTER: FilterSpec = (() => {
  const full = filterSpec(edgeRoutersDef);
  const shown = new Set(['id', 'createdAt', 'updatedAt', 'tags', 'name', 'hostname', 'isOnline', 'syncStatus', 'cost', 'noTraversal', 'disabled']);
  return {
    symbols: new Map([...full.symbols].filter(([name]) => shown.has(name))),
    sortable: new Set([...full.sortable].filter((name) => shown.has(name))),
    fields: full.fields.filter((name) => shown.has(name)),
  };
})();

function enrolled(flavor: SqlFlavor) {
  return sql<SqlBool>`${sql.ref(`${edgeRoutersDef.table}.is_verified`)} = ${flavor.bool(true)}`;
}

/** Scopes of the client edge router lists. */
export const edgeRouterScope = {
  /**
   * The edge routers an identity may use (edge router policies), enrolled ones only: one never
   * enrolled has no address to reach it by (the established controller lists the verified ones).
   */
  ofIdentity: (identityId: string, flavor: SqlFlavor) =>
    sql<SqlBool>`(${idIn(edgeRoutersDef.table, identityEdgeRouters(identityId))} and ${enrolled(flavor)})`,
  /** Every enrolled edge router: what an admin is shown as its own (the established controller's answer to one). */
  enrolled: (flavor: SqlFlavor) => enrolled(flavor),
  /** Those it may use for a service (and that service edge router policies let carry it). */
  forService: (identityId: string, serviceId: string) =>
    sql<SqlBool>`(${idIn(edgeRoutersDef.table, identityEdgeRouters(identityId))} and ${idIn(edgeRoutersDef.table, serviceEdgeRouters(serviceId))})`,
};

/** A page of the edge routers an identity may use, or with a service those it may use for it; scoped before any filter. */
function pageOf(edgeRouters: ResourceService<EdgeRouter>, q: ListQuery, identityId: string, serviceId?: string) {
  const scope =
    serviceId === undefined ? edgeRouterScope.ofIdentity(identityId, edgeRouters.store.dialect.flavor) : edgeRouterScope.forService(identityId, serviceId);
  return edgeRouters.listEntities({ ...q, scope });
}

/**
 * A page of the caller's edge routers, as list items (entity base fields too): those its edge router
 * policies let it use, or for an admin every enrolled one, as the established controller lists them.
 */
export async function listClientEdgeRouters(
  edgeRouters: ResourceService<EdgeRouter>,
  q: ListQuery,
  caller: { identityId: string; isAdmin: boolean },
): Promise<{ items: Record<string, unknown>[]; total: number }> {
  const { items, total } = caller.isAdmin
    ? await edgeRouters.listEntities({ ...q, scope: edgeRouterScope.enrolled(edgeRouters.store.dialect.flavor) })
    : await pageOf(edgeRouters, q, caller.identityId);
  return { items: items.map(clientEdgeRouterListItem), total };
}

/**
 * The answer of a service's edge routers on the Client API: one object whose `edgeRouters` are those
 * the identity may use for the service, shaped as in a session (`urls` beside `supportedProtocols`).
 */
export const ServiceEdgeRoutersSchema = Type.Object({ edgeRouters: Type.Array(ClientEdgeRouterSchema) });

export async function listServiceEdgeRouters(
  edgeRouters: ResourceService<EdgeRouter>,
  q: ListQuery,
  identityId: string,
  serviceId: string,
): Promise<{ edgeRouters: ClientEdgeRouter[]; total: number }> {
  const { items, total } = await pageOf(edgeRouters, q, identityId, serviceId);
  return { edgeRouters: items.map(clientEdgeRouter), total };
}
