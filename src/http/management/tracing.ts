// PUT /identities/{id}/trace: turns the request tracing of one identity on or off (domain/tracing.ts).
// Takes the identity group's update permission, like the identity's other switches (disable, enable).
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../core/core.js';
import type { TraceSpec } from '../../domain/tracing.js';
import { envelope } from '../envelope.js';
import { routeAuth } from '../auth-requirements.js';
import { dataEnvelopeSchema, IdParams } from '../resource-routes.js';

const TraceSpecSchema = Type.Object(
  {
    enabled: Type.Boolean({ description: 'on or off' }),
    duration: Type.Optional(Type.String({ maxLength: 64, description: 'how long the trace lasts, e.g. "10m" (at most 24h); required to enable' })),
    traceId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 128, pattern: '^[\\x21-\\x7e]+$', description: 'the id logged with every traced line; generated when absent' }),
    ),
    channels: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 16, description: 'request, response or all (the default)' }),
    ),
  },
  { title: 'traceSpec' },
);

const TraceDetailSchema = Type.Object(
  {
    enabled: Type.Boolean(),
    traceId: Type.Optional(Type.String()),
    until: Type.Optional(Type.String({ format: 'date-time' })),
    channels: Type.Optional(Type.Array(Type.String())),
  },
  { title: 'traceDetail' },
);

export function identityTracingRoutes(app: FastifyInstance, core: Core): void {
  const identities = core.resources.get('identities');
  app.put('/identities/:id/trace', {
    config: { auth: routeAuth(identities.def.permission, 'update') },
    schema: {
      operationId: 'updateIdentityTracing',
      tags: ['identities'],
      params: IdParams,
      body: TraceSpecSchema,
      response: { 200: dataEnvelopeSchema(TraceDetailSchema, 'traceDetailEnvelope') },
    },
    handler: async (request) => {
      const { id } = request.params as { id: string };
      await identities.ensureExists(id);
      const detail = core.traces.set(id, request.body as TraceSpec);
      request.log.info({ identityId: id, trace: detail }, detail.enabled ? 'identity tracing enabled' : 'identity tracing disabled');
      return envelope(detail);
    },
  });
}
