// The one credential pipeline of both Edge APIs: resolve the caller, refuse disabled identities and
// unfinished MFA, enforce the route's requirement, slide the session's expiry, and answer 401 with
// the WWW-Authenticate challenges of behaviour.md §6.
import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { ApiError } from '../errors.js';
import { iso } from '../clock.js';
import { allows } from '../auth/permissions.js';
import type { ApiSession } from '../auth/api-sessions.js';
import type { IdentityState } from '../auth/identity-directory.js';
import type { Core } from '../app/core.js';
import { SESSION } from './auth-requirements.js';

export interface Principal {
  identity: IdentityState;
  session: ApiSession;
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
    return { identity, session };
  }
  if (typeof authorization === 'string' && /^bearer\s/i.test(authorization)) {
    // No bearer token validates until the OIDC provider issues them.
    throw unauthorized('the bearer token is invalid', CHALLENGE.bearerInvalid);
  }
  throw unauthorized('no credential was provided', CHALLENGE.missing);
}

/** Writes the expiry headers of an authenticated answer. */
export function expiryHeaders(core: Core, reply: FastifyReply, session: ApiSession): void {
  const expiresAt = core.sessions.expiresAt(session);
  reply.header('expiration-seconds', String(Math.max(0, Math.floor((expiresAt - core.clock()) / 1000))));
  reply.header('expires-at', iso(expiresAt));
}

export function credentialHook(core: Core): onRequestAsyncHookHandler {
  return async function authenticate(request, reply) {
    if (request.is404) return;
    const required = request.routeOptions.config.auth ?? SESSION;
    if (required.kind === 'none') return;
    const principal = await resolvePrincipal(core, request);
    const { session, identity } = principal;
    const partialAllowed = required.kind === 'session' && required.partial === true;
    if (session.isMfaRequired && !session.isMfaComplete && !partialAllowed) {
      throw unauthorized('multi-factor authentication is not complete', CHALLENGE.sessionInvalid);
    }
    if (required.kind === 'admin' && !allows(identity, required.group, required.action)) {
      throw unauthorized(
        'the caller is not permitted this operation',
        'overlay-session realm="overlay-session" error="invalid" error_description="not permitted"',
      );
    }
    core.sessions.touch(session);
    request.principal = principal;
    expiryHeaders(core, reply, session);
  };
}

/** The principal of a route that required one (the hook has run). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new ApiError('UNAUTHORIZED', 'no credential was provided');
  return request.principal;
}
