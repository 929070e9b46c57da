// Routers on the Management API: the routers table, served at /routers and at /transit-routers with
// the same fields, validation and permissions; both list edge routers too (an edge router is a
// router), which are read and deleted there but changed only at /edge-routers; router names are
// unique across both kinds; and a store from before the shared view keeps every router.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../src/store/migrations/index.js';
import { openSqlite } from '../src/store/sqlite.js';
import { Store } from '../src/store/store.js';
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
let none: string;
let routerPerm: string;
let readOnly: string;
let routerConfigId: string;
let otherRouterConfigId: string;
let serviceConfigId: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  // Config types and configs through the resource services: their routes are not this file's subject.
  const r = t.app.core.resources;
  const routerType = await r.get('config-types').create({ name: 'r-router-type', schema: { type: 'object' }, target: 'router' });
  const serviceType = await r.get('config-types').create({ name: 'r-service-type', schema: { type: 'object' }, target: 'service' });
  routerConfigId = (await r.get('configs').create({ name: 'r-router-config', configTypeId: routerType.id, data: { a: 1 } })).id;
  otherRouterConfigId = (await r.get('configs').create({ name: 'r-router-config-2', configTypeId: routerType.id, data: { a: 2 } })).id;
  serviceConfigId = (await r.get('configs').create({ name: 'r-service-config', configTypeId: serviceType.id, data: { b: 2 } })).id;
  await createIdentityWithPassword(t, admin, { name: 'r-none', username: 'r-none', password: 'r-none-1', permissions: ['terminator', 'identity'] });
  await createIdentityWithPassword(t, admin, { name: 'r-router', username: 'r-router', password: 'r-router-1', permissions: ['router'] });
  await createIdentityWithPassword(t, admin, { name: 'r-read', username: 'r-read', password: 'r-read-1', permissions: ['router.read'] });
  none = await login(t, 'r-none', 'r-none-1');
  routerPerm = await login(t, 'r-router', 'r-router-1');
  readOnly = await login(t, 'r-read', 'r-read-1');
});
afterAll(async () => {
  await t.close();
});

describe.each([
  ['routers', 'Router', 'Routers'],
  ['transit-routers', 'TransitRouter', 'TransitRouters'],
] as const)('/%s', (collection, one, many) => {
  const URL = `${MGMT}/${collection}`;
  const prefix = `${collection}-`;

  async function create(body: Record<string, unknown>): Promise<string> {
    const res = await call(t, 'POST', URL, { token: admin, body });
    if (res.statusCode !== 201) throw new Error(`creating failed: ${res.statusCode} ${res.body}`);
    return json(res).data.id as string;
  }
  async function get(id: string): Promise<any> {
    const res = await call(t, 'GET', `${URL}/${id}`, { token: admin });
    expect(res.statusCode, res.body).toBe(200);
    return json(res).data;
  }

  it('creates and reads every field', async () => {
    const body = {
      name: `${prefix}full`,
      cost: 65535,
      disabled: true,
      noTraversal: true,
      ctrlChanListeners: { 'tls:0.0.0.0:6262': ['default'] },
      configs: [routerConfigId],
      tags: { site: 'a', on: true },
    };
    const res = await call(t, 'POST', URL, { token: admin, body });
    expect(res.statusCode).toBe(201);
    const created = json(res).data;
    expect(created).toEqual({ id: created.id, _links: { self: { href: `./${collection}/${created.id}` } } });
    const e = await get(created.id);
    expect(e).toMatchObject({ ...body, id: created.id, fingerprint: null, isOnline: false, isVerified: false });
    expect(e._links.self.href).toBe(`./${collection}/${created.id}`);
    for (const f of ['roleAttributes', 'isTunnelerEnabled']) expect(e).not.toHaveProperty(f);
  });

  it('fills defaults and ignores read-only fields', async () => {
    const id = await create({ name: `${prefix}defaults`, isOnline: true, fingerprint: 'ff' });
    expect(await get(id)).toMatchObject({ cost: 0, disabled: false, noTraversal: false, ctrlChanListeners: null, configs: [], isOnline: false, fingerprint: null, tags: {} });
    expect((await get(await create({ name: `${prefix}null-configs`, configs: null }))).configs).toEqual([]);
  });

  it('keeps configs of router config types: changed by patch and full update, listed and filtered', async () => {
    const id = await create({ name: `${prefix}cfg`, configs: [routerConfigId] });
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { cost: 2 } })).statusCode).toBe(200);
    expect(await get(id)).toMatchObject({ cost: 2, configs: [routerConfigId] });
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { configs: [otherRouterConfigId] } })).statusCode).toBe(200);
    expect((await get(id)).configs).toEqual([otherRouterConfigId]);
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: `${prefix}cfg`, configs: [routerConfigId] } })).statusCode).toBe(200);
    expect((await get(id)).configs).toEqual([routerConfigId]);
    const listed = json(await call(t, 'GET', `${URL}?filter=${encodeURIComponent(`name = "${prefix}cfg"`)}`, { token: admin })).data;
    expect(listed.map((e: { configs: string[] }) => e.configs)).toEqual([[routerConfigId]]);
    const named = (filter: string) => call(t, 'GET', `${URL}?limit=500&filter=${encodeURIComponent(filter)}`, { token: admin });
    const ids = async (filter: string) => (json(await named(filter)).data as { id: string }[]).map((e) => e.id);
    expect(await ids(`anyOf(configs) = "${routerConfigId}"`)).toContain(id);
    expect(await ids(`anyOf(configs) = "${otherRouterConfigId}"`)).not.toContain(id);
    expect(json(await named('true')).meta.filterableFields).toContain('configs');
    // A full update without configs leaves none.
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: `${prefix}cfg` } })).statusCode).toBe(200);
    expect((await get(id)).configs).toEqual([]);
  });

  it('refuses configs that do not exist, that configure services, or two of one config type, as edge routers do', async () => {
    const refusals: [unknown[], string][] = [
      [['no-such-config'], 'REFERENCED_ENTITY_NOT_FOUND'],
      [[serviceConfigId], 'COULD_NOT_VALIDATE'],
      [[routerConfigId, serviceConfigId], 'COULD_NOT_VALIDATE'],
      [[routerConfigId, otherRouterConfigId], 'COULD_NOT_VALIDATE'],
      [[routerConfigId, routerConfigId], 'COULD_NOT_VALIDATE'],
    ];
    const id = await create({ name: `${prefix}cfg-refused`, configs: [routerConfigId] });
    for (const [configs, code] of refusals) {
      expectError(await call(t, 'POST', URL, { token: admin, body: { name: `${prefix}cfg-refused-new`, configs } }), 400, code, 'configs');
      expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { configs } }), 400, code, 'configs');
      expectError(await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: `${prefix}cfg-refused`, configs } }), 400, code, 'configs');
    }
    const body = expectError(await call(t, 'POST', URL, { token: admin, body: { name: 'v', configs: [routerConfigId, otherRouterConfigId] } }), 400, 'COULD_NOT_VALIDATE', 'configs');
    expect(JSON.stringify(body)).toContain('r-router-type');
    expect((await get(id)).configs).toEqual([routerConfigId]);
    expect(json(await call(t, 'GET', `${URL}?filter=${encodeURIComponent(`name = "${prefix}cfg-refused-new"`)}`, { token: admin })).data).toEqual([]);
  });

  it('an unknown router: 404, whatever configs are asked for', async () => {
    for (const method of ['PATCH', 'PUT'] as const) {
      expectError(await call(t, method, `${URL}/no-such-router`, { token: admin, body: { name: 'x', configs: [routerConfigId] } }), 404, 'NOT_FOUND');
    }
  });

  const invalid: [string, Record<string, unknown>, string][] = [
    ['missing name', { cost: 1 }, 'name'],
    ['empty name', { name: '' }, 'name'],
    ['cost above 65535', { name: 'v', cost: 65536 }, 'cost'],
    ['negative cost', { name: 'v', cost: -1 }, 'cost'],
    ['string cost', { name: 'v', cost: '1' }, 'cost'],
    ['disabled not a boolean', { name: 'v', disabled: 'x' }, 'disabled'],
    ['noTraversal not a boolean', { name: 'v', noTraversal: 0 }, 'noTraversal'],
    ['ctrlChanListeners not an object', { name: 'v', ctrlChanListeners: [] }, 'ctrlChanListeners'],
    ['ctrlChanListeners with groups not a list', { name: 'v', ctrlChanListeners: { 'tls:0.0.0.0:6262': { g: 1 } } }, 'ctrlChanListeners.tls:0.0.0.0:6262'],
    ['ctrlChanListeners with a group not a string', { name: 'v', ctrlChanListeners: { 'tls:0.0.0.0:6262': [null] } }, 'ctrlChanListeners.tls:0.0.0.0:6262[0]'],
    ['tags with a number', { name: 'v', tags: { n: 2 } }, 'tags.n'],
    ['configs not a list', { name: 'v', configs: 'x' }, 'configs'],
    ['configs with an empty id', { name: 'v', configs: [''] }, 'configs[0]'],
  ];
  it.each(invalid)('%s → 400 naming the field', async (_name, body, field) => {
    expectError(await call(t, 'POST', URL, { token: admin, body }), 400, 'COULD_NOT_VALIDATE', field);
  });

  it('refuses a duplicate name', async () => {
    await create({ name: `${prefix}dup` });
    expectError(await call(t, 'POST', URL, { token: admin, body: { name: `${prefix}dup` } }), 400, 'COULD_NOT_VALIDATE', 'name');
  });

  it('patch, full update and delete', async () => {
    const id = await create({ name: `${prefix}change`, cost: 3, noTraversal: true });
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { cost: 4 } })).statusCode).toBe(200);
    expect(await get(id)).toMatchObject({ name: `${prefix}change`, cost: 4, noTraversal: true });
    expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { cost: -5 } }), 400, 'COULD_NOT_VALIDATE', 'cost');
    expectError(await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { cost: 1 } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: `${prefix}changed` } })).statusCode).toBe(200);
    expect(await get(id)).toMatchObject({ name: `${prefix}changed`, cost: 0, noTraversal: false });
    const res = await call(t, 'DELETE', `${URL}/${id}`, { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    expectError(await call(t, 'GET', `${URL}/${id}`, { token: admin }), 404, 'NOT_FOUND');
  });

  it('lists with filter, sort and paging', async () => {
    for (const [n, cost] of [['b', 2], ['a', 1], ['c', 3]] as const) await create({ name: `${prefix}list-${n}`, cost });
    const filter = encodeURIComponent(`name contains "${prefix}list-"`);
    const res = await call(t, 'GET', `${URL}?filter=${filter}&sort=${encodeURIComponent('cost desc')}&limit=2&offset=1`, { token: admin });
    expect(res.statusCode).toBe(200);
    const body = json(res);
    expect(body.data.map((e: { name: string }) => e.name)).toEqual([`${prefix}list-b`, `${prefix}list-a`]);
    expect(body.meta.pagination).toEqual({ limit: 2, offset: 1, totalCount: 3 });
    expect(body.meta.filterableFields).toEqual(expect.arrayContaining(['id', 'name', 'cost', 'disabled', 'noTraversal', 'fingerprint', 'isOnline', 'isVerified']));
    expectError(await call(t, 'GET', `${URL}?filter=${encodeURIComponent('roleAttributes = "x"')}`, { token: admin }), 400, 'INVALID_FILTER');
  });

  it('without permission: 401; router permission: allowed', async () => {
    const id = await create({ name: `${prefix}auth` });
    const routes: [string, string, unknown?][] = [
      ['GET', URL],
      ['GET', `${URL}/${id}`],
      ['POST', URL, { name: `${prefix}auth-new` }],
      ['PATCH', `${URL}/${id}`, { cost: 2, configs: [routerConfigId] }],
      ['PUT', `${URL}/${id}`, { name: `${prefix}auth`, configs: [otherRouterConfigId] }],
      ['DELETE', `${URL}/${id}`],
    ];
    for (const [method, url, body] of routes) {
      expectError(await call(t, method as 'GET', url, { token: none, body }), 401, 'UNAUTHORIZED');
    }
    expect((await call(t, 'GET', `${URL}/${id}`, { token: readOnly })).statusCode).toBe(200);
    expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: readOnly, body: { cost: 1, configs: [routerConfigId] } }), 401, 'UNAUTHORIZED');
    expect((await get(id)).configs).toEqual([]);
    const expected = [200, 200, 201, 200, 200, 200];
    for (const [i, [method, url, body]] of routes.entries()) {
      const res = await call(t, method as 'GET', url, { token: routerPerm, body });
      expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(expected[i]);
    }
  });

  it('names the operations as endpoints.md does', async () => {
    const doc = json(await call(t, 'GET', `${MGMT}/specs/edge-management/spec`));
    const op = (path: string, method: string) => doc.paths[`${MGMT}${path}`]?.[method]?.operationId;
    expect(op(`/${collection}`, 'get')).toBe(`list${many}`);
    expect(op(`/${collection}`, 'post')).toBe(`create${one}`);
    expect(op(`/${collection}/{id}`, 'get')).toBe(`detail${one}`);
    expect(op(`/${collection}/{id}`, 'patch')).toBe(`patch${one}`);
    expect(op(`/${collection}/{id}`, 'put')).toBe(`update${one}`);
    expect(op(`/${collection}/{id}`, 'delete')).toBe(`delete${one}`);
  });
});

describe('one table behind both paths', () => {
  it('a router created at /routers is the same record at /transit-routers, and back', async () => {
    const res = await call(t, 'POST', `${MGMT}/routers`, { token: admin, body: { name: 'shared-1', cost: 12 } });
    const id = json(res).data.id as string;
    const viaTransit = json(await call(t, 'GET', `${MGMT}/transit-routers/${id}`, { token: admin })).data;
    expect(viaTransit).toMatchObject({ id, name: 'shared-1', cost: 12 });
    expect(viaTransit._links.self.href).toBe(`./transit-routers/${id}`);
    expect((await call(t, 'PATCH', `${MGMT}/transit-routers/${id}`, { token: admin, body: { cost: 13 } })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/routers/${id}`, { token: admin })).data.cost).toBe(13);
    // Names are unique across the table, whichever path wrote them.
    expectError(await call(t, 'POST', `${MGMT}/transit-routers`, { token: admin, body: { name: 'shared-1' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expect((await call(t, 'DELETE', `${MGMT}/transit-routers/${id}`, { token: admin })).statusCode).toBe(200);
    expectError(await call(t, 'GET', `${MGMT}/routers/${id}`, { token: admin }), 404, 'NOT_FOUND');
    // One kind of record in the audit log, whichever path changed it.
    const audited = json(await call(t, 'GET', `${MGMT}/audit-events?filter=${encodeURIComponent(`entityId = "${id}"`)}`, { token: admin }));
    expect(audited.data.map((e: { action: string; entityType: string }) => `${e.action} ${e.entityType}`).sort()).toEqual(['create routers', 'delete routers', 'update routers']);
  });

  it('deleting a router removes its terminators', async () => {
    const id = json(await call(t, 'POST', `${MGMT}/routers`, { token: admin, body: { name: 'with-terminator' } })).data.id as string;
    const service = await t.app.core.resources.get('services').create({ name: 'r-term-service' });
    const res = await call(t, 'POST', `${MGMT}/terminators`, { token: admin, body: { service: service.id, router: id, address: 'tcp:b:2', binding: 'transport' } });
    expect(res.statusCode, res.body).toBe(201);
    await call(t, 'DELETE', `${MGMT}/routers/${id}`, { token: admin });
    expectError(await call(t, 'GET', `${MGMT}/terminators/${json(res).data.id}`, { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('edge routers are routers too', () => {
  const er = async (body: Record<string, unknown>) => {
    const res = await call(t, 'POST', `${MGMT}/edge-routers`, { token: admin, body });
    expect(res.statusCode, res.body).toBe(201);
    return json(res).data.id as string;
  };
  const names = async (path: string, filter: string) =>
    (json(await call(t, 'GET', `${MGMT}/${path}?limit=500&sort=name&filter=${encodeURIComponent(filter)}`, { token: admin })).data as { name: string }[]).map(
      (e) => e.name,
    );

  it('both paths list them beside the others, with filter, sort and paging over all', async () => {
    const edgeId = await er({ name: 'mix-b-edge', cost: 7, noTraversal: true, roleAttributes: ['x'], configs: [routerConfigId] });
    await call(t, 'POST', `${MGMT}/routers`, { token: admin, body: { name: 'mix-a-router', cost: 9 } });
    await call(t, 'POST', `${MGMT}/transit-routers`, { token: admin, body: { name: 'mix-c-transit', cost: 5 } });
    for (const path of ['routers', 'transit-routers']) {
      expect(await names(path, 'name contains "mix-"')).toEqual(['mix-a-router', 'mix-b-edge', 'mix-c-transit']);
      expect(await names(path, 'name contains "mix-" and cost < 8')).toEqual(['mix-b-edge', 'mix-c-transit']);
      const page = json(await call(t, 'GET', `${MGMT}/${path}?sort=cost&limit=1&offset=1&filter=${encodeURIComponent('name contains "mix-"')}`, { token: admin }));
      expect(page.data.map((e: { id: string }) => e.id)).toEqual([edgeId]);
      expect(page.meta.pagination).toEqual({ limit: 1, offset: 1, totalCount: 3 });
      // the router fields of it, nothing of the edge router's own
      const one = json(await call(t, 'GET', `${MGMT}/${path}/${edgeId}`, { token: admin })).data;
      expect(one).toMatchObject({ id: edgeId, name: 'mix-b-edge', cost: 7, noTraversal: true, disabled: false, isOnline: false, isVerified: false, fingerprint: null, configs: [routerConfigId] });
      expect(await names(path, `name contains "mix-" and anyOf(configs) = "${routerConfigId}"`)).toEqual(['mix-b-edge']);
      expect(one._links.self.href).toBe(`./${path}/${edgeId}`);
      for (const f of ['roleAttributes', 'isTunnelerEnabled', 'hostname', 'supportedProtocols', 'syncStatus', 'appData']) expect(one).not.toHaveProperty(f);
    }
    // /edge-routers still lists only edge routers
    expect(await names('edge-routers', 'name contains "mix-"')).toEqual(['mix-b-edge']);
  });

  it('is changed only at /edge-routers: 409 CAN_NOT_UPDATE_ROUTER through /routers, nothing changed', async () => {
    const id = await er({ name: 'fixed-edge', cost: 3 });
    for (const path of ['routers', 'transit-routers']) {
      expectError(await call(t, 'PATCH', `${MGMT}/${path}/${id}`, { token: admin, body: { cost: 4 } }), 409, 'CAN_NOT_UPDATE_ROUTER');
      expectError(await call(t, 'PUT', `${MGMT}/${path}/${id}`, { token: admin, body: { name: 'renamed-edge' } }), 409, 'CAN_NOT_UPDATE_ROUTER');
    }
    expect(json(await call(t, 'GET', `${MGMT}/edge-routers/${id}`, { token: admin })).data).toMatchObject({ name: 'fixed-edge', cost: 3 });
    expect((await call(t, 'PATCH', `${MGMT}/edge-routers/${id}`, { token: admin, body: { cost: 4 } })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/routers/${id}`, { token: admin })).data.cost).toBe(4);
  });

  it('deleting it through /routers deletes the edge router with its tunneler identity, policy and terminators', async () => {
    const id = await er({ name: 'doomed-edge', isTunnelerEnabled: true });
    const service = await t.app.core.resources.get('services').create({ name: 'doomed-service' });
    const res = await call(t, 'POST', `${MGMT}/terminators`, { token: admin, body: { service: service.id, router: id, address: 'tcp:c:3', binding: 'transport' } });
    expect(res.statusCode, res.body).toBe(201);
    expect((await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).statusCode).toBe(200);
    const del = await call(t, 'DELETE', `${MGMT}/transit-routers/${id}`, { token: admin });
    expect(del.statusCode, del.body).toBe(200);
    for (const path of ['edge-routers', 'routers', 'identities', 'terminators']) {
      const target = path === 'terminators' ? json(res).data.id : id;
      expectError(await call(t, 'GET', `${MGMT}/${path}/${target}`, { token: admin }), 404, 'NOT_FOUND');
    }
    const policies = json(await call(t, 'GET', `${MGMT}/edge-router-policies?filter=${encodeURIComponent(`name = "edge-router-${id}-system"`)}`, { token: admin }));
    expect(policies.data).toEqual([]);
    // In the audit log the edge router is deleted once (and its tunneler identity, of the same id),
    // not a second time as a record of the path it was asked at.
    const audited = json(await call(t, 'GET', `${MGMT}/audit-events?filter=${encodeURIComponent(`entityId = "${id}" and action = "delete"`)}`, { token: admin }));
    expect(audited.data.map((e: { entityType: string }) => e.entityType).sort()).toEqual(['edge-routers', 'identities']);
  });

  it('names are unique across every router, whichever path writes them', async () => {
    const id = await er({ name: 'taken-by-edge' });
    await call(t, 'POST', `${MGMT}/routers`, { token: admin, body: { name: 'taken-by-router' } });
    expectError(await call(t, 'POST', `${MGMT}/routers`, { token: admin, body: { name: 'taken-by-edge' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expectError(await call(t, 'POST', `${MGMT}/transit-routers`, { token: admin, body: { name: 'taken-by-edge' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expectError(await call(t, 'POST', `${MGMT}/edge-routers`, { token: admin, body: { name: 'taken-by-router' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expectError(await call(t, 'PATCH', `${MGMT}/edge-routers/${id}`, { token: admin, body: { name: 'taken-by-router' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    // its own name again is no conflict
    expect((await call(t, 'PATCH', `${MGMT}/edge-routers/${id}`, { token: admin, body: { name: 'taken-by-edge', cost: 1 } })).statusCode).toBe(200);
    expect(await names('routers', 'name contains "taken-by-"')).toEqual(['taken-by-edge', 'taken-by-router']);
  });

  it('a terminator on an edge router names it through /routers as well', async () => {
    const id = await er({ name: 'hosting-edge' });
    const service = await t.app.core.resources.get('services').create({ name: 'hosted-service' });
    const res = await call(t, 'POST', `${MGMT}/terminators`, { token: admin, body: { service: service.id, router: id, address: 'tcp:d:4', binding: 'transport' } });
    expect(res.statusCode, res.body).toBe(201);
    expect(json(await call(t, 'GET', `${MGMT}/terminators/${json(res).data.id}`, { token: admin })).data).toMatchObject({ routerId: id, router: { id, name: 'hosting-edge' } });
  });
});

describe('a store from before the routers view', () => {
  it('keeps every router and edge router, and lists them all once migrated', async () => {
    const store = new Store(openSqlite(':memory:'));
    try {
      const before = migrations.findIndex((m) => m.name === '0008-all-routers');
      expect(before).toBeGreaterThan(0);
      await store.migrate(migrations.slice(0, before));
      const now = '2026-01-02T03:04:05.678Z';
      const base = { created_at: now, updated_at: now, tags: '{}' };
      await store.db.insertInto('routers').values({ ...base, id: 'old-r', name: 'old-router', cost: 2, ctrl_chan_listeners: '{"tls:a:1":[]}' }).execute();
      await store.db
        .insertInto('edge_routers')
        .values({ ...base, id: 'old-e', name: 'old-edge', cost: 5, role_attributes: '["a"]', is_tunneler_enabled: 1, hostname: 'h', sync_status: 'SYNC_UNKNOWN' })
        .execute();
      expect(await store.migrate(migrations)).toEqual(migrations.slice(before).map((m) => m.name));
      const rows = await store.db.selectFrom('all_routers').selectAll().orderBy('id').execute();
      expect(rows.map((r) => [r.id, r.name, r.cost])).toEqual([
        ['old-e', 'old-edge', 5],
        ['old-r', 'old-router', 2],
      ]);
      // the tables themselves are untouched
      expect(await store.db.selectFrom('edge_routers').select(['id', 'role_attributes', 'hostname', 'is_tunneler_enabled']).execute()).toEqual([
        { id: 'old-e', role_attributes: '["a"]', hostname: 'h', is_tunneler_enabled: 1 },
      ]);
      expect(await store.db.selectFrom('routers').select(['id', 'ctrl_chan_listeners']).execute()).toEqual([{ id: 'old-r', ctrl_chan_listeners: '{"tls:a:1":[]}' }]);
    } finally {
      await store.close();
    }
  });
});

describe('a store from before router configs', () => {
  it('keeps every router, the edge routers with their configs, and reads routers with none', async () => {
    const store = new Store(openSqlite(':memory:'));
    try {
      const before = migrations.findIndex((m) => m.name === '0020-router-configs');
      expect(before).toBeGreaterThan(0);
      await store.migrate(migrations.slice(0, before));
      const now = '2026-01-02T03:04:05.678Z';
      const base = { created_at: now, updated_at: now, tags: '{}' };
      await store.db.insertInto('config_types').values({ ...base, id: 'old-t', name: 'old-type', target: 'router' }).execute();
      await store.db.insertInto('configs').values({ ...base, id: 'old-c', name: 'old-config', config_type_id: 'old-t', data: '{}' }).execute();
      await store.db.insertInto('routers').values({ ...base, id: 'old-r', name: 'old-router', cost: 2 }).execute();
      await store.db.insertInto('edge_routers').values({ ...base, id: 'old-e', name: 'old-edge', configs: '["old-c"]', sync_status: 'SYNC_UNKNOWN' }).execute();
      expect(await store.migrate(migrations)).toEqual(migrations.slice(before).map((m) => m.name));
      const rows = await store.db.selectFrom('all_routers').select(['id', 'name', 'cost', 'configs']).orderBy('id').execute();
      expect(rows).toEqual([
        { id: 'old-e', name: 'old-edge', cost: 0, configs: '["old-c"]' },
        { id: 'old-r', name: 'old-router', cost: 2, configs: '[]' },
      ]);
    } finally {
      await store.close();
    }
  });
});
