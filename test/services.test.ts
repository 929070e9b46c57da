// Services on the Management API: fields and defaults, the configs of a service (existing, targeting
// services, one per type) kept exact in service_configs across every write, the fixed
// encryptionRequired, roleFilter, the configs of a service as a list, and who may do what.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
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

const base = `${MGMT}/services`;

// Configs: two intercept.v1, one host.v1, one of a router-targeted type.
let interceptA: string;
let interceptB: string;
let host: string;
let routerConfig: string;

const INTERCEPT = { protocols: ['tcp'], addresses: ['app.example.com'], portRanges: [{ low: 443, high: 443 }] };

async function createConfig(name: string, configTypeId: string, data: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/configs`, { token: admin, body: { name, configTypeId, data } });
  if (res.statusCode !== 201) throw new Error(`creating config failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  interceptA = await createConfig('svc-intercept-a', 'intercept.v1', INTERCEPT);
  interceptB = await createConfig('svc-intercept-b', 'intercept.v1', { ...INTERCEPT, addresses: ['b.example.com'] });
  host = await createConfig('svc-host', 'host.v1', { protocol: 'tcp', address: 'localhost', port: 443 });
  const type = await call(t, 'POST', `${MGMT}/config-types`, { token: admin, body: { name: 'svc-router-type', target: 'router' } });
  routerConfig = await createConfig('svc-router-config', json(type).data.id, { any: true });
});
afterAll(async () => {
  await t.close();
});

async function createService(body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', base, { token: admin, body });
  if (res.statusCode !== 201) throw new Error(`creating service failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

async function getService(id: string): Promise<any> {
  const res = await call(t, 'GET', `${base}/${id}`, { token: admin });
  expect(res.statusCode).toBe(200);
  return json(res).data;
}

/** The stored association rows of a service, sorted. */
async function rows(serviceId: string): Promise<string[]> {
  const found = await t.app.core.store.db
    .selectFrom('service_configs')
    .select('config_id')
    .where('service_id', '=', serviceId)
    .orderBy('config_id')
    .execute();
  return found.map((r) => r.config_id as string);
}

const sorted = (ids: string[]) => [...ids].sort();

let users = 0;
async function caller(permissions: string[]): Promise<string> {
  users += 1;
  const name = `svc-user-${users}`;
  await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pass`, permissions });
  return login(t, name, `${name}-pass`);
}

describe('create and read', () => {
  it('round-trips every writable field', async () => {
    const body = {
      name: 'svc-full',
      configs: [interceptA, host],
      encryptionRequired: false,
      maxIdleTimeMillis: 60000,
      roleAttributes: ['web', 'prod'],
      terminatorStrategy: 'weighted',
      tags: { owner: 'web' },
    };
    const id = await createService(body);
    const e = await getService(id);
    expect(e).toMatchObject({ ...body, configs: sorted([interceptA, host]), id });
    for (const sub of ['service-edge-router-policies', 'service-policies', 'terminators', 'configs']) {
      expect(e._links[sub].href).toBe(`./services/${id}/${sub}`);
    }
    expect(await rows(id)).toEqual(sorted([interceptA, host]));
  });

  it('fills the defaults', async () => {
    const id = await createService({ name: 'svc-defaults' });
    expect(await getService(id)).toMatchObject({
      configs: [],
      encryptionRequired: true,
      maxIdleTimeMillis: 0,
      roleAttributes: [],
      terminatorStrategy: 'smartrouting',
      tags: {},
    });
    const nulls = await createService({ name: 'svc-nulls', configs: null, roleAttributes: null, terminatorStrategy: '' });
    expect(await getService(nulls)).toMatchObject({ configs: [], roleAttributes: [], terminatorStrategy: 'smartrouting' });
  });

  it('refuses bad fields, naming them', async () => {
    const cases: [Record<string, unknown>, string, string?][] = [
      [{}, 'name'],
      [{ name: '' }, 'name'],
      [{ name: 'svc-bad', maxIdleTimeMillis: -1 }, 'maxIdleTimeMillis'],
      [{ name: 'svc-bad', maxIdleTimeMillis: 1.5 }, 'maxIdleTimeMillis'],
      [{ name: 'svc-bad', encryptionRequired: 'yes' }, 'encryptionRequired'],
      [{ name: 'svc-bad', terminatorStrategy: 'fastest' }, 'terminatorStrategy'],
      [{ name: 'svc-bad', roleAttributes: ['#web'] }, 'roleAttributes[0]'],
      [{ name: 'svc-bad', roleAttributes: 'web' }, 'roleAttributes'],
      [{ name: 'svc-bad', configs: 'abc' }, 'configs'],
      [{ name: 'svc-bad', configs: [''] }, 'configs[0]'],
    ];
    for (const [body, field] of cases) {
      expectError(await call(t, 'POST', base, { token: admin, body }), 400, 'COULD_NOT_VALIDATE', field);
    }
    await createService({ name: 'svc-dup' });
    expectError(await call(t, 'POST', base, { token: admin, body: { name: 'svc-dup' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    const list = await call(t, 'GET', `${base}?filter=${encodeURIComponent('name = "svc-bad"')}`, { token: admin });
    expect(json(list).data).toEqual([]);
  });
});

describe('configs of a service', () => {
  it('must exist', async () => {
    const body = expectError(
      await call(t, 'POST', base, { token: admin, body: { name: 'svc-cfg-missing', configs: [interceptA, 'no-such-config'] } }),
      400,
      'REFERENCED_ENTITY_NOT_FOUND',
      'configs',
    );
    expect(body.error.cause.value).toBe('no-such-config');
  });

  it('must be of a type that targets services', async () => {
    const body = expectError(
      await call(t, 'POST', base, { token: admin, body: { name: 'svc-cfg-router', configs: [routerConfig] } }),
      400,
      'COULD_NOT_VALIDATE',
      'configs',
    );
    expect(body.error.cause.reason).toContain('svc-router-type');
  });

  it('hold at most one config per config type', async () => {
    const body = expectError(
      await call(t, 'POST', base, { token: admin, body: { name: 'svc-cfg-two', configs: [interceptA, host, interceptB] } }),
      400,
      'COULD_NOT_VALIDATE',
      'configs',
    );
    expect(body.error.cause.reason).toContain('intercept.v1');
    expect(body.error.cause.value).toBe(interceptB);
    const id = await createService({ name: 'svc-cfg-one' });
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { configs: [interceptA, interceptB] } }), 400, 'COULD_NOT_VALIDATE', 'configs');
    expectError(await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'svc-cfg-one', configs: [interceptB, interceptA] } }), 400, 'COULD_NOT_VALIDATE', 'configs');
    expect(await rows(id)).toEqual([]);
  });

  // The same config twice is two configs of one type, which the established controller refuses.
  it('refuses an id named twice', async () => {
    const post = await call(t, 'POST', base, { token: admin, body: { name: 'svc-cfg-repeat', configs: [interceptA, interceptA] } });
    expectError(post, 400, 'COULD_NOT_VALIDATE', 'configs');
    const id = await createService({ name: 'svc-cfg-repeat', configs: [interceptA] });
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { configs: [host, host] } }), 400, 'COULD_NOT_VALIDATE', 'configs');
    expectError(await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'svc-cfg-repeat', configs: [host, interceptA, host] } }), 400, 'COULD_NOT_VALIDATE', 'configs');
    expect(await rows(id)).toEqual([interceptA]);
  });

  it('stay exact across create, full update, patch and delete', async () => {
    const id = await createService({ name: 'svc-cfg-life', configs: [interceptA] });
    expect(await rows(id)).toEqual([interceptA]);

    // Full update replaces them.
    await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'svc-cfg-life', configs: [interceptB, host] } });
    expect(await rows(id)).toEqual(sorted([interceptB, host]));
    expect((await getService(id)).configs).toEqual(sorted([interceptB, host]));

    // A full update without configs leaves none.
    await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'svc-cfg-life' } });
    expect(await rows(id)).toEqual([]);

    // A patch replaces them only when it names them.
    await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { configs: [host] } });
    expect(await rows(id)).toEqual([host]);
    await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { name: 'svc-cfg-life-2', maxIdleTimeMillis: 5 } });
    expect(await rows(id)).toEqual([host]);
    expect(await getService(id)).toMatchObject({ name: 'svc-cfg-life-2', maxIdleTimeMillis: 5, configs: [host] });
    await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { configs: [interceptA, host] } });
    expect(await rows(id)).toEqual(sorted([interceptA, host]));
    await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { configs: null } });
    expect(await rows(id)).toEqual([]);
    await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { configs: [interceptA] } });
    await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { configs: [] } });
    expect(await rows(id)).toEqual([]);

    // A refused write changes nothing.
    await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { configs: [host] } });
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { configs: [interceptA], maxIdleTimeMillis: -5 } }), 400, 'COULD_NOT_VALIDATE');
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { configs: [interceptA, 'gone'] } }), 400, 'REFERENCED_ENTITY_NOT_FOUND');
    expect(await rows(id)).toEqual([host]);

    // Deleting the service removes its rows; the config stays.
    expect((await call(t, 'DELETE', `${base}/${id}`, { token: admin })).statusCode).toBe(200);
    expect(await rows(id)).toEqual([]);
    expect((await call(t, 'GET', `${MGMT}/configs/${host}`, { token: admin })).statusCode).toBe(200);
  });

  it('are shown on every service of a list page', async () => {
    const a = await createService({ name: 'svc-page-a', configs: [interceptA], roleAttributes: ['page'] });
    const b = await createService({ name: 'svc-page-b', configs: [host, interceptB], roleAttributes: ['page'] });
    const c = await createService({ name: 'svc-page-c', roleAttributes: ['page'] });
    const res = await call(t, 'GET', `${base}?filter=${encodeURIComponent('anyOf(roleAttributes) = "page"')}&sort=name`, { token: admin });
    expect(json(res).data.map((s: any) => [s.id, s.configs])).toEqual([
      [a, [interceptA]],
      [b, sorted([host, interceptB])],
      [c, []],
    ]);
  });
});

describe('encryptionRequired', () => {
  it('is fixed after create: the same value may be sent back, another is refused', async () => {
    const id = await createService({ name: 'svc-enc', encryptionRequired: false });
    expect((await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'svc-enc', encryptionRequired: false } })).statusCode).toBe(200);
    expect((await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { encryptionRequired: false, maxIdleTimeMillis: 9 } })).statusCode).toBe(200);
    for (const method of ['PUT', 'PATCH'] as const) {
      const res = await call(t, method, `${base}/${id}`, { token: admin, body: { name: 'svc-enc-changed', encryptionRequired: true } });
      const body = expectError(res, 400, 'COULD_NOT_VALIDATE', 'encryptionRequired');
      expect(body.error.cause).toMatchObject({ reason: 'is fixed when the service is created', value: true });
    }
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { encryptionRequired: null } }), 400, 'COULD_NOT_VALIDATE', 'encryptionRequired');
    expect(await getService(id)).toMatchObject({ name: 'svc-enc', encryptionRequired: false, maxIdleTimeMillis: 9 });
  });
});

describe('lists', () => {
  beforeAll(async () => {
    await createService({ name: 'svc-role-1', roleAttributes: ['blue', 'green'] });
    await createService({ name: 'svc-role-2', roleAttributes: ['blue'] });
    await createService({ name: 'svc-role-3', roleAttributes: ['red'] });
  });

  it('apply roleFilter and roleSemantic before the filter', async () => {
    const names = async (query: string) => {
      const res = await call(t, 'GET', `${base}?${query}&sort=name`, { token: admin });
      expect(res.statusCode, res.body).toBe(200);
      return json(res).data.map((s: any) => s.name);
    };
    expect(await names('roleFilter=%23blue')).toEqual(['svc-role-1', 'svc-role-2']);
    expect(await names('roleFilter=%23blue&roleFilter=%23green')).toEqual(['svc-role-1']);
    expect(await names('roleFilter=%23blue&roleFilter=%23red&roleSemantic=AnyOf')).toEqual(['svc-role-1', 'svc-role-2', 'svc-role-3']);
    expect(await names(`roleFilter=%23blue&filter=${encodeURIComponent('name = "svc-role-2"')}`)).toEqual(['svc-role-2']);
    expectError(await call(t, 'GET', `${base}?roleFilter=blue`, { token: admin }), 400, 'COULD_NOT_VALIDATE', 'roleFilter');
    expectError(await call(t, 'GET', `${base}?roleFilter=%23blue&roleSemantic=Some`, { token: admin }), 400, 'COULD_NOT_VALIDATE', 'roleSemantic');
  });

  it('filter and sort on the service fields', async () => {
    const res = await call(t, 'GET', `${base}?filter=${encodeURIComponent('encryptionRequired = false')}`, { token: admin });
    expect(json(res).data.every((s: any) => s.encryptionRequired === false)).toBe(true);
    expect(json(res).meta.filterableFields).toEqual([
      'id',
      'createdAt',
      'updatedAt',
      'tags',
      'name',
      'encryptionRequired',
      'maxIdleTimeMillis',
      'roleAttributes',
      'terminatorStrategy',
      'configs',
    ]);
    expectError(await call(t, 'GET', `${base}?filter=${encodeURIComponent('configs = "x"')}`, { token: admin }), 400, 'INVALID_FILTER');
  });

  // behaviour.md §3: icontains ignores case, for every letter and not only A-Z.
  it('icontains and not icontains ignore the case of letters beyond ASCII', async () => {
    await createService({ name: 'svc-Überwachung', roleAttributes: ['Zürich-ops'], tags: { city: 'Ålesund' } });
    await createService({ name: 'svc-ueber', roleAttributes: ['zurich'], tags: { city: 'alesund' } });
    const names = async (filter: string) => {
      const res = await call(t, 'GET', `${base}?filter=${encodeURIComponent(filter)}&sort=name`, { token: admin });
      expect(res.statusCode, res.body).toBe(200);
      return json(res).data.map((s: any) => s.name);
    };
    expect(await names('name icontains "über"')).toEqual(['svc-Überwachung']);
    expect(await names('name icontains "SVC-ÜBERWACHUNG"')).toEqual(['svc-Überwachung']);
    expect(await names('anyOf(roleAttributes) icontains "ZÜRICH"')).toEqual(['svc-Überwachung']);
    expect(await names('tags.city icontains "ålesund"')).toEqual(['svc-Überwachung']);
    expect(await names('tags.city icontains "ALESUND"')).toEqual(['svc-ueber']);
    expect(await names('name icontains "svc-ü" or name icontains "svc-ue"')).toEqual(['svc-ueber', 'svc-Überwachung']);
    expect(await names('name not icontains "ÜBER" and tags.city icontains "lesund"')).toEqual(['svc-ueber']);
    expect(await names('name contains "über"')).toEqual([]);
  });
});

describe('GET /services/{id}/configs', () => {
  it('lists the configs of the service with filter, sort and paging', async () => {
    const id = await createService({ name: 'svc-rel', configs: [interceptA, host] });
    const res = await call(t, 'GET', `${base}/${id}/configs?sort=name`, { token: admin });
    expect(res.statusCode).toBe(200);
    const body = json(res);
    expect(body.data.map((c: any) => c.name)).toEqual(['svc-host', 'svc-intercept-a']);
    expect(body.data[1]).toMatchObject({ id: interceptA, configTypeId: 'intercept.v1', configType: { id: 'intercept.v1', name: 'intercept.v1' }, data: INTERCEPT });
    expect(body.meta.pagination).toEqual({ limit: 10, offset: 0, totalCount: 2 });
    const filtered = await call(t, 'GET', `${base}/${id}/configs?filter=${encodeURIComponent('configTypeId = "host.v1"')}`, { token: admin });
    expect(json(filtered).data.map((c: any) => c.id)).toEqual([host]);
    const page = await call(t, 'GET', `${base}/${id}/configs?sort=name&offset=1`, { token: admin });
    expect(json(page).data.map((c: any) => c.id)).toEqual([interceptA]);
    expectError(await call(t, 'GET', `${base}/${id}/configs?filter=${encodeURIComponent('nope = 1')}`, { token: admin }), 400, 'INVALID_FILTER');
    const none = await createService({ name: 'svc-rel-none' });
    expect(json(await call(t, 'GET', `${base}/${none}/configs`, { token: admin })).data).toEqual([]);
  });
});

describe('authorization', () => {
  it('refuses a non-admin without the permission, admits one with it', async () => {
    const id = await createService({ name: 'svc-perm', configs: [interceptA] });
    const nobody = await caller(['config']);
    expectError(await call(t, 'GET', base, { token: nobody }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'GET', `${base}/${id}`, { token: nobody }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'POST', base, { token: nobody, body: { name: 'svc-n' } }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'DELETE', `${base}/${id}`, { token: nobody }), 401, 'UNAUTHORIZED');

    const reader = await caller(['service.read']);
    expect((await call(t, 'GET', base, { token: reader })).statusCode).toBe(200);
    expect((await getService(id)).configs).toEqual([interceptA]);
    expect(json(await call(t, 'GET', `${base}/${id}`, { token: reader })).data.configs).toEqual([interceptA]);
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: reader, body: { name: 'svc-r' } }), 401, 'UNAUTHORIZED');
    // The configs of a service are configs: listing them takes the config permission.
    expectError(await call(t, 'GET', `${base}/${id}/configs`, { token: reader }), 401, 'UNAUTHORIZED');
    expect((await call(t, 'GET', `${base}/${id}/configs`, { token: nobody })).statusCode).toBe(200);

    const manager = await caller(['service']);
    const created = await call(t, 'POST', base, { token: manager, body: { name: 'svc-m', configs: [host] } });
    expect(created.statusCode).toBe(201);
    const mid = json(created).data.id;
    expect((await call(t, 'PATCH', `${base}/${mid}`, { token: manager, body: { configs: [] } })).statusCode).toBe(200);
    expect((await call(t, 'PUT', `${base}/${mid}`, { token: manager, body: { name: 'svc-m2' } })).statusCode).toBe(200);
    expect((await call(t, 'DELETE', `${base}/${mid}`, { token: manager })).statusCode).toBe(200);
  });
});

describe('the OpenAPI document', () => {
  it('names every route of the services area with the operation ids of endpoints.md', async () => {
    const doc = json(await t.inject({ method: 'GET', url: `${MGMT}/specs/edge-management/spec` }));
    const expected: [string, string, string][] = [
      ['get', '/config-types', 'listConfigTypes'],
      ['post', '/config-types', 'createConfigType'],
      ['get', '/config-types/{id}', 'detailConfigType'],
      ['put', '/config-types/{id}', 'updateConfigType'],
      ['patch', '/config-types/{id}', 'patchConfigType'],
      ['delete', '/config-types/{id}', 'deleteConfigType'],
      ['get', '/config-types/{id}/configs', 'listConfigsForConfigType'],
      ['get', '/configs', 'listConfigs'],
      ['post', '/configs', 'createConfig'],
      ['get', '/configs/{id}', 'detailConfig'],
      ['put', '/configs/{id}', 'updateConfig'],
      ['patch', '/configs/{id}', 'patchConfig'],
      ['delete', '/configs/{id}', 'deleteConfig'],
      ['get', '/configs/{id}/services', 'listConfigServices'],
      ['get', '/services', 'listServices'],
      ['post', '/services', 'createService'],
      ['get', '/services/{id}', 'detailService'],
      ['put', '/services/{id}', 'updateService'],
      ['patch', '/services/{id}', 'patchService'],
      ['delete', '/services/{id}', 'deleteService'],
      ['get', '/services/{id}/configs', 'listServiceConfig'],
      ['get', '/identities/{id}/service-configs', 'listIdentitysServiceConfigs'],
      ['post', '/identities/{id}/service-configs', 'associateIdentitysServiceConfigs'],
      ['delete', '/identities/{id}/service-configs', 'disassociateIdentitysServiceConfigs'],
    ];
    for (const [method, path, operationId] of expected) {
      expect(doc.paths[`${MGMT}${path}`]?.[method]?.operationId, `${method} ${path}`).toBe(operationId);
    }
    const listParams = doc.paths[`${MGMT}/services`].get.parameters.map((p: any) => p.name);
    expect(listParams).toEqual(expect.arrayContaining(['limit', 'offset', 'filter', 'sort', 'roleFilter', 'roleSemantic']));
  });
});

describe('configTypes on the list', () => {
  it('adds config (type name → data) for the asked-for types, by name, id or "all"', async () => {
    const id = await createService({ name: 'svc-config-types', configs: [interceptA, host] });
    const page = async (q: string) => {
      const res = await call(t, 'GET', `${base}?filter=${encodeURIComponent(`id = "${id}"`)}&${q}`, { token: admin });
      expect(res.statusCode, res.body).toBe(200);
      return json(res).data[0];
    };
    // Without configTypes: those of the caller's API session (none at this login).
    expect((await page('')).config).toEqual({});
    expect((await page('configTypes=intercept.v1')).config).toEqual({ 'intercept.v1': INTERCEPT });
    expect((await page('configTypes=intercept.v1&configTypes=host.v1')).config).toEqual({
      'intercept.v1': INTERCEPT,
      'host.v1': { protocol: 'tcp', address: 'localhost', port: 443 },
    });
    expect(Object.keys((await page('configTypes=all')).config).sort()).toEqual(['host.v1', 'intercept.v1']);
    expect((await page('configTypes=proxy.v1')).config).toEqual({});
  });
});

describe('what the calling admin may do with each service', () => {
  it('permissions, config and postureQueries on list, detail and related lists are those a client of the admin identity sees', async () => {
    const me = json(await call(t, 'GET', `${MGMT}/current-identity`, { token: admin })).data;
    const check = json(
      await call(t, 'POST', `${MGMT}/posture-checks`, { token: admin, body: { name: 'svc-own-domain', typeId: 'DOMAIN', domains: ['corp.example'] } }),
    ).data.id as string;
    const dial = await createService({ name: 'svc-own-dial', configs: [interceptA, host] });
    const both = await createService({ name: 'svc-own-both', configs: [interceptB] });
    const none = await createService({ name: 'svc-own-none', configs: [host] });
    const policy = async (type: string, services: string[], postureCheckRoles: string[] = []) => {
      const body = { name: `svc-own-${type}-${services.length}-${postureCheckRoles.length}`, type, semantic: 'AnyOf', identityRoles: [`@${me.id}`], serviceRoles: services.map((id) => `@${id}`), postureCheckRoles };
      const res = await call(t, 'POST', `${MGMT}/service-policies`, { token: admin, body });
      expect(res.statusCode, res.body).toBe(201);
      return json(res).data.id as string;
    };
    const dialPolicy = await policy('Dial', [dial, both], [`@${check}`]);
    await policy('Bind', [both]);
    // The admin's own override of the host config of `dial`.
    const override = await createConfig('svc-own-host-override', 'host.v1', { protocol: 'udp', address: 'override.example', port: 53 });
    expect((await call(t, 'POST', `${MGMT}/identities/${me.id}/service-configs`, { token: admin, body: [{ serviceId: dial, configId: override }] })).statusCode).toBe(200);

    const token = await login(t, 'admin', 'admin-password-1', MGMT);
    const session = await call(t, 'POST', `/edge/client/v1/authenticate?method=password`, {
      body: { username: 'admin', password: 'admin-password-1', configTypes: ['host.v1'] },
    });
    const clientToken = json(session).data.token as string;
    const mgmtWithTypes = json(
      await call(t, 'POST', `${MGMT}/authenticate?method=password`, { body: { username: 'admin', password: 'admin-password-1', configTypes: ['host.v1'] } }),
    ).data.token as string;
    const ids = [dial, both, none];
    const filter = `filter=${encodeURIComponent(`id in ["${ids.join('", "')}"]`)}`;
    const byId = (list: any[]) => Object.fromEntries(list.map((s) => [s.id, s]));

    // As a client of the admin identity sees them (the Client API lists only what it may use).
    const clientSide = byId(json(await call(t, 'GET', `/edge/client/v1/services?${filter}`, { token: clientToken })).data);
    const list = byId(json(await call(t, 'GET', `${base}?${filter}`, { token: mgmtWithTypes })).data);
    for (const id of [dial, both]) {
      for (const field of ['permissions', 'config', 'postureQueries']) expect(list[id][field], `${field} of ${id}`).toEqual(clientSide[id][field]);
    }
    expect(list[dial].permissions).toEqual(['Dial']);
    expect(list[both].permissions).toEqual(['Bind', 'Dial']);
    expect(list[dial].config).toEqual({ 'host.v1': { protocol: 'udp', address: 'override.example', port: 53 } });
    expect(list[dial].postureQueries).toEqual([
      { policyId: dialPolicy, policyType: 'Dial', isPassing: false, postureQueries: [expect.objectContaining({ id: check, typeId: 'DOMAIN', isPassing: false })] },
    ]);
    // each posture query carries the base fields of its check
    const checkAnswer = json(await call(t, 'GET', `${MGMT}/posture-checks/${check}`, { token: admin })).data;
    expect(list[dial].postureQueries[0].postureQueries[0]).toMatchObject({
      _links: { self: { href: `./posture-checks/${check}` } },
      createdAt: checkAnswer.createdAt,
      updatedAt: checkAnswer.updatedAt,
      tags: {},
      queryType: 'DOMAIN',
    });
    // A service the admin may not use is still listed, with nothing it may do.
    expect(list[none]).toMatchObject({ permissions: [], postureQueries: [], config: { 'host.v1': { protocol: 'tcp', address: 'localhost', port: 443 } } });

    // Detail and a related list read the same; configTypes of the query win over the session's.
    const detail = json(await call(t, 'GET', `${base}/${dial}`, { token: mgmtWithTypes })).data;
    expect({ permissions: detail.permissions, config: detail.config, postureQueries: detail.postureQueries }).toEqual({
      permissions: list[dial].permissions,
      config: list[dial].config,
      postureQueries: list[dial].postureQueries,
    });
    const related = byId(json(await call(t, 'GET', `${MGMT}/service-policies/${dialPolicy}/services`, { token: mgmtWithTypes })).data);
    expect(related[both]).toMatchObject({ permissions: ['Bind', 'Dial'], config: {} });
    const asked = json(await call(t, 'GET', `${base}?${filter}&configTypes=intercept.v1`, { token })).data;
    expect(byId(asked)[both].config).toEqual({ 'intercept.v1': { ...INTERCEPT, addresses: ['b.example.com'] } });
  });

  it('another admin sees what it may do, not what the first may', async () => {
    const other = await createIdentityWithPassword(t, admin, { name: 'svc-other-admin', username: 'svc-other-admin', password: 'svc-other-admin-1', isAdmin: true });
    const svc = await createService({ name: 'svc-other-admin-only' });
    const res = await call(t, 'POST', `${MGMT}/service-policies`, {
      token: admin,
      body: { name: 'svc-other-admin-bind', type: 'Bind', semantic: 'AnyOf', identityRoles: [`@${other.id}`], serviceRoles: [`@${svc}`] },
    });
    expect(res.statusCode).toBe(201);
    const otherToken = await login(t, 'svc-other-admin', 'svc-other-admin-1');
    expect(json(await call(t, 'GET', `${base}/${svc}`, { token: otherToken })).data.permissions).toEqual(['Bind']);
    expect(json(await call(t, 'GET', `${base}/${svc}`, { token: admin })).data.permissions).toEqual([]);
  });
});
