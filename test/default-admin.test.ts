// The default admin: created at the first start from configuration or with a generated password
// shown once, protected from deletion and demotion, and left alone by later starts.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
  ADMIN_USERNAME,
  asAdmin,
  authenticate,
  call,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  startTestController,
  tempDir,
  type TestController,
} from './helpers.js';

describe('default admin from the environment', () => {
  let t: TestController;
  const announced: string[] = [];
  beforeAll(async () => {
    t = await startTestController({ env: ADMIN_ENV, announce: (m) => announced.push(m) });
  });
  afterAll(async () => {
    await t.close();
  });

  it('logs in with the configured username and password; nothing is announced or written', async () => {
    const token = await login(t, ADMIN_USERNAME, ADMIN_PASSWORD);
    expect(token).toBeTruthy();
    expect(announced).toEqual([]);
    expect(() => statSync(join(t.dataDir, 'admin-password'))).toThrow();
  });

  it('is an admin and the default admin, type User, under the default policy', async () => {
    const token = await asAdmin(t);
    const me = json(await call(t, 'GET', `${MGMT}/current-identity`, { token })).data;
    expect(me).toMatchObject({
      name: 'Default Admin',
      isAdmin: true,
      isDefaultAdmin: true,
      type: { entity: 'identity-types', id: 'User', name: 'User' },
      typeId: 'User',
      authPolicyId: 'default',
      authPolicy: { entity: 'auth-policies', id: 'default', name: 'Default' },
      authenticators: { updb: { username: ADMIN_USERNAME } },
      disabled: false,
    });
    const detail = json(await call(t, 'GET', `${MGMT}/identities/${me.id}`, { token })).data;
    expect(detail.isDefaultAdmin).toBe(true);
    const list = json(await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent('isDefaultAdmin = true')}`, { token }));
    expect(list.data.map((i: { id: string }) => i.id)).toEqual([me.id]);
  });

  it('cannot be deleted', async () => {
    const token = await asAdmin(t);
    const id = json(await call(t, 'GET', `${MGMT}/current-identity`, { token })).data.id as string;
    expectError(await call(t, 'DELETE', `${MGMT}/identities/${id}`, { token }), 400, 'ENTITY_CAN_NOT_BE_DELETED');
    expect((await call(t, 'GET', `${MGMT}/identities/${id}`, { token })).statusCode).toBe(200);
    // Not by another admin either.
    await createIdentityWithPassword(t, token, { name: 'second-admin', isAdmin: true, username: 'second-admin', password: 'second-admin-1' });
    const other = await login(t, 'second-admin', 'second-admin-1');
    expectError(await call(t, 'DELETE', `${MGMT}/identities/${id}`, { token: other }), 400, 'ENTITY_CAN_NOT_BE_DELETED');
  });

  it('cannot be made a non-admin, by patch or full update', async () => {
    const token = await asAdmin(t);
    const id = json(await call(t, 'GET', `${MGMT}/current-identity`, { token })).data.id as string;
    const patched = await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token, body: { isAdmin: false } });
    expect(patched.statusCode).toBe(400);
    expect(json(patched).error.code).toBe('ENTITY_CAN_NOT_BE_UPDATED');
    const put = await call(t, 'PUT', `${MGMT}/identities/${id}`, {
      token,
      body: { name: 'Default Admin', type: 'User', isAdmin: false },
    });
    expect(put.statusCode).toBe(400);
    expect(json(put).error.code).toBe('ENTITY_CAN_NOT_BE_UPDATED');
    const me = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token })).data;
    expect(me.isAdmin).toBe(true);
    // Other changes are allowed, and the default admin stays the default admin.
    expect((await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token, body: { name: 'Chief', roleAttributes: ['ops'] } })).statusCode).toBe(200);
    const after = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token })).data;
    expect(after).toMatchObject({ name: 'Chief', isAdmin: true, isDefaultAdmin: true, roleAttributes: ['ops'] });
    // isDefaultAdmin is not writable.
    await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token, body: { isDefaultAdmin: false } });
    expect(json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token })).data.isDefaultAdmin).toBe(true);
  });

  it('no other identity can become the default admin', async () => {
    const token = await asAdmin(t);
    const res = await call(t, 'POST', `${MGMT}/identities`, {
      token,
      body: { name: 'pretender', type: 'User', isAdmin: true, isDefaultAdmin: true },
    });
    expect(res.statusCode).toBe(201);
    const created = json(await call(t, 'GET', `${MGMT}/identities/${json(res).data.id}`, { token })).data;
    expect(created.isDefaultAdmin).toBe(false);
  });
});

describe('default admin with a generated password', () => {
  const dir = tempDir('overlay-admin-');
  afterAll(() => dir.remove());

  let password = '';
  let hashAtFirstStart = '';

  it('generates a password, announces it once and writes it to <dataDir>/admin-password with mode 0600', async () => {
    const announced: string[] = [];
    const t = await startTestController({ dataDir: dir.path, memoryStore: false, announce: (m) => announced.push(m) });
    try {
      const file = join(dir.path, 'admin-password');
      const stat = statSync(file);
      expect(stat.mode & 0o777).toBe(0o600);
      password = readFileSync(file, 'utf8').trim();
      expect(password.length).toBeGreaterThanOrEqual(16);
      expect(password).not.toBe(ADMIN_PASSWORD);
      expect(announced).toHaveLength(1);
      expect(announced[0]).toContain(password);

      const res = await authenticate(t, 'admin', password);
      expect(res.statusCode).toBe(200);
      const me = json(await call(t, 'GET', `${MGMT}/current-identity`, { token: json(res).data.token })).data;
      expect(me).toMatchObject({ isAdmin: true, isDefaultAdmin: true });
      const row = await t.app.core.store.db.selectFrom('authenticators').select('password_hash').where('username', '=', 'admin').executeTakeFirstOrThrow();
      hashAtFirstStart = row.password_hash as string;
      expect(hashAtFirstStart).not.toContain(password);
    } finally {
      await t.app.close();
    }
  });

  it('a second start on the same data directory leaves the admin alone', async () => {
    expect(password).not.toBe('');
    const announced: string[] = [];
    const t = await startTestController({ dataDir: dir.path, memoryStore: false, announce: (m) => announced.push(m) });
    try {
      expect(announced).toEqual([]);
      expect(readFileSync(join(dir.path, 'admin-password'), 'utf8').trim()).toBe(password);
      const row = await t.app.core.store.db.selectFrom('authenticators').select('password_hash').where('username', '=', 'admin').executeTakeFirstOrThrow();
      expect(row.password_hash).toBe(hashAtFirstStart);
      const token = await login(t, 'admin', password);
      const admins = json(await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent('isDefaultAdmin = true')}`, { token }));
      expect(admins.meta.pagination.totalCount).toBe(1);
    } finally {
      await t.app.close();
    }
  });

  it('a later start with a configured admin password does not change the existing admin', async () => {
    const announced: string[] = [];
    const t = await startTestController({
      dataDir: dir.path,
      memoryStore: false,
      env: ADMIN_ENV,
      announce: (m) => announced.push(m),
    });
    try {
      expect(announced).toEqual([]);
      expect((await authenticate(t, 'admin', password)).statusCode).toBe(200);
      expectError(await authenticate(t, 'admin', ADMIN_PASSWORD), 401, 'INVALID_AUTH');
    } finally {
      await t.app.close();
    }
  });
});
