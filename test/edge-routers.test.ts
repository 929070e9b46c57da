// Edge routers on the Management API: fields and their validation, router configs, lists with
// roleFilter, permissions, and the system identity and system edge router policy of a
// tunneler-enabled edge router.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  createIdentity,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  startTestController,
  type TestController,
} from './helpers.js';

let t: TestController;
let admin: string;
let routerConfigId: string;
let otherRouterConfigId: string;
let serviceConfigId: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  // Config types and configs through the resource services: their routes are not this file's subject.
  const r = t.app.core.resources;
  const routerType = await r.get('config-types').create({ name: 'er-router-type', schema: { type: 'object' }, target: 'router' });
  const serviceType = await r.get('config-types').create({ name: 'er-service-type', schema: { type: 'object' }, target: 'service' });
  routerConfigId = (await r.get('configs').create({ name: 'er-router-config', configTypeId: routerType.id, data: { a: 1 } })).id;
  otherRouterConfigId = (await r.get('configs').create({ name: 'er-router-config-2', configTypeId: routerType.id, data: { a: 2 } })).id;
  serviceConfigId = (await r.get('configs').create({ name: 'er-service-config', configTypeId: serviceType.id, data: { b: 2 } })).id;
});
afterAll(async () => {
  await t.close();
});

const URL = `${MGMT}/edge-routers`;

async function createRouter(body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', URL, { token: admin, body });
  if (res.statusCode !== 201) throw new Error(`creating edge router failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

async function get(id: string): Promise<any> {
  const res = await call(t, 'GET', `${URL}/${id}`, { token: admin });
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
}

const db = () => t.app.core.store.db;

describe('create and read', () => {
  it('round-trips every writable field and answers the read-only ones', async () => {
    const body = {
      name: 'er-full',
      cost: 65535,
      disabled: true,
      isTunnelerEnabled: false,
      noTraversal: true,
      roleAttributes: ['edge', 'east'],
      configs: [routerConfigId],
      appData: { region: 'eu', nested: { n: [1, 2] } },
      ctrlChanListeners: { 'tls:0.0.0.0:6262': ['default'] },
      tags: { owner: 'net', pinned: true, none: null },
    };
    const now = t.clock();
    const res = await call(t, 'POST', URL, { token: admin, body });
    expect(res.statusCode).toBe(201);
    const created = json(res).data;
    expect(created).toEqual({ id: created.id, _links: { self: { href: `./edge-routers/${created.id}` } } });
    const e = await get(created.id);
    expect(e).toMatchObject({
      ...body,
      id: created.id,
      createdAt: new Date(now).toISOString(),
      updatedAt: new Date(now).toISOString(),
      fingerprint: null,
      hostname: '',
      isOnline: false,
      isVerified: false,
      supportedProtocols: {},
      // not connected: the sync state is unknown, as the established controller says of such a router
      syncStatus: 'SYNC_UNKNOWN',
    });
    expect(e._links).toEqual({
      self: { href: `./edge-routers/${created.id}` },
      'edge-router-policies': { href: `./edge-routers/${created.id}/edge-router-policies` },
    });
    // Created unverified, with an enrollment outstanding (router-enroll.test.ts); its secrets stay inside.
    expect(e).toMatchObject({ enrollmentCreatedAt: new Date(now).toISOString(), enrollmentJwt: expect.any(String), enrollmentToken: expect.any(String) });
    for (const f of ['enrollmentTokenHash', 'enrollmentSealedJwt']) expect(e).not.toHaveProperty(f);
  });

  it('fills defaults; null stores the default', async () => {
    const id = await createRouter({ name: 'er-defaults' });
    expect(await get(id)).toMatchObject({
      cost: 0,
      disabled: false,
      isTunnelerEnabled: false,
      noTraversal: false,
      roleAttributes: [],
      configs: [],
      // none given reads as no data, an object, as the established controller reads it
      appData: {},
      ctrlChanListeners: null,
      tags: {},
    });
    expect((await get(id)).appData).toEqual({});
    const nulls = await createRouter({ name: 'er-nulls', cost: null, disabled: null, noTraversal: null, roleAttributes: null, configs: null, appData: null, tags: null });
    expect(await get(nulls)).toMatchObject({ cost: 0, disabled: false, noTraversal: false, roleAttributes: [], configs: [], appData: {}, tags: {} });
    expect((await get(nulls)).appData).toEqual({});
  });

  it('ignores read-only fields on writes', async () => {
    const id = await createRouter({
      name: 'er-readonly',
      isOnline: true,
      isVerified: true,
      fingerprint: 'ff',
      hostname: 'h',
      supportedProtocols: { tls: 'x' },
      syncStatus: 'SYNC_DONE',
    });
    expect(await get(id)).toMatchObject({ isOnline: false, isVerified: false, fingerprint: null, hostname: '', supportedProtocols: {}, syncStatus: 'SYNC_UNKNOWN' });
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { syncStatus: 'SYNC_DONE' } })).statusCode).toBe(200);
    expect((await get(id)).syncStatus).toBe('SYNC_UNKNOWN');
  });
});

describe('validation', () => {
  const invalid: [string, Record<string, unknown>, string][] = [
    ['missing name', {}, 'name'],
    ['empty name', { name: '' }, 'name'],
    ['cost above 65535', { name: 'v', cost: 65536 }, 'cost'],
    ['negative cost', { name: 'v', cost: -1 }, 'cost'],
    ['fractional cost', { name: 'v', cost: 2.5 }, 'cost'],
    ['string cost', { name: 'v', cost: '5' }, 'cost'],
    ['disabled not a boolean', { name: 'v', disabled: 'no' }, 'disabled'],
    ['isTunnelerEnabled not a boolean', { name: 'v', isTunnelerEnabled: 1 }, 'isTunnelerEnabled'],
    ['isTunnelerEnabled null', { name: 'v', isTunnelerEnabled: null }, 'isTunnelerEnabled'],
    ['noTraversal not a boolean', { name: 'v', noTraversal: 'yes' }, 'noTraversal'],
    ['role attribute starting with #', { name: 'v', roleAttributes: ['#x'] }, 'roleAttributes[0]'],
    ['roleAttributes not an array', { name: 'v', roleAttributes: 'x' }, 'roleAttributes'],
    ['configs not an array', { name: 'v', configs: 'x' }, 'configs'],
    ['appData not an object', { name: 'v', appData: [1] }, 'appData'],
    ['ctrlChanListeners not an object', { name: 'v', ctrlChanListeners: 'tls:1' }, 'ctrlChanListeners'],
    ['ctrlChanListeners with groups not a list', { name: 'v', ctrlChanListeners: { 'tls:0.0.0.0:6262': 'default' } }, 'ctrlChanListeners.tls:0.0.0.0:6262'],
    ['ctrlChanListeners with a group not a string', { name: 'v', ctrlChanListeners: { 'tls:0.0.0.0:6262': [5] } }, 'ctrlChanListeners.tls:0.0.0.0:6262[0]'],
    ['tags with a number', { name: 'v', tags: { n: 1 } }, 'tags.n'],
  ];
  it.each(invalid)('%s → 400 COULD_NOT_VALIDATE naming the field', async (_name, body, field) => {
    expectError(await call(t, 'POST', URL, { token: admin, body }), 400, 'COULD_NOT_VALIDATE', field);
  });

  it('configs must exist (REFERENCED_ENTITY_NOT_FOUND) and target routers', async () => {
    expectError(await call(t, 'POST', URL, { token: admin, body: { name: 'v-cfg', configs: ['no-such-config'] } }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'configs');
    expectError(await call(t, 'POST', URL, { token: admin, body: { name: 'v-cfg', configs: [routerConfigId, serviceConfigId] } }), 400, 'COULD_NOT_VALIDATE', 'configs');
    const id = await createRouter({ name: 'v-cfg', configs: [routerConfigId] });
    expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { configs: [serviceConfigId] } }), 400, 'COULD_NOT_VALIDATE', 'configs');
    expect((await get(id)).configs).toEqual([routerConfigId]);
  });

  it('filters name configs, as the established controller lets them', async () => {
    const id = await createRouter({ name: 'v-cfg-filter', configs: [otherRouterConfigId] });
    const res = await call(t, 'GET', `${URL}?filter=${encodeURIComponent(`anyOf(configs) = "${otherRouterConfigId}"`)}`, { token: admin });
    expect(json(res).data.map((e: any) => e.id)).toEqual([id]);
    expect(json(res).meta.filterableFields).toContain('configs');
  });

  it('configs hold at most one config per config type; an id named twice is refused', async () => {
    const two = await call(t, 'POST', URL, { token: admin, body: { name: 'v-cfg-two', configs: [routerConfigId, otherRouterConfigId] } });
    const body = expectError(two, 400, 'COULD_NOT_VALIDATE', 'configs');
    expect(body.error.cause.reason).toContain('er-router-type');
    expect(body.error.cause.value).toBe(otherRouterConfigId);
    expectError(await call(t, 'POST', URL, { token: admin, body: { name: 'v-cfg-two', configs: [routerConfigId, routerConfigId] } }), 400, 'COULD_NOT_VALIDATE', 'configs');
    const id = await createRouter({ name: 'v-cfg-two', configs: [routerConfigId] });
    for (const configs of [[otherRouterConfigId, routerConfigId], [otherRouterConfigId, otherRouterConfigId]]) {
      expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { configs } }), 400, 'COULD_NOT_VALIDATE', 'configs');
    }
    expect((await get(id)).configs).toEqual([routerConfigId]);
  });

  it('refuses a duplicate name', async () => {
    await createRouter({ name: 'er-dup' });
    expectError(await call(t, 'POST', URL, { token: admin, body: { name: 'er-dup' } }), 400, 'COULD_NOT_VALIDATE', 'name');
  });
});

describe('patch, full update, delete', () => {
  it('patch changes only the supplied fields', async () => {
    const id = await createRouter({ name: 'er-patch', cost: 5, roleAttributes: ['a'], appData: { x: 1 }, tags: { k: 'v' } });
    t.clock.advance(1000);
    const res = await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { cost: 7, noTraversal: true } });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    expect(await get(id)).toMatchObject({ name: 'er-patch', cost: 7, noTraversal: true, roleAttributes: ['a'], appData: { x: 1 }, tags: { k: 'v' }, updatedAt: new Date(t.clock()).toISOString() });
    expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { cost: 70000 } }), 400, 'COULD_NOT_VALIDATE', 'cost');
  });

  it('full update requires the name and resets absent fields', async () => {
    const id = await createRouter({ name: 'er-put', cost: 5, roleAttributes: ['a'], configs: [routerConfigId], appData: { x: 1 } });
    expectError(await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { cost: 1 } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: 'er-put-2', disabled: true } })).statusCode).toBe(200);
    expect(await get(id)).toMatchObject({ name: 'er-put-2', cost: 0, disabled: true, roleAttributes: [], configs: [], appData: {} });
    expect((await get(id)).appData).toEqual({});
  });

  it('delete removes it; unknown ids are 404', async () => {
    const id = await createRouter({ name: 'er-delete' });
    const res = await call(t, 'DELETE', `${URL}/${id}`, { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    const url = `${URL}/${id}`;
    expectError(await call(t, 'GET', url, { token: admin }), 404, 'NOT_FOUND');
    expectError(await call(t, 'PATCH', url, { token: admin, body: { cost: 1 } }), 404, 'NOT_FOUND');
    expectError(await call(t, 'PUT', url, { token: admin, body: { name: 'x' } }), 404, 'NOT_FOUND');
    expectError(await call(t, 'DELETE', url, { token: admin }), 404, 'NOT_FOUND');
  });

  it('deleting an edge router removes its terminators', async () => {
    const id = await createRouter({ name: 'er-with-terminators' });
    const service = await t.app.core.resources.get('services').create({ name: 'er-term-service' });
    const res = await call(t, 'POST', `${MGMT}/terminators`, { token: admin, body: { service: service.id, router: id, address: 'tcp:a:1', binding: 'transport' } });
    expect(res.statusCode, res.body).toBe(201);
    const terminator = json(res).data.id as string;
    await call(t, 'DELETE', `${URL}/${id}`, { token: admin });
    expectError(await call(t, 'GET', `${MGMT}/terminators/${terminator}`, { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('list', () => {
  beforeAll(async () => {
    await createRouter({ name: 'erl-a', roleAttributes: ['x', 'y'], cost: 3 });
    await createRouter({ name: 'erl-b', roleAttributes: ['y'], cost: 2 });
    await createRouter({ name: 'erl-c', roleAttributes: ['x'], cost: 1 });
  });
  const list = async (query: string) => {
    const res = await call(t, 'GET', `${URL}?${query}`, { token: admin });
    expect(res.statusCode, res.body).toBe(200);
    return json(res);
  };
  const names = (body: any) => body.data.map((e: { name: string }) => e.name);
  const q = (f: string) => `filter=${encodeURIComponent(f)}`;

  it('filters, sorts and pages', async () => {
    const body = await list(`${q('name contains "erl-"')}&sort=cost&limit=2`);
    expect(names(body)).toEqual(['erl-c', 'erl-b']);
    expect(body.data.map((e: { syncStatus: string }) => e.syncStatus)).toEqual(['SYNC_UNKNOWN', 'SYNC_UNKNOWN']);
    expect(body.meta.pagination).toEqual({ limit: 2, offset: 0, totalCount: 3 });
    expect(body.meta.filterableFields).toEqual(
      expect.arrayContaining(['id', 'name', 'cost', 'disabled', 'isTunnelerEnabled', 'noTraversal', 'roleAttributes', 'fingerprint', 'hostname', 'isOnline', 'isVerified', 'syncStatus']),
    );
    expect(body.meta.filterableFields).not.toContain('appData');
    expect(names(await list(`${q('name contains "erl-" and syncStatus = "SYNC_DONE"')}`))).toEqual([]);
  });

  it('takes roleFilter and roleSemantic', async () => {
    const roles = (...r: string[]) => r.map((x) => `roleFilter=${encodeURIComponent(x)}`).join('&');
    expect(names(await list(`${roles('#x', '#y')}&sort=name`))).toEqual(['erl-a']);
    expect(names(await list(`${roles('#x', '#y')}&roleSemantic=AnyOf&sort=name`))).toEqual(['erl-a', 'erl-b', 'erl-c']);
    expect(names(await list(`${roles('#x')}&${q('cost > 1')}&sort=name`))).toEqual(['erl-a']);
    expectError(await call(t, 'GET', `${URL}?roleFilter=x`, { token: admin }), 400, 'COULD_NOT_VALIDATE', 'roleFilter');
    expectError(await call(t, 'GET', `${URL}?roleFilter=%23x&roleSemantic=Some`, { token: admin }), 400, 'COULD_NOT_VALIDATE', 'roleSemantic');
  });

  it('refuses bad filters and sorts', async () => {
    expectError(await call(t, 'GET', `${URL}?${q('appData = "x"')}`, { token: admin }), 400, 'INVALID_FILTER');
    expectError(await call(t, 'GET', `${URL}?sort=nope`, { token: admin }), 400, 'INVALID_SORT_IDENTIFIER');
  });
});

describe('who may call', () => {
  let id: string;
  let none: string;
  let router: string;
  let readOnly: string;
  beforeAll(async () => {
    id = await createRouter({ name: 'er-auth' });
    await createIdentityWithPassword(t, admin, { name: 'er-none', username: 'er-none', password: 'er-none-1', permissions: ['service'] });
    await createIdentityWithPassword(t, admin, { name: 'er-router', username: 'er-router', password: 'er-router-1', permissions: ['router'] });
    await createIdentityWithPassword(t, admin, { name: 'er-read', username: 'er-read', password: 'er-read-1', permissions: ['router.read'] });
    none = await login(t, 'er-none', 'er-none-1');
    router = await login(t, 'er-router', 'er-router-1');
    readOnly = await login(t, 'er-read', 'er-read-1');
  });

  const routes = (): [string, string, unknown?][] => [
    ['GET', URL],
    ['GET', `${URL}/${id}`],
    ['POST', URL, { name: 'er-auth-new' }],
    ['PATCH', `${URL}/${id}`, { cost: 2 }],
    ['PUT', `${URL}/${id}`, { name: 'er-auth' }],
    ['DELETE', `${URL}/${id}`],
  ];

  it('a non-admin without the router permission: 401', async () => {
    for (const [method, url, body] of routes()) expectError(await call(t, method as 'GET', url, { token: none, body }), 401, 'UNAUTHORIZED');
  });

  it('router.read reads only; router does everything', async () => {
    expect((await call(t, 'GET', URL, { token: readOnly })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${URL}/${id}`, { token: readOnly })).statusCode).toBe(200);
    expectError(await call(t, 'POST', URL, { token: readOnly, body: { name: 'er-auth-ro' } }), 401, 'UNAUTHORIZED');
    const expected = [200, 200, 201, 200, 200, 200];
    for (const [i, [method, url, body]] of routes().entries()) {
      const res = await call(t, method as 'GET', url, { token: router, body });
      expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(expected[i]);
    }
  });
});

describe('tunneler-enabled edge routers', () => {
  const systemPolicy = async (routerId: string) => {
    const filter = encodeURIComponent(`name = "edge-router-${routerId}-system"`);
    const res = await call(t, 'GET', `${MGMT}/edge-router-policies?filter=${filter}`, { token: admin });
    expect(res.statusCode, res.body).toBe(200);
    return json(res).data[0] as any;
  };
  const identityStatus = async (id: string) => (await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).statusCode;
  const links = async (table: string, column: string, value: string) =>
    (await db().selectFrom(table).selectAll().where(column, '=', value).execute()) as Record<string, string>[];

  it('creating one creates its system identity and system edge router policy, linked to both', async () => {
    const id = await createRouter({ name: 'tun-1', isTunnelerEnabled: true, roleAttributes: ['tun'] });
    const identity = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data;
    expect(identity).toMatchObject({ id, name: 'tun-1', type: { entity: 'identity-types', id: 'Router' }, typeId: 'Router', isAdmin: false, authPolicyId: 'default', roleAttributes: [] });

    const policy = await systemPolicy(id);
    expect(policy).toMatchObject({
      name: `edge-router-${id}-system`,
      semantic: 'AnyOf',
      identityRoles: [`@${id}`],
      edgeRouterRoles: [`@${id}`],
      isSystem: true,
    });
    expect(await links('edge_router_policy_identities', 'policy_id', policy.id)).toEqual([{ policy_id: policy.id, identity_id: id }]);
    expect(await links('edge_router_policy_edge_routers', 'policy_id', policy.id)).toEqual([{ policy_id: policy.id, edge_router_id: id }]);
  });

  it('the system policy refuses update and delete', async () => {
    const id = await createRouter({ name: 'tun-locked', isTunnelerEnabled: true });
    const policy = await systemPolicy(id);
    const url = `${MGMT}/edge-router-policies/${policy.id}`;
    expectError(await call(t, 'PATCH', url, { token: admin, body: { name: 'mine' } }), 400, 'ENTITY_CAN_NOT_BE_UPDATED');
    expectError(await call(t, 'PUT', url, { token: admin, body: { name: 'mine', semantic: 'AllOf' } }), 400, 'ENTITY_CAN_NOT_BE_UPDATED');
    expectError(await call(t, 'DELETE', url, { token: admin }), 400, 'ENTITY_CAN_NOT_BE_DELETED');
    expect((await systemPolicy(id)).name).toBe(`edge-router-${id}-system`);
  });

  it('the new identity is linked by existing policies that select it (#all)', async () => {
    const res = await call(t, 'POST', `${MGMT}/edge-router-policies`, {
      token: admin,
      body: { name: 'tun-all-identities', semantic: 'AnyOf', identityRoles: ['#all'], edgeRouterRoles: ['#all'] },
    });
    expect(res.statusCode, res.body).toBe(201);
    const all = json(res).data.id as string;
    const id = await createRouter({ name: 'tun-all', isTunnelerEnabled: true });
    const rows = await links('edge_router_policy_identities', 'identity_id', id);
    expect(rows.map((r) => r.policy_id)).toEqual(expect.arrayContaining([all, (await systemPolicy(id)).id]));
    await call(t, 'DELETE', `${MGMT}/edge-router-policies/${all}`, { token: admin });
  });

  it('turning tunneling off (or deleting the router) takes its identity out of policies naming it by id', async () => {
    const id = await createRouter({ name: 'tun-named', isTunnelerEnabled: true });
    const service = json(await call(t, 'POST', `${MGMT}/services`, { token: admin, body: { name: 'tun-named-svc' } })).data.id as string;
    const created = await call(t, 'POST', `${MGMT}/service-policies`, {
      token: admin,
      body: { name: 'tun-named-bind', type: 'Bind', semantic: 'AnyOf', identityRoles: [`@${id}`], serviceRoles: [`@${service}`] },
    });
    expect(created.statusCode, created.body).toBe(201);
    const policy = `${MGMT}/service-policies/${json(created).data.id as string}`;
    const bound = async () => (json(await call(t, 'GET', `${policy}/identities`, { token: admin })).data as { id: string }[]).map((i) => i.id);
    expect(await bound()).toEqual([id]);

    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { isTunnelerEnabled: false } })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', policy, { token: admin })).data.identityRoles).toEqual([]);
    // The identity made again when tunneling is back is not bound by the policy written for the old one.
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { isTunnelerEnabled: true } })).statusCode).toBe(200);
    expect(await bound()).toEqual([]);

    expect((await call(t, 'PATCH', policy, { token: admin, body: { identityRoles: [`@${id}`] } })).statusCode).toBe(200);
    expect((await call(t, 'DELETE', `${URL}/${id}`, { token: admin })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', policy, { token: admin })).data.identityRoles).toEqual([]);
  });

  it('renaming the router renames the identity', async () => {
    const id = await createRouter({ name: 'tun-rename', isTunnelerEnabled: true });
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { name: 'tun-renamed' } })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data.name).toBe('tun-renamed');
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: 'tun-renamed-2', isTunnelerEnabled: true } })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data.name).toBe('tun-renamed-2');
  });

  it('a name an identity already has is refused, and nothing is written', async () => {
    await createIdentity(t, admin, { name: 'tun-taken' });
    expectError(await call(t, 'POST', URL, { token: admin, body: { name: 'tun-taken', isTunnelerEnabled: true } }), 400, 'COULD_NOT_VALIDATE', 'name');
    const list = json(await call(t, 'GET', `${URL}?filter=${encodeURIComponent('name = "tun-taken"')}`, { token: admin }));
    expect(list.meta.pagination.totalCount).toBe(0);

    const id = await createRouter({ name: 'tun-collide', isTunnelerEnabled: true });
    expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { name: 'tun-taken' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expect((await get(id)).name).toBe('tun-collide');
    expect(json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data.name).toBe('tun-collide');
    // Without the tunneler the router's name is its own business.
    const plain = await createRouter({ name: 'tun-taken' });
    expect((await get(plain)).name).toBe('tun-taken');
  });

  it('turning the flag off removes both; turning it on again brings them back', async () => {
    const id = await createRouter({ name: 'tun-toggle', isTunnelerEnabled: true });
    const first = await systemPolicy(id);
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { isTunnelerEnabled: false } })).statusCode).toBe(200);
    expect(await identityStatus(id)).toBe(404);
    expect(await systemPolicy(id)).toBeUndefined();
    expect(await links('edge_router_policy_identities', 'policy_id', first.id)).toEqual([]);
    expect(await links('edge_router_policy_edge_routers', 'policy_id', first.id)).toEqual([]);
    expect((await get(id)).isTunnelerEnabled).toBe(false);

    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { isTunnelerEnabled: true, name: 'tun-toggle-2' } })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data).toMatchObject({ name: 'tun-toggle-2', typeId: 'Router' });
    const second = await systemPolicy(id);
    expect(second.isSystem).toBe(true);
    expect(await links('edge_router_policy_edge_routers', 'policy_id', second.id)).toEqual([{ policy_id: second.id, edge_router_id: id }]);

    // A full update without the flag turns it off.
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: 'tun-toggle-2' } })).statusCode).toBe(200);
    expect(await identityStatus(id)).toBe(404);
    expect(await systemPolicy(id)).toBeUndefined();
  });

  it('enabling it on an existing router creates both', async () => {
    const id = await createRouter({ name: 'tun-later' });
    expect(await identityStatus(id)).toBe(404);
    expect(await systemPolicy(id)).toBeUndefined();
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { isTunnelerEnabled: true } })).statusCode).toBe(200);
    expect(await identityStatus(id)).toBe(200);
    expect((await systemPolicy(id)).identityRoles).toEqual([`@${id}`]);
  });

  it('deleting the router removes both and their links', async () => {
    const id = await createRouter({ name: 'tun-delete', isTunnelerEnabled: true });
    const policy = await systemPolicy(id);
    expect((await call(t, 'DELETE', `${URL}/${id}`, { token: admin })).statusCode).toBe(200);
    expect(await identityStatus(id)).toBe(404);
    expect(await systemPolicy(id)).toBeUndefined();
    expect(await links('edge_router_policy_identities', 'identity_id', id)).toEqual([]);
    expect(await links('edge_router_policy_edge_routers', 'edge_router_id', id)).toEqual([]);
    expect(await links('edge_router_policy_identities', 'policy_id', policy.id)).toEqual([]);
  });

  it('patches that leave the flag on keep the same identity and policy', async () => {
    const id = await createRouter({ name: 'tun-steady', isTunnelerEnabled: true });
    const policy = await systemPolicy(id);
    const before = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data;
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { cost: 9, roleAttributes: ['z'] } })).statusCode).toBe(200);
    expect((await systemPolicy(id)).id).toBe(policy.id);
    expect(json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data.createdAt).toBe(before.createdAt);
  });
});

describe('OpenAPI', () => {
  it('names the operations as endpoints.md does', async () => {
    const doc = json(await call(t, 'GET', `${MGMT}/specs/edge-management/spec`));
    const op = (path: string, method: string) => doc.paths[`${MGMT}${path}`]?.[method]?.operationId;
    expect(op('/edge-routers', 'get')).toBe('listEdgeRouters');
    expect(op('/edge-routers', 'post')).toBe('createEdgeRouter');
    expect(op('/edge-routers/{id}', 'get')).toBe('detailEdgeRouter');
    expect(op('/edge-routers/{id}', 'patch')).toBe('patchEdgeRouter');
    expect(op('/edge-routers/{id}', 'put')).toBe('updateEdgeRouter');
    expect(op('/edge-routers/{id}', 'delete')).toBe('deleteEdgeRouter');
  });
});

describe('the tunneler identity of an edge router', () => {
  it('is a system identity: the identities API can neither change nor delete it', async () => {
    const id = await createRouter({ name: 'tun-system', isTunnelerEnabled: true });
    const identity = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data;
    expect(identity).toMatchObject({ id, name: 'tun-system', typeId: 'Router', isSystem: true });
    const patch = await call(t, 'PATCH', `${MGMT}/identities/${id}`, { token: admin, body: { name: 'stolen' } });
    expect(patch.statusCode).toBe(400);
    expect(json(patch).error.code).toBe('ENTITY_CAN_NOT_BE_UPDATED');
    const del = await call(t, 'DELETE', `${MGMT}/identities/${id}`, { token: admin });
    expect(del.statusCode).toBe(400);
    expect(json(del).error.code).toBe('ENTITY_CAN_NOT_BE_DELETED');
    const list = json(await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent('isSystem = true')}`, { token: admin })).data;
    expect(list.map((i: { id: string }) => i.id)).toContain(id);
  });
});
