// Management routes of the routers area: edge routers and their re-enrollment, routers (also served
// as transit routers), terminators, posture checks and their types (a service's terminators are a
// related list, related.ts).
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../core/core.js';
import { assertPostureCheckType, TypeIdBodySchema } from '../../domain/posture-checks.js';
import { roleFilterScope, RoleFilterQuery } from '../../domain/role-filter.js';
import { patchSchema, updateSchema } from '../../resources/kit.js';
import { routeAuth } from '../auth-requirements.js';
import { EMPTY, envelope } from '../envelope.js';
import {
  actorOf,
  EmptySchema,
  IdParams,
  operationId,
  registerResourceRoutes,
} from '../resource-routes.js';

export function routersRoutes(app: FastifyInstance, core: Core): void {
  const r = core.resources;
  const flavor = r.flavor;

  registerResourceRoutes(app, r.get('edge-routers'), flavor, {
    listQueryExtra: RoleFilterQuery,
    listScope: roleFilterScope('edge_routers', flavor),
  });
  // A new enrollment for an edge router; it is unverified until it enrolls again.
  app.post('/edge-routers/:id/re-enroll', {
    config: { auth: routeAuth('router', 'update') },
    schema: { operationId: 'reEnrollEdgeRouter', tags: ['edge-routers'], params: IdParams, response: { 200: EmptySchema } },
    handler: async (request) => {
      await core.routerEnrollments.reEnroll((request.params as { id: string }).id, actorOf(request));
      return envelope(EMPTY);
    },
  });
  registerResourceRoutes(app, r.get('routers'), flavor);
  registerResourceRoutes(app, r.get('transit-routers'), flavor);

  const terminators = r.get('terminators');
  registerResourceRoutes(app, terminators, flavor);

  registerResourceRoutes(app, r.get('posture-check-types'), flavor);

  // Posture checks: the generic routes, except that a patch and a full update name the check's
  // (unchangeable) typeId, as the body of each kind is shaped by it.
  const checks = r.get('posture-checks');
  registerResourceRoutes(app, checks, flavor, {
    operations: ['list', 'get', 'create', 'delete'],
    listQueryExtra: RoleFilterQuery,
    listScope: roleFilterScope('posture_checks', flavor),
  });
  // Named as the definition's own patch and update bodies, which they replace.
  const withTypeId = (base: ReturnType<typeof patchSchema>) =>
    Type.Object({ ...base.properties, typeId: TypeIdBodySchema }, { additionalProperties: true, title: base.title });
  for (const op of ['patch', 'update'] as const) {
    app.route({
      method: op === 'patch' ? 'PATCH' : 'PUT',
      url: '/posture-checks/:id',
      config: { auth: routeAuth(checks.def.permission, 'update') },
      schema: {
        operationId: operationId(checks, op),
        tags: [checks.def.name],
        params: IdParams,
        body: withTypeId(op === 'patch' ? patchSchema(checks.def) : updateSchema(checks.def)),
        response: { 200: EmptySchema },
      },
      handler: async (request) => {
        const { id } = request.params as { id: string };
        const body = request.body as Record<string, unknown>;
        await assertPostureCheckType(checks, id, body.typeId);
        if (op === 'patch') await checks.patch(id, body, actorOf(request));
        else await checks.update(id, body, actorOf(request));
        return envelope(EMPTY);
      },
    });
  }
}
