// Informational endpoints of both Edge APIs: root, version, capabilities, protocols, specs and the
// EST CA certificates. Answers that never change are rendered once per listener.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { iso } from '../clock.js';
import { notFound } from '../errors.js';
import type { ApiBinding, ListenerConfig } from '../config/index.js';
import type { Core } from '../core/core.js';
import { envelope } from './envelope.js';
import { LinksSchema } from '../resources/kit.js';
import { dataEnvelopeSchema } from './resource-routes.js';
import { PUBLIC } from './auth-requirements.js';

export const EDGE_API_PATHS: Record<ApiBinding, string> = {
  'edge-client': '/edge/client/v1',
  'edge-management': '/edge/management/v1',
  'edge-oidc': '/oidc',
};

export const API_NAMES: Record<ApiBinding, string> = {
  'edge-client': 'Edge Client API',
  'edge-management': 'Edge Management API',
  'edge-oidc': 'OIDC API',
};

/** Capabilities this controller knows, enabled or not. */
export const CAPABILITIES = ['OIDC_AUTH', 'HA_CONTROLLER'] as const;

/** Bindings this build serves. */
export const SERVED_BINDINGS: readonly ApiBinding[] = ['edge-client', 'edge-management', 'edge-oidc'];

export function versionRecord(core: Core): Record<string, unknown> {
  const apiVersions: Record<string, unknown> = {};
  for (const binding of SERVED_BINDINGS) {
    const urls = core.config.web
      .filter((l) => l.apis.some((a) => a.binding === binding))
      .flatMap((l) => l.bindPoints.map((b) => `https://${b.address}${EDGE_API_PATHS[binding]}`));
    if (urls.length > 0) apiVersions[binding] = { v1: { path: EDGE_API_PATHS[binding], version: 'v1', apiBaseUrls: urls } };
  }
  return {
    version: core.build.version,
    revision: core.build.revision,
    buildDate: core.build.buildDate,
    runtimeVersion: core.build.runtimeVersion,
    capabilities: core.capabilities(),
    apiVersions,
  };
}

const JSON_TYPE = 'application/json; charset=utf-8';

// The answers, declared for the OpenAPI documents (the routes send text rendered once).
const ApiVersionSchema = Type.Object(
  { path: Type.String(), version: Type.String(), apiBaseUrls: Type.Array(Type.String()) },
  { title: 'apiVersion' },
);
const VersionSchema = Type.Object(
  {
    version: Type.String(),
    revision: Type.String(),
    buildDate: Type.String(),
    runtimeVersion: Type.String(),
    capabilities: Type.Array(Type.String()),
    apiVersions: Type.Record(Type.String(), Type.Record(Type.String(), ApiVersionSchema), {
      description: 'binding → API version → where it is served',
    }),
  },
  { title: 'version' },
);
const SpecSchema = Type.Object({ id: Type.String(), name: Type.String(), _links: LinksSchema }, { title: 'specDetail' });
const ProtocolsSchema = Type.Record(Type.String(), Type.Object({ address: Type.String() }, { title: 'protocol' }), {
  title: 'listProtocols',
  description: 'protocol → the address it is served at',
});
const Version = dataEnvelopeSchema(VersionSchema, 'listVersionEnvelope');
/** The document itself (not in an envelope), as JSON or, asked for with Accept, as YAML text. */
const SpecBodySchema = Type.Object({}, { additionalProperties: true, title: 'specBody', description: 'the OpenAPI document' });

export function registerInfoRoutes(
  server: FastifyInstance,
  core: Core,
  binding: ApiBinding,
  listener: ListenerConfig,
  address: string,
): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const config = { auth: PUBLIC };
  const version = JSON.stringify(envelope(versionRecord(core)));
  const capabilities = JSON.stringify(envelope([...CAPABILITIES]));
  const protocols = JSON.stringify(envelope({ https: { address } }));
  const specId = binding;
  // The document is made by the build; a checkout run without build information made it at start.
  const madeAt = Number.isNaN(Date.parse(core.build.buildDate)) ? iso(core.clock()) : iso(Date.parse(core.build.buildDate));
  const spec = {
    id: specId,
    name: API_NAMES[binding],
    _links: { self: { href: `./specs/${specId}` }, spec: { href: `./specs/${specId}/spec` } },
    createdAt: madeAt,
    updatedAt: madeAt,
    tags: {},
  };
  const specs = JSON.stringify(envelope([spec]));
  const specOne = JSON.stringify(envelope(spec));
  void listener;

  const tags = ['informational'];
  app.get('/', { config, schema: { operationId: 'listRoot', tags, response: { 200: Version } } }, (_req, reply) =>
    reply.type(JSON_TYPE).send(version),
  );
  app.get('/version', { config, schema: { operationId: 'listVersion', tags, response: { 200: Version } } }, (_req, reply) =>
    reply.type(JSON_TYPE).send(version),
  );
  app.get(
    '/enumerated-capabilities',
    {
      config,
      schema: {
        operationId: 'listEnumeratedCapabilities',
        tags,
        response: { 200: dataEnvelopeSchema(Type.Array(Type.String()), 'listEnumeratedCapabilitiesEnvelope') },
      },
    },
    (_req, reply) => reply.type(JSON_TYPE).send(capabilities),
  );
  app.get(
    '/protocols',
    { config, schema: { operationId: 'listProtocols', tags, response: { 200: dataEnvelopeSchema(ProtocolsSchema, 'listProtocolsEnvelope') } } },
    (_req, reply) => reply.type(JSON_TYPE).send(protocols),
  );
  app.get(
    '/specs',
    { config, schema: { operationId: 'listSpecs', tags, response: { 200: dataEnvelopeSchema(Type.Array(SpecSchema), 'listSpecsEnvelope') } } },
    (_req, reply) => reply.type(JSON_TYPE).send(specs),
  );
  const SpecParams = Type.Object({ id: Type.String({ maxLength: 64 }) });
  app.get(
    '/specs/:id',
    {
      config,
      schema: { operationId: 'detailSpec', tags, params: SpecParams, response: { 200: dataEnvelopeSchema(SpecSchema, 'detailSpecEnvelope') } },
    },
    (req, reply) => {
      if (req.params.id !== specId) throw notFound('spec', req.params.id);
      return reply.type(JSON_TYPE).send(specOne);
    },
  );
  // The document is fixed once the routes are: written out once (about 450 KB, milliseconds each time),
  // not for every caller, who needs no credential to ask.
  const specText: { json?: string; yaml?: string } = {};
  app.get(
    '/specs/:id/spec',
    {
      config,
      schema: {
        operationId: 'detailSpecBody',
        tags,
        params: SpecParams,
        produces: ['application/json', 'text/yaml'],
        response: { 200: SpecBodySchema },
      },
    },
    (req, reply) => {
      if (req.params.id !== specId) throw notFound('spec', req.params.id);
      const accept = req.headers.accept ?? '';
      // The form follows Accept, so a cache keeps one answer per Accept.
      void reply.header('vary', 'accept');
      if (/yaml/i.test(accept)) return reply.type('text/yaml; charset=utf-8').send((specText.yaml ??= app.swagger({ yaml: true })));
      return reply.type(JSON_TYPE).send((specText.json ??= JSON.stringify(app.swagger())));
    },
  );
  app.get(
    '/.well-known/est/cacerts',
    {
      config,
      schema: {
        operationId: 'listWellKnownCas',
        tags: ['well-known'],
        produces: ['application/pkcs7-mime'],
        response: { 200: Type.String({ description: 'the CA certificates, a base64 encoded PKCS #7 bundle' }) },
      },
    },
    (_req, reply) => {
      void reply.type('application/pkcs7-mime').header('content-transfer-encoding', 'base64').send(core.pki.cacertsPkcs7Base64);
    },
  );
}
