// Identities on the Management API: fields and their validation, computed read fields, lists,
// identity types, an identity's authenticators, and disable / enable.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  authenticate,
  call,
  CHALLENGE_SESSION_INVALID,
  createIdentity,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  startTestController,
  type TestController,
} from './helpers.js';

const MINUTE = 60_000;

let t: TestController;
let admin: string;
let policyId: string;
let svcA: string;
let svcB: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  const res = await call(t, 'POST', `${MGMT}/auth-policies`, {
    token: admin,
    body: {
      name: 'identities-policy',
      primary: {
        cert: { allowed: true, allowExpiredCerts: false },
        extJwt: { allowed: false, allowedSigners: null },
        updb: {
          allowed: true,
          lockoutDurationMinutes: 0,
          maxAttempts: 0,
          minPasswordLength: 5,
          requireMixedCase: false,
          requireNumberChar: false,
          requireSpecialChar: false,
        },
      },
      secondary: { requireTotp: false, requireExtJwtSigner: null },
    },
  });
  expect(res.statusCode).toBe(201);
  policyId = json(res).data.id;
  // Services the hosting costs and precedences name (they must exist).
  [svcA, svcB] = [(await t.app.core.resources.get('services').create({ name: 'hosted-a' })).id, (await t.app.core.resources.get('services').create({ name: 'hosted-b' })).id];
});
afterAll(async () => {
  await t.close();
});

/** A fresh admin token (tests move the clock). */
async function freshAdmin(): Promise<string> {
  admin = await asAdmin(t);
  return admin;
}

/** The reference an identity's `type` reads as. */
const typeRef = (name: string) => ({ _links: { self: { href: `./identity-types/${name}` } }, entity: 'identity-types', id: name, name });

const get = async (id: string) => {
  const res = await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin });
  expect(res.statusCode).toBe(200);
  return json(res).data;
};

describe('what an identity names and is', () => {
  it('hosting costs and precedences name existing services: another is 400 REFERENCED_ENTITY_NOT_FOUND, nothing written', async () => {
    for (const field of ['serviceHostingCosts', 'serviceHostingPrecedences']) {
      const value = field === 'serviceHostingCosts' ? 5 : 'failed';
      expectError(
        await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: `ghost-${field}`, type: 'User', isAdmin: false, [field]: { 'no-such-service': value } } }),
        400,
        'REFERENCED_ENTITY_NOT_FOUND',
        field,
      );
      const id = await createIdentity(t, admin, { name: `hosting-${field}`, [field]: { [svcA]: value } });
      expectError(await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { [field]: { [svcA]: value, ghost: value } } }), 400, 'REFERENCED_ENTITY_NOT_FOUND', field);
      expect((await get(id))[field]).toEqual({ [svcA]: value });
    }
  });

  it('a blank externalId is none: read as null, and two identities may have it', async () => {
    const first = await createIdentity(t, admin, { name: 'blank-ext-1', externalId: '' });
    const second = await createIdentity(t, admin, { name: 'blank-ext-2', externalId: '  ' });
    expect((await get(first)).externalId).toBeNull();
    expect((await get(second)).externalId).toBeNull();
    expect((await call(t, 'PATCH', `${MGMT}/identities/${first}`, { token: admin, body: { externalId: '' } })).statusCode).toBe(200);
  });

  it("a router's identity keeps type Router", async () => {
    const id = await createIdentity(t, admin, { name: 'router-typed', type: 'Router' });
    expectError(await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { type: 'User' } }), 400, 'COULD_NOT_VALIDATE', 'type');
    expect((await get(id)).typeId).toBe('Router');
  });
});

describe('create and read', () => {
  it('round-trips every writable field and answers the computed ones', async () => {
    const body = {
      name: 'full-identity',
      type: 'Device',
      isAdmin: false,
      authPolicyId: policyId,
      externalId: 'ext-full-1',
      appData: { team: 'blue', nested: { list: [1, 2, 3], flag: true }, nothing: null },
      defaultHostingCost: 65535,
      defaultHostingPrecedence: 'required',
      serviceHostingCosts: { [svcA]: 0, [svcB]: 65535 },
      serviceHostingPrecedences: { [svcA]: 'failed', [svcB]: 'default' },
      roleAttributes: ['red', 'green'],
      permissions: ['identity.read', 'auth-policy'],
      tags: { owner: 'ops', managed: true, none: null },
    };
    const now = t.clock();
    const res = await call(t, 'POST', `${MGMT}/identities`, { token: admin, body });
    expect(res.statusCode).toBe(201);
    const created = json(res).data;
    expect(created).toEqual({ id: created.id, _links: { self: { href: `./identities/${created.id}` } } });
    expect(created.id).toMatch(/^[0-9A-Za-z._-]{6,}$/);

    const e = await get(created.id);
    // `type` is written as the type's name and read as a reference to it
    expect(e).toMatchObject({ ...body, type: typeRef('Device') });
    expect(e).toMatchObject({
      id: created.id,
      createdAt: new Date(now).toISOString(),
      updatedAt: new Date(now).toISOString(),
      typeId: 'Device',
      isDefaultAdmin: false,
      authPolicy: { entity: 'auth-policies', id: policyId, name: 'identities-policy', _links: { self: { href: `./auth-policies/${policyId}` } } },
      authenticators: {},
      hasApiSession: false,
      isMfaEnabled: false,
      disabled: false,
      disabledAt: null,
      disabledUntil: null,
      envInfo: {},
      sdkInfo: {},
      enrollment: {},
    });
    expect(e._links.self.href).toBe(`./identities/${created.id}`);
    for (const sub of ['authenticators', 'service-policies', 'edge-router-policies', 'enrollments']) {
      expect(e._links[sub].href).toBe(`./identities/${created.id}/${sub}`);
    }
    // its own policy, as the established controller links it (no list of policies hangs off an identity)
    expect(e._links['auth-policies'].href).toBe(`./auth-policies/${policyId}`);
    expect((await call(t, 'GET', `${MGMT}/${e._links['auth-policies'].href.slice(2)}`, { token: admin })).statusCode).toBe(200);
  });

  it('fills defaults for the optional fields', async () => {
    const id = await createIdentity(t, admin, { name: 'defaults-identity' });
    const e = await get(id);
    expect(e).toMatchObject({
      type: typeRef('User'),
      typeId: 'User',
      isAdmin: false,
      appData: {},
      authPolicyId: 'default',
      authPolicy: { entity: 'auth-policies', id: 'default', name: 'Default' },
      _links: expect.objectContaining({ 'auth-policies': { href: './auth-policies/default' } }),
      externalId: null,
      defaultHostingCost: 0,
      defaultHostingPrecedence: 'default',
      serviceHostingCosts: {},
      serviceHostingPrecedences: {},
      roleAttributes: [],
      permissions: [],
      tags: {},
    });
  });

  it('keeps every identity type as given, including Default and Router', async () => {
    for (const type of ['User', 'Device', 'Service', 'Router', 'Default']) {
      const id = await createIdentity(t, admin, { name: `typed-${type}`, type });
      const e = await get(id);
      expect(e.type).toEqual(typeRef(type));
      expect(e.typeId).toBe(type);
    }
  });

  it('reads `type` as a reference to the identity type beside typeId, and `enrollment`, on every identity answer', async () => {
    const { id } = await createIdentityWithPassword(t, admin, {
      name: 'typed-reader',
      type: 'Device',
      username: 'typed-reader',
      password: 'typed-reader-1',
      roleAttributes: ['typed-readers'],
    });
    const policy = await call(t, 'POST', `${MGMT}/edge-router-policies`, {
      token: admin,
      body: { name: 'typed-readers-erp', semantic: 'AnyOf', identityRoles: ['#typed-readers'], edgeRouterRoles: [] },
    });
    expect(policy.statusCode).toBe(201);
    const own = await login(t, 'typed-reader', 'typed-reader-1');
    const answers = [
      await get(id),
      (json(await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent(`id = "${id}"`)}`, { token: admin })).data as any[])[0],
      (json(await call(t, 'GET', `${MGMT}/edge-router-policies/${json(policy).data.id}/identities`, { token: admin })).data as any[])[0],
      json(await call(t, 'GET', `${MGMT}/current-identity`, { token: own })).data,
      json(await call(t, 'GET', `/edge/client/v1/current-identity`, { token: await login(t, 'typed-reader', 'typed-reader-1', '/edge/client/v1') })).data,
    ];
    for (const answer of answers) {
      expect(answer).toMatchObject({ id, type: typeRef('Device'), typeId: 'Device', enrollment: {} });
    }
    // A client decoding the reference follows it to the type it names.
    const followed = await call(t, 'GET', `${MGMT}/${answers[0].type._links.self.href.replace(/^\.\//, '')}`, { token: admin });
    expect(json(followed).data).toMatchObject({ id: answers[0].type.id, name: answers[0].type.name });
    // The type is still filtered on by its name, as it is written.
    const filtered = json(await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent(`type = "Device" and id = "${id}"`)}`, { token: admin }));
    expect(filtered.data.map((e: { id: string }) => e.id)).toEqual([id]);
  });

  it('reports the authenticators and whether an API session exists', async () => {
    const { id, authenticatorId } = await createIdentityWithPassword(t, admin, {
      name: 'with-login',
      username: 'with-login',
      password: 'with-login-1',
    });
    let e = await get(id);
    expect(e.authenticators).toEqual({ updb: { id: authenticatorId, username: 'with-login' } });
    expect(e.hasApiSession).toBe(false);
    const token = await login(t, 'with-login', 'with-login-1');
    e = await get(id);
    expect(e.hasApiSession).toBe(true);
    expect(JSON.stringify(e)).not.toMatch(/password/i);
    await call(t, 'DELETE', `${MGMT}/current-api-session`, { token });
    expect((await get(id)).hasApiSession).toBe(false);
  });

  it('accepts null for nullable fields on create', async () => {
    const id = await createIdentity(t, admin, {
      name: 'nulls',
      authPolicyId: null,
      externalId: null,
      appData: null,
      roleAttributes: null,
      permissions: null,
      serviceHostingCosts: null,
      tags: null,
    });
    const e = await get(id);
    expect(e).toMatchObject({ authPolicyId: 'default', externalId: null, roleAttributes: [], permissions: [], serviceHostingCosts: {}, tags: {} });
  });
});

describe('validation', () => {
  const invalid: [string, Record<string, unknown>, string][] = [
    ['missing name', { type: 'User', isAdmin: false }, 'name'],
    ['empty name', { name: '', type: 'User', isAdmin: false }, 'name'],
    ['missing type', { name: 'v-1', isAdmin: false }, 'type'],
    ['unknown type', { name: 'v-1', type: 'Robot', isAdmin: false }, 'type'],
    ['missing isAdmin', { name: 'v-1', type: 'User' }, 'isAdmin'],
    ['isAdmin not a boolean', { name: 'v-1', type: 'User', isAdmin: 'yes' }, 'isAdmin'],
    ['defaultHostingCost above 65535', { name: 'v-1', type: 'User', isAdmin: false, defaultHostingCost: 65536 }, 'defaultHostingCost'],
    ['negative defaultHostingCost', { name: 'v-1', type: 'User', isAdmin: false, defaultHostingCost: -1 }, 'defaultHostingCost'],
    ['fractional defaultHostingCost', { name: 'v-1', type: 'User', isAdmin: false, defaultHostingCost: 1.5 }, 'defaultHostingCost'],
    ['string defaultHostingCost', { name: 'v-1', type: 'User', isAdmin: false, defaultHostingCost: '5' }, 'defaultHostingCost'],
    ['unknown precedence', { name: 'v-1', type: 'User', isAdmin: false, defaultHostingPrecedence: 'highest' }, 'defaultHostingPrecedence'],
    ['service cost out of range', { name: 'v-1', type: 'User', isAdmin: false, serviceHostingCosts: { s: 65536 } }, 'serviceHostingCosts.s'],
    ['service cost not an integer', { name: 'v-1', type: 'User', isAdmin: false, serviceHostingCosts: { s: 'x' } }, 'serviceHostingCosts.s'],
    ['unknown service precedence', { name: 'v-1', type: 'User', isAdmin: false, serviceHostingPrecedences: { s: 'top' } }, 'serviceHostingPrecedences.s'],
    ['roleAttributes not an array', { name: 'v-1', type: 'User', isAdmin: false, roleAttributes: 'red' }, 'roleAttributes'],
    ['appData not an object', { name: 'v-1', type: 'User', isAdmin: false, appData: [1] }, 'appData'],
    ['tags with a number', { name: 'v-1', type: 'User', isAdmin: false, tags: { n: 1 } }, 'tags.n'],
    ['enrollment ott not a boolean', { name: 'v-1', type: 'User', isAdmin: false, enrollment: { ott: 'yes' } }, 'enrollment.ott'],
    ['enrollment updb username too short', { name: 'v-1', type: 'User', isAdmin: false, enrollment: { updb: 'abc' } }, 'enrollment.updb'],
    ['enrollment ottca of no CA', { name: 'v-1', type: 'User', isAdmin: false, enrollment: { ottca: '' } }, 'enrollment.ottca'],
  ];
  it.each(invalid)('%s → 400 COULD_NOT_VALIDATE naming the field', async (_name, body, field) => {
    expectError(await call(t, 'POST', `${MGMT}/identities`, { token: admin, body }), 400, 'COULD_NOT_VALIDATE', field);
  });

  it('refuses a permission that is not in the list', async () => {
    for (const permissions of [['identity.write'], ['admin'], ['identity.read', 'bogus'], ['ops.create'], [7]]) {
      const res = await call(t, 'POST', `${MGMT}/identities`, {
        token: admin,
        body: { name: 'perm-x', type: 'User', isAdmin: false, permissions },
      });
      const body = expectError(res, 400, 'COULD_NOT_VALIDATE');
      expect(body.error.cause.field).toMatch(/^permissions/);
    }
  });

  it('accepts every listed permission', async () => {
    const groups = [
      'auth-policy', 'ca', 'config', 'config-type', 'edge-router-policy', 'enrollment', 'external-jwt-signer',
      'identity', 'posture-check', 'router', 'service', 'service-edge-router-policy', 'service-policy', 'terminator',
    ];
    const permissions = [
      'admin_readonly',
      ...groups.flatMap((g) => [g, `${g}.read`, `${g}.create`, `${g}.update`, `${g}.delete`]),
      'ops', 'ops.read', 'ops.update', 'ops.delete',
    ];
    const id = await createIdentity(t, admin, { name: 'all-permissions', permissions });
    expect((await get(id)).permissions).toEqual(permissions);
  });

  it('refuses role attributes starting with # or @', async () => {
    for (const attr of ['#red', '@someone']) {
      const res = await call(t, 'POST', `${MGMT}/identities`, {
        token: admin,
        body: { name: 'attr-x', type: 'User', isAdmin: false, roleAttributes: [attr] },
      });
      const body = expectError(res, 400, 'COULD_NOT_VALIDATE');
      expect(body.error.cause.field).toMatch(/^roleAttributes/);
    }
  });

  it('refuses an unknown authPolicyId with 400 REFERENCED_ENTITY_NOT_FOUND', async () => {
    const res = await call(t, 'POST', `${MGMT}/identities`, {
      token: admin,
      body: { name: 'bad-policy', type: 'User', isAdmin: false, authPolicyId: 'no-such-policy' },
    });
    expectError(res, 400, 'REFERENCED_ENTITY_NOT_FOUND', 'authPolicyId');
    const id = await createIdentity(t, admin, { name: 'bad-policy-later' });
    expectError(
      await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { authPolicyId: 'no-such-policy' } }),
      400,
      'REFERENCED_ENTITY_NOT_FOUND',
      'authPolicyId',
    );
  });

  it('refuses a duplicate name or externalId', async () => {
    await createIdentity(t, admin, { name: 'dup-name', externalId: 'dup-ext' });
    expectError(
      await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: 'dup-name', type: 'User', isAdmin: false } }),
      400,
      'COULD_NOT_VALIDATE',
      'name',
    );
    expectError(
      await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: 'dup-name-2', type: 'User', isAdmin: false, externalId: 'dup-ext' } }),
      400,
      'COULD_NOT_VALIDATE',
      'externalId',
    );
    const other = await createIdentity(t, admin, { name: 'dup-name-3' });
    expectError(
      await call(t, 'PATCH', `${MGMT}/identities/${other}`, { token: admin, body: { name: 'dup-name' } }),
      400,
      'COULD_NOT_VALIDATE',
      'name',
    );
  });

  it('refuses malformed JSON', async () => {
    const res = await call(t, 'POST', `${MGMT}/identities`, {
      token: admin,
      body: '{"name": "x",',
      headers: { 'content-type': 'application/json' },
    });
    expectError(res, 400, 'COULD_NOT_PARSE_BODY');
  });
});

describe('patch, full update and delete', () => {
  it('patch changes only the supplied fields; null clears nullable ones', async () => {
    const id = await createIdentity(t, admin, {
      name: 'patch-me',
      externalId: 'patch-ext',
      appData: { a: 1 },
      roleAttributes: ['one'],
      authPolicyId: policyId,
      defaultHostingCost: 5,
      tags: { k: 'v' },
    });
    t.clock.advance(1_000);
    const res = await call(t, 'PATCH', `${MGMT}/identities/${id}`, {
      token: admin,
      body: { roleAttributes: ['two', 'three'], defaultHostingPrecedence: 'failed' },
    });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    let e = await get(id);
    expect(e).toMatchObject({
      name: 'patch-me',
      externalId: 'patch-ext',
      appData: { a: 1 },
      roleAttributes: ['two', 'three'],
      defaultHostingPrecedence: 'failed',
      defaultHostingCost: 5,
      authPolicyId: policyId,
      tags: { k: 'v' },
      updatedAt: new Date(t.clock()).toISOString(),
    });
    expect(e.createdAt).not.toBe(e.updatedAt);

    await call(t, 'PATCH', `${MGMT}/identities/${id}`, {
      token: admin,
      body: { externalId: null, appData: null, authPolicyId: null, tags: null },
    });
    e = await get(id);
    expect(e).toMatchObject({ externalId: null, authPolicyId: 'default', tags: {} });
    expect(e.appData).toEqual({});
  });

  it('patch validates like create', async () => {
    const id = await createIdentity(t, admin, { name: 'patch-invalid' });
    for (const [body, field] of [
      [{ defaultHostingCost: 65536 }, 'defaultHostingCost'],
      [{ type: 'Robot' }, 'type'],
      [{ name: '' }, 'name'],
      [{ isAdmin: 'no' }, 'isAdmin'],
      [{ permissions: ['nope'] }, 'permissions[0]'],
    ] as const) {
      expectError(await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body }), 400, 'COULD_NOT_VALIDATE', field);
    }
    expect((await get(id)).name).toBe('patch-invalid');
  });

  it('full update requires name, type and isAdmin and resets absent optional fields', async () => {
    const id = await createIdentity(t, admin, {
      name: 'put-me',
      externalId: 'put-ext',
      roleAttributes: ['a'],
      defaultHostingCost: 7,
      permissions: ['identity'],
      authPolicyId: policyId,
    });
    for (const [body, field] of [
      [{ type: 'User', isAdmin: false }, 'name'],
      [{ name: 'put-me', isAdmin: false }, 'type'],
      [{ name: 'put-me', type: 'User' }, 'isAdmin'],
    ] as const) {
      expectError(await call(t, 'PUT', `${MGMT}/identities/${id}`, { token: admin, body }), 400, 'COULD_NOT_VALIDATE', field);
    }
    const res = await call(t, 'PUT', `${MGMT}/identities/${id}`, {
      token: admin,
      body: { name: 'put-me-2', type: 'Service', isAdmin: false, roleAttributes: ['b'] },
    });
    expect(res.statusCode).toBe(200);
    const e = await get(id);
    expect(e).toMatchObject({
      name: 'put-me-2',
      type: typeRef('Service'),
      typeId: 'Service',
      roleAttributes: ['b'],
      externalId: null,
      defaultHostingCost: 0,
      permissions: [],
      authPolicyId: 'default',
      tags: {},
    });
  });

  it('enrollment is refused on patch and full update too (or ignored, never stored)', async () => {
    const id = await createIdentity(t, admin, { name: 'enroll-later' });
    const res = await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { enrollment: { ott: true } } });
    expect([200, 400]).toContain(res.statusCode);
    expect((await get(id)).enrollment).toEqual({});
  });

  it('delete removes the identity, its authenticators and its sessions at once', async () => {
    const { id, authenticatorId } = await createIdentityWithPassword(t, admin, {
      name: 'delete-me',
      username: 'delete-me',
      password: 'delete-me-1',
    });
    const token = await login(t, 'delete-me', 'delete-me-1');
    const res = await call(t, 'DELETE', `${MGMT}/identities/${id}`, { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    expectError(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin }), 404, 'NOT_FOUND');
    expectError(await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin }), 404, 'NOT_FOUND');
    const after = await call(t, 'GET', `/edge/client/v1/current-identity`, { token });
    expectError(after, 401, 'UNAUTHORIZED');
    expect(after.headers['www-authenticate']).toBe(CHALLENGE_SESSION_INVALID);
    expectError(await authenticate(t, 'delete-me', 'delete-me-1', { remoteAddress: '10.2.0.1' }), 401, 'INVALID_AUTH');
    const sessions = json(await call(t, 'GET', `${MGMT}/api-sessions?filter=${encodeURIComponent(`identityId = "${id}"`)}`, { token: admin }));
    expect(sessions.meta.pagination.totalCount).toBe(0);
  });
});

describe('list', () => {
  beforeAll(async () => {
    for (const [name, roleAttributes, type] of [
      ['flt-a', ['x', 'y'], 'User'],
      ['flt-b', ['y'], 'Device'],
      ['flt-c', ['x'], 'Device'],
      ['flt-d', [], 'Service'],
    ] as const) {
      await createIdentity(t, admin, { name, roleAttributes, type });
    }
  });

  const names = (body: { data: { name: string }[] }) => body.data.map((i) => i.name);
  const list = async (query: string) => {
    const res = await call(t, 'GET', `${MGMT}/identities?${query}`, { token: admin });
    expect(res.statusCode, res.body).toBe(200);
    return json(res);
  };
  const q = (filter: string) => `filter=${encodeURIComponent(filter)}`;

  it('filters, sorts and pages; totalCount counts every match', async () => {
    const body = await list(`${q('name contains "flt-"')}&sort=${encodeURIComponent('name desc')}&limit=2&offset=1`);
    expect(names(body)).toEqual(['flt-c', 'flt-b']);
    expect(body.meta.pagination).toEqual({ limit: 2, offset: 1, totalCount: 4 });
    expect(body.meta.filterableFields).toEqual(expect.arrayContaining(['id', 'createdAt', 'updatedAt', 'tags', 'name', 'type', 'isAdmin', 'roleAttributes']));
    expect(body.meta.filterableFields).not.toContain('appData');
    expect(body.meta.filterableFields).not.toContain('enrollment');
  });

  it('takes sort, skip and limit from inside the filter', async () => {
    const body = await list(q('name contains "flt-" sort by name asc skip 1 limit 2'));
    expect(names(body)).toEqual(['flt-b', 'flt-c']);
    expect(body.meta.pagination).toEqual({ limit: 2, offset: 1, totalCount: 4 });
  });

  it('filters on sets, enums and booleans', async () => {
    expect(names(await list(`${q('anyOf(roleAttributes) = "x" and name contains "flt-"')}&sort=name`))).toEqual(['flt-a', 'flt-c']);
    expect(names(await list(`${q('type = "Device" and name contains "flt-"')}&sort=name`))).toEqual(['flt-b', 'flt-c']);
    expect(names(await list(`${q('isEmpty(roleAttributes) and name contains "flt-"')}`))).toEqual(['flt-d']);
    const admins = await list(q('isAdmin = true'));
    expect(admins.data.every((i: { isAdmin: boolean }) => i.isAdmin)).toBe(true);
    expect(admins.meta.pagination.totalCount).toBeGreaterThanOrEqual(1);
  });

  // behaviour.md §3: clients send `true` to mean "no condition".
  it('takes true (or false) alone as the whole condition', async () => {
    const every = await list('limit=500');
    const total = every.meta.pagination.totalCount;
    expect(total).toBeGreaterThanOrEqual(5);
    for (const filter of ['true', 'TRUE', 'not false', 'true limit none']) {
      const body = await list(`limit=500&${q(filter)}`);
      expect(body.meta.pagination.totalCount, filter).toBe(total);
      expect(body.data.map((i: { id: string }) => i.id), filter).toEqual(every.data.map((i: { id: string }) => i.id));
    }
    expect(names(await list(q('true sort by name limit 100'))).filter((n) => n.startsWith('flt-'))).toEqual(['flt-a', 'flt-b', 'flt-c', 'flt-d']);
    expect((await list(q('true sort by name limit 100'))).meta.pagination).toEqual({ limit: 100, offset: 0, totalCount: total });
    expect(names(await list(`${q('true and name contains "flt-"')}&sort=name`))).toEqual(['flt-a', 'flt-b', 'flt-c', 'flt-d']);
    const none = await list(q('false'));
    expect(none.data).toEqual([]);
    expect(none.meta.pagination.totalCount).toBe(0);
  });

  it('defaults to limit 10, offset 0 and id order', async () => {
    const body = await list('');
    expect(body.meta.pagination.limit).toBe(10);
    expect(body.meta.pagination.offset).toBe(0);
    const ids = body.data.map((i: { id: string }) => i.id);
    expect(ids).toEqual([...ids].sort());
    expect(body.data.length).toBe(Math.min(10, body.meta.pagination.totalCount));
  });

  it('refuses bad filters, sorts and paging', async () => {
    expectError(await call(t, 'GET', `${MGMT}/identities?${q('name = ')}`, { token: admin }), 400, 'INVALID_FILTER');
    expectError(await call(t, 'GET', `${MGMT}/identities?${q('true = true')}`, { token: admin }), 400, 'INVALID_FILTER', 'filter');
    expectError(await call(t, 'GET', `${MGMT}/identities?${q('nope = "x"')}`, { token: admin }), 400, 'INVALID_FILTER');
    expectError(await call(t, 'GET', `${MGMT}/identities?${q('appData = "x"')}`, { token: admin }), 400, 'INVALID_FILTER');
    expectError(await call(t, 'GET', `${MGMT}/identities?limit=abc`, { token: admin }), 400, 'INVALID_PAGINATION');
    expectError(await call(t, 'GET', `${MGMT}/identities?offset=1.5`, { token: admin }), 400, 'INVALID_PAGINATION', 'offset');
    expectError(await call(t, 'GET', `${MGMT}/identities?sort=nope`, { token: admin }), 400, 'INVALID_SORT_IDENTIFIER');
  });

  it('never shows an authenticator secret', async () => {
    const res = await call(t, 'GET', `${MGMT}/identities?limit=500`, { token: admin });
    expect(res.body).not.toMatch(/password|\$argon2/i);
  });
});

describe('identity types', () => {
  it('lists exactly User, Device, Service, Router and Default', async () => {
    const res = await call(t, 'GET', `${MGMT}/identity-types`, { token: admin });
    expect(res.statusCode).toBe(200);
    const body = json(res);
    expect(body.data.map((x: { name: string }) => x.name).sort()).toEqual(['Default', 'Device', 'Router', 'Service', 'User']);
    expect(body.data.map((x: { id: string }) => x.id).sort()).toEqual(['Default', 'Device', 'Router', 'Service', 'User']);
    expect(body.meta.pagination.totalCount).toBe(5);
  });

  it('answers one type by id', async () => {
    const res = await call(t, 'GET', `${MGMT}/identity-types/User`, { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toMatchObject({ id: 'User', name: 'User', _links: { self: { href: './identity-types/User' } } });
  });

  it('the list filters and refuses bad filters', async () => {
    const body = json(await call(t, 'GET', `${MGMT}/identity-types?filter=${encodeURIComponent('name in ["User", "Router"]')}&sort=name`, { token: admin }));
    expect(body.data.map((x: { id: string }) => x.id)).toEqual(['Router', 'User']);
    expectError(await call(t, 'GET', `${MGMT}/identity-types?filter=${encodeURIComponent('nope = "x"')}`, { token: admin }), 400, 'INVALID_FILTER');
  });

  it('has no write routes (405: the paths only read)', async () => {
    const body = { name: 'Robot' };
    expectError(await call(t, 'POST', `${MGMT}/identity-types`, { token: admin, body }), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call(t, 'PUT', `${MGMT}/identity-types/User`, { token: admin, body }), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call(t, 'PATCH', `${MGMT}/identity-types/User`, { token: admin, body }), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call(t, 'DELETE', `${MGMT}/identity-types/User`, { token: admin }), 405, 'METHOD_NOT_ALLOWED');
  });
});

describe('GET /identities/{id}/authenticators', () => {
  it("lists the identity's authenticators without secrets", async () => {
    const { id, authenticatorId } = await createIdentityWithPassword(t, admin, {
      name: 'auth-list',
      username: 'auth-list',
      password: 'auth-list-secret',
    });
    await createIdentityWithPassword(t, admin, { name: 'auth-list-other', username: 'auth-list-other', password: 'other-secret' });
    const res = await call(t, 'GET', `${MGMT}/identities/${id}/authenticators`, { token: admin });
    expect(res.statusCode).toBe(200);
    const body = json(res);
    expect(body.data).toHaveLength(1);
    expect(body.data[0]).toMatchObject({
      id: authenticatorId,
      method: 'updb',
      username: 'auth-list',
      identityId: id,
      identity: { entity: 'identities', id, name: 'auth-list' },
    });
    expect(body.data[0]).not.toHaveProperty('password');
    expect(body.data[0]).not.toHaveProperty('passwordHash');
    expect(res.body).not.toMatch(/auth-list-secret|\$argon2/);
  });

  it('an identity without authenticators has an empty list', async () => {
    const id = await createIdentity(t, admin, { name: 'no-auths' });
    expect(json(await call(t, 'GET', `${MGMT}/identities/${id}/authenticators`, { token: admin })).data).toEqual([]);
  });
});

describe('disable and enable', () => {
  const base = (id: string) => `${MGMT}/identities/${id}`;

  it('durationMinutes 0: live sessions are refused at once and logins fail until enabled', async () => {
    await freshAdmin();
    const { id } = await createIdentityWithPassword(t, admin, { name: 'dis-0', username: 'dis-0', password: 'dis-0-pass' });
    const token = await login(t, 'dis-0', 'dis-0-pass');
    const now = t.clock();
    const res = await call(t, 'POST', `${base(id)}/disable`, { token: admin, body: { durationMinutes: 0 } });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});

    const refused = await call(t, 'GET', '/edge/client/v1/current-identity', { token });
    expectError(refused, 401, 'UNAUTHORIZED');
    expect(refused.headers['www-authenticate']).toBe(CHALLENGE_SESSION_INVALID);
    expectError(await authenticate(t, 'dis-0', 'dis-0-pass', { remoteAddress: '10.3.0.1' }), 401, 'INVALID_AUTH');
    expect(await get(id)).toMatchObject({ disabled: true, disabledAt: new Date(now).toISOString(), disabledUntil: null });

    t.clock.advance(365 * 24 * 60 * MINUTE);
    await freshAdmin();
    expectError(await authenticate(t, 'dis-0', 'dis-0-pass', { remoteAddress: '10.3.0.1' }), 401, 'INVALID_AUTH');

    expect((await call(t, 'POST', `${base(id)}/enable`, { token: admin })).statusCode).toBe(200);
    expect(await get(id)).toMatchObject({ disabled: false, disabledAt: null, disabledUntil: null });
    const again = await login(t, 'dis-0', 'dis-0-pass');
    expect((await call(t, 'GET', '/edge/client/v1/current-identity', { token: again })).statusCode).toBe(200);
    // The session live when it was disabled was ended with it: a stolen one stays dead after enabling.
    expect((await call(t, 'GET', '/edge/client/v1/current-identity', { token })).statusCode).toBe(401);
  });

  it('durationMinutes 10: re-enabled when the time has passed', async () => {
    await freshAdmin();
    const { id } = await createIdentityWithPassword(t, admin, { name: 'dis-10', username: 'dis-10', password: 'dis-10-pass' });
    const token = await login(t, 'dis-10', 'dis-10-pass');
    const now = t.clock();
    expect((await call(t, 'POST', `${base(id)}/disable`, { token: admin, body: { durationMinutes: 10 } })).statusCode).toBe(200);
    expect(await get(id)).toMatchObject({ disabled: true, disabledUntil: new Date(now + 10 * MINUTE).toISOString() });
    expect((await call(t, 'GET', '/edge/client/v1/current-identity', { token })).statusCode).toBe(401);
    expectError(await authenticate(t, 'dis-10', 'dis-10-pass', { remoteAddress: '10.3.0.2' }), 401, 'INVALID_AUTH');

    t.clock.advance(9 * MINUTE);
    expectError(await authenticate(t, 'dis-10', 'dis-10-pass', { remoteAddress: '10.3.0.2' }), 401, 'INVALID_AUTH');
    expect((await get(id)).disabled).toBe(true);
    t.clock.advance(1 * MINUTE);
    // Its time passed: it reads as enabled (it read disabled: true until the next write).
    expect(await get(id)).toMatchObject({ disabled: false, disabledUntil: new Date(now + 10 * MINUTE).toISOString() });
    const fresh = await login(t, 'dis-10', 'dis-10-pass');
    expect((await call(t, 'GET', '/edge/client/v1/current-identity', { token: fresh })).statusCode).toBe(200);
    // The session that was live when it was disabled ended with it, as in the established controller.
    expect((await call(t, 'GET', '/edge/client/v1/current-identity', { token })).statusCode).toBe(401);
  });

  it('enable of an identity that is not disabled is harmless', async () => {
    const id = await createIdentity(t, admin, { name: 'never-disabled' });
    expect((await call(t, 'POST', `${base(id)}/enable`, { token: admin })).statusCode).toBe(200);
    expect((await get(id)).disabled).toBe(false);
  });

  it('refuses a bad body', async () => {
    const id = await createIdentity(t, admin, { name: 'dis-bad' });
    for (const body of [{}, { durationMinutes: -1 }, { durationMinutes: 'ten' }, { durationMinutes: 1.5 }]) {
      expectError(await call(t, 'POST', `${base(id)}/disable`, { token: admin, body }), 400, 'COULD_NOT_VALIDATE', 'durationMinutes');
    }
    expectError(await call(t, 'POST', `${base(id)}/disable`, { token: admin }), 400, 'COULD_NOT_VALIDATE');
    expect((await get(id)).disabled).toBe(false);
  });

  it('unknown ids are 404', async () => {
    expectError(await call(t, 'POST', `${base('nope')}/disable`, { token: admin, body: { durationMinutes: 0 } }), 404, 'NOT_FOUND');
    expectError(await call(t, 'POST', `${base('nope')}/enable`, { token: admin }), 404, 'NOT_FOUND');
  });

  it('a disabled admin loses admin access at once', async () => {
    await freshAdmin();
    const { id } = await createIdentityWithPassword(t, admin, { name: 'dis-admin', isAdmin: true, username: 'dis-admin', password: 'dis-admin-1' });
    const token = await login(t, 'dis-admin', 'dis-admin-1');
    expect((await call(t, 'GET', `${MGMT}/identities`, { token })).statusCode).toBe(200);
    await call(t, 'POST', `${base(id)}/disable`, { token: admin, body: { durationMinutes: 0 } });
    expectError(await call(t, 'GET', `${MGMT}/identities`, { token }), 401, 'UNAUTHORIZED');
  });
});
