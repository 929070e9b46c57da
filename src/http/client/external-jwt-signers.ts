// The external JWT signers a client may authenticate with: the enabled ones, each with what a client
// needs to start a login at that provider (externalAuthUrl, clientId, scopes, targetToken). Filters
// and sorting see only these fields, so the list tells a caller nothing more of a signer.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Core } from '../../core/core.js';
import type { FilterSpec } from '../../resources/kit.js';
import { TagsSchema, LinksSchema } from '../../resources/kit.js';
import { TARGET_TOKENS } from '../../resources/external-jwt-signers.js';
import { listEnabledSigners } from '../../domain/external-jwt-signers.js';
import { SESSION } from '../auth-requirements.js';
import { envelope } from '../envelope.js';
import { listMeta, parseList } from '../list.js';
import { dataEnvelopeSchema, ListQuerySchema } from '../resource-routes.js';

const SIGNER_FILTER: FilterSpec = {
  symbols: new Map([
    ['id', { name: 'id', type: 'string', column: 'id' }],
    ['createdAt', { name: 'createdAt', type: 'datetime', column: 'created_at' }],
    ['updatedAt', { name: 'updatedAt', type: 'datetime', column: 'updated_at' }],
    ['tags', { name: 'tags', type: 'tags', column: 'tags' }],
    ['name', { name: 'name', type: 'string', column: 'name' }],
  ]),
  sortable: new Set(['id', 'createdAt', 'updatedAt', 'name']),
  fields: ['id', 'createdAt', 'updatedAt', 'tags', 'name'],
};

const nullable = <T extends ReturnType<typeof Type.String>>(s: T) => Type.Union([s, Type.Null()]);

const ClientSignerSchema = Type.Object(
  {
    _links: LinksSchema,
    id: Type.String(),
    createdAt: Type.String({ format: 'date-time' }),
    updatedAt: Type.String({ format: 'date-time' }),
    tags: TagsSchema,
    name: Type.String(),
    audience: nullable(Type.String()),
    clientId: nullable(Type.String()),
    externalAuthUrl: nullable(Type.String()),
    scopes: Type.Array(Type.String()),
    targetToken: Type.Union(TARGET_TOKENS.map((t) => Type.Literal(t))),
    enrollToCertEnabled: Type.Boolean(),
    enrollToTokenEnabled: Type.Boolean(),
  },
  { title: 'clientExternalJwtSignerDetail' },
);

const CLIENT_FIELDS = Object.keys(ClientSignerSchema.properties);

export function clientExternalJwtSignersRoutes(server: FastifyInstance, core: Pick<Core, 'resources'>): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  app.get('/external-jwt-signers', {
    config: { auth: SESSION },
    schema: {
      operationId: 'listExternalJwtSigners',
      tags: ['external-jwt-signers'],
      querystring: ListQuerySchema,
      response: { 200: dataEnvelopeSchema(Type.Array(ClientSignerSchema), 'listClientExternalJwtSignersEnvelope') },
    },
    handler: async (request) => {
      const list = parseList(request.query, SIGNER_FILTER, core.resources.flavor);
      const { items, total } = await listEnabledSigners(core.resources, list.query);
      const shown = items.map((answer) => Object.fromEntries(CLIENT_FIELDS.map((f) => [f, answer[f]])));
      return envelope(shown, listMeta(list, total, SIGNER_FILTER));
    },
  });
}
