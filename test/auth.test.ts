// Legacy authentication over both Edge APIs: POST /authenticate, the token, expiry headers, the
// sliding session expiry and its sweep, logout, the credential checks of every protected route,
// and throttling of failed logins.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
  ADMIN_USERNAME,
  asAdmin,
  authenticate,
  call,
  CHALLENGE_MISSING,
  CHALLENGE_SESSION_INVALID,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  sha256Hex,
  startTestController,
  type TestController,
  expectMissingCredential,
} from './helpers.js';

const MINUTE = 60_000;
const META = { apiVersion: '0.29.0', apiEnrollmentVersion: '0.0.1' };

let t: TestController;
let user: { id: string; authenticatorId: string };
const USER = { name: 'auth-user', username: 'auth-user', password: 'user-password-1' };

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  user = await createIdentityWithPassword(t, await asAdmin(t), USER);
});
afterAll(async () => {
  await t.close();
});

describe.each([CLIENT, MGMT])('POST %s/authenticate', (api) => {
  it('answers the API session with the token, in the body and the overlay-session header', async () => {
    const now = t.clock();
    const res = await authenticate(t, USER.username, USER.password, { api });
    expect(res.statusCode).toBe(200);
    const body = json(res);
    expect(body.meta).toEqual(META);
    const s = body.data;
    expect(typeof s.token).toBe('string');
    // At least 128 bits of randomness, base64url.
    expect(s.token).toMatch(/^[A-Za-z0-9_-]{22,}$/);
    expect(res.headers['overlay-session']).toBe(s.token);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['expiration-seconds']).toBe('1800');
    expect(res.headers['expires-at']).toBe(new Date(now + 30 * MINUTE).toISOString());
    expect(s).toMatchObject({
      identityId: user.id,
      identity: { entity: 'identities', id: user.id, name: USER.name, _links: { self: { href: `./identities/${user.id}` } } },
      authenticatorId: user.authenticatorId,
      configTypes: [],
      ipAddress: '127.0.0.1',
      isMfaRequired: false,
      isMfaComplete: false,
      isCertExtendable: false,
      authQueries: [],
      expirationSeconds: 1800,
      expiresAt: new Date(now + 30 * MINUTE).toISOString(),
      lastActivityAt: new Date(now).toISOString(),
      tags: {},
    });
    expect(typeof s.id).toBe('string');
    expect(s._links.self.href).toBe(`./api-sessions/${s.id}`);
    expect(s).not.toHaveProperty('tokenHash');
    expect(res.body).not.toContain(sha256Hex(s.token));
  });

  it('issues a different token on every login', async () => {
    const a = await login(t, USER.username, USER.password, api);
    const b = await login(t, USER.username, USER.password, api);
    expect(a).not.toBe(b);
  });

  it('refuses a missing or unknown method with 400 INVALID_AUTH_METHOD', async () => {
    for (const query of ['', '?method=', '?method=nope', '?method=PASSWORD', '?method=updb']) {
      const res = await call(t, 'POST', `${api}/authenticate${query}`, {
        body: { username: USER.username, password: USER.password },
      });
      expectError(res, 400, 'INVALID_AUTH_METHOD');
      expect(res.headers['overlay-session']).toBeUndefined();
    }
  });

  it('refuses wrong credentials with 401 INVALID_AUTH and no token', async () => {
    for (const [username, password] of [
      [USER.username, 'wrong-password'],
      ['nobody-here', USER.password],
      [USER.username.toUpperCase(), USER.password],
    ] as const) {
      const res = await authenticate(t, username, password, { api, remoteAddress: '10.1.0.1' });
      const body = expectError(res, 401, 'INVALID_AUTH');
      expect(body.meta).toEqual(META);
      expect(res.headers['overlay-session']).toBeUndefined();
      expect(res.body).not.toContain(password);
    }
  });

  it('validates the lengths of username (4..100) and password (5..100)', async () => {
    const cases: [string, string, string][] = [
      ['abc', USER.password, 'username'],
      ['a'.repeat(101), USER.password, 'username'],
      [USER.username, 'abcd', 'password'],
      [USER.username, 'a'.repeat(101), 'password'],
    ];
    for (const [username, password, field] of cases) {
      expectError(await authenticate(t, username, password, { api }), 400, 'COULD_NOT_VALIDATE', field);
    }
  });

  it('requires username and password for method password', async () => {
    expectError(
      await call(t, 'POST', `${api}/authenticate?method=password`, { body: { password: USER.password } }),
      400,
      'COULD_NOT_VALIDATE',
      'username',
    );
    expectError(
      await call(t, 'POST', `${api}/authenticate?method=password`, { body: { username: USER.username } }),
      400,
      'COULD_NOT_VALIDATE',
      'password',
    );
    expectError(await call(t, 'POST', `${api}/authenticate?method=password`, { body: {} }), 400, 'COULD_NOT_VALIDATE', 'username');
  });

  it('refuses bodies of the wrong shape', async () => {
    expectError(await authenticate(t, USER.username, USER.password, { api, body: { configTypes: 'x' } }), 400, 'COULD_NOT_VALIDATE', 'configTypes');
    expectError(await authenticate(t, USER.username, USER.password, { api, body: { envInfo: { arch: 7 } } }), 400, 'COULD_NOT_VALIDATE', 'envInfo.arch');
    const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`key${i}`, 'x']));
    expectError(await authenticate(t, USER.username, USER.password, { api, body: { sdkInfo: many } }), 400, 'COULD_NOT_VALIDATE', 'sdkInfo');
    expectError(await authenticate(t, USER.username, USER.password, { api, body: { envInfo: { extra: { nested: 1 } } } }), 400, 'COULD_NOT_VALIDATE', 'envInfo.extra');
    const res = await call(t, 'POST', `${api}/authenticate?method=password`, {
      body: '{"username":',
      headers: { 'content-type': 'application/json' },
    });
    expectError(res, 400, 'COULD_NOT_PARSE_BODY');
  });

  it('refuses a certificate login without a client certificate', async () => {
    expectError(await call(t, 'POST', `${api}/authenticate?method=cert`, { body: {} }), 401, 'INVALID_AUTH');
  });
});

describe('the login', () => {
  it('works on both APIs: a token from one is accepted by the other', async () => {
    const fromClient = await login(t, USER.username, USER.password, CLIENT);
    const fromMgmt = await login(t, USER.username, USER.password, MGMT);
    for (const token of [fromClient, fromMgmt]) {
      for (const api of [CLIENT, MGMT]) {
        const res = await call(t, 'GET', `${api}/current-identity`, { token });
        expect(res.statusCode).toBe(200);
        expect(json(res).data.id).toBe(user.id);
      }
    }
  });

  it('stores configTypes on the session and envInfo / sdkInfo on the identity', async () => {
    const envInfo = { arch: 'amd64', domain: 'example.org', hostname: 'box', os: 'linux', osRelease: '6.1', osVersion: '#1 SMP' };
    const sdkInfo = { appId: 'app', appVersion: '1.2.3', branch: 'main', revision: 'abc123', type: 'go', version: '0.30.0' };
    const res = await authenticate(t, USER.username, USER.password, {
      body: { configTypes: ['ct-one', 'ct-two', 'ct-one'], envInfo, sdkInfo },
    });
    expect(res.statusCode).toBe(200);
    const token = json(res).data.token as string;
    expect(json(res).data.configTypes).toEqual(['ct-one', 'ct-two']);

    const current = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { token })).data;
    expect(current.configTypes).toEqual(['ct-one', 'ct-two']);

    const me = json(await call(t, 'GET', `${CLIENT}/current-identity`, { token })).data;
    expect(me.envInfo).toEqual(envInfo);
    expect(me.sdkInfo).toEqual(sdkInfo);
    const detail = json(await call(t, 'GET', `${MGMT}/identities/${user.id}`, { token: await asAdmin(t) })).data;
    expect(detail.envInfo).toEqual(envInfo);
    expect(detail.sdkInfo).toEqual(sdkInfo);
  });

  // A newer SDK reporting a key the interface does not name was refused its login.
  it('takes reports with keys beyond those named, and keeps the named ones only', async () => {
    const res = await authenticate(t, USER.username, USER.password, {
      body: { envInfo: { os: 'linux', kernel: '6.8', containerized: true }, sdkInfo: { type: 'ziti-sdk-c', version: '1.0.0', build: 42, flavour: null } },
    });
    expect(res.statusCode, res.body).toBe(200);
    const me = json(await call(t, 'GET', `${CLIENT}/current-identity`, { token: json(res).data.token as string })).data;
    expect([me.envInfo, me.sdkInfo]).toEqual([{ os: 'linux' }, { type: 'ziti-sdk-c', version: '1.0.0' }]);
  });

  it('puts the expiry headers, and no-store, on every authenticated answer', async () => {
    const token = await login(t, USER.username, USER.password);
    t.clock.advance(5 * MINUTE);
    const now = t.clock();
    // Session JWTs, enrollment tokens: an authenticated answer may carry a secret, and is never stored.
    for (const url of [`${CLIENT}/current-identity`, `${MGMT}/current-api-session`, `${CLIENT}/current-identity/authenticators`, `${CLIENT}/sessions`]) {
      const res = await call(t, 'GET', url, { token });
      expect(res.statusCode).toBe(200);
      expect(res.headers['expiration-seconds']).toBe('1800');
      expect(res.headers['expires-at']).toBe(new Date(now + 30 * MINUTE).toISOString());
      expect(res.headers['cache-control'], url).toBe('no-store');
    }
  });

  it('is accepted with the header name in any letter case', async () => {
    const token = await login(t, USER.username, USER.password);
    const res = await t.inject({ method: 'GET', url: `${CLIENT}/current-identity`, headers: { 'Overlay-Session': token } });
    expect(res.statusCode).toBe(200);
  });
});

describe('session expiry', () => {
  it('slides with every request and expires after 30 idle minutes', async () => {
    const token = await login(t, USER.username, USER.password, CLIENT);
    t.clock.advance(20 * MINUTE);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token })).statusCode).toBe(200);
    t.clock.advance(20 * MINUTE);
    // 40 minutes after login, 20 after the last request: still valid.
    const still = await call(t, 'GET', `${CLIENT}/current-api-session`, { token });
    expect(still.statusCode).toBe(200);
    expect(still.headers['expiration-seconds']).toBe('1800');
    t.clock.advance(31 * MINUTE);
    const res = await call(t, 'GET', `${CLIENT}/current-identity`, { token });
    expectError(res, 401, 'UNAUTHORIZED');
    expect(res.headers['www-authenticate']).toBe(CHALLENGE_SESSION_INVALID);
    // And stays expired.
    expect((await call(t, 'GET', `${MGMT}/current-identity`, { token })).statusCode).toBe(401);
  });

  it('expires at exactly the timeout: 29:59 idle is fine, 30:00 is not', async () => {
    const token = await login(t, USER.username, USER.password);
    t.clock.advance(30 * MINUTE - 1_000);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token })).statusCode).toBe(200);
    t.clock.advance(30 * MINUTE);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token })).statusCode).toBe(401);
  });

  it('sweep() removes expired sessions from the store', async () => {
    const token = await login(t, USER.username, USER.password);
    const sessionId = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { token })).data.id as string;
    const row = () =>
      t.app.core.store.db.selectFrom('api_sessions').select('id').where('id', '=', sessionId).executeTakeFirst();
    expect(await row()).toBeDefined();

    t.clock.advance(31 * MINUTE);
    const live = await login(t, USER.username, USER.password);
    const removed = await t.app.core.sessions.sweep();
    expect(removed).toBeGreaterThanOrEqual(1);
    expect(await row()).toBeUndefined();
    // The fresh session survives the sweep.
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token: live })).statusCode).toBe(200);

    const admin = await asAdmin(t);
    const list = json(await call(t, 'GET', `${MGMT}/api-sessions?filter=${encodeURIComponent(`id = "${sessionId}"`)}`, { token: admin }));
    expect(list.data).toEqual([]);
    expect(list.meta.pagination.totalCount).toBe(0);
    expectError(await call(t, 'GET', `${MGMT}/api-sessions/${sessionId}`, { token: admin }), 404, 'NOT_FOUND');
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token })).statusCode).toBe(401);
  });

  it('sweep() keeps a session whose activity is recent only in memory', async () => {
    const token = await login(t, USER.username, USER.password);
    t.clock.advance(25 * MINUTE);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token })).statusCode).toBe(200);
    t.clock.advance(25 * MINUTE);
    await t.app.core.sessions.sweep();
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token })).statusCode).toBe(200);
  });
});

describe.each([CLIENT, MGMT])('current API session on %s', (api) => {
  it('GET shows the session with the token the caller presented, never its hash, and tells caches not to keep it', async () => {
    const other = await login(t, USER.username, USER.password, api);
    const token = await login(t, USER.username, USER.password, api);
    const res = await call(t, 'GET', `${api}/current-api-session`, { token });
    expect(res.statusCode).toBe(200);
    const s = json(res).data;
    expect(s).toMatchObject({
      identityId: user.id,
      identity: { entity: 'identities', id: user.id, name: USER.name },
      authenticatorId: user.authenticatorId,
      isMfaRequired: false,
      isMfaComplete: false,
      authQueries: [],
      expirationSeconds: 1800,
    });
    expect(s.token).toBe(token);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(s).not.toHaveProperty('tokenHash');
    expect(res.body).not.toContain(sha256Hex(token));
    // Another session of the same identity shows its own token only.
    const others = json(await call(t, 'GET', `${api}/current-api-session`, { token: other })).data;
    expect(others.token).toBe(other);
    expect(JSON.stringify(others)).not.toContain(token);
  });

  it('DELETE logs out: the token is refused at once', async () => {
    const token = await login(t, USER.username, USER.password, api);
    const other = await login(t, USER.username, USER.password, api);
    const res = await call(t, 'DELETE', `${api}/current-api-session`, { token });
    expect(res.statusCode).toBe(200);
    expect(json(res)).toEqual({ data: {}, meta: META });
    for (const url of [`${api}/current-api-session`, `${CLIENT}/current-identity`, `${MGMT}/current-identity`]) {
      const after = await call(t, 'GET', url, { token });
      expectError(after, 401, 'UNAUTHORIZED');
      expect(after.headers['www-authenticate']).toBe(CHALLENGE_SESSION_INVALID);
    }
    expect((await call(t, 'DELETE', `${api}/current-api-session`, { token })).statusCode).toBe(401);
    // Other sessions of the same identity live on.
    expect((await call(t, 'GET', `${api}/current-api-session`, { token: other })).statusCode).toBe(200);
  });
});

// Every protected route of both APIs, for the credential checks that precede everything else.
const ID = 'abcdefghij';
const CLIENT_ROUTES: [string, string][] = [
  ['GET', '/current-api-session'],
  ['DELETE', '/current-api-session'],
  ['GET', '/current-identity'],
  ['GET', '/current-identity/authenticators'],
  ['GET', `/current-identity/authenticators/${ID}`],
  ['PATCH', `/current-identity/authenticators/${ID}`],
  ['PUT', `/current-identity/authenticators/${ID}`],
];
const ADMIN_ROUTES: [string, string][] = [
  ['GET', '/api-sessions'],
  ['GET', `/api-sessions/${ID}`],
  ['DELETE', `/api-sessions/${ID}`],
  ['GET', '/auth-policies'],
  ['POST', '/auth-policies'],
  ['GET', `/auth-policies/${ID}`],
  ['PATCH', `/auth-policies/${ID}`],
  ['PUT', `/auth-policies/${ID}`],
  ['DELETE', `/auth-policies/${ID}`],
  ['GET', '/authenticators'],
  ['POST', '/authenticators'],
  ['GET', `/authenticators/${ID}`],
  ['PATCH', `/authenticators/${ID}`],
  ['PUT', `/authenticators/${ID}`],
  ['DELETE', `/authenticators/${ID}`],
  ['GET', '/identities'],
  ['POST', '/identities'],
  ['GET', `/identities/${ID}`],
  ['PATCH', `/identities/${ID}`],
  ['PUT', `/identities/${ID}`],
  ['DELETE', `/identities/${ID}`],
  ['GET', `/identities/${ID}/authenticators`],
  ['POST', `/identities/${ID}/disable`],
  ['POST', `/identities/${ID}/enable`],
  ['GET', '/identity-types'],
  ['GET', '/identity-types/User'],
];
const PROTECTED: [string, string][] = [
  ...CLIENT_ROUTES.map(([m, p]) => [m, `${CLIENT}${p}`] as [string, string]),
  ...CLIENT_ROUTES.map(([m, p]) => [m, `${MGMT}${p}`] as [string, string]),
  ...ADMIN_ROUTES.map(([m, p]) => [m, `${MGMT}${p}`] as [string, string]),
];
const bodyFor = (method: string) => (method === 'POST' || method === 'PATCH' || method === 'PUT' ? {} : undefined);

describe('credential checks of every protected route', () => {
  it('no credential: 401 UNAUTHORIZED with both "missing" challenges', async () => {
    for (const [method, url] of PROTECTED) {
      const res = await call(t, method as 'GET', url, { body: bodyFor(method) });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
      expect(json(res).error.code, `${method} ${url}`).toBe('UNAUTHORIZED');
      expect(res.headers['www-authenticate'], `${method} ${url}`).toBe(CHALLENGE_MISSING);
      expect(res.headers['expiration-seconds']).toBeUndefined();
    }
  });

  it('an empty overlay-session header counts as no credential', async () => {
    const res = await call(t, 'GET', `${CLIENT}/current-identity`, { token: '' });
    expectMissingCredential(res);
  });

  it('an unknown session token: 401 with the "invalid" session challenge', async () => {
    for (const token of ['not-a-token', 'x'.repeat(43), 'y'.repeat(2000)]) {
      for (const [method, url] of PROTECTED) {
        const res = await call(t, method as 'GET', url, { token, body: bodyFor(method) });
        expect(res.statusCode, `${method} ${url}`).toBe(401);
        expect(json(res).error.code).toBe('UNAUTHORIZED');
        expect(res.headers['www-authenticate'], `${method} ${url}`).toBe(CHALLENGE_SESSION_INVALID);
      }
    }
  });

  it('the hash of a token is not a token', async () => {
    const token = await login(t, USER.username, USER.password);
    const res = await call(t, 'GET', `${CLIENT}/current-identity`, { token: sha256Hex(token) });
    expectError(res, 401, 'UNAUTHORIZED');
    expect(res.headers['www-authenticate']).toBe(CHALLENGE_SESSION_INVALID);
  });

  it('an expired session token: 401 with the "invalid" session challenge', async () => {
    const token = await login(t, ADMIN_USERNAME, ADMIN_PASSWORD);
    t.clock.advance(31 * MINUTE);
    for (const [method, url] of PROTECTED) {
      const res = await call(t, method as 'GET', url, { token, body: bodyFor(method) });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
      expect(res.headers['www-authenticate'], `${method} ${url}`).toBe(CHALLENGE_SESSION_INVALID);
    }
  });

  it('a bearer token that does not validate: 401 with the "invalid" bearer challenge', async () => {
    const res = await call(t, 'GET', `${CLIENT}/current-identity`, { headers: { authorization: 'Bearer abc.def.ghi' } });
    expectError(res, 401, 'UNAUTHORIZED');
    expect(res.headers['www-authenticate']).toBe('Bearer realm="overlay-oidc" error="invalid" error_description="token is invalid"');
  });

  it('a non-admin identity: 401 UNAUTHORIZED on every admin route of the Management API', async () => {
    const token = await login(t, USER.username, USER.password);
    for (const [method, path] of ADMIN_ROUTES) {
      const res = await call(t, method as 'GET', `${MGMT}${path}`, { token, body: bodyFor(method) });
      expect(res.statusCode, `${method} ${path}`).toBe(401);
      expect(json(res).error.code, `${method} ${path}`).toBe('UNAUTHORIZED');
    }
    // The session itself is fine.
    expect((await call(t, 'GET', `${MGMT}/current-identity`, { token })).statusCode).toBe(200);
  });

  it('the Client API has no management routes', async () => {
    const admin = await asAdmin(t);
    for (const path of ['/identities', '/api-sessions', '/auth-policies', '/authenticators', '/identity-types']) {
      expectError(await call(t, 'GET', `${CLIENT}${path}`, { token: admin }), 404, 'NOT_FOUND');
    }
  });
});

describe('throttling of failed logins', () => {
  it('answers 429 with Retry-After after more than 20 failures within 10 s from one address', async () => {
    const remoteAddress = '10.66.0.1';
    for (let i = 0; i < 21; i++) {
      const res = await authenticate(t, `nobody-${i}`, 'wrong-password', { remoteAddress });
      expectError(res, 401, 'INVALID_AUTH');
    }
    // Even the right password is refused from that address now.
    const refused = await authenticate(t, USER.username, USER.password, { remoteAddress });
    expectError(refused, 429, 'SERVER_TOO_MANY_REQUESTS');
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(10);
    expect(refused.headers['overlay-session']).toBeUndefined();
    // Also on the other API.
    expectError(await authenticate(t, USER.username, USER.password, { api: CLIENT, remoteAddress }), 429, 'SERVER_TOO_MANY_REQUESTS');
    // Another address is not affected.
    expect((await authenticate(t, USER.username, USER.password, { remoteAddress: '10.66.0.2' })).statusCode).toBe(200);

    t.clock.advance(10_000);
    const res = await authenticate(t, USER.username, USER.password, { remoteAddress });
    expect(res.statusCode).toBe(200);
  });

  it('counts an IPv6 client by its /64, as the connection caps do', async () => {
    // One subscriber usually holds a whole /64: counted by single address, its failures would never add up.
    for (let i = 1; i <= 21; i++) {
      const res = await authenticate(t, `nobody-v6-${i}`, 'wrong-password', { remoteAddress: `2001:db8:66:1::${i.toString(16)}` });
      expectError(res, 401, 'INVALID_AUTH');
    }
    expectError(await authenticate(t, USER.username, USER.password, { remoteAddress: '2001:db8:66:1:ffff::1' }), 429, 'SERVER_TOO_MANY_REQUESTS');
    // The next /64 is someone else.
    expect((await authenticate(t, USER.username, USER.password, { remoteAddress: '2001:db8:66:2::1' })).statusCode).toBe(200);
    t.clock.advance(10_000);
  });

  it('does not count successful logins', async () => {
    const remoteAddress = '10.66.0.3';
    for (let i = 0; i < 30; i++) {
      expect((await authenticate(t, USER.username, USER.password, { remoteAddress })).statusCode).toBe(200);
    }
  });
});
