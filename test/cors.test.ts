// CORS on every API of a listener (behaviour.md §9): a browser's preflight is answered 204 without a
// credential, on paths that require one and on paths that exist under other methods only; actual
// answers, errors included, let any origin read them and expose the session and challenge headers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { ADMIN_ENV, asAdmin, call, CLIENT, expectMissingCredential, json, MGMT, startTestController, type TestController } from './helpers.js';

const ORIGIN = 'https://console.example.test';

let t: TestController;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
});

afterAll(async () => {
  await t.close();
});

function preflight(url: string, method: string, headers = 'content-type, overlay-session'): Promise<LightMyRequestResponse> {
  return t.inject({
    method: 'OPTIONS',
    url,
    headers: { origin: ORIGIN, 'access-control-request-method': method, 'access-control-request-headers': headers },
  });
}

const list = (value: unknown) => String(value).split(',').map((s) => s.trim().toLowerCase());

function expectPreflightAnswer(res: LightMyRequestResponse): void {
  expect(res.statusCode, res.body).toBe(204);
  expect(res.body).toBe('');
  expect(res.headers['access-control-allow-origin']).toBe('*');
  expect(res.headers['access-control-allow-credentials']).toBeUndefined();
  expect(list(res.headers['access-control-allow-methods'])).toEqual(expect.arrayContaining(['get', 'post', 'put', 'patch', 'delete']));
  expect(list(res.headers['access-control-allow-headers'])).toEqual(
    expect.arrayContaining(['content-type', 'accept', 'authorization', 'overlay-session', 'mfa-validation-code', 'session-token', 'overlay-token-issuer-id']),
  );
  expect(Number(res.headers['access-control-max-age'])).toBeGreaterThan(0);
}

function expectCorsAnswer(res: LightMyRequestResponse): void {
  expect(res.headers['access-control-allow-origin']).toBe('*');
  expect(list(res.headers['access-control-expose-headers'])).toEqual(
    expect.arrayContaining(['overlay-session', 'expiration-seconds', 'expires-at', 'totp-required', 'www-authenticate']),
  );
}

describe('preflight', () => {
  it.each([
    [`${MGMT}/identities`, 'GET'],
    [`${MGMT}/identities`, 'POST'],
    [`${MGMT}/identities/some-id`, 'PATCH'],
    [`${MGMT}/identities/some-id`, 'DELETE'],
    [`${MGMT}/authenticate?method=password`, 'POST'],
    [`${CLIENT}/services`, 'GET'],
    [`${CLIENT}/current-api-session`, 'DELETE'],
    [`${CLIENT}/current-identity/mfa`, 'DELETE'],
    ['/oidc/token', 'POST'],
    ['/oidc/.well-known/openid-configuration', 'GET'],
    ['/.well-known/openid-configuration', 'GET'],
  ])('%s (%s) is answered 204 without a credential', async (url, method) => {
    expectPreflightAnswer(await preflight(url, method));
  });

  it('is answered for the token endpoint with the headers a browser relying party sends', async () => {
    expectPreflightAnswer(await preflight('/oidc/token', 'POST', 'content-type'));
  });

  it('is answered before a bad credential is looked at', async () => {
    const res = await t.inject({
      method: 'OPTIONS',
      url: `${MGMT}/identities`,
      headers: { origin: ORIGIN, 'access-control-request-method': 'GET', 'overlay-session': 'not-a-session', authorization: 'Bearer nope' },
    });
    expectPreflightAnswer(res);
    expect(res.headers['www-authenticate']).toBeUndefined();
  });

  it('an OPTIONS request that is not a preflight is routed as before', async () => {
    const res = await t.inject({ method: 'OPTIONS', url: `${MGMT}/identities`, headers: { origin: ORIGIN } });
    expect(res.statusCode).toBe(405);
    expect(json(res).error.code).toBe('METHOD_NOT_ALLOWED');
    expectCorsAnswer(res);
  });
});

describe('cross-origin answers', () => {
  it('an authenticated GET can be read and exposes the session expiry headers', async () => {
    const admin = await asAdmin(t);
    const res = await call(t, 'GET', `${MGMT}/identities?filter=true`, { token: admin, headers: { origin: ORIGIN } });
    expect(res.statusCode, res.body).toBe(200);
    expectCorsAnswer(res);
    expect(res.headers['expiration-seconds']).toBeDefined();
  });

  it('a client API GET can be read', async () => {
    const admin = await asAdmin(t);
    const res = await call(t, 'GET', `${CLIENT}/current-api-session`, { token: admin, headers: { origin: ORIGIN } });
    expect(res.statusCode, res.body).toBe(200);
    expectCorsAnswer(res);
  });

  it('a 401 carries the challenge and lets the page read it', async () => {
    const res = await call(t, 'GET', `${MGMT}/identities`, { headers: { origin: ORIGIN } });
    expectMissingCredential(res);
    expectCorsAnswer(res);
  });

  it('a 404 and an OAuth error can be read too', async () => {
    expectCorsAnswer(await call(t, 'GET', `${MGMT}/no-such-thing`, { headers: { origin: ORIGIN } }));
    const token = await t.inject({
      method: 'POST',
      url: '/oidc/token',
      headers: { origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'grant_type=password',
    });
    expect(token.statusCode).toBe(401);
    expect(json(token).error).toBe('invalid_client');
    expectCorsAnswer(token);
  });

  it('the discovery document can be read', async () => {
    const res = await t.inject({ method: 'GET', url: '/.well-known/openid-configuration', headers: { origin: ORIGIN } });
    expect(res.statusCode).toBe(200);
    expectCorsAnswer(res);
  });

  it('answers without an Origin carry the same headers, so a cached answer serves every caller', async () => {
    const res = await t.inject({ method: 'GET', url: '/.well-known/openid-configuration' });
    expectCorsAnswer(res);
  });
});
