// The audit log on the Management API: a list with the filter language and single events, for
// admins and admin_readonly callers (no permission group reaches it).
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { AuditEventSchema, type AuditLog } from '../../domain/audit-events.js';
import type { SqlFlavor } from '../../query/flavor.js';
import { routeAuth } from '../auth-requirements.js';
import { envelope } from '../envelope.js';
import { listMeta, parseList } from '../list.js';
import { dataEnvelopeSchema, IdParams, ListQuerySchema } from '../resource-routes.js';

export function auditEventsRoutes(server: FastifyInstance, log: AuditLog, flavor: SqlFlavor): void {
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: routeAuth(null, 'read') };
  const tags = ['audit-events'];

  app.get('/audit-events', {
    config,
    schema: {
      operationId: 'listAuditEvents',
      tags,
      querystring: ListQuerySchema,
      response: { 200: dataEnvelopeSchema(Type.Array(AuditEventSchema, { title: 'auditEventList' }), 'listAuditEventsEnvelope') },
    },
    handler: async (request) => {
      const list = parseList(request.query, log.filter, flavor);
      const { items, total } = await log.list(list.query);
      return envelope(items, listMeta(list, total, log.filter));
    },
  });

  app.get('/audit-events/:id', {
    config,
    schema: {
      operationId: 'detailAuditEvent',
      tags,
      params: IdParams,
      response: { 200: dataEnvelopeSchema(AuditEventSchema, 'detailAuditEventEnvelope') },
    },
    handler: async (request) => envelope(await log.get(request.params.id)),
  });
}
