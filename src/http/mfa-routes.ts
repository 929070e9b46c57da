// The MFA routes both Edge APIs share (controller-interface.md, "Client API: MFA"; behaviour.md §5):
// the current identity's TOTP enrollment and recovery codes, the completion of a login that waits
// for its second factor, and the TOTP token of a caller with an OIDC access token. Enrollment works
// while the login waits, so an identity whose policy requires TOTP can enroll; recovery codes need a
// complete login. A code comes in the body or, where the interface allows, in the
// `mfa-validation-code` header; the recovery-code read takes either although it is a GET, as the
// interface lists and the established controller's clients send it.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Core } from '../core/core.js';
import type { AttemptScope } from '../auth/mfa.js';
import { ApiError, fieldError } from '../errors.js';
import { EMPTY, envelope } from './envelope.js';
import { PARTIAL_SESSION, SESSION } from './auth-requirements.js';
import { principalOf } from './credentials.js';
import { named } from './openapi.js';
import { LinksSchema } from '../resources/kit.js';
import { dataEnvelopeSchema, EmptySchema } from './resource-routes.js';

/** A TOTP code has 6 digits and a recovery code 6 characters; room is left for spaces typed around. */
const MAX_CODE = 32;
const CodeBody = named(Type.Object({ code: Type.String({ maxLength: MAX_CODE }) }, { additionalProperties: true }), 'mfaCode');
const OptionalCodeBody = Type.Union([Type.Object({ code: Type.Optional(Type.String({ maxLength: MAX_CODE })) }, { additionalProperties: true }), Type.Null()]);
const CodeHeader = Type.Object({ 'mfa-validation-code': Type.Optional(Type.String({ maxLength: MAX_CODE })) }, { additionalProperties: true });

const Tags = Type.Record(Type.String(), Type.Union([Type.String(), Type.Boolean(), Type.Null()]));
const MfaFields = {
  _links: LinksSchema,
  id: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
  tags: Tags,
  isVerified: Type.Boolean(),
  provisioningUrl: Type.Optional(Type.String({ description: 'otpauth URI of the secret, while the enrollment is unconfirmed' })),
  recoveryCodes: Type.Optional(Type.Array(Type.String(), { description: 'the recovery codes, shown while the enrollment is unconfirmed' })),
};
const MfaDetail = dataEnvelopeSchema(named(Type.Object(MfaFields), 'detailMfa'), 'detailMfaEnvelope');
const MfaRecoveryCodes = dataEnvelopeSchema(
  named(
    Type.Object({
      ...MfaFields,
      recoveryCodes: Type.Array(Type.String(), {
        description: 'none: of a confirmed enrollment only the digests of its recovery codes are kept',
      }),
      remaining: Type.Integer({ description: 'unused recovery codes' }),
    }),
    'mfaRecoveryCodes',
  ),
  'mfaRecoveryCodesEnvelope',
);
const TotpToken = dataEnvelopeSchema(
  named(
    Type.Object({
      issuedAt: Type.String({ format: 'date-time' }),
      token: Type.String({ description: 'a JWT (ov_t "t") signed by the OIDC signing keys: a live TOTP code was given at issuedAt' }),
    }),
    'totpToken',
  ),
  'totpTokenEnvelope',
);
const NewRecoveryCodes = dataEnvelopeSchema(
  named(Type.Object({ recoveryCodes: Type.Array(Type.String()) }), 'mfaNewRecoveryCodes'),
  'mfaNewRecoveryCodesEnvelope',
);

const SELF = '/current-identity/mfa';
const LINKS = {
  self: { href: `.${SELF}` },
  'qr-code': { href: `.${SELF}/qr-code` },
  'recovery-codes': { href: `.${SELF}/recovery-codes` },
  verify: { href: `.${SELF}/verify` },
};

/** Wrong codes are counted per API session (and per identity). */
function scopeOf(request: FastifyRequest): AttemptScope {
  return { apiSessionId: principalOf(request).session.id };
}

function caller(request: FastifyRequest): { id: string; name: string } {
  const { identity } = principalOf(request);
  return { id: identity.id, name: identity.name };
}

/**
 * The code of the body, else of the header; '' when neither gives one. An empty code in the body
 * gives way to the header's: generated clients send `{"code": ""}` when given no code.
 */
function codeOf(request: FastifyRequest): string {
  const inBody = (request.body as { code?: string } | null | undefined)?.code;
  const header = (request.headers as Record<string, unknown>)['mfa-validation-code'];
  return inBody || (typeof header === 'string' ? header : inBody) || '';
}

/** A body that holds a code, with room to spare; a GET body is read here, not by Fastify. */
const MAX_GET_BODY = 4096;

/**
 * Reads the code body of a GET into `request.body` before the handler: Fastify neither reads nor
 * validates a body of a GET. Parsed by the server's JSON parser, bounded, refused like any other body
 * when it is not JSON, and checked as `OptionalCodeBody` would (the code itself is never echoed).
 */
function codeBodyOfGet(server: FastifyInstance): (request: FastifyRequest) => Promise<void> {
  const parse = server.getDefaultJsonParser('error', 'error');
  return async (request) => {
    if (request.raw.readableEnded) return;
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of request.raw as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_GET_BODY) throw new ApiError('REQUEST_ENTITY_TOO_LARGE', `the request body is larger than ${MAX_GET_BODY} bytes`);
      chunks.push(chunk);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    if (text.trim() === '') return;
    if (!/^application\/json\s*(;|$)/i.test(request.headers['content-type'] ?? '')) {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'the request body must be application/json');
    }
    const body = await new Promise<unknown>((resolve, reject) => parse(request, text, (err, parsed) => (err ? reject(err) : resolve(parsed))));
    if (body !== null && (typeof body !== 'object' || Array.isArray(body))) throw fieldError('body', 'must be an object with a code');
    const code = (body as { code?: unknown } | null)?.code;
    if (code !== undefined && (typeof code !== 'string' || code.length > MAX_CODE)) {
      throw fieldError('code', `must be a string of at most ${MAX_CODE} characters`);
    }
    request.body = body;
  };
}

export function mfaRoutes(server: FastifyInstance, core: Core): void {
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['current-identity'];

  app.get(SELF, {
    config: { auth: PARTIAL_SESSION },
    schema: { operationId: 'detailMfa', tags, response: { 200: MfaDetail } },
    handler: async (request, reply) => {
      reply.header('cache-control', 'no-store');
      return envelope({ _links: LINKS, ...(await core.mfa.detail(caller(request))) });
    },
  });

  app.post(SELF, {
    config: { auth: PARTIAL_SESSION },
    schema: {
      operationId: 'enrollMfa',
      tags,
      body: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
      response: { 201: MfaDetail },
    },
    handler: async (request, reply) => {
      const view = await core.mfa.start(caller(request));
      return reply.code(201).header('cache-control', 'no-store').send(envelope({ _links: LINKS, ...view }));
    },
  });

  app.post(`${SELF}/verify`, {
    config: { auth: PARTIAL_SESSION },
    schema: { operationId: 'verifyMfa', tags, body: CodeBody, response: { 200: EmptySchema } },
    handler: async (request) => {
      const { identity, session, bearer } = principalOf(request);
      // A legacy login waiting for its second factor gives it with this code; a bearer token's
      // factors are those of its login, so it stays as it is.
      await core.mfa.verify(identity.id, request.body.code, scopeOf(request), bearer ? undefined : (ctx) => core.sessions.mfaCompleteIn(ctx, session));
      return envelope(EMPTY);
    },
  });

  app.delete(SELF, {
    config: { auth: PARTIAL_SESSION },
    schema: { operationId: 'deleteMfa', tags, headers: CodeHeader, body: OptionalCodeBody, response: { 200: EmptySchema } },
    handler: async (request) => {
      await core.mfa.remove(principalOf(request).identity.id, codeOf(request), scopeOf(request));
      return envelope(EMPTY);
    },
  });

  app.get(`${SELF}/qr-code`, {
    config: { auth: PARTIAL_SESSION },
    schema: {
      operationId: 'detailMfaQrCode',
      tags,
      response: {
        200: {
          description: 'PNG image of the provisioning URL',
          content: { 'image/png': { schema: Type.Unsafe<Buffer>({ type: 'string', format: 'binary' }) } },
        },
      },
    },
    handler: async (request, reply) => {
      const png = await core.mfa.qrCode(caller(request));
      return reply.type('image/png').header('cache-control', 'no-store').send(png);
    },
  });

  app.get(`${SELF}/recovery-codes`, {
    config: { auth: SESSION },
    schema: { operationId: 'detailMfaRecoveryCodes', tags, headers: CodeHeader, response: { 200: MfaRecoveryCodes } },
    preValidation: codeBodyOfGet(server),
    handler: async (request, reply) => {
      const answer = await core.mfa.recoveryCodes(caller(request), codeOf(request), scopeOf(request));
      reply.header('cache-control', 'no-store');
      return envelope({ _links: LINKS, ...answer });
    },
  });

  app.post(`${SELF}/recovery-codes`, {
    config: { auth: SESSION },
    schema: { operationId: 'createMfaRecoveryCodes', tags, body: CodeBody, response: { 200: NewRecoveryCodes } },
    handler: async (request, reply) => {
      const recoveryCodes = await core.mfa.regenerate(principalOf(request).identity.id, request.body.code, scopeOf(request));
      reply.header('cache-control', 'no-store');
      return envelope({ recoveryCodes });
    },
  });

  app.post('/current-api-session/totp-token', {
    config: { auth: SESSION },
    schema: { operationId: 'createTotpToken', tags: ['current-api-session'], body: CodeBody, response: { 200: TotpToken } },
    handler: async (request, reply) => {
      const answer = await core.oidc.totp.token(principalOf(request), request.body.code);
      reply.header('cache-control', 'no-store');
      return envelope(answer);
    },
  });

  app.post('/authenticate/mfa', {
    config: { auth: PARTIAL_SESSION },
    schema: { operationId: 'authenticateMfa', tags: ['authentication'], body: CodeBody, response: { 200: EmptySchema } },
    handler: async (request) => {
      const { identity, session } = principalOf(request);
      // Given again on a complete session, it renews what MFA posture checks time out from.
      await core.mfa.authenticate(identity.id, request.body.code, scopeOf(request), {
        alsoWrite: (ctx) => core.sessions.mfaCompleteIn(ctx, session),
      });
      return envelope(EMPTY);
    },
  });
}
