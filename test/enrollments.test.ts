// Enrollments on the Management API: creating them (alone or with an identity), reading their token
// and JWT, one outstanding per method, refresh, delete, an identity's enrollments, and reverting an
// authenticator to an enrollment. What the store keeps of a token is its digest and a sealed copy.
import { createLocalJWKSet, jwtVerify } from 'jose';
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
  expectMissingCredential,
  json,
  login,
  MGMT,
  sha256Hex,
  startTestController,
  type TestController,
} from './helpers.js';

const HOUR = 3_600_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let t: TestController;
let admin: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

const later = (ms = HOUR) => new Date(t.clock() + ms).toISOString();
const create = (body: Record<string, unknown>, token = admin) => call(t, 'POST', `${MGMT}/enrollments`, { token, body });
const detail = async (id: string) => {
  const res = await call(t, 'GET', `${MGMT}/enrollments/${id}`, { token: admin });
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
};
async function enrollment(body: Record<string, unknown>): Promise<string> {
  const res = await create(body);
  expect(res.statusCode, res.body).toBe(201);
  return json(res).data.id as string;
}

async function verifyJwt(jwt: string) {
  const jwks = json(await call(t, 'GET', `${CLIENT}/enroll/jwks`));
  return (await jwtVerify(jwt, createLocalJWKSet(jwks), { currentDate: new Date(t.clock()) })).payload;
}

describe('POST /enrollments', () => {
  it('creates an ott enrollment whose token and signed JWT the admin reads; the store keeps neither in the clear', async () => {
    const identityId = await createIdentity(t, admin, { name: 'ott-one' });
    const expiresAt = later();
    const id = await enrollment({ method: 'ott', identityId, expiresAt, tags: { site: 'a' } });
    const e = await detail(id);
    expect(e).toMatchObject({
      id,
      method: 'ott',
      identityId,
      expiresAt,
      caId: null,
      username: null,
      tags: { site: 'a' },
      identity: { id: identityId, name: 'ott-one', entity: 'identities', urlName: 'identities' },
      ca: null,
    });
    expect(e.token).toMatch(UUID);
    expect(e).not.toHaveProperty('tokenHash');
    expect(e).not.toHaveProperty('sealedJwt');

    const claims = await verifyJwt(e.jwt);
    const address = t.config.web[0]!.bindPoints[0]!.address;
    expect(claims).toMatchObject({ iss: `https://${address}`, sub: identityId, jti: e.token, em: 'ott', exp: Math.floor(Date.parse(expiresAt) / 1000) });
    expect(claims.ctrls).toEqual([`https://${address}`]);

    const row = await t.app.core.store.db.selectFrom('enrollments').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(row.token_hash).toBe(sha256Hex(e.token));
    expect(JSON.stringify(row)).not.toContain(e.token);
  });

  it('refuses a second outstanding enrollment of a method for an identity (409), not one of another method', async () => {
    const identityId = await createIdentity(t, admin, { name: 'two-methods' });
    await enrollment({ method: 'ott', identityId, expiresAt: later() });
    expectError(await create({ method: 'ott', identityId, expiresAt: later() }), 409, 'ENROLLMENT_EXISTS');
    await enrollment({ method: 'updb', identityId, expiresAt: later(), username: 'two-methods' });
    expectError(await create({ method: 'updb', identityId, expiresAt: later(), username: 'two-methods-b' }), 409, 'ENROLLMENT_EXISTS');
  });

  it('refuses bad input naming the field', async () => {
    const identityId = await createIdentity(t, admin, { name: 'bad-input' });
    expectError(await create({ method: 'updb', identityId, expiresAt: later() }), 400, 'COULD_NOT_VALIDATE', 'username');
    expectError(await create({ method: 'ott', identityId, expiresAt: later(), username: 'someone' }), 400, 'COULD_NOT_VALIDATE', 'username');
    expectError(await create({ method: 'ott', identityId, expiresAt: later(), caId: 'x' }), 400, 'COULD_NOT_VALIDATE', 'caId');
    expectError(await create({ method: 'ottca', identityId, expiresAt: later() }), 400, 'COULD_NOT_VALIDATE', 'caId');
    expectError(await create({ method: 'ottca', identityId, expiresAt: later(), caId: 'no-such-ca' }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'caId');
    expectError(await create({ method: 'ott', identityId, expiresAt: later(-1000) }), 400, 'COULD_NOT_VALIDATE', 'expiresAt');
    expectError(await create({ method: 'ott', identityId, expiresAt: 'tomorrow' }), 400, 'COULD_NOT_VALIDATE');
    expectError(await create({ method: 'erott', identityId, expiresAt: later() }), 400, 'COULD_NOT_VALIDATE');
    expectError(await create({ method: 'ott', expiresAt: later() }), 400, 'COULD_NOT_VALIDATE');
    expectError(await create({ method: 'ott', identityId: 'no-such-identity', expiresAt: later() }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'identityId');
    // A username another identity logs in with, or enrolls with, is taken.
    await createIdentityWithPassword(t, admin, { name: 'has-name', username: 'taken-name', password: 'taken-name-pw' });
    expectError(await create({ method: 'updb', identityId, expiresAt: later(), username: 'taken-name' }), 400, 'COULD_NOT_VALIDATE', 'username');
    const count = await t.app.core.store.db.selectFrom('enrollments').select('id').where('identity_id', '=', identityId).execute();
    expect(count).toEqual([]);
  });

  it('refuses an enrollment of a method whose authenticator the identity has already', async () => {
    const { id: identityId } = await createIdentityWithPassword(t, admin, { name: 'has-updb', username: 'has-updb', password: 'has-updb-pw' });
    expectError(await create({ method: 'updb', identityId, expiresAt: later(), username: 'has-updb-2' }), 400, 'COULD_NOT_VALIDATE', 'method');
  });

  it('asks for a credential, and for the enrollment permission', async () => {
    expectMissingCredential(await call(t, 'POST', `${MGMT}/enrollments`, { body: { method: 'ott', identityId: 'x', expiresAt: later() } }));
    expectMissingCredential(await call(t, 'GET', `${MGMT}/enrollments`));
    const target = await createIdentity(t, admin, { name: 'target-of-user' });
    await createIdentityWithPassword(t, admin, { name: 'plain-user', username: 'plain-user', password: 'plain-user-pw' });
    const user = await login(t, 'plain-user', 'plain-user-pw');
    expectError(await create({ method: 'ott', identityId: target, expiresAt: later() }, user), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'GET', `${MGMT}/enrollments`, { token: user }), 401, 'UNAUTHORIZED');
  });

  it('lets a holder of the enrollment permission enroll an identity, but never an admin', async () => {
    await createIdentityWithPassword(t, admin, { name: 'enroller', username: 'enroller', password: 'enroller-pw', permissions: ['enrollment'] });
    const enroller = await login(t, 'enroller', 'enroller-pw');
    const plain = await createIdentity(t, admin, { name: 'enrolled-by-delegate' });
    expect((await create({ method: 'ott', identityId: plain, expiresAt: later() }, enroller)).statusCode).toBe(201);
    const anAdmin = await createIdentity(t, admin, { name: 'another-admin', isAdmin: true });
    expectError(await create({ method: 'ott', identityId: anAdmin, expiresAt: later() }, enroller), 401, 'UNAUTHORIZED');
    // Its own enrollment it may make, and then read with its token: a credential of its own.
    const selfId = json(await call(t, 'GET', `${MGMT}/current-identity`, { token: enroller })).data.id as string;
    const own = await create({ method: 'ott', identityId: selfId, expiresAt: later() }, enroller);
    expect(own.statusCode, own.body).toBe(201);
    const read = json(await call(t, 'GET', `${MGMT}/enrollments/${json(own).data.id}`, { token: enroller })).data;
    expect(read.token).toEqual(expect.any(String));
    expect(read.jwt).toEqual(expect.any(String));
  });
});

describe('reading, refreshing and deleting enrollments', () => {
  it('lists them, and an identity lists its own', async () => {
    const identityId = await createIdentity(t, admin, { name: 'lists-own' });
    const id = await enrollment({ method: 'ott', identityId, expiresAt: later() });
    const all = json(await call(t, 'GET', `${MGMT}/enrollments?filter=${encodeURIComponent(`identityId = "${identityId}"`)}`, { token: admin }));
    expect(all.data.map((e: { id: string }) => e.id)).toEqual([id]);
    expect(all.meta.filterableFields).toContain('expiresAt');
    expect(all.meta.filterableFields).not.toContain('tokenHash');
    const own = await call(t, 'GET', `${MGMT}/identities/${identityId}/enrollments`, { token: admin });
    expect(own.statusCode).toBe(200);
    expect(json(own).data.map((e: { id: string }) => e.id)).toEqual([id]);
    expectError(await call(t, 'GET', `${MGMT}/identities/no-such/enrollments`, { token: admin }), 404, 'NOT_FOUND');
    expectMissingCredential(await call(t, 'GET', `${MGMT}/identities/${identityId}/enrollments`));
  });

  it('a filter on the token digest is refused', async () => {
    const res = await call(t, 'GET', `${MGMT}/enrollments?filter=${encodeURIComponent('tokenHash = "x"')}`, { token: admin });
    expectError(res, 400, 'INVALID_FILTER');
  });

  it('refresh gives a new token and JWT until the new expiresAt; the old token is dead', async () => {
    const identityId = await createIdentity(t, admin, { name: 'refreshed' });
    const id = await enrollment({ method: 'ott', identityId, expiresAt: later() });
    const before = await detail(id);
    const expiresAt = later(5 * HOUR);
    const res = await call(t, 'POST', `${MGMT}/enrollments/${id}/refresh`, { token: admin, body: { expiresAt } });
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res).data).toEqual({ id, _links: { self: { href: `./enrollments/${id}` } } });
    const after = await detail(id);
    expect(after.token).not.toBe(before.token);
    expect(after.expiresAt).toBe(expiresAt);
    expect((await verifyJwt(after.jwt)).jti).toBe(after.token);
    expectError(await call(t, 'POST', `${CLIENT}/enroll/ott`, { body: { token: before.token, clientCsr: 'x' } }), 400, 'INVALID_ENROLLMENT_TOKEN');

    expectError(await call(t, 'POST', `${MGMT}/enrollments/${id}/refresh`, { token: admin, body: { expiresAt: later(-1) } }), 400, 'COULD_NOT_VALIDATE', 'expiresAt');
    expectError(await call(t, 'POST', `${MGMT}/enrollments/${id}/refresh`, { token: admin, body: {} }), 400, 'COULD_NOT_VALIDATE');
    expectError(await call(t, 'POST', `${MGMT}/enrollments/no-such/refresh`, { token: admin, body: { expiresAt } }), 404, 'NOT_FOUND');
    expectMissingCredential(await call(t, 'POST', `${MGMT}/enrollments/${id}/refresh`, { body: { expiresAt } }));
  });

  it('an expired enrollment can be refreshed and then used', async () => {
    const identityId = await createIdentity(t, admin, { name: 'expired-then-refreshed' });
    const id = await enrollment({ method: 'updb', identityId, expiresAt: later(), username: 'expired-then-refreshed' });
    t.clock.advance(2 * HOUR);
    // The admin's session has timed out meanwhile.
    admin = await asAdmin(t);
    const old = await detail(id);
    expectError(await call(t, 'POST', `${CLIENT}/enroll/updb?token=${old.token}`, { body: { password: 'a-password-1' } }), 400, 'ENROLLMENT_EXPIRED');
    expect((await call(t, 'POST', `${MGMT}/enrollments/${id}/refresh`, { token: admin, body: { expiresAt: later() } })).statusCode).toBe(200);
    const fresh = await detail(id);
    const res = await call(t, 'POST', `${CLIENT}/enroll/updb?token=${fresh.token}`, { body: { password: 'a-password-1' } });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('delete removes it; unknown ids are 404', async () => {
    const identityId = await createIdentity(t, admin, { name: 'deleted-enrollment' });
    const id = await enrollment({ method: 'ott', identityId, expiresAt: later() });
    const { token } = await detail(id);
    expect((await call(t, 'DELETE', `${MGMT}/enrollments/${id}`, { token: admin })).statusCode).toBe(200);
    expectError(await call(t, 'GET', `${MGMT}/enrollments/${id}`, { token: admin }), 404, 'NOT_FOUND');
    expectError(await call(t, 'DELETE', `${MGMT}/enrollments/${id}`, { token: admin }), 404, 'NOT_FOUND');
    expectError(await call(t, 'POST', `${CLIENT}/enroll/ott`, { body: { token, clientCsr: 'x' } }), 400, 'INVALID_ENROLLMENT_TOKEN');
    expectMissingCredential(await call(t, 'DELETE', `${MGMT}/enrollments/${id}`));
  });

  it('deleting the identity deletes its enrollments', async () => {
    const identityId = await createIdentity(t, admin, { name: 'cascade' });
    const id = await enrollment({ method: 'ott', identityId, expiresAt: later() });
    expect((await call(t, 'DELETE', `${MGMT}/identities/${identityId}`, { token: admin })).statusCode).toBe(200);
    expectError(await call(t, 'GET', `${MGMT}/enrollments/${id}`, { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('an identity created with enrollments', () => {
  it('makes them in the same write and reads them in its `enrollment`', async () => {
    const res = await call(t, 'POST', `${MGMT}/identities`, {
      token: admin,
      body: { name: 'born-enrolling', type: 'Device', isAdmin: false, enrollment: { ott: true, updb: 'born-enrolling' } },
    });
    expect(res.statusCode, res.body).toBe(201);
    const identityId = json(res).data.id as string;
    const identity = json(await call(t, 'GET', `${MGMT}/identities/${identityId}`, { token: admin })).data;
    const duration = t.config.edge.enrollment.edgeIdentity.duration;
    expect(Object.keys(identity.enrollment).sort()).toEqual(['ott', 'updb']);
    for (const method of ['ott', 'updb']) {
      const pending = identity.enrollment[method];
      expect(pending.expiresAt).toBe(new Date(t.clock() + duration).toISOString());
      expect(pending.token).toMatch(UUID);
      const claims = await verifyJwt(pending.jwt);
      expect(claims).toMatchObject({ sub: identityId, em: method, jti: pending.token });
      expect(await detail(pending.id)).toMatchObject({ method, identityId, token: pending.token });
    }
  });

  it('{ott: false} makes none; a refused enrollment refuses the identity too', async () => {
    const none = await createIdentity(t, admin, { name: 'no-enrollment', enrollment: { ott: false } });
    expect(json(await call(t, 'GET', `${MGMT}/identities/${none}`, { token: admin })).data.enrollment).toEqual({});

    const res = await call(t, 'POST', `${MGMT}/identities`, {
      token: admin,
      body: { name: 'refused-with-enrollment', type: 'Device', isAdmin: false, enrollment: { ott: true, ottca: 'no-such-ca' } },
    });
    expectError(res, 400, 'REFERENCED_ENTITY_NOT_FOUND', 'enrollment.ottca');
    const list = json(await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent('name = "refused-with-enrollment"')}`, { token: admin }));
    expect(list.data).toEqual([]);
    expectError(
      await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: 'short-name', type: 'Device', isAdmin: false, enrollment: { updb: 'ab' } } }),
      400,
      'COULD_NOT_VALIDATE',
    );
  });
});

describe('POST /authenticators/{id}/re-enroll', () => {
  it('reverts a password to a updb enrollment: login refused until enrolled again', async () => {
    const { id: identityId, authenticatorId } = await createIdentityWithPassword(t, admin, {
      name: 'reverted-updb',
      username: 'reverted-updb',
      password: 'reverted-updb-pw',
    });
    const expiresAt = later();
    const res = await call(t, 'POST', `${MGMT}/authenticators/${authenticatorId}/re-enroll`, { token: admin, body: { expiresAt } });
    expect(res.statusCode, res.body).toBe(201);
    const id = json(res).data.id as string;
    expect(json(res).data._links.self.href).toBe(`./enrollments/${id}`);
    const e = await detail(id);
    expect(e).toMatchObject({ method: 'updb', identityId, username: 'reverted-updb', expiresAt });
    expectError(await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin }), 404, 'NOT_FOUND');
    expectError(await authenticate(t, 'reverted-updb', 'reverted-updb-pw'), 401, 'INVALID_AUTH');

    const enrolled = await call(t, 'POST', `${CLIENT}/enroll/updb?token=${e.token}`, { body: { password: 'a-new-password-2' } });
    expect(enrolled.statusCode, enrolled.body).toBe(200);
    expect(json(enrolled).data).toEqual({ username: 'reverted-updb' });
    expect((await authenticate(t, 'reverted-updb', 'a-new-password-2', { api: CLIENT })).statusCode).toBe(200);
  });

  it('refuses unknown ids, missing credentials, callers without permission and bad bodies', async () => {
    expectError(await call(t, 'POST', `${MGMT}/authenticators/no-such/re-enroll`, { token: admin, body: { expiresAt: later() } }), 404, 'NOT_FOUND');
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'kept-updb', username: 'kept-updb', password: 'kept-updb-pw' });
    expectMissingCredential(await call(t, 'POST', `${MGMT}/authenticators/${authenticatorId}/re-enroll`, { body: { expiresAt: later() } }));
    await createIdentityWithPassword(t, admin, { name: 'only-enroll', username: 'only-enroll', password: 'only-enroll-pw', permissions: ['enrollment'] });
    const onlyEnroll = await login(t, 'only-enroll', 'only-enroll-pw');
    const url = `${MGMT}/authenticators/${authenticatorId}/re-enroll`;
    expectError(await call(t, 'POST', url, { token: onlyEnroll, body: { expiresAt: later() } }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'POST', url, { token: admin, body: {} }), 400, 'COULD_NOT_VALIDATE');
    expectError(await call(t, 'POST', url, { token: admin, body: { expiresAt: later(-1) } }), 400, 'COULD_NOT_VALIDATE', 'expiresAt');
    // Refused writes leave the authenticator in place.
    expect((await authenticate(t, 'kept-updb', 'kept-updb-pw')).statusCode).toBe(200);
  });
});
