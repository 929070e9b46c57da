// Certificate authorities on the Management API: the generic routes of the resource, verification
// with a PEM certificate (text/plain) and the CA's enrollment JWT (application/jwt).
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Core } from '../../core/core.js';
import { caEnrollmentJwt, verifyCa } from '../../domain/cas.js';
import { EMPTY, envelope } from '../envelope.js';
import { acceptText } from '../json-body.js';
import { routeAuth } from '../auth-requirements.js';
import { actorOf, EmptySchema, IdParams, registerResourceRoutes } from '../resource-routes.js';

/** A verification certificate is one PEM block; this leaves room for explanatory text around it. */
const MAX_VERIFY_BODY = 64 * 1024;

export function casRoutes(server: FastifyInstance, core: Core): void {
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const cas = core.resources.get('cas');
  registerResourceRoutes(app, cas, core.resources.flavor);
  const tags = [cas.def.name];
  // The address enrollment JWTs name, as the controller registers itself (app.ts).
  const controllerUrl = `https://${core.config.web[0]?.bindPoints[0]?.address ?? 'localhost'}`;

  // The one route here that takes text/plain.
  app.register(async (plain) => {
    acceptText(plain);
    const scope = plain.withTypeProvider<TypeBoxTypeProvider>();
    scope.post('/cas/:id/verify', {
      config: { auth: routeAuth('ca', 'update') },
      schema: {
        operationId: 'verifyCa',
        tags,
        params: IdParams,
        consumes: ['text/plain'],
        body: Type.String({ maxLength: MAX_VERIFY_BODY, description: 'a PEM certificate signed by the CA whose common name is its verificationToken' }),
        response: { 200: EmptySchema },
      },
      handler: async (request) => {
        await verifyCa(core.resources, request.params.id, request.body, actorOf(request));
        return envelope(EMPTY);
      },
    });
  });

  app.get('/cas/:id/jwt', {
    config: { auth: routeAuth('ca', 'read') },
    schema: {
      operationId: 'getCaJwt',
      tags,
      params: IdParams,
      produces: ['application/jwt'],
      response: { 200: Type.String({ description: 'the enrollment JWT of the CA' }) },
    },
    handler: async (request, reply) => {
      const jwt = await caEnrollmentJwt(core.resources, core.oidc.keys, request.params.id, controllerUrl, core.clock());
      return reply.type('application/jwt').header('cache-control', 'no-store').send(jwt);
    },
  });
}
