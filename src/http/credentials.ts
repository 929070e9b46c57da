// The one credential pipeline of both Edge APIs: resolve the caller (legacy session token or OIDC
// bearer access token), refuse disabled identities and unfinished MFA, enforce the route's
// requirement, slide the session's expiry, and answer 401 with the WWW-Authenticate challenges of
// behaviour.md §6.
import { X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { ApiError } from '../errors.js';
import { iso } from '../clock.js';
import { allows } from '../auth/permissions.js';
import type { ApiSession } from '../auth/api-sessions.js';
import type { IdentityState } from '../auth/identity-directory.js';
import type { Core } from '../core/core.js';
import type { Caller } from '../domain/client/caller.js';
import { BearerError } from '../oidc/bearer.js';
import type { AccessClaims } from '../oidc/tokens.js';
import { SESSION } from './auth-requirements.js';
import { traceRequest } from './tracing.js';
import { secondFactorOutstanding } from '../auth/ext-jwt-factor.js';
import { extJwtChallenge } from '../auth/login.js';

export interface Principal {
  identity: IdentityState;
  session: ApiSession;
  /** Present when the caller authenticated with an OIDC access token. */
  bearer?: { claims: AccessClaims; expiresAt: number };
}

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
}

const MISSING = 'error="missing" error_description="no matching token was provided"';
export const CHALLENGE = {
  missing: `overlay-session realm="overlay-session" ${MISSING}, Bearer realm="overlay-oidc" ${MISSING}`,
  sessionInvalid: 'overlay-session realm="overlay-session" error="invalid" error_description="token is invalid"',
  bearerInvalid: 'Bearer realm="overlay-oidc" error="invalid" error_description="token is invalid"',
  bearerExpired: 'Bearer realm="overlay-oidc" error="expired" error_description="token expired"',
  bearerMissing: `Bearer realm="overlay-oidc" ${MISSING}`,
} as const;

const MAX_TOKEN_LENGTH = 512;

function unauthorized(message: string, challenge: string, code: 'UNAUTHORIZED' | 'INVALID_AUTH' = 'UNAUTHORIZED'): ApiError {
  return new ApiError(code, message, undefined, { 'www-authenticate': challenge });
}

/** The caller's principal; throws 401 with the right challenge when there is none. */
export async function resolvePrincipal(core: Core, request: FastifyRequest): Promise<Principal> {
  const token = request.headers['overlay-session'];
  const authorization = request.headers.authorization;
  if (typeof token === 'string' && token !== '') {
    const session = token.length <= MAX_TOKEN_LENGTH ? await core.sessions.resolve(token) : undefined;
    if (!session) throw unauthorized('the session token is invalid or expired', CHALLENGE.sessionInvalid);
    const identity = await core.identities.get(session.identityId);
    if (!identity) {
      core.sessions.forget(session.id);
      throw unauthorized('the session token is invalid or expired', CHALLENGE.sessionInvalid);
    }
    if (core.identities.isDisabled(identity)) {
      throw unauthorized('the identity is disabled', CHALLENGE.sessionInvalid);
    }
    // A revocation ends the API sessions it names as it commits; a login that raced it commits
    // after it, dated before it, and is judged here as a bearer token is.
    if (core.revocations.isRevoked('IDENTITY', identity.id, session.createdAt) || core.revocations.isRevoked('API_SESSION', session.id, session.createdAt)) {
      throw unauthorized('the session token is invalid or expired', CHALLENGE.sessionInvalid);
    }
    return { identity, session };
  }
  const bearer = bearerToken(authorization);
  if (bearer !== undefined) {
    const { identity, session, claims, expiresAt } = await checkingBearer(() => core.oidc.bearer.verify(bearer));
    return { identity, session, bearer: { claims, expiresAt } };
  }
  throw unauthorized('no credential was provided', CHALLENGE.missing);
}

/** A refused bearer access token, answered alike wherever one is checked: 401 with the Bearer challenge of its kind. */
export function bearerRefused(err: BearerError): ApiError {
  return unauthorized(`the bearer token is not accepted: ${err.message}`, err.kind === 'expired' ? CHALLENGE.bearerExpired : CHALLENGE.bearerInvalid);
}

/** Runs a check of a bearer access token; its refusal becomes bearerRefused, anything else passes. */
export async function checkingBearer<T>(check: () => Promise<T>): Promise<T> {
  try {
    return await check();
  } catch (err) {
    if (err instanceof BearerError) throw bearerRefused(err);
    throw err;
  }
}

/** The token of an `Authorization: Bearer` header; '' when the scheme is Bearer but the token is absent. */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (typeof authorization !== 'string' || !/^bearer(?:\s|$)/i.test(authorization)) return undefined;
  return authorization.slice(6).trim();
}

/** The leaf certificate the client presented in the TLS handshake, if any. */
export function peerCertificate(request: FastifyRequest): X509Certificate | undefined {
  const socket = request.raw.socket as TLSSocket;
  if (typeof socket.getPeerCertificate !== 'function') return undefined;
  const peer = socket.getPeerCertificate();
  if (!peer || !peer.raw) return undefined;
  try {
    return new X509Certificate(peer.raw);
  } catch {
    return undefined;
  }
}

/** Certificates of a presented chain read beyond the leaf; what lies further is not looked at. */
const MAX_PEER_CHAIN = 10;

/**
 * The leaf the client presented in the TLS handshake (what identifies it) and the other
 * certificates it presented, as TLS links them by issuer name. Nothing here is trusted: the login
 * verifies every link by signature (auth/cert-trust.ts).
 */
export function peerCertificates(request: FastifyRequest): { peerCertificate?: X509Certificate; peerChain: X509Certificate[] } {
  const socket = request.raw.socket as TLSSocket;
  if (typeof socket.getPeerCertificate !== 'function') return { peerChain: [] };
  const leaf = socket.getPeerCertificate(true);
  if (!leaf || !leaf.raw) return { peerChain: [] };
  let peerCertificate: X509Certificate;
  try {
    peerCertificate = new X509Certificate(leaf.raw);
  } catch {
    return { peerChain: [] };
  }
  const peerChain: X509Certificate[] = [];
  const seen = new Set([leaf]);
  for (let next = leaf.issuerCertificate; next && !seen.has(next) && peerChain.length < MAX_PEER_CHAIN; next = next.issuerCertificate) {
    seen.add(next);
    try {
      peerChain.push(new X509Certificate(next.raw));
    } catch {
      break;
    }
  }
  return { peerCertificate, peerChain };
}

/**
 * Writes the expiry headers of an authenticated answer: the API session's expiry, or for a bearer
 * caller the access token's (`tokenExpiresAt`, ms).
 */
export function expiryHeaders(core: Core, reply: FastifyReply, session: ApiSession, tokenExpiresAt?: number): void {
  const expiresAt = tokenExpiresAt ?? core.sessions.expiresAt(session);
  reply.header('expiration-seconds', String(Math.max(0, Math.floor((expiresAt - core.clock()) / 1000))));
  reply.header('expires-at', iso(expiresAt));
}

export function credentialHook(core: Core): onRequestAsyncHookHandler {
  return async function authenticate(request, reply) {
    if (request.is404) return;
    const required = request.routeOptions.config.auth ?? SESSION;
    if (required.kind === 'none') return;
    const principal = await resolvePrincipal(core, request);
    traceRequest(core.traces, request, principal);
    const { session, identity } = principal;
    const partialAllowed = required.kind === 'session' && required.partial === true;
    if (session.isMfaRequired && !session.isMfaComplete && !partialAllowed) {
      throw unauthorized('multi-factor authentication is not complete', CHALLENGE.sessionInvalid);
    }
    // A legacy session of an identity whose policy requires an external JWT carries one on every
    // request (the routes of a partial session excepted, so a client can read what it is asked).
    // An OIDC caller's token was issued only once a login carried it (its Authorization header
    // holds the access token).
    if (!principal.bearer && !partialAllowed) {
      const outstanding = await secondFactorOutstanding(core, identity, bearerToken(request.headers.authorization));
      if (outstanding) {
        throw new ApiError('UNAUTHORIZED', `the external JWT second factor is not satisfied: ${outstanding.refusal.message}`, undefined, {
          'www-authenticate': extJwtChallenge('overlay-secondary-ext-jwt', outstanding.refusal),
        });
      }
    }
    if (
      (required.kind === 'admin' && !allows(identity, required.group, required.action)) ||
      (required.kind === 'admin-only' && !identity.isAdmin)
    ) {
      throw unauthorized(
        'the caller is not permitted this operation',
        principal.bearer
          ? 'Bearer realm="overlay-oidc" error="invalid" error_description="not permitted"'
          : 'overlay-session realm="overlay-session" error="invalid" error_description="not permitted"',
      );
    }
    core.sessions.touch(session);
    request.principal = principal;
    expiryHeaders(core, reply, session, principal.bearer?.expiresAt);
    // An authenticated answer is the caller's own and may carry tokens (sessions, enrollments).
    reply.header('cache-control', 'no-store');
  };
}

/** The caller of a route that required a session, as the read model takes it. */
export function callerOf(request: FastifyRequest): Caller {
  const { identity, session } = principalOf(request);
  return {
    identityId: identity.id,
    identityName: identity.name,
    apiSessionId: session.id,
    configTypes: session.configTypes,
    isMfaComplete: session.isMfaComplete,
    mfaPassedAt: session.mfaPassedAt,
    sessionCreatedAt: session.createdAt,
  };
}

/**
 * The legacy session token the caller presented on this request (the `overlay-session` header the
 * principal was resolved from), to be shown back to that caller only; a bearer caller presented an
 * access token, which is no session token, so there is none.
 */
export function presentedSessionToken(request: FastifyRequest): string | undefined {
  if (principalOf(request).bearer) return undefined;
  const token = request.headers['overlay-session'];
  return typeof token === 'string' && token !== '' ? token : undefined;
}

/** The principal of a route that required one (the hook has run). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new ApiError('UNAUTHORIZED', 'no credential was provided');
  return request.principal;
}
