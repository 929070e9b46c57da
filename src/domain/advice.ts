// Policy advice (behaviour.md §4): whether service policies let an identity dial or bind a service,
// and which edge routers both may use, from the policy links alone. Posture is not considered.
import { sql, type SqlBool } from 'kysely';
import { notFound } from '../errors.js';
import { entityRef, type EntityRef } from '../resources/kit.js';
import type { Resources } from './resources.js';
import { accessTypes, countDistinct, identityEdgeRouters, idIn, serviceEdgeRouters } from './related.js';

export interface PolicyAdvice {
  identityId: string;
  identity: EntityRef;
  serviceId: string;
  service: EntityRef;
  isDialAllowed: boolean;
  isBindAllowed: boolean;
  identityRouterCount: number;
  serviceRouterCount: number;
  commonRouters: (EntityRef & { isOnline: boolean })[];
}

export async function policyAdvice(resources: Resources, identityId: string, serviceId: string): Promise<PolicyAdvice> {
  const ex = resources.store.db;
  const identity = await resources.get('identities').repo.get(ex, identityId);
  if (!identity) throw notFound('identity', identityId);
  const service = await resources.get('services').repo.get(ex, serviceId);
  if (!service) throw notFound('service', serviceId);

  const types = await accessTypes(ex, identityId, serviceId);
  const identityRouters = identityEdgeRouters(identityId);
  const serviceRouters = serviceEdgeRouters(serviceId);
  const routers = resources.get('edge-routers');
  const common = await routers.repo.list(ex, {
    scope: sql<SqlBool>`(${idIn(routers.def.table, identityRouters)} and ${idIn(routers.def.table, serviceRouters)})`,
    sort: [{ field: 'name', direction: 'asc' }],
    offset: 0,
    limit: null,
  });
  return {
    identityId,
    identity: entityRef('identities', identityId, identity.name),
    serviceId,
    service: entityRef('services', serviceId, service.name),
    isDialAllowed: types.has('Dial'),
    isBindAllowed: types.has('Bind'),
    identityRouterCount: await countDistinct(ex, identityRouters),
    serviceRouterCount: await countDistinct(ex, serviceRouters),
    commonRouters: common.items.map((r) => ({
      ...entityRef('edge-routers', r.id, r.name),
      isOnline: r.isOnline,
    })),
  };
}
