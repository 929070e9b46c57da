// Sessions on the Client API: the caller creates, lists, reads and deletes its own (those of its
// identity; any other is 404). Answers to the owner carry the session token, and every answer the
// edge routers the session may use.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { SESSION_FILTER, SessionCreateSchema, SessionSchema, type Sessions } from '../../domain/client/sessions.js';
import type { SqlFlavor } from '../../query/flavor.js';
import { SESSION } from '../auth-requirements.js';
import { EMPTY, envelope } from '../envelope.js';
import { listMeta, parseList } from '../list.js';
import { named } from '../openapi.js';
import { dataEnvelopeSchema, EmptySchema, IdParams, ListQuerySchema } from '../resource-routes.js';
import { callerOf } from '../credentials.js';
import type { IssuerOf } from './request.js';

export interface ClientSessionsRouteDeps {
  flavor: SqlFlavor;
  sessions: Sessions;
  issuerOf: IssuerOf;
}

export function clientSessionsRoutes(server: FastifyInstance, { flavor, sessions, issuerOf }: ClientSessionsRouteDeps): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['sessions'];
  const Session = named(SessionSchema, 'sessionDetail');

  app.get('/sessions', {
    config: { auth: SESSION },
    schema: {
      operationId: 'listSessions',
      tags,
      querystring: ListQuerySchema,
      response: { 200: dataEnvelopeSchema(Type.Array(Session, { title: 'sessionList' }), 'listSessionsEnvelope') },
    },
    handler: async (request) => {
      const caller = callerOf(request);
      const list = parseList(request.query, SESSION_FILTER, flavor);
      const { items, total } = await sessions.list(list.query, caller.identityId);
      const issuer = issuerOf(request);
      const tokens = new Map(await Promise.all(items.map(async (s) => [s.id, await sessions.tokenOf(s, issuer)] as const)));
      const answers = await sessions.present(items, (s) => tokens.get(s.id), { id: caller.identityId, name: caller.identityName });
      return envelope(answers, listMeta(list, total, SESSION_FILTER));
    },
  });

  app.post('/sessions', {
    config: { auth: SESSION },
    schema: {
      operationId: 'createSession',
      tags,
      body: named(SessionCreateSchema, 'sessionCreate'),
      response: { 201: dataEnvelopeSchema(Session, 'sessionCreateEnvelope') },
    },
    handler: async (request, reply) => {
      const caller = callerOf(request);
      const { session, token } = await sessions.create(caller, request.body, issuerOf(request));
      const [answer] = await sessions.present([session], () => token, { id: caller.identityId, name: caller.identityName });
      void reply.code(201);
      return envelope(answer);
    },
  });

  app.get('/sessions/:id', {
    config: { auth: SESSION },
    schema: {
      operationId: 'detailSession',
      tags,
      params: IdParams,
      response: { 200: dataEnvelopeSchema(Session, 'detailSessionEnvelope') },
    },
    handler: async (request) => {
      const caller = callerOf(request);
      const s = await sessions.own(caller, request.params.id);
      const token = await sessions.tokenOf(s, issuerOf(request));
      const [answer] = await sessions.present([s], () => token, { id: caller.identityId, name: caller.identityName });
      return envelope(answer);
    },
  });

  app.delete('/sessions/:id', {
    config: { auth: SESSION },
    schema: { operationId: 'deleteSession', tags, params: IdParams, response: { 200: EmptySchema } },
    handler: async (request) => {
      await sessions.delete(await sessions.own(callerOf(request), request.params.id));
      return envelope(EMPTY);
    },
  });
}
