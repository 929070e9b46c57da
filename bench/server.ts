// The controller under benchmark: the real app with one extra route, the baseline, served by the same
// TLS listener. Prints one JSON line to stdout when it listens ({"ready":true,"url":...}); logs go to
// stderr. Stops on SIGTERM or SIGINT.
//
//   node dist/bench/server.js --data-dir <dir> [--listen 127.0.0.1:0] [--log-level warn]
//
// The data directory also comes from OVERLAY_DATA_DIR, the address from OVERLAY_LISTEN.
import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { createApp } from '../src/app/app.js';
import { loadConfig } from '../src/config/index.js';
import { envelope } from '../src/http/envelope.js';
import { BASELINE_PATH, BENCH_AUDIT_PATH, SERIES_PATH, SERIES_ROUTES } from './scenarios.js';
import type { AuditSettings } from '../src/kernel/audit.js';

const BASELINE_BODY = JSON.stringify(envelope({}));

function baselineRoute(app: FastifyInstance): void {
  app.get(BASELINE_PATH, (_req, reply) => reply.type('application/json; charset=utf-8').send(BASELINE_BODY));
  // Distinct route templates, each a series of the request metrics once asked for (GET /metrics).
  for (let i = 0; i < SERIES_ROUTES; i++) {
    app.get(`${SERIES_PATH}/${i}`, (_req, reply) => reply.type('application/json; charset=utf-8').send(BASELINE_BODY));
  }
}

/** The audit settings of the controller under test, once it is built. */
let auditSettings: AuditSettings | undefined;

/** Turns the audit log on or off between runs, so writes are measured both ways on one controller. */
function auditRoute(app: FastifyInstance): void {
  app.put(BENCH_AUDIT_PATH, (request, reply) => {
    const enabled = (request.query as { enabled?: string }).enabled;
    if (!auditSettings || (enabled !== 'true' && enabled !== 'false')) return reply.code(400).send({ error: 'enabled=true|false' });
    auditSettings.enabled = enabled === 'true';
    return reply.send({ enabled: auditSettings.enabled });
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'data-dir': { type: 'string' },
      listen: { type: 'string' },
      'log-level': { type: 'string', default: 'warn' },
    },
  });
  const config = loadConfig(
    {
      ...(values['data-dir'] !== undefined ? { dataDir: values['data-dir'] } : {}),
      listen: values.listen ?? process.env.OVERLAY_LISTEN ?? '127.0.0.1:0',
      logLevel: values['log-level'],
    },
    process.env,
  );
  const log = pino({ level: config.log.level }, pino.destination(2));
  const app = await createApp(config, {
    log,
    server: {
      extraRoutes: (server) => {
        baselineRoute(server);
        auditRoute(server);
      },
    },
  });
  auditSettings = app.core.kernel.audit?.settings;

  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    app.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  const [url] = await app.listen();
  process.stdout.write(JSON.stringify({ ready: true, url }) + '\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`bench server: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
