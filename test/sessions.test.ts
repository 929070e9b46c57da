// Sessions (behaviour.md §8): every check and answer of POST /sessions, the caller's own list,
// detail and delete (another identity's sessions are never seen through any filter), sessions
// ending with their API session (logout, admin delete, expiry), their service or identity, the
// Management API's list, detail, delete and route path, and the session token's signature and
// expiry (never past its API session's).
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ENV, asAdmin, call, expectError, json, MGMT, startTestController, type TestController, expectMissingCredential } from './helpers.js';
import { client, idsOf, Network, ok, routerIdsOf, type Person } from './fixtures/network.js';
import { signCompact } from '../src/oidc/jws.js';

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
  ids.router = await net.edgeRouter('er-1', ['public']);
  await net.edgeRouterPolicy(['#eng'], ['#public']);
  await net.serviceEdgeRouterPolicy(['#routed'], ['#public']);
  ids.web = await net.service('web', ['routed']);
  ids.ops = await net.service('ops', ['routed']);
  ids.lonely = await net.service('lonely', []);
  ids.hidden = await net.service('hidden', ['routed']);
  ids.guarded = await net.service('guarded', ['routed']);
  await net.servicePolicy('Dial', ['#eng', '#sales'], [`@${ids.web}`, `@${ids.lonely}`]);
  await net.servicePolicy('Bind', [`@${alice.id}`], [`@${ids.ops}`]);
  ids.domain = await net.postureCheck('DOMAIN', { domains: ['corp.example'] });
  ids.mac = await net.postureCheck('MAC', { macAddresses: ['0a:1b:2c:3d:4e:5f'] });
  ids.os = await net.postureCheck('OS', { operatingSystems: [{ type: 'Linux', versions: ['>=6.1'] }] });
  ids.guardA = await net.servicePolicy('Dial', ['#eng'], [`@${ids.guarded}`], [`@${ids.domain}`, `@${ids.mac}`]);
  ids.guardB = await net.servicePolicy('Dial', ['#eng'], [`@${ids.guarded}`], [`@${ids.os}`]);
  for (const [name, p] of Object.entries({ alice, bob, carol })) tokens[name] = await net.login(p);
});
afterAll(async () => {
  await t.close();
});

const create = (token: string | undefined, body: unknown) => client(t, 'POST', '/sessions', token, body);

describe('POST /sessions', () => {
  it('answers 401 without a credential', async () => {
    const res = await create(undefined, { serviceId: ids.web });
    expectMissingCredential(res);
  });

  it('answers 400 naming the field for a malformed body', async () => {
    expectError(await create(tokens.alice, {}), 400, 'COULD_NOT_VALIDATE', 'serviceId');
    expectError(await create(tokens.alice, { serviceId: 5 }), 400, 'COULD_NOT_VALIDATE', 'serviceId');
    expectError(await create(tokens.alice, { serviceId: 'x'.repeat(300) }), 400, 'COULD_NOT_VALIDATE', 'serviceId');
    expectError(await create(tokens.alice, { serviceId: ids.web, type: 'Tunnel' }), 400, 'COULD_NOT_VALIDATE', 'type');
    expectError(await create(tokens.alice, { serviceId: ids.web, tags: { a: { b: 1 } } }), 400, 'COULD_NOT_VALIDATE', 'tags.a');
  });

  it('answers 404 for a service that does not exist or that the caller may not use', async () => {
    expectError(await create(tokens.alice, { serviceId: 'no-such-service' }), 404, 'NOT_FOUND');
    expectError(await create(tokens.alice, { serviceId: ids.hidden }), 404, 'NOT_FOUND');
    expectError(await create(tokens.bob, { serviceId: ids.ops, type: 'Bind' }), 404, 'NOT_FOUND');
  });

  it('answers 400 COULD_NOT_VALIDATE on type for a type the caller is not granted', async () => {
    expectError(await create(tokens.alice, { serviceId: ids.web, type: 'Bind' }), 400, 'COULD_NOT_VALIDATE', 'type');
    expectError(await create(tokens.alice, { serviceId: ids.ops }), 400, 'COULD_NOT_VALIDATE', 'type');
    expectError(await create(tokens.alice, { serviceId: ids.web, type: 'Invalid' }), 400, 'COULD_NOT_VALIDATE', 'type');
  });

  it('answers 409 INVALID_POSTURE with every check of every granting policy, until one policy passes', async () => {
    const body = expectError(await create(tokens.alice, { serviceId: ids.guarded }), 409, 'INVALID_POSTURE');
    expect(body.error.cause).toEqual({
      message: expect.any(String),
      data: {
        [ids.guardA!]: [
          { id: ids.domain, typeId: 'DOMAIN', isPassing: false },
          { id: ids.mac, typeId: 'MAC', isPassing: false },
        ].sort((a, b) => (a.id! < b.id! ? -1 : 1)),
        [ids.guardB!]: [{ id: ids.os, typeId: 'OS', isPassing: false }],
      },
    });
    // half of policy A is not enough
    ok(await client(t, 'POST', '/posture-response', tokens.alice, { id: ids.domain, typeId: 'DOMAIN', domain: 'corp.example' }), 201);
    const half = expectError(await create(tokens.alice, { serviceId: ids.guarded }), 409, 'INVALID_POSTURE');
    expect(half.error.cause.data[ids.guardA!]).toContainEqual({ id: ids.domain, typeId: 'DOMAIN', isPassing: true });
    // policy B alone passing is enough
    ok(await client(t, 'POST', '/posture-response', tokens.alice, { id: ids.os, typeId: 'OS', type: 'Linux', version: '6.8.0', build: '1' }), 201);
    expect(ok(await create(tokens.alice, { serviceId: ids.guarded }), 201).serviceId).toBe(ids.guarded);
    // bob's posture is his own
    expectError(await create(tokens.bob, { serviceId: ids.guarded }), 409, 'INVALID_POSTURE');
  });

  it('answers 400 NO_EDGE_ROUTERS_AVAILABLE when no edge router serves both', async () => {
    expectError(await create(tokens.alice, { serviceId: ids.lonely }), 400, 'NO_EDGE_ROUTERS_AVAILABLE');
    expectError(await create(tokens.carol, { serviceId: ids.web }), 400, 'NO_EDGE_ROUTERS_AVAILABLE');
  });

  it('answers the existing session for the same API session, service and type, a new one otherwise', async () => {
    const first = ok(await create(tokens.alice, { serviceId: ids.web, tags: { purpose: 'test' } }), 201);
    expect(first).toMatchObject({ serviceId: ids.web, identityId: alice.id, type: 'Dial', tags: { purpose: 'test' } });
    expect(first.service).toMatchObject({ entity: 'services', id: ids.web, name: 'web' });
    expect(first.identity).toMatchObject({ entity: 'identities', id: alice.id, name: 'alice' });
    expect(first._links['route-path'].href).toBe(`./sessions/${first.id}/route-path`);
    expect(ok(await create(tokens.alice, { serviceId: ids.web, type: 'Dial' }), 201).id).toBe(first.id);
    const otherLogin = await net.login(alice);
    const second = ok(await create(otherLogin, { serviceId: ids.web }), 201);
    expect(second.id).not.toBe(first.id);
    expect(second.apiSessionId).not.toBe(first.apiSessionId);
    const bind = ok(await create(tokens.alice, { serviceId: ids.ops, type: 'Bind' }), 201);
    expect(bind.id).not.toBe(first.id);
  });

  it('answers at most 25 edge routers, online ones first', async () => {
    const many = await net.service('many', ['many']);
    const routers: string[] = [];
    for (let i = 0; i < 30; i++) routers.push(await net.edgeRouter(`bulk-${String(i).padStart(2, '0')}`, ['bulk']));
    await net.serviceEdgeRouterPolicy([`@${many}`], ['#bulk']);
    await net.edgeRouterPolicy([`@${bob.id}`], ['#bulk']);
    await net.servicePolicy('Dial', [`@${bob.id}`], [`@${many}`]);
    const online = [routers[29]!, routers[17]!];
    await t.app.core.store.db.updateTable('edge_routers').set({ is_online: 1 }).where('id', 'in', online).execute();
    const s = ok(await create(tokens.bob, { serviceId: many }), 201);
    expect(s.edgeRouters).toHaveLength(25);
    expect(s.edgeRouters.slice(0, 2).map((r: any) => [r.id, r.isOnline])).toEqual([
      [routers[17], true],
      [routers[29], true],
    ]);
    expect(s.edgeRouters.slice(2).every((r: any) => r.isOnline === false)).toBe(true);
    expect(s.edgeRouters.every((r: any) => r.syncStatus === 'SYNC_UNKNOWN')).toBe(true);
  });

  it('signs the token with the current key; after a rotation tokens are signed again with the new one', async () => {
    const s = ok(await create(tokens.bob, { serviceId: ids.web }), 201);
    const verify = async (token: string) =>
      jwtVerify(token, createLocalJWKSet(json(await t.inject({ method: 'GET', url: '/oidc/keys' }))), { currentDate: new Date(t.clock()) });
    expect((await verify(s.token)).payload).toMatchObject({ jti: s.id, sub: ids.web, ov_t: 's', ov_st: 'Dial', ov_asid: s.apiSessionId });
    await t.app.core.oidc.keys.rotate();
    const again = ok(await client(t, 'GET', `/sessions/${s.id}`, tokens.bob));
    expect(decodeProtectedHeader(again.token).kid).toBe(t.app.core.oidc.keys.current.kid);
    expect((await verify(again.token)).payload.jti).toBe(s.id);
    // the session token is not an access token
    expectError(await call(t, 'GET', '/edge/client/v1/current-identity', { headers: { authorization: `Bearer ${again.token}` } }), 401, 'UNAUTHORIZED');
  });
});

describe('the caller\u2019s sessions', () => {
  let alices: string[];
  let bobs: string[];

  beforeAll(async () => {
    alices = idsOf(await client(t, 'GET', '/sessions?limit=500', tokens.alice));
    bobs = idsOf(await client(t, 'GET', '/sessions?limit=500', tokens.bob));
  });

  it('lists only the caller\u2019s identity\u2019s sessions, whatever the filter', async () => {
    const all = ok(await call(t, 'GET', `${MGMT}/sessions?limit=500`, { token: net.admin })) as any[];
    expect(alices.sort()).toEqual(all.filter((s) => s.identityId === alice.id).map((s) => s.id).sort());
    expect(alices.length).toBeGreaterThanOrEqual(3);
    expect(bobs.length).toBeGreaterThanOrEqual(2);
    for (const filter of ['id != "x"', 'limit none', 'true', 'true limit none', `identityId = "${bob.id}" or id != "x"`, `id in ${JSON.stringify(bobs)} or type = "Dial" or type = "Bind"`]) {
      const got = idsOf(await client(t, 'GET', `/sessions?limit=500&filter=${encodeURIComponent(filter)}`, tokens.alice));
      expect(got.sort(), filter).toEqual([...alices].sort());
    }
    expect(idsOf(await client(t, 'GET', `/sessions?filter=${encodeURIComponent(`identityId = "${bob.id}"`)}`, tokens.alice))).toEqual([]);
    expect(idsOf(await client(t, 'GET', '/sessions?filter=false', tokens.alice))).toEqual([]);
    expectError(await client(t, 'GET', '/sessions?filter=null', tokens.alice), 400, 'INVALID_FILTER', 'filter');
    expectError(await client(t, 'GET', '/sessions?sort=token', tokens.alice), 400, 'INVALID_SORT_IDENTIFIER');
    expectError(await client(t, 'GET', '/sessions'), 401, 'UNAUTHORIZED');
  });

  it('list items carry the token and the edge routers, as the detail does', async () => {
    const list = ok(await client(t, 'GET', '/sessions?limit=500', tokens.alice)) as any[];
    expect(list.length).toBe(alices.length);
    for (const item of list) {
      const detail = ok(await client(t, 'GET', `/sessions/${item.id}`, tokens.alice));
      expect(item.edgeRouters).toEqual(detail.edgeRouters);
      expect(item.token).toBe(detail.token);
    }
    const web = list.find((x) => x.serviceId === ids.web)!;
    expect(web.edgeRouters).toEqual([
      { id: ids.router, name: 'er-1', hostname: '', isOnline: false, supportedProtocols: {}, urls: {}, syncStatus: 'SYNC_UNKNOWN', cost: 0, noTraversal: false, disabled: false },
    ]);
  });

  it('pages and sorts', async () => {
    const res = await client(t, 'GET', '/sessions?limit=1&offset=1&sort=createdAt desc', tokens.alice);
    expect(idsOf(res)).toHaveLength(1);
    expect(json(res).meta.pagination).toEqual({ limit: 1, offset: 1, totalCount: alices.length });
  });

  it('reads its own session, and 404 for another identity\u2019s or an unknown one', async () => {
    const mine = ok(await client(t, 'GET', `/sessions/${alices[0]}`, tokens.alice));
    expect(typeof mine.token).toBe('string');
    expect(Array.isArray(mine.edgeRouters)).toBe(true);
    expectError(await client(t, 'GET', `/sessions/${bobs[0]}`, tokens.alice), 404, 'NOT_FOUND');
    expectError(await client(t, 'GET', '/sessions/no-such-id', tokens.alice), 404, 'NOT_FOUND');
    expectError(await client(t, 'GET', `/sessions/${alices[0]}`), 401, 'UNAUTHORIZED');
  });

  it('deletes its own session, and 404 for another identity\u2019s (which stays) or an unknown one', async () => {
    expectError(await client(t, 'DELETE', `/sessions/${bobs[0]}`, tokens.alice), 404, 'NOT_FOUND');
    ok(await client(t, 'GET', `/sessions/${bobs[0]}`, tokens.bob));
    expectError(await client(t, 'DELETE', '/sessions/no-such-id', tokens.alice), 404, 'NOT_FOUND');
    expectError(await client(t, 'DELETE', `/sessions/${alices[0]}`), 401, 'UNAUTHORIZED');
    ok(await client(t, 'DELETE', `/sessions/${alices[0]}`, tokens.alice));
    expectError(await client(t, 'GET', `/sessions/${alices[0]}`, tokens.alice), 404, 'NOT_FOUND');
    expectError(await call(t, 'GET', `${MGMT}/sessions/${alices[0]}`, { token: net.admin }), 404, 'NOT_FOUND');
  });
});

describe('sessions end with', () => {
  const sessionOf = async (token: string, serviceId = ids.web) => ok(await create(token, { serviceId }), 201) as { id: string; apiSessionId: string };
  const gone = async (id: string) => expectError(await call(t, 'GET', `${MGMT}/sessions/${id}`, { token: net.admin }), 404, 'NOT_FOUND');

  it('their API session deleted by an admin', async () => {
    const token = await net.login(bob);
    const s = await sessionOf(token);
    ok(await call(t, 'DELETE', `${MGMT}/api-sessions/${s.apiSessionId}`, { token: net.admin }));
    await gone(s.id);
    expectError(await client(t, 'GET', '/sessions', token), 401, 'UNAUTHORIZED');
  });

  it('their API session expiring', async () => {
    const token = await net.login(bob);
    const s = await sessionOf(token);
    t.clock.advance(31 * 60_000);
    await t.app.core.sessions.sweep();
    // every API session of the test expired with it: log in again
    net = new Network(t, await asAdmin(t));
    await gone(s.id);
    expectError(await client(t, 'GET', '/sessions', token), 401, 'UNAUTHORIZED');
    tokens.alice = await net.login(alice);
    tokens.bob = await net.login(bob);
  });

  it('their service', async () => {
    const temp = await net.service('temp', ['routed']);
    await net.servicePolicy('Dial', [`@${bob.id}`], [`@${temp}`]);
    const s = await sessionOf(tokens.bob!, temp);
    await net.remove('services', temp);
    await gone(s.id);
    expectError(await create(tokens.bob, { serviceId: temp }), 404, 'NOT_FOUND');
    expect(idsOf(await client(t, 'GET', '/sessions?limit=500', tokens.bob))).not.toContain(s.id);
  });

  it('their identity', async () => {
    const dora = await net.person('dora', ['eng']);
    const s = await sessionOf(await net.login(dora));
    await net.remove('identities', dora.id);
    await gone(s.id);
  });

  // Attacks that worked: a session, and the token routers take, outlived the access it was made with.
  const enforced = () => t.app.core.client.enforcer.idle();

  it('the access they were made with: an attribute taken away, a policy changed', async () => {
    const erin = await net.person('erin', ['eng']);
    const token = await net.login(erin);
    const dial = await sessionOf(token);
    const keep = await net.service('kept', ['routed']);
    await net.servicePolicy('Dial', [`@${erin.id}`], [`@${keep}`]);
    const kept = await sessionOf(token, keep);
    await net.patch('identities', erin.id, { roleAttributes: [] });
    await enforced();
    await gone(dial.id);
    expect(idsOf(await client(t, 'GET', '/sessions', token))).toEqual([kept.id]);

    const bind = ok(await create(tokens.alice, { serviceId: ids.ops, type: 'Bind' }), 201) as { id: string };
    const aliceDial = await sessionOf(tokens.alice!);
    const bindPolicy = json(await call(t, 'GET', `${MGMT}/service-policies?filter=${encodeURIComponent('type = "Bind"')}`, { token: net.admin })).data.find(
      (p: { serviceRoles: string[] }) => p.serviceRoles.includes(`@${ids.ops}`),
    ).id as string;
    await net.patch('service-policies', bindPolicy, { serviceRoles: [] });
    await enforced();
    await gone(bind.id);
    // Her Dial of another service is granted still.
    ok(await call(t, 'GET', `${MGMT}/sessions/${aliceDial.id}`, { token: net.admin }));
    await net.patch('service-policies', bindPolicy, { serviceRoles: [`@${ids.ops}`] });
  });

  it('the posture they were made with', async () => {
    const frank = await net.person('frank', ['eng']);
    const token = await net.login(frank);
    for (const [id, typeId, fields] of [
      [ids.domain, 'DOMAIN', { domain: 'corp.example' }],
      [ids.mac, 'MAC', { macAddresses: ['0a:1b:2c:3d:4e:5f'] }],
    ] as const) {
      ok(await client(t, 'POST', '/posture-response', token, { id, typeId, ...fields }), 201);
    }
    const s = await sessionOf(token, ids.guarded);
    // Another response that keeps the policy passing leaves it.
    ok(await client(t, 'POST', '/posture-response', token, { id: ids.mac, typeId: 'MAC', macAddresses: ['0a:1b:2c:3d:4e:5f', '00:00:00:00:00:01'] }), 201);
    await enforced();
    ok(await call(t, 'GET', `${MGMT}/sessions/${s.id}`, { token: net.admin }));
    ok(await client(t, 'POST', '/posture-response', token, { id: ids.domain, typeId: 'DOMAIN', domain: 'elsewhere.example' }), 201);
    await enforced();
    await gone(s.id);
    expectError(await create(token, { serviceId: ids.guarded }), 409, 'INVALID_POSTURE');
  });
});

describe('sessions on the Management API', () => {
  it('lists, reads and deletes every session, with its edge routers and never with its token', async () => {
    const mine = ok(await create(tokens.alice, { serviceId: ids.web }), 201);
    const res = await call(t, 'GET', `${MGMT}/sessions?limit=500&filter=${encodeURIComponent(`identityId = "${alice.id}" and type = "Dial"`)}`, { token: net.admin });
    const list = ok(res) as any[];
    expect(list.map((s) => s.id)).toContain(mine.id);
    expect(list.every((s) => s.token === undefined && Array.isArray(s.edgeRouters) && s.identityId === alice.id)).toBe(true);
    expect(list.find((s) => s.id === mine.id).edgeRouters).toEqual(mine.edgeRouters);
    expect(list.flatMap((s) => s.edgeRouters).every((r: any) => r.syncStatus === 'SYNC_UNKNOWN')).toBe(true);
    expect(json(res).meta.filterableFields).toEqual(expect.arrayContaining(['apiSessionId', 'identityId', 'serviceId', 'type']));
    const detail = ok(await call(t, 'GET', `${MGMT}/sessions/${mine.id}`, { token: net.admin }));
    expect(detail).toMatchObject({ id: mine.id, apiSessionId: mine.apiSessionId, serviceId: ids.web, type: 'Dial', edgeRouters: mine.edgeRouters });
    expect(detail.token).toBeUndefined();
    // the owner's token appears in no management read, under any name
    const owner = ok(await client(t, 'GET', `/sessions/${mine.id}`, tokens.alice)).token as string;
    for (const body of [res.body, (await call(t, 'GET', `${MGMT}/sessions/${mine.id}`, { token: net.admin })).body]) {
      expect(body.includes(owner)).toBe(false);
      expect(body.includes(owner.split('.')[2]!)).toBe(false);
    }
    expect(ok(await call(t, 'GET', `${MGMT}/sessions/${mine.id}/route-path`, { token: net.admin }))).toEqual({ routePath: [] });
    ok(await call(t, 'DELETE', `${MGMT}/sessions/${mine.id}`, { token: net.admin }));
    expectError(await client(t, 'GET', `/sessions/${mine.id}`, tokens.alice), 404, 'NOT_FOUND');
    // and a new request makes a new one
    expect(ok(await create(tokens.alice, { serviceId: ids.web }), 201).id).not.toBe(mine.id);
  });

  it('are named in the Management API document with the operation ids of endpoints.md', async () => {
    const doc = json(await t.inject({ method: 'GET', url: `${MGMT}/specs/edge-management/spec` }));
    const op = (path: string, method: string) => doc.paths[`${MGMT}${path}`]?.[method]?.operationId;
    expect(op('/sessions', 'get')).toBe('listSessions');
    expect(op('/sessions/{id}', 'get')).toBe('detailSession');
    expect(op('/sessions/{id}', 'delete')).toBe('deleteSession');
    expect(op('/sessions/{id}/route-path', 'get')).toBe('detailSessionRoutePath');
    expect(op('/identities/{id}/failed-service-requests', 'get')).toBe('getIdentityFailedServiceRequests');
    expect(op('/identities/{id}/posture-data', 'get')).toBe('getIdentityPostureData');
  });

  it('answers 400 for a filter on the token, 401 to callers who are not admins', async () => {
    expectError(await call(t, 'GET', `${MGMT}/sessions?filter=${encodeURIComponent('token = "x"')}`, { token: net.admin }), 400, 'INVALID_FILTER', 'filter');
    const any = (ok(await call(t, 'GET', `${MGMT}/sessions`, { token: net.admin })) as any[])[0].id as string;
    const user = await net.login(alice);
    for (const [method, path] of [
      ['GET', '/sessions'],
      ['GET', `/sessions/${any}`],
      ['GET', `/sessions/${any}/route-path`],
      ['DELETE', `/sessions/${any}`],
    ] as const) {
      expectError(await call(t, method, `${MGMT}${path}`, { token: user }), 401, 'UNAUTHORIZED');
    }
    ok(await call(t, 'GET', `${MGMT}/sessions/${any}`, { token: net.admin }));
  });
});

describe('the session token expires with its API session', () => {
  // A controller of its own: the clock moves here.
  let own: TestController;
  let ownNet: Network;
  let dave: Person;
  let web: string;
  beforeAll(async () => {
    own = await startTestController({ env: ADMIN_ENV });
    ownNet = new Network(own, await asAdmin(own));
    dave = await ownNet.person('dave', ['eng']);
    await ownNet.edgeRouter('er-exp', ['public']);
    await ownNet.edgeRouterPolicy(['#eng'], ['#public']);
    await ownNet.serviceEdgeRouterPolicy(['#routed'], ['#public']);
    web = await ownNet.service('web-exp', ['routed']);
    await ownNet.servicePolicy('Dial', ['#eng'], [`@${web}`]);
  });
  afterAll(async () => {
    await own.close();
  });

  const claims = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
  const routers = (token: string, sessionToken: string) => client(own, 'GET', `/services/${web}/edge-routers`, token, undefined, { 'session-token': sessionToken });

  it('carries exp: the expiry its API session has when the token is handed out', async () => {
    const token = await ownNet.login(dave);
    const res = await client(own, 'POST', '/sessions', token, { serviceId: web });
    const s = ok(res, 201);
    expect(claims(s.token).exp).toBe(Math.floor(Date.parse(String(res.headers['expires-at'])) / 1000));
    expect(claims(s.token).exp * 1000).toBeGreaterThan(own.clock());
  });

  it('is refused once expired, while its API session lives on; a fresh read hands out a current one', async () => {
    const token = await ownNet.login(dave);
    const s = ok(await client(own, 'POST', '/sessions', token, { serviceId: web }), 201);
    expect(routerIdsOf(await routers(token, s.token))).toHaveLength(1);
    const timeout = own.config.edge.api.sessionTimeout;
    // Activity keeps the API session alive past the first token's expiry.
    own.clock.advance(timeout * 0.6);
    ok(await client(own, 'GET', '/current-api-session', token));
    own.clock.advance(timeout * 0.6);
    expectError(await routers(token, s.token), 401, 'UNAUTHORIZED');
    expect(claims(s.token).exp * 1000).toBeLessThanOrEqual(own.clock());
    const again = ok(await client(own, 'GET', `/sessions/${s.id}`, token));
    expect(again.id).toBe(s.id);
    expect(claims(again.token).exp * 1000).toBeGreaterThan(own.clock());
    expect(routerIdsOf(await routers(token, again.token))).toHaveLength(1);
    const listed = (ok(await client(own, 'GET', '/sessions', token)) as any[]).find((x) => x.id === s.id);
    expect(claims(listed.token).exp).toBe(claims(again.token).exp);
  });

  it('is refused without exp, even when signed by the controller', async () => {
    const token = await ownNet.login(dave);
    const s = ok(await client(own, 'POST', '/sessions', token, { serviceId: web }), 201);
    const key = own.app.core.oidc.keys.current;
    const { exp: _exp, ...forever } = claims(s.token);
    expectError(await routers(token, signCompact(key.alg, key.privateKey, key.headers.jwt, forever)), 401, 'UNAUTHORIZED');
    expect(routerIdsOf(await routers(token, s.token))).toHaveLength(1);
  });
});

describe('memory', () => {
  it('keeps no edge router list count of an identity once it is deleted', async () => {
    const admin = await asAdmin(t);
    const counts = (t.app.core.client as unknown as { sessions: { routerLists: { identities: Map<string, number> } } }).sessions.routerLists.identities;
    const before = counts.size;
    for (let i = 0; i < 5; i++) {
      const made = await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: `churn-${i}`, type: 'User', isAdmin: false } });
      expect(made.statusCode).toBe(201);
      const id = json(made).data.id as string;
      expect((await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { roleAttributes: ['churn'] } })).statusCode).toBe(200);
      expect((await call(t, 'DELETE', `${MGMT}/identities/${id}`, { token: admin })).statusCode).toBe(200);
    }
    expect(counts.size).toBe(before);
  });
});
