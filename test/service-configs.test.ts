// An identity's service-config overrides: GET, POST (associate, replacing the config of the same
// type) and DELETE (named pairs, or all) on /identities/{id}/service-configs.
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
  expectMissingCredential,
} from './helpers.js';

let t: TestController;
let admin: string;

let svcA: string;
let svcB: string;
let interceptA: string;
let interceptB: string;
let host: string;
let routerConfig: string;

const INTERCEPT = { protocols: ['tcp'], addresses: ['app.example.com'], portRanges: [{ low: 443, high: 443 }] };

async function create(collection: string, body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/${collection}`, { token: admin, body });
  if (res.statusCode !== 201) throw new Error(`creating ${collection} failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  interceptA = await create('configs', { name: 'isc-intercept-a', configTypeId: 'intercept.v1', data: INTERCEPT });
  interceptB = await create('configs', { name: 'isc-intercept-b', configTypeId: 'intercept.v1', data: INTERCEPT });
  host = await create('configs', { name: 'isc-host', configTypeId: 'host.v1', data: { protocol: 'udp', address: '10.0.0.1', port: 53 } });
  const routerType = await create('config-types', { name: 'isc-router-type', target: 'router' });
  routerConfig = await create('configs', { name: 'isc-router', configTypeId: routerType, data: {} });
  svcA = await create('services', { name: 'isc-svc-a', configs: [interceptA] });
  svcB = await create('services', { name: 'isc-svc-b' });
});
afterAll(async () => {
  await t.close();
});

const url = (identityId: string) => `${MGMT}/identities/${identityId}/service-configs`;

async function pairs(identityId: string): Promise<[string, string][]> {
  const res = await call(t, 'GET', url(identityId), { token: admin });
  expect(res.statusCode).toBe(200);
  return json(res).data.map((p: any) => [p.serviceId, p.configId]);
}

const sortPairs = (list: [string, string][]) => [...list].sort((a, b) => (a.join() < b.join() ? -1 : 1));

let users = 0;
async function caller(permissions: string[], extra: Record<string, unknown> = {}): Promise<{ id: string; token: string }> {
  users += 1;
  const name = `isc-user-${users}`;
  const { id } = await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pass`, permissions, ...extra });
  return { id, token: await login(t, name, `${name}-pass`) };
}

describe('GET', () => {
  it('is empty for a new identity and lists pairs with references', async () => {
    const id = await createIdentity(t, admin, { name: 'isc-get' });
    const empty = await call(t, 'GET', url(id), { token: admin });
    expect(empty.statusCode).toBe(200);
    expect(json(empty).data).toEqual([]);
    await call(t, 'POST', url(id), { token: admin, body: [{ serviceId: svcA, configId: host }] });
    expect(json(await call(t, 'GET', url(id), { token: admin })).data).toEqual([
      {
        serviceId: svcA,
        configId: host,
        configTypeId: 'host.v1',
        service: { _links: { self: { href: `./services/${svcA}` } }, entity: 'services', id: svcA, name: 'isc-svc-a' },
        config: { _links: { self: { href: `./configs/${host}` } }, entity: 'configs', id: host, name: 'isc-host' },
        configType: { _links: { self: { href: './config-types/host.v1' } }, entity: 'config-types', id: 'host.v1', name: 'host.v1' },
      },
    ]);
  });
});

describe('POST', () => {
  it('associates pairs and replaces the config of the same type for the same service', async () => {
    const id = await createIdentity(t, admin, { name: 'isc-post' });
    const res = await call(t, 'POST', url(id), {
      token: admin,
      body: [
        { serviceId: svcA, configId: interceptB },
        { serviceId: svcA, configId: host },
        { serviceId: svcB, configId: interceptA },
      ],
    });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    expect(await pairs(id)).toEqual(sortPairs([[svcA, interceptB], [svcA, host], [svcB, interceptA]]));

    // Same type, same service: the new config replaces the old; other pairs stay.
    await call(t, 'POST', url(id), { token: admin, body: [{ serviceId: svcA, configId: interceptA }] });
    expect(await pairs(id)).toEqual(sortPairs([[svcA, interceptA], [svcA, host], [svcB, interceptA]]));

    // Sending what is there again changes nothing; an empty list is fine.
    await call(t, 'POST', url(id), { token: admin, body: [{ serviceId: svcA, configId: interceptA }, { serviceId: svcA, configId: interceptA }] });
    expect((await call(t, 'POST', url(id), { token: admin, body: [] })).statusCode).toBe(200);
    expect(await pairs(id)).toEqual(sortPairs([[svcA, interceptA], [svcA, host], [svcB, interceptA]]));

    // Items read from the list may be sent back as they are.
    const listed = json(await call(t, 'GET', url(id), { token: admin })).data;
    const other = await createIdentity(t, admin, { name: 'isc-post-copy' });
    expect((await call(t, 'POST', url(other), { token: admin, body: listed })).statusCode).toBe(200);
    expect(await pairs(other)).toEqual(await pairs(id));
  });

  it('refuses items naming unknown or unsuitable records, naming the item field; nothing is applied', async () => {
    const id = await createIdentity(t, admin, { name: 'isc-bad' });
    const ok = { serviceId: svcB, configId: host };
    const cases: [unknown[], string, string][] = [
      [[ok, { serviceId: 'nope', configId: host }], 'REFERENCED_ENTITY_NOT_FOUND', '[1].serviceId'],
      [[ok, { serviceId: svcA, configId: 'nope' }], 'REFERENCED_ENTITY_NOT_FOUND', '[1].configId'],
      [[{ serviceId: svcA, configId: routerConfig }], 'COULD_NOT_VALIDATE', '[0].configId'],
      [[ok, { serviceId: svcA, configId: interceptA }, { serviceId: svcA, configId: interceptB }], 'COULD_NOT_VALIDATE', '[2].configId'],
      [[{ configId: host }], 'COULD_NOT_VALIDATE', '[0].serviceId'],
      [[ok, { serviceId: svcA }], 'COULD_NOT_VALIDATE', '[1].configId'],
      [[{ serviceId: 7, configId: host }], 'COULD_NOT_VALIDATE', '[0].serviceId'],
      [[{ serviceId: '', configId: host }], 'COULD_NOT_VALIDATE', '[0].serviceId'],
      [['text'], 'COULD_NOT_VALIDATE', '[0]'],
    ];
    for (const [body, code, field] of cases) {
      expectError(await call(t, 'POST', url(id), { token: admin, body }), 400, code, field);
    }
    expectError(await call(t, 'POST', url(id), { token: admin, body: { serviceId: svcA, configId: host } }), 400, 'COULD_NOT_VALIDATE');
    expect(await pairs(id)).toEqual([]);
  });

  it('accepts 1000 items and refuses 1001', async () => {
    const id = await createIdentity(t, admin, { name: 'isc-many' });
    const item = { serviceId: svcB, configId: host };
    expect((await call(t, 'POST', url(id), { token: admin, body: Array(1000).fill(item) })).statusCode).toBe(200);
    expectError(await call(t, 'POST', url(id), { token: admin, body: Array(1001).fill(item) }), 400, 'COULD_NOT_VALIDATE');
    expect(await pairs(id)).toEqual([[svcB, host]]);
  });

  it('answers 404 for an unknown identity', async () => {
    expectError(await call(t, 'POST', url('nope'), { token: admin, body: [{ serviceId: svcA, configId: host }] }), 404, 'NOT_FOUND');
  });
});

describe('DELETE', () => {
  async function seeded(name: string): Promise<string> {
    const id = await createIdentity(t, admin, { name });
    await call(t, 'POST', url(id), {
      token: admin,
      body: [
        { serviceId: svcA, configId: interceptA },
        { serviceId: svcA, configId: host },
        { serviceId: svcB, configId: host },
      ],
    });
    expect(await pairs(id)).toHaveLength(3);
    return id;
  }

  it('removes the named pairs only; pairs that are not there are ignored', async () => {
    const id = await seeded('isc-del');
    const res = await call(t, 'DELETE', url(id), {
      token: admin,
      body: [
        { serviceId: svcA, configId: host },
        { serviceId: svcB, configId: interceptB },
        { serviceId: 'nope', configId: 'nope' },
      ],
    });
    expect(res.statusCode).toBe(200);
    expect(await pairs(id)).toEqual(sortPairs([[svcA, interceptA], [svcB, host]]));
  });

  it('removes every pair of the identity, and only of it, given [] or no body', async () => {
    const other = await seeded('isc-del-other');
    for (const body of [[], undefined, 'empty json', null]) {
      const id = await seeded(`isc-del-all-${String(body)}`);
      const res =
        body === 'empty json'
          ? await t.inject({ method: 'DELETE', url: url(id), headers: { 'overlay-session': admin, 'content-type': 'application/json' } })
          : await call(t, 'DELETE', url(id), { token: admin, ...(body !== undefined && { body: body === null ? 'null' : body, headers: { 'content-type': 'application/json' } }) });
      expect(res.statusCode, res.body).toBe(200);
      expect(await pairs(id)).toEqual([]);
    }
    expect(await pairs(other)).toHaveLength(3);
  });

  it('refuses a malformed body', async () => {
    const id = await seeded('isc-del-bad');
    expectError(await call(t, 'DELETE', url(id), { token: admin, body: [{ serviceId: svcA }] }), 400, 'COULD_NOT_VALIDATE', '[0].configId');
    const broken = await t.inject({ method: 'DELETE', url: url(id), headers: { 'overlay-session': admin, 'content-type': 'application/json' }, payload: '[{' });
    expectError(broken, 400, 'COULD_NOT_PARSE_BODY');
    expect(await pairs(id)).toHaveLength(3);
  });

  it('answers 404 for an unknown identity', async () => {
    expectError(await call(t, 'DELETE', url('nope'), { token: admin, body: [] }), 404, 'NOT_FOUND');
  });
});

describe('lifecycle', () => {
  it('overrides go with their service or identity', async () => {
    const svc = await create('services', { name: 'isc-life-svc' });
    const keep = await create('services', { name: 'isc-life-keep' });
    const id = await createIdentity(t, admin, { name: 'isc-life' });
    await call(t, 'POST', url(id), { token: admin, body: [{ serviceId: svc, configId: host }, { serviceId: keep, configId: host }] });
    expect((await call(t, 'DELETE', `${MGMT}/services/${svc}`, { token: admin })).statusCode).toBe(200);
    expect(await pairs(id)).toEqual([[keep, host]]);
    expect((await call(t, 'DELETE', `${MGMT}/identities/${id}`, { token: admin })).statusCode).toBe(200);
    const left = await t.app.core.store.db.selectFrom('identity_service_configs').selectAll().where('identity_id', '=', id).execute();
    expect(left).toEqual([]);
  });
});

describe('authorization', () => {
  it('answers 401 with the challenge without a credential', async () => {
    const id = await createIdentity(t, admin, { name: 'isc-auth' });
    for (const method of ['POST', 'DELETE'] as const) {
      const res = await call(t, method, url(id), { body: [{ serviceId: svcA, configId: host }] });
      expectMissingCredential(res);
    }
    expectError(await call(t, 'GET', url('nope')), 401, 'UNAUTHORIZED');
  });

  it('reads with identity.read, writes with identity.update', async () => {
    const id = await createIdentity(t, admin, { name: 'isc-perm' });
    const body = [{ serviceId: svcA, configId: host }];
    const nobody = await caller(['service', 'config']);
    expectError(await call(t, 'GET', url(id), { token: nobody.token }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'POST', url(id), { token: nobody.token, body }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'DELETE', url(id), { token: nobody.token, body: [] }), 401, 'UNAUTHORIZED');

    const reader = await caller(['identity.read']);
    expect((await call(t, 'GET', url(id), { token: reader.token })).statusCode).toBe(200);
    expectError(await call(t, 'POST', url(id), { token: reader.token, body }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'DELETE', url(id), { token: reader.token, body: [] }), 401, 'UNAUTHORIZED');

    const updater = await caller(['identity.update']);
    expect((await call(t, 'POST', url(id), { token: updater.token, body })).statusCode).toBe(200);
    expectError(await call(t, 'GET', url(id), { token: updater.token }), 401, 'UNAUTHORIZED');
    expect(await pairs(id)).toEqual([[svcA, host]]);
    expect((await call(t, 'DELETE', url(id), { token: updater.token, body })).statusCode).toBe(200);
    expect(await pairs(id)).toEqual([]);
  });

  it("a non-admin may not change an admin's overrides", async () => {
    const target = await caller([], { isAdmin: true });
    const updater = await caller(['identity.update']);
    const body = [{ serviceId: svcA, configId: host }];
    expectError(await call(t, 'POST', url(target.id), { token: updater.token, body }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'DELETE', url(target.id), { token: updater.token, body: [] }), 401, 'UNAUTHORIZED');
    expect((await call(t, 'POST', url(target.id), { token: admin, body })).statusCode).toBe(200);
    expect(await pairs(target.id)).toEqual([[svcA, host]]);
  });
});
