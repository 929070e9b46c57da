// The caller's own identity and authenticators (both Edge APIs): scoped to the caller before any
// filter, changes need the current password.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  authenticate,
  call,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  startTestController,
  testCa,
  type TestController,
} from './helpers.js';

let t: TestController;
let admin: string;
let alice: { id: string; authenticatorId: string };
let bob: { id: string; authenticatorId: string };

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  alice = await createIdentityWithPassword(t, admin, {
    name: 'alice',
    username: 'alice',
    password: 'alice-pw-1',
    roleAttributes: ['dev'],
    appData: { desk: 7 },
  });
  bob = await createIdentityWithPassword(t, admin, { name: 'bob', username: 'bobby', password: 'bob-pw-1' });
});
afterAll(async () => {
  await t.close();
});

describe.each([CLIENT, MGMT])('GET %s/current-identity', (api) => {
  it("answers the caller's identity", async () => {
    const token = await login(t, 'alice', 'alice-pw-1', api);
    const res = await call(t, 'GET', `${api}/current-identity`, { token });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toMatchObject({
      id: alice.id,
      name: 'alice',
      type: { _links: { self: { href: './identity-types/User' } }, entity: 'identity-types', id: 'User', name: 'User' },
      typeId: 'User',
      enrollment: {},
      isAdmin: false,
      isDefaultAdmin: false,
      roleAttributes: ['dev'],
      appData: { desk: 7 },
      authPolicy: { entity: 'auth-policies', id: 'default', name: 'Default' },
      authenticators: { updb: { id: alice.authenticatorId, username: 'alice' } },
      hasApiSession: true,
      isMfaEnabled: false,
      disabled: false,
    });
    expect(res.body).not.toMatch(/alice-pw-1|\$argon2|passwordHash/);
  });
});

describe('GET /current-identity after changes', () => {
  it('shows what an admin changed, on the next request', async () => {
    const frank = await createIdentityWithPassword(t, admin, { name: 'frank', username: 'frank', password: 'frank-pw-1' });
    const token = await login(t, 'frank', 'frank-pw-1', CLIENT);
    const me = async () => json(await call(t, 'GET', `${CLIENT}/current-identity`, { token })).data;
    expect((await me()).name).toBe('frank');

    await call(t, 'PATCH', `${MGMT}/identities/${frank.id}`, { token: admin, body: { name: 'franklin', roleAttributes: ['x'] } });
    expect(await me()).toMatchObject({ name: 'franklin', roleAttributes: ['x'] });

    await call(t, 'PATCH', `${MGMT}/authenticators/${frank.authenticatorId}`, { token: admin, body: { username: 'franklin' } });
    expect((await me()).authenticators.updb.username).toBe('franklin');

    const policy = await call(t, 'POST', `${MGMT}/auth-policies`, {
      token: admin,
      body: {
        name: 'frank-policy',
        primary: {
          cert: { allowed: true, allowExpiredCerts: true },
          extJwt: { allowed: true, allowedSigners: null },
          updb: { allowed: true, maxAttempts: 0, lockoutDurationMinutes: 0, minPasswordLength: 5, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false },
        },
        secondary: { requireTotp: false, requireExtJwtSigner: null },
      },
    });
    const policyId = json(policy).data.id as string;
    await call(t, 'PATCH', `${MGMT}/identities/${frank.id}`, { token: admin, body: { authPolicyId: policyId } });
    expect((await me()).authPolicy).toMatchObject({ id: policyId, name: 'frank-policy' });
    await call(t, 'PATCH', `${MGMT}/auth-policies/${policyId}`, { token: admin, body: { name: 'frank-policy-2' } });
    expect((await me()).authPolicy.name).toBe('frank-policy-2');

    await call(t, 'DELETE', `${MGMT}/authenticators/${frank.authenticatorId}`, { token: admin });
    expect((await me()).authenticators).toEqual({});
  });

  it('names the CA of a pending ottca enrollment as it is now called', async () => {
    const gwen = await createIdentityWithPassword(t, admin, { name: 'gwen', username: 'gwen', password: 'gwen-pw-1' });
    const ca = json(
      await call(t, 'POST', `${MGMT}/cas`, {
        token: admin,
        body: { name: 'gwen-ca', certPem: (await testCa('gwen CA')).certPem, isAuthEnabled: true, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: true, identityRoles: [] },
      }),
    ).data.id as string;
    const expiresAt = new Date(t.clock() + 3_600_000).toISOString();
    expect((await call(t, 'POST', `${MGMT}/enrollments`, { token: admin, body: { method: 'ottca', identityId: gwen.id, caId: ca, expiresAt } })).statusCode).toBe(201);
    const token = await login(t, 'gwen', 'gwen-pw-1', CLIENT);
    const me = async () => json(await call(t, 'GET', `${CLIENT}/current-identity`, { token })).data;
    expect((await me()).enrollment.ottca.ca).toMatchObject({ id: ca, name: 'gwen-ca' });
    await call(t, 'PATCH', `${MGMT}/cas/${ca}`, { token: admin, body: { name: 'gwen-ca-2' } });
    expect((await me()).enrollment.ottca.ca).toMatchObject({ id: ca, name: 'gwen-ca-2' });
  });
});

describe.each([CLIENT, MGMT])('%s/current-identity/authenticators', (api) => {
  const base = `${api}/current-identity/authenticators`;

  it('lists only the caller\'s authenticators, and no filter widens that', async () => {
    const token = await login(t, 'alice', 'alice-pw-1', api);
    const filters = [
      undefined,
      'identityId != "x"',
      `identityId = "${bob.id}"`,
      'identityId != "x" or id != "y"',
      `id = "${bob.authenticatorId}" or id = "${alice.authenticatorId}"`,
      'not (identityId = "nobody")',
    ];
    for (const filter of filters) {
      const res = await call(t, 'GET', filter === undefined ? base : `${base}?filter=${encodeURIComponent(filter)}`, { token });
      expect(res.statusCode, filter).toBe(200);
      const body = json(res);
      for (const a of body.data) expect(a.identityId, filter).toBe(alice.id);
      expect(body.meta.pagination.totalCount, filter).toBe(body.data.length);
      if (filter === `identityId = "${bob.id}"`) expect(body.data).toEqual([]);
      else expect(body.data.map((a: { id: string }) => a.id), filter).toEqual([alice.authenticatorId]);
      expect(res.body).not.toMatch(/alice-pw-1|bob|\$argon2|passwordHash/);
    }
  });

  it('the admin sees only its own authenticators here too', async () => {
    const token = await asAdmin(t);
    const body = json(await call(t, 'GET', `${base}?filter=${encodeURIComponent('identityId != "x"')}`, { token }));
    expect(body.data).toHaveLength(1);
    expect(body.data[0].username).toBe('admin');
  });

  it('refuses a bad filter', async () => {
    const token = await login(t, 'alice', 'alice-pw-1', api);
    expectError(await call(t, 'GET', `${base}?filter=${encodeURIComponent('passwordHash != null')}`, { token }), 400, 'INVALID_FILTER');
    expectError(await call(t, 'GET', `${base}?limit=x`, { token }), 400, 'INVALID_PAGINATION');
  });

  it('detail: own is 200 without secrets; another identity\'s or an unknown one is 404', async () => {
    const token = await login(t, 'alice', 'alice-pw-1', api);
    const res = await call(t, 'GET', `${base}/${alice.authenticatorId}`, { token });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toMatchObject({ id: alice.authenticatorId, method: 'updb', username: 'alice', identityId: alice.id });
    // Linked where the caller reads it (the admins' /authenticators is not the caller's to follow).
    const self = { self: { href: `./current-identity/authenticators/${alice.authenticatorId}` } };
    expect(json(res).data._links).toEqual(self);
    expect(json(await call(t, 'GET', base, { token })).data[0]._links).toEqual(self);
    expect(json(res).data).not.toHaveProperty('passwordHash');
    expect(json(res).data).not.toHaveProperty('password');
    expectError(await call(t, 'GET', `${base}/${bob.authenticatorId}`, { token }), 404, 'NOT_FOUND');
    expectError(await call(t, 'GET', `${base}/no-such-authenticator`, { token }), 404, 'NOT_FOUND');
  });

  it('patch and full update of another identity\'s authenticator are 404 and change nothing', async () => {
    const token = await login(t, 'alice', 'alice-pw-1', api);
    expectError(
      await call(t, 'PATCH', `${base}/${bob.authenticatorId}`, { token, body: { password: 'hijacked-1', currentPassword: 'bob-pw-1' } }),
      404,
      'NOT_FOUND',
    );
    expectError(
      await call(t, 'PUT', `${base}/${bob.authenticatorId}`, {
        token,
        body: { username: 'bobby', password: 'hijacked-1', currentPassword: 'bob-pw-1' },
      }),
      404,
      'NOT_FOUND',
    );
    expectError(
      await call(t, 'PATCH', `${base}/no-such-authenticator`, { token, body: { password: 'hijacked-1', currentPassword: 'alice-pw-1' } }),
      404,
      'NOT_FOUND',
    );
    expect(await login(t, 'bobby', 'bob-pw-1')).toBeTruthy();
  });

  it('patch needs currentPassword: missing → 400, wrong → 401 INVALID_AUTH', async () => {
    const token = await login(t, 'alice', 'alice-pw-1', api);
    const url = `${base}/${alice.authenticatorId}`;
    expectError(await call(t, 'PATCH', url, { token, body: { password: 'alice-new-1' } }), 400, 'COULD_NOT_VALIDATE', 'currentPassword');
    expectError(await call(t, 'PUT', url, { token, body: { username: 'alice', password: 'alice-new-1' } }), 400, 'COULD_NOT_VALIDATE', 'currentPassword');
    expectError(await call(t, 'PATCH', url, { token, body: { password: 'alice-new-1', currentPassword: 'abc' } }), 400, 'COULD_NOT_VALIDATE', 'currentPassword');
    expectError(
      await call(t, 'PATCH', url, { token, body: { password: 'alice-new-1', currentPassword: 'wrong-password' } }),
      401,
      'INVALID_AUTH',
    );
    expectError(
      await call(t, 'PUT', url, { token, body: { username: 'alice', password: 'alice-new-1', currentPassword: 'wrong-password' } }),
      401,
      'INVALID_AUTH',
    );
    // Nothing changed.
    expect(await login(t, 'alice', 'alice-pw-1')).toBeTruthy();
  });

  it('patch and full update validate their bodies', async () => {
    const token = await login(t, 'alice', 'alice-pw-1', api);
    const url = `${base}/${alice.authenticatorId}`;
    expectError(await call(t, 'PATCH', url, { token, body: { password: 'abcd', currentPassword: 'alice-pw-1' } }), 400, 'COULD_NOT_VALIDATE', 'password');
    expectError(await call(t, 'PATCH', url, { token, body: { username: 'ab', currentPassword: 'alice-pw-1' } }), 400, 'COULD_NOT_VALIDATE', 'username');
    expectError(await call(t, 'PUT', url, { token, body: { password: 'alice-new-1', currentPassword: 'alice-pw-1' } }), 400, 'COULD_NOT_VALIDATE', 'username');
    expectError(await call(t, 'PUT', url, { token, body: { username: 'alice', currentPassword: 'alice-pw-1' } }), 400, 'COULD_NOT_VALIDATE', 'password');
  });
});

describe('changing the own password', () => {
  it('patch: the new password logs in, the old one no longer does', async () => {
    const carol = await createIdentityWithPassword(t, admin, { name: 'carol', username: 'carol', password: 'carol-old-1' });
    const token = await login(t, 'carol', 'carol-old-1', CLIENT);
    const res = await call(t, 'PATCH', `${CLIENT}/current-identity/authenticators/${carol.authenticatorId}`, {
      token,
      body: { password: 'carol-new-1', currentPassword: 'carol-old-1' },
    });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    expect(await login(t, 'carol', 'carol-new-1')).toBeTruthy();
    expectError(await authenticate(t, 'carol', 'carol-old-1', { remoteAddress: '10.5.0.1' }), 401, 'INVALID_AUTH');
    // The session used for the change is still valid.
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token })).statusCode).toBe(200);
    // The old password is no longer the current one either.
    expectError(
      await call(t, 'PATCH', `${CLIENT}/current-identity/authenticators/${carol.authenticatorId}`, {
        token,
        body: { password: 'carol-newer-1', currentPassword: 'carol-old-1' },
      }),
      401,
      'INVALID_AUTH',
    );
  });

  it('full update: username and password change together', async () => {
    const dave = await createIdentityWithPassword(t, admin, { name: 'dave', username: 'dave', password: 'dave-old-1' });
    const token = await login(t, 'dave', 'dave-old-1', MGMT);
    const res = await call(t, 'PUT', `${MGMT}/current-identity/authenticators/${dave.authenticatorId}`, {
      token,
      body: { username: 'dave-2', password: 'dave-new-1', currentPassword: 'dave-old-1' },
    });
    expect(res.statusCode).toBe(200);
    expect(await login(t, 'dave-2', 'dave-new-1')).toBeTruthy();
    expectError(await authenticate(t, 'dave', 'dave-old-1', { remoteAddress: '10.5.0.2' }), 401, 'INVALID_AUTH');
    expectError(await authenticate(t, 'dave-2', 'dave-old-1', { remoteAddress: '10.5.0.2' }), 401, 'INVALID_AUTH');
  });

  it('cannot move the authenticator to another identity or set its hash', async () => {
    const erin = await createIdentityWithPassword(t, admin, { name: 'erin', username: 'erin', password: 'erin-pw-1' });
    const token = await login(t, 'erin', 'erin-pw-1', CLIENT);
    const res = await call(t, 'PATCH', `${CLIENT}/current-identity/authenticators/${erin.authenticatorId}`, {
      token,
      body: { identityId: bob.id, passwordHash: 'x', method: 'cert', currentPassword: 'erin-pw-1' },
    });
    expect([200, 400]).toContain(res.statusCode);
    const a = json(await call(t, 'GET', `${MGMT}/authenticators/${erin.authenticatorId}`, { token: await asAdmin(t) })).data;
    expect(a).toMatchObject({ identityId: erin.id, method: 'updb' });
    expect(await login(t, 'erin', 'erin-pw-1')).toBeTruthy();
  });
});
