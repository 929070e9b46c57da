// Authenticators on the Management API: updb and cert, their rules, password hashing (Argon2id,
// upgrades of weaker hashes) and the password rules of the auth policy.
import { hash } from '@node-rs/argon2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  authenticate,
  call,
  CLIENT,
  createIdentity,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  selfSignedCertificate,
  startTestController,
  type TestController,
} from './helpers.js';

let t: TestController;
let admin: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

const url = (id = '') => `${MGMT}/authenticators${id ? `/${id}` : ''}`;
const create = (body: Record<string, unknown>) => call(t, 'POST', url(), { token: admin, body });
const detail = async (id: string) => {
  const res = await call(t, 'GET', url(id), { token: admin });
  expect(res.statusCode).toBe(200);
  return json(res).data;
};
const storedHash = async (id: string) =>
  (await t.app.core.store.db.selectFrom('authenticators').select('password_hash').where('id', '=', id).executeTakeFirstOrThrow())
    .password_hash as string;

function argon2Params(phc: string): { m: number; t: number; p: number } {
  const m = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/.exec(phc);
  if (!m) throw new Error(`not an Argon2id PHC string: ${phc}`);
  return { m: Number(m[1]), t: Number(m[2]), p: Number(m[3]) };
}

describe('updb authenticators', () => {
  it('create, read, list: username shown, password and hash never', async () => {
    const identityId = await createIdentity(t, admin, { name: 'updb-one' });
    const now = t.clock();
    const res = await create({ method: 'updb', identityId, username: 'updb-one', password: 'updb-one-secret', tags: { a: 'b' } });
    expect(res.statusCode).toBe(201);
    const { id } = json(res).data;
    expect(json(res).data).toEqual({ id, _links: { self: { href: `./authenticators/${id}` } } });

    const a = await detail(id);
    expect(a).toMatchObject({
      id,
      method: 'updb',
      identityId,
      identity: { entity: 'identities', id: identityId, name: 'updb-one' },
      username: 'updb-one',
      fingerprint: null,
      certPem: null,
      isIssuedByNetwork: false,
      isExtendRequested: false,
      isKeyRollRequested: false,
      tags: { a: 'b' },
      createdAt: new Date(now).toISOString(),
    });
    expect(a._links).toEqual({ self: { href: `./authenticators/${id}` }, identities: { href: `./identities/${a.identityId}` } });
    for (const key of ['password', 'passwordHash', 'failedAttempts']) expect(a).not.toHaveProperty(key);

    const list = await call(t, 'GET', `${url()}?limit=500`, { token: admin });
    expect(list.statusCode).toBe(200);
    const mine = json(list).data.find((x: { id: string }) => x.id === id);
    expect(mine).toMatchObject({ username: 'updb-one', method: 'updb' });
    expect(list.body).not.toMatch(/updb-one-secret|\$argon2|passwordHash|"password"/);
    expect(json(list).meta.filterableFields).not.toContain('passwordHash');
    expect(json(list).meta.filterableFields).not.toContain('password');

    const identity = json(await call(t, 'GET', `${MGMT}/identities/${identityId}`, { token: admin })).data;
    expect(identity.authenticators).toEqual({ updb: { id, username: 'updb-one' } });
    expect(await login(t, 'updb-one', 'updb-one-secret')).toBeTruthy();
  });

  it('stores the password as an Argon2id hash of at least 19 MiB and 2 passes', async () => {
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'hash-check', username: 'hash-check', password: 'hash-check-pw' });
    const phc = await storedHash(authenticatorId);
    const p = argon2Params(phc);
    expect(p.m).toBeGreaterThanOrEqual(19_456);
    expect(p.t).toBeGreaterThanOrEqual(2);
    expect(phc).not.toContain('hash-check-pw');
  });

  it('upgrades a weaker hash after the next successful login', async () => {
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'weak-hash', username: 'weak-hash', password: 'weak-hash-pw' });
    const weak = await hash('weak-hash-pw', { algorithm: 2, memoryCost: 8192, timeCost: 1, parallelism: 1 });
    await t.app.core.store.db.updateTable('authenticators').set({ password_hash: weak }).where('id', '=', authenticatorId).execute();
    expect(argon2Params(await storedHash(authenticatorId)).m).toBe(8192);

    // A failed login does not touch it.
    expectError(await authenticate(t, 'weak-hash', 'wrong-password', { remoteAddress: '10.4.0.1' }), 401, 'INVALID_AUTH');
    expect(await storedHash(authenticatorId)).toBe(weak);

    await login(t, 'weak-hash', 'weak-hash-pw');
    const upgraded = await storedHash(authenticatorId);
    expect(upgraded).not.toBe(weak);
    const p = argon2Params(upgraded);
    expect(p.m).toBeGreaterThanOrEqual(19_456);
    expect(p.t).toBeGreaterThanOrEqual(2);
    // And it still verifies.
    await login(t, 'weak-hash', 'weak-hash-pw');
    expect(await storedHash(authenticatorId)).toBe(upgraded);
  });

  it('refuses invalid create bodies', async () => {
    const identityId = await createIdentity(t, admin, { name: 'updb-invalid' });
    const cases: [Record<string, unknown>, string][] = [
      [{ identityId, username: 'nomethod', password: 'password1' }, 'method'],
      [{ method: 'otp', identityId, username: 'badmethod', password: 'password1' }, 'method'],
      [{ method: 'updb', username: 'noident', password: 'password1' }, 'identityId'],
      [{ method: 'updb', identityId, password: 'password1' }, 'username'],
      [{ method: 'updb', identityId, username: 'nopassword' }, 'password'],
      [{ method: 'updb', identityId, username: 'abc', password: 'password1' }, 'username'],
      [{ method: 'updb', identityId, username: 'u'.repeat(101), password: 'password1' }, 'username'],
      [{ method: 'updb', identityId, username: 'shortpw', password: 'abcd' }, 'password'],
      [{ method: 'updb', identityId, username: 'longpw', password: 'p'.repeat(101) }, 'password'],
      [{ method: 'updb', identityId, username: 'withcert', password: 'password1', certPem: 'x' }, 'certPem'],
    ];
    for (const [body, field] of cases) expectError(await create(body), 400, 'COULD_NOT_VALIDATE', field);
    expect(json(await call(t, 'GET', `${MGMT}/identities/${identityId}/authenticators`, { token: admin })).data).toEqual([]);
  });

  it('refuses an unknown identityId with 400 REFERENCED_ENTITY_NOT_FOUND', async () => {
    expectError(
      await create({ method: 'updb', identityId: 'no-such-identity', username: 'orphan', password: 'orphan-pw' }),
      400,
      'REFERENCED_ENTITY_NOT_FOUND',
      'identityId',
    );
  });

  it('refuses a second updb authenticator for the same identity and a username already taken', async () => {
    const { id } = await createIdentityWithPassword(t, admin, { name: 'updb-twice', username: 'updb-twice', password: 'updb-twice-pw' });
    const second = await create({ method: 'updb', identityId: id, username: 'updb-twice-2', password: 'updb-twice-pw' });
    expect(second.statusCode).toBe(400);
    expect(json(second).error.code).toBe('COULD_NOT_VALIDATE');
    const other = await createIdentity(t, admin, { name: 'updb-taken' });
    expectError(await create({ method: 'updb', identityId: other, username: 'updb-twice', password: 'whatever-pw' }), 400, 'COULD_NOT_VALIDATE', 'username');
  });

  it('refuses a username an outstanding enrollment of another identity will take, on create and patch', async () => {
    const pending = await createIdentity(t, admin, { name: 'updb-pending', enrollment: { updb: 'updb-reserved' } });
    expect(pending).toBeTypeOf('string');
    const other = await createIdentity(t, admin, { name: 'updb-taker' });
    expectError(await create({ method: 'updb', identityId: other, username: 'updb-reserved', password: 'taker-pw-1' }), 400, 'COULD_NOT_VALIDATE', 'username');
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'updb-renamer', username: 'updb-renamer', password: 'renamer-pw' });
    expectError(await call(t, 'PATCH', url(authenticatorId), { token: admin, body: { username: 'updb-reserved' } }), 400, 'COULD_NOT_VALIDATE', 'username');
  });

  it('patch changes the username (the new one logs in) and keeps the password', async () => {
    const { id, authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'rename', username: 'rename-old', password: 'rename-pw' });
    const before = await storedHash(authenticatorId);
    const res = await call(t, 'PATCH', url(authenticatorId), { token: admin, body: { username: 'rename-new' } });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    expect((await detail(authenticatorId)).username).toBe('rename-new');
    expect(await storedHash(authenticatorId)).toBe(before);
    const identity = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data;
    expect(identity.authenticators.updb.username).toBe('rename-new');
    expect(await login(t, 'rename-new', 'rename-pw')).toBeTruthy();
    expectError(await authenticate(t, 'rename-old', 'rename-pw', { remoteAddress: '10.4.0.2' }), 401, 'INVALID_AUTH');
  });

  it('patch sets a new password', async () => {
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'repass', username: 'repass', password: 'repass-old' });
    expect((await call(t, 'PATCH', url(authenticatorId), { token: admin, body: { password: 'repass-new' } })).statusCode).toBe(200);
    expect(await login(t, 'repass', 'repass-new')).toBeTruthy();
    expectError(await authenticate(t, 'repass', 'repass-old', { remoteAddress: '10.4.0.3' }), 401, 'INVALID_AUTH');
  });

  it('patch takes a null password (the field is nullable) and leaves the password as it is', async () => {
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'null-pass', username: 'null-pass', password: 'null-pass-pw' });
    const res = await call(t, 'PATCH', url(authenticatorId), { token: admin, body: { password: null, username: 'null-pass-2' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(await login(t, 'null-pass-2', 'null-pass-pw')).toBeTruthy();
  });

  it('patch validates', async () => {
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'patch-val', username: 'patch-val', password: 'patch-val-pw' });
    expectError(await call(t, 'PATCH', url(authenticatorId), { token: admin, body: { username: 'abc' } }), 400, 'COULD_NOT_VALIDATE', 'username');
    expectError(await call(t, 'PATCH', url(authenticatorId), { token: admin, body: { password: 'abcd' } }), 400, 'COULD_NOT_VALIDATE', 'password');
    expectError(await call(t, 'PATCH', url(authenticatorId), { token: admin, body: { username: 7 } }), 400, 'COULD_NOT_VALIDATE', 'username');
    expect((await detail(authenticatorId)).username).toBe('patch-val');
  });

  it('method and identityId are fixed after create: the stored value may be sent back, another is refused', async () => {
    const { id, authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'fixed-auth', username: 'fixed-auth', password: 'fixed-auth-pw' });
    const other = await createIdentity(t, admin, { name: 'fixed-auth-other' });
    expect((await call(t, 'PATCH', url(authenticatorId), { token: admin, body: { method: 'updb', identityId: id, tags: { k: 'v' } } })).statusCode).toBe(200);
    for (const method of ['PATCH', 'PUT'] as const) {
      const base = { username: 'fixed-auth', password: 'fixed-auth-pw2' };
      const moved = expectError(await call(t, method, url(authenticatorId), { token: admin, body: { ...base, identityId: other } }), 400, 'COULD_NOT_VALIDATE', 'identityId');
      expect(moved.error.cause).toMatchObject({ reason: 'is fixed when the authenticator is created', value: other });
      expectError(await call(t, method, url(authenticatorId), { token: admin, body: { ...base, method: 'cert' } }), 400, 'COULD_NOT_VALIDATE', 'method');
    }
    expect(await detail(authenticatorId)).toMatchObject({ identityId: id, method: 'updb', tags: { k: 'v' } });
    expect(await login(t, 'fixed-auth', 'fixed-auth-pw')).toBeTruthy();
  });

  it('full update requires username and password', async () => {
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'put-auth', username: 'put-auth', password: 'put-auth-pw' });
    expectError(await call(t, 'PUT', url(authenticatorId), { token: admin, body: { username: 'put-auth-2' } }), 400, 'COULD_NOT_VALIDATE', 'password');
    expectError(await call(t, 'PUT', url(authenticatorId), { token: admin, body: { password: 'put-auth-pw2' } }), 400, 'COULD_NOT_VALIDATE', 'username');
    const res = await call(t, 'PUT', url(authenticatorId), { token: admin, body: { username: 'put-auth-2', password: 'put-auth-pw2' } });
    expect(res.statusCode).toBe(200);
    expect((await detail(authenticatorId)).username).toBe('put-auth-2');
    expect(await login(t, 'put-auth-2', 'put-auth-pw2')).toBeTruthy();
    expectError(await authenticate(t, 'put-auth-2', 'put-auth-pw', { remoteAddress: '10.4.0.4' }), 401, 'INVALID_AUTH');
  });

  it('delete removes it: the identity can no longer log in with it', async () => {
    const { id, authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'del-auth', username: 'del-auth', password: 'del-auth-pw' });
    const res = await call(t, 'DELETE', url(authenticatorId), { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    expectError(await call(t, 'GET', url(authenticatorId), { token: admin }), 404, 'NOT_FOUND');
    expectError(await authenticate(t, 'del-auth', 'del-auth-pw', { remoteAddress: '10.4.0.5' }), 401, 'INVALID_AUTH');
    const identity = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data;
    expect(identity.authenticators).toEqual({});
    // A new one may be created afterwards.
    expect((await create({ method: 'updb', identityId: id, username: 'del-auth', password: 'del-auth-pw2' })).statusCode).toBe(201);
  });

  it('the list filters and pages', async () => {
    for (const n of ['lst-a', 'lst-b', 'lst-c']) await createIdentityWithPassword(t, admin, { name: n, username: n, password: `${n}-pw` });
    const filter = encodeURIComponent('username contains "lst-"');
    const body = json(await call(t, 'GET', `${url()}?filter=${filter}&sort=${encodeURIComponent('username desc')}&limit=2`, { token: admin }));
    expect(body.data.map((a: { username: string }) => a.username)).toEqual(['lst-c', 'lst-b']);
    expect(body.meta.pagination).toEqual({ limit: 2, offset: 0, totalCount: 3 });
    expectError(await call(t, 'GET', `${url()}?filter=${encodeURIComponent('passwordHash != null')}`, { token: admin }), 400, 'INVALID_FILTER');
  });
});

describe('cert authenticators', () => {
  it('records the SHA-1 fingerprint of the DER and answers it', async () => {
    const identityId = await createIdentity(t, admin, { name: 'cert-one' });
    const cert = await selfSignedCertificate('cert-one');
    const res = await create({ method: 'cert', identityId, certPem: cert.certPem });
    expect(res.statusCode).toBe(201);
    const id = json(res).data.id;
    const a = await detail(id);
    expect(a).toMatchObject({ method: 'cert', identityId, fingerprint: cert.fingerprint, username: null });
    expect(a.fingerprint).toMatch(/^[0-9a-f]{40}$/);
    const identity = json(await call(t, 'GET', `${MGMT}/identities/${identityId}`, { token: admin })).data;
    expect(identity.authenticators).toEqual({ cert: { id, fingerprint: cert.fingerprint } });
    // Both methods side by side.
    const updb = await create({ method: 'updb', identityId, username: 'cert-one', password: 'cert-one-pw' });
    expect(updb.statusCode).toBe(201);
    const both = json(await call(t, 'GET', `${MGMT}/identities/${identityId}`, { token: admin })).data;
    expect(both.authenticators).toEqual({
      cert: { id, fingerprint: cert.fingerprint },
      updb: { id: json(updb).data.id, username: 'cert-one' },
    });
  });

  it('refuses cert bodies that break the rules of the method', async () => {
    const identityId = await createIdentity(t, admin, { name: 'cert-invalid' });
    const cert = await selfSignedCertificate('cert-invalid');
    const two = await selfSignedCertificate('cert-invalid-2');
    const cases: [Record<string, unknown>, string][] = [
      [{ method: 'cert', identityId }, 'certPem'],
      [{ method: 'cert', identityId, certPem: 'not a certificate' }, 'certPem'],
      [{ method: 'cert', identityId, certPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' }, 'certPem'],
      [{ method: 'cert', identityId, certPem: cert.certPem + two.certPem }, 'certPem'],
      [{ method: 'cert', identityId, certPem: cert.certPem, username: 'cert-user' }, 'username'],
      [{ method: 'cert', identityId, certPem: cert.certPem, password: 'cert-pass' }, 'password'],
    ];
    for (const [body, field] of cases) expectError(await create(body), 400, 'COULD_NOT_VALIDATE', field);
  });

  it('refuses a second cert authenticator for the identity and a certificate already in use', async () => {
    const a = await createIdentity(t, admin, { name: 'cert-twice' });
    const b = await createIdentity(t, admin, { name: 'cert-reuse' });
    const cert = await selfSignedCertificate('cert-twice');
    expect((await create({ method: 'cert', identityId: a, certPem: cert.certPem })).statusCode).toBe(201);
    const other = await selfSignedCertificate('cert-twice-2');
    const second = await create({ method: 'cert', identityId: a, certPem: other.certPem });
    expect(second.statusCode).toBe(400);
    expect(json(second).error.code).toBe('COULD_NOT_VALIDATE');
    const reused = await create({ method: 'cert', identityId: b, certPem: cert.certPem });
    expect(reused.statusCode).toBe(400);
    expect(json(reused).error.code).toBe('COULD_NOT_VALIDATE');
  });
});

describe('password rules of the auth policy', () => {
  let strictIdentity: string;

  beforeAll(async () => {
    const res = await call(t, 'POST', `${MGMT}/auth-policies`, {
      token: admin,
      body: {
        name: 'strict-passwords',
        primary: {
          cert: { allowed: true, allowExpiredCerts: true },
          extJwt: { allowed: false, allowedSigners: null },
          updb: {
            allowed: true,
            lockoutDurationMinutes: 0,
            maxAttempts: 0,
            minPasswordLength: 10,
            requireMixedCase: true,
            requireNumberChar: true,
            requireSpecialChar: true,
          },
        },
        secondary: { requireTotp: false, requireExtJwtSigner: null },
      },
    });
    expect(res.statusCode).toBe(201);
    strictIdentity = await createIdentity(t, admin, { name: 'strict-user', authPolicyId: json(res).data.id });
  });

  const WEAK = ['Short-1', 'all-lower-case-1', 'ALL-UPPER-CASE-1', 'No-Digits-Here', 'NoSpecial1234'];

  it('are enforced on create', async () => {
    for (const password of WEAK) {
      expectError(await create({ method: 'updb', identityId: strictIdentity, username: 'strict-user', password }), 400, 'COULD_NOT_VALIDATE', 'password');
    }
    const ok = await create({ method: 'updb', identityId: strictIdentity, username: 'strict-user', password: 'Good-Pass123' });
    expect(ok.statusCode).toBe(201);
    expect(await login(t, 'strict-user', 'Good-Pass123')).toBeTruthy();
  });

  it('are enforced on patch and full update', async () => {
    const [a] = json(await call(t, 'GET', `${MGMT}/identities/${strictIdentity}/authenticators`, { token: admin })).data;
    for (const password of WEAK) {
      expectError(await call(t, 'PATCH', url(a.id), { token: admin, body: { password } }), 400, 'COULD_NOT_VALIDATE', 'password');
      expectError(await call(t, 'PUT', url(a.id), { token: admin, body: { username: 'strict-user', password } }), 400, 'COULD_NOT_VALIDATE', 'password');
    }
    expect(await login(t, 'strict-user', 'Good-Pass123')).toBeTruthy();
    expect((await call(t, 'PATCH', url(a.id), { token: admin, body: { password: 'Better-Pass456' } })).statusCode).toBe(200);
    expect(await login(t, 'strict-user', 'Better-Pass456')).toBeTruthy();
  });

  it('are enforced on the caller\'s own authenticator changes', async () => {
    const token = await login(t, 'strict-user', 'Better-Pass456', CLIENT);
    const [a] = json(await call(t, 'GET', `${CLIENT}/current-identity/authenticators`, { token })).data;
    for (const password of WEAK) {
      expectError(
        await call(t, 'PATCH', `${CLIENT}/current-identity/authenticators/${a.id}`, { token, body: { password, currentPassword: 'Better-Pass456' } }),
        400,
        'COULD_NOT_VALIDATE',
        'password',
      );
      expectError(
        await call(t, 'PUT', `${CLIENT}/current-identity/authenticators/${a.id}`, {
          token,
          body: { username: 'strict-user', password, currentPassword: 'Better-Pass456' },
        }),
        400,
        'COULD_NOT_VALIDATE',
        'password',
      );
    }
    expect(await login(t, 'strict-user', 'Better-Pass456')).toBeTruthy();
  });

  it('the default policy asks for 5 characters and nothing else', async () => {
    const id = await createIdentity(t, admin, { name: 'lax-user' });
    expect((await create({ method: 'updb', identityId: id, username: 'lax-user', password: 'aaaaa' })).statusCode).toBe(201);
  });
});
