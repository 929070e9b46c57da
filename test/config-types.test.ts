// Config types on the Management API: schema validation, the protected seeded types and the shapes
// their schemas accept, schema changes weighed against stored configs, delete rules, the configs of
// a type, and who may do what.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedConfigTypes } from '../src/domain/services.js';
import { SEEDED_CONFIG_TYPES } from '../src/domain/config-type-schemas.js';
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

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

const base = `${MGMT}/config-types`;

async function createType(body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', base, { token: admin, body });
  if (res.statusCode !== 201) throw new Error(`creating config type failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

async function createConfig(body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/configs`, { token: admin, body });
  if (res.statusCode !== 201) throw new Error(`creating config failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

async function getType(id: string): Promise<any> {
  const res = await call(t, 'GET', `${base}/${id}`, { token: admin });
  expect(res.statusCode).toBe(200);
  return json(res).data;
}

/** A non-admin caller holding `permissions`. */
let users = 0;
async function caller(permissions: string[]): Promise<string> {
  users += 1;
  const name = `ct-user-${users}`;
  await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pass`, permissions });
  return login(t, name, `${name}-pass`);
}

const ADDRESS_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['host', 'port'],
  properties: { host: { type: 'string', minLength: 1 }, port: { type: 'integer', minimum: 1, maximum: 65535 } },
};

describe('create and read', () => {
  it('round-trips name, schema, target and tags', async () => {
    const id = await createType({ name: 'ct-address', schema: ADDRESS_SCHEMA, target: 'router', tags: { team: 'net' } });
    const e = await getType(id);
    expect(e).toMatchObject({ id, name: 'ct-address', schema: ADDRESS_SCHEMA, target: 'router', tags: { team: 'net' } });
    expect(e._links).toEqual({ self: { href: `./config-types/${id}` }, configs: { href: `./config-types/${id}/configs` } });
  });

  it('defaults target to service and schema to the empty schema', async () => {
    const id = await createType({ name: 'ct-defaults' });
    expect(await getType(id)).toMatchObject({ schema: {}, target: 'service', tags: {} });
    const nulled = await createType({ name: 'ct-null-schema', schema: null });
    expect((await getType(nulled)).schema).toEqual({});
    const nullTarget = await createType({ name: 'ct-null-target', target: null });
    expect((await getType(nullTarget)).target).toBe('service');
  });

  it('accepts later drafts named by $schema', async () => {
    const id = await createType({
      name: 'ct-2020',
      schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { list: { prefixItems: [{ type: 'string' }] } } },
    });
    await expect(createConfig({ name: 'ct-2020-ok', configTypeId: id, data: { list: ['a', 1] } })).resolves.toBeTypeOf('string');
    const bad = await call(t, 'POST', `${MGMT}/configs`, { token: admin, body: { name: 'ct-2020-bad', configTypeId: id, data: { list: [1] } } });
    expectError(bad, 400, 'COULD_NOT_VALIDATE', 'data.list[0]');
    await createType({ name: 'ct-2019', schema: { $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'object' } });
    await createType({ name: 'ct-07', schema: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' } });
  });

  it('ignores unknown keywords and formats (strict mode off)', async () => {
    const id = await createType({
      name: 'ct-lenient',
      schema: { type: 'object', 'x-ui': { order: 1 }, properties: { a: { type: 'string', format: 'no-such-format' } } },
    });
    await createConfig({ name: 'ct-lenient-1', configTypeId: id, data: { a: 'anything' } });
  });

  it('refuses a schema that is not a valid JSON schema, naming schema and the reason', async () => {
    const deep: Record<string, unknown> = { type: 'object' };
    let cursor = deep;
    for (let i = 0; i < 80; i++) {
      const next: Record<string, unknown> = { type: 'object' };
      cursor.properties = { a: next };
      cursor = next;
    }
    const cases: [unknown, RegExp][] = [
      [{ type: 'strin' }, /\/type must be equal to one of the allowed values/],
      [{ properties: { a: { minLength: -1 } } }, /minLength/],
      [{ $ref: 'http://example.com/elsewhere.json' }, /can't resolve reference/],
      [{ $ref: '#/definitions/missing' }, /can't resolve reference/],
      [{ type: 'string', pattern: '(' }, /regular expression/i],
      [{ $schema: 'http://json-schema.org/draft-04/schema#' }, /not supported/],
      [{ $schema: 42 }, /\$schema must be a string/],
      // Past the bound of every open object, before the schema compiler is reached.
      [deep, /nests deeper than 32 levels/],
      [{ type: 'object', properties: Object.fromEntries(Array.from({ length: 4000 }, (_, i) => [`p${i}`, { type: 'string' }])) }, /more than 2000 nodes/],
    ];
    for (const [schema, reason] of cases) {
      const res = await call(t, 'POST', base, { token: admin, body: { name: 'ct-invalid', schema } });
      const body = expectError(res, 400, 'COULD_NOT_VALIDATE', 'schema');
      expect(body.error.cause.reason).toMatch(reason);
    }
    for (const schema of ['{"type":"object"}', ['type'], true]) {
      expectError(await call(t, 'POST', base, { token: admin, body: { name: 'ct-invalid', schema } }), 400, 'COULD_NOT_VALIDATE', 'schema');
    }
    const list = await call(t, 'GET', `${base}?filter=${encodeURIComponent('name = "ct-invalid"')}`, { token: admin });
    expect(json(list).data).toEqual([]);
  });

  // Configs carry objects: a type whose schema admits none could never have a config.
  it('refuses a schema whose root is not of type object, as one naming no root type', async () => {
    for (const schema of [{ type: 'string' }, { type: 'array', items: {} }, { type: ['object', 'null'] }, { properties: { a: {} } }]) {
      const body = expectError(await call(t, 'POST', base, { token: admin, body: { name: 'ct-root', schema } }), 400, 'COULD_NOT_VALIDATE', 'schema');
      expect(body.error.cause.reason).toBe('must have type object at its root: the data of a config is an object');
    }
    const id = await createType({ name: 'ct-root', schema: { type: 'object' } });
    for (const [method, body] of [
      ['PATCH', { schema: { type: 'array' } }],
      ['PUT', { name: 'ct-root', schema: { required: ['a'] } }],
    ] as const) {
      expectError(await call(t, method, `${base}/${id}`, { token: admin, body }), 400, 'COULD_NOT_VALIDATE', 'schema');
    }
    expect((await getType(id)).schema).toEqual({ type: 'object' });
  });

  it('refuses the name all, the keyword for every config type', async () => {
    const body = expectError(await call(t, 'POST', base, { token: admin, body: { name: 'all' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expect(body.error.cause.reason).toBe('all is the keyword for every config type, not a name one may take');
    const id = await createType({ name: 'ct-not-all' });
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { name: 'all' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expectError(await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'all' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expect((await getType(id)).name).toBe('ct-not-all');
  });

  it('refuses a bad target, a missing or duplicate name, bad tags', async () => {
    expectError(await call(t, 'POST', base, { token: admin, body: { name: 'ct-bad', target: 'client' } }), 400, 'COULD_NOT_VALIDATE', 'target');
    expectError(await call(t, 'POST', base, { token: admin, body: { schema: {} } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expectError(await call(t, 'POST', base, { token: admin, body: { name: '' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    await createType({ name: 'ct-dup' });
    expectError(await call(t, 'POST', base, { token: admin, body: { name: 'ct-dup' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expectError(await call(t, 'POST', base, { token: admin, body: { name: 'ct-tags', tags: { a: 1 } } }), 400, 'COULD_NOT_VALIDATE', 'tags.a');
  });

  it('lists with filter, sort and paging', async () => {
    const res = await call(t, 'GET', `${base}?filter=${encodeURIComponent('name contains "ct-" and target = "service"')}&sort=${encodeURIComponent('name desc')}&limit=2`, {
      token: admin,
    });
    expect(res.statusCode).toBe(200);
    const body = json(res);
    expect(body.data).toHaveLength(2);
    expect(body.data[0].name > body.data[1].name).toBe(true);
    expect(body.meta.pagination).toMatchObject({ limit: 2, offset: 0 });
    expect(body.meta.pagination.totalCount).toBeGreaterThan(2);
    expect(body.meta.filterableFields).toEqual(['id', 'createdAt', 'updatedAt', 'tags', 'name', 'target']);
    expectError(await call(t, 'GET', `${base}?filter=${encodeURIComponent('schema = "x"')}`, { token: admin }), 400, 'INVALID_FILTER');
  });
});

describe('update', () => {
  it('full update replaces the fields; absent ones reset to their defaults (target is fixed at create)', async () => {
    const id = await createType({ name: 'ct-upd', schema: ADDRESS_SCHEMA, target: 'router', tags: { a: 'b' } });
    expect((await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'ct-upd-2' } })).statusCode).toBe(200);
    expect(await getType(id)).toMatchObject({ name: 'ct-upd-2', schema: {}, target: 'router', tags: {} });
    expectError(await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { schema: {} } }), 400, 'COULD_NOT_VALIDATE', 'name');
  });

  it('patch changes only what it names, and checks the new schema', async () => {
    const id = await createType({ name: 'ct-patch', schema: ADDRESS_SCHEMA, tags: { a: 'b' } });
    expect((await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { tags: { c: true } } })).statusCode).toBe(200);
    expect(await getType(id)).toMatchObject({ name: 'ct-patch', schema: ADDRESS_SCHEMA, target: 'service', tags: { c: true } });
    expectError(await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { schema: { type: 7 } } }), 400, 'COULD_NOT_VALIDATE', 'schema');
    expect((await getType(id)).schema).toEqual(ADDRESS_SCHEMA);
  });

  it('refuses a schema change that a stored config would fail, naming that config', async () => {
    const id = await createType({ name: 'ct-evolve', schema: ADDRESS_SCHEMA });
    const configId = await createConfig({ name: 'ct-evolve-1', configTypeId: id, data: { host: 'db', port: 5432 } });
    const stricter = { ...ADDRESS_SCHEMA, properties: { ...ADDRESS_SCHEMA.properties, port: { type: 'integer', maximum: 1024 } } };
    const res = await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { schema: stricter } });
    const body = expectError(res, 400, 'COULD_NOT_VALIDATE', 'schema');
    expect(body.error.cause.reason).toContain(configId);
    expect(body.error.cause.reason).toContain('data.port must be <= 1024');
    expect((await getType(id)).schema).toEqual(ADDRESS_SCHEMA);

    // A change every stored config satisfies goes through, and new configs follow the new schema.
    const looser = { ...ADDRESS_SCHEMA, properties: { ...ADDRESS_SCHEMA.properties, note: { type: 'string' } } };
    expect((await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { schema: looser } })).statusCode).toBe(200);
    await createConfig({ name: 'ct-evolve-2', configTypeId: id, data: { host: 'db', port: 1, note: 'new field' } });
    const old = await call(t, 'POST', `${MGMT}/configs`, {
      token: admin,
      body: { name: 'ct-evolve-3', configTypeId: id, data: { host: 'db', port: 1, other: 1 } },
    });
    expectError(old, 400, 'COULD_NOT_VALIDATE', 'data.other');
  });

  it('checks every stored config, beyond the first page', async () => {
    const id = await createType({ name: 'ct-many', schema: { type: 'object' } });
    for (let i = 0; i < 12; i++) await createConfig({ name: `ct-many-${String(i).padStart(2, '0')}`, configTypeId: id, data: { n: i } });
    const res = await call(t, 'PATCH', `${base}/${id}`, {
      token: admin,
      body: { schema: { type: 'object', properties: { n: { type: 'integer', maximum: 10 } } } },
    });
    expect(expectError(res, 400, 'COULD_NOT_VALIDATE', 'schema').error.cause.reason).toContain('ct-many-11');
  });

  // A full update without it once reset a router type to service under configs its routers held.
  it('never changes target: configs of the type are attached by it', async () => {
    const id = await createType({ name: 'ct-retarget', schema: { type: 'object' }, target: 'router' });
    const configId = await createConfig({ name: 'ct-retarget-1', configTypeId: id, data: {} });
    expect((await call(t, 'POST', `${MGMT}/edge-routers`, { token: admin, body: { name: 'ct-retarget-er', configs: [configId] } })).statusCode).toBe(201);
    for (const [method, body] of [
      ['PATCH', { target: 'service' }],
      ['PUT', { name: 'ct-retarget', schema: { type: 'object' }, target: 'service' }],
    ] as const) {
      expectError(await call(t, method, `${base}/${id}`, { token: admin, body }), 400, 'COULD_NOT_VALIDATE', 'target');
    }
    // Naming the value it has is no change.
    expect((await call(t, 'PATCH', `${base}/${id}`, { token: admin, body: { target: 'router' } })).statusCode).toBe(200);
    expect((await call(t, 'PUT', `${base}/${id}`, { token: admin, body: { name: 'ct-retarget', schema: { type: 'object' } } })).statusCode).toBe(200);
    expect((await getType(id)).target).toBe('router');
    expectError(await call(t, 'POST', `${MGMT}/services`, { token: admin, body: { name: 'ct-retarget-svc', configs: [configId] } }), 400, 'COULD_NOT_VALIDATE', 'configs');
  });
});

describe('delete', () => {
  it('deletes an unused type', async () => {
    const id = await createType({ name: 'ct-del' });
    expect((await call(t, 'DELETE', `${base}/${id}`, { token: admin })).statusCode).toBe(200);
    expectError(await call(t, 'GET', `${base}/${id}`, { token: admin }), 404, 'NOT_FOUND');
  });

  it('answers 409 while configs of the type exist', async () => {
    const id = await createType({ name: 'ct-del-used', schema: { type: 'object' } });
    const configId = await createConfig({ name: 'ct-del-used-1', configTypeId: id, data: {} });
    expectError(await call(t, 'DELETE', `${base}/${id}`, { token: admin }), 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY');
    expect((await getType(id)).name).toBe('ct-del-used');
    expect((await call(t, 'DELETE', `${MGMT}/configs/${configId}`, { token: admin })).statusCode).toBe(200);
    expect((await call(t, 'DELETE', `${base}/${id}`, { token: admin })).statusCode).toBe(200);
  });
});

describe('the seeded config types', () => {
  it('exist with fixed ids, target service and draft-07 schemas', async () => {
    for (const name of ['intercept.v1', 'host.v1', 'host.v2', 'proxy.v1']) {
      const e = await getType(name);
      expect(e).toMatchObject({ id: name, name, target: 'service' });
      expect(e.schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
      expect(e.schema.additionalProperties).toBe(false);
    }
    const res = await call(t, 'GET', `${base}?filter=${encodeURIComponent('id in ["intercept.v1","host.v1","host.v2","proxy.v1"]')}`, {
      token: admin,
    });
    expect(json(res).meta.pagination.totalCount).toBe(4);
  });

  it('are seeded once: seeding again adds nothing and restores a drifted schema', async () => {
    const resources = t.app.core.resources;
    const count = async () =>
      Number(
        (
          await resources.store.db
            .selectFrom('config_types')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await count();
    await resources.write((ctx) => seedConfigTypes(ctx));
    expect(await count()).toBe(before);
    await resources.get('config-types').repo.update(resources.store.db, 'proxy.v1', { schema: { type: 'object' } });
    await resources.write((ctx) => seedConfigTypes(ctx));
    expect((await getType('proxy.v1')).schema).toEqual(SEEDED_CONFIG_TYPES.find((s) => s.id === 'proxy.v1')!.schema);
  });

  it('cannot be changed or deleted; their tags can', async () => {
    for (const [method, body, field] of [
      ['PATCH', { schema: { type: 'object' } }, 'schema'],
      ['PATCH', { name: 'my.intercept' }, 'name'],
      ['PUT', { name: 'intercept.v1' }, 'schema'],
    ] as const) {
      expectError(await call(t, method, `${base}/intercept.v1`, { token: admin, body }), 400, 'ENTITY_CAN_NOT_BE_UPDATED', field);
    }
    expectError(await call(t, 'PATCH', `${base}/intercept.v1`, { token: admin, body: { target: 'router' } }), 400, 'COULD_NOT_VALIDATE', 'target');
    expectError(await call(t, 'DELETE', `${base}/host.v2`, { token: admin }), 400, 'ENTITY_CAN_NOT_BE_DELETED');
    expect((await call(t, 'PATCH', `${base}/intercept.v1`, { token: admin, body: { tags: { owner: 'ops' } } })).statusCode).toBe(200);
    const e = await getType('intercept.v1');
    expect(e).toMatchObject({ name: 'intercept.v1', target: 'service', tags: { owner: 'ops' } });
    expect(e.schema).toEqual(SEEDED_CONFIG_TYPES[0]!.schema);
  });
});

// ---- the shapes of behaviour.md §10 -------------------------------------------------------------

const INTERCEPT_MIN = { protocols: ['tcp'], addresses: ['db.example.com'], portRanges: [{ low: 5432, high: 5432 }] };
const INTERCEPT_FULL = {
  protocols: ['tcp', 'udp'],
  addresses: ['app.internal', '10.0.0.5', '10.1.0.0/16', '*.corp.example.com', 'fd00::1', 'fd00::/8', 'localhost'],
  portRanges: [
    { low: 80, high: 80 },
    { low: 0, high: 65535 },
  ],
  dialOptions: { identity: '$dst_hostname', connectTimeoutSeconds: 15 },
  sourceIp: '$src_ip:$src_port',
  allowedSourceAddresses: ['192.168.1.0/24'],
};
const HOST_MIN = { protocol: 'tcp', address: 'localhost', port: 5432 };
const HOST_FULL = {
  forwardProtocol: true,
  allowedProtocols: ['tcp', 'udp'],
  forwardAddress: true,
  allowedAddresses: ['10.0.0.0/8', '*.svc.local', 'db.internal', '192.168.7.7'],
  forwardPort: true,
  allowedPortRanges: [{ low: 1, high: 1024 }],
  forwardAddressTranslations: [{ from: '10.0.0.0', to: '192.168.0.0', prefixLength: 16 }],
  allowedSourceAddresses: ['10.9.0.0/16'],
  listenOptions: {
    bindUsingEdgeIdentity: true,
    connectTimeout: '5s',
    connectTimeoutSeconds: 5,
    cost: 100,
    identity: '$tunneler_id.name',
    maxConnections: 3,
    precedence: 'required',
  },
  portChecks: [
    {
      address: 'localhost:5432',
      interval: '5s',
      timeout: '500ms',
      actions: [
        { trigger: 'fail', action: 'mark unhealthy', consecutiveEvents: 3 },
        { trigger: 'pass', action: 'increase cost 10', duration: '1m30s' },
      ],
    },
  ],
  httpChecks: [
    {
      url: 'http://localhost:8080/health',
      method: 'GET',
      expectStatus: 200,
      expectInBody: 'ok',
      interval: '10s',
      timeout: '1s',
      actions: [{ trigger: 'change', action: 'send event' }, { trigger: 'fail', action: 'decrease cost 5' }, { trigger: 'pass', action: 'mark healthy' }],
    },
  ],
  proxy: { type: 'http', address: 'proxy.local:3128' },
};
const HOST_MIXED = { protocol: 'udp', forwardProtocol: false, address: 'fd00::2', forwardPort: true, allowedPortRanges: [{ low: 53, high: 53 }] };
const PROXY_MIN = { port: 1, protocols: ['udp'] };
const PROXY_FULL = { port: 8080, protocols: ['tcp', 'udp'], binding: 'tun0' };

type Case = [label: string, data: Record<string, unknown>, field?: string];

const without = (o: Record<string, unknown>, key: string) => Object.fromEntries(Object.entries(o).filter(([k]) => k !== key));

const SHAPES: Record<string, { valid: Case[]; invalid: Case[] }> = {
  'intercept.v1': {
    valid: [
      ['minimal', INTERCEPT_MIN],
      ['every field', INTERCEPT_FULL],
    ],
    invalid: [
      ['unknown property', { ...INTERCEPT_MIN, bogus: 1 }, 'data.bogus'],
      ['bad protocol', { ...INTERCEPT_MIN, protocols: ['icmp'] }, 'data.protocols[0]'],
      ['repeated protocol', { ...INTERCEPT_MIN, protocols: ['tcp', 'tcp'] }, 'data.protocols'],
      ['port above range', { ...INTERCEPT_MIN, portRanges: [{ low: 0, high: 65536 }] }, 'data.portRanges[0].high'],
      ['negative port', { ...INTERCEPT_MIN, portRanges: [{ low: 80, high: 80 }, { low: -1, high: 80 }] }, 'data.portRanges[1].low'],
      ['port range without high', { ...INTERCEPT_MIN, portRanges: [{ low: 80 }] }, 'data.portRanges[0].high'],
      ['empty protocols', { ...INTERCEPT_MIN, protocols: [] }, 'data.protocols'],
      ['empty addresses', { ...INTERCEPT_MIN, addresses: [] }, 'data.addresses'],
      ['empty port ranges', { ...INTERCEPT_MIN, portRanges: [] }, 'data.portRanges'],
      ['missing port ranges', without(INTERCEPT_MIN, 'portRanges'), 'data.portRanges'],
      ['not an address', { ...INTERCEPT_MIN, addresses: ['db.example.com', 'no spaces allowed'] }, 'data.addresses[1]'],
      ['bad CIDR', { ...INTERCEPT_MIN, addresses: ['10.0.0.0/33'] }, 'data.addresses[0]'],
      ['wildcard in the middle', { ...INTERCEPT_MIN, addresses: ['a.*.example.com'] }, 'data.addresses[0]'],
      ['negative timeout', { ...INTERCEPT_MIN, dialOptions: { connectTimeoutSeconds: -1 } }, 'data.dialOptions.connectTimeoutSeconds'],
      ['unknown dial option', { ...INTERCEPT_MIN, dialOptions: { retries: 3 } }, 'data.dialOptions.retries'],
      ['source addresses not strings', { ...INTERCEPT_MIN, allowedSourceAddresses: [7] }, 'data.allowedSourceAddresses[0]'],
    ],
  },
  'host.v1': {
    valid: [
      ['fixed protocol, address and port', HOST_MIN],
      ['everything forwarded, every option', HOST_FULL],
      ['forward flags false beside fixed values', HOST_MIXED],
    ],
    invalid: [
      ['unknown property', { ...HOST_MIN, bogus: true }, 'data.bogus'],
      ['bad protocol', { ...HOST_MIN, protocol: 'icmp' }, 'data.protocol'],
      ['port above range', { ...HOST_MIN, port: 65536 }, 'data.port'],
      ['no protocol at all', without(HOST_MIN, 'protocol'), 'data.protocol'],
      ['no address at all', without(HOST_MIN, 'address'), 'data.address'],
      ['forwarded port without ranges', { ...without(HOST_MIN, 'port'), forwardPort: true }, 'data.allowedPortRanges'],
      ['both a protocol and forwarding', { ...HOST_MIN, forwardProtocol: true, allowedProtocols: ['tcp'] }, 'data.protocol'],
      ['allowed ranges without forwarding', { ...HOST_MIN, allowedPortRanges: [{ low: 1, high: 2 }] }, 'data.allowedPortRanges'],
      ['empty allowed protocols', { ...without(HOST_MIN, 'protocol'), forwardProtocol: true, allowedProtocols: [] }, 'data.allowedProtocols'],
      ['empty allowed addresses', { ...without(HOST_MIN, 'address'), forwardAddress: true, allowedAddresses: [] }, 'data.allowedAddresses'],
      ['allowed range above range', { ...without(HOST_MIN, 'port'), forwardPort: true, allowedPortRanges: [{ low: 1, high: 70000 }] }, 'data.allowedPortRanges[0].high'],
      ['address not a host', { ...HOST_MIN, address: 'bad host!' }, 'data.address'],
      ['bad precedence', { ...HOST_MIN, listenOptions: { precedence: 'urgent' } }, 'data.listenOptions.precedence'],
      ['zero max connections', { ...HOST_MIN, listenOptions: { maxConnections: 0 } }, 'data.listenOptions.maxConnections'],
      ['cost above range', { ...HOST_MIN, listenOptions: { cost: 65536 } }, 'data.listenOptions.cost'],
      ['timeout not a duration', { ...HOST_MIN, listenOptions: { connectTimeout: '5 seconds' } }, 'data.listenOptions.connectTimeout'],
      ['unknown listen option', { ...HOST_MIN, listenOptions: { backlog: 5 } }, 'data.listenOptions.backlog'],
      ['check interval not a duration', { ...HOST_MIN, portChecks: [{ address: 'localhost:1', interval: 'soon', timeout: '1s' }] }, 'data.portChecks[0].interval'],
      ['check without timeout', { ...HOST_MIN, httpChecks: [{ url: 'http://x/', interval: '1s' }] }, 'data.httpChecks[0].timeout'],
      ['unknown action', { ...HOST_MIN, portChecks: [{ address: 'a:1', interval: '1s', timeout: '1s', actions: [{ trigger: 'fail', action: 'reboot' }] }] }, 'data.portChecks[0].actions[0].action'],
      ['bad trigger', { ...HOST_MIN, portChecks: [{ address: 'a:1', interval: '1s', timeout: '1s', actions: [{ trigger: 'sometimes', action: 'send event' }] }] }, 'data.portChecks[0].actions[0].trigger'],
      ['bad proxy type', { ...HOST_MIN, proxy: { type: 'socks', address: 'p:1' } }, 'data.proxy.type'],
      ['translation prefix above range', { ...HOST_MIN, forwardAddressTranslations: [{ from: '10.0.0.0', to: '10.1.0.0', prefixLength: 129 }] }, 'data.forwardAddressTranslations[0].prefixLength'],
    ],
  },
  'host.v2': {
    valid: [
      ['one terminator', { terminators: [HOST_MIN] }],
      ['several terminators', { terminators: [HOST_MIN, HOST_FULL, HOST_MIXED] }],
    ],
    invalid: [
      ['unknown property', { terminators: [HOST_MIN], bogus: 1 }, 'data.bogus'],
      ['no terminators', {}, 'data.terminators'],
      ['empty terminators', { terminators: [] }, 'data.terminators'],
      ['a terminator with a bad port', { terminators: [HOST_MIN, { ...HOST_MIN, port: 65536 }] }, 'data.terminators[1].port'],
      ['a terminator with an unknown property', { terminators: [{ ...HOST_MIN, extra: 1 }] }, 'data.terminators[0].extra'],
      ['a terminator with a bad enum', { terminators: [{ ...HOST_MIN, protocol: 'sctp' }] }, 'data.terminators[0].protocol'],
    ],
  },
  'proxy.v1': {
    valid: [
      ['minimal', PROXY_MIN],
      ['with binding', PROXY_FULL],
    ],
    invalid: [
      ['unknown property', { ...PROXY_MIN, bogus: 'x' }, 'data.bogus'],
      ['port zero', { ...PROXY_MIN, port: 0 }, 'data.port'],
      ['port above range', { ...PROXY_MIN, port: 65536 }, 'data.port'],
      ['port not an integer', { ...PROXY_MIN, port: '80' }, 'data.port'],
      ['bad protocol', { ...PROXY_MIN, protocols: ['sctp'] }, 'data.protocols[0]'],
      ['empty protocols', { ...PROXY_MIN, protocols: [] }, 'data.protocols'],
      ['missing port', without(PROXY_MIN, 'port'), 'data.port'],
      ['binding not a string', { ...PROXY_MIN, binding: 7 }, 'data.binding'],
    ],
  },
};

let configNames = 0;
const postConfig = (configTypeId: string, data: Record<string, unknown>) => {
  configNames += 1;
  return call(t, 'POST', `${MGMT}/configs`, { token: admin, body: { name: `shape-${configNames}`, configTypeId, data } });
};

describe.each(Object.entries(SHAPES))('%s', (typeId, { valid, invalid }) => {
  it.each(valid)('accepts %s', async (_label, data) => {
    const res = await postConfig(typeId, data);
    expect(res.statusCode, res.body).toBe(201);
    const read = await call(t, 'GET', `${MGMT}/configs/${json(res).data.id}`, { token: admin });
    expect(json(read).data.data).toEqual(data);
  });

  it.each(invalid)('refuses %s', async (_label, data, field) => {
    const body = expectError(await postConfig(typeId, data), 400, 'COULD_NOT_VALIDATE', field);
    expect(body.error.cause.reason).toMatch(/\S/);
  });
});

describe('reasons name what is wrong', () => {
  it('lists the allowed values of an enum and echoes the offending value', async () => {
    const body = expectError(await postConfig('proxy.v1', { port: 80, protocols: ['sctp'] }), 400, 'COULD_NOT_VALIDATE', 'data.protocols[0]');
    expect(body.error.cause).toEqual({ field: 'data.protocols[0]', reason: 'must be one of "tcp", "udp"', value: 'sctp' });
    expect(body.error.message).toBe('data.protocols[0] must be one of "tcp", "udp"');
  });

  it('describes the accepted forms of an address and of a duration', async () => {
    const address = expectError(await postConfig('intercept.v1', { ...INTERCEPT_MIN, addresses: ['bad host'] }), 400, 'COULD_NOT_VALIDATE');
    expect(address.error.cause.reason).toBe('must be a host name, an IP address, a CIDR block or a *.domain wildcard');
    const duration = expectError(await postConfig('host.v1', { ...HOST_MIN, listenOptions: { connectTimeout: 'x' } }), 400, 'COULD_NOT_VALIDATE');
    expect(duration.error.cause.reason).toBe('must be a duration such as 5s, 1m30s or 250ms');
  });

  it('says which property is not allowed and which is missing', async () => {
    const extra = expectError(await postConfig('host.v1', { ...HOST_MIN, forwardProtocol: true, allowedProtocols: ['tcp'] }), 400, 'COULD_NOT_VALIDATE');
    expect(extra.error.cause).toMatchObject({ field: 'data.protocol', reason: 'is not allowed here' });
    const missing = expectError(await postConfig('proxy.v1', { protocols: ['tcp'] }), 400, 'COULD_NOT_VALIDATE');
    expect(missing.error.cause).toEqual({ field: 'data.port', reason: 'is required' });
  });
});

// ---- configs of a type --------------------------------------------------------------------------

describe('GET /config-types/{id}/configs', () => {
  let typeId: string;
  beforeAll(async () => {
    typeId = await createType({ name: 'ct-related', schema: { type: 'object' } });
    for (const n of ['b', 'a', 'c']) await createConfig({ name: `ct-related-${n}`, configTypeId: typeId, data: { n } });
  });

  it('lists only the configs of that type, with filter, sort and paging', async () => {
    const all = await call(t, 'GET', `${base}/${typeId}/configs?sort=name`, { token: admin });
    expect(all.statusCode).toBe(200);
    const body = json(all);
    expect(body.data.map((c: any) => c.name)).toEqual(['ct-related-a', 'ct-related-b', 'ct-related-c']);
    expect(body.data[0]).toMatchObject({ configTypeId: typeId, configType: { entity: 'config-types', id: typeId, name: 'ct-related' } });
    expect(body.meta.pagination).toEqual({ limit: 10, offset: 0, totalCount: 3 });
    const page = await call(t, 'GET', `${base}/${typeId}/configs?sort=${encodeURIComponent('name desc')}&limit=1&offset=1`, { token: admin });
    expect(json(page).data.map((c: any) => c.name)).toEqual(['ct-related-b']);
    expect(json(page).meta.pagination).toEqual({ limit: 1, offset: 1, totalCount: 3 });
    const filtered = await call(t, 'GET', `${base}/${typeId}/configs?filter=${encodeURIComponent('name = "ct-related-c"')}`, { token: admin });
    expect(json(filtered).data).toHaveLength(1);
    // A filter narrows the type's configs; it never reaches configs of other types.
    const widened = await call(t, 'GET', `${base}/${typeId}/configs?filter=${encodeURIComponent('name = "shape-1" or name != "x"')}`, { token: admin });
    expect(json(widened).meta.pagination.totalCount).toBe(3);
    const proxies = json(await call(t, 'GET', `${base}/proxy.v1/configs?filter=${encodeURIComponent('name != "" limit none')}`, { token: admin })).data;
    expect(proxies.length).toBeGreaterThanOrEqual(2);
    expect(proxies.every((c: any) => c.configTypeId === 'proxy.v1')).toBe(true);
  });

  it('refuses a bad filter and answers 404 for an unknown type', async () => {
    expectError(await call(t, 'GET', `${base}/${typeId}/configs?filter=${encodeURIComponent('data = 1')}`, { token: admin }), 400, 'INVALID_FILTER');
    expectError(await call(t, 'GET', `${base}/unknown/configs`, { token: admin }), 404, 'NOT_FOUND');
  });
});

// ---- who may do what ----------------------------------------------------------------------------

describe('authorization', () => {
  it('refuses a non-admin without the permission, admits one with it', async () => {
    const nobody = await caller([]);
    expectError(await call(t, 'GET', base, { token: nobody }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'POST', base, { token: nobody, body: { name: 'ct-nobody' } }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'GET', `${base}/host.v1/configs`, { token: nobody }), 401, 'UNAUTHORIZED');

    const reader = await caller(['config-type.read']);
    expect((await call(t, 'GET', base, { token: reader })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${base}/host.v1`, { token: reader })).statusCode).toBe(200);
    expectError(await call(t, 'POST', base, { token: reader, body: { name: 'ct-reader' } }), 401, 'UNAUTHORIZED');
    // The configs of a type are configs: reading them takes the config permission.
    expectError(await call(t, 'GET', `${base}/host.v1/configs`, { token: reader }), 401, 'UNAUTHORIZED');
    const configReader = await caller(['config.read']);
    expect((await call(t, 'GET', `${base}/host.v1/configs`, { token: configReader })).statusCode).toBe(200);

    const manager = await caller(['config-type']);
    const created = await call(t, 'POST', base, { token: manager, body: { name: 'ct-managed' } });
    expect(created.statusCode).toBe(201);
    const id = json(created).data.id;
    expect((await call(t, 'PATCH', `${base}/${id}`, { token: manager, body: { tags: { by: 'manager' } } })).statusCode).toBe(200);
    expect((await call(t, 'PUT', `${base}/${id}`, { token: manager, body: { name: 'ct-managed-2' } })).statusCode).toBe(200);
    expect((await call(t, 'DELETE', `${base}/${id}`, { token: manager })).statusCode).toBe(200);

    const deleter = await caller(['config-type.delete']);
    expectError(await call(t, 'PATCH', `${base}/host.v1`, { token: deleter, body: { tags: {} } }), 401, 'UNAUTHORIZED');
    const readonly = await caller(['admin_readonly']);
    expect((await call(t, 'GET', base, { token: readonly })).statusCode).toBe(200);
    expectError(await call(t, 'DELETE', `${base}/host.v1`, { token: readonly }), 401, 'UNAUTHORIZED');
  });
});
