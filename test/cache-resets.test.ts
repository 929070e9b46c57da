// Every cache keeps only what it can read again: a scenario that builds a network through the HTTP
// APIs and uses it (logins, service lists, markers, sessions, posture, lockout, revocations, OIDC
// bearer tokens, deletes) gives the same answers whether or not every cache is dropped
// (caches.resetAll()) at random points — before requests, and while they run. Ids are made
// deterministic here so that two runs answer byte for byte alike (tokens aside, which are random).
import { afterEach, describe, expect, it, vi } from 'vitest';
import type * as Ids from '../src/ids.js';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
  ADMIN_USERNAME,
  call,
  CLIENT,
  MGMT,
  startTestController,
  type CallOptions,
  type TestController,
} from './helpers.js';
import { INTERCEPT } from './fixtures/network.js';
import { bearer, decodeJwt, oidcLogin, postToken } from './oidc-helpers.js';

const ids = vi.hoisted(() => ({ next: 0 }));
// Ids in order; tokens stay random (their values are labelled).
vi.mock('../src/ids.js', async (importOriginal) => ({
  ...(await importOriginal<typeof Ids>()),
  newId: () => `id${String(++ids.next).padStart(9, '0')}`,
  newUuid: () => `00000000-0000-4000-8000-${String(++ids.next).padStart(12, '0')}`,
}));

/** mulberry32: a small deterministic PRNG. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** Fields whose values are random in every run: compared by presence only. */
const RANDOM_FIELDS = new Set(['token', 'access_token', 'id_token', 'refresh_token', 'requestId']);

interface Answer {
  request: string;
  status: number;
  body: unknown;
}

/** One run of the scenario on a fresh controller; `drops` says where every cache is dropped. */
class Run {
  readonly answers: Answer[] = [];
  /** Random values (token ids) that show in answers, by a stable label. */
  private readonly labels = new Map<string, string>();
  resets = 0;

  constructor(
    readonly t: TestController,
    private readonly drops: (() => number) | undefined,
  ) {}

  /** A value that differs between runs, shown as `label` in the answers compared. */
  label(value: string, label: string): void {
    this.labels.set(value, label);
  }

  async req(method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, opts: CallOptions = {}): Promise<{ status: number; data: any }> {
    const roll = this.drops?.() ?? 1;
    let concurrent: Promise<void> | undefined;
    if (roll < 0.25) {
      await this.t.app.core.caches.resetAll();
      this.resets++;
    } else if (roll < 0.35) {
      // Dropped while the request runs.
      concurrent = this.t.app.core.caches.resetAll();
      this.resets++;
    }
    const res = await call(this.t, method, url, opts);
    await concurrent;
    const body = res.body === '' ? undefined : JSON.parse(res.body);
    this.answers.push({ request: `${method} ${url}`, status: res.statusCode, body: this.normalise(body) });
    // Each step happens a second after the one before.
    this.t.clock.advance(1000);
    return { status: res.statusCode, data: body?.data };
  }

  private normalise(value: unknown, key?: string): unknown {
    if (key !== undefined && RANDOM_FIELDS.has(key)) return typeof value === 'string' ? '<random>' : value;
    if (typeof value === 'string') {
      let out = value;
      for (const [random, label] of this.labels) out = out.split(random).join(label);
      return out;
    }
    if (Array.isArray(value)) return value.map((v) => this.normalise(v));
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.normalise(v, k)]));
    }
    return value;
  }
}

const lockPolicy = {
  name: 'lock-after-two',
  primary: {
    cert: { allowed: true, allowExpiredCerts: true },
    extJwt: { allowed: true, allowedSigners: null },
    updb: {
      allowed: true,
      maxAttempts: 2,
      lockoutDurationMinutes: 0,
      minPasswordLength: 5,
      requireMixedCase: false,
      requireNumberChar: false,
      requireSpecialChar: false,
    },
  },
  secondary: { requireTotp: false, requireExtJwtSigner: null },
};

let controllers: TestController[] = [];
afterEach(async () => {
  for (const t of controllers) await t.close();
  controllers = [];
});

async function scenario(seed: number | undefined): Promise<Run> {
  ids.next = 0;
  const t = await startTestController({ env: ADMIN_ENV });
  controllers.push(t);
  const run = new Run(t, seed === undefined ? undefined : prng(seed));
  const mgmt = (method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', path: string, token: string, body?: unknown) =>
    run.req(method, `${MGMT}${path}`, { token, ...(body !== undefined ? { body } : {}) });
  const client = (method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', path: string, token: string, body?: unknown) =>
    run.req(method, `${CLIENT}${path}`, { token, ...(body !== undefined ? { body } : {}) });
  const withBearer = (api: string, path: string, accessToken: string) => run.req('GET', `${api}${path}`, { headers: bearer(accessToken) });

  // ---- the network, through the Management API ----
  const admin = (await run.req('POST', `${MGMT}/authenticate?method=password`, { body: { username: ADMIN_USERNAME, password: ADMIN_PASSWORD } })).data.token as string;
  const lock = (await mgmt('POST', '/auth-policies', admin, lockPolicy)).data.id as string;
  const people: Record<string, { id: string; username: string; password: string }> = {};
  for (const [name, roleAttributes, extra] of [
    ['alice', ['eng'], {}],
    ['bob', ['eng', 'ops'], {}],
    ['carol', ['sales'], { authPolicyId: lock }],
  ] as const) {
    const id = (await mgmt('POST', '/identities', admin, { name, type: 'User', isAdmin: false, roleAttributes, ...extra })).data.id as string;
    const username = `${name}-user`;
    const password = `${name}-password-1`;
    await mgmt('POST', '/authenticators', admin, { method: 'updb', identityId: id, username, password });
    people[name] = { id, username, password };
  }
  const intercept = (await mgmt('POST', '/configs', admin, { name: 'web-intercept', configTypeId: 'intercept.v1', data: INTERCEPT })).data.id as string;
  const web = (await mgmt('POST', '/services', admin, { name: 'web', roleAttributes: ['web'], configs: [intercept] })).data.id as string;
  const db = (await mgmt('POST', '/services', admin, { name: 'db', roleAttributes: ['db'] })).data.id as string;
  const crm = (await mgmt('POST', '/services', admin, { name: 'crm', roleAttributes: ['sales'] })).data.id as string;
  const check = (await mgmt('POST', '/posture-checks', admin, { name: 'corp-domain', typeId: 'DOMAIN', domains: ['corp.example'], roleAttributes: ['corp'] })).data.id as string;
  const engWeb = (await mgmt('POST', '/service-policies', admin, {
    name: 'eng-web',
    type: 'Dial',
    semantic: 'AnyOf',
    identityRoles: ['#eng'],
    serviceRoles: ['#web'],
    postureCheckRoles: ['#corp'],
  })).data.id as string;
  await mgmt('POST', '/service-policies', admin, { name: 'ops-db', type: 'Bind', semantic: 'AllOf', identityRoles: ['#ops', '#eng'], serviceRoles: ['#db'] });
  await mgmt('POST', '/service-policies', admin, { name: 'sales-crm', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#sales'], serviceRoles: ['#sales'] });
  await mgmt('POST', '/edge-routers', admin, { name: 'er-public', roleAttributes: ['public'] });
  await mgmt('POST', '/edge-routers', admin, { name: 'er-tunneler', roleAttributes: ['private'], isTunnelerEnabled: true });
  await mgmt('POST', '/edge-router-policies', admin, { name: 'everyone-public', semantic: 'AnyOf', identityRoles: ['#eng', '#sales'], edgeRouterRoles: ['#public'] });
  await mgmt('POST', '/service-edge-router-policies', admin, { name: 'all', semantic: 'AnyOf', serviceRoles: ['#all'], edgeRouterRoles: ['#all'] });

  // ---- clients log in and look around ----
  const tokens: Record<string, string> = {};
  const logIn = async (name: string) => {
    const p = people[name]!;
    const { data } = await run.req('POST', `${CLIENT}/authenticate?method=password`, {
      body: { username: p.username, password: p.password, configTypes: ['all'], envInfo: { os: 'linux' }, sdkInfo: { version: '1.0.0' } },
    });
    tokens[name] = data.token as string;
  };
  for (const name of Object.keys(people)) await logIn(name);
  const look = async (name: string) => {
    const token = tokens[name]!;
    await client('GET', '/services', token);
    await client('GET', '/services?sort=name%20desc&limit=2', token);
    await client('GET', '/current-api-session/service-updates', token);
    await client('GET', '/current-identity', token);
    await client('GET', '/current-api-session', token);
    await client('GET', '/current-identity/edge-routers', token);
  };
  for (const name of Object.keys(people)) await look(name);

  // ---- posture, sessions, refusals ----
  await client('POST', '/sessions', tokens.alice!, { serviceId: web, type: 'Dial' }); // 409: posture fails
  await client('POST', '/posture-response', tokens.alice!, { id: check, typeId: 'DOMAIN', domain: 'corp.example' });
  await look('alice');
  const session = (await client('POST', '/sessions', tokens.alice!, { serviceId: web, type: 'Dial' })).data?.id as string;
  await client('POST', '/sessions', tokens.alice!, { serviceId: web, type: 'Dial' }); // the same session again
  await client('GET', '/sessions', tokens.alice!);
  await client('GET', `/sessions/${session}`, tokens.alice!);
  await client('GET', `/services/${web}/edge-routers`, tokens.alice!);
  await client('POST', '/sessions', tokens.bob!, { serviceId: db, type: 'Bind' });
  await client('POST', '/sessions', tokens.carol!, { serviceId: crm, type: 'Dial' });
  await client('POST', '/sessions', tokens.carol!, { serviceId: web, type: 'Dial' }); // 404: not hers
  await mgmt('GET', '/sessions', admin);
  await mgmt('GET', '/api-sessions', admin);
  await mgmt('GET', `/identities/${people.alice!.id}/posture-data`, admin);
  await mgmt('GET', `/identities/${people.alice!.id}/failed-service-requests`, admin);
  await t.app.core.sessions.flush();

  // ---- changes that move service lists and markers ----
  await mgmt('PATCH', `/identities/${people.bob!.id}`, admin, { roleAttributes: ['ops'] });
  await look('bob');
  await mgmt('PATCH', `/services/${web}`, admin, { name: 'web-renamed' });
  await mgmt('PATCH', `/configs/${intercept}`, admin, { data: { ...INTERCEPT, addresses: ['web2.corp.example'] } });
  await mgmt('PATCH', `/service-policies/${engWeb}`, admin, { identityRoles: ['#eng', '#sales'] });
  for (const name of Object.keys(people)) await look(name);
  await mgmt('GET', `/service-policies/${engWeb}/identities`, admin);
  await mgmt('GET', '/identities?sort=name', admin);
  await mgmt('GET', `/identities/${people.carol!.id}`, admin);

  // ---- lockout: wrong passwords disable carol, whose session stops working at once ----
  for (let i = 0; i < 2; i++) {
    await run.req('POST', `${CLIENT}/authenticate?method=password`, { body: { username: people.carol!.username, password: 'wrong-password' } });
  }
  await client('GET', '/services', tokens.carol!);
  await mgmt('GET', `/identities/${people.carol!.id}`, admin);
  await mgmt('POST', `/identities/${people.carol!.id}/enable`, admin);
  // The lockout ended carol's API session: she logs in again.
  await client('GET', '/services', tokens.carol!);
  await logIn('carol');
  await look('carol');

  // ---- disable and enable, delete an API session ----
  await mgmt('POST', `/identities/${people.bob!.id}/disable`, admin, { durationMinutes: 0 });
  await client('GET', '/current-identity', tokens.bob!);
  await mgmt('POST', `/identities/${people.bob!.id}/enable`, admin);
  // Disabling ended bob's API session: he logs in again.
  await client('GET', '/services', tokens.bob!);
  await logIn('bob');
  await look('bob');
  await client('DELETE', `/sessions/${session}`, tokens.alice!);
  await client('GET', '/sessions', tokens.alice!);
  await client('DELETE', '/current-api-session', tokens.alice!);
  await client('GET', '/services', tokens.alice!);

  // ---- OIDC bearer tokens and revocations ----
  const oidc = await oidcLogin(t, people.bob!.username, people.bob!.password);
  const jti = decodeJwt(oidc.access_token).payload.jti as string;
  run.label(jti, '<jti>');
  await withBearer(CLIENT, '/services', oidc.access_token);
  const refreshed = await postToken(t, { grant_type: 'refresh_token', refresh_token: oidc.refresh_token!, client_id: 'overlay' });
  const second = JSON.parse(refreshed.body).access_token as string;
  run.label(decodeJwt(second).payload.jti as string, '<jti-2>');
  await withBearer(CLIENT, '/current-identity', second);
  await mgmt('POST', '/revocations', admin, { id: jti, type: 'JTI' });
  await withBearer(CLIENT, '/services', oidc.access_token);
  await withBearer(CLIENT, '/services', second);
  await mgmt('POST', '/revocations', admin, { id: people.bob!.id, type: 'IDENTITY' });
  await withBearer(CLIENT, '/services', second);
  await withBearer(MGMT, '/current-identity', second);
  // The revocation ended bob's legacy API session too; a later login works.
  await client('GET', '/current-identity', tokens.bob!);
  tokens.bob = (await run.req('POST', `${CLIENT}/authenticate?method=password`, {
    body: { username: people.bob!.username, password: people.bob!.password, configTypes: ['all'] },
  })).data.token as string;

  // ---- deletes ----
  await mgmt('DELETE', `/services/${db}`, admin);
  await look('bob');
  await mgmt('DELETE', `/identities/${people.carol!.id}`, admin);
  await client('GET', '/services', tokens.carol!);
  await mgmt('GET', '/sessions', admin);
  await t.app.core.sessions.flush();
  await mgmt('GET', '/api-sessions', admin);
  await look('bob');
  return run;
}

describe('dropping every cache at random points', () => {
  it('changes no answer of a scenario over both Edge APIs and OIDC', { timeout: 120_000 }, async () => {
    const baseline = await scenario(undefined);
    const statuses = baseline.answers.map((a) => `${a.status} ${a.request}`);
    // The scenario does what it says: posture refuses then admits, a lockout, a disabled identity,
    // an ended API session and revocations (bearer and legacy) refuse their callers.
    expect(statuses).toContain(`409 POST ${CLIENT}/sessions`);
    expect(statuses.filter((s) => s.startsWith('401 GET'))).toHaveLength(10);
    expect(baseline.answers.length).toBeGreaterThan(100);

    for (const seed of [1, 2, 3]) {
      const dropped = await scenario(seed);
      expect(dropped.resets, `seed ${seed}`).toBeGreaterThan(10);
      for (const [i, answer] of dropped.answers.entries()) expect(answer, `seed ${seed}, answer ${i}`).toEqual(baseline.answers[i]);
      expect(dropped.answers).toHaveLength(baseline.answers.length);
      for (const t of controllers) await t.close();
      controllers = [];
    }
  });
});
