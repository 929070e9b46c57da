// Posture responses on the Client API: what the caller's device reports, stored for its API session
// and evaluated when it asks for a session; the answer lists the caller's services whose posture the
// report changed (201 for one response, 200 for several, as the established documents have it).
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { PostureResponseAnswerSchema, type PostureResponses } from '../../domain/client/posture-responses.js';
import { checkResponses, PostureResponseBulkSchema, PostureResponseSchema } from '../../domain/client/posture-store.js';
import { SESSION } from '../auth-requirements.js';
import { envelope } from '../envelope.js';
import { named } from '../openapi.js';
import { dataEnvelopeSchema } from '../resource-routes.js';
import { callerOf } from '../credentials.js';

export interface ClientPostureRouteDeps {
  responses: Pick<PostureResponses, 'submit'>;
}

export function clientPostureRoutes(server: FastifyInstance, { responses }: ClientPostureRouteDeps): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['posture'];
  const Answer = dataEnvelopeSchema(PostureResponseAnswerSchema);

  app.post('/posture-response', {
    config: { auth: SESSION },
    schema: { operationId: 'createPostureResponse', tags, body: named(PostureResponseSchema, 'postureResponseCreate'), response: { 201: Answer } },
    handler: async (request, reply) => {
      const response = request.body;
      checkResponses([response], (_i, name) => name);
      const answer = await responses.submit(callerOf(request), [response]);
      void reply.code(201);
      return envelope(answer);
    },
  });

  app.post('/posture-response-bulk', {
    config: { auth: SESSION },
    schema: { operationId: 'createPostureResponseBulk', tags, body: PostureResponseBulkSchema, response: { 200: Answer } },
    handler: async (request) => {
      const list = request.body;
      checkResponses(list, (i, name) => `[${i}].${name}`);
      return envelope(await responses.submit(callerOf(request), list));
    },
  });
}
