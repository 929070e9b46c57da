// The service-list change marker (/current-api-session/service-updates): lastChangeAt moves whenever
// something changes what the caller's service list shows (access gained or lost, a service, a config
// or its type, an identity override, a posture check of its policies, its own posture) and does not
// move for anything else (another identity, an unrelated service, config or check, an edge router,
// the same posture reported again).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ADMIN_ENV, asAdmin, call, MGMT, startTestController, type TestController, expectMissingCredential } from './helpers.js';
import { client, HOST, INTERCEPT, Network, ok, type Person } from './fixtures/network.js';
import { ClientReadModel } from '../src/domain/client/read-model.js';

let t: TestController;
let net: Network;
let alice: Person;
let bob: Person;
let carol: Person;
const tokens: Record<string, string> = {};
const ids: Record<string, string> = {};

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  net = new Network(t, await asAdmin(t));
  alice = await net.person('alice', ['eng']);
  bob = await net.person('bob', ['eng']);
  carol = await net.person('carol', ['sales']);
  ids.type = await net.create('config-types', { name: 'custom.v1', schema: { type: 'object' } });
  ids.custom = await net.config(ids.type, { level: 1 });
  ids.intercept = await net.config('intercept.v1', INTERCEPT);
  ids.web = await net.service('web', ['web'], { configs: [ids.intercept, ids.custom] });
  ids.sales = await net.service('sales-app', ['sales']);
  ids.check = await net.postureCheck('DOMAIN', { domains: ['corp.example'] }, ['corp']);
  ids.otherCheck = await net.postureCheck('DOMAIN', { domains: ['other.example'] }, ['other']);
  ids.engWeb = await net.servicePolicy('Dial', ['#eng'], ['#web'], ['#corp']);
  await net.servicePolicy('Dial', ['#sales'], ['#sales'], ['#other']);
  ids.router = await net.edgeRouter('er-1', ['public']);
  for (const [name, p] of Object.entries({ alice, bob, carol })) tokens[name] = await net.login(p);
});
afterAll(async () => {
  await t.close();
});

async function marker(token: string): Promise<string> {
  return ok(await client(t, 'GET', '/current-api-session/service-updates', token)).lastChangeAt as string;
}

/** Markers of every caller now. */
async function markers(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [name, token] of Object.entries(tokens)) out[name] = await marker(token);
  return out;
}

/**
 * Every caller's service list as the API answers it (kept answers, views and catalogs) equals the
 * list a network without anything kept computes now.
 */
async function answersAreCurrent(): Promise<void> {
  const core = t.app.core;
  const fresh = new ClientReadModel({ store: core.store, clock: core.clock, resources: core.resources, caches: core.caches, keys: core.oidc.keys, issuers: core.oidc.issuers, apiSessions: core.sessions });
  for (const [name, token] of Object.entries(tokens)) {
    const got = ok(await client(t, 'GET', '/services?limit=500&configTypes=all', token));
    const s = ok(await client(t, 'GET', '/current-api-session', token));
    const caller = { identityId: s.identityId, identityName: name, apiSessionId: s.id, configTypes: s.configTypes, isMfaComplete: false, mfaPassedAt: null, sessionCreatedAt: 0 };
    const expected = await fresh.services.list(caller, { sort: [], offset: 0, limit: 500 }, 'all');
    expect(got, name).toEqual(JSON.parse(JSON.stringify(expected.items)));
  }
}

/** Runs a change a second after the last; answers whose markers moved. */
async function moved(change: () => Promise<void>): Promise<string[]> {
  await answersAreCurrent();
  const before = await markers();
  t.clock.advance(1_000);
  await change();
  await answersAreCurrent();
  const after = await markers();
  const names = Object.keys(before).filter((n) => after[n] !== before[n]);
  for (const n of names) expect(Date.parse(after[n]!), n).toBeGreaterThan(Date.parse(before[n]!));
  return names.sort();
}

describe('GET /current-api-session/service-updates', () => {
  it('answers an RFC 3339 time, the same while nothing changes', async () => {
    const first = await marker(tokens.alice!);
    expect(first).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    t.clock.advance(5_000);
    expect(await marker(tokens.alice!)).toBe(first);
  });

  it('tells, on the first call of an API session, of a change made since it began', async () => {
    const session = await net.login(alice);
    const created = Date.parse(ok(await client(t, 'GET', '/current-api-session', session)).createdAt as string);
    t.clock.advance(2_000);
    await net.patch('services', ids.web!, { maxIdleTimeMillis: 45_000 });
    // It answered the session's start, which a client that listed its services then takes as no change.
    expect(Date.parse(await marker(session))).toBe(created + 2_000);
  });

  it('answers 401 without a credential', async () => {
    const res = await client(t, 'GET', '/current-api-session/service-updates');
    expectMissingCredential(res);
  });
});

describe('lastChangeAt does not move for changes outside the caller\u2019s list', () => {
  it.each<[string, () => Promise<void>, string[]]>([
    ['another identity\u2019s attributes', () => net.patch('identities', bob.id, { roleAttributes: ['eng', 'emea'] }), []],
    ['a service the caller cannot use', () => net.patch('services', ids.sales!, { name: 'sales-app-2' }), ['carol']],
    ['an edge router', () => net.patch('edge-routers', ids.router!, { name: 'er-renamed' }), []],
    ['an edge router policy', async () => void (await net.edgeRouterPolicy(['#eng'], ['#public'])), []],
    ['a config no service uses', async () => void (await net.config('intercept.v1', INTERCEPT)), []],
    ['a posture check of other policies', () => net.patch('posture-checks', ids.otherCheck!, { typeId: 'DOMAIN', domains: ['else.example'] }), ['carol']],
    ['another identity\u2019s posture', async () => void ok(await client(t, 'POST', '/posture-response', tokens.bob, { id: ids.check, typeId: 'DOMAIN', domain: 'corp.example' }), 201), ['bob']],
    ['a service policy for others', async () => void (await net.servicePolicy('Bind', ['#sales'], ['#sales'])), ['carol']],
    ['another identity\u2019s access', () => net.patch('identities', carol.id, { roleAttributes: ['emea'] }), ['carol']],
  ])('%s', async (_name, change, expected) => {
    expect(await moved(change)).toEqual(expected);
  });
});

describe('lastChangeAt moves when the caller\u2019s list changes', () => {
  it.each<[string, () => Promise<void>, string[]]>([
    ['its own posture changes what passes', async () => void ok(await client(t, 'POST', '/posture-response', tokens.alice, { id: ids.check, typeId: 'DOMAIN', domain: 'corp.example' }), 201), ['alice']],
    ['a posture check of its policies', () => net.patch('posture-checks', ids.check!, { typeId: 'DOMAIN', domains: ['corp.example', 'lab.example'] }), ['alice', 'bob']],
    ['access gained: a new service', async () => void (ids.wiki = await net.service('wiki', ['web'])), ['alice', 'bob']],
    ['a service of its list', () => net.patch('services', ids.web!, { maxIdleTimeMillis: 60_000 }), ['alice', 'bob']],
    ['a config of its services', () => net.patch('configs', ids.intercept!, { data: { ...INTERCEPT, addresses: ['new.corp.example'] } }), ['alice', 'bob']],
    ['the name of a config type of its services', () => net.patch('config-types', ids.type!, { name: 'custom.v2' }), ['alice', 'bob']],
    ['a config of its services deleted', () => net.remove('configs', ids.custom!), ['alice', 'bob']],
    [
      'its own service-config override',
      async () => {
        const host = await net.config('host.v1', HOST);
        ok(await call(t, 'POST', `${MGMT}/identities/${alice.id}/service-configs`, { token: net.admin, body: [{ serviceId: ids.web, configId: host }] }));
      },
      ['alice'],
    ],
    ['a Bind permission added', async () => void (ids.bind = await net.servicePolicy('Bind', [`@${bob.id}`], [`@${ids.web}`])), ['bob']],
    ['a policy granting it deleted', () => net.remove('service-policies', ids.bind!), ['bob']],
    ['access lost: its attributes', () => net.patch('identities', bob.id, { roleAttributes: [] }), ['bob']],
    ['access gained: its attributes', () => net.patch('identities', bob.id, { roleAttributes: ['eng'] }), ['bob']],
    ['a service deleted', () => net.remove('services', ids.wiki!), ['alice', 'bob']],
  ])('%s', async (_name, change, expected) => {
    expect(await moved(change)).toEqual(expected);
  });
});

describe('lastChangeAt after the same posture again, and per API session', () => {
  it('does not move when the same posture is reported again', async () => {
    expect(await moved(async () => void ok(await client(t, 'POST', '/posture-response', tokens.alice, { id: ids.check, typeId: 'DOMAIN', domain: 'corp.example' }), 201))).toEqual([]);
  });

  it('is kept per API session: another API session of the same identity has its own', async () => {
    const second = await net.login(alice);
    const before = await marker(tokens.alice!);
    const other = await marker(second);
    t.clock.advance(1_000);
    // the second API session's posture passes now; the first's list is unchanged
    ok(await client(t, 'POST', '/posture-response', second, { id: ids.check, typeId: 'DOMAIN', domain: 'lab.example' }), 201);
    expect(await marker(tokens.alice!)).toBe(before);
    expect(Date.parse(await marker(second))).toBeGreaterThan(Date.parse(other));
  });
});

describe('lastChangeAt and checks that change with time alone', () => {
  it('moves when an MFA timeout runs out and the list stops granting what it did', async () => {
    const dana = await net.person('dana', ['mfa-timed']);
    const check = await net.postureCheck('MFA', { timeoutSeconds: 60 });
    const service = await net.service('svc-mfa-timed');
    await net.servicePolicy('Dial', ['#mfa-timed'], [`@${service}`], [`@${check}`]);
    const token = await net.login(dana);
    const apiSessionId = ok(await client(t, 'GET', '/current-api-session', token)).id as string;
    await t.app.core.sessions.setMfaComplete(t.app.core.sessions.cached(apiSessionId)!);
    const passedAt = t.clock();
    const passing = async () => ok(await client(t, 'GET', `/services/${service}`, token)).postureQueries[0].isPassing as boolean;
    expect(await passing()).toBe(true);
    const before = await marker(token);
    t.clock.advance(30_000);
    expect(await marker(token)).toBe(before);
    t.clock.advance(31_000);
    expect(await passing()).toBe(false);
    // The list changed when the timeout ran out, though nothing was written.
    const after = await marker(token);
    expect(Date.parse(after)).toBeGreaterThan(Date.parse(before));
    expect(Date.parse(after)).toBeLessThanOrEqual(t.clock());
    expect(Date.parse(after)).toBeGreaterThanOrEqual(passedAt + 60_000);
  });

  /** An identity given a service behind an MFA check with a timeout, logged in. */
  async function behindMfaTimeout(name: string, timeoutSeconds: number): Promise<{ token: string; apiSessionId: string; service: string }> {
    const p = await net.person(name, [name]);
    const check = await net.postureCheck('MFA', { timeoutSeconds });
    const service = await net.service(`svc-${name}`);
    await net.servicePolicy('Dial', [`#${name}`], [`@${service}`], [`@${check}`]);
    const token = await net.login(p);
    return { token, apiSessionId: ok(await client(t, 'GET', '/current-api-session', token)).id as string, service };
  }

  /** How many times the caller's service list is made while `f` runs. */
  async function listsMade(f: () => Promise<void>): Promise<number> {
    const list = vi.spyOn(t.app.core.client.services, 'list');
    try {
      await f();
      return list.mock.calls.length;
    } finally {
      list.mockRestore();
    }
  }

  it('takes the list again only once the timeout runs out, not at every call before', async () => {
    const { token, apiSessionId, service } = await behindMfaTimeout('erin', 60);
    await t.app.core.sessions.setMfaComplete(t.app.core.sessions.cached(apiSessionId)!);
    const before = await marker(token);
    expect(
      await listsMade(async () => {
        for (let i = 0; i < 5; i++) {
          t.clock.advance(10_000);
          expect(await marker(token)).toBe(before);
        }
      }),
    ).toBe(0);
    t.clock.advance(10_000);
    let after = '';
    expect(await listsMade(async () => void (after = await marker(token)))).toBe(1);
    expect(Date.parse(after)).toBe(t.clock());
    expect(ok(await client(t, 'GET', `/services/${service}`, token)).postureQueries[0].isPassing).toBe(false);
    // Timed out, it cannot change with time again.
    t.clock.advance(10_000);
    expect(await listsMade(async () => expect(await marker(token)).toBe(after))).toBe(0);
  });

  it('does not take the list again at every call of a caller that never passed the MFA', async () => {
    const { token } = await behindMfaTimeout('frank', 60);
    const before = await marker(token);
    expect(
      await listsMade(async () => {
        for (const step of [1_000, 60_000, 120_000]) {
          t.clock.advance(step);
          expect(await marker(token)).toBe(before);
        }
      }),
    ).toBe(0);
  });

  it('keeps the service list answer of a caller whose list cannot change with time, not of one counting down', async () => {
    const { token, apiSessionId } = await behindMfaTimeout('gina', 60);
    const services = async () => ok(await client(t, 'GET', '/services', token));
    const never = await services();
    expect(never[0].postureQueries[0].postureQueries[0]).toMatchObject({ isPassing: false, timeoutRemaining: 0 });
    expect(await listsMade(async () => expect(await services()).toEqual(never))).toBe(0);
    await t.app.core.sessions.setMfaComplete(t.app.core.sessions.cached(apiSessionId)!);
    const counting = await services();
    expect(counting[0].postureQueries[0].postureQueries[0]).toMatchObject({ isPassing: true, timeoutRemaining: 60 });
    t.clock.advance(10_000);
    // The seconds left count down: every answer is made anew.
    expect((await services())[0].postureQueries[0].postureQueries[0]).toMatchObject({ isPassing: true, timeoutRemaining: 50 });
  });
});
