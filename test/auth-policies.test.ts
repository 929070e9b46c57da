// Authentication policies: CRUD, the seeded system policy, partial patches, references from
// identities, and what a policy does to logins (updb allowed, TOTP required).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  authenticate,
  call,
  CLIENT,
  createIdentity,
  createIdentityWithPassword,
  createSigner,
  expectError,
  json,
  MGMT,
  startTestController,
  type TestController,
} from './helpers.js';

const DEFAULT_PRIMARY = {
  cert: { allowed: true, allowExpiredCerts: true },
  extJwt: { allowed: true, allowedSigners: [] },
  updb: {
    allowed: true,
    minPasswordLength: 5,
    maxAttempts: 0,
    lockoutDurationMinutes: 0,
    requireMixedCase: false,
    requireNumberChar: false,
    requireSpecialChar: false,
  },
};
const DEFAULT_SECONDARY = { requireTotp: false, requireExtJwtSigner: null };

const PRIMARY = {
  cert: { allowed: false, allowExpiredCerts: false },
  extJwt: { allowed: false, allowedSigners: [] as string[] },
  updb: {
    allowed: true,
    minPasswordLength: 8,
    maxAttempts: 4,
    lockoutDurationMinutes: 15,
    requireMixedCase: true,
    requireNumberChar: false,
    requireSpecialChar: true,
  },
};
const SECONDARY = { requireTotp: false, requireExtJwtSigner: null };

let t: TestController;
let admin: string;
/** Signers the policies name (a policy may name only signers that exist). */
const signers = { a: '', x: '', y: '' };

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  for (const key of ['a', 'x', 'y'] as const) signers[key] = await createSigner(t, admin, { name: `signer-${key}` });
  PRIMARY.extJwt.allowedSigners = [signers.a];
});
afterAll(async () => {
  await t.close();
});

const url = (id = '') => `${MGMT}/auth-policies${id ? `/${id}` : ''}`;
const detail = async (id: string) => {
  const res = await call(t, 'GET', url(id), { token: admin });
  expect(res.statusCode).toBe(200);
  return json(res).data;
};
async function createPolicy(body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', url(), { token: admin, body: { primary: PRIMARY, secondary: SECONDARY, ...body } });
  expect(res.statusCode, res.body).toBe(201);
  return json(res).data.id as string;
}

describe('the seeded default policy', () => {
  it('is id default, name Default, isSystem, with the documented rules', async () => {
    const p = await detail('default');
    expect(p).toMatchObject({ id: 'default', name: 'Default', isSystem: true, tags: {} });
    expect(p.primary).toEqual(DEFAULT_PRIMARY);
    expect(p.secondary).toEqual(DEFAULT_SECONDARY);
    expect(p._links.self.href).toBe('./auth-policies/default');
  });

  it('cannot be deleted or updated', async () => {
    expectError(await call(t, 'DELETE', url('default'), { token: admin }), 400, 'ENTITY_CAN_NOT_BE_DELETED');
    expectError(
      await call(t, 'PUT', url('default'), { token: admin, body: { name: 'Default', primary: DEFAULT_PRIMARY, secondary: DEFAULT_SECONDARY } }),
      400,
      'ENTITY_CAN_NOT_BE_UPDATED',
    );
    expectError(await call(t, 'PATCH', url('default'), { token: admin, body: { name: 'Renamed' } }), 400, 'ENTITY_CAN_NOT_BE_UPDATED');
    expectError(
      await call(t, 'PATCH', url('default'), { token: admin, body: { primary: { updb: { maxAttempts: 1 } } } }),
      400,
      'ENTITY_CAN_NOT_BE_UPDATED',
    );
    const p = await detail('default');
    expect(p.name).toBe('Default');
    expect(p.primary).toEqual(DEFAULT_PRIMARY);
  });

  it('is in the list, which can filter on isSystem', async () => {
    const res = await call(t, 'GET', `${url()}?filter=${encodeURIComponent('isSystem = true')}`, { token: admin });
    expect(res.statusCode).toBe(200);
    const body = json(res);
    expect(body.data.map((p: { id: string }) => p.id)).toEqual(['default']);
    expect(body.meta.filterableFields).toEqual(expect.arrayContaining(['id', 'name', 'isSystem', 'tags']));
  });
});

describe('create and read', () => {
  it('round-trips name, primary, secondary and tags; isSystem is false', async () => {
    const id = await createPolicy({ name: 'round-trip', tags: { env: 'prod', locked: false } });
    const p = await detail(id);
    expect(p).toMatchObject({ id, name: 'round-trip', isSystem: false, tags: { env: 'prod', locked: false } });
    expect(p.primary).toEqual(PRIMARY);
    expect(p.secondary).toEqual(SECONDARY);
  });

  it('isSystem cannot be set by a client', async () => {
    const id = await createPolicy({ name: 'not-system', isSystem: true });
    expect((await detail(id)).isSystem).toBe(false);
    expect((await call(t, 'DELETE', url(id), { token: admin })).statusCode).toBe(200);
  });

  const updb = (changes: Record<string, unknown>) => ({ ...PRIMARY, updb: { ...PRIMARY.updb, ...changes } });
  const invalid: [string, Record<string, unknown>, string][] = [
    ['missing name', { primary: PRIMARY, secondary: SECONDARY }, 'name'],
    ['missing primary', { name: 'x1', secondary: SECONDARY }, 'primary'],
    ['missing secondary', { name: 'x1', primary: PRIMARY }, 'secondary'],
    ['minPasswordLength below 5', { name: 'x1', primary: updb({ minPasswordLength: 4 }), secondary: SECONDARY }, 'primary.updb.minPasswordLength'],
    ['negative maxAttempts', { name: 'x1', primary: updb({ maxAttempts: -1 }), secondary: SECONDARY }, 'primary.updb.maxAttempts'],
    ['negative lockout', { name: 'x1', primary: updb({ lockoutDurationMinutes: -1 }), secondary: SECONDARY }, 'primary.updb.lockoutDurationMinutes'],
    ['allowed not a boolean', { name: 'x1', primary: updb({ allowed: 'yes' }), secondary: SECONDARY }, 'primary.updb.allowed'],
    ['updb part missing', { name: 'x1', primary: { cert: PRIMARY.cert, extJwt: PRIMARY.extJwt }, secondary: SECONDARY }, 'primary.updb'],
    ['a updb rule missing', { name: 'x1', primary: { ...PRIMARY, updb: { allowed: true } }, secondary: SECONDARY }, 'primary.updb.lockoutDurationMinutes'],
    ['requireTotp not a boolean', { name: 'x1', primary: PRIMARY, secondary: { requireTotp: 1, requireExtJwtSigner: null } }, 'secondary.requireTotp'],
  ];
  it.each(invalid)('%s → 400 naming the field', async (_name, body, field) => {
    expectError(await call(t, 'POST', url(), { token: admin, body }), 400, 'COULD_NOT_VALIDATE', field);
  });

  it('secondary needs only requireTotp: without requireExtJwtSigner it reads null, on create and full update', async () => {
    const id = await createPolicy({ name: 'totp-only', secondary: { requireTotp: true } });
    expect((await detail(id)).secondary).toEqual({ requireTotp: true, requireExtJwtSigner: null });
    const named = { name: 'totp-only', primary: PRIMARY, secondary: { requireTotp: false, requireExtJwtSigner: signers.x } };
    expect((await call(t, 'PUT', url(id), { token: admin, body: named })).statusCode).toBe(200);
    const put = await call(t, 'PUT', url(id), { token: admin, body: { ...named, secondary: { requireTotp: false } } });
    expect(put.statusCode, put.body).toBe(200);
    expect((await detail(id)).secondary).toEqual({ requireTotp: false, requireExtJwtSigner: null });
    expectError(await call(t, 'POST', url(), { token: admin, body: { name: 'no-totp-rule', primary: PRIMARY, secondary: {} } }), 400, 'COULD_NOT_VALIDATE', 'secondary.requireTotp');
  });

  it('refuses a duplicate name', async () => {
    await createPolicy({ name: 'dup-policy' });
    expectError(await call(t, 'POST', url(), { token: admin, body: { name: 'dup-policy', primary: PRIMARY, secondary: SECONDARY } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expectError(await call(t, 'POST', url(), { token: admin, body: { name: 'Default', primary: PRIMARY, secondary: SECONDARY } }), 400, 'COULD_NOT_VALIDATE', 'name');
  });
});

describe('patch and full update', () => {
  it('patch merges partial primary and secondary objects', async () => {
    const id = await createPolicy({ name: 'patch-merge', secondary: { requireTotp: false, requireExtJwtSigner: signers.x } });
    const res = await call(t, 'PATCH', url(id), {
      token: admin,
      body: { primary: { updb: { maxAttempts: 9 }, cert: { allowed: true } }, secondary: { requireTotp: true } },
    });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    const p = await detail(id);
    expect(p.name).toBe('patch-merge');
    expect(p.primary).toEqual({
      ...PRIMARY,
      cert: { allowed: true, allowExpiredCerts: false },
      updb: { ...PRIMARY.updb, maxAttempts: 9 },
    });
    expect(p.secondary).toEqual({ requireTotp: true, requireExtJwtSigner: signers.x });
  });

  it('patch with primary or secondary null leaves it as it is, never the permissive defaults', async () => {
    const id = await createPolicy({ name: 'patch-null', secondary: { requireTotp: true, requireExtJwtSigner: signers.y } });
    expect((await call(t, 'PATCH', url(id), { token: admin, body: { primary: null, secondary: null } })).statusCode).toBe(200);
    const p = await detail(id);
    expect(p.primary).toEqual(PRIMARY);
    expect(p.secondary).toEqual({ requireTotp: true, requireExtJwtSigner: signers.y });
  });

  it('patch with requireExtJwtSigner null clears the signer (it reads null); a null for a rule that never reads null is refused', async () => {
    const id = await createPolicy({ name: 'patch-null-signer', secondary: { requireTotp: true, requireExtJwtSigner: signers.y } });
    expect((await call(t, 'PATCH', url(id), { token: admin, body: { secondary: { requireExtJwtSigner: null } } })).statusCode).toBe(200);
    expect((await detail(id)).secondary).toEqual({ requireTotp: true, requireExtJwtSigner: null });
    expectError(
      await call(t, 'PATCH', url(id), { token: admin, body: { secondary: { requireTotp: null } } }),
      400,
      'COULD_NOT_VALIDATE',
      'secondary.requireTotp',
    );
    expectError(
      await call(t, 'PATCH', url(id), { token: admin, body: { primary: { updb: { maxAttempts: null } } } }),
      400,
      'COULD_NOT_VALIDATE',
      'primary.updb.maxAttempts',
    );
    expect(await detail(id)).toMatchObject({ primary: PRIMARY, secondary: { requireTotp: true, requireExtJwtSigner: null } });
  });

  it('patch changes the name alone and validates', async () => {
    const id = await createPolicy({ name: 'patch-name' });
    expect((await call(t, 'PATCH', url(id), { token: admin, body: { name: 'patch-name-2' } })).statusCode).toBe(200);
    expect((await detail(id)).name).toBe('patch-name-2');
    expectError(
      await call(t, 'PATCH', url(id), { token: admin, body: { primary: { updb: { minPasswordLength: 4 } } } }),
      400,
      'COULD_NOT_VALIDATE',
      'primary.updb.minPasswordLength',
    );
    expectError(await call(t, 'PATCH', url(id), { token: admin, body: { name: '' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expect((await detail(id)).primary).toEqual(PRIMARY);
  });

  it('full update replaces everything and requires name, primary and secondary', async () => {
    const id = await createPolicy({ name: 'put-policy', tags: { a: 'b' } });
    for (const [body, field] of [
      [{ primary: DEFAULT_PRIMARY, secondary: DEFAULT_SECONDARY }, 'name'],
      [{ name: 'put-policy', secondary: DEFAULT_SECONDARY }, 'primary'],
      [{ name: 'put-policy', primary: DEFAULT_PRIMARY }, 'secondary'],
      [{ name: 'put-policy', primary: { updb: { maxAttempts: 1 } }, secondary: DEFAULT_SECONDARY }, 'primary.cert'],
    ] as const) {
      expectError(await call(t, 'PUT', url(id), { token: admin, body }), 400, 'COULD_NOT_VALIDATE', field);
    }
    const res = await call(t, 'PUT', url(id), { token: admin, body: { name: 'put-policy-2', primary: DEFAULT_PRIMARY, secondary: DEFAULT_SECONDARY } });
    expect(res.statusCode).toBe(200);
    const p = await detail(id);
    expect(p).toMatchObject({ name: 'put-policy-2', tags: {}, isSystem: false });
    expect(p.primary).toEqual(DEFAULT_PRIMARY);
    expect(p.secondary).toEqual(DEFAULT_SECONDARY);
  });
});

describe('extJwt.allowedSigners', () => {
  it('refuses a policy naming a signer that does not exist, in either place, with 400 REFERENCED_ENTITY_NOT_FOUND naming the field', async () => {
    const primary = { ...PRIMARY, extJwt: { allowed: true, allowedSigners: [signers.a, 'no-such-signer'] } };
    expectError(await call(t, 'POST', url(), { token: admin, body: { name: 'unknown-signer', primary, secondary: SECONDARY } }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'primary.extJwt.allowedSigners');
    const secondary = { requireTotp: false, requireExtJwtSigner: 'no-such-signer' };
    expectError(await call(t, 'POST', url(), { token: admin, body: { name: 'unknown-signer', primary: PRIMARY, secondary } }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'secondary.requireExtJwtSigner');
    const id = await createPolicy({ name: 'known-signer' });
    expectError(await call(t, 'PATCH', url(id), { token: admin, body: { secondary } }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'secondary.requireExtJwtSigner');
    expectError(await call(t, 'PATCH', url(id), { token: admin, body: { primary } }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'primary.extJwt.allowedSigners');
  });

  it('keeps a signer a policy names from being deleted (409), until the policy no longer names it', async () => {
    const signer = await createSigner(t, admin, { name: 'signer-named' });
    const id = await createPolicy({ name: 'names-a-signer', secondary: { requireTotp: false, requireExtJwtSigner: signer } });
    expectError(await call(t, 'DELETE', `${MGMT}/external-jwt-signers/${signer}`, { token: admin }), 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY');
    expect((await call(t, 'PATCH', url(id), { token: admin, body: { secondary: { requireExtJwtSigner: null } } })).statusCode).toBe(200);
    expect((await call(t, 'DELETE', `${MGMT}/external-jwt-signers/${signer}`, { token: admin })).statusCode).toBe(200);
  });

  it('is a list on every read, never null: null written on create, full update or patch reads as []', async () => {
    const nullSigners = { ...PRIMARY, extJwt: { allowed: true, allowedSigners: null } };
    const id = await createPolicy({ name: 'null-signers', primary: nullSigners });
    expect((await detail(id)).primary.extJwt).toEqual({ allowed: true, allowedSigners: [] });
    expect((await call(t, 'PATCH', url(id), { token: admin, body: { primary: { extJwt: { allowedSigners: [signers.x] } } } })).statusCode).toBe(200);
    expect((await detail(id)).primary.extJwt.allowedSigners).toEqual([signers.x]);
    expect((await call(t, 'PATCH', url(id), { token: admin, body: { primary: { extJwt: { allowedSigners: null } } } })).statusCode).toBe(200);
    expect((await detail(id)).primary.extJwt.allowedSigners).toEqual([]);
    const put = await call(t, 'PUT', url(id), { token: admin, body: { name: 'null-signers', primary: nullSigners, secondary: SECONDARY } });
    expect(put.statusCode).toBe(200);
    const list = json(await call(t, 'GET', `${url()}?filter=${encodeURIComponent(`id = "${id}"`)}`, { token: admin })).data;
    expect(list[0].primary.extJwt.allowedSigners).toEqual([]);
  });

  it('a policy stored with a null list (as the default policy once was) reads []', async () => {
    const id = await createPolicy({ name: 'stored-null-signers' });
    const primary = { ...PRIMARY, extJwt: { allowed: true, allowedSigners: null } };
    await t.app.core.store.db.updateTable('auth_policies').set({ primary: JSON.stringify(primary) }).where('id', '=', id).execute();
    expect((await detail(id)).primary.extJwt.allowedSigners).toEqual([]);
  });
});

describe('delete', () => {
  it('removes an unused policy', async () => {
    const id = await createPolicy({ name: 'delete-me' });
    const res = await call(t, 'DELETE', url(id), { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    expectError(await call(t, 'GET', url(id), { token: admin }), 404, 'NOT_FOUND');
  });

  it('refuses a policy an identity uses with 409 CAN_NOT_DELETE_REFERENCED_ENTITY', async () => {
    const id = await createPolicy({ name: 'in-use' });
    const identity = await createIdentity(t, admin, { name: 'policy-user', authPolicyId: id });
    expectError(await call(t, 'DELETE', url(id), { token: admin }), 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY');
    expect((await detail(id)).name).toBe('in-use');
    await call(t, 'PATCH', `${MGMT}/identities/${identity}`, { token: admin, body: { authPolicyId: 'default' } });
    expect((await call(t, 'DELETE', url(id), { token: admin })).statusCode).toBe(200);
  });

  it('refuses a policy a signer enrolls identities under with 409, until the signer names another', async () => {
    const id = await createPolicy({ name: 'enroll-policy' });
    const signer = await createSigner(t, admin, { name: 'enrolls-under-policy', enrollAuthPolicyId: id });
    expectError(await call(t, 'DELETE', url(id), { token: admin }), 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY');
    expect((await detail(id)).name).toBe('enroll-policy');
    expect((await call(t, 'PATCH', `${MGMT}/external-jwt-signers/${signer}`, { token: admin, body: { enrollAuthPolicyId: '' } })).statusCode).toBe(200);
    expect((await call(t, 'DELETE', url(id), { token: admin })).statusCode).toBe(200);
  });
});

describe('effect on logins', () => {
  it('updb.allowed false refuses password logins with INVALID_AUTH', async () => {
    const id = await createPolicy({ name: 'no-updb', primary: { ...PRIMARY, updb: { ...PRIMARY.updb, allowed: false, minPasswordLength: 5, requireMixedCase: false, requireSpecialChar: false } } });
    await createIdentityWithPassword(t, admin, { name: 'no-updb-user', username: 'no-updb-user', password: 'no-updb-pw', authPolicyId: id });
    expectError(await authenticate(t, 'no-updb-user', 'no-updb-pw', { remoteAddress: '10.6.0.1' }), 401, 'INVALID_AUTH');
    expect((await call(t, 'PATCH', url(id), { token: admin, body: { primary: { updb: { allowed: true } } } })).statusCode).toBe(200);
    expect((await authenticate(t, 'no-updb-user', 'no-updb-pw', { remoteAddress: '10.6.0.1' })).statusCode).toBe(200);
  });

  it('secondary.requireTotp: the new session waits for MFA and only the current API session works', async () => {
    const id = await createPolicy({
      name: 'totp-required',
      primary: DEFAULT_PRIMARY,
      secondary: { requireTotp: true, requireExtJwtSigner: null },
    });
    await createIdentityWithPassword(t, admin, {
      name: 'totp-user',
      isAdmin: true,
      username: 'totp-user',
      password: 'totp-user-pw',
      authPolicyId: id,
    });
    const res = await authenticate(t, 'totp-user', 'totp-user-pw', { api: CLIENT });
    expect(res.statusCode).toBe(200);
    const s = json(res).data;
    const query = {
      typeId: 'MFA',
      provider: 'overlay',
      format: 'alphaNumeric',
      httpMethod: 'POST',
      httpUrl: './authenticate/mfa',
      minLength: 6,
      maxLength: 6,
      isTotpEnrolled: false,
    };
    expect(s.isMfaRequired).toBe(true);
    expect(s.isMfaComplete).toBe(false);
    expect(s.authQueries).toEqual([query]);
    const token = s.token as string;

    for (const api of [CLIENT, MGMT]) {
      const current = await call(t, 'GET', `${api}/current-api-session`, { token });
      expect(current.statusCode).toBe(200);
      expect(json(current).data).toMatchObject({ isMfaRequired: true, isMfaComplete: false, authQueries: [query] });
    }
    for (const [method, path] of [
      ['GET', `${CLIENT}/current-identity`],
      ['GET', `${MGMT}/current-identity`],
      ['GET', `${CLIENT}/current-identity/authenticators`],
      ['GET', `${MGMT}/identities`],
      ['GET', `${MGMT}/auth-policies`],
      ['GET', `${MGMT}/api-sessions`],
    ] as const) {
      const blocked = await call(t, method, path, { token });
      expect(blocked.statusCode, path).toBe(401);
      expect(json(blocked).error.code).toBe('UNAUTHORIZED');
    }
    // The admin sees the pending session with its MFA state.
    const listed = json(await call(t, 'GET', `${MGMT}/api-sessions/${s.id}`, { token: admin })).data;
    expect(listed).toMatchObject({ isMfaRequired: true, isMfaComplete: false, authQueries: [query] });

    expect((await call(t, 'DELETE', `${CLIENT}/current-api-session`, { token })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${CLIENT}/current-api-session`, { token })).statusCode).toBe(401);
  });

  it('a policy without requireTotp gives complete sessions', async () => {
    const res = await authenticate(t, 'admin', 'admin-password-1');
    expect(json(res).data).toMatchObject({ isMfaRequired: false, isMfaComplete: false, authQueries: [] });
  });
});
