// Posture checks of every kind on the Management API: the fields of each kind and nothing else,
// typeId on every write, lists with roleFilter, permissions, and the seeded posture check types.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedPostureCheckTypes } from '../src/domain/posture-checks.js';
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

const URL = `${MGMT}/posture-checks`;
const TYPES = `${MGMT}/posture-check-types`;
const KIND_FIELDS = [
  'domains',
  'operatingSystems',
  'process',
  'processes',
  'semantic',
  'macAddresses',
  'timeoutSeconds',
  'promptOnWake',
  'promptOnUnlock',
  'ignoreLegacyEndpoints',
];

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}`;

async function create(body: Record<string, unknown>): Promise<string> {
  const res = await call(t, 'POST', URL, { token: admin, body: { name: unique('pc'), ...body } });
  if (res.statusCode !== 201) throw new Error(`creating posture check failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

async function get(id: string): Promise<any> {
  const res = await call(t, 'GET', `${URL}/${id}`, { token: admin });
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
}

const PROCESS = { osType: 'Windows', path: 'C:\\Program Files\\agent.exe', hashes: ['ab'.repeat(32)], signerFingerprint: 'cd'.repeat(20) };
const PROCESS_B = { osType: 'Linux', path: '/usr/bin/agent', signerFingerprints: ['ef'.repeat(20)] };

/** One valid body per kind, and exactly the kind's fields its answer shows. */
const VALID: [string, Record<string, unknown>, Record<string, unknown>][] = [
  ['DOMAIN', { domains: ['corp.example', 'lab.example'] }, { domains: ['corp.example', 'lab.example'] }],
  [
    'OS',
    { operatingSystems: [{ type: 'Windows', versions: ['>=10.0.19041'] }, { type: 'macOS', versions: [] }, { type: 'Android', versions: ['14'] }] },
    { operatingSystems: [{ type: 'Windows', versions: ['>=10.0.19041'] }, { type: 'macOS', versions: [] }, { type: 'Android', versions: ['14'] }] },
  ],
  ['PROCESS', { process: PROCESS }, { process: PROCESS }],
  ['PROCESS minimal', { process: { osType: 'macOS', path: '/Applications/Agent.app' } }, { process: { osType: 'macOS', path: '/Applications/Agent.app' } }],
  ['PROCESS_MULTI', { processes: [PROCESS_B, { osType: 'Windows', path: 'C:\\a.exe' }], semantic: 'AnyOf' }, { processes: [PROCESS_B, { osType: 'Windows', path: 'C:\\a.exe' }], semantic: 'AnyOf' }],
  ['MAC', { macAddresses: ['0a:1b:2c:3d:4e:5f', 'AA-BB-CC-DD-EE-FF', '001122334455'] }, { macAddresses: ['0a1b2c3d4e5f', 'aabbccddeeff', '001122334455'] }],
  ['MFA defaults', {}, { timeoutSeconds: -1, promptOnWake: false, promptOnUnlock: false, ignoreLegacyEndpoints: false }],
  [
    'MFA',
    { timeoutSeconds: 300, promptOnWake: true, promptOnUnlock: true, ignoreLegacyEndpoints: true },
    { timeoutSeconds: 300, promptOnWake: true, promptOnUnlock: true, ignoreLegacyEndpoints: true },
  ],
];

describe('each kind: valid bodies', () => {
  it.each(VALID)('%s: created, and read back with only its own fields', async (label, fields, shown) => {
    const typeId = label.split(' ')[0]!;
    const name = unique(`valid-${typeId}`);
    const res = await call(t, 'POST', URL, { token: admin, body: { name, typeId, roleAttributes: ['r1'], tags: { k: 'v' }, ...fields } });
    expect(res.statusCode, res.body).toBe(201);
    const id = json(res).data.id as string;
    const e = await get(id);
    expect(e).toMatchObject({
      id,
      name,
      typeId,
      type: { _links: { self: { href: `./posture-check-types/${typeId}` } }, entity: 'posture-check-types', id: typeId, name: typeId },
      roleAttributes: ['r1'],
      tags: { k: 'v' },
      ...shown,
    });
    expect(e._links).toEqual({ self: { href: `./posture-checks/${id}` } });
    const present = KIND_FIELDS.filter((f) => f in e).sort();
    expect(present).toEqual(Object.keys(shown).sort());
  });

  it('stores what the established controller stores: MACs as lowercase hex, PROCESS hashes and fingerprint lowercase, PROCESS_MULTI lists [] when left out', async () => {
    const mac = await create({ typeId: 'MAC', macAddresses: ['AA-BB-CC-DD-EE-FF', 'aa:bb:cc:dd:ee:ff', '0A1B2C3D4E5F'] });
    expect((await get(mac)).macAddresses).toEqual(['aabbccddeeff', '0a1b2c3d4e5f']);
    const process = await create({ typeId: 'PROCESS', process: { osType: 'Linux', path: '/usr/bin/Agent', hashes: ['ABCDEF', 'abc123'], signerFingerprint: 'AA:BB:CC' } });
    expect((await get(process)).process).toEqual({ osType: 'Linux', path: '/usr/bin/Agent', hashes: ['abcdef', 'abc123'], signerFingerprint: 'aa:bb:cc' });
    const multi = await create({ typeId: 'PROCESS_MULTI', processes: [{ osType: 'Linux', path: '/opt/a' }, PROCESS_B], semantic: 'AnyOf' });
    expect((await get(multi)).processes).toEqual([
      { osType: 'Linux', path: '/opt/a', hashes: [], signerFingerprints: [] },
      { ...PROCESS_B, hashes: [] },
    ]);
  });

  it('lists show each check with only its own fields', async () => {
    const res = await call(t, 'GET', `${URL}?limit=500`, { token: admin });
    expect(res.statusCode).toBe(200);
    for (const e of json(res).data) {
      const own: Record<string, string[]> = {
        DOMAIN: ['domains'],
        OS: ['operatingSystems'],
        PROCESS: ['process'],
        PROCESS_MULTI: ['processes', 'semantic'],
        MAC: ['macAddresses'],
        MFA: ['ignoreLegacyEndpoints', 'promptOnUnlock', 'promptOnWake', 'timeoutSeconds'],
      };
      expect(KIND_FIELDS.filter((f) => f in e).sort()).toEqual(own[e.typeId]);
    }
  });
});

/** Invalid bodies: [label, body, field named, code]. */
const INVALID: [string, Record<string, unknown>, string, string?][] = [
  ['missing typeId', { domains: ['a'] }, 'typeId'],
  ['unknown typeId (an enum)', { typeId: 'RETINA', domains: ['a'] }, 'typeId'],
  ['missing name', { name: undefined, typeId: 'DOMAIN', domains: ['a'] }, 'name'],
  ['role attribute starting with @', { typeId: 'DOMAIN', domains: ['a'], roleAttributes: ['@x'] }, 'roleAttributes[0]'],
  // DOMAIN
  ['DOMAIN without domains', { typeId: 'DOMAIN' }, 'domains'],
  ['DOMAIN with empty domains', { typeId: 'DOMAIN', domains: [] }, 'domains'],
  ['DOMAIN with an empty domain', { typeId: 'DOMAIN', domains: [''] }, 'domains[0]'],
  ['DOMAIN with a process', { typeId: 'DOMAIN', domains: ['a'], process: PROCESS }, 'process'],
  ['DOMAIN with timeoutSeconds', { typeId: 'DOMAIN', domains: ['a'], timeoutSeconds: 5 }, 'timeoutSeconds'],
  // OS
  ['OS without operatingSystems', { typeId: 'OS' }, 'operatingSystems'],
  ['OS with empty operatingSystems', { typeId: 'OS', operatingSystems: [] }, 'operatingSystems'],
  ['OS with an unknown system', { typeId: 'OS', operatingSystems: [{ type: 'BeOS', versions: [] }] }, 'operatingSystems[0].type'],
  ['OS entry without versions', { typeId: 'OS', operatingSystems: [{ type: 'Linux' }] }, 'operatingSystems[0].versions'],
  ['OS entry with an extra field', { typeId: 'OS', operatingSystems: [{ type: 'Linux', versions: [], build: 1 }] }, 'operatingSystems[0]'],
  [
    'OS version that is no constraint',
    { typeId: 'OS', operatingSystems: [{ type: 'Linux', versions: ['>=6.1'] }, { type: 'Windows', versions: ['>=10', 'not a version'] }] },
    'operatingSystems[1].versions[1]',
  ],
  ['OS with domains', { typeId: 'OS', operatingSystems: [{ type: 'Linux', versions: [] }], domains: ['a'] }, 'domains'],
  // PROCESS
  ['PROCESS without process', { typeId: 'PROCESS' }, 'process'],
  ['PROCESS without path', { typeId: 'PROCESS', process: { osType: 'Windows' } }, 'process.path'],
  ['PROCESS without osType', { typeId: 'PROCESS', process: { path: '/x' } }, 'process.osType'],
  ['PROCESS on iOS', { typeId: 'PROCESS', process: { osType: 'iOS', path: '/x' } }, 'process.osType'],
  ['PROCESS with hashes not an array', { typeId: 'PROCESS', process: { osType: 'Linux', path: '/x', hashes: 'ab' } }, 'process.hashes'],
  ['PROCESS with processes', { typeId: 'PROCESS', process: PROCESS, processes: [PROCESS_B] }, 'processes'],
  ['PROCESS with semantic', { typeId: 'PROCESS', process: PROCESS, semantic: 'AllOf' }, 'semantic'],
  // PROCESS_MULTI
  ['PROCESS_MULTI without processes', { typeId: 'PROCESS_MULTI', semantic: 'AllOf' }, 'processes'],
  ['PROCESS_MULTI with empty processes', { typeId: 'PROCESS_MULTI', processes: [], semantic: 'AllOf' }, 'processes'],
  ['PROCESS_MULTI without semantic', { typeId: 'PROCESS_MULTI', processes: [PROCESS_B] }, 'semantic'],
  ['PROCESS_MULTI with an unknown semantic', { typeId: 'PROCESS_MULTI', processes: [PROCESS_B], semantic: 'OneOf' }, 'semantic'],
  ['PROCESS_MULTI on Android', { typeId: 'PROCESS_MULTI', processes: [{ osType: 'Android', path: '/x' }], semantic: 'AllOf' }, 'processes[0].osType'],
  ['PROCESS_MULTI with a process', { typeId: 'PROCESS_MULTI', processes: [PROCESS_B], semantic: 'AllOf', process: PROCESS }, 'process'],
  // MAC
  ['MAC without macAddresses', { typeId: 'MAC' }, 'macAddresses'],
  ['MAC with empty macAddresses', { typeId: 'MAC', macAddresses: [] }, 'macAddresses'],
  ['MAC with a bad address', { typeId: 'MAC', macAddresses: ['0a:1b:2c:3d:4e:5f', 'not-a-mac'] }, 'macAddresses[1]'],
  ['MAC with mixed separators', { typeId: 'MAC', macAddresses: ['0a:1b-2c:3d:4e:5f'] }, 'macAddresses[0]'],
  ['MAC with too few octets', { typeId: 'MAC', macAddresses: ['0a:1b:2c:3d:4e'] }, 'macAddresses[0]'],
  ['MAC with promptOnWake', { typeId: 'MAC', macAddresses: ['001122334455'], promptOnWake: false }, 'promptOnWake'],
  // MFA
  ['MFA with timeoutSeconds below -1', { typeId: 'MFA', timeoutSeconds: -2 }, 'timeoutSeconds'],
  ['MFA with fractional timeoutSeconds', { typeId: 'MFA', timeoutSeconds: 1.5 }, 'timeoutSeconds'],
  ['MFA with promptOnUnlock not a boolean', { typeId: 'MFA', promptOnUnlock: 'yes' }, 'promptOnUnlock'],
  ['MFA with macAddresses', { typeId: 'MFA', macAddresses: ['001122334455'] }, 'macAddresses'],
  ['MFA with domains', { typeId: 'MFA', domains: ['a'] }, 'domains'],
  ['MFA with operatingSystems', { typeId: 'MFA', operatingSystems: [{ type: 'Linux', versions: [] }] }, 'operatingSystems'],
];

describe('each kind: invalid bodies', () => {
  it.each(INVALID)('%s → 400 naming %s', async (_label, body, field, code = 'COULD_NOT_VALIDATE') => {
    const res = await call(t, 'POST', URL, { token: admin, body: { name: unique('invalid'), ...body } });
    expectError(res, 400, code, field);
  });

  it('nothing invalid was stored', async () => {
    const body = json(await call(t, 'GET', `${URL}?filter=${encodeURIComponent('name contains "invalid"')}`, { token: admin }));
    expect(body.meta.pagination.totalCount).toBe(0);
  });

  it('refuses a duplicate name', async () => {
    const name = unique('dup');
    await create({ name, typeId: 'DOMAIN', domains: ['a'] });
    expectError(await call(t, 'POST', URL, { token: admin, body: { name, typeId: 'MFA' } }), 400, 'COULD_NOT_VALIDATE', 'name');
  });
});

describe('patch', () => {
  it('needs the typeId of the check', async () => {
    const id = await create({ typeId: 'DOMAIN', domains: ['a'] });
    expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { domains: ['b'] } }), 400, 'COULD_NOT_VALIDATE', 'typeId');
    expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { typeId: 'MFA' } }), 400, 'COULD_NOT_VALIDATE', 'typeId');
    expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { typeId: 'RETINA', domains: ['b'] } }), 400, 'COULD_NOT_VALIDATE', 'typeId');
    expect((await get(id)).domains).toEqual(['a']);
  });

  it('changes only the supplied fields', async () => {
    const id = await create({ typeId: 'DOMAIN', domains: ['a'], roleAttributes: ['x'], tags: { k: 'v' } });
    t.clock.advance(1000);
    const res = await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { typeId: 'DOMAIN', domains: ['b', 'c'] } });
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res).data).toEqual({});
    expect(await get(id)).toMatchObject({ typeId: 'DOMAIN', domains: ['b', 'c'], roleAttributes: ['x'], tags: { k: 'v' }, updatedAt: new Date(t.clock()).toISOString() });
  });

  it('validates the result like a create', async () => {
    const domain = await create({ typeId: 'DOMAIN', domains: ['a'] });
    const mfa = await create({ typeId: 'MFA', timeoutSeconds: 60 });
    const multi = await create({ typeId: 'PROCESS_MULTI', processes: [PROCESS_B], semantic: 'AllOf' });
    const cases: [string, Record<string, unknown>, string][] = [
      [domain, { typeId: 'DOMAIN', domains: [] }, 'domains'],
      [domain, { typeId: 'DOMAIN', macAddresses: ['001122334455'] }, 'macAddresses'],
      [mfa, { typeId: 'MFA', process: PROCESS }, 'process'],
      [mfa, { typeId: 'MFA', timeoutSeconds: -7 }, 'timeoutSeconds'],
      [multi, { typeId: 'PROCESS_MULTI', processes: [{ osType: 'iOS', path: '/x' }] }, 'processes[0].osType'],
    ];
    for (const [id, body, field] of cases) {
      expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body }), 400, 'COULD_NOT_VALIDATE', field);
    }
    expect((await get(domain)).domains).toEqual(['a']);
  });

  it("null for a field of the check's kind leaves it as it is (none of them reads null)", async () => {
    const mfa = await create({ typeId: 'MFA', timeoutSeconds: 60, promptOnWake: true });
    const nulls = { timeoutSeconds: null, promptOnWake: null, ignoreLegacyEndpoints: null };
    expect((await call(t, 'PATCH', `${URL}/${mfa}`, { token: admin, body: { typeId: 'MFA', ...nulls, promptOnUnlock: true } })).statusCode).toBe(200);
    expect(await get(mfa)).toMatchObject({ timeoutSeconds: 60, promptOnWake: true, promptOnUnlock: true, ignoreLegacyEndpoints: false });
    const domain = await create({ typeId: 'DOMAIN', domains: ['a'] });
    expect((await call(t, 'PATCH', `${URL}/${domain}`, { token: admin, body: { typeId: 'DOMAIN', domains: null } })).statusCode).toBe(200);
    expect((await get(domain)).domains).toEqual(['a']);
    const multi = await create({ typeId: 'PROCESS_MULTI', processes: [PROCESS_B], semantic: 'AllOf' });
    expect((await call(t, 'PATCH', `${URL}/${multi}`, { token: admin, body: { typeId: 'PROCESS_MULTI', processes: null, semantic: null } })).statusCode).toBe(200);
    expect(await get(multi)).toMatchObject({ processes: [PROCESS_B], semantic: 'AllOf' });
  });
});

describe('full update', () => {
  it('needs name and the typeId of the check; absent fields reset', async () => {
    const id = await create({ typeId: 'MFA', timeoutSeconds: 60, promptOnWake: true, roleAttributes: ['x'] });
    expectError(await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { typeId: 'MFA' } }), 400, 'COULD_NOT_VALIDATE', 'name');
    expectError(await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: 'put-mfa' } }), 400, 'COULD_NOT_VALIDATE', 'typeId');
    expectError(await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: 'put-mfa', typeId: 'DOMAIN', domains: ['a'] } }), 400, 'COULD_NOT_VALIDATE', 'typeId');
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: 'put-mfa', typeId: 'MFA', promptOnUnlock: true } })).statusCode).toBe(200);
    expect(await get(id)).toMatchObject({ name: 'put-mfa', typeId: 'MFA', timeoutSeconds: -1, promptOnWake: false, promptOnUnlock: true, roleAttributes: [] });
  });

  it("requires the kind's fields (domains on a DOMAIN check)", async () => {
    const id = await create({ typeId: 'DOMAIN', domains: ['a'] });
    expectError(await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: 'put-domain', typeId: 'DOMAIN' } }), 400, 'COULD_NOT_VALIDATE', 'domains');
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: 'put-domain', typeId: 'DOMAIN', domains: ['z'] } })).statusCode).toBe(200);
    expect(await get(id)).toMatchObject({ name: 'put-domain', domains: ['z'] });
  });
});

describe('version', () => {
  it('is 1 when created and one more on every patch or full update, on every kind; refused changes and writes of it count for nothing', async () => {
    const id = await create({ typeId: 'DOMAIN', domains: ['a'] });
    const mfa = await create({ typeId: 'MFA' });
    expect((await get(id)).version).toBe(1);
    expect((await get(mfa)).version).toBe(1);
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { typeId: 'DOMAIN', domains: ['b'] } })).statusCode).toBe(200);
    expect((await get(id)).version).toBe(2);
    expect((await call(t, 'PUT', `${URL}/${id}`, { token: admin, body: { name: 'versioned', typeId: 'DOMAIN', domains: ['c'] } })).statusCode).toBe(200);
    expect((await get(id)).version).toBe(3);
    expectError(await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { typeId: 'DOMAIN', domains: [] } }), 400, 'COULD_NOT_VALIDATE', 'domains');
    // version is the controller's to set
    expect((await call(t, 'PATCH', `${URL}/${id}`, { token: admin, body: { typeId: 'DOMAIN', version: 99 } })).statusCode).toBe(200);
    const after = await get(id);
    expect(after.version).toBe(4);
    expect((json(await call(t, 'GET', `${URL}?filter=${encodeURIComponent(`id = "${id}"`)}`, { token: admin })).data as any[])[0].version).toBe(4);
    expect((await get(mfa)).version).toBe(1);
  });
});

describe('delete', () => {
  it('delete removes the check', async () => {
    const id = await create({ typeId: 'MAC', macAddresses: ['001122334455'] });
    const res = await call(t, 'DELETE', `${URL}/${id}`, { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    expectError(await call(t, 'GET', `${URL}/${id}`, { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('list', () => {
  beforeAll(async () => {
    await create({ name: 'pcl-a', typeId: 'DOMAIN', domains: ['a'], roleAttributes: ['x', 'y'] });
    await create({ name: 'pcl-b', typeId: 'MFA', roleAttributes: ['y'] });
    await create({ name: 'pcl-c', typeId: 'MAC', macAddresses: ['001122334455'], roleAttributes: ['x'] });
  });
  const list = async (query: string) => {
    const res = await call(t, 'GET', `${URL}?${query}`, { token: admin });
    expect(res.statusCode, res.body).toBe(200);
    return json(res);
  };
  const names = (body: any) => body.data.map((e: { name: string }) => e.name);
  const q = (f: string) => `filter=${encodeURIComponent(f)}`;

  it('filters on typeId and fields, sorts and pages', async () => {
    expect(names(await list(`${q('name contains "pcl-" and typeId = "MFA"')}`))).toEqual(['pcl-b']);
    const body = await list(`${q('name contains "pcl-"')}&sort=${encodeURIComponent('name desc')}&limit=2`);
    expect(names(body)).toEqual(['pcl-c', 'pcl-b']);
    expect(body.meta.pagination).toEqual({ limit: 2, offset: 0, totalCount: 3 });
    expect(body.meta.filterableFields).toEqual(expect.arrayContaining(['id', 'name', 'typeId', 'roleAttributes']));
  });

  // pcl-b (MFA) has no domains and no MAC addresses: its sets count 0, as isEmpty says.
  it.each([
    ['count(domains) = 0', ['pcl-b', 'pcl-c']],
    ['count(domains) != 0', ['pcl-a']],
    ['count(domains) < 1 and isEmpty(domains)', ['pcl-b', 'pcl-c']],
    ['count(macAddresses) between 0 and 1', ['pcl-a', 'pcl-b']],
    ['count(macAddresses) in [0]', ['pcl-a', 'pcl-b']],
    ['not count(macAddresses) >= 1', ['pcl-a', 'pcl-b']],
  ])('counts an absent set as empty: %s', async (filter, expected) => {
    expect(names(await list(`${q(`name contains "pcl-" and (${filter})`)}&sort=name`))).toEqual(expected);
  });

  it('takes roleFilter and roleSemantic', async () => {
    const roles = (...r: string[]) => r.map((x) => `roleFilter=${encodeURIComponent(x)}`).join('&');
    expect(names(await list(`${roles('#x', '#y')}&sort=name`))).toEqual(['pcl-a']);
    expect(names(await list(`${roles('#x', '#y')}&roleSemantic=AnyOf&${q('name contains "pcl-"')}&sort=name`))).toEqual(['pcl-a', 'pcl-b', 'pcl-c']);
    expectError(await call(t, 'GET', `${URL}?roleFilter=x`, { token: admin }), 400, 'COULD_NOT_VALIDATE', 'roleFilter');
  });
});

describe('posture check types', () => {
  const EXPECTED: Record<string, string[]> = {
    OS: ['Windows', 'WindowsServer', 'Android', 'iOS', 'Linux', 'macOS'],
    PROCESS: ['Windows', 'WindowsServer', 'macOS', 'Linux'],
    PROCESS_MULTI: ['Windows', 'WindowsServer', 'macOS', 'Linux'],
    DOMAIN: ['Windows', 'WindowsServer'],
    MAC: ['Windows', 'WindowsServer', 'macOS', 'Linux'],
    MFA: ['Windows', 'WindowsServer', 'Android', 'iOS', 'Linux', 'macOS'],
  };

  it('lists the six seeded types with the systems each applies to', async () => {
    const res = await call(t, 'GET', `${TYPES}?limit=100`, { token: admin });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json; charset=utf-8/);
    const body = json(res);
    expect(body.meta.pagination.totalCount).toBe(6);
    expect(body.data.map((x: { id: string }) => x.id).sort()).toEqual(Object.keys(EXPECTED).sort());
    for (const x of body.data) {
      expect(x.name).toBe(x.id);
      expect(x.operatingSystems).toEqual(EXPECTED[x.id]!.map((type) => ({ type, versions: [] })));
      expect(x._links.self.href).toBe(`./posture-check-types/${x.id}`);
    }
  });

  it('answers one type', async () => {
    const res = await call(t, 'GET', `${TYPES}/DOMAIN`, { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toMatchObject({ id: 'DOMAIN', name: 'DOMAIN', operatingSystems: [{ type: 'Windows', versions: [] }, { type: 'WindowsServer', versions: [] }] });
  });

  it('filters', async () => {
    const body = json(await call(t, 'GET', `${TYPES}?filter=${encodeURIComponent('name in ["MAC", "MFA"]')}&sort=name`, { token: admin }));
    expect(body.data.map((x: { id: string }) => x.id)).toEqual(['MAC', 'MFA']);
    expectError(await call(t, 'GET', `${TYPES}?filter=${encodeURIComponent('nope = 1')}`, { token: admin }), 400, 'INVALID_FILTER');
  });

  it('has no write routes (405: the paths only read)', async () => {
    const body = { name: 'RETINA' };
    expectError(await call(t, 'POST', TYPES, { token: admin, body }), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call(t, 'PUT', `${TYPES}/MFA`, { token: admin, body }), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call(t, 'PATCH', `${TYPES}/MFA`, { token: admin, body }), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call(t, 'DELETE', `${TYPES}/MFA`, { token: admin }), 405, 'METHOD_NOT_ALLOWED');
  });

  it('seeding again changes nothing', async () => {
    const before = json(await call(t, 'GET', `${TYPES}?limit=100`, { token: admin })).data;
    t.clock.advance(60_000);
    await t.app.core.resources.write((ctx) => seedPostureCheckTypes(ctx));
    await t.app.core.resources.write((ctx) => seedPostureCheckTypes(ctx));
    expect(json(await call(t, 'GET', `${TYPES}?limit=100`, { token: admin })).data).toEqual(before);
  });

  it('a type in use cannot be deleted from under its checks', async () => {
    await create({ typeId: 'MFA' });
    await expect(t.app.core.store.db.deleteFrom('posture_check_types').where('id', '=', 'MFA').execute()).rejects.toThrow(/FOREIGN KEY/);
  });
});

describe('who may call', () => {
  let id: string;
  let none: string;
  let perm: string;
  let readOnly: string;
  beforeAll(async () => {
    id = await create({ typeId: 'DOMAIN', domains: ['a'] });
    await createIdentityWithPassword(t, admin, { name: 'p-none', username: 'p-none', password: 'p-none-1', permissions: ['router', 'service'] });
    await createIdentityWithPassword(t, admin, { name: 'p-perm', username: 'p-perm', password: 'p-perm-1', permissions: ['posture-check'] });
    await createIdentityWithPassword(t, admin, { name: 'p-read', username: 'p-read', password: 'p-read-1', permissions: ['posture-check.read'] });
    none = await login(t, 'p-none', 'p-none-1');
    perm = await login(t, 'p-perm', 'p-perm-1');
    readOnly = await login(t, 'p-read', 'p-read-1');
  });
  const routes = (): [string, string, unknown?][] => [
    ['GET', TYPES],
    ['GET', `${TYPES}/OS`],
    ['GET', URL],
    ['GET', `${URL}/${id}`],
    ['POST', URL, { name: 'p-auth-new', typeId: 'MFA' }],
    ['PATCH', `${URL}/${id}`, { typeId: 'DOMAIN', domains: ['b'] }],
    ['PUT', `${URL}/${id}`, { name: 'p-auth', typeId: 'DOMAIN', domains: ['c'] }],
    ['DELETE', `${URL}/${id}`],
  ];

  it('without the permission: 401', async () => {
    for (const [method, url, body] of routes()) {
      expectError(await call(t, method as 'GET', url, { token: none, body }), 401, 'UNAUTHORIZED');
    }
  });

  it('posture-check.read reads only; posture-check does everything', async () => {
    for (const [method, url, body] of routes().slice(0, 4)) expect((await call(t, method as 'GET', url, { token: readOnly, body })).statusCode).toBe(200);
    expectError(await call(t, 'POST', URL, { token: readOnly, body: { name: 'p-ro', typeId: 'MFA' } }), 401, 'UNAUTHORIZED');
    const expected = [200, 200, 200, 200, 201, 200, 200, 200];
    for (const [i, [method, url, body]] of routes().entries()) {
      const res = await call(t, method as 'GET', url, { token: perm, body });
      expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(expected[i]);
    }
  });
});

describe('OpenAPI', () => {
  it('names the operations as endpoints.md does; patch and update bodies require typeId', async () => {
    const doc = json(await call(t, 'GET', `${MGMT}/specs/edge-management/spec`));
    const op = (path: string, method: string) => doc.paths[`${MGMT}${path}`]?.[method];
    expect(op('/posture-check-types', 'get').operationId).toBe('listPostureCheckTypes');
    expect(op('/posture-check-types/{id}', 'get').operationId).toBe('detailPostureCheckType');
    expect(op('/posture-checks', 'get').operationId).toBe('listPostureChecks');
    expect(op('/posture-checks', 'post').operationId).toBe('createPostureCheck');
    expect(op('/posture-checks/{id}', 'get').operationId).toBe('detailPostureCheck');
    expect(op('/posture-checks/{id}', 'patch').operationId).toBe('patchPostureCheck');
    expect(op('/posture-checks/{id}', 'put').operationId).toBe('updatePostureCheck');
    expect(op('/posture-checks/{id}', 'delete').operationId).toBe('deletePostureCheck');
    for (const method of ['patch', 'put']) {
      const body = op('/posture-checks/{id}', method).requestBody.content['application/json'].schema;
      // a named schema: a component of the document
      const schema = body.$ref ? doc.components.schemas[body.$ref.replace('#/components/schemas/', '')] : body;
      expect(schema.required).toContain('typeId');
    }
  });
});
