// Management routes of the operations area: revocations, controller settings (with the effective
// setting of a controller), the controllers list and the resource counts.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Core } from '../../core/core.js';
import { iso } from '../../clock.js';
import { builtInControllerSettings, countRecords, effectiveControllerSetting, revoke } from '../../domain/operations.js';
import { createSchema, DateTimeSchema, LinksSchema, TagsSchema } from '../../resources/kit.js';
import { envelope } from '../envelope.js';
import { routeAuth } from '../auth-requirements.js';
import { actorOf, CreatedSchema, dataEnvelopeSchema, IdParams, registerResourceRoutes } from '../resource-routes.js';

const UriList = Type.Array(Type.String());

const EffectiveSettingSchema = Type.Object({
  _links: LinksSchema,
  id: Type.String(),
  createdAt: DateTimeSchema,
  updatedAt: DateTimeSchema,
  tags: TagsSchema,
  controllerId: Type.String(),
  effective: Type.Object(
    { oidc: Type.Object({ redirectUris: UriList, postLogoutUris: UriList }, { additionalProperties: true }) },
    { description: 'the values in force: built-in, overlaid by the global setting, then by the controller’s own' },
  ),
  instance: Type.Object(
    { oidc: Type.Object({ redirectUris: Type.Optional(UriList), postLogoutUris: Type.Optional(UriList) }) },
    { description: 'what the setting of this id itself says' },
  ),
  sources: Type.Array(Type.String(), { description: 'the layers merged, in order: built-in, global, the controller id' }),
}, { title: 'controllerSettingEffective' });


const SummarySchema = Type.Record(Type.String(), Type.Integer(), {
  description: 'collection name → number of records',
  title: 'listSummaryCounts',
});

export function operationsRoutes(server: FastifyInstance, core: Core): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const r = core.resources;
  const flavor = r.flavor;
  const settings = r.get('controller-settings');
  // Revocations: the generic list and detail; create also renews (see revoke).
  const revocations = r.get('revocations');
  registerResourceRoutes(app, revocations, flavor, { operations: ['list', 'get'] });
  app.post('/revocations', {
    config: { auth: routeAuth(revocations.def.permission, 'create') },
    schema: {
      operationId: 'createRevocation',
      tags: [revocations.def.name],
      body: createSchema(revocations.def),
      response: { 201: CreatedSchema },
    },
    handler: async (request, reply) => {
      const entity = await revoke(r, core.config.edge.oidc, request.body, actorOf(request));
      void reply.code(201);
      return envelope({ id: entity.id, _links: { self: { href: `./${revocations.def.name}/${entity.id}` } } });
    },
  });
  registerResourceRoutes(app, settings, flavor);
  registerResourceRoutes(app, r.get('controllers'), flavor);

  const builtIn = { values: builtInControllerSettings(core.config.web), at: iso(core.clock()) };
  app.get('/controller-settings/:id/effective', {
    config: { auth: routeAuth(settings.def.permission, 'read') },
    schema: {
      operationId: 'detailControllerSettingEffective',
      tags: [settings.def.name],
      params: IdParams,
      response: { 200: dataEnvelopeSchema(EffectiveSettingSchema, 'detailControllerSettingEffectiveEnvelope') },
    },
    handler: async (request) =>
      envelope(await effectiveControllerSetting(r, builtIn, request.params.id)),
  });

  app.get('/summary', {
    config: { auth: routeAuth(null, 'read') },
    schema: {
      operationId: 'listSummary',
      tags: ['informational'],
      response: { 200: dataEnvelopeSchema(SummarySchema, 'listSummaryCountsEnvelope') },
    },
    handler: async () => envelope(await countRecords(r)),
  });
}
