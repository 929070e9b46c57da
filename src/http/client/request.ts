// What the Client API's routes take from a request beyond its caller (credentials.ts): the issuer of
// the tokens signed for it.
import type { FastifyRequest } from 'fastify';
import type { ListenerConfig } from '../../config/index.js';
import type { Issuers } from '../../oidc/issuer.js';

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
