// Routes both Edge APIs share: authenticate, the current API session and the current identity
// with its own authenticators (their changes, and the extension of a certificate one).
import { Type, type TObject } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ApiError, fieldError } from '../errors.js';
import type { Core } from '../core/core.js';
import { checkCurrentPassword, login, LOGIN_METHODS, type LoginMethod } from '../auth/login.js';
import { certExtensionFlagsOf, sessionAnswer, SessionAnswerSchema } from '../domain/api-sessions.js';
import { secondFactorOutstanding } from '../auth/ext-jwt-factor.js';
import { changeOwnAuthenticator, listOwnAuthenticators, ownAuthenticatorAnswer } from '../domain/authenticators.js';
import { ENV_INFO_KEYS, EnvInfoSchema, SDK_INFO_KEYS, SdkInfoSchema } from '../resources/identities.js';
import { patchSchema, updateSchema, MAX_NAME } from '../resources/kit.js';
import { authenticators as authenticatorsDef, MAX_CERT_PEM } from '../resources/authenticators.js';
import { MAX_CSR_PEM } from '../pki/index.js';
import { EMPTY, envelope } from './envelope.js';
import { PARTIAL_SESSION, PUBLIC, SESSION } from './auth-requirements.js';
import { bearerToken, expiryHeaders, peerCertificate, peerCertificates, presentedSessionToken, principalOf } from './credentials.js';
import { listMeta, parseList } from './list.js';
import { named } from './openapi.js';
import {
  actorOf,
  dataEnvelopeSchema,
  detailEnvelopeSchema,
  EmptySchema,
  IdParams,
  listEnvelopeSchema,
  ListQuerySchema,
} from './resource-routes.js';

/**
 * What a client reports of itself at login: the keys the interface names, checked as stored, and any
 * others a newer SDK sends, bounded and then dropped (the established controller ignores them; a
 * refusal would keep that SDK from logging in).
 */
const reported = (known: TObject) =>
  Type.Object(known.properties, {
    additionalProperties: Type.Union([Type.String({ maxLength: 255 }), Type.Number(), Type.Boolean(), Type.Null()]),
    maxProperties: 32,
  });

const AuthenticateBody = Type.Object(
  {
    username: Type.Optional(Type.String({ minLength: 4, maxLength: 100 })),
    password: Type.Optional(Type.String({ minLength: 5, maxLength: 100 })),
    configTypes: Type.Optional(Type.Array(Type.String({ maxLength: MAX_NAME }), { maxItems: 100 })),
    envInfo: Type.Optional(reported(EnvInfoSchema)),
    sdkInfo: Type.Optional(reported(SdkInfoSchema)),
  },
  { additionalProperties: true, title: 'authenticate' },
);

/** The keys of a report the interface names. */
function known(report: Record<string, unknown> | undefined, keys: readonly string[]): Record<string, string> | undefined {
  if (!report) return undefined;
  return Object.fromEntries(keys.filter((k) => typeof report[k] === 'string').map((k) => [k, report[k] as string]));
}

const AuthenticateQuery = Type.Object({ method: Type.Optional(Type.String({ maxLength: 32 })) }, { additionalProperties: true });


const WithCurrent = { currentPassword: Type.String({ minLength: 5, maxLength: 100 }) };

function isLoginMethod(method: string): method is LoginMethod {
  return LOGIN_METHODS.some((m) => m === method);
}

export function edgeAuthRoutes(server: FastifyInstance, core: Core): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const serialisedIdentities = new WeakMap<object, string>();
  const authenticatorRead = core.resources.get('authenticators').read;
  const identities = core.resources.get('identities');
  const tags = ['authentication'];
  // The caller's API session; the answer of authenticate also carries its token.
  const CurrentSession = dataEnvelopeSchema(named(SessionAnswerSchema, 'currentApiSessionDetail'), 'currentApiSessionDetailEnvelope');

  app.post('/authenticate', {
    config: { auth: PUBLIC },
    schema: {
      operationId: 'authenticate',
      tags,
      querystring: AuthenticateQuery,
      // None at all for a certificate login (an empty body is none; see json-body.ts).
      body: Type.Union([AuthenticateBody, Type.Null()]),
      response: { 200: CurrentSession },
    },
    handler: async (request, reply) => {
      const method = request.query.method;
      if (!method || !isLoginMethod(method)) {
        throw new ApiError('INVALID_AUTH_METHOD', `method must be one of ${LOGIN_METHODS.join(', ')}`, {
          field: 'method',
          reason: `must be one of ${LOGIN_METHODS.join(', ')}`,
          value: method ?? null,
        });
      }
      const body = (request.body ?? {}) as {
        username?: string;
        password?: string;
        configTypes?: string[];
        envInfo?: Record<string, unknown>;
        sdkInfo?: Record<string, unknown>;
      };
      if (method === 'password') {
        if (body.username === undefined) throw fieldError('username', 'is required');
        if (body.password === undefined) throw fieldError('password', 'is required');
      }
      const result = await login(core, {
        method,
        username: body.username,
        password: body.password,
        ...peerCertificates(request),
        bearer: bearerToken(request.headers.authorization),
        ipAddress: request.ip,
        configTypes: [...new Set(body.configTypes ?? [])],
        envInfo: known(body.envInfo, ENV_INFO_KEYS),
        sdkInfo: known(body.sdkInfo, SDK_INFO_KEYS),
      });
      reply.header('overlay-session', result.token).header('cache-control', 'no-store');
      expiryHeaders(core, reply, result.session);
      const isTotpEnrolled = result.session.isMfaRequired && (await core.mfa.isEnrolled(result.identity.id));
      const flags = await certExtensionFlagsOf(core.store.db, result.session.authMethod === 'cert' ? result.session.authenticatorId : null);
      const answer = sessionAnswer(core.sessions, result.session, result.identity.name, core.clock(), isTotpEnrolled, flags);
      const second = await secondFactorOutstanding(core, result.identity, bearerToken(request.headers.authorization));
      return envelope({ ...answer, authQueries: [...(answer.authQueries as unknown[]), ...(second ? [second.query] : [])], token: result.token });
    },
  });

  app.get('/current-api-session', {
    config: { auth: PARTIAL_SESSION },
    schema: { operationId: 'getCurrentAPISession', tags, response: { 200: CurrentSession } },
    handler: async (request, reply) => {
      const { session, identity } = principalOf(request);
      // The caller's own credential, shown back as authenticate showed it (never stored in clear).
      const token = presentedSessionToken(request);
      reply.header('cache-control', 'no-store');
      const isTotpEnrolled = session.isMfaRequired && !session.isMfaComplete && (await core.mfa.isEnrolled(identity.id));
      // Only a certificate authenticator is ever flagged for extension: others need no read.
      const flags = await certExtensionFlagsOf(core.store.db, session.authMethod === 'cert' ? session.authenticatorId : null);
      const answer = sessionAnswer(core.sessions, session, identity.name, core.clock(), isTotpEnrolled, flags);
      // The external JWT a legacy session must carry, asked for while this request carries none valid.
      const second = principalOf(request).bearer ? undefined : await secondFactorOutstanding(core, identity, bearerToken(request.headers.authorization));
      return envelope({ ...answer, authQueries: [...(answer.authQueries as unknown[]), ...(second ? [second.query] : [])], ...(token !== undefined && { token }) });
    },
  });

  app.delete('/current-api-session', {
    config: { auth: PARTIAL_SESSION },
    schema: { operationId: 'deleteCurrentApiSession', tags, response: { 200: EmptySchema } },
    handler: async (request, reply) => {
      const { session } = principalOf(request);
      await core.sessions.delete(session.id);
      reply.removeHeader('expiration-seconds').removeHeader('expires-at');
      return envelope(EMPTY);
    },
  });

  app.get('/current-identity', {
    config: { auth: SESSION },
    schema: {
      operationId: 'getCurrentIdentity',
      tags: ['current-identity'],
      response: { 200: detailEnvelopeSchema(identities.def, identities.read) },
    },
    handler: async (request, reply) => {
      // The answer object lives until something it shows changes; so does its serialised form.
      const answer = await core.identityAnswers.get(principalOf(request).identity.id);
      let body = serialisedIdentities.get(answer);
      if (body === undefined) {
        body = reply.serializeAnswer(envelope(answer));
        serialisedIdentities.set(answer, body);
      }
      return reply.type('application/json; charset=utf-8').send(body);
    },
  });

  // The caller's own authenticators.
  const authenticators = core.resources.get('authenticators');
  const ctags = ['current-identity'];

  app.get('/current-identity/authenticators', {
    config: { auth: SESSION },
    schema: {
      operationId: 'listCurrentIdentityAuthenticators',
      tags: ctags,
      querystring: ListQuerySchema,
      response: { 200: listEnvelopeSchema(authenticatorsDef, authenticatorRead) },
    },
    handler: async (request) => {
      const list = parseList(request.query, authenticators.filter, core.resources.flavor);
      const { items, total } = await listOwnAuthenticators(core.resources, principalOf(request).identity.id, list.query);
      return envelope(items, listMeta(list, total, authenticators.filter));
    },
  });

  app.get('/current-identity/authenticators/:id', {
    config: { auth: SESSION },
    schema: {
      operationId: 'detailCurrentIdentityAuthenticator',
      tags: ctags,
      params: IdParams,
      response: { 200: detailEnvelopeSchema(authenticatorsDef, authenticatorRead) },
    },
    handler: async (request) =>
      envelope(await ownAuthenticatorAnswer(core.resources, principalOf(request).identity.id, request.params.id)),
  });

  const patchBody = named(Type.Composite([patchSchema(authenticatorsDef), Type.Object(WithCurrent)]), 'authenticatorPatchWithCurrent');
  const updateBody = named(Type.Composite([updateSchema(authenticatorsDef), Type.Object(WithCurrent)]), 'authenticatorUpdateWithCurrent');
  for (const [verb, body, operationId] of [
    ['patch', patchBody, 'patchCurrentIdentityAuthenticator'],
    ['put', updateBody, 'updateCurrentIdentityAuthenticator'],
  ] as const) {
    app.route({
      method: verb === 'patch' ? 'PATCH' : 'PUT',
      url: '/current-identity/authenticators/:id',
      config: { auth: SESSION },
      schema: { operationId, tags: ctags, params: IdParams, body, response: { 200: EmptySchema } },
      handler: async (request) => {
        const { currentPassword, ...fields } = request.body as Record<string, unknown> & { currentPassword: string };
        const actor = actorOf(request);
        await changeOwnAuthenticator(core.resources, (entity, password) => checkCurrentPassword(core, entity, password, request.ip), {
          identityId: principalOf(request).identity.id,
          id: request.params.id,
          currentPassword,
          fields,
          mode: verb === 'patch' ? 'patch' : 'update',
          ...(actor ? { actor } : {}),
        });
        return envelope(EMPTY);
      },
    });
  }
  const extendBody = Type.Object(
    { clientCertCsr: Type.String({ minLength: 1, maxLength: MAX_CSR_PEM, description: 'PEM CSR for the new certificate; a new key rolls the key' }) },
    { title: 'identityExtendEnrollmentRequest' },
  );
  const extendVerifyBody = Type.Object(
    { clientCert: Type.String({ minLength: 1, maxLength: 2 * MAX_CERT_PEM, description: 'the PEM certificate the extension answered' }) },
    { title: 'identityExtendValidateEnrollmentRequest' },
  );
  const extendedCerts = dataEnvelopeSchema(
    Type.Object(
      {
        ca: Type.String({ description: 'the PEM CA certificates to trust' }),
        clientCert: Type.String({ description: 'the new PEM client certificate and the signing CA' }),
      },
      { title: 'identityExtendCerts' },
    ),
    'identityExtendEnrollmentEnvelope',
  );

  app.post('/current-identity/authenticators/:id/extend', {
    config: { auth: SESSION },
    schema: { operationId: 'extendCurrentIdentityAuthenticator', tags: ctags, params: IdParams, body: extendBody, response: { 200: extendedCerts } },
    handler: async (request) => {
      const { identity, session } = principalOf(request);
      const extended = await core.certificateExtension.extend({
        identityId: identity.id,
        sessionAuthenticatorId: session.authenticatorId,
        authenticatorId: request.params.id,
        peerCertificate: peerCertificate(request),
        csrPem: request.body.clientCertCsr,
      });
      return envelope(extended);
    },
  });

  app.post('/current-identity/authenticators/:id/extend-verify', {
    config: { auth: SESSION },
    schema: {
      operationId: 'extendVerifyCurrentIdentityAuthenticator',
      tags: ctags,
      params: IdParams,
      body: extendVerifyBody,
      response: { 200: EmptySchema },
    },
    handler: async (request) => {
      await core.certificateExtension.verify(principalOf(request).identity.id, request.params.id, request.body.clientCert);
      return envelope(EMPTY);
    },
  });
}
