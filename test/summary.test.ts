// GET /summary: the number of records of every collection, for admins and admin_readonly.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentity,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  startTestController,
  type TestController,
  expectMissingCredential,
} from './helpers.js';

let t: TestController;
let admin: string;

async function userWith(name: string, permissions: string[]): Promise<string> {
  await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw1`, permissions });
  return login(t, name, `${name}-pw1`);
}

async function summary(token = admin): Promise<Record<string, number>> {
  const res = await call(t, 'GET', `${MGMT}/summary`, { token });
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

describe('counts', () => {
  it('has an integer for every collection, under the name of its URL', async () => {
    const data = await summary();
    const names = t.app.core.resources
      .all()
      .map((s) => s.def.name)
      .sort();
    expect(Object.keys(data).sort()).toEqual(names);
    for (const n of Object.values(data)) expect(Number.isInteger(n) && n >= 0).toBe(true);
    expect(data).toMatchObject({
      identities: 1, // the default admin
      'identity-types': 5,
      'auth-policies': 1,
      controllers: 1,
      revocations: 0,
      'controller-settings': 0,
      services: 0,
    });
    expect(data['api-sessions']).toBeGreaterThanOrEqual(1);
    expect(data['transit-routers']).toBe(data.routers);
    // every count equals a count of what its collection lists (its table, or its view)
    const db = t.app.core.store.db;
    for (const service of t.app.core.resources.all()) {
      const row = await db.selectFrom(service.repo.source).select(sql<number>`count(*)`.as('n')).executeTakeFirstOrThrow();
      expect(data[service.def.name], service.def.name).toBe(Number(row.n));
    }
  });

  it('follows creates and deletes', async () => {
    const before = await summary();
    const identityId = await createIdentity(t, admin, { name: 'counted' });
    expect(
      (await call(t, 'POST', `${MGMT}/revocations`, { token: admin, body: { id: 'counted-jti', type: 'JTI' } })).statusCode,
    ).toBe(201);
    expect((await call(t, 'POST', `${MGMT}/controller-settings`, { token: admin, body: { controllerId: 'global' } })).statusCode).toBe(201);
    const after = await summary();
    expect(after.identities).toBe(before.identities! + 1);
    expect(after.revocations).toBe(before.revocations! + 1);
    expect(after['controller-settings']).toBe(before['controller-settings']! + 1);
    expect(after.services).toBe(before.services);

    expect((await call(t, 'DELETE', `${MGMT}/identities/${identityId}`, { token: admin })).statusCode).toBe(200);
    expect((await summary()).identities).toBe(before.identities);
  });

  it('counts an edge router as a router too, as /routers lists it', async () => {
    const before = await summary();
    expect((await call(t, 'POST', `${MGMT}/edge-routers`, { token: admin, body: { name: 'counted-er' } })).statusCode).toBe(201);
    expect((await call(t, 'POST', `${MGMT}/routers`, { token: admin, body: { name: 'counted-r' } })).statusCode).toBe(201);
    const after = await summary();
    expect(after['edge-routers']).toBe(before['edge-routers']! + 1);
    expect(after.routers).toBe(before.routers! + 2);
    expect(after['transit-routers']).toBe(after.routers);
    expect(json(await call(t, 'GET', `${MGMT}/routers?limit=1`, { token: admin })).meta.pagination.totalCount).toBe(after.routers);
  });
});

describe('who may', () => {
  it('answers 401 with the challenge without a credential', async () => {
    const res = await call(t, 'GET', `${MGMT}/summary`);
    expectMissingCredential(res);
  });

  it('refuses non-admins, ops included (401)', async () => {
    for (const [name, permissions] of [
      ['sum-plain', []],
      ['sum-ops', ['ops']],
      ['sum-identity', ['identity']],
    ] as const) {
      const token = await userWith(name, [...permissions]);
      expectError(await call(t, 'GET', `${MGMT}/summary`, { token }), 401, 'UNAUTHORIZED');
    }
  });

  it('answers admin_readonly', async () => {
    const token = await userWith('sum-readonly', ['admin_readonly']);
    expect((await summary(token)).controllers).toBe(1);
  });

  it('is not part of the Client API', async () => {
    expectError(await call(t, 'GET', `${CLIENT}/summary`, { token: admin }), 404, 'NOT_FOUND');
  });
});
