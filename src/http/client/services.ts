// Services on the Client API: the caller's services (only those it may dial or bind, scoped before
// any filter), one of them, its edge routers and terminators (the limited view), the caller's edge
// routers, and the service-list change marker. Changing a service here takes the service
// permissions, as on the Management API.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Caller } from '../../domain/client/caller.js';
import { ClientServiceFields, configTypeChoice, type ClientServices } from '../../domain/client/service-list.js';
import type { ServiceUpdateMarkers } from '../../domain/client/service-updates.js';
import type { Sessions } from '../../domain/client/sessions.js';
import type { Resources } from '../../domain/resources.js';
import { roleFilterScope, RoleFilterQuery } from '../../domain/role-filter.js';
import {
  ClientEdgeRouterListItemSchema,
  CLIENT_EDGE_ROUTER_FILTER,
  listClientEdgeRouters,
  ServiceEdgeRoutersSchema,
  listServiceEdgeRouters,
} from '../../domain/client/edge-routers.js';
import { ClientTerminatorSchema, CLIENT_TERMINATOR_FILTER, listClientTerminators } from '../../domain/client/terminators.js';
import { ApiError } from '../../errors.js';
import type { SqlFlavor } from '../../query/flavor.js';
import { SESSION } from '../auth-requirements.js';
import { envelope } from '../envelope.js';
import { listMeta, MAX_LIMIT, parseList } from '../list.js';
import { named } from '../openapi.js';
import { dataEnvelopeSchema, IdParams, ListQuerySchema, registerResourceRoutes } from '../resource-routes.js';
import type { AnswerCache } from '../../core/answer-cache.js';
import { callerOf, principalOf } from '../credentials.js';

const ConfigTypesQuery = {
  configTypes: Type.Optional(
    Type.Union([Type.String({ maxLength: 4096 }), Type.Array(Type.String({ maxLength: 255 }), { maxItems: 100 })], {
      description: 'config types (ids or names; `all`) whose configs the answer carries; default: those of the API session',
    }),
  ),
};

const ServicesQuery = Type.Composite([ListQuerySchema, Type.Object({ ...ConfigTypesQuery, ...RoleFilterQuery })], { additionalProperties: true });
const ServiceQuery = Type.Object(ConfigTypesQuery, { additionalProperties: true });

const JSON_TYPE = 'application/json; charset=utf-8';

/** The session-token header: when present it must be a session of the caller for this service. */
const SessionTokenHeaders = Type.Object(
  { 'session-token': Type.Optional(Type.String({ maxLength: 8192, description: 'a session token (JWT) of the caller for this service' })) },
  { additionalProperties: true },
);

export interface ClientServicesRouteDeps {
  flavor: SqlFlavor;
  resources: Resources;
  /** The caller's services as answered. */
  services: ClientServices;
  /** Checks the session-token header of the edge router list. */
  sessions: Pick<Sessions, 'verifyToken'>;
  markers: Pick<ServiceUpdateMarkers, 'lastChangeAt'>;
  /** The stamp of what a caller's service answers depend on now. */
  stamp: (caller: Caller) => string;
  answers: AnswerCache;
}

export function clientServicesRoutes(server: FastifyInstance, d: ClientServicesRouteDeps): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const { flavor, resources } = d;
  const services = resources.get('services');
  const terminators = resources.get('terminators');
  const edgeRouters = resources.get('edge-routers');
  const tags = ['services'];
  // A service as the Management API reads it, and what the caller may do with it.
  const ClientServiceSchema = Type.Object({ ...services.read.properties, ...ClientServiceFields }, { title: 'serviceDetail' });
  const EdgeRouterItem = named(ClientEdgeRouterListItemSchema, 'currentIdentityEdgeRouterDetail');

  app.get('/services', {
    config: { auth: SESSION },
    schema: {
      operationId: 'listServices',
      tags,
      querystring: ServicesQuery,
      response: { 200: dataEnvelopeSchema(Type.Array(ClientServiceSchema, { title: 'serviceList' }), 'listServicesEnvelope') },
    },
    handler: async (request, reply) => {
      const caller = callerOf(request);
      // The same request of the same API session, nothing it depends on changed since: the same answer.
      const stamp = d.stamp(caller);
      const known = d.answers.get(caller.apiSessionId, request.url, stamp);
      if (known !== undefined) return reply.type(JSON_TYPE).send(known);
      const query = request.query;
      const list = parseList(query, services.filter, flavor);
      const roles = await roleFilterScope('services', flavor)(query);
      const report: { changesAt: number | undefined } = { changesAt: undefined };
      const { items, total } = await d.services.list(caller, list.query, configTypeChoice(query), roles, { report });
      const body = reply.serializeAnswer(envelope(items, listMeta(list, total, services.filter)));
      // A list whose checks may still pass or fail with time alone is not kept: it changes then, and
      // while a passed MFA counts down (it has a moment it runs out) its seconds left change anyway.
      if (report.changesAt === undefined) d.answers.put(caller.apiSessionId, request.url, stamp, body);
      return reply.type(JSON_TYPE).send(body);
    },
  });

  app.get('/services/:id', {
    config: { auth: SESSION },
    schema: {
      operationId: 'detailService',
      tags,
      params: IdParams,
      querystring: ServiceQuery,
      response: { 200: dataEnvelopeSchema(ClientServiceSchema, 'detailServiceEnvelope') },
    },
    handler: async (request) => {
      const { id } = request.params;
      return envelope(await d.services.get(callerOf(request), id, configTypeChoice(request.query)));
    },
  });

  // Patch, full update and delete: the generic admin routes.
  registerResourceRoutes(app, services, flavor, { operations: ['update', 'patch', 'delete'] });

  app.get('/services/:id/edge-routers', {
    config: { auth: SESSION },
    schema: {
      operationId: 'listServiceEdgeRouters',
      tags,
      params: IdParams,
      headers: SessionTokenHeaders,
      querystring: ListQuerySchema,
      response: { 200: dataEnvelopeSchema(ServiceEdgeRoutersSchema) },
    },
    handler: async (request) => {
      const { id } = request.params;
      const caller = callerOf(request);
      // Clients read every router at once (the established answer is not paged): all by default.
      const query = { limit: String(MAX_LIMIT), ...request.query };
      const list = parseList(query, CLIENT_EDGE_ROUTER_FILTER, flavor);
      await d.services.assertVisible(caller, id);
      const token = request.headers['session-token'];
      if (typeof token === 'string' && !(await d.sessions.verifyToken(caller, id, token))) {
        throw new ApiError('UNAUTHORIZED', 'the session-token header is not a session of the caller for this service');
      }
      const { edgeRouters: routers, total } = await listServiceEdgeRouters(edgeRouters, list.query, caller.identityId, id);
      return envelope({ edgeRouters: routers }, listMeta(list, total, CLIENT_EDGE_ROUTER_FILTER));
    },
  });

  app.get('/services/:id/terminators', {
    config: { auth: SESSION },
    schema: {
      operationId: 'listServiceTerminators',
      tags,
      params: IdParams,
      querystring: ListQuerySchema,
      response: { 200: dataEnvelopeSchema(Type.Array(ClientTerminatorSchema)) },
    },
    handler: async (request) => {
      const { id } = request.params;
      const list = parseList(request.query, CLIENT_TERMINATOR_FILTER, flavor);
      const service = await d.services.visible(callerOf(request), id);
      const { items, total } = await listClientTerminators(terminators, service, list.query);
      return envelope(items, listMeta(list, total, CLIENT_TERMINATOR_FILTER));
    },
  });

  app.get('/current-identity/edge-routers', {
    config: { auth: SESSION },
    schema: {
      operationId: 'getCurrentIdentityEdgeRouters',
      tags: ['current-identity'],
      querystring: ListQuerySchema,
      response: { 200: dataEnvelopeSchema(Type.Array(EdgeRouterItem)) },
    },
    handler: async (request) => {
      const query = { limit: String(MAX_LIMIT), ...request.query };
      const list = parseList(query, CLIENT_EDGE_ROUTER_FILTER, flavor);
      const { identity } = principalOf(request);
      const { items, total } = await listClientEdgeRouters(edgeRouters, list.query, { identityId: identity.id, isAdmin: identity.isAdmin === true });
      return envelope(items, listMeta(list, total, CLIENT_EDGE_ROUTER_FILTER));
    },
  });

  app.get('/current-api-session/service-updates', {
    config: { auth: SESSION },
    schema: {
      operationId: 'listServiceUpdates',
      tags: ['current-api-session'],
      response: {
        200: dataEnvelopeSchema(
          Type.Object({
            lastChangeAt: Type.String({
              format: 'date-time',
              description: 'the last time anything changed what this caller’s service list shows',
            }),
          }),
        ),
      },
    },
    handler: async (request) => envelope({ lastChangeAt: await d.markers.lastChangeAt(callerOf(request)) }),
  });
}
