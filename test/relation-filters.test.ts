// Filters on what a record reaches through its relations, as the established controller lets
// filters name them: a terminator's service.name and router.name, a service's configs (its link
// list), and the records a policy selects now (its link tables, not its role lists).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ENV, asAdmin, call, createIdentityWithPassword, expectError, json, login, MGMT, startTestController, type TestController } from './helpers.js';

let t: TestController;
let admin: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

async function created(path: string, body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/${path}`, { token: admin, body });
  if (res.statusCode !== 201) throw new Error(`creating ${path} failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

/** The names of the records a filter finds, in name order. */
async function found(path: string, filter: string, nameOf: (e: any) => string = (e) => e.name): Promise<string[]> {
  const res = await call(t, 'GET', `${MGMT}/${path}?filter=${encodeURIComponent(filter)}&limit=500`, { token: admin });
  expect(res.statusCode, `${filter}: ${res.body}`).toBe(200);
  return (json(res).data as any[]).map(nameOf).sort();
}

describe('terminators by the names of their service and router', () => {
  let ids: Record<string, string>;
  beforeAll(async () => {
    const web = await created('services', { name: 'rf-web' });
    const db = await created('services', { name: 'rf-db' });
    const edge = await created('edge-routers', { name: 'rf-edge' });
    const transit = await created('routers', { name: 'rf-transit' });
    const terminator = (service: string, router: string, address: string) => created('terminators', { service, router, address, binding: 'transport' });
    ids = {
      webEdge: await terminator(web, edge, 'tcp:web-edge:1'),
      webTransit: await terminator(web, transit, 'tcp:web-transit:1'),
      dbEdge: await terminator(db, edge, 'tcp:db-edge:1'),
    };
  });

  const byAddress = (e: any) => e.address as string;

  it.each([
    ['service.name = "rf-web"', ['tcp:web-edge:1', 'tcp:web-transit:1']],
    ['service.name != "rf-web" and address contains "rf" or service.name = "rf-db"', ['tcp:db-edge:1']],
    ['router.name = "rf-transit"', ['tcp:web-transit:1']],
    ['router.name in ["rf-edge"] and service.name icontains "DB"', ['tcp:db-edge:1']],
    ['service.name = "rf-web" and not router.name = "rf-edge"', ['tcp:web-transit:1']],
    ['router.name = null', []],
    ['service.name = "no-such-service"', []],
  ])('%s', async (filter, addresses) => {
    expect((await found('terminators', filter, byAddress)).filter((a) => a.includes(':1'))).toEqual(addresses);
  });

  it('are listed among the filterable fields, but are not sort keys', async () => {
    const res = await call(t, 'GET', `${MGMT}/terminators`, { token: admin });
    expect(json(res).meta.filterableFields).toEqual(expect.arrayContaining(['service.name', 'router.name']));
    expectError(await call(t, 'GET', `${MGMT}/terminators?sort=service.name`, { token: admin }), 400, 'INVALID_SORT_IDENTIFIER', 'sort');
    expectError(await call(t, 'GET', `${MGMT}/terminators?filter=${encodeURIComponent('service.id = "x"')}`, { token: admin }), 400, 'INVALID_FILTER', 'filter');
    expectError(await call(t, 'GET', `${MGMT}/terminators?filter=${encodeURIComponent('service.name = 1')}`, { token: admin }), 400, 'INVALID_FILTER', 'filter');
    expect(ids.webEdge).toBeTruthy();
  });
});

describe('services by their configs', () => {
  let configs: Record<string, string>;
  beforeAll(async () => {
    const intercept = await created('config-types', { name: 'rf.intercept', schema: { type: 'object' } });
    const host = await created('config-types', { name: 'rf.host', schema: { type: 'object' } });
    configs = {
      interceptA: await created('configs', { name: 'rf-intercept-a', configTypeId: intercept, data: {} }),
      hostA: await created('configs', { name: 'rf-host-a', configTypeId: host, data: {} }),
      interceptB: await created('configs', { name: 'rf-intercept-b', configTypeId: intercept, data: {} }),
    };
    await created('services', { name: 'rf-svc-both', configs: [configs.interceptA, configs.hostA] });
    await created('services', { name: 'rf-svc-b', configs: [configs.interceptB] });
    await created('services', { name: 'rf-svc-none' });
  });

  const ours = (names: string[]) => names.filter((n) => n.startsWith('rf-svc-'));

  it('anyOf, allOf, count and isEmpty read the link list', async () => {
    expect(ours(await found('services', `anyOf(configs) = "${configs.hostA}"`))).toEqual(['rf-svc-both']);
    expect(ours(await found('services', `anyOf(configs) in ["${configs.interceptA}", "${configs.interceptB}"]`))).toEqual(['rf-svc-b', 'rf-svc-both']);
    expect(ours(await found('services', `allOf(configs) = "${configs.interceptB}"`))).toEqual(['rf-svc-b', 'rf-svc-none']);
    expect(ours(await found('services', 'count(configs) = 2'))).toEqual(['rf-svc-both']);
    expect(ours(await found('services', 'count(configs) < 2'))).toEqual(['rf-svc-b', 'rf-svc-none']);
    expect(ours(await found('services', 'isEmpty(configs)'))).toEqual(['rf-svc-none']);
    expect(ours(await found('services', 'not isEmpty(configs)'))).toEqual(['rf-svc-b', 'rf-svc-both']);
    expect(ours(await found('services', `not anyOf(configs) = "${configs.hostA}"`))).toEqual(['rf-svc-b', 'rf-svc-none']);
  });

  it('follows a change of the list', async () => {
    const id = json(await call(t, 'GET', `${MGMT}/services?filter=${encodeURIComponent('name = "rf-svc-none"')}`, { token: admin })).data[0].id;
    expect((await call(t, 'PATCH', `${MGMT}/services/${id}`, { token: admin, body: { configs: [configs.hostA] } })).statusCode).toBe(200);
    expect(ours(await found('services', `anyOf(configs) = "${configs.hostA}"`))).toEqual(['rf-svc-both', 'rf-svc-none']);
  });

  it('must be wrapped, as every set', async () => {
    expectError(await call(t, 'GET', `${MGMT}/services?filter=${encodeURIComponent('configs = "x"')}`, { token: admin }), 400, 'INVALID_FILTER', 'filter');
  });
});

describe('policies by the records they select now', () => {
  let ann: string;
  beforeAll(async () => {
    ann = await created('identities', { name: 'rf-ann', type: 'User', isAdmin: false, roleAttributes: ['rf-ops'] });
    await created('identities', { name: 'rf-bob', type: 'User', isAdmin: false, roleAttributes: ['rf-dev'] });
    const svc = await created('services', { name: 'rf-policy-svc', roleAttributes: ['rf-apps'] });
    await created('service-policies', { name: 'rf-sp-ops', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#rf-ops'], serviceRoles: ['#rf-apps'] });
    await created('service-policies', { name: 'rf-sp-ann', type: 'Bind', semantic: 'AnyOf', identityRoles: [`@${ann}`], serviceRoles: [`@${svc}`] });
    await created('service-policies', { name: 'rf-sp-nobody', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#rf-nobody'], serviceRoles: ['#rf-apps'] });
    await created('edge-router-policies', { name: 'rf-erp-ops', semantic: 'AnyOf', identityRoles: ['#rf-ops'], edgeRouterRoles: [] });
  });

  const ours = (names: string[]) => names.filter((n) => n.startsWith('rf-'));

  it('anyOf(identities) is who a policy selects, by attribute or by id; not its role list', async () => {
    expect(ours(await found('service-policies', `anyOf(identities) = "${ann}"`))).toEqual(['rf-sp-ann', 'rf-sp-ops']);
    expect(ours(await found('service-policies', 'anyOf(identityRoles) = "#rf-ops"'))).toEqual(['rf-sp-ops']);
    expect(ours(await found('service-policies', 'isEmpty(identities) and name contains "rf-"'))).toEqual(['rf-sp-nobody']);
    expect(ours(await found('edge-router-policies', `anyOf(identities) = "${ann}"`))).toEqual(['rf-erp-ops']);
  });

  it('follows a change of an identity\'s attributes', async () => {
    expect((await call(t, 'PATCH', `${MGMT}/identities/${ann}`, { token: admin, body: { roleAttributes: ['rf-nobody'] } })).statusCode).toBe(200);
    expect(ours(await found('service-policies', `anyOf(identities) = "${ann}"`))).toEqual(['rf-sp-ann', 'rf-sp-nobody']);
    expect(ours(await found('service-policies', 'count(services) = 1 and count(identities) = 1'))).toEqual(['rf-sp-ann', 'rf-sp-nobody']);
  });

  // Otherwise a filter would tell a reader of policies which identities have which attributes.
  it('are named only by a caller who may read what they reach', async () => {
    await createIdentityWithPassword(t, admin, { name: 'rf-policy-reader', username: 'rf-policy-reader', password: 'rf-reader-pass-1', permissions: ['service-policy.read', 'service.read'] });
    const reader = await login(t, 'rf-policy-reader', 'rf-reader-pass-1');
    const list = (filter: string) => call(t, 'GET', `${MGMT}/service-policies?filter=${encodeURIComponent(filter)}`, { token: reader });
    expectError(await list(`anyOf(identities) = "${ann}"`), 400, 'INVALID_FILTER', 'filter');
    expectError(await list('count(postureChecks) = 0'), 400, 'INVALID_FILTER', 'filter');
    const fields = json(await list('count(services) = 1')).meta.filterableFields;
    expect(fields).toContain('services');
    expect(fields).not.toContain('identities');
    // The same through a related list, which takes the read of what it lists only.
    const related = await call(t, 'GET', `${MGMT}/services/${json(await list('name = "rf-sp-ann"')).data[0].serviceRoles[0].slice(1)}/service-policies?filter=${encodeURIComponent(`anyOf(identities) = "${ann}"`)}`, { token: reader });
    expectError(related, 400, 'INVALID_FILTER', 'filter');
    const readonly = await createIdentityWithPassword(t, admin, { name: 'rf-readonly', username: 'rf-readonly', password: 'rf-reader-pass-1', permissions: ['admin_readonly'] });
    expect(readonly.id).toBeTruthy();
    const all = json(await call(t, 'GET', `${MGMT}/service-policies?filter=${encodeURIComponent(`anyOf(identities) = "${ann}"`)}`, { token: await login(t, 'rf-readonly', 'rf-reader-pass-1') }));
    expect(all.data.map((p: any) => p.name).sort()).toEqual(['rf-sp-ann', 'rf-sp-nobody']);
  });

  it('names each kind a policy selects among its filterable fields', async () => {
    const fields = async (path: string) => json(await call(t, 'GET', `${MGMT}/${path}`, { token: admin })).meta.filterableFields;
    expect(await fields('service-policies')).toEqual(expect.arrayContaining(['identities', 'services', 'postureChecks']));
    expect(await fields('edge-router-policies')).toEqual(expect.arrayContaining(['identities', 'edgeRouters']));
    expect(await fields('service-edge-router-policies')).toEqual(expect.arrayContaining(['services', 'edgeRouters']));
  });
});
