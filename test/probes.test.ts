// The operator's probes: /health and /ready on every listener without a credential, /ready's 503
// with Retry-After for each reason, and /metrics (Prometheus text) beside the Management API or on
// its own listener, with the series the README names.
import { copyFileSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
  ADMIN_USERNAME,
  asAdmin,
  authenticate,
  call,
  CLIENT,
  createIdentity,
  json,
  MGMT,
  startTestController,
  tempDir,
  type TestController,
} from './helpers.js';

function on(t: TestController, server: number, url: string): Promise<LightMyRequestResponse> {
  return t.app.servers[server]!.app.inject({ method: 'GET', url });
}

async function withListeners(yaml: string): Promise<{ t: TestController; remove(): void }> {
  const dir = tempDir('overlay-probes-');
  const file = join(dir.path, 'overlay.yaml');
  writeFileSync(file, yaml);
  const t = await startTestController({ env: { ...ADMIN_ENV, OVERLAY_CONFIG: file } });
  return { t, remove: dir.remove };
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition; throws on a line that is not one. */
function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = pair[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

function value(all: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = all.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return found.length === 0 ? undefined : found.reduce((sum, s) => sum + s.value, 0);
}

describe('/health and /ready', () => {
  let t: TestController;
  beforeAll(async () => {
    t = await startTestController({ env: ADMIN_ENV });
  });
  afterAll(async () => {
    await t.close();
  });

  it('answer without a credential, never cached', async () => {
    const health = await t.inject({ method: 'GET', url: '/health' });
    expect(health.statusCode).toBe(200);
    expect(json(health)).toEqual({ status: 'ok' });
    expect(health.headers['cache-control']).toBe('no-store');
    const ready = await t.inject({ method: 'GET', url: '/ready' });
    expect(ready.statusCode).toBe(200);
    expect(json(ready)).toEqual({ status: 'ready' });
    expect(ready.headers['retry-after']).toBeUndefined();
  });

  it('/ready is 503 with Retry-After while a migration is not applied', async () => {
    const db = t.app.core.store.db;
    const last = await db.selectFrom('kysely_migration').select(['name', 'timestamp']).orderBy('name', 'desc').executeTakeFirstOrThrow();
    await db.deleteFrom('kysely_migration').where('name', '=', last.name).execute();
    try {
      const res = await t.inject({ method: 'GET', url: '/ready' });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('5');
      expect(json(res)).toEqual({ status: 'unavailable', reason: `migrations not applied: ${last.name}` });
      // Alive all the same: the process answers.
      expect((await t.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
    } finally {
      await db.insertInto('kysely_migration').values(last).execute();
    }
    expect((await t.inject({ method: 'GET', url: '/ready' })).statusCode).toBe(200);
  });

  it('/ready is 503 while the store does not answer', async () => {
    // The migration table unreadable stands for a store that cannot be read at all.
    const db = t.app.core.store.db;
    await sql`alter table kysely_migration rename to kysely_migration_away`.execute(db);
    try {
      const res = await t.inject({ method: 'GET', url: '/ready' });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('5');
      expect(json(res).reason).toBe('store unreachable');
    } finally {
      await sql`alter table kysely_migration_away rename to kysely_migration`.execute(db);
    }
    expect((await t.inject({ method: 'GET', url: '/ready' })).statusCode).toBe(200);
  });

  it('/ready is 503 while the store file is removed or replaced under the running controller', async () => {
    // Seen from outside: with overlay.db deleted, writes were still answered 201 and /ready said
    // ready; the next start made an empty store.
    const other = await startTestController({ env: ADMIN_ENV, memoryStore: false });
    try {
      const file = join(other.dataDir, 'overlay.db');
      const ready = async () => other.inject({ method: 'GET', url: '/ready' });
      renameSync(file, `${file}.moved`);
      const removed = await ready();
      expect(removed.statusCode).toBe(503);
      expect(json(removed).reason).toMatch(/^the store file .*overlay\.db was removed while the controller runs/);
      copyFileSync(`${file}.moved`, file);
      expect(json(await ready()).reason).toMatch(/was replaced while the controller runs/);
      rmSync(file);
      renameSync(`${file}.moved`, file);
      expect((await ready()).statusCode).toBe(200);
    } finally {
      await other.close();
    }
  });

  it('/ready is 503 once the controller is shutting down', async () => {
    const other = await startTestController({ env: ADMIN_ENV });
    const closing = other.close();
    // close() turns readiness off first, before the listeners stop taking requests.
    expect(await other.app.core.readiness.problem()).toBe('shutting down');
    await closing;
  });
});

describe('/metrics', () => {
  let t: TestController;
  beforeAll(async () => {
    t = await startTestController({ env: ADMIN_ENV });
  });
  afterAll(async () => {
    await t.close();
  });

  async function scrape(): Promise<Sample[]> {
    const res = await t.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return samples(res.body);
  }

  it('counts requests by API, method, route template and status, never by raw URL', async () => {
    const admin = await asAdmin(t);
    const id = await createIdentity(t, admin, { name: 'metrics-subject' });
    for (let i = 0; i < 3; i++) expect((await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${MGMT}/identities/no-such-id`, { token: admin })).statusCode).toBe(404);
    expect((await call(t, 'GET', `${MGMT}/no/such/route`)).statusCode).toBe(404);
    expect((await call(t, 'GET', `${CLIENT}/version`)).statusCode).toBe(200);

    const all = await scrape();
    const route = `${MGMT}/identities/:id`;
    expect(value(all, 'overlay_http_requests_total', { api: 'edge-management', method: 'GET', route, status: '200' })).toBe(3);
    expect(value(all, 'overlay_http_requests_total', { api: 'edge-management', method: 'GET', route, status: '404' })).toBe(1);
    expect(value(all, 'overlay_http_request_duration_seconds_count', { route, status: '200' })).toBe(3);
    expect(value(all, 'overlay_http_request_duration_seconds_bucket', { route, status: '200', le: '+Inf' })).toBe(3);
    expect(value(all, 'overlay_http_requests_total', { api: 'none', route: 'unmatched', status: '404' })).toBe(1);
    expect(value(all, 'overlay_http_requests_total', { api: 'edge-client', route: `${CLIENT}/version` })).toBe(1);
    // No label holds an id or a path that was asked for but is no route.
    expect(all.some((s) => Object.values(s.labels).some((v) => v.includes(id) || v.includes('no-such') || v.includes('/no/such')))).toBe(false);
  });

  it('counts logins by method and result, and the API sessions they opened', async () => {
    const before = await scrape();
    const successes = value(before, 'overlay_logins_total', { method: 'password', result: 'success' }) ?? 0;
    const sessionsBefore = value(before, 'overlay_api_sessions')!;
    expect((await authenticate(t, ADMIN_USERNAME, ADMIN_PASSWORD)).statusCode).toBe(200);
    expect((await authenticate(t, ADMIN_USERNAME, 'not-the-password', { remoteAddress: '10.9.9.9' })).statusCode).toBe(401);
    const after = await scrape();
    expect(value(after, 'overlay_logins_total', { method: 'password', result: 'success' })).toBe(successes + 1);
    expect(value(after, 'overlay_logins_total', { method: 'password', result: 'invalid' })).toBe(1);
    expect(value(after, 'overlay_api_sessions')).toBe(sessionsBefore + 1);
    expect(value(after, 'overlay_sessions')).toBe(0);
  });

  it('times store transactions and policy link recomputations', async () => {
    const admin = await asAdmin(t);
    const before = await scrape();
    const commits = value(before, 'overlay_store_transaction_duration_seconds_count', { result: 'commit' })!;
    const res = await call(t, 'POST', `${MGMT}/service-policies`, {
      token: admin,
      body: { name: 'metrics-policy', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#all'], serviceRoles: ['#all'] },
    });
    expect(res.statusCode, res.body).toBe(201);
    await createIdentity(t, admin, { name: 'metrics-linked', roleAttributes: ['linked'] });
    const after = await scrape();
    expect(value(after, 'overlay_store_transaction_duration_seconds_count', { result: 'commit' })).toBeGreaterThanOrEqual(commits + 2);
    expect(value(after, 'overlay_policy_link_recompute_duration_seconds_count', { trigger: 'policy' })).toBeGreaterThanOrEqual(1);
    expect(value(after, 'overlay_policy_link_recompute_duration_seconds_count', { trigger: 'entity' })).toBeGreaterThanOrEqual(1);
  });

  it('reports cache lookups and hit ratios per cache, and the process metrics', async () => {
    const admin = await asAdmin(t);
    for (let i = 0; i < 5; i++) expect((await call(t, 'GET', `${MGMT}/current-api-session`, { token: admin })).statusCode).toBe(200);
    const all = await scrape();
    const hits = value(all, 'overlay_cache_lookups_total', { cache: 'api-sessions', result: 'hit' })!;
    const misses = value(all, 'overlay_cache_lookups_total', { cache: 'api-sessions', result: 'miss' })!;
    expect(hits).toBeGreaterThanOrEqual(4);
    expect(value(all, 'overlay_cache_hit_ratio', { cache: 'api-sessions' })).toBeCloseTo(hits / (hits + misses), 6);
    expect(value(all, 'overlay_process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(value(all, 'overlay_process_resident_memory_bytes')).toBeGreaterThan(0);
    // Every name is the controller's.
    expect(all.filter((s) => !s.name.startsWith('overlay_')).map((s) => s.name)).toEqual([]);
  });
});

describe('metric names', () => {
  it('every metric of the controller is documented in the README', async () => {
    const t = await startTestController({ env: ADMIN_ENV });
    try {
      const names = (await t.app.core.metrics.registry.getMetricsAsJSON()).map((m) => m.name);
      expect(names.length).toBeGreaterThanOrEqual(9);
      const readme = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8');
      expect(names.filter((name) => !readme.includes(`\`${name}\``))).toEqual([]);
    } finally {
      await t.close();
    }
  });
});

describe('where the probes are served', () => {
  it('/health and /ready on every listener; /metrics only beside the Management API', async () => {
    const { t, remove } = await withListeners(`
web:
  - name: client
    bindPoints: [{ interface: "127.0.0.1:0" }]
    apis: [{ binding: edge-client }]
  - name: admin
    bindPoints: [{ interface: "127.0.0.1:0" }]
    apis: [{ binding: edge-management }]
`);
    try {
      for (const server of [0, 1]) {
        expect((await on(t, server, '/health')).statusCode).toBe(200);
        expect((await on(t, server, '/ready')).statusCode).toBe(200);
      }
      expect((await on(t, 0, '/metrics')).statusCode).toBe(404);
      expect((await on(t, 1, '/metrics')).statusCode).toBe(200);
    } finally {
      await t.close();
      remove();
    }
  });

  it('/metrics only on the listener that lists the metrics binding', async () => {
    const { t, remove } = await withListeners(`
web:
  - name: api
    bindPoints: [{ interface: "127.0.0.1:0" }]
    apis: [{ binding: edge-client }, { binding: edge-management }]
  - name: scrape
    bindPoints: [{ interface: "127.0.0.1:0" }]
    apis: [{ binding: metrics }]
`);
    try {
      expect((await on(t, 0, '/metrics')).statusCode).toBe(404);
      const res = await on(t, 1, '/metrics');
      expect(res.statusCode).toBe(200);
      expect(res.body).toContain('overlay_http_requests_total');
      // The metrics listener hosts no API.
      expect((await on(t, 1, `${MGMT}/version`)).statusCode).toBe(404);
      expect((await on(t, 1, '/ready')).statusCode).toBe(200);
    } finally {
      await t.close();
      remove();
    }
  });
});
