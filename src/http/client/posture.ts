// Posture responses on the Client API: what the caller's device reports, stored for its API session
// and evaluated when it asks for a session.
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
import { named } from '../openapi.js';
import { EmptySchema } from '../resource-routes.js';
import { callerOf } from './request.js';

export interface ClientPostureRouteDeps {
  posture: Pick<PostureStore, 'submit'>;
}

export function clientPostureRoutes(app: FastifyInstance, { posture }: ClientPostureRouteDeps): void {
  const tags = ['posture'];

  app.post('/posture-response', {
    config: { auth: SESSION },
    schema: { operationId: 'createPostureResponse', tags, body: named(PostureResponseSchema, 'postureResponseCreate'), response: { 200: EmptySchema } },
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
    schema: { operationId: 'createPostureResponseBulk', tags, body: PostureResponseBulkSchema, response: { 200: EmptySchema } },
    handler: async (request) => {
      const responses = request.body as PostureResponse[];
      checkResponses(responses, (i, name) => `[${i}].${name}`);
      const caller = callerOf(request);
      await posture.submit({ apiSessionId: caller.apiSessionId, identityId: caller.identityId }, responses);
      return envelope(EMPTY);
    },
  });
}
