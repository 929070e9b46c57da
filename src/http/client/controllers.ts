// The controllers list of the Edge Client API: any authenticated caller may learn which controllers
// serve the network (SDKs use it to find the others).
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ResourceService } from '../../domain/resources.js';
import type { SqlFlavor } from '../../query/flavor.js';
import { readSchema } from '../../resources/kit.js';
import { SESSION } from '../auth-requirements.js';
import { envelope } from '../envelope.js';
import { listMeta, parseList } from '../list.js';
import { listEnvelopeSchema, ListQuerySchema } from '../resource-routes.js';

export interface ClientControllersRouteDeps {
  flavor: SqlFlavor;
  controllers: ResourceService;
}

export function clientControllersRoutes(server: FastifyInstance, { flavor, controllers }: ClientControllersRouteDeps): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  app.get('/controllers', {
    config: { auth: SESSION },
    schema: {
      operationId: 'listControllers',
      tags: [controllers.def.name],
      querystring: ListQuerySchema,
      response: { 200: listEnvelopeSchema(controllers.def, readSchema(controllers.def)) },
    },
    handler: async (request) => {
      const list = parseList(request.query, controllers.filter, flavor);
      const { items, total } = await controllers.list(list.query);
      return envelope(items, listMeta(list, total, controllers.filter));
    },
  });
}
