// Edge routers as clients see them: the answer shape (how to reach a router, nothing of its
// enrollment), the fields a client may filter and sort by, the scopes of the edge routers an
// identity may use, for any service or for one, and a page of them in that shape.
import { sql, type SqlBool } from 'kysely';
import { Type } from '@sinclair/typebox';
import { filterSpec, type FilterSpec } from '../../resources/kit.js';
import { edgeRouters as edgeRoutersDef } from '../../resources/routers.js';
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

/** Scopes of the client edge router lists. */
export const edgeRouterScope = {
  /** The edge routers an identity may use (edge router policies). */
  ofIdentity: (identityId: string) => idIn(edgeRoutersDef.table, identityEdgeRouters(identityId)),
  /** Those it may use for a service (and that service edge router policies let carry it). */
  forService: (identityId: string, serviceId: string) =>
    sql<SqlBool>`(${idIn(edgeRoutersDef.table, identityEdgeRouters(identityId))} and ${idIn(edgeRoutersDef.table, serviceEdgeRouters(serviceId))})`,
};

/**
 * A page of edge routers in the shape a client sees them: those an identity may use, or with a
 * service those it may use for that service; scoped before any filter.
 */
export async function listClientEdgeRouters(
  edgeRouters: ResourceService<EdgeRouter>,
  q: ListQuery,
  identityId: string,
  serviceId?: string,
): Promise<{ items: Record<string, unknown>[]; total: number }> {
  const scope = serviceId === undefined ? edgeRouterScope.ofIdentity(identityId) : edgeRouterScope.forService(identityId, serviceId);
  const { items, total } = await edgeRouters.listEntities({ ...q, scope });
  return { items: items.map(clientEdgeRouterListItem), total };
}
