// Posture responses on the Client API: what the caller's device reports, stored for its API session
// and evaluated when it asks for a session.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  checkResponses,
  PostureResponseBulkSchema,
  PostureResponseSchema,
  type PostureStore,
} from '../../domain/client/posture-store.js';
import { SESSION } from '../auth-requirements.js';
import { EMPTY, envelope } from '../envelope.js';
import { dataEnvelopeSchema } from '../resource-routes.js';
import { callerOf } from './request.js';

export interface ClientPostureRouteDeps {
  posture: Pick<PostureStore, 'submit'>;
}

export function clientPostureRoutes(server: FastifyInstance, { posture }: ClientPostureRouteDeps): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['posture'];
  const Empty = dataEnvelopeSchema(Type.Object({}));

  app.post('/posture-response', {
    config: { auth: SESSION },
    schema: { operationId: 'createPostureResponse', tags, body: PostureResponseSchema, response: { 200: Empty } },
    handler: async (request) => {
      const response = request.body;
      checkResponses([response], (_i, name) => name);
      const caller = callerOf(request);
      await posture.submit({ apiSessionId: caller.apiSessionId, identityId: caller.identityId }, [response]);
      return envelope(EMPTY);
    },
  });

  app.post('/posture-response-bulk', {
    config: { auth: SESSION },
    schema: { operationId: 'createPostureResponseBulk', tags, body: PostureResponseBulkSchema, response: { 200: Empty } },
    handler: async (request) => {
      const responses = request.body;
      checkResponses(responses, (i, name) => `[${i}].${name}`);
      const caller = callerOf(request);
      await posture.submit({ apiSessionId: caller.apiSessionId, identityId: caller.identityId }, responses);
      return envelope(EMPTY);
    },
  });
}
