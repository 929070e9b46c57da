// Terminators on the Management API: references to an existing service and router, the secret
// kept only as a hash and never returned, and a service's terminators.
import { createHash } from 'node:crypto';
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
let serviceId: string;
let otherServiceId: string;
let edgeRouterId: string;
let routerId: string;

const URL = `${MGMT}/terminators`;
const SECRET = Buffer.from('terminator secret bytes, quite private').toString('base64');
const SECRET_HASH = createHash('sha256').update(Buffer.from(SECRET, 'base64')).digest('hex');

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  // Services through the resource service: their routes are not this file's subject.
  const services = t.app.core.resources.get('services');
  serviceId = (await services.create({ name: 'term-service' })).id;
  otherServiceId = (await services.create({ name: 'term-service-2' })).id;
  edgeRouterId = json(await call(t, 'POST', `${MGMT}/edge-routers`, { token: admin, body: { name: 'term-er' } })).data.id;
  routerId = json(await call(t, 'POST', `${MGMT}/routers`, { token: admin, body: { name: 'term-router' } })).data.id;
});
afterAll(async () => {
  await t.close();
});

const base = () => ({ service: serviceId, router: edgeRouterId, address: 'tcp:10.0.0.1:80', binding: 'transport' });

async function create(body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', URL, { token: admin, body });
  if (res.statusCode !== 201) throw new Error(`creating terminator failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

async function get(id: string): Promise<any> {
  const res = await call(t, 'GET', `${URL}/${id}`, { token: admin });
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
}

const storedHash = async (id: string) =>
  (await t.app.core.store.db.selectFrom('terminators').select('identity_secret_hash').where('id', '=', id).executeTakeFirstOrThrow())
    .identity_secret_hash as string | null;

describe('create and read', () => {
  it('round-trips every field; reads carry service and router references and their ids', async () => {
    const body = { ...base(), cost: 65535, precedence: 'required', identity: 'host-a', identitySecret: SECRET, tags: { dc: 'x' } };
    const res = await call(t, 'POST', URL, { token: admin, body });
    expect(res.statusCode).toBe(201);
    const created = json(res).data;
    expect(created).toEqual({ id: created.id, _links: { self: { href: `./terminators/${created.id}` } } });
    const e = await get(created.id);
    expect(e).toEqual({
      _links: { self: { href: `./terminators/${created.id}` } },
      id: created.id,
      createdAt: e.createdAt,
      updatedAt: e.updatedAt,
      tags: { dc: 'x' },
      service: { _links: { self: { href: `./services/${serviceId}` } }, entity: 'services', id: serviceId, name: 'term-service' },
      serviceId,
      router: { _links: { self: { href: `./edge-routers/${edgeRouterId}` } }, entity: 'edge-routers', id: edgeRouterId, name: 'term-er' },
      routerId: edgeRouterId,
      address: 'tcp:10.0.0.1:80',
      binding: 'transport',
      cost: 65535,
      // what routing adds at run time; this controller routes no circuits, so nothing
      dynamicCost: 0,
      precedence: 'required',
      identity: 'host-a',
    });
  });

  it('a router without edge functions is referenced as a router', async () => {
    const id = await create({ ...base(), router: routerId });
    const e = await get(id);
    expect(e.router).toEqual({ _links: { self: { href: `./routers/${routerId}` } }, entity: 'routers', id: routerId, name: 'term-router' });
    expect(e).toMatchObject({ routerId, cost: 0, dynamicCost: 0, precedence: 'default', identity: '', tags: {} });
  });
});

describe('identitySecret', () => {
  it('is stored as the SHA-256 of its bytes and never returned, in any answer', async () => {
    const id = await create({ ...base(), identity: 'secret-host', identitySecret: SECRET });
    expect(await storedHash(id)).toBe(SECRET_HASH);
    const answers = [
      await call(t, 'GET', `${URL}/${id}`, { token: admin }),
      await call(t, 'GET', `${URL}?limit=500`, { token: admin }),
      await call(t, 'GET', `${MGMT}/services/${serviceId}/terminators?limit=500`, { token: admin }),
    ];
    for (const res of answers) {
      expect(res.statusCode).toBe(200);
      expect(res.body).not.toContain(SECRET);
      expect(res.body).not.toContain(SECRET_HASH);
      expect(res.body).not.toMatch(/identitySecret/);
    }
  });

  it('is fixed after create: patch and full update leave the hash as it is', async () => {
    const id = await create({ ...base(), identitySecret: SECRET });
    const other = Buffer.from('another').toString('base64');
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { identitySecret: other, cost: 1 } })).statusCode).toBe(200);
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { ...base(), identitySecret: other } })).statusCode).toBe(200);
    expect(await storedHash(id)).toBe(SECRET_HASH);
  });

  it('is optional; an empty one stores nothing', async () => {
    expect(await storedHash(await create(base()))).toBeNull();
    expect(await storedHash(await create({ ...base(), identitySecret: '' }))).toBeNull();
  });

  it('must be base64; the refusal does not echo it', async () => {
    for (const secret of ['not base64!', 'xyz', 'a===', 'ab=c']) {
      const res = await call(t, 'POST', URL, { token: admin, body: { ...base(), identitySecret: secret } });
      expectError(res, 400, 'COULD_NOT_VALIDATE', 'identitySecret');
      expect(res.body).not.toContain(secret);
    }
  });
});

describe('validation', () => {
  const invalid: [string, () => Record<string, unknown>, string][] = [
    ['missing service', () => ({ ...base(), service: undefined }), 'service'],
    ['missing router', () => ({ ...base(), router: undefined }), 'router'],
    ['missing address', () => ({ ...base(), address: undefined }), 'address'],
    ['missing binding', () => ({ ...base(), binding: undefined }), 'binding'],
    ['empty address', () => ({ ...base(), address: '' }), 'address'],
    ['cost above 65535', () => ({ ...base(), cost: 65536 }), 'cost'],
    ['negative cost', () => ({ ...base(), cost: -1 }), 'cost'],
    ['unknown precedence', () => ({ ...base(), precedence: 'highest' }), 'precedence'],
    ['identity not a string', () => ({ ...base(), identity: 5 }), 'identity'],
    ['tags with a number', () => ({ ...base(), tags: { n: 1 } }), 'tags.n'],
  ];
  it.each(invalid)('%s → 400 COULD_NOT_VALIDATE naming the field', async (_name, body, field) => {
    expectError(await call(t, 'POST', URL, { token: admin, body: body() }), 400, 'COULD_NOT_VALIDATE', field);
  });

  it('an unknown service or router is 400 REFERENCED_ENTITY_NOT_FOUND naming it', async () => {
    expectError(await call(t, 'POST', URL, { token: admin, body: { ...base(), service: 'no-such-service' } }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'service');
    expectError(await call(t, 'POST', URL, { token: admin, body: { ...base(), router: 'no-such-router' } }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'router');
    const id = await create(base());
    expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { router: 'no-such-router' } }), 400, 'REFERENCED_ENTITY_NOT_FOUND', 'router');
    expect(await get(id)).toMatchObject({ serviceId, routerId: edgeRouterId });
  });
});

describe('patch, full update, delete', () => {
  it('patch changes only the supplied fields, the router too', async () => {
    const id = await create({ ...base(), cost: 5, identity: 'keep' });
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { router: routerId, service: serviceId, precedence: 'failed' } })).statusCode).toBe(200);
    expect(await get(id)).toMatchObject({
      routerId,
      router: { entity: 'routers', id: routerId },
      serviceId,
      precedence: 'failed',
      cost: 5,
      identity: 'keep',
    });
  });

  it('the service and the identity are fixed when created, as in the established controller: another is 400, nothing changed', async () => {
    const id = await create({ ...base(), identity: 'host-1' });
    for (const method of ['PATCH', 'PUT'] as const) {
      expectError(await call(t, method, `${URL}/${id}`, { token: admin, body: { ...base(), service: otherServiceId } }), 400, 'COULD_NOT_VALIDATE', 'service');
      expectError(await call(t, method, `${URL}/${id}`, { token: admin, body: { ...base(), identity: 'host-2' } }), 400, 'COULD_NOT_VALIDATE', 'identity');
    }
    expect(await get(id)).toMatchObject({ serviceId, identity: 'host-1' });
  });

  it('full update requires router, address and binding and resets the rest but what is fixed', async () => {
    const id = await create({ ...base(), cost: 5, identity: 'kept', precedence: 'required' });
    for (const field of ['router', 'address', 'binding']) {
      expectError(await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { ...base(), [field]: undefined } }), 400, 'COULD_NOT_VALIDATE', field);
    }
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { ...base(), address: 'tcp:b:2' } })).statusCode).toBe(200);
    expect(await get(id)).toMatchObject({ address: 'tcp:b:2', cost: 0, identity: 'kept', precedence: 'default' });
  });

  it('delete, and unknown ids are 404', async () => {
    const id = await create(base());
    const res = await call(t, 'DELETE', `${URL}/${id}`, { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    const url = `${URL}/${id}`;
    expectError(await call(t, 'GET', url, { token: admin }), 404, 'NOT_FOUND');
    expectError(await call(t, 'PATCH', url, { token: admin, body: { cost: 1 } }), 404, 'NOT_FOUND');
    expectError(await call(t, 'PUT', url, { token: admin, body: base() }), 404, 'NOT_FOUND');
    expectError(await call(t, 'DELETE', url, { token: admin }), 404, 'NOT_FOUND');
  });

  it('deleting the service removes its terminators', async () => {
    const service = await t.app.core.resources.get('services').create({ name: 'term-doomed' });
    const id = await create({ ...base(), service: service.id });
    await t.app.core.resources.get('services').delete(service.id);
    expectError(await call(t, 'GET', `${URL}/${id}`, { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('lists', () => {
  let listService: string;
  beforeAll(async () => {
    listService = (await t.app.core.resources.get('services').create({ name: 'term-list-service' })).id;
    for (const [address, cost, router] of [['tcp:l:1', 3, edgeRouterId], ['tcp:l:2', 1, routerId], ['tcp:l:3', 2, edgeRouterId]] as const) {
      await create({ service: listService, router, address, binding: 'transport', cost });
    }
    await create({ ...base(), address: 'tcp:l:other' });
  });
  const q = (f: string) => `filter=${encodeURIComponent(f)}`;
  const addresses = (body: any) => body.data.map((e: { address: string }) => e.address);

  it('/terminators filters on service, router and the scalar fields', async () => {
    const body = json(await call(t, 'GET', `${URL}?${q(`service = "${listService}"`)}&sort=cost`, { token: admin }));
    expect(addresses(body)).toEqual(['tcp:l:2', 'tcp:l:3', 'tcp:l:1']);
    expect(body.meta.filterableFields).toEqual(expect.arrayContaining(['id', 'service', 'router', 'address', 'binding', 'cost', 'precedence', 'identity']));
    expect(body.meta.filterableFields).not.toContain('identitySecret');
    expect(body.meta.filterableFields).not.toContain('identitySecretHash');
    const byRouter = json(await call(t, 'GET', `${URL}?${q(`service = "${listService}" and router = "${routerId}"`)}`, { token: admin }));
    expect(addresses(byRouter)).toEqual(['tcp:l:2']);
    expectError(await call(t, 'GET', `${URL}?${q('identitySecretHash != null')}`, { token: admin }), 400, 'INVALID_FILTER');
  });

  it("/services/{id}/terminators lists only the service's terminators, with filter, sort and paging", async () => {
    const res = await call(t, 'GET', `${MGMT}/services/${listService}/terminators?sort=${encodeURIComponent('cost desc')}&limit=2`, { token: admin });
    expect(res.statusCode).toBe(200);
    const body = json(res);
    expect(addresses(body)).toEqual(['tcp:l:1', 'tcp:l:3']);
    expect(body.meta.pagination).toEqual({ limit: 2, offset: 0, totalCount: 3 });
    expect(body.data[0]).toMatchObject({ serviceId: listService, service: { id: listService }, router: { entity: 'edge-routers' } });
    const filtered = json(await call(t, 'GET', `${MGMT}/services/${listService}/terminators?${q('cost < 3')}&sort=cost`, { token: admin }));
    expect(addresses(filtered)).toEqual(['tcp:l:2', 'tcp:l:3']);
    // A filter narrows the service's terminators; it never widens them.
    const wide = json(await call(t, 'GET', `${MGMT}/services/${listService}/terminators?${q(`service = "${serviceId}" or cost >= 0`)}`, { token: admin }));
    expect(wide.meta.pagination.totalCount).toBe(3);
    expectError(await call(t, 'GET', `${MGMT}/services/${listService}/terminators?${q('nope = 1')}`, { token: admin }), 400, 'INVALID_FILTER');
  });

  it('/services/{id}/terminators of a service without terminators is empty', async () => {
    const empty = (await t.app.core.resources.get('services').create({ name: 'term-none' })).id;
    const body = json(await call(t, 'GET', `${MGMT}/services/${empty}/terminators`, { token: admin }));
    expect(body.data).toEqual([]);
    expect(body.meta.pagination.totalCount).toBe(0);
  });
});

describe('who may call', () => {
  let id: string;
  let none: string;
  let terminator: string;
  let serviceRead: string;
  beforeAll(async () => {
    id = await create(base());
    await createIdentityWithPassword(t, admin, { name: 't-none', username: 't-none', password: 't-none-1', permissions: ['router'] });
    await createIdentityWithPassword(t, admin, { name: 't-term', username: 't-term', password: 't-term-1', permissions: ['terminator'] });
    await createIdentityWithPassword(t, admin, { name: 't-svc', username: 't-svc', password: 't-svc-1', permissions: ['service.read'] });
    none = await login(t, 't-none', 't-none-1');
    terminator = await login(t, 't-term', 't-term-1');
    serviceRead = await login(t, 't-svc', 't-svc-1');
  });
  const routes = (): [string, string, unknown?][] => [
    ['GET', URL],
    ['GET', `${URL}/${id}`],
    ['GET', `${MGMT}/services/${serviceId}/terminators`],
    ['POST', URL, base()],
    ['PATCH', `${URL}/${id}`, { cost: 2 }],
    ['PUT', `${URL}/${id}`, base()],
    ['DELETE', `${URL}/${id}`],
  ];

  it('without the terminator permission: 401', async () => {
    for (const [method, url, body] of routes()) {
      expectError(await call(t, method as 'GET', url, { token: none, body }), 401, 'UNAUTHORIZED');
    }
  });

  it("a service's terminators take the terminator read permission, not the service one", async () => {
    expectError(await call(t, 'GET', `${MGMT}/services/${serviceId}/terminators`, { token: serviceRead }), 401, 'UNAUTHORIZED');
  });

  it('the terminator permission does everything', async () => {
    const expected = [200, 200, 200, 201, 200, 200, 200];
    for (const [i, [method, url, body]] of routes().entries()) {
      const res = await call(t, method as 'GET', url, { token: terminator, body });
      expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(expected[i]);
    }
  });
});

describe('OpenAPI', () => {
  it('names the operations as endpoints.md does', async () => {
    const doc = json(await call(t, 'GET', `${MGMT}/specs/edge-management/spec`));
    const op = (path: string, method: string) => doc.paths[`${MGMT}${path}`]?.[method]?.operationId;
    expect(op('/terminators', 'get')).toBe('listTerminators');
    expect(op('/terminators', 'post')).toBe('createTerminator');
    expect(op('/terminators/{id}', 'get')).toBe('detailTerminator');
    expect(op('/terminators/{id}', 'patch')).toBe('patchTerminator');
    expect(op('/terminators/{id}', 'put')).toBe('updateTerminator');
    expect(op('/terminators/{id}', 'delete')).toBe('deleteTerminator');
    expect(op('/services/{id}/terminators', 'get')).toBe('listServiceTerminators');
  });
});
