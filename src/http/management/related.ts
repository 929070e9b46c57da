// Related lists of the management API (`/<collection>/{id}/<related>`, as the definitions declare
// them), policy advice and the role attribute lists.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Core } from '../../core/core.js';
import { allows } from '../../auth/permissions.js';
import { policyAdvice } from '../../domain/advice.js';
import {
  listRoleAttributes,
  listUsedRoleAttributes,
  parsePolicyType,
  RELATIONS,
  ROLE_ATTRIBUTE_FILTER,
  ROLE_ATTRIBUTE_KINDS,
  roleAttributeUsage,
} from '../../domain/related.js';
import { ApiError } from '../../errors.js';
import { EntityRefSchema } from '../../resources/kit.js';
import { routeAuth } from '../auth-requirements.js';
import { envelope } from '../envelope.js';
import { listMeta, parseList } from '../list.js';
import { dataEnvelopeSchema, filterOf, IdParams, listEnvelopeSchema, ListQuerySchema, readOptionsOf } from '../resource-routes.js';

const PolicyTypeQuery = Type.Composite(
  [ListQuerySchema, Type.Object({ policyType: Type.Optional(Type.String({ description: 'dial or bind; absent: either' })) })],
  { additionalProperties: true },
);

/** `edge-router-policies` → `edge router policies`. */
const words = (collection: string) => collection.replace(/-/g, ' ');

const RoleAttributeUsageQuery = Type.Composite(
  [
    ListQuerySchema,
    Type.Object({ withIds: Type.Optional(Type.Boolean({ description: 'list the ids of each use (default false)' })) }),
  ],
  { additionalProperties: true },
);

const RoleAttributeUsageSchema = Type.Object(
  {
    roleAttribute: Type.String(),
    usage: Type.Record(
      Type.String(),
      Type.Object({ count: Type.Integer(), ids: Type.Optional(Type.Array(Type.String())) }),
      {
        description:
          'per kind of entity or policy that refers to the attribute (identities, edgeRouters, services, postureChecks, ' +
          'servicePolicies, edgeRouterPolicies, serviceEdgeRouterPolicies); a kind that does not is left out',
      },
    ),
  },
  { title: 'roleAttributeUsage' },
);

const PolicyAdviceSchema = Type.Object(
  {
    identityId: Type.String(),
    identity: EntityRefSchema,
    serviceId: Type.String(),
    service: EntityRefSchema,
    isDialAllowed: Type.Boolean(),
    isBindAllowed: Type.Boolean(),
    identityRouterCount: Type.Integer(),
    serviceRouterCount: Type.Integer(),
    commonRouters: Type.Array(Type.Composite([EntityRefSchema, Type.Object({ isOnline: Type.Boolean() })], { title: 'routerEntityRef' })),
  },
  { title: 'policyAdvice' },
);

const NOT_PERMITTED = 'overlay-session realm="overlay-session" error="invalid" error_description="not permitted"';

/** Beyond the route's own requirement: the caller may also read each of `groups`. */
function requireRead(request: FastifyRequest, groups: readonly string[]): void {
  const identity = request.principal?.identity;
  if (identity && groups.every((g) => allows(identity, g, 'read'))) return;
  throw new ApiError('UNAUTHORIZED', 'the caller is not permitted this operation', undefined, {
    'www-authenticate': NOT_PERMITTED,
  });
}

export function relatedRoutes(app: FastifyInstance, core: Core): void {
  const r = core.resources;
  const flavor = r.flavor;

  for (const rel of RELATIONS) {
    const parent = r.get(rel.parent);
    const child = r.get(rel.child);
    app.get(`/${rel.parent}/:id/${rel.sub}`, {
      config: { auth: routeAuth(rel.permission, 'read') },
      schema: {
        operationId: rel.operationId,
        tags: [rel.parent],
        params: IdParams,
        querystring: rel.policyType ? PolicyTypeQuery : ListQuerySchema,
        // The listed resource's read schema: an entity reads here as in its own list.
        response: { 200: listEnvelopeSchema(child.def, child.read) },
      },
      handler: async (request) => {
        const { id } = request.params as { id: string };
        const query = request.query as Record<string, unknown>;
        const filter = filterOf(request, child);
        const list = parseList(query, filter, flavor);
        const type = rel.policyType ? parsePolicyType(query.policyType) : undefined;
        await parent.ensureExists(id);
        const { items, total } = await child.list({ ...list.query, scope: rel.scope(id, type) }, undefined, readOptionsOf(request));
        return envelope(items, listMeta(list, total, filter));
      },
    });
  }

  app.get('/identities/:id/policy-advice/:serviceId', {
    config: { auth: routeAuth('identity', 'read') },
    schema: {
      operationId: 'getIdentityPolicyAdvice',
      tags: ['identities'],
      params: Type.Object({
        id: Type.String({ minLength: 1, maxLength: 255 }),
        serviceId: Type.String({ minLength: 1, maxLength: 255 }),
      }),
      response: { 200: dataEnvelopeSchema(PolicyAdviceSchema, 'getIdentityPolicyAdviceEnvelope') },
    },
    handler: async (request) => {
      // The answer names the service and edge routers too.
      requireRead(request, ['service', 'router']);
      const { id, serviceId } = request.params as { id: string; serviceId: string };
      return envelope(await policyAdvice(r, id, serviceId));
    },
  });

  for (const spec of ROLE_ATTRIBUTE_KINDS) {
    const tags = ['role-attributes'];
    app.get(`/${spec.prefix}-role-attributes`, {
      config: { auth: routeAuth(spec.group, 'read') },
      schema: {
        operationId: `list${spec.name}RoleAttributes`,
        description: `The distinct role attributes ${words(spec.collection)} carry.`,
        tags,
        querystring: ListQuerySchema,
        response: { 200: dataEnvelopeSchema(Type.Array(Type.String(), { title: 'roleAttributesList' }), 'listRoleAttributesEnvelope') },
      },
      handler: async (request) => {
        const list = parseList(request.query as Record<string, unknown>, ROLE_ATTRIBUTE_FILTER, flavor);
        const { items, total } = await listRoleAttributes(r, spec.kind, list.query);
        return envelope(items, listMeta(list, total, ROLE_ATTRIBUTE_FILTER));
      },
    });

    app.get(`/${spec.prefix}-role-attribute-usage`, {
      config: { auth: routeAuth(spec.group, 'read') },
      schema: {
        operationId: `list${spec.name}RoleAttributeUsage`,
        description:
          `Every role attribute ${words(spec.collection)} carry or ${spec.policies.map((p) => words(p.collection)).join(' or ')} name, ` +
          `with its usage by each that refers to it (keys ${[spec, ...spec.policies].map((p) => p.source).join(', ')}).`,
        tags,
        querystring: RoleAttributeUsageQuery,
        response: { 200: dataEnvelopeSchema(Type.Array(RoleAttributeUsageSchema), 'listRoleAttributeUsageEnvelope') },
      },
      handler: async (request) => {
        const query = request.query as Record<string, unknown>;
        const list = parseList(query, ROLE_ATTRIBUTE_FILTER, flavor);
        const { items, total } = await listUsedRoleAttributes(r, spec, list.query);
        const usage = await roleAttributeUsage(r, spec, items, query.withIds === true);
        return envelope(usage, listMeta(list, total, ROLE_ATTRIBUTE_FILTER));
      },
    });
  }
}
