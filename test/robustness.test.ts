// No malformed request of any kind gets a 5xx: every operation of both Edge APIs (taken from their
// own OpenAPI documents) is called with hostile ids, bodies, query strings and headers, as the admin
// and without a credential.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, startTestController, type TestController } from './helpers.js';

let t: TestController;
let token: string;
const operations: { method: string; path: string }[] = [];

beforeAll(async () => {
  t = await startTestController({ env: { OVERLAY_ADMIN_USERNAME: 'admin', OVERLAY_ADMIN_PASSWORD: 'admin-password-1' } });
  const res = await t.inject({
    method: 'POST',
    url: '/edge/management/v1/authenticate?method=password',
    payload: { username: 'admin', password: 'admin-password-1' },
  });
  token = res.headers['overlay-session'] as string;
  for (const api of ['edge-client', 'edge-management']) {
    const base = api === 'edge-client' ? '/edge/client/v1' : '/edge/management/v1';
    const doc = json(await t.inject({ method: 'GET', url: `${base}/specs/${api}/spec` }));
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(item)) operations.push({ method: method.toUpperCase(), path });
    }
  }
});
afterAll(async () => {
  await t.close();
});

const IDS = ['x', "'; drop table identities; --", '%00', '..%2F..%2Fetc', 'a'.repeat(300), '%F0%9F%92%A9', '%ZZ'];
const BODIES: (string | undefined)[] = [
  undefined,
  '',
  'null',
  '[]',
  '"string"',
  '42',
  '{',
  '{"name": {"$gt": ""}}',
  JSON.stringify({ name: 'x'.repeat(5000), type: 'Nope', isAdmin: 'yes', tags: { a: { b: 1 } } }),
  JSON.stringify({ name: null, roleAttributes: 'x', permissions: ['root'], appData: [], durationMinutes: -1 }),
  JSON.stringify({ primary: { updb: { minPasswordLength: 'x' } }, secondary: 5, method: 'updb', identityId: 1 }),
  '\u0000\u0001\u0002',
];
const QUERIES = [
  'limit=-1',
  'limit=abc&offset=1e99',
  'filter=' + encodeURIComponent('name = "x" and (((((('),
  'filter=' + encodeURIComponent('anyOf(name) > datetime(nope)'),
  'filter=a&filter=b',
  'sort=' + encodeURIComponent('name asc desc'),
  'method=password&method=cert',
  'roleFilter=%ZZ',
  'filter=' + 'x'.repeat(5000),
];

describe('hostile input never produces a 5xx', () => {
  it('finds the operations of both APIs', () => {
    expect(operations.length).toBeGreaterThan(40);
  });

  it('every operation, hostile ids and bodies, with and without a credential', async () => {
    const failures: string[] = [];
    for (const op of operations) {
      for (const id of IDS) {
        const url = op.path.replace(/\{[^}]+\}/g, id);
        for (const body of BODIES) {
          for (const headers of [{ 'overlay-session': token }, {}]) {
            const res = await t.inject({
              method: op.method as 'GET',
              url,
              headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
              ...(body !== undefined ? { payload: body } : {}),
            });
            if (res.statusCode >= 500) failures.push(`${op.method} ${url} ${body?.slice(0, 40)} → ${res.statusCode} ${res.body.slice(0, 200)}`);
            else if (res.statusCode >= 400 && res.headers['content-type']?.toString().startsWith('application/json')) {
              if (!json(res).error?.requestId) failures.push(`${op.method} ${url} → ${res.statusCode} without the error envelope: ${res.body.slice(0, 200)}`);
            }
          }
        }
      }
    }
    expect(failures).toEqual([]);
  }, 120_000);

  it('hostile query strings on every list', async () => {
    const failures: string[] = [];
    for (const op of operations.filter((o) => o.method === 'GET' || o.method === 'POST')) {
      for (const q of QUERIES) {
        const url = `${op.path.replace(/\{[^}]+\}/g, 'x')}?${q}`;
        const res = await t.inject({ method: op.method as 'GET', url, headers: { 'overlay-session': token } });
        if (res.statusCode >= 500) failures.push(`${op.method} ${url} → ${res.statusCode} ${res.body.slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
  }, 60_000);

  it('hostile headers', async () => {
    for (const headers of [
      { 'overlay-session': 'x'.repeat(10_000) },
      { 'overlay-session': '' },
      { authorization: 'Bearer ' + 'y'.repeat(5000) },
      { authorization: 'Basic Zm9vOmJhcg==' },
      { 'content-type': 'application/json; charset=latin1' },
      { 'content-length': '99999999999' },
    ]) {
      const res = await t.inject({ method: 'GET', url: '/edge/client/v1/current-identity', headers });
      expect(res.statusCode, JSON.stringify(headers).slice(0, 80)).toBeLessThan(500);
    }
  });
});
