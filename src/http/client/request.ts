// What the Client API's routes take from a request: the caller of a route that required a session,
// and the issuer of the tokens signed for it.
import type { FastifyRequest } from 'fastify';
import type { ListenerConfig } from '../../config/index.js';
import type { Caller } from '../../domain/client/caller.js';
import type { Issuers } from '../../oidc/issuer.js';
import { principalOf } from '../credentials.js';

/** The caller of a route that required a session. */
export function callerOf(request: FastifyRequest): Caller {
  const { identity, session } = principalOf(request);
  return {
    identityId: identity.id,
    identityName: identity.name,
    apiSessionId: session.id,
    configTypes: session.configTypes,
    isMfaComplete: session.isMfaComplete,
    sessionCreatedAt: session.createdAt,
  };
}

/** The issuer of tokens signed for a request. */
export type IssuerOf = (request: FastifyRequest) => string;

/**
 * The issuer of tokens signed for a request: the address the client used when it names this
 * controller, else the first advertised address of the Client API.
 */
export function issuerOfRequests(web: readonly ListenerConfig[], issuers: Pick<Issuers, 'forHost'>): IssuerOf {
  return (request) => {
    const fallback =
      web.find((l) => l.apis.some((a) => a.binding === 'edge-client'))?.bindPoints[0]?.address ?? web[0]?.bindPoints[0]?.address ?? 'localhost';
    return issuers.forHost(request.headers.host, fallback);
  };
}
