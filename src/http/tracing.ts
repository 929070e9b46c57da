// Request tracing of the Edge APIs: a request of an identity whose trace is on (domain/tracing.ts) is
// logged at debug detail, whatever the log level, on a logger carrying the trace id — so the error
// and request lines of that request carry it too. Never the body, the headers or the query values:
// they may hold secrets; the names of the query parameters and body fields show what was asked.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ActiveTrace, IdentityTraces } from '../domain/tracing.js';

declare module 'fastify' {
  interface FastifyRequest {
    trace?: ActiveTrace;
  }
}

/** What a trace tells of its caller (the credential hook's principal). */
export interface TracedCaller {
  identity: { id: string };
  session: { id: string };
  bearer?: unknown;
}

/**
 * Starts the trace of a request once its caller is known (the credential hook calls it, before the
 * permission check, so a refused request of a traced identity is traced too).
 */
export function traceRequest(traces: IdentityTraces, request: FastifyRequest, principal: TracedCaller): void {
  const trace = traces.active(principal.identity.id);
  if (!trace) return;
  request.trace = trace;
  request.log = request.log.child({ traceId: trace.traceId, identityId: principal.identity.id }, { level: 'debug' });
  if (!trace.channels.has('request')) return;
  request.log.debug(
    {
      method: request.method,
      route: request.routeOptions.url,
      url: request.url.split('?')[0],
      queryParameters: Object.keys((request.query as Record<string, unknown> | undefined) ?? {}),
      apiSessionId: principal.session.id,
      credential: principal.bearer ? 'bearer' : 'session',
      remoteAddress: request.ip,
    },
    'traced request',
  );
}

/** Installs the hooks that log the rest of a traced request: its body's field names, its answer. */
export function installTracing(app: FastifyInstance): void {
  app.addHook('preHandler', async (request) => {
    if (!request.trace?.channels.has('request')) return;
    const body = request.body;
    if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
      request.log.debug({ bodyFields: Object.keys(body) }, 'traced request body');
    }
  });
  app.addHook('onResponse', async (request, reply) => {
    if (!request.trace?.channels.has('response')) return;
    request.log.debug({ statusCode: reply.statusCode, durationMs: Math.round(reply.elapsedTime * 1000) / 1000 }, 'traced response');
  });
}
