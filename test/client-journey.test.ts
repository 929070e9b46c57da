// One identity's whole journey on the Client API: log in, list its services (permissions, configs,
// posture queries), dial and bind through sessions whose tokens verify against /oidc/keys, fail and
// then pass posture, see the change marker move, and log out (its sessions end with it). The admin
// sees the refusal and the posture data on the Management API.
import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ENV, asAdmin, CLIENT, expectError, json, MGMT, call, startTestController, type TestController } from './helpers.js';
import { client, HOST, idsOf, INTERCEPT, Network, ok, routerIdsOf, type Person } from './fixtures/network.js';
import { bearer, oidcLogin } from './oidc-helpers.js';

let t: TestController;
let net: Network;
let alice: Person;
const ids: Record<string, string> = {};

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  net = new Network(t, await asAdmin(t));
  alice = await net.person('alice', ['eng']);
  ids.interceptWeb = await net.config('intercept.v1', INTERCEPT);
  ids.hostWeb = await net.config('host.v1', HOST);
  ids.web = await net.service('web', ['web'], { configs: [ids.interceptWeb, ids.hostWeb] });
  ids.db = await net.service('db', ['db']);
  ids.hidden = await net.service('hidden', ['hidden']);
  ids.router = await net.edgeRouter('er-1', ['public']);
  await net.edgeRouterPolicy(['#eng'], ['#public']);
  await net.serviceEdgeRouterPolicy(['#all'], ['#public']);
  ids.domainCheck = await net.postureCheck('DOMAIN', { domains: ['corp.example'] }, ['corp']);
  ids.dialWeb = await net.servicePolicy('Dial', ['#eng'], ['#web']);
  ids.bindDb = await net.servicePolicy('Bind', [`@${alice.id}`], ['#db'], ['#corp']);
});
afterAll(async () => {
  await t.close();
});

describe('the journey of alice', () => {
  let token: string;
  let dialId: string;

  it('logs in asking for intercept.v1 configs and lists exactly her services', async () => {
    token = await net.login(alice, { configTypes: ['intercept.v1'] });
    const res = await client(t, 'GET', '/services', token);
    const services = ok(res) as any[];
    expect(services.map((s) => s.name)).toEqual(['db', 'web'].sort((a, b) => (ids[a]! < ids[b]! ? -1 : 1)));
    expect(json(res).meta.pagination.totalCount).toBe(2);
    const web = services.find((s) => s.id === ids.web);
    expect(web.permissions).toEqual(['Dial']);
    expect(web.config).toEqual({ 'intercept.v1': INTERCEPT });
    expect(web.configs).toEqual([ids.interceptWeb, ids.hostWeb].sort());
    expect(web.postureQueries).toEqual([{ policyId: ids.dialWeb, policyType: 'Dial', isPassing: true, postureQueries: [] }]);
    const db = services.find((s) => s.id === ids.db);
    expect(db.permissions).toEqual(['Bind']);
    expect(db.config).toEqual({});
    expect(db.postureQueries).toEqual([
      {
        policyId: ids.bindDb,
        policyType: 'Bind',
        isPassing: false,
        postureQueries: [
          {
            _links: { self: { href: `./posture-checks/${ids.domainCheck}` } },
            id: ids.domainCheck,
            createdAt: expect.any(String),
            updatedAt: expect.any(String),
            tags: {},
            typeId: 'DOMAIN',
            queryType: 'DOMAIN',
            isPassing: false,
            timeout: -1,
            timeoutRemaining: -1,
          },
        ],
      },
    ]);
  });

  it('may ask for other config types on the list', async () => {
    const services = ok(await client(t, 'GET', `/services?configTypes=host.v1&configTypes=intercept.v1&filter=${encodeURIComponent('name = "web"')}`, token));
    expect(services[0].config).toEqual({ 'intercept.v1': INTERCEPT, 'host.v1': HOST });
    const all = ok(await client(t, 'GET', `/services/${ids.web}?configTypes=all`, token));
    expect(Object.keys(all.config).sort()).toEqual(['host.v1', 'intercept.v1']);
  });

  it('dials web: a session whose token is a JWT of the controller, verifiable with /oidc/keys', async () => {
    const res = await client(t, 'POST', '/sessions', token, { serviceId: ids.web });
    const s = ok(res, 201);
    dialId = s.id;
    expect(s).toMatchObject({ serviceId: ids.web, identityId: alice.id, type: 'Dial' });
    expect(s.edgeRouters).toEqual([
      { id: ids.router, name: 'er-1', hostname: '', isOnline: false, supportedProtocols: {}, urls: {}, syncStatus: 'SYNC_UNKNOWN', cost: 0, noTraversal: false, disabled: false },
    ]);
    const keys = json(await t.inject({ method: 'GET', url: '/oidc/keys' }));
    // Checked at the controller's time: the token expires with the API session.
    const { payload, protectedHeader } = await jwtVerify(s.token, createLocalJWKSet(keys), { currentDate: new Date(t.clock()) });
    expect(protectedHeader).toMatchObject({ alg: 'ES256', kid: t.app.core.oidc.keys.current.kid });
    expect(payload).toMatchObject({ sub: ids.web, jti: s.id, ov_t: 's', ov_st: 'Dial', ov_asid: s.apiSessionId });
    expect(typeof payload.iss).toBe('string');
    expect(typeof payload.iat).toBe('number');
    expect(payload.exp).toBe(Math.floor(Date.parse(String(res.headers['expires-at'])) / 1000));
    // the same request again answers the same session
    const again = ok(await client(t, 'POST', '/sessions', token, { serviceId: ids.web, type: 'Dial' }), 201);
    expect(again.id).toBe(s.id);
    expect(again.token).toBe(s.token);
    // the session token opens the service's edge routers
    const routers = await client(t, 'GET', `/services/${ids.web}/edge-routers`, token, undefined, { 'session-token': s.token });
    expect(routerIdsOf(routers)).toEqual([ids.router]);
  });

  it('is refused the bind while her posture fails, and the refusal is recorded', async () => {
    const res = await client(t, 'POST', '/sessions', token, { serviceId: ids.db, type: 'Bind' });
    const body = expectError(res, 409, 'INVALID_POSTURE');
    expect(body.error.cause).toEqual({
      message: expect.any(String),
      data: { [ids.bindDb!]: [{ id: ids.domainCheck, typeId: 'DOMAIN', isPassing: false }] },
    });
    const failures = ok(await call(t, 'GET', `${MGMT}/identities/${alice.id}/failed-service-requests`, { token: net.admin }));
    expect(failures).toEqual([
      {
        apiSessionId: ok(await client(t, 'GET', '/current-api-session', token)).id,
        serviceId: ids.db,
        serviceName: 'db',
        sessionType: 'Bind',
        when: expect.any(String),
        policyFailures: [
          {
            policyId: ids.bindDb,
            policyName: expect.stringMatching(/^sp-/),
            // nothing reported yet: the domain she had is empty
            checks: [
              {
                postureCheckId: ids.domainCheck,
                postureCheckName: expect.stringMatching(/^pc-/),
                postureCheckType: 'DOMAIN',
                actualValue: '',
                expectedValue: ['corp.example'],
              },
            ],
          },
        ],
      },
    ]);
  });

  it('reports her domain, which moves her change marker, and then binds', async () => {
    const before = ok(await client(t, 'GET', '/current-api-session/service-updates', token)).lastChangeAt;
    expect(ok(await client(t, 'GET', '/current-api-session/service-updates', token)).lastChangeAt).toBe(before);
    t.clock.advance(1_000);
    ok(await client(t, 'POST', '/posture-response', token, { id: ids.domainCheck, typeId: 'DOMAIN', domain: 'CORP.example' }), 201);
    const after = ok(await client(t, 'GET', '/current-api-session/service-updates', token)).lastChangeAt;
    expect(Date.parse(after)).toBeGreaterThan(Date.parse(before));

    const db = ok(await client(t, 'GET', `/services/${ids.db}`, token));
    expect(db.postureQueries[0].isPassing).toBe(true);
    const bind = ok(await client(t, 'POST', '/sessions', token, { serviceId: ids.db, type: 'Bind' }), 201);
    expect(bind.type).toBe('Bind');

    const data = ok(await call(t, 'GET', `${MGMT}/identities/${alice.id}/posture-data`, { token: net.admin }));
    expect(data.domain).toMatchObject({ domain: 'CORP.example', postureCheckId: ids.domainCheck, timedOut: false });
    expect(Object.keys(data.apiSessionPostureData)).toContain(bind.apiSessionId);
  });

  it('lists, reads and deletes her sessions', async () => {
    const list = ok(await client(t, 'GET', '/sessions', token)) as any[];
    expect(list).toHaveLength(2);
    expect(list.every((s) => typeof s.token === 'string' && s.identityId === alice.id)).toBe(true);
    const detail = ok(await client(t, 'GET', `/sessions/${dialId}`, token));
    expect(detail.edgeRouters.map((r: { id: string }) => r.id)).toEqual([ids.router]);
    expect(detail.service).toMatchObject({ entity: 'services', id: ids.web, name: 'web' });
    ok(await client(t, 'DELETE', `/sessions/${dialId}`, token));
    expectError(await client(t, 'GET', `/sessions/${dialId}`, token), 404, 'NOT_FOUND');
    // a new dial makes a new session
    dialId = ok(await client(t, 'POST', '/sessions', token, { serviceId: ids.web }), 201).id;
  });

  it('logs out: her sessions end with her API session', async () => {
    const mine = idsOf(await client(t, 'GET', '/sessions', token));
    expect(mine).toHaveLength(2);
    ok(await client(t, 'DELETE', '/current-api-session', token));
    for (const id of mine) expectError(await call(t, 'GET', `${MGMT}/sessions/${id}`, { token: net.admin }), 404, 'NOT_FOUND');
    const all = ok(await call(t, 'GET', `${MGMT}/sessions?filter=${encodeURIComponent(`identityId = "${alice.id}"`)}`, { token: net.admin }));
    expect(all).toEqual([]);
    // a new API session starts without posture data: the bind is refused again
    const next = await net.login(alice);
    expectError(await client(t, 'POST', '/sessions', next, { serviceId: ids.db, type: 'Bind' }), 409, 'INVALID_POSTURE');
  });

  it('goes the same way with an OIDC access token', async () => {
    const tokens = await oidcLogin(t, alice.username, alice.password);
    const headers = bearer(tokens.access_token);
    const services = ok(await call(t, 'GET', `${CLIENT}/services`, { headers })) as any[];
    expect(services.map((s) => s.id).sort()).toEqual([ids.db, ids.web].sort());
    const s = ok(await call(t, 'POST', `${CLIENT}/sessions`, { headers, body: { serviceId: ids.web } }), 201);
    expect(s.apiSessionId).toBe(JSON.parse(Buffer.from(tokens.access_token.split('.')[1]!, 'base64url').toString()).ov_asid);
    ok(await call(t, 'POST', `${CLIENT}/posture-response-bulk`, { headers, body: [{ id: ids.domainCheck, typeId: 'DOMAIN', domain: 'corp.example' }] }));
    expect(ok(await call(t, 'POST', `${CLIENT}/sessions`, { headers, body: { serviceId: ids.db, type: 'Bind' } }), 201).type).toBe('Bind');
  });
});
