// The controllers list: this controller registers itself at every start under an id kept across
// restarts, online, with its certificate and the addresses of its APIs; the Management API lists it
// to admins (and ops), the Client API to any authenticated caller.
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiAddressesOf, controllerIdOf, markControllerOffline, registerController } from '../src/domain/operations.js';
import { DEFAULT_LISTENER_OPTIONS, type ListenerConfig } from '../src/config/index.js';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  selfSignedCertificate,
  startTestController,
  tempDir,
  type TestController,
} from './helpers.js';

/** SHA-1 of the DER as lowercase hex, computed independently of the controller's own helper. */
function sha1Hex(pem: string): string {
  return new X509Certificate(pem).fingerprint.replace(/:/g, '').toLowerCase();
}

const edgeApis = (address: string) => ({
  'edge-client': [{ url: `https://${address}/edge/client/v1`, version: 'v1' }],
  'edge-management': [{ url: `https://${address}/edge/management/v1`, version: 'v1' }],
});

let t: TestController;
let admin: string;
let plain: string;
let ops: string;
let readonly: string;
let clientToken: string;
let address: string;

async function userWith(name: string, permissions: string[]): Promise<string> {
  await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw1`, permissions });
  return login(t, name, `${name}-pw1`);
}

const list = async (token: string, query = '', api = MGMT) => {
  const res = await call(t, 'GET', `${api}/controllers${query}`, { token });
  expect(res.statusCode, res.body).toBe(200);
  return json(res);
};

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  plain = await userWith('ctl-plain', []);
  ops = await userWith('ctl-ops', ['ops']);
  readonly = await userWith('ctl-readonly', ['admin_readonly']);
  clientToken = await login(t, 'ctl-plain', 'ctl-plain-pw1', CLIENT);
  address = t.config.web[0]!.bindPoints[0]!.address;
});
afterAll(async () => {
  await t.close();
});

describe('this controller', () => {
  it('is listed online, with its certificate, fingerprint and API addresses', async () => {
    const body = await list(admin);
    expect(body.meta.pagination).toEqual({ limit: 10, offset: 0, totalCount: 1 });
    const [c] = body.data;
    const certPem = t.app.core.pki.serverCertPem;
    expect(c).toMatchObject({
      _links: { self: { href: `./controllers/${c.id}` } },
      name: address,
      address,
      ctrlAddress: address,
      certPem,
      fingerprint: sha1Hex(certPem),
      isOnline: true,
      lastJoinedAt: new Date(t.clock()).toISOString(),
      tags: {},
    });
    expect(c.fingerprint).toMatch(/^[0-9a-f]{40}$/);
    expect(c.apiAddresses).toMatchObject(edgeApis(address));
    expect(c.id).toBe(await controllerIdOf(t.app.core.store.db, t.app.core.resources));
  });

  it('filters and pages', async () => {
    const id = (await list(admin)).data[0].id;
    const q = (filter: string) => `?filter=${encodeURIComponent(filter)}`;
    expect((await list(admin, q(`isOnline = true and name = "${address}"`))).data.map((c: { id: string }) => c.id)).toEqual([id]);
    expect((await list(admin, q('isOnline = false'))).data).toEqual([]);
    expect((await list(admin, q(`fingerprint = "${sha1Hex(t.app.core.pki.serverCertPem)}"`))).data).toHaveLength(1);
    const page = await list(admin, '?limit=1&offset=1');
    expect(page.data).toEqual([]);
    expect(page.meta.pagination).toEqual({ limit: 1, offset: 1, totalCount: 1 });
    expect(page.meta.filterableFields).toEqual(expect.arrayContaining(['name', 'isOnline', 'fingerprint', 'lastJoinedAt']));
    expect(page.meta.filterableFields).not.toContain('certPem');
  });

  it('answers 400 for a bad filter or paging', async () => {
    expectError(await call(t, 'GET', `${MGMT}/controllers?filter=${encodeURIComponent('certPem = "x"')}`, { token: admin }), 400, 'INVALID_FILTER');
    expectError(await call(t, 'GET', `${MGMT}/controllers?limit=ten`, { token: admin }), 400, 'INVALID_PAGINATION', 'limit');
    expectError(await call(t, 'GET', `${CLIENT}/controllers?filter=${encodeURIComponent('nope = 1')}`, { token: clientToken }), 400, 'INVALID_FILTER');
  });

  it('has a list only: no detail, create, change or delete routes', async () => {
    const id = (await list(admin)).data[0].id;
    expectError(await call(t, 'GET', `${MGMT}/controllers/${id}`, { token: admin }), 404, 'NOT_FOUND');
    expectError(await call(t, 'POST', `${MGMT}/controllers`, { token: admin, body: { name: 'x' } }), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call(t, 'PATCH', `${MGMT}/controllers/${id}`, { token: admin, body: {} }), 404, 'NOT_FOUND');
    expectError(await call(t, 'DELETE', `${MGMT}/controllers/${id}`, { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('registration', () => {
  it('keeps the id when the certificate changes, and marks the controller offline on request', async () => {
    const core = t.app.core;
    const before = (await list(admin)).data[0];
    const other = await selfSignedCertificate('reissued');
    t.clock.advance(5000);
    await core.resources.write((ctx) => registerController(ctx, { name: address, address, certPem: other.certPem }));
    let after = (await list(admin)).data[0];
    expect(after).toMatchObject({ id: before.id, certPem: other.certPem, fingerprint: other.fingerprint, isOnline: true });
    expect(after.lastJoinedAt).toBe(new Date(t.clock()).toISOString());
    expect(after.createdAt).toBe(before.createdAt);

    await markControllerOffline(core.resources);
    expect((await list(admin)).data[0]).toMatchObject({ id: before.id, isOnline: false });

    // back as it was
    await core.resources.write((ctx) =>
      registerController(ctx, { name: address, address, certPem: core.pki.serverCertPem, apiAddresses: before.apiAddresses }),
    );
    after = (await list(admin)).data[0];
    expect(after).toMatchObject({ id: before.id, isOnline: true, fingerprint: before.fingerprint, apiAddresses: before.apiAddresses });
  });

  it('records the API addresses it is given', async () => {
    const core = t.app.core;
    const apiAddresses = { 'edge-client': [{ url: 'https://a.example.com:443/edge/client/v1', version: 'v1' }] };
    await core.resources.write((ctx) => registerController(ctx, { name: address, address, certPem: core.pki.serverCertPem, apiAddresses }));
    expect((await list(admin)).data[0].apiAddresses).toEqual(apiAddresses);
    await core.resources.write((ctx) => registerController(ctx, { name: address, address, certPem: core.pki.serverCertPem }));
    expect((await list(admin)).data[0].apiAddresses).toEqual(edgeApis(address));
  });

  it('keeps its name unique when another record holds it', async () => {
    const core = t.app.core;
    const repo = core.resources.get('controllers').repo;
    const now = new Date(t.clock()).toISOString();
    await repo.insert(core.store.db, { id: 'stale', name: 'taken:1280', createdAt: now, updatedAt: now, tags: {}, isOnline: false });
    await core.resources.write((ctx) => registerController(ctx, { name: 'taken:1280', address, certPem: core.pki.serverCertPem }));
    const id = await controllerIdOf(core.store.db, core.resources);
    const names = (await list(admin, '?sort=name')).data.map((c: { id: string; name: string }) => [c.id, c.name]);
    expect(names).toEqual([
      ['stale', 'taken:1280'],
      [id, `taken:1280 (${id})`],
    ]);
    await repo.delete(core.store.db, 'stale');
    await core.resources.write((ctx) => registerController(ctx, { name: address, address, certPem: core.pki.serverCertPem }));
    expect((await list(admin)).data.map((c: { name: string }) => c.name)).toEqual([address]);
  });

  it('keeps the same id across restarts on the same data directory', async () => {
    const dir = tempDir();
    try {
      const first = await startTestController({ env: ADMIN_ENV, dataDir: dir.path, memoryStore: false });
      let id: string;
      let createdAt: string;
      try {
        const token = await asAdmin(first);
        const [c] = json(await call(first, 'GET', `${MGMT}/controllers`, { token })).data;
        ({ id, createdAt } = c);
        expect(c.isOnline).toBe(true);
        await markControllerOffline(first.app.core.resources);
      } finally {
        await first.app.close();
      }

      const clock = first.clock;
      clock.advance(60_000);
      const second = await startTestController({ env: ADMIN_ENV, dataDir: dir.path, memoryStore: false, clock });
      try {
        const token = await asAdmin(second);
        const body = json(await call(second, 'GET', `${MGMT}/controllers`, { token }));
        expect(body.meta.pagination.totalCount).toBe(1);
        const address2 = second.config.web[0]!.bindPoints[0]!.address;
        expect(body.data[0]).toMatchObject({
          id,
          createdAt,
          name: address2,
          address: address2,
          isOnline: true,
          lastJoinedAt: new Date(clock()).toISOString(),
        });
      } finally {
        await second.app.close();
      }
    } finally {
      dir.remove();
    }
  });
});

describe('apiAddressesOf', () => {
  it('lists every bind point serving each API', () => {
    const web: ListenerConfig[] = [
      {
        name: 'public',
        bindPoints: [
          { interface: '0.0.0.0:443', address: 'ctrl.example.com:443' },
          { interface: '0.0.0.0:8443', address: 'ctrl2.example.com:8443' },
        ],
        apis: [
          { binding: 'edge-client', options: {} },
          { binding: 'edge-oidc', options: {} },
        ],
        options: DEFAULT_LISTENER_OPTIONS,
      },
      {
        name: 'admin',
        bindPoints: [{ interface: '127.0.0.1:1281', address: '127.0.0.1:1281' }],
        apis: [{ binding: 'edge-management', options: {} }],
        options: DEFAULT_LISTENER_OPTIONS,
      },
    ];
    expect(apiAddressesOf(web)).toEqual({
      'edge-client': [
        { url: 'https://ctrl.example.com:443/edge/client/v1', version: 'v1' },
        { url: 'https://ctrl2.example.com:8443/edge/client/v1', version: 'v1' },
      ],
      'edge-management': [{ url: 'https://127.0.0.1:1281/edge/management/v1', version: 'v1' }],
    });
    expect(apiAddressesOf(web, ['edge-oidc', 'edge-management'])).toEqual({
      'edge-oidc': [
        { url: 'https://ctrl.example.com:443/oidc', version: 'v1' },
        { url: 'https://ctrl2.example.com:8443/oidc', version: 'v1' },
      ],
      'edge-management': [{ url: 'https://127.0.0.1:1281/edge/management/v1', version: 'v1' }],
    });
  });
});

describe('who may', () => {
  it('lists to ops and admin_readonly on the Management API', async () => {
    expect((await list(ops)).data).toHaveLength(1);
    expect((await list(readonly)).data).toHaveLength(1);
  });

  it('lists to any authenticated caller on the Client API, filter and paging included', async () => {
    const body = await list(clientToken, `?limit=5&filter=${encodeURIComponent('isOnline = true')}`, CLIENT);
    expect(body.data).toHaveLength(1);
    expect(body.data[0]).toMatchObject({ name: address, isOnline: true, fingerprint: sha1Hex(t.app.core.pki.serverCertPem) });
    expect(body.meta.pagination).toEqual({ limit: 5, offset: 0, totalCount: 1 });
    // a session of the Management API works there too, and an admin's as well
    expect((await list(plain, '', CLIENT)).data).toHaveLength(1);
    expect((await list(admin, '', CLIENT)).data).toHaveLength(1);
  });
});
