// Management routes of the services area: config types, configs and services (generic routes), the
// lists relating them, and an identity's service-config overrides.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../app/core.js';
import type { ResourceService } from '../../domain/resources.js';
import { roleFilterScope, RoleFilterQuery } from '../../domain/role-filter.js';
import {
  associateIdentityServiceConfigs,
  disassociateIdentityServiceConfigs,
  listIdentityServiceConfigs,
  MAX_SERVICE_CONFIG_PAIRS,
  relatedScope,
  type ServiceConfigPair,
} from '../../domain/services.js';
import { ApiError } from '../../errors.js';
import type { ListQuery } from '../../store/repository.js';
import { EntityRefSchema, MAX_NAME } from '../../resources/kit.js';
import { routeAuth } from '../auth-requirements.js';
import { EMPTY, envelope } from '../envelope.js';
import { listMeta, parseList } from '../list.js';
import { actorOf, dataEnvelopeSchema, IdParams, ListQuerySchema, registerResourceRoutes } from '../resource-routes.js';

const ConfigTypesQuery = {
  configTypes: Type.Optional(
    Type.Union([Type.String({ maxLength: 255 }), Type.Array(Type.String({ maxLength: 255 }), { maxItems: 100 })], {
      description: 'repeatable: config type ids or names whose data each service answer carries under `config`; "all" for every type',
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
});

const IdentityServiceConfigSchema = Type.Object({
  serviceId: Type.String(),
  configId: Type.String(),
  configTypeId: Type.String(),
  service: EntityRefSchema,
  config: EntityRefSchema,
  configType: EntityRefSchema,
});

interface RelatedList {
  parent: ResourceService;
  child: ResourceService;
  sub: string;
  operationId: string;
  scope: (id: string) => NonNullable<ListQuery['scope']>;
}

/** `GET /<parent>/{id}/<sub>`: the related resources, with the child's filter, sort and paging. */
function relatedList(app: FastifyInstance, core: Core, rel: RelatedList): void {
  const { parent, child } = rel;
  const flavor = core.resources.flavor;
  app.get(`/${parent.def.name}/:id/${rel.sub}`, {
    config: { auth: routeAuth(child.def.permission, 'read') },
    schema: {
      operationId: rel.operationId,
      tags: [parent.def.name],
      params: IdParams,
      querystring: ListQuerySchema,
      response: { 200: dataEnvelopeSchema(Type.Array(child.read)) },
    },
    handler: async (request) => {
      const { id } = request.params as { id: string };
      const list = parseList(request.query as Record<string, unknown>, child.filter, flavor);
      await parent.ensureExists(id);
      const { items, total } = await child.list({ ...list.query, scope: rel.scope(id) });
      return envelope(items, listMeta(list, total, child.filter));
    },
  });
}

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

  relatedList(app, core, {
    parent: services,
    child: configs,
    sub: 'configs',
    operationId: 'listServiceConfig',
    scope: relatedScope.configsOfService,
  });
  relatedList(app, core, {
    parent: configs,
    child: services,
    sub: 'services',
    operationId: 'listConfigServices',
    scope: relatedScope.servicesOfConfig,
  });
  relatedList(app, core, {
    parent: configTypes,
    child: configs,
    sub: 'configs',
    operationId: 'listConfigsForConfigType',
    scope: relatedScope.configsOfType,
  });

  const path = '/identities/:id/service-configs';
  const tags = ['identities'];
  app.get(path, {
    config: { auth: routeAuth(identities.def.permission, 'read') },
    schema: {
      operationId: 'listIdentitysServiceConfigs',
      tags,
      params: IdParams,
      response: { 200: dataEnvelopeSchema(Type.Array(IdentityServiceConfigSchema)) },
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
      response: { 200: dataEnvelopeSchema(Type.Object({})) },
    },
    handler: async (request) => {
      const pairs = request.body as ServiceConfigPair[];
      await associateIdentityServiceConfigs(r, (request.params as { id: string }).id, pairs, actorOf(request));
      return envelope(EMPTY);
    },
  });
  // Its own context: "empty body" includes a JSON content type with nothing after it.
  void app.register(async (scoped) => {
    scoped.removeContentTypeParser('application/json');
    scoped.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
      const text = String(body);
      if (text.trim() === '') {
        done(null, undefined);
        return;
      }
      try {
        done(null, JSON.parse(text));
      } catch {
        done(new ApiError('COULD_NOT_PARSE_BODY', 'the body is not valid JSON'), undefined);
      }
    });
    scoped.delete(path, {
      config: { auth: routeAuth(identities.def.permission, 'update') },
      schema: {
        operationId: 'disassociateIdentitysServiceConfigs',
        tags,
        params: IdParams,
        // Absent, null or empty: every override of the identity.
        body: Type.Union([ServiceConfigsAssignList, Type.Null()]),
        response: { 200: dataEnvelopeSchema(Type.Object({})) },
      },
      handler: async (request) => {
        const pairs = (request.body ?? undefined) as ServiceConfigPair[] | undefined;
        await disassociateIdentityServiceConfigs(r, (request.params as { id: string }).id, pairs, actorOf(request));
        return envelope(EMPTY);
      },
    });
  });
}
