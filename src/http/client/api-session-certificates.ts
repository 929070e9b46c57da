// /current-api-session/certificates on the Client API: the caller's API session lists, creates (for
// a CSR), reads and deletes its own short-lived client certificates (domain/api-session-certificates.ts).
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ApiSessionCertificates } from '../../domain/api-session-certificates.js';
import type { ResourceService } from '../../domain/resources.js';
import { MAX_CSR_PEM } from '../../pki/index.js';
import type { SqlFlavor } from '../../query/flavor.js';
import { LinksSchema } from '../../resources/kit.js';
import { SESSION } from '../auth-requirements.js';
import { principalOf } from '../credentials.js';
import { EMPTY, envelope } from '../envelope.js';
import { listMeta, parseList } from '../list.js';
import { named } from '../openapi.js';
import { dataEnvelopeSchema, EmptySchema, IdParams, ListQuerySchema } from '../resource-routes.js';

export interface ApiSessionCertificateRouteDeps {
  flavor: SqlFlavor;
  certificates: ApiSessionCertificates;
  /** The resource of the certificates: its read schema and filter fields. */
  resource: ResourceService;
}

export function apiSessionCertificateRoutes(server: FastifyInstance, { flavor, certificates, resource }: ApiSessionCertificateRouteDeps): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['current-api-session'];
  const detail = named(resource.read, 'currentApiSessionCertificateDetail');

  app.get('/current-api-session/certificates', {
    config: { auth: SESSION },
    schema: {
      operationId: 'listCurrentApiSessionCertificates',
      tags,
      querystring: ListQuerySchema,
      response: {
        200: dataEnvelopeSchema(Type.Array(detail, { title: 'currentApiSessionCertificateList' }), 'listCurrentApiSessionCertificatesEnvelope'),
      },
    },
    handler: async (request) => {
      const list = parseList(request.query, resource.filter, flavor);
      const { items, total } = await certificates.list(principalOf(request).session.id, list.query);
      return envelope(items, listMeta(list, total, resource.filter));
    },
  });

  app.post('/current-api-session/certificates', {
    config: { auth: SESSION },
    schema: {
      operationId: 'createCurrentApiSessionCertificate',
      tags,
      body: Type.Object(
        { csr: Type.String({ minLength: 1, maxLength: MAX_CSR_PEM, description: 'PEM CSR; the client keeps the private key' }) },
        { title: 'currentApiSessionCertificateCreate' },
      ),
      response: {
        201: dataEnvelopeSchema(
          Type.Object(
            {
              id: Type.String(),
              _links: LinksSchema,
              certificate: Type.String({ description: 'the PEM certificate and the signing CA' }),
              cas: Type.String({ description: 'the PEM CA certificates to trust' }),
            },
            { title: 'currentApiSessionCertificateCreateResponse' },
          ),
          'createCurrentApiSessionCertificateEnvelope',
        ),
      },
    },
    handler: async (request, reply) => {
      const { session, identity } = principalOf(request);
      const created = await certificates.create({ id: session.id, identityId: identity.id }, request.body.csr);
      void reply.code(201);
      return envelope(created);
    },
  });

  app.get('/current-api-session/certificates/:id', {
    config: { auth: SESSION },
    schema: {
      operationId: 'detailCurrentApiSessionCertificate',
      tags,
      params: IdParams,
      response: { 200: dataEnvelopeSchema(detail, 'detailCurrentApiSessionCertificateEnvelope') },
    },
    handler: async (request) => envelope(await certificates.get(principalOf(request).session.id, request.params.id)),
  });

  app.delete('/current-api-session/certificates/:id', {
    config: { auth: SESSION },
    schema: { operationId: 'deleteCurrentApiSessionCertificate', tags, params: IdParams, response: { 200: EmptySchema } },
    handler: async (request) => {
      await certificates.delete(principalOf(request).session.id, request.params.id);
      return envelope(EMPTY);
    },
  });
}
