// The operator's probes, on every listener and without a credential: GET /health (the process
// answers), GET /ready (it should get traffic: 503 with Retry-After while the store is unreachable,
// a migration is missing or it is shutting down) and, where configured, GET /metrics in the
// Prometheus text format. None of them touches more than one small read of the store.
import type { FastifyInstance } from 'fastify';

/** Seconds a load balancer is asked to wait before asking /ready again. */
export const READY_RETRY_AFTER = 5;

/** The probes' paths: answered even while the controller stops. */
export const PROBE_PATHS: ReadonlySet<string> = new Set(['/health', '/ready']);

export interface ProbeOptions {
  /** Why the controller is not ready, or undefined. */
  notReady(): Promise<string | undefined>;
  /** Present where this listener serves /metrics. */
  metrics?: { contentType: string; text(): Promise<string> };
}

export function registerProbes(app: FastifyInstance, opts: ProbeOptions): void {
  app.get('/health', (_request, reply) => {
    void reply.header('cache-control', 'no-store').send({ status: 'ok' });
  });
  app.get('/ready', async (request, reply) => {
    const problem = await opts.notReady();
    void reply.header('cache-control', 'no-store');
    if (problem === undefined) return { status: 'ready' };
    request.log.warn({ problem }, 'not ready');
    return reply.code(503).header('retry-after', String(READY_RETRY_AFTER)).send({ status: 'unavailable', reason: problem });
  });
  const metrics = opts.metrics;
  if (metrics) {
    app.get('/metrics', async (_request, reply) => {
      const text = await metrics.text();
      return reply.header('cache-control', 'no-store').type(metrics.contentType).send(text);
    });
  }
}
