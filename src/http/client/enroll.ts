// The Client API's enrollment operations (no credential: the one-time token is the credential, or
// for auto CA enrollment the certificate of the TLS handshake): a certificate for a CSR (ott), a
// first password (updb), the presented certificate of the enrollment's CA as the authenticator
// (ottca), an identity made by a CA's certificate (ca), an edge router's client and server
// certificates (erott) and their extension (the router's current client certificate is the
// credential), the generic /enroll that takes any of them by the token's method (or `method`) and a
// raw PEM CSR too, token enrollment with an external JWT (/enroll/token), the keys that verify
// enrollment JWTs and the challenge proving the network holds them. Answers carrying a certificate
// or a username are not cached.
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Core } from '../../core/core.js';
import { fieldError } from '../../errors.js';
import { MAX_CSR_PEM } from '../../pki/index.js';
import { toPem } from '../../pki/pem.js';
import { MAX_NAME } from '../../resources/kit.js';
import { PUBLIC } from '../auth-requirements.js';
import { bearerToken, peerCertificates } from '../credentials.js';
import { EMPTY, envelope } from '../envelope.js';
import { acceptText } from '../json-body.js';
import { networkJwtRoutes } from '../enrollment-routes.js';
import { dataEnvelopeSchema, EmptySchema } from '../resource-routes.js';

const PEM_TYPES = ['application/x-pem-file', 'text/plain', 'application/pkcs7'];
const Token = Type.String({ minLength: 1, maxLength: 256, description: 'the one-time token (the jti of the enrollment JWT)' });
const Csr = Type.String({ maxLength: MAX_CSR_PEM, description: 'PEM certificate signing request' });
const Password = Type.String({ minLength: 1, maxLength: 100 });
const OttEnrollmentRequest = Type.Object({ token: Token, clientCsr: Type.Optional(Csr) }, { title: 'ottEnrollmentRequest' });
const METHODS = ['ott', 'ottca', 'updb', 'erott', 'trott', 'ca'] as const;
type Method = (typeof METHODS)[number];

/** A CSR of an application/pkcs7 body: PEM, the base64 of its DER, or the DER itself; as PEM. */
function csrPemOf(body: Buffer): string {
  const text = body.toString('latin1').trim();
  if (text.startsWith('-----BEGIN')) return text;
  return toPem('CERTIFICATE REQUEST', body[0] === 0x30 ? body : Buffer.from(text.replace(/\s+/g, ''), 'base64'));
}

const CertsSchema = dataEnvelopeSchema(
  Type.Object(
    {
      ca: Type.Optional(Type.String({ description: 'edge routers: the CAs to trust, PEM' })),
      cert: Type.String({ description: 'the client certificate and the CA that signed it, PEM' }),
      serverCert: Type.Optional(Type.String({ description: 'edge routers: the server certificate and the CA that signed it, PEM' })),
    },
    { title: 'enrollmentCerts' },
  ),
  'enrollmentCertsEnvelope',
);
const UpdbSchema = dataEnvelopeSchema(Type.Object({ username: Type.String() }, { title: 'enrollmentUpdb' }), 'enrollmentUpdbEnvelope');
const JwksSchema = Type.Object(
  { keys: Type.Array(Type.Object({}, { additionalProperties: true, title: 'jwk' })) },
  { title: 'jwks', additionalProperties: false },
);

function noStore(reply: FastifyReply): void {
  void reply.header('cache-control', 'no-store');
}

export function clientEnrollRoutes(app: FastifyInstance, core: Core): void {
  networkJwtRoutes(app, core);

  app.post('/enroll/ott', {
    config: { auth: PUBLIC },
    schema: {
      operationId: 'enrollOtt',
      tags: ['enroll'],
      body: OttEnrollmentRequest,
      response: { 200: CertsSchema },
    },
    handler: async (request, reply) => {
      const { token, clientCsr } = request.body as { token: string; clientCsr?: string };
      const answer = await core.enrollments.enrollOtt(token, clientCsr);
      noStore(reply);
      return envelope(answer);
    },
  });

  // Enrollment with an external JWT: to a certificate for the CSR of the body, or without one to
  // logins with the signer's JWTs (which answers no certificate).
  app.post('/enroll/token', {
    config: { auth: PUBLIC },
    schema: {
      operationId: 'enrollToken',
      tags: ['enroll'],
      headers: Type.Object({ 'overlay-token-issuer-id': Type.Optional(Type.String({ minLength: 1, maxLength: MAX_NAME })) }),
      body: Type.Union([Type.Object({ clientCsr: Type.Optional(Csr) }, { title: 'tokenEnrollmentRequest' }), Type.Null()]),
      response: {
        200: dataEnvelopeSchema(
          Type.Object({ cert: Type.Optional(Type.String({ description: 'the client certificate and the CA that signed it, PEM' })) }, { title: 'tokenEnrollmentCerts' }),
          'tokenEnrollmentCertsEnvelope',
        ),
      },
    },
    handler: async (request, reply) => {
      const body = (request.body ?? {}) as { clientCsr?: string };
      const issuerId = (request.headers as Record<string, string | undefined>)['overlay-token-issuer-id'];
      const answer = await core.enrollments.enrollToken(core.externalJwtSigners, bearerToken(request.headers.authorization), issuerId, body.clientCsr);
      noStore(reply);
      return envelope(answer);
    },
  });

  app.post('/enroll/erott', {
    config: { auth: PUBLIC },
    schema: {
      operationId: 'enrollErOtt',
      tags: ['enroll'],
      body: Type.Object({ token: Token, serverCsr: Type.Optional(Csr), clientCsr: Type.Optional(Csr) }, { title: 'erOttEnrollmentRequest' }),
      response: { 200: CertsSchema },
    },
    handler: async (request, reply) => {
      const { token, serverCsr, clientCsr } = request.body as { token: string; serverCsr?: string; clientCsr?: string };
      const answer = await core.routerEnrollments.enroll(token, 'erott', {
        server: { pem: serverCsr, field: 'serverCsr' },
        client: { pem: clientCsr, field: 'clientCsr' },
      });
      noStore(reply);
      return envelope(answer);
    },
  });

  // The router's current client certificate, presented in the TLS handshake, is its credential.
  app.post('/enroll/extend/router', {
    config: { auth: PUBLIC },
    schema: {
      operationId: 'extendRouterEnrollment',
      tags: ['enroll'],
      body: Type.Object({ certCsr: Csr, serverCertCsr: Csr }, { title: 'routerExtendEnrollmentRequest' }),
      response: { 200: CertsSchema },
    },
    handler: async (request, reply) => {
      const { certCsr, serverCertCsr } = request.body as { certCsr: string; serverCertCsr: string };
      const { peerCertificate, peerChain } = peerCertificates(request);
      const answer = await core.routerEnrollments.extend(peerCertificate, peerChain, {
        server: { pem: serverCertCsr, field: 'serverCertCsr' },
        client: { pem: certCsr, field: 'certCsr' },
      });
      noStore(reply);
      return envelope(answer);
    },
  });

  app.post('/enroll/ottca', {
    config: { auth: PUBLIC },
    schema: {
      operationId: 'enrollOttCa',
      tags: ['enroll'],
      body: OttEnrollmentRequest,
      response: { 200: EmptySchema },
    },
    handler: async (request, reply) => {
      await core.enrollments.enrollOttCa((request.body as { token: string }).token, peerCertificates(request));
      noStore(reply);
      return envelope(EMPTY);
    },
  });

  // Auto CA enrollment has no input but the certificate of the TLS handshake.
  app.post('/enroll/ca', {
    config: { auth: PUBLIC },
    schema: { operationId: 'enrollCa', tags: ['enroll'], response: { 200: EmptySchema } },
    handler: async (request, reply) => {
      await core.enrollments.enrollCa(peerCertificates(request));
      noStore(reply);
      return envelope(EMPTY);
    },
  });

  app.post('/enroll/updb', {
    config: { auth: PUBLIC },
    schema: {
      operationId: 'enrollUpdb',
      tags: ['enroll'],
      querystring: Type.Object({ token: Token }, { additionalProperties: true }),
      body: Type.Object({ password: Password, username: Type.Optional(Type.String({ maxLength: 100 })) }, { title: 'updbCredentials' }),
      response: { 200: UpdbSchema },
    },
    handler: async (request, reply) => {
      const { token } = request.query as { token: string };
      const answer = await core.enrollments.enrollUpdb(token, (request.body as { password: string }).password);
      noStore(reply);
      return envelope(answer);
    },
  });

  // The generic enrollment: the token's own enrollment says what it is exchanged for. A body of
  // type text/plain, application/x-pem-file or application/pkcs7 is the CSR itself.
  app.register(async (scope) => {
    acceptText(scope);
    scope.addContentTypeParser('application/x-pem-file', { parseAs: 'string' }, (_request, body, done) => done(null, body));
    scope.addContentTypeParser('application/pkcs7', { parseAs: 'buffer', bodyLimit: MAX_CSR_PEM }, (_request, body, done) => done(null, csrPemOf(body as Buffer)));
    scope.post('/enroll', {
      config: { auth: PUBLIC },
      schema: {
        operationId: 'enroll',
        tags: ['enroll'],
        querystring: Type.Object(
          {
            token: Type.Optional(Token),
            method: Type.Optional(
              Type.Union(
                METHODS.map((m) => Type.Literal(m)),
                { description: "the enrollment method, when given: ott, ottca, updb, erott, trott, or ca (which takes no token); else the token's" },
              ),
            ),
          },
          { additionalProperties: true },
        ),
        // No body at all (null) is what a client enrolling by its certificate alone (ca) sends.
        body: Type.Union([
          Type.Object(
            {
              clientCsr: Type.Optional(Csr),
              password: Type.Optional(Password),
              serverCertCsr: Type.Optional(Csr),
              certCsr: Type.Optional(Type.String({ maxLength: MAX_CSR_PEM, description: 'erott, trott: the client CSR (clientCsr is taken too)' })),
              name: Type.Optional(Type.String({ maxLength: 255, description: 'ca: the requested name of the identity ([requestedName])' })),
            },
            { title: 'genericEnroll' },
          ),
          Type.String({ maxLength: MAX_CSR_PEM }),
          Type.Null(),
        ]),
        response: { 200: Type.Union([CertsSchema, UpdbSchema, EmptySchema]) },
      },
      handler: async (request, reply) => {
        const { token, method } = request.query as { token?: string; method?: Method };
        const body = request.body as
          | string
          | { clientCsr?: string; password?: string; name?: string; serverCertCsr?: string; certCsr?: string }
          | null
          | undefined;
        const pem = PEM_TYPES.includes(String(request.headers['content-type']).split(';')[0]!.trim().toLowerCase());
        const json = typeof body === 'object' && body !== null ? body : {};
        if (method === 'ca') {
          await core.enrollments.enrollCa(peerCertificates(request), json.name);
          noStore(reply);
          return envelope(EMPTY);
        }
        if (token === undefined) throw fieldError('token', 'is required');
        const kind = method ?? (await core.routerEnrollments.methodOf(token)) ?? (await core.enrollments.methodOf(token));
        let answer;
        if (kind === 'erott' || kind === 'trott') {
          // A router sends two CSRs, so a body that is one PEM CSR is not enough.
          answer = await core.routerEnrollments.enroll(token, kind, {
            server: { pem: json.serverCertCsr, field: 'serverCertCsr' },
            client: { pem: json.certCsr ?? json.clientCsr, field: 'certCsr' },
          });
        } else if (kind === 'ottca') {
          await core.enrollments.enrollOttCa(token, peerCertificates(request));
          answer = EMPTY;
        } else if (kind === 'updb') {
          if (pem || typeof json.password !== 'string') throw fieldError('password', 'is required for updb enrollment');
          answer = await core.enrollments.enrollUpdb(token, json.password);
        } else {
          answer = pem && typeof body === 'string' ? await core.enrollments.enrollOtt(token, body, 'body') : await core.enrollments.enrollOtt(token, json.clientCsr);
        }
        noStore(reply);
        return envelope(answer);
      },
    });
  });

  app.get('/enroll/jwks', {
    config: { auth: PUBLIC },
    schema: { operationId: 'getEnrollmentJwks', tags: ['enroll'], response: { 200: JwksSchema } },
    handler: async () => core.enrollments.jwks(),
  });

  app.post('/enroll/challenge', {
    config: { auth: PUBLIC },
    schema: {
      operationId: 'enrollmentChallenge',
      tags: ['enroll'],
      body: Type.Object(
        {
          keyId: Type.String({ minLength: 1, maxLength: 256 }),
          nonce: Type.String({ format: 'uuid', maxLength: 36, description: 'a UUID the caller chose' }),
        },
        { title: 'nonceChallenge' },
      ),
      response: {
        200: Type.Object(
          { algorithm: Type.String(), caPool: Type.String(), kid: Type.String(), signature: Type.String({ description: 'base64url signature of the nonce' }) },
          { title: 'nonceSignature' },
        ),
      },
    },
    handler: async (request) => {
      const { keyId, nonce } = request.body as { keyId: string; nonce: string };
      return core.enrollments.challenge(keyId, nonce);
    },
  });
}
