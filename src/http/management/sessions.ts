// Sessions on the Management API (`ops`: list, detail, delete, route path; with their edge routers,
// never their tokens), and an identity's posture data and refused session requests.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { PostureDataSchema, PostureFailureSchema, type PostureStore } from '../../domain/client/posture-store.js';
import { SESSION_FILTER, SessionSchema, type Sessions } from '../../domain/client/sessions.js';
import type { ResourceService } from '../../domain/resources.js';
import type { SqlFlavor } from '../../query/flavor.js';
import { sessions as sessionsDef } from '../../resources/sessions.js';
import { routeAuth } from '../auth-requirements.js';
import { EMPTY, envelope } from '../envelope.js';
import { listMeta, parseList } from '../list.js';
import { named } from '../openapi.js';
import { dataEnvelopeSchema, EmptySchema, IdParams, ListQuerySchema } from '../resource-routes.js';

export interface ManagementSessionsRouteDeps {
  flavor: SqlFlavor;
  sessions: Sessions;
  posture: Pick<PostureStore, 'failures' | 'identityData'>;
  identities: ResourceService;
}

export function managementSessionsRoutes(server: FastifyInstance, d: ManagementSessionsRouteDeps): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const { flavor, sessions, posture, identities } = d;
  const tags = ['sessions'];
  const Session = named(SessionSchema, 'sessionDetail');

  app.get('/sessions', {
    config: { auth: routeAuth(sessionsDef.permission, 'read') },
    schema: { operationId: 'listSessions', tags, querystring: ListQuerySchema, response: { 200: dataEnvelopeSchema(Type.Array(Session, { title: 'sessionList' }), 'listSessionsEnvelope') } },
    handler: async (request) => {
      const list = parseList(request.query, SESSION_FILTER, flavor);
      const { items, total } = await sessions.list(list.query);
      return envelope(await sessions.present(items), listMeta(list, total, SESSION_FILTER));
    },
  });

  app.get('/sessions/:id', {
    config: { auth: routeAuth(sessionsDef.permission, 'read') },
    schema: { operationId: 'detailSession', tags, params: IdParams, response: { 200: dataEnvelopeSchema(Session, 'detailSessionEnvelope') } },
    handler: async (request) => {
      const [answer] = await sessions.present([await sessions.get(request.params.id)]);
      return envelope(answer);
    },
  });

  app.delete('/sessions/:id', {
    config: { auth: routeAuth(sessionsDef.permission, 'delete') },
    schema: { operationId: 'deleteSession', tags, params: IdParams, response: { 200: EmptySchema } },
    handler: async (request) => {
      await sessions.delete(await sessions.get(request.params.id));
      return envelope(EMPTY);
    },
  });

  // The routers a session's circuits take. Circuits are the routers' business and not reported to
  // this controller, so the path is empty.
  app.get('/sessions/:id/route-path', {
    config: { auth: routeAuth(sessionsDef.permission, 'read') },
    schema: {
      operationId: 'detailSessionRoutePath',
      tags,
      params: IdParams,
      response: {
        200: dataEnvelopeSchema(
          Type.Object({ routePath: Type.Array(Type.String(), { description: 'router names, ingress first' }) }, { title: 'sessionRoutePathDetail' }),
          'detailSessionRoutePathEnvelope',
        ),
      },
    },
    handler: async (request) => {
      await sessions.get(request.params.id);
      return envelope({ routePath: [] as string[] });
    },
  });

  app.get('/identities/:id/failed-service-requests', {
    config: { auth: routeAuth('identity', 'read') },
    schema: {
      operationId: 'getIdentityFailedServiceRequests',
      tags: ['identities'],
      params: IdParams,
      response: { 200: dataEnvelopeSchema(Type.Array(named(PostureFailureSchema, 'failedServiceRequest')), 'failedServiceRequestEnvelope') },
    },
    handler: async (request) => {
      const { id } = request.params;
      await identities.ensureExists(id);
      return envelope(await posture.failures(id));
    },
  });

  app.get('/identities/:id/posture-data', {
    config: { auth: routeAuth('identity', 'read') },
    schema: {
      operationId: 'getIdentityPostureData',
      tags: ['identities'],
      params: IdParams,
      response: { 200: dataEnvelopeSchema(named(PostureDataSchema, 'postureData'), 'postureDataEnvelope') },
    },
    handler: async (request) => {
      const { id } = request.params;
      await identities.ensureExists(id);
      return envelope(await posture.identityData(id));
    },
  });
}
