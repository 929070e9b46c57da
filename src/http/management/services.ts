// Management routes of the services area: config types, configs and services (generic routes) and
// an identity's service-config overrides; the lists relating them are served with the other related
// lists (related.ts).
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../core/core.js';
import { roleFilterScope, RoleFilterQuery } from '../../domain/role-filter.js';
import {
  associateIdentityServiceConfigs,
  disassociateIdentityServiceConfigs,
  listIdentityServiceConfigs,
  MAX_SERVICE_CONFIG_PAIRS,
  type ServiceConfigPair,
} from '../../domain/services.js';
import { EntityRefSchema, MAX_NAME } from '../../resources/kit.js';
import { routeAuth } from '../auth-requirements.js';
import { EMPTY, envelope } from '../envelope.js';
import { actorOf, dataEnvelopeSchema, EmptySchema, IdParams, registerResourceRoutes } from '../resource-routes.js';

const ConfigTypesQuery = {
  configTypes: Type.Optional(
    Type.Union([Type.String({ maxLength: 255 }), Type.Array(Type.String({ maxLength: 255 }), { maxItems: 100 })], {
      description:
        'config type ids or names (repeated or comma-separated; "all" for every type) whose data each service answer carries under `config`; default: those of the API session',
    }),
  ),
};


const ServiceConfigPairSchema = Type.Object(
  {
    serviceId: Type.String({ minLength: 1, maxLength: MAX_NAME }),
    configId: Type.String({ minLength: 1, maxLength: MAX_NAME }),
  },
  // Items read from the list (with their references) may be sent back as they are.
  { additionalProperties: true },
);

const ServiceConfigsAssignList = Type.Array(ServiceConfigPairSchema, {
  maxItems: MAX_SERVICE_CONFIG_PAIRS,
  description: 'service / config pairs',
  title: 'serviceConfigsAssignList',
});

const IdentityServiceConfigSchema = Type.Object(
  {
    serviceId: Type.String(),
    configId: Type.String(),
    configTypeId: Type.String(),
    service: EntityRefSchema,
    config: EntityRefSchema,
    configType: EntityRefSchema,
  },
  { title: 'serviceConfigDetail' },
);

export function servicesRoutes(app: FastifyInstance, core: Core): void {
  const r = core.resources;
  const flavor = r.flavor;
  const configTypes = r.get('config-types');
  const configs = r.get('configs');
  const services = r.get('services');
  const identities = r.get('identities');

  registerResourceRoutes(app, configTypes, flavor);
  registerResourceRoutes(app, configs, flavor);
  registerResourceRoutes(app, services, flavor, {
    listQueryExtra: { ...RoleFilterQuery, ...ConfigTypesQuery },
    listScope: roleFilterScope('services', flavor),
  });

  const path = '/identities/:id/service-configs';
  const tags = ['identities'];
  app.get(path, {
    config: { auth: routeAuth(identities.def.permission, 'read') },
    schema: {
      operationId: 'listIdentitysServiceConfigs',
      tags,
      params: IdParams,
      response: { 200: dataEnvelopeSchema(Type.Array(IdentityServiceConfigSchema), 'listServiceConfigsEnvelope') },
    },
    handler: async (request) => envelope(await listIdentityServiceConfigs(r, (request.params as { id: string }).id)),
  });
  app.post(path, {
    config: { auth: routeAuth(identities.def.permission, 'update') },
    schema: {
      operationId: 'associateIdentitysServiceConfigs',
      tags,
      params: IdParams,
      body: ServiceConfigsAssignList,
      response: { 200: EmptySchema },
    },
    handler: async (request) => {
      const pairs = request.body as ServiceConfigPair[];
      await associateIdentityServiceConfigs(r, (request.params as { id: string }).id, pairs, actorOf(request));
      return envelope(EMPTY);
    },
  });
  app.delete(path, {
    config: { auth: routeAuth(identities.def.permission, 'update') },
    schema: {
      operationId: 'disassociateIdentitysServiceConfigs',
      tags,
      params: IdParams,
      // Absent, null or empty: every override of the identity.
      body: Type.Union([ServiceConfigsAssignList, Type.Null()]),
      response: { 200: EmptySchema },
    },
    handler: async (request) => {
      const pairs = (request.body ?? undefined) as ServiceConfigPair[] | undefined;
      await disassociateIdentityServiceConfigs(r, (request.params as { id: string }).id, pairs, actorOf(request));
      return envelope(EMPTY);
    },
  });
}
