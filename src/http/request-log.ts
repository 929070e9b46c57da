// What every server records of every request once it is answered: one info line (method, route
// template, status, duration, identity, client address; the request id comes with the request's
// logger) and the request metrics. The route is the template a request matched, never its URL: URLs
// carry ids and, on a few routes, tokens in the query, and a metric label per URL would grow
// without bound. Failures are logged with the same context by the error handlers.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { EDGE_API_PATHS } from './info.js';

/** The route label of a request that matched no route. */
export const UNMATCHED = 'unmatched';

/** Paths of the probes: answered at debug level, since a load balancer asks every few seconds. */
export const PROBE_PATHS: ReadonlySet<string> = new Set(['/health', '/ready', '/metrics']);

/** The API a route template belongs to; `none` for the probes and anything outside an API. */
export function apiOfRoute(route: string): string {
  if (route.startsWith('/.well-known/')) return 'edge-oidc';
  for (const [api, path] of Object.entries(EDGE_API_PATHS)) if (route === path || route.startsWith(`${path}/`)) return api;
  return 'none';
}

/** The context of every log line about a request's outcome. */
export function requestContext(request: FastifyRequest): Record<string, unknown> {
  const identityId = request.principal?.identity.id;
  return {
    method: request.method,
    route: request.routeOptions.url ?? UNMATCHED,
    address: request.ip,
    ...(identityId !== undefined ? { identityId } : {}),
  };
}

export interface RequestRecording {
  /** One info line per request; false: none. */
  log: boolean;
  observe(api: string, method: string, route: string, status: number, seconds: number): void;
}

export function recordRequests(app: FastifyInstance, recording: RequestRecording): void {
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? UNMATCHED;
    const status = reply.statusCode;
    const ms = reply.elapsedTime;
    recording.observe(apiOfRoute(route), request.method, route, status, ms / 1000);
    if (recording.log) {
      const line = { ...requestContext(request), status, durationMs: Math.round(ms * 1000) / 1000 };
      const message = `${request.method} ${route} ${status}`;
      if (PROBE_PATHS.has(route)) request.log.debug(line, message);
      else request.log.info(line, message);
    }
    done();
  });
}
