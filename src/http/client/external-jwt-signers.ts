// The external JWT signers a client may authenticate with. No signer exists until external JWT
// signers are implemented: the list is always empty, with its list parameters checked.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { SqlFlavor } from '../../query/flavor.js';
import type { FilterSpec } from '../../resources/kit.js';
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

export function clientExternalJwtSignersRoutes(server: FastifyInstance, { flavor }: { flavor: SqlFlavor }): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  app.get('/external-jwt-signers', {
    config: { auth: SESSION },
    schema: {
      operationId: 'listExternalJwtSigners',
      tags: ['external-jwt-signers'],
      querystring: ListQuerySchema,
      response: {
        200: dataEnvelopeSchema(
          Type.Array(Type.Object({}, { additionalProperties: true, title: 'clientExternalJwtSignerDetail' })),
          'listClientExternalJwtSignersEnvelope',
        ),
      },
    },
    handler: async (request) => {
      const list = parseList(request.query, SIGNER_FILTER, flavor);
      return envelope([], listMeta(list, 0, SIGNER_FILTER));
    },
  });
}
