// Controller settings on the Management API: CRUD under the controller id they apply to, the
// validation of their OIDC URIs, and the effective setting (built-in < global < the controller's own,
// the lists of each layer added to those below, as the OIDC provider takes them).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_REDIRECT_URIS } from '../src/domain/operations.js';
import { authorizeQuery } from './oidc-helpers.js';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CHALLENGE_MISSING,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  startTestController,
  tempDir,
  type TestController,
} from './helpers.js';

const CONFIGURED_URI = 'https://app.example.com/auth/callback';
const BUILT_IN = [...DEFAULT_REDIRECT_URIS, CONFIGURED_URI];

let t: TestController;
let configDir: { path: string; remove(): void };
let admin: string;
let plain: string;
let ops: string;
let readonly: string;
let controllerId: string;

async function userWith(name: string, permissions: string[]): Promise<string> {
  await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw1`, permissions });
  return login(t, name, `${name}-pw1`);
}

const create = (token: string, body: Record<string, unknown>) => call(t, 'POST', `${MGMT}/controller-settings`, { token, body });
const get = async (id: string) => {
  const res = await call(t, 'GET', `${MGMT}/controller-settings/${id}`, { token: admin });
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
};
const effective = async (id: string, token = admin) => {
  const res = await call(t, 'GET', `${MGMT}/controller-settings/${id}/effective`, { token });
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
};

beforeAll(async () => {
  // One edge-oidc API lists a redirect URI of its own: the built-in values must carry it.
  configDir = tempDir();
  const file = join(configDir.path, 'overlay.yaml');
  writeFileSync(
    file,
    [
      'web:',
      '  - name: main',
      '    bindPoints: [{ interface: "127.0.0.1:1280" }]',
      '    apis:',
      '      - binding: edge-client',
      '      - binding: edge-management',
      '      - binding: edge-oidc',
      `        options: { redirectURIs: ["${CONFIGURED_URI}"] }`,
      '',
    ].join('\n'),
  );
  t = await startTestController({ env: { ...ADMIN_ENV, OVERLAY_CONFIG: file } });
  admin = await asAdmin(t);
  plain = await userWith('cs-plain', []);
  ops = await userWith('cs-ops', ['ops']);
  readonly = await userWith('cs-readonly', ['admin_readonly']);
  const controllers = json(await call(t, 'GET', `${MGMT}/controllers`, { token: admin })).data;
  expect(controllers).toHaveLength(1);
  controllerId = controllers[0].id;
});
afterAll(async () => {
  await t.close();
  configDir.remove();
});

describe('create, read, change, delete', () => {
  it('creates a setting under its controller id and reads it back', async () => {
    const now = t.clock();
    const body = {
      controllerId: 'ctrl-crud',
      oidc: { redirectUris: ['https://a.example.com/cb', 'http://127.0.0.1:*/cb'], postLogoutUris: ['https://a.example.com/bye'] },
      tags: { team: 'net' },
    };
    const res = await create(admin, body);
    expect(res.statusCode, res.body).toBe(201);
    expect(json(res).data).toEqual({ id: 'ctrl-crud', _links: { self: { href: './controller-settings/ctrl-crud' } } });
    expect(await get('ctrl-crud')).toEqual({
      _links: { self: { href: './controller-settings/ctrl-crud' } },
      id: 'ctrl-crud',
      createdAt: new Date(now).toISOString(),
      updatedAt: new Date(now).toISOString(),
      ...body,
    });
  });

  it('defaults oidc to an empty object', async () => {
    expect((await create(admin, { controllerId: 'ctrl-bare' })).statusCode).toBe(201);
    // Short ids and dots within are ids like any other.
    for (const id of ['c1', '.x', 'a..b']) expect((await create(admin, { controllerId: id })).statusCode).toBe(201);
    expect(await get('ctrl-bare')).toMatchObject({ id: 'ctrl-bare', controllerId: 'ctrl-bare', oidc: {}, tags: {} });
  });

  it('lists, filters and pages', async () => {
    for (const id of ['list-a', 'list-b', 'list-c']) {
      expect((await create(admin, { controllerId: id, tags: { listed: true } })).statusCode).toBe(201);
    }
    const one = json(
      await call(t, 'GET', `${MGMT}/controller-settings?filter=${encodeURIComponent('controllerId = "list-b"')}`, { token: admin }),
    );
    expect(one.data.map((s: { id: string }) => s.id)).toEqual(['list-b']);
    const page = json(
      await call(t, 'GET', `${MGMT}/controller-settings?limit=2&offset=1&sort=id&filter=${encodeURIComponent('tags.listed = true')}`, {
        token: admin,
      }),
    );
    expect(page.data.map((s: { id: string }) => s.id)).toEqual(['list-b', 'list-c']);
    expect(page.meta.pagination).toEqual({ limit: 2, offset: 1, totalCount: 3 });
    expect(page.meta.filterableFields).toContain('controllerId');
    expect(page.meta.filterableFields).not.toContain('oidc');
  });

  it('patches only what is given; oidc is replaced as a whole, null resets it', async () => {
    expect(
      (await create(admin, { controllerId: 'ctrl-patch', oidc: { redirectUris: ['https://p.example.com/cb'] }, tags: { keep: true } }))
        .statusCode,
    ).toBe(201);
    t.clock.advance(1000);
    let res = await call(t, 'PATCH', `${MGMT}/controller-settings/ctrl-patch`, {
      token: admin,
      body: { oidc: { postLogoutUris: ['https://p.example.com/bye'] } },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res).data).toEqual({});
    const patched = await get('ctrl-patch');
    expect(patched).toMatchObject({ oidc: { postLogoutUris: ['https://p.example.com/bye'] }, tags: { keep: true } });
    expect(patched.updatedAt).not.toBe(patched.createdAt);

    res = await call(t, 'PATCH', `${MGMT}/controller-settings/ctrl-patch`, { token: admin, body: { oidc: null } });
    expect(res.statusCode, res.body).toBe(200);
    expect((await get('ctrl-patch')).oidc).toEqual({});
  });

  it('updates in full: what is left out is reset; the controller id stays', async () => {
    expect((await create(admin, { controllerId: 'ctrl-put', oidc: { redirectUris: ['https://u.example.com/cb'] }, tags: { a: 'b' } })).statusCode).toBe(
      201,
    );
    let res = await call(t, 'PUT', `${MGMT}/controller-settings/ctrl-put`, {
      token: admin,
      body: { oidc: { postLogoutUris: ['https://u.example.com/bye'] }, controllerId: 'ignored' },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(await get('ctrl-put')).toMatchObject({ controllerId: 'ctrl-put', oidc: { postLogoutUris: ['https://u.example.com/bye'] }, tags: {} });
    res = await call(t, 'PUT', `${MGMT}/controller-settings/ctrl-put`, { token: admin, body: {} });
    expect(res.statusCode, res.body).toBe(200);
    expect((await get('ctrl-put')).oidc).toEqual({});
  });

  it('deletes', async () => {
    expect((await create(admin, { controllerId: 'ctrl-delete' })).statusCode).toBe(201);
    const res = await call(t, 'DELETE', `${MGMT}/controller-settings/ctrl-delete`, { token: admin });
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res).data).toEqual({});
    expectError(await call(t, 'GET', `${MGMT}/controller-settings/ctrl-delete`, { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('bad input', () => {
  it.each([
    ['no controllerId', {}, 'controllerId'],
    ['an empty controllerId', { controllerId: '' }, 'controllerId'],
    ['a controllerId of 256 characters', { controllerId: 'c'.repeat(256) }, 'controllerId'],
    // It becomes the setting's id, which goes in URLs.
    ...['a/b', '.', '..', '..x y', 'a\u0000b', '#all', 'x?y', '%41', '\u{1F600}'].map((id) => [`the controllerId ${JSON.stringify(id)}`, { controllerId: id }, 'controllerId'] as [string, object, string]),
    ['an unknown oidc field', { controllerId: 'bad-1', oidc: { issuer: 'x' } }, 'oidc'],
    ['redirectUris that are not a list', { controllerId: 'bad-2', oidc: { redirectUris: 'https://a/cb' } }, 'oidc.redirectUris'],
    ['a relative redirect URI', { controllerId: 'bad-3', oidc: { redirectUris: ['/cb'] } }, 'oidc.redirectUris[0]'],
    ['a redirect URI of another scheme', { controllerId: 'bad-4', oidc: { redirectUris: ['https://a/cb', 'ftp://b/cb'] } }, 'oidc.redirectUris[1]'],
    ['a wildcard outside the port', { controllerId: 'bad-5', oidc: { postLogoutUris: ['https://*.example.com/'] } }, 'oidc.postLogoutUris[0]'],
    ['a URI with a fragment', { controllerId: 'bad-6', oidc: { postLogoutUris: ['https://a.example.com/#x'] } }, 'oidc.postLogoutUris[0]'],
  ])('answers 400 naming the field for %s', async (_name, body, field) => {
    expectError(await create(admin, body), 400, 'COULD_NOT_VALIDATE', field);
  });

  it('refuses a second setting for the same controller, naming controllerId', async () => {
    expect((await create(admin, { controllerId: 'ctrl-dup' })).statusCode).toBe(201);
    expectError(await create(admin, { controllerId: 'ctrl-dup' }), 400, 'COULD_NOT_VALIDATE', 'controllerId');
  });

  it('checks URIs on patch and full update too', async () => {
    expect((await create(admin, { controllerId: 'ctrl-bad-write' })).statusCode).toBe(201);
    const bad = { oidc: { redirectUris: ['https://ok.example.com/cb', 'not a url'] } };
    for (const method of ['PATCH', 'PUT'] as const) {
      const res = await call(t, method, `${MGMT}/controller-settings/ctrl-bad-write`, { token: admin, body: bad });
      expectError(res, 400, 'COULD_NOT_VALIDATE', 'oidc.redirectUris[1]');
    }
    expect((await get('ctrl-bad-write')).oidc).toEqual({});
  });

  it('answers 404 for the effective setting of an unknown id', async () => {
    expectError(await call(t, 'GET', `${MGMT}/controller-settings/no-such-setting/effective`, { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('effective setting', () => {
  // Runs in order: first without any setting for this controller, then with global, then with both.
  let startedAt: string;

  it('answers the built-in values for this controller before any setting exists', async () => {
    const answer = await effective(controllerId);
    startedAt = answer.createdAt;
    expect(answer).toEqual({
      _links: { self: { href: `./controller-settings/${controllerId}/effective` } },
      id: controllerId,
      // the built-in values were taken from the configuration at start
      createdAt: startedAt,
      updatedAt: startedAt,
      tags: {},
      controllerId,
      effective: { oidc: { redirectUris: BUILT_IN, postLogoutUris: BUILT_IN } },
      instance: { oidc: {} },
      sources: ['built-in'],
    });
    expect(Date.parse(startedAt)).toBeLessThanOrEqual(t.clock());
    expect(await effective('global')).toMatchObject({ id: 'global', effective: { oidc: { redirectUris: BUILT_IN } }, instance: { oidc: {} }, sources: ['built-in'] });
  });

  it('overlays the global setting on the built-in values', async () => {
    t.clock.advance(1_000);
    expect((await create(admin, { controllerId: 'global', oidc: { redirectUris: ['https://global.example.com/cb'] }, tags: { scope: 'all' } })).statusCode).toBe(201);
    const expected = { redirectUris: [...BUILT_IN, 'https://global.example.com/cb'], postLogoutUris: BUILT_IN };
    const at = new Date(t.clock()).toISOString();
    expect(await effective('global')).toMatchObject({
      effective: { oidc: expected },
      instance: { oidc: { redirectUris: ['https://global.example.com/cb'] } },
      tags: { scope: 'all' },
      createdAt: startedAt,
      updatedAt: at,
      sources: ['built-in', 'global'],
    });
    expect(await effective(controllerId)).toMatchObject({ effective: { oidc: expected }, instance: { oidc: {} }, tags: {}, updatedAt: at, sources: ['built-in', 'global'] });
  });

  it("overlays the controller's own setting last", async () => {
    expect(
      (await create(admin, { controllerId, oidc: { postLogoutUris: ['https://own.example.com/bye'] } })).statusCode,
    ).toBe(201);
    expect(await effective(controllerId)).toMatchObject({
      effective: { oidc: { redirectUris: [...BUILT_IN, 'https://global.example.com/cb'], postLogoutUris: [...BUILT_IN, 'https://own.example.com/bye'] } },
      instance: { oidc: { postLogoutUris: ['https://own.example.com/bye'] } },
      sources: ['built-in', 'global', controllerId],
    });
    // the global setting's own answer is unchanged
    expect((await effective('global')).effective.oidc.postLogoutUris).toEqual(BUILT_IN);

    t.clock.advance(1_000);
    expect(
      (await call(t, 'PATCH', `${MGMT}/controller-settings/${controllerId}`, { token: admin, body: { oidc: { redirectUris: ['https://own.example.com/cb'] } } }))
        .statusCode,
    ).toBe(200);
    const after = await effective(controllerId);
    expect(after.effective.oidc).toEqual({ redirectUris: [...BUILT_IN, 'https://global.example.com/cb', 'https://own.example.com/cb'], postLogoutUris: BUILT_IN });
    // What it reads is what the provider takes: the patterns of every layer (it read the instance's alone).
    for (const uri of ['http://127.0.0.1:5555/x', 'https://global.example.com/cb', 'https://own.example.com/cb']) {
      expect((await t.inject({ method: 'GET', url: `/oidc/authorization?${authorizeQuery({ redirect_uri: uri })}` })).statusCode, uri).toBe(302);
    }
    expect((await t.inject({ method: 'GET', url: `/oidc/authorization?${authorizeQuery({ redirect_uri: 'https://other.example.com/cb' })}` })).statusCode).toBe(400);
    expect(after.updatedAt).toBe(new Date(t.clock()).toISOString());
  });

  it('answers for a controller id that only has a setting, and 404 for one that has neither', async () => {
    expect((await create(admin, { controllerId: 'elsewhere', oidc: { redirectUris: ['https://else.example.com/cb'] } })).statusCode).toBe(201);
    expect(await effective('elsewhere')).toMatchObject({
      effective: { oidc: { redirectUris: [...BUILT_IN, 'https://global.example.com/cb', 'https://else.example.com/cb'], postLogoutUris: BUILT_IN } },
      sources: ['built-in', 'global', 'elsewhere'],
    });
    expectError(await call(t, 'GET', `${MGMT}/controller-settings/unknown-controller/effective`, { token: admin }), 404, 'NOT_FOUND');
  });

  it('falls back when a layer is removed', async () => {
    expect((await call(t, 'DELETE', `${MGMT}/controller-settings/global`, { token: admin })).statusCode).toBe(200);
    expect(await effective(controllerId)).toMatchObject({
      effective: { oidc: { redirectUris: [...BUILT_IN, 'https://own.example.com/cb'], postLogoutUris: BUILT_IN } },
      sources: ['built-in', controllerId],
    });
    expect(await effective('global')).toMatchObject({ instance: { oidc: {} }, createdAt: startedAt, updatedAt: startedAt, sources: ['built-in'] });
  });
});

describe('who may', () => {
  const routes = (id: string) =>
    [
      ['GET', `${MGMT}/controller-settings`, undefined],
      ['POST', `${MGMT}/controller-settings`, { controllerId: `auth-${id}` }],
      ['GET', `${MGMT}/controller-settings/${id}`, undefined],
      ['PATCH', `${MGMT}/controller-settings/${id}`, { tags: { x: true } }],
      ['PUT', `${MGMT}/controller-settings/${id}`, {}],
      ['GET', `${MGMT}/controller-settings/${id}/effective`, undefined],
      ['DELETE', `${MGMT}/controller-settings/${id}`, undefined],
    ] as const;

  it('answers 401 with the challenge without a credential for the effective setting', async () => {
    const res = await call(t, 'GET', `${MGMT}/controller-settings/ctrl-crud/effective`);
    expectError(res, 401, 'UNAUTHORIZED');
    expect(res.headers['www-authenticate']).toBe(CHALLENGE_MISSING);
  });

  it('refuses a non-admin without a permission (401)', async () => {
    for (const [method, url, body] of routes('ctrl-crud')) {
      expectError(await call(t, method, url, { token: plain, body }), 401, 'UNAUTHORIZED');
    }
  });

  it('lets an ops identity read, list and see effective settings; only an admin writes them', async () => {
    expect((await create(admin, { controllerId: 'by-ops' })).statusCode).toBe(201);
    for (const [method, url, body] of routes('by-ops')) {
      const res = await call(t, method, url, { token: ops, body });
      if (method === 'GET') expect(res.statusCode, `${method} ${url} ${res.body}`).toBe(200);
      else expectError(res, 401, 'UNAUTHORIZED');
    }
  });

  it('lets admin_readonly read, list and see effective settings, nothing else', async () => {
    expect((await create(admin, { controllerId: 'by-readonly' })).statusCode).toBe(201);
    for (const [method, url, body] of routes('by-readonly')) {
      const res = await call(t, method, url, { token: readonly, body });
      if (method === 'GET') expect(res.statusCode, `${method} ${url}`).toBe(200);
      else expectError(res, 401, 'UNAUTHORIZED');
    }
  });
});
