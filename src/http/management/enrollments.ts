// Management routes of enrollments: the generic list / detail / create / delete, refreshing an
// enrollment's token, and reverting an authenticator to an enrollment.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Core } from '../../core/core.js';
import { allows } from '../../auth/permissions.js';
import { ApiError } from '../../errors.js';
import { routeAuth } from '../auth-requirements.js';
import { envelope } from '../envelope.js';
import { networkJwtRoutes } from '../enrollment-routes.js';
import { actorOf, CreatedSchema, IdParams, registerResourceRoutes } from '../resource-routes.js';

const ExpiresAtBody = (title: string) =>
  Type.Object({ expiresAt: Type.String({ format: 'date-time', maxLength: 64, description: 'when the new token stops being accepted' }) }, { title });

const NOT_PERMITTED = 'overlay-session realm="overlay-session" error="invalid" error_description="not permitted"';

function created(id: string) {
  return envelope({ id, _links: { self: { href: `./enrollments/${id}` } } });
}

export function enrollmentsRoutes(app: FastifyInstance, core: Core): void {
  const r = core.resources;
  registerResourceRoutes(app, r.get('enrollments'), r.flavor);
  networkJwtRoutes(app, core);

  app.post('/enrollments/:id/refresh', {
    config: { auth: routeAuth('enrollment', 'update') },
    schema: {
      operationId: 'refreshEnrollment',
      tags: ['enrollments'],
      params: IdParams,
      body: ExpiresAtBody('enrollmentRefresh'),
      response: { 200: CreatedSchema },
    },
    handler: async (request) => {
      const { id } = request.params as { id: string };
      await core.enrollments.refresh(id, (request.body as { expiresAt: string }).expiresAt, actorOf(request));
      return created(id);
    },
  });

  app.post('/authenticators/:id/re-enroll', {
    // It makes an enrollment, and deletes an identity's authenticator.
    config: { auth: routeAuth('enrollment', 'create') },
    schema: {
      operationId: 'reEnrollAuthenticator',
      tags: ['authenticators'],
      params: IdParams,
      body: ExpiresAtBody('reEnroll'),
      response: { 201: CreatedSchema },
    },
    handler: async (request, reply) => {
      requireIdentityDelete(request);
      const { id } = request.params as { id: string };
      const enrollmentId = await core.enrollments.revertAuthenticator(id, (request.body as { expiresAt: string }).expiresAt, actorOf(request));
      return reply.code(201).send(created(enrollmentId));
    },
  });
}

/** Beyond the route's own requirement: the caller may delete authenticators (the identity group's delete). */
function requireIdentityDelete(request: FastifyRequest): void {
  const identity = request.principal?.identity;
  if (identity && allows(identity, 'identity', 'delete')) return;
  throw new ApiError('UNAUTHORIZED', 'the caller is not permitted this operation', undefined, { 'www-authenticate': NOT_PERMITTED });
}
