// Posture responses on the Client API: what the caller's device reports, stored for its API session
// and evaluated when it asks for a session.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../app/core.js';
import { checkResponses, PostureResponseBulkSchema, PostureResponseSchema, type PostureResponse } from '../../domain/client/posture-store.js';
import { SESSION } from '../auth-requirements.js';
import { EMPTY, envelope } from '../envelope.js';
import { dataEnvelopeSchema } from '../resource-routes.js';
import { callerOf, networkOf } from './network.js';

export function clientPostureRoutes(app: FastifyInstance, core: Core): void {
  const posture = networkOf(core).posture;
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
