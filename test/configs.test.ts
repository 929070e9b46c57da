// Configs on the Management API: data checked against the type's schema (with the failing path),
// the type reference, fixed config type, delete (taking the config off the services and routers
// using it; refused while an identity override uses it), the services using a config, and who may
// do what.
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
let typeId: string;

const base = `${MGMT}/configs`;

const SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['endpoint', 'portRanges'],
  properties: {
    endpoint: { type: 'string', minLength: 1 },
    mode: { enum: ['fast', 'safe'] },
    portRanges: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['low', 'high'],
        properties: { low: { type: 'integer', minimum: 0, maximum: 65535 }, high: { type: 'integer', minimum: 0, maximum: 65535 } },
      },
    },
    nested: { type: 'object', properties: { 'odd/key': { type: 'boolean' }, list: { type: 'array', items: { type: 'string' } } } },
  },
};
const DATA = { endpoint: 'db.internal', portRanges: [{ low: 1, high: 2 }] };

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  const res = await call(t, 'POST', `${MGMT}/config-types`, { token: admin, body: { name: 'cfg-type', schema: SCHEMA } });
  expect(res.statusCode).toBe(201);
  typeId = json(res).data.id;
});
afterAll(async () => {
  await t.close();
});

async function createConfig(body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', base, { token: admin, body: { configTypeId: typeId, data: DATA, ...body } });
  if (res.statusCode !== 201) throw new Error(`creating config failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

async function getConfig(id: string): Promise<any> {
  const res = await call(t, 'GET', `${base}/${id}`, { token: admin });
  expect(res.statusCode).toBe(200);
  return json(res).data;
}

async function createService(body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/services`, { token: admin, body });
  if (res.statusCode !== 201) throw new Error(`creating service failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

let users = 0;
async function caller(permissions: string[]): Promise<string> {
  users += 1;
  const name = `cfg-user-${users}`;
  await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pass`, permissions });
  return login(t, name, `${name}-pass`);
}

describe('create and read', () => {
  it('round-trips name, data and tags, and shows the type reference', async () => {
    const data = { ...DATA, mode: 'safe', nested: { 'odd/key': true, list: ['a'] } };
    const id = await createConfig({ name: 'cfg-full', data, tags: { env: 'prod' } });
    const e = await getConfig(id);
    expect(e).toMatchObject({
      id,
      name: 'cfg-full',
      configTypeId: typeId,
      configType: { _links: { self: { href: `./config-types/${typeId}` } }, entity: 'config-types', id: typeId, name: 'cfg-type' },
      data,
      tags: { env: 'prod' },
    });
    expect(e._links).toEqual({ self: { href: `./configs/${id}` }, services: { href: `./configs/${id}/services` } });
  });

  it('refuses missing or malformed fields, naming them', async () => {
    const post = (body: Record<string, unknown>) => call(t, 'POST', base, { token: admin, body });
    expectError(await post({ name: 'cfg-x', data: DATA }), 400, 'COULD_NOT_VALIDATE', 'configTypeId');
    expectError(await post({ name: 'cfg-x', configTypeId: typeId }), 400, 'COULD_NOT_VALIDATE', 'data');
    expectError(await post({ configTypeId: typeId, data: DATA }), 400, 'COULD_NOT_VALIDATE', 'name');
    expectError(await post({ name: 'cfg-x', configTypeId: typeId, data: 'text' }), 400, 'COULD_NOT_VALIDATE', 'data');
    expectError(await post({ name: 'cfg-x', configTypeId: typeId, data: [DATA] }), 400, 'COULD_NOT_VALIDATE', 'data');
    expectError(await post({ name: 'cfg-x', configTypeId: typeId, data: null }), 400, 'COULD_NOT_VALIDATE', 'data');
    const body = expectError(await post({ name: 'cfg-x', configTypeId: 'no-such-type', data: DATA }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'configTypeId');
    expect(body.error.cause.value).toBe('no-such-type');
    await createConfig({ name: 'cfg-dup' });
    expectError(await post({ name: 'cfg-dup', configTypeId: typeId, data: DATA }), 400, 'COULD_NOT_VALIDATE', 'name');
  });

  it('checks data against the schema of its type, naming the failing path and the reason', async () => {
    const cases: [unknown, string, string, unknown?][] = [
      [{ portRanges: DATA.portRanges }, 'data.endpoint', 'is required'],
      [{ ...DATA, extra: 1 }, 'data.extra', 'is not a known property here'],
      [{ ...DATA, endpoint: '' }, 'data.endpoint', 'must NOT have fewer than 1 characters', ''],
      [{ ...DATA, mode: 'turbo' }, 'data.mode', 'must be one of "fast", "safe"', 'turbo'],
      [{ ...DATA, portRanges: [] }, 'data.portRanges', 'must NOT have fewer than 1 items'],
      [{ ...DATA, portRanges: [{ low: 1, high: 2 }, { low: 70000, high: 2 }] }, 'data.portRanges[1].low', 'must be <= 65535', 70000],
      [{ ...DATA, portRanges: [{ low: 1.5, high: 2 }] }, 'data.portRanges[0].low', 'must be integer', 1.5],
      [{ ...DATA, portRanges: [{ low: 1 }] }, 'data.portRanges[0].high', 'is required'],
      [{ ...DATA, nested: { 'odd/key': 'yes' } }, 'data.nested.odd/key', 'must be boolean', 'yes'],
      [{ ...DATA, nested: { list: ['a', 2] } }, 'data.nested.list[1]', 'must be string', 2],
    ];
    for (const [data, field, reason, value] of cases) {
      const res = await call(t, 'POST', base, { token: admin, body: { name: 'cfg-bad', configTypeId: typeId, data } });
      const body = expectError(res, 400, 'COULD_NOT_VALIDATE', field);
      expect(body.error.cause.reason).toBe(reason);
      if (value !== undefined) expect(body.error.cause.value).toEqual(value);
      expect(body.error.message).toBe(`${field} ${reason}`);
    }
    const list = await call(t, 'GET', `${base}?filter=${encodeURIComponent('name = "cfg-bad"')}`, { token: admin });
    expect(json(list).data).toEqual([]);
  });

  it('accepts any object for a type without a schema', async () => {
    const res = await call(t, 'POST', `${MGMT}/config-types`, { token: admin, body: { name: 'cfg-free' } });
    const free = json(res).data.id;
    const id = await createConfig({ name: 'cfg-free-1', configTypeId: free, data: { anything: [1, { b: null }] } });
    expect((await getConfig(id)).data).toEqual({ anything: [1, { b: null }] });
  });

  it('lists with filter on name and configTypeId; data is not filterable', async () => {
    await createConfig({ name: 'cfg-list-1' });
    await createConfig({ name: 'cfg-list-2' });
    const res = await call(t, 'GET', `${base}?filter=${encodeURIComponent(`configTypeId = "${typeId}" and name contains "cfg-list"`)}`, { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data.map((c: any) => c.name).sort()).toEqual(['cfg-list-1', 'cfg-list-2']);
    expect(json(res).meta.filterableFields).toEqual(['id', 'createdAt', 'updatedAt', 'tags', 'name', 'configTypeId']);
    expectError(await call(t, 'GET', `${base}?filter=${encodeURIComponent('data = "x"')}`, { token: admin }), 400, 'INVALID_FILTER');
  });
});

describe('update and patch', () => {
  it('full update needs name and data, and checks the data', async () => {
    const id = await createConfig({ name: 'cfg-put', tags: { a: 'b' } });
    const next = { endpoint: 'other', portRanges: [{ low: 5, high: 6 }] };
    expect((await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'cfg-put-2', data: next } })).statusCode).toBe(200);
    expect(await getConfig(id)).toMatchObject({ name: 'cfg-put-2', data: next, tags: {}, configTypeId: typeId });
    expectError(await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'cfg-put-3' } }), 400, 'COULD_NOT_VALIDATE', 'data');
    expectError(await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { data: next } }), 400, 'COULD_NOT_VALIDATE', 'name');
    const bad = await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'cfg-put-2', data: { ...next, portRanges: [{ low: -1, high: 1 }] } } });
    expectError(bad, 400, 'COULD_NOT_VALIDATE', 'data.portRanges[0].low');
    expect((await getConfig(id)).data).toEqual(next);
  });

  it('patch replaces data as a whole and checks it; other fields stay', async () => {
    const id = await createConfig({ name: 'cfg-patch', data: { ...DATA, mode: 'fast' }, tags: { keep: true } });
    expect((await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { name: 'cfg-patch-2' } })).statusCode).toBe(200);
    expect(await getConfig(id)).toMatchObject({ name: 'cfg-patch-2', data: { ...DATA, mode: 'fast' }, tags: { keep: true } });
    expect((await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { data: DATA } })).statusCode).toBe(200);
    expect((await getConfig(id)).data).toEqual(DATA);
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { data: { endpoint: 'x' } } }), 400, 'COULD_NOT_VALIDATE', 'data.portRanges');
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { data: null } }), 400, 'COULD_NOT_VALIDATE', 'data');
  });

  it('keeps the config type: the same id may be sent back, another is refused', async () => {
    const id = await createConfig({ name: 'cfg-fixed-type' });
    const ok = await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'cfg-fixed-type', configTypeId: typeId, data: DATA } });
    expect(ok.statusCode).toBe(200);
    for (const method of ['PUT', 'PATCH'] as const) {
      const res = await call(t, method, `${base}/${id}`, { token: admin, body: { name: 'cfg-fixed-type', configTypeId: 'proxy.v1', data: DATA } });
      expectError(res, 400, 'COULD_NOT_VALIDATE', 'configTypeId');
    }
    expect((await getConfig(id)).configTypeId).toBe(typeId);
  });
});

describe('delete', () => {
  it('deletes an unused config', async () => {
    const id = await createConfig({ name: 'cfg-del' });
    expect((await call(t, 'DELETE', `${base}/${id}`, { token: admin })).statusCode).toBe(200);
    expectError(await call(t, 'GET', `${base}/${id}`, { token: admin }), 404, 'NOT_FOUND');
  });

  it('deletes a config services use, removing it from their configs in the same write', async () => {
    const id = await createConfig({ name: 'cfg-del-svc' });
    const otherType = json(await call(t, 'POST', `${MGMT}/config-types`, { token: admin, body: { name: 'cfg-del-svc-other' } })).data.id as string;
    const kept = await createConfig({ name: 'cfg-del-svc-kept', configTypeId: otherType, data: {} });
    const first = await createService({ name: 'cfg-del-svc-1', configs: [id, kept] });
    const second = await createService({ name: 'cfg-del-svc-2', configs: [id] });
    const before = json(await call(t, 'GET', `${MGMT}/services/${first}`, { token: admin })).data.updatedAt as string;
    t.clock.advance(1_000);
    expect((await call(t, 'DELETE', `${base}/${id}`, { token: admin })).statusCode).toBe(200);
    expectError(await call(t, 'GET', `${base}/${id}`, { token: admin }), 404, 'NOT_FOUND');
    const after = json(await call(t, 'GET', `${MGMT}/services/${first}`, { token: admin })).data;
    expect(after.configs).toEqual([kept]);
    expect(Date.parse(after.updatedAt)).toBeGreaterThan(Date.parse(before));
    expect(json(await call(t, 'GET', `${MGMT}/services/${second}`, { token: admin })).data.configs).toEqual([]);
    const changed = await call(t, 'GET', `${MGMT}/audit-events?filter=${encodeURIComponent(`entityType = "services" and action = "update"`)}`, { token: admin });
    expect(json(changed).data.map((e: any) => e.entityId).sort()).toEqual([first, second].sort());
  });

  it('refuses with 409 while an identity override uses it, leaving the services using it as they were', async () => {
    const id = await createConfig({ name: 'cfg-del-override' });
    const serviceId = await createService({ name: 'cfg-del-override', configs: [id] });
    const identityId = await createIdentity(t, admin, { name: 'cfg-del-override' });
    const assoc = await call(t, 'POST', `${MGMT}/identities/${identityId}/service-configs`, {
      token: admin,
      body: [{ serviceId, configId: id }],
    });
    expect(assoc.statusCode).toBe(200);
    const body = expectError(await call(t, 'DELETE', `${base}/${id}`, { token: admin }), 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY');
    expect(body.error.message).toContain('identity service-config override');
    expect(body.error.cause.code).toBe('CONFIG_IN_USE');
    expect(json(await call(t, 'GET', `${MGMT}/services/${serviceId}`, { token: admin })).data.configs).toEqual([id]);
    await call(t, 'DELETE', `${MGMT}/identities/${identityId}/service-configs`, { token: admin, body: [] });
    expect((await call(t, 'DELETE', `${base}/${id}`, { token: admin })).statusCode).toBe(200);
  });
});

describe('GET /configs/{id}/services', () => {
  let configId: string;
  beforeAll(async () => {
    configId = await createConfig({ name: 'cfg-rel' });
    await createService({ name: 'cfg-rel-b', configs: [configId], roleAttributes: ['x'] });
    await createService({ name: 'cfg-rel-a', configs: [configId] });
    await createService({ name: 'cfg-rel-other' });
  });

  it('lists the services using the config, with their configs, filter, sort and paging', async () => {
    const res = await call(t, 'GET', `${base}/${configId}/services?sort=name`, { token: admin });
    expect(res.statusCode).toBe(200);
    const body = json(res);
    expect(body.data.map((s: any) => s.name)).toEqual(['cfg-rel-a', 'cfg-rel-b']);
    expect(body.data[0].configs).toEqual([configId]);
    expect(body.meta.pagination).toEqual({ limit: 10, offset: 0, totalCount: 2 });
    const filtered = await call(t, 'GET', `${base}/${configId}/services?filter=${encodeURIComponent('anyOf(roleAttributes) = "x"')}`, { token: admin });
    expect(json(filtered).data.map((s: any) => s.name)).toEqual(['cfg-rel-b']);
    const page = await call(t, 'GET', `${base}/${configId}/services?sort=${encodeURIComponent('name desc')}&limit=1`, { token: admin });
    expect(json(page).data.map((s: any) => s.name)).toEqual(['cfg-rel-b']);
    expect(json(page).meta.pagination.totalCount).toBe(2);
    expectError(await call(t, 'GET', `${base}/${configId}/services?limit=x`, { token: admin }), 400, 'INVALID_PAGINATION');
  });

  it('is empty for an unused config', async () => {
    const unused = await createConfig({ name: 'cfg-rel-unused' });
    const res = await call(t, 'GET', `${base}/${unused}/services`, { token: admin });
    expect(json(res).data).toEqual([]);
    expect(json(res).meta.pagination.totalCount).toBe(0);
  });
});

describe('authorization', () => {
  it('refuses a non-admin without the permission, admits one with it', async () => {
    const id = await createConfig({ name: 'cfg-perm' });
    const nobody = await caller(['config-type']);
    expectError(await call(t, 'GET', base, { token: nobody }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'GET', `${base}/${id}`, { token: nobody }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'POST', base, { token: nobody, body: { name: 'cfg-n', configTypeId: typeId, data: DATA } }), 401, 'UNAUTHORIZED');

    const reader = await caller(['config.read']);
    expect((await call(t, 'GET', base, { token: reader })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${base}/${id}`, { token: reader })).statusCode).toBe(200);
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: reader, body: { name: 'cfg-r' } }), 401, 'UNAUTHORIZED');
    // The services of a config are services: listing them takes the service permission.
    expectError(await call(t, 'GET', `${base}/${id}/services`, { token: reader }), 401, 'UNAUTHORIZED');
    const serviceReader = await caller(['service.read']);
    expect((await call(t, 'GET', `${base}/${id}/services`, { token: serviceReader })).statusCode).toBe(200);

    const writer = await caller(['config.create', 'config.update', 'config.delete']);
    const created = await call(t, 'POST', base, { token: writer, body: { name: 'cfg-w', configTypeId: typeId, data: DATA } });
    expect(created.statusCode).toBe(201);
    const wid = json(created).data.id;
    expect((await call(t, 'PATCH', `${base}/${wid}`, { token: writer, body: { name: 'cfg-w2' } })).statusCode).toBe(200);
    expect((await call(t, 'PUT', `${base}/${wid}`, { token: writer, body: { name: 'cfg-w3', data: DATA } })).statusCode).toBe(200);
    expectError(await call(t, 'GET', `${base}/${wid}`, { token: writer }), 401, 'UNAUTHORIZED');
    expect((await call(t, 'DELETE', `${base}/${wid}`, { token: writer })).statusCode).toBe(200);
  });
});

describe('a config routers use', () => {
  it('is deleted, and removed from the configs of the edge routers and routers naming it', async () => {
    const routerType = json(
      await call(t, 'POST', `${MGMT}/config-types`, { token: admin, body: { name: 'router-settings', target: 'router', schema: {} } }),
    ).data.id as string;
    const otherType = json(await call(t, 'POST', `${MGMT}/config-types`, { token: admin, body: { name: 'router-other', target: 'router' } })).data.id as string;
    const config = json(
      await call(t, 'POST', base, { token: admin, body: { name: 'router-config', configTypeId: routerType, data: { a: 1 } } }),
    ).data.id as string;
    const kept = json(await call(t, 'POST', base, { token: admin, body: { name: 'router-config-kept', configTypeId: otherType, data: {} } })).data.id as string;
    const router = json(
      await call(t, 'POST', `${MGMT}/edge-routers`, { token: admin, body: { name: 'er-with-config', configs: [config, kept] } }),
    ).data.id as string;
    const transit = json(
      await call(t, 'POST', `${MGMT}/transit-routers`, { token: admin, body: { name: 'tr-with-config', configs: [kept, config] } }),
    ).data.id as string;
    const deleted = await call(t, 'DELETE', `${base}/${config}`, { token: admin });
    expect(deleted.statusCode, deleted.body).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/edge-routers/${router}`, { token: admin })).data.configs).toEqual([kept]);
    for (const path of ['routers', 'transit-routers']) {
      expect(json(await call(t, 'GET', `${MGMT}/${path}/${transit}`, { token: admin })).data.configs).toEqual([kept]);
    }
    for (const [entityType, id, before] of [['edge-routers', router, [config, kept]], ['routers', transit, [kept, config]]] as const) {
      const changed = await call(t, 'GET', `${MGMT}/audit-events?filter=${encodeURIComponent(`entityType = "${entityType}" and entityId = "${id}" and action = "update"`)}`, {
        token: admin,
      });
      expect(json(changed).data.map((e: any) => e.changes)).toEqual([{ before: expect.objectContaining({ configs: before }), after: expect.objectContaining({ configs: [kept] }) }]);
    }
  });
});
