// Shared test scaffolding: a controller on a temp data dir with an in-memory store, an injected
// clock, and helpers to call it through inject().
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import { createApp, type App, type AppOptions } from '../src/app/app.js';
import { loadConfig, type Config } from '../src/config/index.js';

export interface TestClock {
  (): number;
  advance(ms: number): void;
  set(ms: number): void;
}

export function testClock(start = Date.parse('2026-01-02T03:04:05.678Z')): TestClock {
  let now = start;
  const clock = (() => now) as TestClock;
  clock.advance = (ms) => {
    now += ms;
  };
  clock.set = (ms) => {
    now = ms;
  };
  return clock;
}

export function tempDir(prefix = 'overlay-test-'): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export interface TestController {
  app: App;
  server: FastifyInstance;
  clock: TestClock;
  config: Config;
  dataDir: string;
  inject(opts: InjectOptions): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export async function startTestController(
  options: AppOptions & { env?: NodeJS.ProcessEnv; clock?: TestClock } = {},
): Promise<TestController> {
  const dir = tempDir();
  const clock = options.clock ?? testClock();
  const config = loadConfig({ dataDir: dir.path, listen: '127.0.0.1:0' }, options.env ?? {});
  const app = await createApp(config, {
    log: pino({ level: 'silent' }),
    memoryStore: true,
    ...options,
    clock,
  });
  const server = app.servers[0]!.app;
  await server.ready();
  return {
    app,
    server,
    clock,
    config,
    dataDir: dir.path,
    inject: (opts) => server.inject(opts),
    async close() {
      await app.close();
      dir.remove();
    },
  };
}

export function json(res: LightMyRequestResponse): any {
  return JSON.parse(res.body);
}
