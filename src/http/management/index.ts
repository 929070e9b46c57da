// The Edge Management API's own routes (beyond the informational ones).
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../core/core.js';
import { disableIdentity, enableIdentity, removeIdentityMfa } from '../../domain/identities.js';
import { roleFilterScope, RoleFilterQuery } from '../../domain/role-filter.js';
import { EMPTY, envelope } from '../envelope.js';
import { routeAuth } from '../auth-requirements.js';
import { edgeAuthRoutes } from '../edge-auth-routes.js';
import { mfaRoutes } from '../mfa-routes.js';
import { casRoutes } from './cas.js';
import { enrollmentsRoutes } from './enrollments.js';
import { operationsRoutes } from './operations.js';
import { policiesRoutes } from './policies.js';
import { relatedRoutes } from './related.js';
import { routersRoutes } from './routers.js';
import { databaseRoutes } from './database.js';
import { identityTracingRoutes } from './tracing.js';
import { servicesRoutes } from './services.js';
import { managementSessionsRoutes } from './sessions.js';
import { auditEventsRoutes } from './audit-events.js';
import { actorOf, EmptySchema, IdParams, registerResourceRoutes } from '../resource-routes.js';

export function managementRoutes(app: FastifyInstance, core: Core): void {
  const r = core.resources;
  const flavor = r.flavor;
  edgeAuthRoutes(app, core);
  mfaRoutes(app, core);
  registerResourceRoutes(app, r.get('identity-types'), flavor);
  registerResourceRoutes(app, r.get('auth-policies'), flavor);
  registerResourceRoutes(app, r.get('identities'), flavor, {
    listQueryExtra: RoleFilterQuery,
    listScope: roleFilterScope('identities', flavor),
  });
  registerResourceRoutes(app, r.get('authenticators'), flavor);
  casRoutes(app, core);
  registerResourceRoutes(app, r.get('external-jwt-signers'), flavor);
  registerResourceRoutes(app, r.get('api-sessions'), flavor);
  enrollmentsRoutes(app, core);
  policiesRoutes(app, core);
  servicesRoutes(app, core);
  routersRoutes(app, core);
  operationsRoutes(app, core);
  relatedRoutes(app, core);
  databaseRoutes(app, core);
  identityTracingRoutes(app, core);
  auditEventsRoutes(app, core.auditLog, flavor);
  managementSessionsRoutes(app, {
    flavor,
    sessions: core.client.sessions,
    posture: core.client.posture,
    identities: r.get('identities'),
  });

  app.post('/identities/:id/disable', {
    config: { auth: routeAuth('identity', 'update') },
    schema: {
      operationId: 'disableIdentity',
      tags: ['identities'],
      params: IdParams,
      body: Type.Object({ durationMinutes: Type.Integer({ minimum: 0, maximum: 5_256_000 }) }, { title: 'disableParams' }),
      response: { 200: EmptySchema },
    },
    handler: async (request) => {
      const { id } = request.params as { id: string };
      const { durationMinutes } = request.body as { durationMinutes: number };
      await disableIdentity(r, core.clock, id, durationMinutes, actorOf(request));
      return envelope(EMPTY);
    },
  });

  app.post('/identities/:id/enable', {
    config: { auth: routeAuth('identity', 'update') },
    schema: { operationId: 'enableIdentity', tags: ['identities'], params: IdParams, response: { 200: EmptySchema } },
    handler: async (request) => {
      await enableIdentity(r, (request.params as { id: string }).id, actorOf(request));
      return envelope(EMPTY);
    },
  });

  app.post('/authenticators/:id/request-extend', {
    config: { auth: routeAuth('identity', 'update') },
    schema: {
      operationId: 'requestExtendAuthenticator',
      tags: ['authenticators'],
      params: IdParams,
      body: Type.Object(
        { rollKeys: Type.Optional(Type.Boolean({ description: 'the client should also make a new key' })) },
        { title: 'requestExtendAuthenticator' },
      ),
      response: { 200: EmptySchema },
    },
    handler: async (request) => {
      const { id } = request.params as { id: string };
      const { rollKeys } = request.body as { rollKeys?: boolean };
      await core.certificateExtension.request(id, rollKeys === true, actorOf(request));
      return envelope(EMPTY);
    },
  });

  app.delete('/identities/:id/mfa', {
    config: { auth: routeAuth('identity', 'update') },
    schema: { operationId: 'removeIdentityMfa', tags: ['identities'], params: IdParams, response: { 200: EmptySchema } },
    handler: async (request) => {
      await removeIdentityMfa(r, (request.params as { id: string }).id, actorOf(request));
      return envelope(EMPTY);
    },
  });
}
