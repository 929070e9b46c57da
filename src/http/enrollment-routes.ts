// Routes of enrollment both Edge APIs serve alike: the network JWTs a client bootstraps its trust
// with (no credential needed).
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Core } from '../core/core.js';
import { PUBLIC } from './auth-requirements.js';
import { envelope } from './envelope.js';
import { dataEnvelopeSchema } from './resource-routes.js';

const NetworkJwtSchema = Type.Object({ name: Type.String(), token: Type.String() }, { title: 'networkJwt' });

export function networkJwtRoutes(app: FastifyInstance, core: Core): void {
  app.get('/network-jwts', {
    config: { auth: PUBLIC },
    schema: {
      operationId: 'listNetworkJWTs',
      tags: ['enrollments'],
      response: { 200: dataEnvelopeSchema(Type.Array(NetworkJwtSchema, { title: 'networkJwtList' }), 'listNetworkJwtsEnvelope') },
    },
    handler: async () => envelope(await core.enrollments.networkJwts()),
  });
}
