// Identity permissions on the Management API: a non-admin identity may do what its permissions
// grant (admin_readonly: every read; <group>: every action of the group; <group>.<action>: one
// action; API sessions and sessions: the group ops; authenticators: admins only, reads also via
// admin_readonly), nothing else; and whatever it holds, it never reaches an admin: not its account
// or credentials, not the auth policy it logs in under, not a revocation of it or of its API
// sessions, not an external JWT signer or a third-party CA it logs in with.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  authenticatorApp,
  authPolicyBody,
  call,
  CLIENT,
  createIdentity,
  createIdentityWithPassword,
  json,
  login,
  MGMT,
  selfSignedCertificate,
  startTestController,
  testCa,
  testCertificate,
  overTls,
  testClock,
  type TestController,
  type TestIssuer,
} from './helpers.js';
import { bearer, decodeJwt, oidcLogin } from './oidc-helpers.js';
import { createPrivateKey } from 'node:crypto';
import { SignJWT } from 'jose';

type Op =
  | 'listIdentities'
  | 'createIdentity'
  | 'patchIdentity'
  | 'deleteIdentity'
  | 'listAuthPolicies'
  | 'createAuthPolicy'
  | 'listApiSessions'
  | 'listIdentityTypes';

const OPS: readonly Op[] = [
  'listIdentities',
  'createIdentity',
  'patchIdentity',
  'deleteIdentity',
  'listAuthPolicies',
  'createAuthPolicy',
  'listApiSessions',
  'listIdentityTypes',
];

const READS: readonly Op[] = ['listIdentities', 'listAuthPolicies', 'listApiSessions', 'listIdentityTypes'];
const IDENTITY_READS: readonly Op[] = ['listIdentities', 'listIdentityTypes'];

/** What each permission set may do; everything else is 401. */
const MATRIX: [string, string[], readonly Op[]][] = [
  ['none', [], []],
  ['admin_readonly', ['admin_readonly'], READS],
  ['identity', ['identity'], [...IDENTITY_READS, 'createIdentity', 'patchIdentity', 'deleteIdentity']],
  ['identity.read', ['identity.read'], IDENTITY_READS],
  ['identity.create', ['identity.create'], ['createIdentity']],
  ['identity.update', ['identity.update'], ['patchIdentity']],
  ['identity.delete', ['identity.delete'], ['deleteIdentity']],
  ['auth-policy.read', ['auth-policy.read'], ['listAuthPolicies']],
  ['ops', ['ops'], ['listApiSessions']],
  ['ops.read', ['ops.read'], ['listApiSessions']],
];

const SUCCESS: Record<Op, number> = {
  listIdentities: 200,
  createIdentity: 201,
  patchIdentity: 200,
  deleteIdentity: 200,
  listAuthPolicies: 200,
  createAuthPolicy: 201,
  listApiSessions: 200,
  listIdentityTypes: 200,
};

const POLICY_BODY = {
  primary: {
    cert: { allowed: true, allowExpiredCerts: true },
    extJwt: { allowed: true, allowedSigners: null },
    updb: {
      allowed: true,
      maxAttempts: 0,
      lockoutDurationMinutes: 0,
      minPasswordLength: 5,
      requireMixedCase: false,
      requireNumberChar: false,
      requireSpecialChar: false,
    },
  },
  secondary: { requireTotp: false, requireExtJwtSigner: null },
};

let t: TestController;
let admin: string;
let counter = 0;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

async function attempt(op: Op, token: string) {
  const n = ++counter;
  switch (op) {
    case 'listIdentities':
      return call(t, 'GET', `${MGMT}/identities`, { token });
    case 'createIdentity':
      return call(t, 'POST', `${MGMT}/identities`, { token, body: { name: `created-${n}`, type: 'User', isAdmin: false } });
    case 'patchIdentity': {
      const victim = await createIdentity(t, admin, { name: `patch-victim-${n}` });
      return call(t, 'PATCH', `${MGMT}/identities/${victim}`, { token, body: { roleAttributes: ['patched'] } });
    }
    case 'deleteIdentity': {
      const victim = await createIdentity(t, admin, { name: `delete-victim-${n}` });
      return call(t, 'DELETE', `${MGMT}/identities/${victim}`, { token });
    }
    case 'listAuthPolicies':
      return call(t, 'GET', `${MGMT}/auth-policies`, { token });
    case 'createAuthPolicy':
      return call(t, 'POST', `${MGMT}/auth-policies`, { token, body: { name: `policy-${n}`, ...POLICY_BODY } });
    case 'listApiSessions':
      return call(t, 'GET', `${MGMT}/api-sessions`, { token });
    case 'listIdentityTypes':
      return call(t, 'GET', `${MGMT}/identity-types`, { token });
  }
}

describe.each(MATRIX)('a non-admin identity with permissions %s', (label, permissions, allowed) => {
  let token: string;
  beforeAll(async () => {
    const name = `perm-${label.replace(/[^a-z_-]/gi, '-')}`;
    await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw`, permissions });
    token = await login(t, name, `${name}-pw`);
  });

  it.each(OPS.map((op) => [op, allowed.includes(op)] as const))('%s → allowed: %s', async (op, isAllowed) => {
    const res = await attempt(op, token);
    if (isAllowed) {
      expect(res.statusCode, res.body).toBe(SUCCESS[op]);
    } else {
      expect(res.statusCode, res.body).toBe(401);
      expect(json(res).error.code).toBe('UNAUTHORIZED');
    }
  });
});

describe('what the permissions grant', () => {
  it('a read permission shows the same data an admin sees', async () => {
    await createIdentityWithPassword(t, admin, { name: 'reader', username: 'reader', password: 'reader-pw', permissions: ['admin_readonly'] });
    const token = await login(t, 'reader', 'reader-pw');
    for (const path of ['/identities?limit=500', '/auth-policies', '/identity-types']) {
      const mine = json(await call(t, 'GET', `${MGMT}${path}`, { token }));
      const theirs = json(await call(t, 'GET', `${MGMT}${path}`, { token: admin }));
      expect(mine.meta.pagination.totalCount).toBe(theirs.meta.pagination.totalCount);
    }
  });

  it('a denied write changes nothing', async () => {
    await createIdentityWithPassword(t, admin, { name: 'read-only', username: 'read-only', password: 'read-only-pw', permissions: ['identity.read'] });
    const token = await login(t, 'read-only', 'read-only-pw');
    const victim = await createIdentity(t, admin, { name: 'untouched', roleAttributes: ['orig'] });
    expect((await call(t, 'PATCH', `${MGMT}/identities/${victim}`, { token, body: { roleAttributes: ['changed'] } })).statusCode).toBe(401);
    expect((await call(t, 'DELETE', `${MGMT}/identities/${victim}`, { token })).statusCode).toBe(401);
    const e = json(await call(t, 'GET', `${MGMT}/identities/${victim}`, { token: admin })).data;
    expect(e.roleAttributes).toEqual(['orig']);
  });
});

describe('permission changes', () => {
  it('take effect on the next request of an existing session', async () => {
    const { id } = await createIdentityWithPassword(t, admin, { name: 'promoted', username: 'promoted', password: 'promoted-pw' });
    const token = await login(t, 'promoted', 'promoted-pw');
    expect((await call(t, 'GET', `${MGMT}/identities`, { token })).statusCode).toBe(401);

    await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { permissions: ['identity.read'] } });
    expect((await call(t, 'GET', `${MGMT}/identities`, { token })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${MGMT}/auth-policies`, { token })).statusCode).toBe(401);

    await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { permissions: [] } });
    expect((await call(t, 'GET', `${MGMT}/identities`, { token })).statusCode).toBe(401);

    await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { isAdmin: true } });
    expect((await call(t, 'GET', `${MGMT}/api-sessions`, { token })).statusCode).toBe(200);
    await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { isAdmin: false } });
    expect((await call(t, 'GET', `${MGMT}/api-sessions`, { token })).statusCode).toBe(401);

    // A full update that leaves permissions out clears them.
    await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { permissions: ['admin_readonly'] } });
    expect((await call(t, 'GET', `${MGMT}/api-sessions`, { token })).statusCode).toBe(200);
    await call(t, 'PUT', `${MGMT}/identities/${id}`, { token: admin, body: { name: 'promoted', type: 'User', isAdmin: false } });
    expect((await call(t, 'GET', `${MGMT}/api-sessions`, { token })).statusCode).toBe(401);
  });
});

describe('a permission holder cannot raise anyone, itself included', () => {
  let token: string;
  let self: string;
  beforeAll(async () => {
    const created = await createIdentityWithPassword(t, admin, {
      name: 'manager',
      username: 'manager',
      password: 'manager-pw',
      permissions: ['identity', 'auth-policy.read'],
    });
    self = created.id;
    token = await login(t, 'manager', 'manager-pw');
  });

  it('may not create an admin or an identity with permissions', async () => {
    for (const body of [
      { name: 'new-admin', type: 'User', isAdmin: true },
      { name: 'new-holder', type: 'User', isAdmin: false, permissions: ['identity.read'] },
    ]) {
      const res = await call(t, 'POST', `${MGMT}/identities`, { token, body });
      expect(res.statusCode, res.body).toBe(401);
      expect(json(res).error.code).toBe('UNAUTHORIZED');
    }
    const names = json(await call(t, 'GET', `${MGMT}/identities?limit=500`, { token: admin })).data.map((i: { name: string }) => i.name);
    expect(names).not.toContain('new-admin');
    expect(names).not.toContain('new-holder');
  });

  it('may not make itself or another identity an admin, nor grant permissions', async () => {
    const other = await createIdentity(t, admin, { name: 'plain-one' });
    for (const [id, body] of [
      [self, { isAdmin: true }],
      [self, { permissions: ['identity', 'auth-policy.read', 'admin_readonly'] }],
      [other, { isAdmin: true }],
      [other, { permissions: ['auth-policy'] }],
    ] as const) {
      const res = await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token, body });
      expect(res.statusCode, res.body).toBe(401);
      expect(json(res).error.code).toBe('UNAUTHORIZED');
    }
    const put = await call(t, 'PUT', `${MGMT}/identities/${self}`, {
      token,
      body: { name: 'manager', type: 'User', isAdmin: true, permissions: ['identity', 'auth-policy.read'] },
    });
    expect(put.statusCode).toBe(401);
    const me = json(await call(t, 'GET', `${MGMT}/identities/${self}`, { token: admin })).data;
    expect(me).toMatchObject({ isAdmin: false, permissions: ['identity', 'auth-policy.read'] });
    expect((await call(t, 'GET', `${MGMT}/api-sessions`, { token })).statusCode).toBe(401);
  });

  it("may not touch an admin, its credentials or its state", async () => {
    const adminId = json(await call(t, 'GET', `${MGMT}/current-identity`, { token: admin })).data.id as string;
    const adminAuth = json(await call(t, 'GET', `${MGMT}/identities/${adminId}/authenticators`, { token: admin })).data[0].id as string;
    for (const [method, url, body] of [
      ['PATCH', `${MGMT}/authenticators/${adminAuth}`, { password: 'taken-over-1' }],
      ['DELETE', `${MGMT}/authenticators/${adminAuth}`, undefined],
      ['POST', `${MGMT}/authenticators`, { method: 'updb', identityId: adminId, username: 'backdoor', password: 'backdoor-1' }],
      ['PATCH', `${MGMT}/identities/${adminId}`, { authPolicyId: 'default', roleAttributes: ['x'] }],
      ['POST', `${MGMT}/identities/${adminId}/disable`, { durationMinutes: 0 }],
      ['DELETE', `${MGMT}/identities/${adminId}`, undefined],
    ] as const) {
      const res = await call(t, method, url, { token, ...(body ? { body } : {}) });
      expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(401);
      expect(json(res).error.code).toBe('UNAUTHORIZED');
    }
    // The admin's password still works and nothing was added.
    expect(await login(t, 'admin', 'admin-password-1')).toEqual(expect.any(String));
    const auths = json(await call(t, 'GET', `${MGMT}/identities/${adminId}/authenticators`, { token: admin })).data;
    expect(auths).toHaveLength(1);
  });

  it("may still change other fields and drop its own permissions, not another's", async () => {
    const other = await createIdentity(t, admin, { name: 'plain-two' });
    expect((await call(t, 'PATCH', `${MGMT}/identities/${other}`, { token, body: { roleAttributes: ['x'] } })).statusCode).toBe(200);
    // It was allowed: a holder of identity took another holder's permissions away, by PATCH or by a
    // PUT that leaves them out.
    const holder = await createIdentity(t, admin, { name: 'holder-two', permissions: ['identity.read', 'ops'] });
    for (const [method, body] of [
      ['PATCH', { permissions: ['ops'] }],
      ['PATCH', { permissions: [] }],
      ['PUT', { name: 'holder-two', type: 'User', isAdmin: false }],
    ] as const) {
      const res = await call(t, method, `${MGMT}/identities/${holder}`, { token, body });
      expect(res.statusCode, `${method} ${res.body}`).toBe(401);
      expect(json(res).error).toMatchObject({ code: 'UNAUTHORIZED', cause: { field: 'permissions' } });
    }
    expect(json(await call(t, 'GET', `${MGMT}/identities/${holder}`, { token: admin })).data.permissions).toEqual(['identity.read', 'ops']);
    expect((await call(t, 'PATCH', `${MGMT}/identities/${holder}`, { token, body: { roleAttributes: ['y'] } })).statusCode).toBe(200);
    const dropped = await call(t, 'PATCH', `${MGMT}/identities/${self}`, { token, body: { permissions: ['identity'] } });
    expect(dropped.statusCode, dropped.body).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/identities/${self}`, { token: admin })).data.permissions).toEqual(['identity']);
  });
});

describe('a delegate cannot lock an admin out', () => {
  let policy: string;
  let spare: string;
  let secondAdmin: string;
  beforeAll(async () => {
    const created = (name: string) => call(t, 'POST', `${MGMT}/auth-policies`, { token: admin, body: { name, ...POLICY_BODY } });
    policy = json(await created('admins-policy')).data.id as string;
    spare = json(await created('plain-policy')).data.id as string;
    secondAdmin = (
      await createIdentityWithPassword(t, admin, {
        name: 'second-admin',
        username: 'second-admin',
        password: 'second-admin-pw',
        isAdmin: true,
        authPolicyId: policy,
      })
    ).id;
    await createIdentity(t, admin, { name: 'plain-on-spare', authPolicyId: spare });
  });

  it('with auth-policy: may not change or delete the policy an admin logs in under', async () => {
    await createIdentityWithPassword(t, admin, { name: 'policy-editor', username: 'policy-editor', password: 'policy-editor-pw', permissions: ['auth-policy'] });
    const token = await login(t, 'policy-editor', 'policy-editor-pw');
    const locked = { ...POLICY_BODY, primary: { ...POLICY_BODY.primary, updb: { ...POLICY_BODY.primary.updb, allowed: false } } };
    for (const [method, body] of [
      ['PATCH', { primary: { updb: { allowed: false } } }],
      ['PUT', { name: 'admins-policy', ...locked }],
      ['DELETE', undefined],
    ] as const) {
      const res = await call(t, method, `${MGMT}/auth-policies/${policy}`, { token, ...(body ? { body } : {}) });
      expect(res.statusCode, `${method}: ${res.body}`).toBe(401);
      expect(json(res).error).toMatchObject({ code: 'UNAUTHORIZED', message: 'only an admin may change the auth policy of an admin or an identity holding permissions' });
    }
    // Nothing changed: the admin still logs in with its password.
    expect(json(await call(t, 'GET', `${MGMT}/auth-policies/${policy}`, { token: admin })).data.primary.updb.allowed).toBe(true);
    expect(await login(t, 'second-admin', 'second-admin-pw')).toEqual(expect.any(String));
    // A policy no admin uses stays the delegate's to change.
    const res = await call(t, 'PATCH', `${MGMT}/auth-policies/${spare}`, { token, body: { primary: { updb: { maxAttempts: 3 } } } });
    expect(res.statusCode, res.body).toBe(200);
  });

  it("with auth-policy or identity: may not change how another permission holder logs in (its policy, its externalId)", async () => {
    const holderPolicy = json(await call(t, 'POST', `${MGMT}/auth-policies`, { token: admin, body: { name: 'holders-policy', ...POLICY_BODY } })).data.id as string;
    const holder = await createIdentity(t, admin, { name: 'policy-holder', permissions: ['ca'], authPolicyId: holderPolicy });
    await createIdentityWithPassword(t, admin, { name: 'login-changer', username: 'login-changer', password: 'login-changer-pw', permissions: ['auth-policy', 'identity'] });
    const token = await login(t, 'login-changer', 'login-changer-pw');
    const policyEdit = await call(t, 'PATCH', `${MGMT}/auth-policies/${holderPolicy}`, { token, body: { primary: { updb: { maxAttempts: 3 } } } });
    expect(policyEdit.statusCode, policyEdit.body).toBe(401);
    for (const body of [{ authPolicyId: spare }, { externalId: 'signed-by-me' }]) {
      const res = await call(t, 'PATCH', `${MGMT}/identities/${holder}`, { token, body });
      expect(res.statusCode, res.body).toBe(401);
      expect(json(res).error).toMatchObject({ code: 'UNAUTHORIZED', message: 'only an admin may change how an identity holding permissions logs in', cause: { field: Object.keys(body)[0] } });
    }
    expect(json(await call(t, 'GET', `${MGMT}/identities/${holder}`, { token: admin })).data).toMatchObject({ authPolicyId: holderPolicy, externalId: null });
    // A plain identity's are the delegate's to change, and so are its own.
    const plain = await createIdentity(t, admin, { name: 'plain-login', authPolicyId: holderPolicy });
    expect((await call(t, 'PATCH', `${MGMT}/identities/${plain}`, { token, body: { authPolicyId: spare, externalId: 'plain-ext' } })).statusCode).toBe(200);
    const self = json(await call(t, 'GET', `${MGMT}/current-identity`, { token })).data.id as string;
    expect((await call(t, 'PATCH', `${MGMT}/identities/${self}`, { token, body: { externalId: 'my-own' } })).statusCode).toBe(200);
  });

  it('an admin may still change the policy an admin logs in under', async () => {
    const res = await call(t, 'PATCH', `${MGMT}/auth-policies/${policy}`, { token: admin, body: { primary: { updb: { maxAttempts: 50 } } } });
    expect(res.statusCode, res.body).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/auth-policies/${policy}`, { token: admin })).data.primary.updb.maxAttempts).toBe(50);
  });

  it('with ops: may not revoke an admin or an API session of an admin', async () => {
    await createIdentityWithPassword(t, admin, { name: 'operator', username: 'operator', password: 'operator-pw', permissions: ['ops'] });
    const token = await login(t, 'operator', 'operator-pw');
    const defaultAdmin = json(await call(t, 'GET', `${MGMT}/current-identity`, { token: admin })).data.id as string;
    const tokens = await oidcLogin(t, 'admin', 'admin-password-1');
    const apiSession = decodeJwt(tokens.access_token).payload.ov_asid as string;
    const legacy = json(await call(t, 'GET', `${MGMT}/current-api-session`, { token: admin })).data.id as string;
    // An admin revoked the second admin once; renewing it is the same act.
    expect((await call(t, 'POST', `${MGMT}/revocations`, { token: admin, body: { type: 'IDENTITY', id: secondAdmin } })).statusCode).toBe(201);
    for (const body of [
      { type: 'IDENTITY', id: defaultAdmin },
      { type: 'API_SESSION', id: apiSession },
      { type: 'API_SESSION', id: legacy },
      { type: 'IDENTITY', id: secondAdmin },
    ]) {
      const res = await call(t, 'POST', `${MGMT}/revocations`, { token, body });
      expect(res.statusCode, `${JSON.stringify(body)}: ${res.body}`).toBe(401);
      expect(json(res).error).toMatchObject({ code: 'UNAUTHORIZED', message: 'only an admin may revoke an admin or its API sessions' });
    }
    for (const id of [defaultAdmin, apiSession, legacy]) {
      expect((await call(t, 'GET', `${MGMT}/revocations/${id}`, { token: admin })).statusCode).toBe(404);
    }
    // The admin's access token still works.
    expect((await call(t, 'GET', `${MGMT}/current-identity`, { headers: bearer(tokens.access_token) })).statusCode).toBe(200);
    // Anyone else stays the operator's to revoke; an admin may revoke an admin.
    const plain = await createIdentity(t, admin, { name: 'revocable' });
    expect((await call(t, 'POST', `${MGMT}/revocations`, { token, body: { type: 'IDENTITY', id: plain } })).statusCode).toBe(201);
    expect((await call(t, 'POST', `${MGMT}/revocations`, { token: admin, body: { type: 'API_SESSION', id: apiSession } })).statusCode).toBe(201);
    expect((await call(t, 'GET', `${MGMT}/current-identity`, { headers: bearer(tokens.access_token) })).statusCode).toBe(401);
  });

  it("with ops: reads API sessions and sessions, and ends anyone's API session but an admin's", async () => {
    await createIdentityWithPassword(t, admin, { name: 'session-operator', username: 'session-operator', password: 'session-operator-pw', permissions: ['ops'] });
    const token = await login(t, 'session-operator', 'session-operator-pw');
    for (const path of ['api-sessions', 'sessions']) expect((await call(t, 'GET', `${MGMT}/${path}`, { token })).statusCode, path).toBe(200);
    const adminSession = json(await call(t, 'GET', `${MGMT}/current-api-session`, { token: admin })).data.id as string;
    const refused = await call(t, 'DELETE', `${MGMT}/api-sessions/${adminSession}`, { token });
    expect(refused.statusCode, refused.body).toBe(401);
    expect(json(refused).error).toMatchObject({ code: 'UNAUTHORIZED', message: 'only an admin may end an API session of an admin' });
    expect((await call(t, 'GET', `${MGMT}/current-identity`, { token: admin })).statusCode).toBe(200);
    await createIdentityWithPassword(t, admin, { name: 'ended-user', username: 'ended-user', password: 'ended-user-pw' });
    const userToken = await login(t, 'ended-user', 'ended-user-pw');
    const userSession = json(await call(t, 'GET', `${MGMT}/current-api-session`, { token: userToken })).data.id as string;
    expect((await call(t, 'DELETE', `${MGMT}/api-sessions/${userSession}`, { token })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${MGMT}/current-api-session`, { token: userToken })).statusCode).toBe(401);
  });
});

describe('authenticators are for admins only', () => {
  // An attack that worked: a holder of `identity` set a user's password and logged in as the user.
  it('a holder of identity can neither read nor write them, so it cannot take over an account', async () => {
    await createIdentityWithPassword(t, admin, { name: 'identity-holder', username: 'identity-holder', password: 'identity-holder-pw', permissions: ['identity'] });
    const token = await login(t, 'identity-holder', 'identity-holder-pw');
    const alice = await createIdentityWithPassword(t, admin, { name: 'alice-taken', username: 'alice-taken', password: 'alice-taken-pw' });
    const authenticator = json(await call(t, 'GET', `${MGMT}/authenticators?filter=${encodeURIComponent(`identityId = "${alice.id}"`)}`, { token: admin })).data[0].id as string;
    for (const [method, path, body] of [
      ['GET', 'authenticators', undefined],
      ['GET', `authenticators/${authenticator}`, undefined],
      ['GET', `identities/${alice.id}/authenticators`, undefined],
      ['PATCH', `authenticators/${authenticator}`, { password: 'hijacked-pw1' }],
      ['PUT', `authenticators/${authenticator}`, { username: 'alice-taken', password: 'hijacked-pw1' }],
      ['POST', 'authenticators', { method: 'updb', identityId: alice.id, username: 'alice-backdoor', password: 'hijacked-pw1' }],
      ['DELETE', `authenticators/${authenticator}`, undefined],
    ] as const) {
      const res = await call(t, method, `${MGMT}/${path}`, { token, ...(body ? { body } : {}) });
      expect(res.statusCode, `${method} ${path}: ${res.body}`).toBe(401);
      expect(json(res).error.code).toBe('UNAUTHORIZED');
    }
    expect(await login(t, 'alice-taken', 'alice-taken-pw')).toEqual(expect.any(String));
    // admin_readonly reads them.
    await createIdentityWithPassword(t, admin, { name: 'auth-reader', username: 'auth-reader', password: 'auth-reader-pw', permissions: ['admin_readonly'] });
    const reader = await login(t, 'auth-reader', 'auth-reader-pw');
    expect((await call(t, 'GET', `${MGMT}/authenticators/${authenticator}`, { token: reader })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${MGMT}/identities/${alice.id}/authenticators`, { token: reader })).statusCode).toBe(200);
  });
});

describe('enrollment secrets and credentials of privileged identities', () => {
  /** A non-admin caller holding `permissions`, logged in. */
  async function holder(name: string, permissions: string[]): Promise<string> {
    await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw1`, permissions });
    return login(t, name, `${name}-pw1`);
  }
  const enrollmentsOf = async (token: string, identityId: string) =>
    json(await call(t, 'GET', `${MGMT}/enrollments?filter=${encodeURIComponent(`identityId = "${identityId}"`)}`, { token })).data as Record<string, unknown>[];

  it('a read-only caller sees pending enrollments without their token and JWT, which enroll a credential (an admin once took over so)', async () => {
    const newAdmin = json(
      await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: 'pending-admin', type: 'User', isAdmin: true, enrollment: { ott: true } } }),
    ).data.id as string;
    const plain = json(await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: 'pending-plain', type: 'User', isAdmin: false, enrollment: { ott: true } } }))
      .data.id as string;
    for (const permissions of [['admin_readonly'], ['enrollment.read', 'identity.read']]) {
      const token = await holder(`reader-${permissions.join('-')}`, permissions);
      for (const target of [newAdmin, plain]) {
        const [enrollment] = await enrollmentsOf(token, target);
        expect(enrollment).toMatchObject({ method: 'ott', token: null, jwt: null });
        const identity = json(await call(t, 'GET', `${MGMT}/identities/${target}`, { token })).data;
        expect(identity.enrollment.ott).toMatchObject({ token: null, jwt: null, expiresAt: expect.any(String) });
      }
    }
    // An admin sees them.
    const [seen] = await enrollmentsOf(admin, newAdmin);
    expect(seen).toMatchObject({ token: expect.any(String), jwt: expect.any(String) });
  });

  it('an enrollment writer sees the secrets of plain identities only, and cannot enroll or reset an identity that holds permissions', async () => {
    const token = await holder('enroller', ['enrollment', 'identity']);
    const plain = await createIdentity(t, admin, { name: 'enrollable' });
    const strong = await createIdentity(t, admin, { name: 'strong', permissions: ['ca', 'identity'] });
    const expiresAt = new Date(t.clock() + 3_600_000).toISOString();
    expect((await call(t, 'POST', `${MGMT}/enrollments`, { token, body: { method: 'ott', identityId: plain, expiresAt } })).statusCode).toBe(201);
    const [mine] = await enrollmentsOf(token, plain);
    expect(mine).toMatchObject({ token: expect.any(String), jwt: expect.any(String) });

    const refused = await call(t, 'POST', `${MGMT}/enrollments`, { token, body: { method: 'ott', identityId: strong, expiresAt } });
    expect(refused.statusCode, refused.body).toBe(401);
    expect(json(refused).error.code).toBe('UNAUTHORIZED');
    expect(await enrollmentsOf(admin, strong)).toEqual([]);
    const password = await call(t, 'POST', `${MGMT}/authenticators`, { token, body: { method: 'updb', identityId: strong, username: 'strong-backdoor', password: 'backdoor-1' } });
    expect(password.statusCode, password.body).toBe(401);
    // An enrollment an admin made for it is not shown with its secrets either.
    expect((await call(t, 'POST', `${MGMT}/enrollments`, { token: admin, body: { method: 'ott', identityId: strong, expiresAt } })).statusCode).toBe(201);
    expect((await enrollmentsOf(token, strong))[0]).toMatchObject({ token: null, jwt: null });
  });

  it('a router reader sees an edge router without its enrollment token; a router writer and an admin see it', async () => {
    const router = json(await call(t, 'POST', `${MGMT}/edge-routers`, { token: admin, body: { name: 'secret-router' } })).data.id as string;
    const read = async (token: string) => json(await call(t, 'GET', `${MGMT}/edge-routers/${router}`, { token })).data;
    for (const permissions of [['admin_readonly'], ['router.read']]) {
      expect(await read(await holder(`router-reader-${permissions[0]}`, permissions))).toMatchObject({ enrollmentToken: null, enrollmentJwt: null });
    }
    expect(await read(await holder('router-writer', ['router']))).toMatchObject({ enrollmentToken: expect.any(String), enrollmentJwt: expect.any(String) });
    expect(await read(admin)).toMatchObject({ enrollmentToken: expect.any(String) });
  });

  it('an identity that holds permissions still changes its own password', async () => {
    const token = await holder('self-changer', ['identity.read']);
    const mine = json(await call(t, 'GET', `${MGMT}/current-identity/authenticators`, { token })).data[0].id as string;
    const res = await call(t, 'PATCH', `${MGMT}/current-identity/authenticators/${mine}`, { token, body: { currentPassword: 'self-changer-pw1', password: 'self-changer-pw2' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(await login(t, 'self-changer', 'self-changer-pw2')).toEqual(expect.any(String));
  });
});

describe('external JWT signers admins log in with', () => {
  // An attack that worked: a holder of external-jwt-signer wrote a signer of its own key, which the
  // default policy takes, and signed a token naming the default admin.
  let own: TestController;
  let ownAdmin: string;
  const signerBody = async (name: string) => ({
    name,
    issuer: `https://${name}.example.com`,
    audience: 'overlay',
    enabled: true,
    certPem: (await selfSignedCertificate(name)).certPem,
  });
  beforeAll(async () => {
    own = await startTestController({ env: ADMIN_ENV });
    ownAdmin = await asAdmin(own);
  });
  afterAll(async () => {
    await own.close();
  });

  it('a delegate may not write or delete one that an admin or a permission holder logs in with, and may write the others', async () => {
    await createIdentityWithPassword(own, ownAdmin, { name: 'signer-op', username: 'signer-op', password: 'signer-op-pw', permissions: ['external-jwt-signer'] });
    const token = await login(own, 'signer-op', 'signer-op-pw');
    const expectRefused = (res: Awaited<ReturnType<typeof call>>, what: string) => {
      expect(res.statusCode, `${what}: ${res.body}`).toBe(401);
      expect(json(res).error.code).toBe('UNAUTHORIZED');
      expect(json(res).error.message).toMatch(/^only an admin may write an external JWT signer that an admin or an identity holding permissions logs in with/);
    };
    // The default admin logs in under the default policy, which takes any signer's tokens.
    expectRefused(await call(own, 'POST', `${MGMT}/external-jwt-signers`, { token, body: await signerBody('evil-idp') }), 'create');
    expect(json(await call(own, 'GET', `${MGMT}/external-jwt-signers`, { token: ownAdmin })).data).toEqual([]);

    // Once no privileged identity takes external JWTs, the delegate writes signers.
    const noJwt = json(await call(own, 'POST', `${MGMT}/auth-policies`, { token: ownAdmin, body: authPolicyBody('passwords-only', { primary: { updb: { allowed: true } } }) }))
      .data.id as string;
    const me = json(await call(own, 'GET', `${MGMT}/current-identity`, { token: ownAdmin })).data.id as string;
    const signerOp = json(await call(own, 'GET', `${MGMT}/current-identity`, { token })).data.id as string;
    for (const id of [me, signerOp]) expect((await call(own, 'PATCH', `${MGMT}/identities/${id}`, { token: ownAdmin, body: { authPolicyId: noJwt } })).statusCode).toBe(200);
    const created = await call(own, 'POST', `${MGMT}/external-jwt-signers`, { token, body: await signerBody('team-idp') });
    expect(created.statusCode, created.body).toBe(201);
    const signer = json(created).data.id as string;
    expect((await call(own, 'PATCH', `${MGMT}/external-jwt-signers/${signer}`, { token, body: { audience: 'team' } })).statusCode).toBe(200);

    // An identity holding permissions comes to log in with it: the delegate may no longer touch it.
    const byName = json(
      await call(own, 'POST', `${MGMT}/auth-policies`, { token: ownAdmin, body: authPolicyBody('team-idp-only', { primary: { extJwt: { allowed: true, allowedSigners: [signer] } } }) }),
    ).data.id as string;
    await createIdentity(own, ownAdmin, { name: 'ca-keeper', permissions: ['ca'], authPolicyId: byName });
    expectRefused(await call(own, 'PATCH', `${MGMT}/external-jwt-signers/${signer}`, { token, body: { audience: 'mine' } }), 'patch');
    expectRefused(await call(own, 'DELETE', `${MGMT}/external-jwt-signers/${signer}`, { token }), 'delete');
    expect(json(await call(own, 'GET', `${MGMT}/external-jwt-signers/${signer}`, { token: ownAdmin })).data.audience).toBe('team');
    // The admin still may.
    expect((await call(own, 'PATCH', `${MGMT}/external-jwt-signers/${signer}`, { token: ownAdmin, body: { audience: 'admins' } })).statusCode).toBe(200);
  });
});

describe('third-party CAs admins log in with', () => {
  // An attack that worked: a holder of ca registered and verified a CA of its own key with an external
  // id claim, and logged in as the default admin with a certificate naming the admin's externalId.
  let own: TestController;
  let ownAdmin: string;
  const claim = { location: 'SAN_EMAIL', index: 0, matcher: 'ALL', matcherCriteria: '', parser: 'NONE', parserCriteria: '' };
  const caBody = (name: string, issuer: TestIssuer, extra: Record<string, unknown> = {}) => ({
    name,
    certPem: issuer.certPem,
    isAuthEnabled: true,
    isAutoCaEnrollmentEnabled: false,
    isOttCaEnrollmentEnabled: false,
    identityRoles: [],
    ...extra,
  });
  beforeAll(async () => {
    own = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
    ownAdmin = await asAdmin(own);
  });
  afterAll(async () => {
    await own.close();
  });

  it('a delegate may not write a CA that can log in as an admin or a permission holder, and may write the others', async () => {
    await createIdentityWithPassword(own, ownAdmin, { name: 'ca-op', username: 'ca-op', password: 'ca-op-pw', permissions: ['ca'] });
    const token = await login(own, 'ca-op', 'ca-op-pw');
    const expectRefused = (res: Awaited<ReturnType<typeof call>>, what: string) => {
      expect(res.statusCode, `${what}: ${res.body}`).toBe(401);
      expect(json(res).error.code).toBe('UNAUTHORIZED');
      expect(json(res).error.message).toMatch(/^only an admin may write a CA that an admin or an identity holding permissions logs in with/);
    };
    const me = json(await call(own, 'GET', `${MGMT}/current-identity`, { token: ownAdmin })).data.id as string;
    expect((await call(own, 'PATCH', `${MGMT}/identities/${me}`, { token: ownAdmin, body: { externalId: 'boss@corp.example' } })).statusCode).toBe(200);

    // With an external id claim, a certificate of the CA naming boss@corp.example would log in as the admin.
    const evil = await testCa('evil-ca');
    expectRefused(await call(own, 'POST', `${MGMT}/cas`, { token, body: caBody('evil-ca', evil, { externalIdClaim: claim }) }), 'create');
    expect(json(await call(own, 'GET', `${MGMT}/cas`, { token: ownAdmin })).data).toEqual([]);

    // Without one it is written, verified and changed, but not given a claim.
    const team = await testCa('team-ca');
    const created = await call(own, 'POST', `${MGMT}/cas`, { token, body: caBody('team-ca', team) });
    expect(created.statusCode, created.body).toBe(201);
    const ca = json(created).data.id as string;
    const verificationToken = json(await call(own, 'GET', `${MGMT}/cas/${ca}`, { token })).data.verificationToken as string;
    const proof = await testCertificate(verificationToken, { issuer: team });
    const verified = await call(own, 'POST', `${MGMT}/cas/${ca}/verify`, { token, body: proof.certPem, headers: { 'content-type': 'text/plain' } });
    expect(verified.statusCode, verified.body).toBe(200);
    expectRefused(await call(own, 'PATCH', `${MGMT}/cas/${ca}`, { token, body: { externalIdClaim: claim } }), 'patch');
    expect(json(await call(own, 'GET', `${MGMT}/cas/${ca}`, { token: ownAdmin })).data.externalIdClaim).toBeNull();

    // An identity holding permissions comes to log in with one of its certificates: the delegate may
    // no longer change it (turning its logins off) or delete it.
    const keeper = await createIdentity(own, ownAdmin, { name: 'ca-keeper', permissions: ['identity.read'] });
    const keeperCert = await testCertificate('ca-keeper', { issuer: team });
    const authenticator = await call(own, 'POST', `${MGMT}/authenticators`, { token: ownAdmin, body: { method: 'cert', identityId: keeper, certPem: keeperCert.certPem } });
    expect(authenticator.statusCode, authenticator.body).toBe(201);
    expectRefused(await call(own, 'PATCH', `${MGMT}/cas/${ca}`, { token, body: { isAuthEnabled: false } }), 'patch');
    expectRefused(await call(own, 'DELETE', `${MGMT}/cas/${ca}`, { token }), 'delete');

    // Once no privileged identity has an external id, a claim is the delegate's to give, on another CA.
    expect((await call(own, 'PATCH', `${MGMT}/identities/${me}`, { token: ownAdmin, body: { externalId: null } })).statusCode).toBe(200);
    const devices = await call(own, 'POST', `${MGMT}/cas`, { token, body: caBody('devices-ca', await testCa('devices-ca'), { externalIdClaim: claim }) });
    expect(devices.statusCode, devices.body).toBe(201);
    // The admin still may write them all.
    expect((await call(own, 'PATCH', `${MGMT}/cas/${ca}`, { token: ownAdmin, body: { externalIdClaim: claim } })).statusCode).toBe(200);
  });
});

describe('OIDC redirect URIs admins log in through', () => {
  // An attack that worked: a holder of ops added its own site to the global setting's redirect URIs;
  // an admin who logged in through its authorization link sent it the code (the attacker held the
  // PKCE verifier) and so its access and refresh tokens.
  it('a holder of ops reads the controller settings but may not write them', async () => {
    await createIdentityWithPassword(t, admin, { name: 'settings-op', username: 'settings-op', password: 'settings-op-pw', permissions: ['ops'] });
    const token = await login(t, 'settings-op', 'settings-op-pw');
    const expectRefused = (res: Awaited<ReturnType<typeof call>>, what: string) => {
      expect(res.statusCode, `${what}: ${res.body}`).toBe(401);
      expect(json(res).error.code).toBe('UNAUTHORIZED');
      expect(json(res).error.message).toMatch(/not permitted/);
    };
    const evil = { oidc: { redirectUris: ['https://evil.example'] } };
    expectRefused(await call(t, 'POST', `${MGMT}/controller-settings`, { token, body: { controllerId: 'global', ...evil } }), 'create');
    expect((await call(t, 'GET', `${MGMT}/controller-settings/global`, { token: admin })).statusCode).toBe(404);
    const ok = await call(t, 'POST', `${MGMT}/controller-settings`, { token: admin, body: { controllerId: 'global', oidc: { redirectUris: ['https://app.example/cb'] } } });
    expect(ok.statusCode, ok.body).toBe(201);
    expectRefused(await call(t, 'PATCH', `${MGMT}/controller-settings/global`, { token, body: evil }), 'patch');
    expectRefused(await call(t, 'PUT', `${MGMT}/controller-settings/global`, { token, body: evil }), 'put');
    expectRefused(await call(t, 'DELETE', `${MGMT}/controller-settings/global`, { token }), 'delete');
    const read = await call(t, 'GET', `${MGMT}/controller-settings/global`, { token });
    expect(read.statusCode).toBe(200);
    expect(json(read).data.oidc).toEqual({ redirectUris: ['https://app.example/cb'] });
    // So an authorization cannot send its code there.
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: 'overlay',
      redirect_uri: 'https://evil.example/cb',
      scope: 'openid',
      code_challenge: 'x'.repeat(43),
      code_challenge_method: 'S256',
    });
    const authorize = await t.inject({ method: 'GET', url: `/oidc/authorization?${q.toString()}` });
    expect(authorize.headers.location ?? '', authorize.body).not.toMatch(/authRequestID/);
    q.set('redirect_uri', 'https://app.example/cb');
    const allowed = await t.inject({ method: 'GET', url: `/oidc/authorization?${q.toString()}` });
    expect(allowed.headers.location ?? '', allowed.body).toMatch(/authRequestID/);
  });
});

describe('the MFA of permission holders', () => {
  // It was removable: a holder of identity took away the second factor of another permission holder
  // (not of an admin), which is a credential of that identity.
  it('a holder of identity removes the MFA of plain identities, not of another permission holder', async () => {
    await createIdentityWithPassword(t, admin, { name: 'mfa-op', username: 'mfa-op', password: 'mfa-op-pw', permissions: ['identity'] });
    const token = await login(t, 'mfa-op', 'mfa-op-pw');
    const withMfa = async (name: string, permissions: string[] = []) => {
      const { id } = await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw`, permissions });
      const own = await login(t, name, `${name}-pw`, CLIENT);
      const started = await call(t, 'POST', `${CLIENT}/current-identity/mfa`, { token: own, body: {} });
      const code = authenticatorApp(json(started).data.provisioningUrl)(t.clock());
      expect((await call(t, 'POST', `${CLIENT}/current-identity/mfa/verify`, { token: own, body: { code } })).statusCode).toBe(200);
      return id;
    };
    const mfaOf = async (id: string) => json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data.isMfaEnabled as boolean;
    const holder = await withMfa('mfa-holder', ['service.read']);
    const refused = await call(t, 'DELETE', `${MGMT}/identities/${holder}/mfa`, { token });
    expect(refused.statusCode, refused.body).toBe(401);
    expect(json(refused).error.code).toBe('UNAUTHORIZED');
    expect(await mfaOf(holder)).toBe(true);
    const plain = await withMfa('mfa-plain');
    expect((await call(t, 'DELETE', `${MGMT}/identities/${plain}/mfa`, { token })).statusCode).toBe(200);
    expect(await mfaOf(plain)).toBe(false);
    // An admin still removes it.
    expect((await call(t, 'DELETE', `${MGMT}/identities/${holder}/mfa`, { token: admin })).statusCode).toBe(200);
  });
});

describe('the state of permission holders', () => {
  // It was possible: a holder of identity disabled another permission holder for good (its session
  // ended, its logins refused) or deleted it, though it could not take its permissions away.
  it('a holder of identity deletes, disables and enables plain identities and itself, not another permission holder', async () => {
    await createIdentityWithPassword(t, admin, { name: 'state-op', username: 'state-op', password: 'state-op-pw', permissions: ['identity'] });
    const token = await login(t, 'state-op', 'state-op-pw');
    const holder = await createIdentity(t, admin, { name: 'state-holder', permissions: ['service.read'] });
    const plain = await createIdentity(t, admin, { name: 'state-plain' });
    for (const [method, path, body] of [
      ['POST', 'disable', { durationMinutes: 0 }],
      ['POST', 'enable', undefined],
      ['DELETE', '', undefined],
    ] as const) {
      const url = (id: string) => `${MGMT}/identities/${id}${path ? `/${path}` : ''}`;
      const refused = await call(t, method, url(holder), { token, ...(body ? { body } : {}) });
      expect(refused.statusCode, `${method} ${path}: ${refused.body}`).toBe(401);
      expect(json(refused).error.code).toBe('UNAUTHORIZED');
      expect((await call(t, method, url(plain), { token, ...(body ? { body } : {}) })).statusCode, `${method} ${path} of a plain identity`).toBe(200);
    }
    const still = json(await call(t, 'GET', `${MGMT}/identities/${holder}`, { token: admin })).data;
    expect(still).toMatchObject({ disabled: false, permissions: ['service.read'] });
    // An admin still may.
    expect((await call(t, 'DELETE', `${MGMT}/identities/${holder}`, { token: admin })).statusCode).toBe(200);
  });
});

describe('what a delegate wrote while harmless is no way into privileged accounts later', () => {
  // Attacks that worked: a delegate wrote an external JWT signer, or a CA with an external id claim,
  // while no privileged identity logged in with it (so the write was allowed); an admin later made
  // such an identity, or gave one an external id, and the delegate logged in as it. And a delegate that
  // read an enrollment's token while its identity was plain enrolled it once the identity was granted
  // permissions.
  let own: TestController;
  let ownAdmin: string;
  let port: number;
  const REFUSAL = /last written by a caller who is not an admin/;
  beforeAll(async () => {
    own = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
    ownAdmin = await asAdmin(own);
    const [url] = await own.app.listen();
    port = Number(new URL(url!).port);
  });
  afterAll(async () => {
    await own.close();
  });
  const delegate = async (name: string, permissions: string[]) => {
    await createIdentityWithPassword(own, ownAdmin, { name, username: name, password: `${name}-pw`, permissions });
    return login(own, name, `${name}-pw`);
  };
  const identityWith = async (name: string, body: Record<string, unknown>) => {
    const res = await call(own, 'POST', `${MGMT}/identities`, { token: ownAdmin, body: { name, type: 'User', isAdmin: false, ...body } });
    expect(res.statusCode, res.body).toBe(201);
    return json(res).data.id as string;
  };

  it('an external JWT signer logs in no identity made privileged after it, until an admin saves it', async () => {
    const token = await delegate('late-signer-op', ['external-jwt-signer']);
    // Nobody privileged takes external JWTs: the delegate may write a signer.
    const noJwt = json(await call(own, 'POST', `${MGMT}/auth-policies`, { token: ownAdmin, body: authPolicyBody('late-passwords-only', { primary: { updb: { allowed: true } } }) }))
      .data.id as string;
    for (const who of [ownAdmin, token]) {
      const id = json(await call(own, 'GET', `${MGMT}/current-identity`, { token: who })).data.id as string;
      expect((await call(own, 'PATCH', `${MGMT}/identities/${id}`, { token: ownAdmin, body: { authPolicyId: noJwt } })).statusCode).toBe(200);
    }
    const { certPem, keyPem } = await selfSignedCertificate('late-idp');
    const issuer = 'https://late-idp.example.com';
    const created = await call(own, 'POST', `${MGMT}/external-jwt-signers`, { token, body: { name: 'late-idp', issuer, audience: 'overlay', enabled: true, certPem } });
    expect(created.statusCode, created.body).toBe(201);
    const signer = json(created).data.id as string;
    expect(json(created).data).not.toHaveProperty('adminWritten');

    // Later an admin makes a permission holder under the default policy, which takes every signer.
    const holder = await identityWith('late-jwt-holder', { permissions: ['identity.read'] });
    const plain = await identityWith('late-jwt-plain', {});
    const jwtFor = (sub: string) =>
      new SignJWT({ iss: issuer, aud: 'overlay', sub })
        .setProtectedHeader({ alg: 'ES256' })
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(createPrivateKey(keyPem));
    const extJwtLogin = async (sub: string) => call(own, 'POST', `${CLIENT}/authenticate?method=ext-jwt`, { headers: { authorization: `Bearer ${await jwtFor(sub)}` } });
    const refused = await extJwtLogin(holder);
    expect(refused.statusCode, refused.body).toBe(401);
    expect(json(refused).error.message).toMatch(REFUSAL);
    expect(String(refused.headers['www-authenticate'])).toMatch(/realm="overlay-primary-ext-jwt"/);
    // A plain identity logs in with it; once an admin saves the signer, so does the holder.
    expect((await extJwtLogin(plain)).statusCode).toBe(200);
    expect((await call(own, 'PATCH', `${MGMT}/external-jwt-signers/${signer}`, { token: ownAdmin, body: { name: 'late-idp-checked' } })).statusCode).toBe(200);
    expect((await extJwtLogin(holder)).statusCode).toBe(200);
  });

  it('a CA with an external id claim logs in no identity made privileged after it, until an admin saves it', async () => {
    const token = await delegate('late-ca-op', ['ca']);
    const claim = { location: 'SAN_EMAIL', index: 0, matcher: 'ALL', matcherCriteria: '', parser: 'NONE', parserCriteria: '' };
    // No privileged identity has an external id: the delegate may write and verify a CA with a claim.
    const issuer = await testCa('late-ca');
    const created = await call(own, 'POST', `${MGMT}/cas`, {
      token,
      body: { name: 'late-ca', certPem: issuer.certPem, isAuthEnabled: true, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: false, identityRoles: [], externalIdClaim: claim },
    });
    expect(created.statusCode, created.body).toBe(201);
    const ca = json(created).data.id as string;
    const verificationToken = json(await call(own, 'GET', `${MGMT}/cas/${ca}`, { token })).data.verificationToken as string;
    const proof = await testCertificate(verificationToken, { issuer });
    expect((await call(own, 'POST', `${MGMT}/cas/${ca}/verify`, { token, body: proof.certPem, headers: { 'content-type': 'text/plain' } })).statusCode).toBe(200);

    // Later an admin makes a permission holder with an external id.
    await identityWith('late-ca-holder', { permissions: ['identity.read'], externalId: 'holder@corp.example' });
    await identityWith('late-ca-plain', { externalId: 'plain@corp.example' });
    const certLogin = async (email: string) =>
      overTls(own, port, 'POST', `${CLIENT}/authenticate?method=cert`, { body: {}, client: await testCertificate('anyone', { issuer, sans: [{ type: 'email', value: email }] }) });
    const refused = await certLogin('holder@corp.example');
    expect(refused.statusCode, refused.body).toBe(401);
    expect(JSON.parse(refused.body).error.message).toMatch(REFUSAL);
    expect((await certLogin('plain@corp.example')).statusCode).toBe(200);
    expect((await call(own, 'PATCH', `${MGMT}/cas/${ca}`, { token: ownAdmin, body: { name: 'late-ca-checked' } })).statusCode).toBe(200);
    expect((await certLogin('holder@corp.example')).statusCode).toBe(200);
  });

  it('granting permissions issues new tokens for the pending enrollments a delegate could read', async () => {
    const token = await delegate('late-enroller', ['enrollment', 'identity']);
    const target = await identityWith('late-promoted', {});
    const expiresAt = new Date(own.clock() + 3_600_000).toISOString();
    const made = await call(own, 'POST', `${MGMT}/enrollments`, { token, body: { method: 'updb', identityId: target, username: 'late-promoted', expiresAt } });
    expect(made.statusCode, made.body).toBe(201);
    const read = json(await call(own, 'GET', `${MGMT}/enrollments/${json(made).data.id}`, { token })).data;
    expect(read.token).toEqual(expect.any(String));

    expect((await call(own, 'PATCH', `${MGMT}/identities/${target}`, { token: ownAdmin, body: { permissions: ['identity.read'] } })).statusCode).toBe(200);
    const enroll = (enrollmentToken: string) => call(own, 'POST', `${CLIENT}/enroll/updb?token=${enrollmentToken}`, { body: { password: 'taken-over-1' } });
    expect((await enroll(read.token as string)).statusCode).not.toBe(200);
    // The enrollment stays, with a new token only an admin sees, lasting as long as before.
    expect(json(await call(own, 'GET', `${MGMT}/enrollments/${json(made).data.id}`, { token })).data).toMatchObject({ token: null, jwt: null });
    const renewed = json(await call(own, 'GET', `${MGMT}/enrollments/${json(made).data.id}`, { token: ownAdmin })).data;
    expect(renewed).toMatchObject({ token: expect.any(String), expiresAt: read.expiresAt });
    expect(renewed.token).not.toBe(read.token);
    expect((await enroll(renewed.token as string)).statusCode).toBe(200);
  });
});
