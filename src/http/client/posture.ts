// Posture responses on the Client API: what the caller's device reports, stored for its API session
// and evaluated when it asks for a session.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import {
  checkResponses,
  PostureResponseBulkSchema,
  PostureResponseSchema,
  type PostureResponse,
  type PostureStore,
} from '../../domain/client/posture-store.js';
import { SESSION } from '../auth-requirements.js';
import { EMPTY, envelope } from '../envelope.js';
import { dataEnvelopeSchema } from '../resource-routes.js';
import { callerOf } from '../credentials.js';

export interface ClientPostureRouteDeps {
  posture: Pick<PostureStore, 'submit'>;
}

export function clientPostureRoutes(app: FastifyInstance, { posture }: ClientPostureRouteDeps): void {
  const tags = ['posture'];
  const Empty = dataEnvelopeSchema(Type.Object({}));

  app.post('/posture-response', {
    config: { auth: SESSION },
    schema: { operationId: 'createPostureResponse', tags, body: PostureResponseSchema, response: { 200: Empty } },
    handler: async (request) => {
      const response = request.body as PostureResponse;
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
      const responses = request.body as PostureResponse[];
      checkResponses(responses, (i, name) => `[${i}].${name}`);
      const caller = callerOf(request);
      await posture.submit({ apiSessionId: caller.apiSessionId, identityId: caller.identityId }, responses);
      return envelope(EMPTY);
    },
  });
}
