// The one ClientNetwork of a controller (its Core), shared by every listener's Client and
// Management API, and what its routes take from a request.
import type { FastifyRequest } from 'fastify';
import type { Core } from '../../app/core.js';
import { ClientNetwork } from '../../domain/client/read-model.js';
import type { Caller } from '../../domain/client/caller.js';
import { principalOf } from '../credentials.js';

const networks = new WeakMap<Core, ClientNetwork>();

export function networkOf(core: Core): ClientNetwork {
  let network = networks.get(core);
  if (!network) {
    network = new ClientNetwork({
      store: core.store,
      clock: core.clock,
      resources: core.resources,
      caches: core.caches,
      keys: core.oidc.keys,
      issuers: core.oidc.issuers,
      apiSessions: core.sessions,
    });
    networks.set(core, network);
  }
  return network;
}

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

/**
 * The issuer of tokens signed for this request: the address the client used when it names this
 * controller, else the first advertised address of the Client API.
 */
export function issuerOf(core: Core, request: FastifyRequest): string {
  const fallback =
    core.config.web.find((l) => l.apis.some((a) => a.binding === 'edge-client'))?.bindPoints[0]?.address ??
    core.config.web[0]?.bindPoints[0]?.address ??
    'localhost';
  return core.oidc.issuers.forHost(request.headers.host, fallback);
}
