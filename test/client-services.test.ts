// Services on the Client API: each caller sees exactly the services some service policy lets it dial
// or bind (checked by brute force over every identity, service and policy), with permissions,
// configs (overrides applied, config types by id or name) and one posture query entry per granting
// policy; filters, sort and paging never widen that scope; the service's edge routers, terminators and
// the caller's edge routers; the admin-only writes; the controllers and external JWT signer lists.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ENV, asAdmin, call, expectError, json, MGMT, startTestController, type TestController } from './helpers.js';
import { client, HOST, idsOf, INTERCEPT, Network, ok, routerIdsOf, type Person } from './fixtures/network.js';
import { ClientReadModel } from '../src/domain/client/read-model.js';
import type { Caller } from '../src/domain/client/caller.js';

let t: TestController;
let net: Network;
const people: Record<string, Person> = {};
const tokens: Record<string, string> = {};
const ids: Record<string, string> = {};

interface Ent {
  id: string;
  roleAttributes: string[];
}
interface Pol {
  id: string;
  type: string;
  semantic: string;
  identityRoles: string[];
  serviceRoles: string[];
  postureCheckRoles: string[];
}
let identities: Ent[];
let services: Ent[];
let checks: Ent[];
let policies: Pol[];

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** behaviour.md §4, written out independently of the policy engine. */
function matches(semantic: string, roles: readonly string[], e: Ent): boolean {
  if (roles.includes(`@${e.id}`) || roles.includes('#all')) return true;
  const attrs = roles.filter((r) => r.startsWith('#')).map((r) => r.slice(1));
  if (attrs.length === 0) return false;
  return semantic === 'AllOf' ? attrs.every((a) => e.roleAttributes.includes(a)) : attrs.some((a) => e.roleAttributes.includes(a));
}

/** The policies granting identity i access to service s. */
function granting(i: Ent, s: Ent): Pol[] {
  return policies
    .filter((p) => matches(p.semantic, p.identityRoles, i) && matches(p.semantic, p.serviceRoles, s))
    .sort((a, b) => cmp(a.type, b.type) || cmp(a.id, b.id));
}

function expectedServices(identityId: string): string[] {
  const i = identities.find((e) => e.id === identityId)!;
  return services.filter((s) => granting(i, s).length > 0).map((s) => s.id).sort();
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  net = new Network(t, await asAdmin(t));
  for (const [name, attrs] of [
    ['alice', ['eng', 'vpn']],
    ['bob', ['eng']],
    ['carol', ['sales']],
    ['dave', []],
    ['erin', ['eng', 'sales']],
  ] as [string, string[]][]) {
    people[name] = await net.person(name, attrs);
  }
  ids.intercept = await net.config('intercept.v1', INTERCEPT);
  ids.host = await net.config('host.v1', HOST);
  ids.interceptAlice = await net.config('intercept.v1', { ...INTERCEPT, addresses: ['alice.corp.example'] });
  ids.customType = await net.create('config-types', { name: 'custom.v1', schema: { type: 'object' } });
  ids.custom = await net.config(ids.customType, { colour: 'blue' });
  for (const [name, attrs, configs] of [
    ['web', ['web', 'public'], [ids.intercept, ids.host, ids.custom]],
    ['db', ['db'], []],
    ['ssh', ['ops'], []],
    ['wiki', ['web'], []],
    ['billing', [], []],
    ['secret', ['secret'], []],
  ] as [string, string[], string[]][]) {
    ids[name] = await net.service(name, attrs, { configs });
  }
  ids.pcCorp = await net.postureCheck('DOMAIN', { domains: ['corp.example'] }, ['corp']);
  ids.pcMac = await net.postureCheck('MAC', { macAddresses: ['0a:1b:2c:3d:4e:5f'] }, ['corp', 'strict']);
  const sp = async (name: string, type: string, semantic: string, identityRoles: string[], serviceRoles: string[], postureCheckRoles: string[] = []) => {
    ids[name] = await net.create('service-policies', { name, type, semantic, identityRoles, serviceRoles, postureCheckRoles });
  };
  await sp('sp-eng-web', 'Dial', 'AnyOf', ['#eng'], ['#web'], ['#corp']);
  await sp('sp-eng-sales-db', 'Dial', 'AllOf', ['#eng', '#sales'], ['#db', `@${ids.billing}`], ['#corp', '#strict']);
  await sp('sp-bob-ops', 'Bind', 'AnyOf', [`@${people.bob!.id}`], ['#ops', '#web']);
  await sp('sp-all-wiki', 'Dial', 'AnyOf', ['#all'], [`@${ids.wiki}`]);
  await sp('sp-nobody', 'Bind', 'AnyOf', ['#nobody'], ['#all']);
  await sp('sp-web-bind-vpn', 'Bind', 'AnyOf', ['#vpn'], ['#public']);
  // alice's own intercept config for web replaces the service's one
  ok(await call(t, 'POST', `${MGMT}/identities/${people.alice!.id}/service-configs`, { token: net.admin, body: [{ serviceId: ids.web, configId: ids.interceptAlice }] }));
  ids.router = await net.edgeRouter('er-public', ['public']);
  ids.routerCore = await net.edgeRouter('er-core', ['core']);
  await net.edgeRouterPolicy(['#eng'], ['#public']);
  await net.edgeRouterPolicy(['#sales'], ['#core']);
  await net.serviceEdgeRouterPolicy(['#web'], ['#public', '#core']);
  ids.terminator = await net.create('terminators', { service: ids.web, router: ids.router, address: 'tcp:127.0.0.1:8443', binding: 'transport' });

  for (const [name, p] of Object.entries(people)) tokens[name] = await net.login(p);
  const r = t.app.core.resources;
  const all = async (c: string) => (await r.get(c).repo.list(t.app.core.store.db, { sort: [], offset: 0, limit: null })).items as any[];
  identities = (await all('identities')).map((e) => ({ id: e.id, roleAttributes: e.roleAttributes ?? [] }));
  services = (await all('services')).map((e) => ({ id: e.id, roleAttributes: e.roleAttributes ?? [] }));
  checks = (await all('posture-checks')).map((e) => ({ id: e.id, roleAttributes: e.roleAttributes ?? [] }));
  policies = await all('service-policies');
});
afterAll(async () => {
  await t.close();
});

describe('GET /services', () => {
  it('has a fixture where callers see different, partly overlapping services', () => {
    const sets = Object.values(people).map((p) => expectedServices(p.id));
    expect(sets.some((s) => s.length === 1)).toBe(true);
    expect(sets.some((s) => s.length >= 4)).toBe(true);
    expect(new Set(sets.map((s) => s.join())).size).toBeGreaterThanOrEqual(4);
  });

  it('answers each caller exactly its services, with permissions and one posture entry per granting policy', async () => {
    for (const [name, p] of Object.entries(people)) {
      const res = await client(t, 'GET', '/services?limit=500', tokens[name]);
      const list = ok(res) as any[];
      expect(list.map((s) => s.id), name).toEqual(expectedServices(p.id));
      expect(json(res).meta.pagination).toEqual({ limit: 500, offset: 0, totalCount: list.length });
      const me = identities.find((e) => e.id === p.id)!;
      for (const s of list) {
        const grants = granting(me, services.find((e) => e.id === s.id)!);
        expect(s.permissions, `${name} ${s.name}`).toEqual([...new Set(grants.map((g) => g.type))].sort());
        expect(s.postureQueries.map((q: any) => [q.policyId, q.policyType]), `${name} ${s.name}`).toEqual(grants.map((g) => [g.id, g.type]));
        for (const q of s.postureQueries) {
          const policy = policies.find((x) => x.id === q.policyId)!;
          const linked = checks.filter((c) => matches(policy.semantic, policy.postureCheckRoles, c)).map((c) => c.id).sort();
          expect(q.postureQueries.map((x: any) => x.id)).toEqual(linked);
          expect(q.isPassing).toBe(linked.length === 0);
        }
      }
    }
  });

  it('carries the configs of the asked types (by id or name), the identity overrides applied', async () => {
    const web = async (who: string, query: string) =>
      (ok(await client(t, 'GET', `/services?filter=${encodeURIComponent(`id = "${ids.web}"`)}${query}`, tokens[who])) as any[])[0];
    expect((await web('bob', '')).config).toEqual({});
    expect((await web('bob', '&configTypes=intercept.v1')).config).toEqual({ 'intercept.v1': INTERCEPT });
    expect((await web('bob', '&configTypes=custom.v1')).config).toEqual({ 'custom.v1': { colour: 'blue' } });
    expect((await web('bob', `&configTypes=${ids.customType}`)).config).toEqual({ 'custom.v1': { colour: 'blue' } });
    expect((await web('bob', '&configTypes=all')).config).toEqual({ 'intercept.v1': INTERCEPT, 'host.v1': HOST, 'custom.v1': { colour: 'blue' } });
    expect((await web('bob', '&configTypes=no-such-type')).config).toEqual({});
    const alice = await web('alice', '&configTypes=intercept.v1,host.v1');
    expect(alice.config).toEqual({ 'intercept.v1': { ...INTERCEPT, addresses: ['alice.corp.example'] }, 'host.v1': HOST });
    expect(alice.configs).toEqual([ids.intercept, ids.host, ids.custom].sort());
    // without configTypes: those of the API session
    const session = await net.login(people.bob!, { configTypes: ['host.v1'] });
    const own = ok(await client(t, 'GET', `/services/${ids.web}`, session));
    expect(own.config).toEqual({ 'host.v1': HOST });
  });

  it('sorts and pages within the caller\u2019s services', async () => {
    const expected = expectedServices(people.erin!.id);
    const all = ok(await client(t, 'GET', '/services?limit=500&sort=name desc', tokens.erin)) as any[];
    expect(all.map((s) => s.id).sort()).toEqual(expected);
    expect(all.map((s) => s.name)).toEqual(all.map((s) => s.name).sort().reverse());
    const page = await client(t, 'GET', '/services?limit=1&offset=1&sort=name desc', tokens.erin);
    expect(idsOf(page)).toEqual([all[1].id]);
    expect(json(page).meta.pagination).toEqual({ limit: 1, offset: 1, totalCount: expected.length });
  });

  it('takes roleFilter and roleSemantic inside the caller\u2019s services', async () => {
    const got = idsOf(await client(t, 'GET', '/services?roleFilter=%23web', tokens.erin));
    expect(got).toEqual([ids.web, ids.wiki].filter((id) => expectedServices(people.erin!.id).includes(id!)).sort());
    expect(idsOf(await client(t, 'GET', `/services?roleFilter=%23secret&roleFilter=@${ids.secret}&roleSemantic=AnyOf`, tokens.erin))).toEqual([]);
    expectError(await client(t, 'GET', '/services?roleFilter=%23web&roleSemantic=Most', tokens.erin), 400, 'COULD_NOT_VALIDATE', 'roleSemantic');
    expectError(await client(t, 'GET', '/services?roleFilter=web', tokens.erin), 400, 'COULD_NOT_VALIDATE', 'roleFilter');
  });

  it('never shows another caller\u2019s services through any filter', async () => {
    const everything = JSON.stringify(services.map((s) => s.id));
    for (const [name, p] of Object.entries(people)) {
      const expected = expectedServices(p.id);
      for (const filter of [
        'id != "x"',
        `id in ${everything}`,
        'name = "x" or id != "x"',
        'limit none',
        'encryptionRequired = true or encryptionRequired = false',
        'not (id = "x") limit none',
        // behaviour.md §3: `true` alone means "no condition", and stays within the caller's scope
        'true',
        'TRUE limit none',
        'true sort by id desc limit 100',
        'true or id != "x"',
        'not false',
      ]) {
        const got = idsOf(await client(t, 'GET', `/services?limit=500&filter=${encodeURIComponent(filter)}`, tokens[name]));
        expect(got, `${name}: ${filter}`).toEqual(filter.includes('desc') ? [...expected].reverse() : expected);
      }
      const all = await client(t, 'GET', '/services?filter=true', tokens[name]);
      expect(json(all).meta.pagination.totalCount).toBe(expected.length);
      expect(idsOf(await client(t, 'GET', '/services?filter=false', tokens[name]))).toEqual([]);
      const outside = services.find((s) => !expected.includes(s.id))!;
      const none = await client(t, 'GET', `/services?filter=${encodeURIComponent(`id = "${outside.id}"`)}`, tokens[name]);
      expect(idsOf(none)).toEqual([]);
      expect(json(none).meta.pagination.totalCount).toBe(0);
    }
  });

  it('answers 400 for a bad filter, sort or limit', async () => {
    expectError(await client(t, 'GET', `/services?filter=${encodeURIComponent('name = ')}`, tokens.alice), 400, 'INVALID_FILTER', 'filter');
    expectError(await client(t, 'GET', `/services?filter=${encodeURIComponent('identityId = "x"')}`, tokens.alice), 400, 'INVALID_FILTER', 'filter');
    expectError(await client(t, 'GET', '/services?sort=noSuchField', tokens.alice), 400, 'INVALID_SORT_IDENTIFIER');
    expectError(await client(t, 'GET', '/services?limit=many', tokens.alice), 400, 'INVALID_PAGINATION', 'limit');
  });
});

describe('views kept in memory or read per request', () => {
  it('give the same answers (pages, sorts, filters, single services, markers)', async () => {
    const core = t.app.core;
    const deps = { store: core.store, clock: core.clock, resources: core.resources, caches: core.caches, keys: core.oidc.keys, issuers: core.oidc.issuers, apiSessions: core.sessions };
    const kept = new ClientReadModel(deps);
    const unkept = new ClientReadModel({ ...deps, maxCachedView: 0 });
    for (const [name, p] of Object.entries(people)) {
      const caller: Caller = {
        identityId: p.id,
        identityName: name,
        apiSessionId: ok(await client(t, 'GET', '/current-api-session', tokens[name])).id,
        configTypes: ['intercept.v1'],
        isMfaComplete: false,
        mfaPassedAt: null,
        sessionCreatedAt: 0,
      };
      const queries = [
        { sort: [], offset: 0, limit: null },
        { sort: [], offset: 1, limit: 2 },
        { sort: [{ field: 'id', direction: 'desc' as const }], offset: 0, limit: 3 },
        { sort: [{ field: 'name', direction: 'asc' as const }], offset: 0, limit: 10 },
      ];
      for (const q of queries) {
        // twice: the first read fills what the kept network keeps
        for (let i = 0; i < 2; i++) {
          const a = await kept.services.list(caller, q, 'all');
          const b = await unkept.services.list(caller, q, 'all');
          expect(a, `${name} ${JSON.stringify(q)}`).toEqual(b);
          if (q.sort[0]?.field === 'name') continue;
          const ordered = q.sort[0]?.direction === 'desc' ? [...expectedServices(p.id)].reverse() : expectedServices(p.id);
          expect(a.items.map((x) => x.id)).toEqual(ordered.slice(q.offset, q.limit === null ? undefined : q.offset + q.limit));
        }
      }
      for (const s of services) {
        const a = await kept.services.get(caller, s.id, 'session').catch((e: Error) => e.message);
        const b = await unkept.services.get(caller, s.id, 'session').catch((e: Error) => e.message);
        expect(a).toEqual(b);
      }
      expect(await kept.markers.lastChangeAt(caller)).toBe(await unkept.markers.lastChangeAt(caller));
    }
  });
});

describe('GET /services/{id}', () => {
  it('answers a service the caller may use, and 404 for every other one', async () => {
    for (const [name, p] of Object.entries(people)) {
      const expected = expectedServices(p.id);
      for (const s of services) {
        const res = await client(t, 'GET', `/services/${s.id}`, tokens[name]);
        if (expected.includes(s.id)) expect(ok(res).id).toBe(s.id);
        else expectError(res, 404, 'NOT_FOUND');
      }
    }
    expectError(await client(t, 'GET', '/services/no-such-id', tokens.alice), 404, 'NOT_FOUND');
    expectError(await client(t, 'GET', `/services/${ids.web}`), 401, 'UNAUTHORIZED');
  });
});

describe('writes of services on the Client API', () => {
  it('require admin: a plain caller gets 401 and the service is unchanged', async () => {
    expectError(await client(t, 'PATCH', `/services/${ids.wiki}`, tokens.alice, { name: 'mine' }), 401, 'UNAUTHORIZED');
    expectError(await client(t, 'PUT', `/services/${ids.wiki}`, tokens.alice, { name: 'mine' }), 401, 'UNAUTHORIZED');
    expectError(await client(t, 'DELETE', `/services/${ids.wiki}`, tokens.alice), 401, 'UNAUTHORIZED');
    expect(ok(await client(t, 'GET', `/services/${ids.wiki}`, tokens.alice)).name).toBe('wiki');
  });

  it('work for an admin, with 400 for bad input and 404 once deleted', async () => {
    const admin = net.admin;
    const temp = await net.service('temp', ['temp']);
    ok(await client(t, 'PATCH', `/services/${temp}`, admin, { name: 'temp-2' }));
    ok(await client(t, 'PUT', `/services/${temp}`, admin, { name: 'temp-3', roleAttributes: ['temp'] }));
    expect(ok(await call(t, 'GET', `${MGMT}/services/${temp}`, { token: admin })).name).toBe('temp-3');
    expectError(await client(t, 'PATCH', `/services/${temp}`, admin, { maxIdleTimeMillis: 'long' }), 400, 'COULD_NOT_VALIDATE', 'maxIdleTimeMillis');
    expectError(await client(t, 'PATCH', `/services/${temp}`, admin, { encryptionRequired: false }), 400, 'COULD_NOT_VALIDATE', 'encryptionRequired');
    expectError(await client(t, 'PUT', `/services/${temp}`, admin, { roleAttributes: [] }), 400, 'COULD_NOT_VALIDATE', 'name');
    ok(await client(t, 'DELETE', `/services/${temp}`, admin));
    expectError(await client(t, 'DELETE', `/services/${temp}`, admin), 404, 'NOT_FOUND');
  });
});

describe('edge routers and terminators', () => {
  it('GET /services/{id}/edge-routers: the routers the caller may use for the service, as {edgeRouters}', async () => {
    // alice (eng) reaches er-public; erin (eng, sales) both; carol (sales) cannot use web at all
    const url = `/services/${ids.web}/edge-routers`;
    const alices = await client(t, 'GET', url, tokens.alice);
    expect(Object.keys(ok(alices))).toEqual(['edgeRouters']);
    expect(routerIdsOf(alices)).toEqual([ids.router]);
    const erin = ok(await client(t, 'GET', `${url}?sort=name`, tokens.erin)).edgeRouters as any[];
    expect(erin.map((r) => r.name)).toEqual(['er-core', 'er-public']);
    // commonEdgeRouterProperties with the urls of a session's edge routers (and the id); nothing of enrollment
    expect(erin[0]).toEqual({
      id: ids.routerCore,
      name: 'er-core',
      hostname: '',
      isOnline: false,
      supportedProtocols: {},
      urls: {},
      syncStatus: 'SYNC_UNKNOWN',
      cost: 0,
      noTraversal: false,
      disabled: false,
    });
    expect(routerIdsOf(await client(t, 'GET', `${url}?filter=${encodeURIComponent('name = "er-core"')}`, tokens.erin))).toEqual([ids.routerCore]);
    const paged = await client(t, 'GET', `${url}?sort=name&limit=1&offset=1`, tokens.erin);
    expect(routerIdsOf(paged)).toEqual([ids.router]);
    expect(json(paged).meta.pagination).toEqual({ limit: 1, offset: 1, totalCount: 2 });
    expectError(await client(t, 'GET', url, tokens.carol), 404, 'NOT_FOUND');
    expectError(await client(t, 'GET', `${url}?filter=${encodeURIComponent('fingerprint = "x"')}`, tokens.erin), 400, 'INVALID_FILTER', 'filter');
    expectError(await client(t, 'GET', url), 401, 'UNAUTHORIZED');
  });

  it('GET /services/{id}/edge-routers answers every router at once unless a limit is asked for', async () => {
    // someone of their own, so the other tests' callers keep their routers
    const frank = await net.person('frank');
    const many = await net.service('many-routers');
    await net.servicePolicy('Dial', [`@${frank.id}`], [`@${many}`]);
    const routers: string[] = [];
    for (let i = 0; i < 12; i++) routers.push(await net.edgeRouter(`many-${String(i).padStart(2, '0')}`, ['many']));
    await net.edgeRouterPolicy([`@${frank.id}`], ['#many']);
    await net.serviceEdgeRouterPolicy([`@${many}`], ['#many']);
    const res = await client(t, 'GET', `/services/${many}/edge-routers`, await net.login(frank));
    expect(routerIdsOf(res).sort()).toEqual([...routers].sort());
    expect(json(res).meta.pagination.totalCount).toBe(12);
  });

  it('a session-token header must be a session of the caller for that service', async () => {
    // wiki is open to everyone without posture checks; alice also binds web
    const mine = ok(await client(t, 'POST', '/sessions', tokens.alice, { serviceId: ids.wiki }), 201);
    const headers = (token: string) => ({ 'session-token': token });
    const url = `/services/${ids.wiki}/edge-routers`;
    expect(routerIdsOf(await client(t, 'GET', url, tokens.alice, undefined, headers(mine.token)))).toEqual([ids.router]);
    for (const bad of ['garbage', `${mine.token.slice(0, -4)}AAAA`, mine.token.split('.').slice(0, 2).join('.') + '.']) {
      expectError(await client(t, 'GET', url, tokens.alice, undefined, headers(bad)), 401, 'UNAUTHORIZED');
    }
    // another identity's session for the same service
    const erins = ok(await client(t, 'POST', '/sessions', tokens.erin, { serviceId: ids.wiki }), 201);
    expectError(await client(t, 'GET', url, tokens.alice, undefined, headers(erins.token)), 401, 'UNAUTHORIZED');
    // a session of the caller for another service
    const web = ok(await client(t, 'POST', '/sessions', tokens.alice, { serviceId: ids.web, type: 'Bind' }), 201);
    expectError(await client(t, 'GET', url, tokens.alice, undefined, headers(web.token)), 401, 'UNAUTHORIZED');
    // a deleted session
    ok(await client(t, 'DELETE', `/sessions/${mine.id}`, tokens.alice));
    expectError(await client(t, 'GET', url, tokens.alice, undefined, headers(mine.token)), 401, 'UNAUTHORIZED');
  });

  it('GET /services/{id}/terminators: those of a service the caller may use, in the limited view', async () => {
    const res = await client(t, 'GET', `/services/${ids.web}/terminators`, tokens.bob);
    const list = ok(res) as any[];
    expect(list).toEqual([
      {
        _links: { self: { href: `./terminators/${ids.terminator}` } },
        id: ids.terminator,
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
        tags: {},
        serviceId: ids.web,
        service: { _links: { self: { href: `./services/${ids.web}` } }, entity: 'services', id: ids.web, name: 'web' },
        routerId: ids.router,
        router: { _links: { self: { href: `./edge-routers/${ids.router}` } }, entity: 'edge-routers', id: ids.router, name: 'er-public' },
        identity: '',
      },
    ]);
    expect(json(res).meta.filterableFields.sort()).toEqual(['createdAt', 'id', 'identity', 'router', 'service', 'tags', 'updatedAt']);
    expect(idsOf(await client(t, 'GET', `/services/${ids.web}/terminators?filter=${encodeURIComponent(`router = "${ids.router}"`)}`, tokens.bob))).toEqual([ids.terminator]);
    expect(idsOf(await client(t, 'GET', `/services/${ids.web}/terminators?filter=${encodeURIComponent('router = "elsewhere"')}`, tokens.bob))).toEqual([]);
    expectError(await client(t, 'GET', `/services/${ids.web}/terminators`, tokens.carol), 404, 'NOT_FOUND');
    expectError(await client(t, 'GET', `/services/${ids.web}/terminators?limit=x`, tokens.bob), 400, 'INVALID_PAGINATION', 'limit');
    expectError(await client(t, 'GET', `/services/${ids.web}/terminators`), 401, 'UNAUTHORIZED');
  });

  it('never shows a client where or how a service is hosted, nor lets a filter or sort probe it', async () => {
    const body = (await client(t, 'GET', `/services/${ids.web}/terminators?limit=500`, tokens.bob)).body;
    for (const hidden of ['tcp:127.0.0.1:8443', 'transport', 'address', 'binding', 'cost', 'precedence', 'identitySecret']) {
      expect(body.includes(hidden), hidden).toBe(false);
    }
    // each filter would tell whether the address, binding, cost or precedence is what it guesses
    for (const probe of ['address contains "127.0.0.1"', 'binding = "transport"', 'cost > 5', 'precedence = "default"', 'identitySecretHash != null']) {
      expectError(await client(t, 'GET', `/services/${ids.web}/terminators?filter=${encodeURIComponent(probe)}`, tokens.bob), 400, 'INVALID_FILTER', 'filter');
    }
    for (const probe of ['address', 'cost desc', 'binding', 'precedence']) {
      expectError(await client(t, 'GET', `/services/${ids.web}/terminators?sort=${encodeURIComponent(probe)}`, tokens.bob), 400, 'INVALID_SORT_IDENTIFIER');
    }
    expectError(await client(t, 'GET', `/services/${ids.web}/terminators?filter=${encodeURIComponent('id != "x" sort by address')}`, tokens.bob), 400, 'INVALID_SORT_IDENTIFIER');
    // the Management API still shows an admin everything
    const full = ok(await call(t, 'GET', `${MGMT}/services/${ids.web}/terminators`, { token: net.admin })) as any[];
    expect(full[0]).toMatchObject({ address: 'tcp:127.0.0.1:8443', binding: 'transport', cost: 0, precedence: 'default' });
  });

  it('GET /current-identity/edge-routers: the enrolled routers of the caller\u2019s edge router policies', async () => {
    // Enrolled (as a router's enrollment marks it); one never enrolled, which has no address, is left out.
    const db = t.app.core.store.db;
    await db.updateTable('edge_routers').set({ is_verified: 1 }).where('id', 'in', [ids.router!, ids.routerCore!]).execute();
    const fresh = await net.edgeRouter('er-never-enrolled', ['public']);
    const mine = ok(await client(t, 'GET', '/current-identity/edge-routers', tokens.alice)) as any[];
    expect(mine.map((r) => r.id)).toEqual([ids.router]);
    expect(mine[0]).toMatchObject({ name: 'er-public', isOnline: false, syncStatus: 'SYNC_UNKNOWN' });
    expect(idsOf(await client(t, 'GET', '/current-identity/edge-routers', tokens.carol))).toEqual([ids.routerCore]);
    expect(idsOf(await client(t, 'GET', '/current-identity/edge-routers?sort=name', tokens.erin))).toEqual([ids.routerCore, ids.router]);
    expect(idsOf(await client(t, 'GET', '/current-identity/edge-routers', tokens.dave))).toEqual([]);
    expect(idsOf(await client(t, 'GET', `/current-identity/edge-routers?filter=${encodeURIComponent('id != "x" limit none')}`, tokens.carol))).toEqual([ids.routerCore]);
    expectError(await client(t, 'GET', '/current-identity/edge-routers?filter=nope', tokens.alice), 400, 'INVALID_FILTER', 'filter');
    expectError(await client(t, 'GET', '/current-identity/edge-routers'), 401, 'UNAUTHORIZED');
    ok(await call(t, 'DELETE', `${MGMT}/edge-routers/${fresh}`, { token: net.admin }));
  });

  it('GET /current-identity/edge-routers: an admin, as the established controller answers one, gets every enrolled router', async () => {
    const db = t.app.core.store.db;
    const unselected = await net.edgeRouter('er-no-policy', ['no-policy-selects-this']);
    const unenrolled = await net.edgeRouter('er-admin-never-enrolled', ['no-policy-selects-this']);
    await db.updateTable('edge_routers').set({ is_verified: 1 }).where('id', 'in', [ids.router!, ids.routerCore!, unselected]).execute();
    const filter = encodeURIComponent(`id in ["${ids.router!}", "${ids.routerCore!}", "${unselected}", "${unenrolled}"] sort by name`);
    expect(idsOf(await client(t, 'GET', `/current-identity/edge-routers?filter=${filter}`, net.admin))).toEqual([ids.routerCore, unselected, ids.router]);
    // Everyone else still gets those of their policies.
    expect(idsOf(await client(t, 'GET', `/current-identity/edge-routers?filter=${filter}`, tokens.erin))).toEqual([ids.routerCore, ids.router]);
    for (const id of [unselected, unenrolled]) ok(await call(t, 'DELETE', `${MGMT}/edge-routers/${id}`, { token: net.admin }));
  });
});

describe('lists of the network', () => {
  it('GET /controllers answers this controller to any caller', async () => {
    const list = ok(await client(t, 'GET', '/controllers', tokens.dave)) as any[];
    expect(list).toHaveLength(1);
    expectError(await client(t, 'GET', '/controllers'), 401, 'UNAUTHORIZED');
  });

  it('GET /external-jwt-signers answers an empty list until signers exist', async () => {
    const res = await client(t, 'GET', '/external-jwt-signers', tokens.dave);
    expect(ok(res)).toEqual([]);
    expect(json(res).meta.pagination).toEqual({ limit: 10, offset: 0, totalCount: 0 });
    expectError(await client(t, 'GET', '/external-jwt-signers?filter=bad', tokens.dave), 400, 'INVALID_FILTER', 'filter');
    expectError(await client(t, 'GET', '/external-jwt-signers'), 401, 'UNAUTHORIZED');
  });

  it('the Client API document names every operation of endpoints.md this work adds', async () => {
    const doc = json(await t.inject({ method: 'GET', url: '/edge/client/v1/specs/edge-client/spec' }));
    const op = (path: string, method: string) => doc.paths[`/edge/client/v1${path}`]?.[method]?.operationId;
    expect(op('/services', 'get')).toBe('listServices');
    expect(op('/services/{id}', 'get')).toBe('detailService');
    expect(op('/services/{id}', 'patch')).toBe('patchService');
    expect(op('/services/{id}', 'put')).toBe('updateService');
    expect(op('/services/{id}', 'delete')).toBe('deleteService');
    expect(op('/services/{id}/edge-routers', 'get')).toBe('listServiceEdgeRouters');
    expect(op('/services/{id}/terminators', 'get')).toBe('listServiceTerminators');
    expect(op('/sessions', 'get')).toBe('listSessions');
    expect(op('/sessions', 'post')).toBe('createSession');
    expect(op('/sessions/{id}', 'get')).toBe('detailSession');
    expect(op('/sessions/{id}', 'delete')).toBe('deleteSession');
    expect(op('/posture-response', 'post')).toBe('createPostureResponse');
    expect(op('/posture-response-bulk', 'post')).toBe('createPostureResponseBulk');
    expect(op('/current-identity/edge-routers', 'get')).toBe('getCurrentIdentityEdgeRouters');
    expect(op('/current-api-session/service-updates', 'get')).toBe('listServiceUpdates');
    expect(op('/external-jwt-signers', 'get')).toBe('listExternalJwtSigners');
  });
});
