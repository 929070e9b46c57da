// A service's terminators as clients see them: which service and which router (as the Management API
// references it), and the identity a terminator answers for, never the address, binding, cost or precedence (where and how the service
// is hosted; those stay with the Management API). The fields a client may filter and sort by are
// the ones it sees, so no filter or sort can probe the others either.
import { Type } from '@sinclair/typebox';
import { EntityRefSchema, entityLinks, entityRef, filterSpec, LinksSchema, TagsSchema, type FilterSpec } from '../../resources/kit.js';
import { terminators as terminatorsDef } from '../../resources/services.js';
import type { EntityOf } from '../../resources/index.js';
import type { ListQuery } from '../../store/repository.js';
import { relationOf } from '../related.js';
import type { ResourceService } from '../resources.js';
import { routerRefs } from '../routers.js';

type Terminator = EntityOf<'terminators'>;

/** The limited terminator answer of the Client API (the established terminatorClientDetail). */
export const ClientTerminatorSchema = Type.Object({
  _links: LinksSchema,
  id: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
  tags: TagsSchema,
  serviceId: Type.String({ description: 'id of the service' }),
  service: EntityRefSchema,
  routerId: Type.String({ description: 'id of the edge router or router hosting it' }),
  router: Type.Union([EntityRefSchema, Type.Null()], { description: 'the edge router or router hosting it' }),
  identity: Type.String({ description: 'identity the terminator answers for' }),
});

/** Filter and sort of a client's terminator list: only the fields a client sees. */
export const CLIENT_TERMINATOR_FILTER: FilterSpec = (() => {
  const full = filterSpec(terminatorsDef);
  // `service` and `router` are the stored ids, which the answer shows as serviceId and routerId.
  const shown = new Set(['id', 'createdAt', 'updatedAt', 'tags', 'service', 'router', 'identity']);
  return {
    symbols: new Map([...full.symbols].filter(([name]) => shown.has(name))),
    sortable: new Set([...full.sortable].filter((name) => shown.has(name))),
    fields: full.fields.filter((name) => shown.has(name)),
  };
})();

const serviceTerminators = relationOf('services', 'terminators');

/**
 * A page of a service's terminators in the client shape, scoped to the service before any filter.
 * The caller must already be known to see the service (its name is given).
 */
export async function listClientTerminators(
  terminators: ResourceService<Terminator>,
  service: { id: string; name: string },
  q: ListQuery,
): Promise<{ items: Record<string, unknown>[]; total: number }> {
  const { items, total } = await terminators.listEntities({ ...q, scope: serviceTerminators.scope(service.id) });
  const ref = entityRef('services', service.id, service.name);
  const routers = await routerRefs(terminators.store.db, items.map((e) => e.router));
  return {
    items: items.map((e) => ({
      _links: entityLinks(terminatorsDef, e),
      id: e.id,
      createdAt: e.createdAt,
      updatedAt: e.updatedAt,
      tags: e.tags,
      serviceId: e.service,
      service: ref,
      routerId: e.router,
      router: routers.get(e.router) ?? null,
      identity: e.identity,
    })),
    total,
  };
}
