import { gzipSync } from 'node:zlib';
// Every OIDC endpoint through inject(): the answers of each error, the authorization request's
// state machine, the token endpoint's grants and their refusals, keys, userinfo and end_session.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentityWithPassword,
  createSigner,
  expectError,
  json,
  MGMT,
  startTestController,
  type TestController,
} from './helpers.js';
import {
  authorizeQuery,
  bearer,
  decodeJwt,
  form,
  oidcLogin,
  pkce,
  postLogin,
  postToken,
  REDIRECT_URI,
  startAuthorization,
} from './oidc-helpers.js';

let t: TestController;
let admin: string;
let port: number;
let n = 0;

async function user(opts: { authPolicyId?: string } = {}): Promise<{ id: string; username: string; password: string }> {
  const name = `oidc-ep-${++n}`;
  admin = await asAdmin(t); // the tests move the clock: a fresh session each time
  const { id } = await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw`, ...opts });
  return { id, username: name, password: `${name}-pw` };
}

async function policy(secondary: { requireTotp: boolean; requireExtJwtSigner: string | null }): Promise<string> {
  admin = await asAdmin(t);
  const res = await call(t, 'POST', `${MGMT}/auth-policies`, {
    token: admin,
    body: {
      name: `oidc-policy-${++n}`,
      primary: {
        cert: { allowed: true, allowExpiredCerts: true },
        extJwt: { allowed: false, allowedSigners: null },
        updb: { allowed: true, maxAttempts: 0, lockoutDurationMinutes: 0, minPasswordLength: 5, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false },
      },
      secondary,
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  return json(res).data.id as string;
}

function authorize(query: string, headers: Record<string, string> = {}) {
  return t.inject({ method: 'GET', url: `/oidc/authorization?${query}`, headers });
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  port = Number(t.config.web[0]!.bindPoints[0]!.interface.split(':')[1]);
});
afterAll(async () => {
  await t.close();
});

describe('GET /oidc/authorization', () => {
  it('starts a request and redirects to the password login by default', async () => {
    const res = await authorize(authorizeQuery());
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toMatch(/^\/oidc\/login\/password\?authRequestID=[A-Za-z0-9_-]{43}$/);
  });

  it('the alias /oidc/authorize and POST work the same', async () => {
    expect((await t.inject({ method: 'GET', url: `/oidc/authorize?${authorizeQuery()}` })).statusCode).toBe(302);
    const posted = await t.inject({
      method: 'POST',
      url: '/oidc/authorization',
      payload: authorizeQuery(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(posted.statusCode).toBe(302);
  });

  it.each([
    ['password', '/oidc/login/password'],
    ['username', '/oidc/login/password'],
    ['cert', '/oidc/login/cert'],
    ['ext-jwt', '/oidc/login/ext-jwt'],
  ])('the method hint %s chooses the login endpoint', async (method, path) => {
    const res = await authorize(authorizeQuery({ method }));
    expect(res.statusCode).toBe(302);
    expect(String(res.headers.location).split('?')[0]).toBe(path);
  });

  it.each([
    ['an unknown client', { client_id: 'intruder' }, 'invalid_request'],
    ['no client', { client_id: undefined }, 'invalid_request'],
    ['an unlisted redirect URI', { redirect_uri: 'https://evil.example.com/cb' }, 'invalid_request'],
    ['a loopback redirect over https (not a default pattern)', { redirect_uri: 'https://127.0.0.1:8000/cb' }, 'invalid_request'],
    ['a redirect URI with user info', { redirect_uri: 'http://evil@127.0.0.1:8000/cb' }, 'invalid_request'],
    ['a redirect URI with a fragment', { redirect_uri: 'http://127.0.0.1:8000/cb#x' }, 'invalid_request'],
    ['no redirect URI', { redirect_uri: undefined }, 'invalid_request'],
    ['plain PKCE', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['no PKCE method', { code_challenge_method: undefined }, 'invalid_request'],
    ['no code challenge', { code_challenge: undefined }, 'invalid_request'],
    ['a malformed code challenge', { code_challenge: 'short' }, 'invalid_request'],
    ['response_type token', { response_type: 'token' }, 'unsupported_response_type'],
    ['a scope without openid', { scope: 'offline_access' }, 'invalid_scope'],
    ['an unknown method hint', { method: 'smoke-signals' }, 'invalid_request'],
  ])('refuses %s with 400 and never redirects', async (_what, change, error) => {
    const res = await authorize(authorizeQuery(change as Record<string, string | undefined>));
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
    expect(json(res)).toMatchObject({ error, error_description: expect.any(String) });
  });

  it('refuses a parameter given twice', async () => {
    const res = await authorize(`${authorizeQuery()}&client_id=overlay`);
    expect(res.statusCode).toBe(400);
    expect(json(res).error).toBe('invalid_request');
  });

  // It started an interactive login, which prompt=none forbids (OIDC Core §3.1.2.1).
  it.each(['none', 'none consent'])('prompt=%s redirects to the client with login_required, state and iss, starting nothing', async (prompt) => {
    const pending = t.app.core.oidc.requests.bytes;
    const res = await authorize(authorizeQuery({ prompt, state: 'silent-1' }));
    expect(res.statusCode).toBe(302);
    const location = new URL(String(res.headers.location));
    expect(`${location.origin}${location.pathname}`).toBe(REDIRECT_URI);
    expect(Object.fromEntries(location.searchParams)).toMatchObject({ error: 'login_required', state: 'silent-1', iss: expect.stringMatching(/\/oidc$/) });
    expect(t.app.core.oidc.requests.bytes).toBe(pending);
    // Other prompts take the login as usual.
    expect(String((await authorize(authorizeQuery({ prompt: 'login' }))).headers.location)).toMatch(/^\/oidc\/login\/password\?/);
  });
});

describe('login and the state machine', () => {
  it('Started → Complete: a valid password login redirects to redirect_uri with code, state and iss', async () => {
    const u = await user();
    const { id } = await startAuthorization(t, { state: 'the-state' });
    const res = await postLogin(t, id, u.username, u.password);
    expect(res.statusCode).toBe(302);
    const location = new URL(String(res.headers.location));
    expect(location.origin + location.pathname).toBe(REDIRECT_URI);
    expect(location.searchParams.get('state')).toBe('the-state');
    expect(location.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(location.searchParams.get('iss')).toBe(`https://127.0.0.1:${port}/oidc`);
    expect(res.headers['cache-control']).toBe('no-store');
    // The request is over: its id answers nothing any more.
    expectError(await t.inject({ method: 'GET', url: `/oidc/login/auth-queries?id=${id}` }), 404, 'NOT_FOUND');
  });

  it('a form body and the /oidc/login/username alias work the same', async () => {
    const u = await user();
    const { id } = await startAuthorization(t);
    const res = await postLogin(t, id, u.username, u.password, { path: 'username', asForm: true });
    expect(res.statusCode).toBe(302);
    expect(new URL(String(res.headers.location)).searchParams.get('code')).toBeTruthy();
  });

  it('Started → Started: bad credentials answer 401 INVALID_AUTH and the login may be retried', async () => {
    const u = await user();
    const { id } = await startAuthorization(t);
    expectError(await postLogin(t, id, u.username, 'wrong-password'), 401, 'INVALID_AUTH');
    expectError(await postLogin(t, id, 'nobody-here', 'wrong-password'), 401, 'INVALID_AUTH');
    const queries = await t.inject({ method: 'GET', url: `/oidc/login/auth-queries?id=${id}` });
    expect(json(queries)).toEqual({ authQueries: [] });
    expect((await postLogin(t, id, u.username, u.password)).statusCode).toBe(302);
  });

  it('Started → Partially authenticated with secondary.requireTotp: 200 with the TOTP query and totp-required', async () => {
    const u = await user({ authPolicyId: await policy({ requireTotp: true, requireExtJwtSigner: null }) });
    const { id } = await startAuthorization(t);
    const res = await postLogin(t, id, u.username, u.password);
    expect(res.statusCode).toBe(200);
    expect(res.headers['totp-required']).toBe('true');
    expect(res.headers.location).toBeUndefined();
    const totp = {
      typeId: 'TOTP',
      provider: 'overlay',
      format: 'numeric',
      httpMethod: 'POST',
      httpUrl: './oidc/login/totp',
      minLength: 6,
      maxLength: 6,
      isTotpEnrolled: false,
    };
    expect(json(res)).toEqual({ authQueries: [totp] });
    // auth-queries answers the same; the request stays partial through primary retries.
    const queries = await t.inject({ method: 'GET', url: `/oidc/login/auth-queries?id=${id}` });
    expect(queries.headers['totp-required']).toBe('true');
    expect(json(queries)).toEqual({ authQueries: [totp] });
    expectError(await postLogin(t, id, u.username, 'wrong-password'), 401, 'INVALID_AUTH');
    const again = await postLogin(t, id, u.username, u.password);
    expect(again.statusCode).toBe(200);
    expect(json(again)).toEqual({ authQueries: [totp] });
    // No token exists while partially authenticated: no code was ever made.
    expect(t.app.core.oidc.requests.get(id).status).toBe('partial');
  });

  it('an external-JWT signer required by the policy is an outstanding query', async () => {
    const signer = await createSigner(t, await asAdmin(t));
    const u = await user({ authPolicyId: await policy({ requireTotp: false, requireExtJwtSigner: signer }) });
    const { id } = await startAuthorization(t);
    const res = await postLogin(t, id, u.username, u.password);
    expect(res.statusCode).toBe(200);
    expect(res.headers['totp-required']).toBeUndefined();
    expect(json(res).authQueries).toEqual([expect.objectContaining({ typeId: 'EXT-JWT', id: signer })]);
  });

  it('a satisfied factor completes the request (the step TOTP plugs into)', async () => {
    const u = await user({ authPolicyId: await policy({ requireTotp: true, requireExtJwtSigner: null }) });
    const { verifier, challenge } = pkce();
    const { id } = await startAuthorization(t, { challenge });
    expect((await postLogin(t, id, u.username, u.password)).statusCode).toBe(200);
    const pending = t.app.core.oidc.requests.get(id);
    const request = t.app.core.oidc.requests.satisfy(pending, 'totp', 'totp', pending.primary);
    expect(request.status).toBe('complete');
    const code = new URL(t.app.core.oidc.complete(request, `https://127.0.0.1:${port}/oidc`)).searchParams.get('code')!;
    const tokens = json(await postToken(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: 'overlay', code_verifier: verifier }));
    expect(decodeJwt(tokens.access_token).payload.amr).toEqual(['password', 'totp']);
    const session = await call(t, 'GET', `${CLIENT}/current-api-session`, { headers: bearer(tokens.access_token) });
    expect(json(session).data).toMatchObject({ isMfaRequired: true, isMfaComplete: true });
  });

  it('login errors: unknown request 404, missing fields 400, a disabled identity 401', async () => {
    const u = await user();
    expectError(await postLogin(t, 'no-such-request', u.username, u.password), 404, 'NOT_FOUND');
    const { id } = await startAuthorization(t);
    expectError(await t.inject({ method: 'POST', url: '/oidc/login/password', payload: { authRequestId: id, username: u.username } }), 400, 'COULD_NOT_VALIDATE', 'password');
    expectError(await t.inject({ method: 'POST', url: '/oidc/login/password', payload: { username: u.username, password: 'x' } }), 400, 'COULD_NOT_VALIDATE', 'authRequestId');
    expectError(await t.inject({ method: 'POST', url: '/oidc/login/password', payload: { authRequestId: id, username: ['a'], password: 'x' } }), 400, 'COULD_NOT_VALIDATE', 'username');
    expect((await call(t, 'POST', `${MGMT}/identities/${u.id}/disable`, { token: admin, body: { durationMinutes: 0 } })).statusCode).toBe(200);
    expectError(await postLogin(t, id, u.username, u.password), 401, 'INVALID_AUTH');
  });

  it('an expired request (10 minutes) is unknown', async () => {
    const u = await user();
    const { id } = await startAuthorization(t);
    t.clock.advance(10 * 60_000);
    expectError(await postLogin(t, id, u.username, u.password), 404, 'NOT_FOUND');
  });

  it('cert and ext-jwt logins without their credential: 401 INVALID_AUTH', async () => {
    const { id } = await startAuthorization(t);
    expectError(await t.inject({ method: 'POST', url: '/oidc/login/cert', payload: { authRequestId: id } }), 401, 'INVALID_AUTH');
    expectError(await t.inject({ method: 'POST', url: '/oidc/login/ext-jwt', payload: { authRequestId: id }, headers: bearer('a.b.c') }), 401, 'INVALID_AUTH');
  });

  it('GET /oidc/login/password without credentials answers the login form of the request', async () => {
    const { id } = await startAuthorization(t);
    const res = await t.inject({ method: 'GET', url: `/oidc/login/password?authRequestID=${id}` });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['content-security-policy']).toContain("default-src 'none'");
    expect(res.body).toContain(`name="authRequestId" value="${id}"`);
    expectError(await t.inject({ method: 'GET', url: '/oidc/login/password?authRequestID=unknown' }), 404, 'NOT_FOUND');
  });

  it('a password in the URL is refused, never tried: GET and POST; the body wins over the query', async () => {
    const u = await user();
    const { id } = await startAuthorization(t);
    const inUrl = `/oidc/login/password?authRequestID=${id}&username=${u.username}&password=${encodeURIComponent(u.password)}`;
    for (const method of ['GET', 'POST'] as const) {
      const res = await t.inject({ method, url: inUrl, ...(method === 'POST' ? { payload: { authRequestId: id } } : {}) });
      expectError(res, 400, 'COULD_NOT_VALIDATE', 'password');
      expect(res.headers.location).toBeUndefined();
    }
    // A username alone in the URL of a GET: the form, not a login.
    const form = await t.inject({ method: 'GET', url: `/oidc/login/password?authRequestID=${id}&username=${u.username}` });
    expect(form.statusCode).toBe(200);
    expect(form.headers['content-type']).toMatch(/^text\/html/);
    // The request is still open, and a form post's own username is the one tried.
    const res = await t.inject({
      method: 'POST',
      url: `/oidc/login/password?authRequestID=${id}&username=nobody-at-all`,
      payload: { authRequestId: id, username: u.username, password: u.password },
    });
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toMatch(/[?&]code=/);
  });

  it('failed logins are throttled: 429 with Retry-After after more than 20 in 10 s from one address', async () => {
    const { id } = await startAuthorization(t);
    let last;
    for (let i = 0; i < 22; i++) last = await postLogin(t, id, `nobody-${i}`, 'wrong-password', { remoteAddress: '10.9.9.9' });
    expectError(last!, 429, 'SERVER_TOO_MANY_REQUESTS');
    expect(Number(last!.headers['retry-after'])).toBeGreaterThan(0);
    t.clock.advance(11_000);
  });

  it('auth-queries needs an id', async () => {
    expectError(await t.inject({ method: 'GET', url: '/oidc/login/auth-queries' }), 400, 'COULD_NOT_VALIDATE', 'id');
  });
});

describe('POST /oidc/token', () => {
  async function codeFor(scope = 'openid offline_access') {
    const u = await user();
    const { verifier, challenge } = pkce();
    const { id } = await startAuthorization(t, { challenge, scope });
    const login = await postLogin(t, id, u.username, u.password);
    return { u, verifier, code: new URL(String(login.headers.location)).searchParams.get('code')! };
  }
  const grant = (code: string, verifier: string, extra: Record<string, string> = {}) => ({
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT_URI,
    client_id: 'overlay',
    code_verifier: verifier,
    ...extra,
  });

  it('answers the tokens with Cache-Control: no-store', async () => {
    const { verifier, code } = await codeFor();
    const res = await postToken(t, grant(code, verifier));
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(Object.keys(json(res)).sort()).toEqual(['access_token', 'expires_in', 'id_token', 'refresh_token', 'scope', 'token_type']);
    expect(json(res)).toMatchObject({ token_type: 'Bearer', expires_in: 1800, scope: 'openid offline_access' });
  });

  // behaviour.md §1: 413 for every body over 1 MiB; the token endpoint says it as an OAuth error.
  it('a body over 1 MiB is 413 with an OAuth invalid_request and Connection: close', async () => {
    const res = await t.inject({
      method: 'POST',
      url: '/oidc/token',
      payload: `grant_type=refresh_token&refresh_token=${'x'.repeat(1024 * 1024)}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.statusCode).toBe(413);
    expect(json(res)).toMatchObject({ error: 'invalid_request' });
    expect(res.headers.connection).toBe('close');
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('a body in a content coding is 415 with an OAuth invalid_request and Accept-Encoding: identity', async () => {
    const res = await t.inject({
      method: 'POST',
      url: '/oidc/token',
      payload: gzipSync('grant_type=refresh_token&refresh_token=x'),
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'gzip' },
    });
    expect(res.statusCode).toBe(415);
    expect(json(res)).toMatchObject({ error: 'invalid_request' });
    expect(res.headers['accept-encoding']).toBe('identity');
  });

  /** A code grant at `url` whose client is named by HTTP Basic `credentials` (id:secret), not in the body. */
  const withBasicClient = async (url: string, credentials: string) => {
    const { verifier, code } = await codeFor();
    const { client_id: _omit, ...rest } = grant(code, verifier);
    return t.inject({
      method: 'POST',
      url,
      payload: form(rest),
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(credentials).toString('base64')}` },
    });
  };

  it('the alias /oidc/oauth/token and a public client in HTTP Basic work the same', async () => {
    const res = await withBasicClient('/oidc/oauth/token', 'overlay:');
    expect(res.statusCode, res.body).toBe(200);
  });

  // Once a bare 500: decoding the malformed id threw.
  it.each(['%zz:', 'overlay:%zz', '%E0%A4%A:'])('HTTP Basic credentials with malformed percent-encoding (%s): 401 invalid_client', async (credentials) => {
    const res = await withBasicClient('/oidc/token', credentials);
    expect(res.statusCode, res.body).toBe(401);
    expect(json(res)).toMatchObject({ error: 'invalid_client' });
    expect(res.headers['www-authenticate']).toBe('Basic realm="overlay-oidc"');
  });

  it.each([
    ['a JSON body', 'json', 400, 'invalid_request'],
    ['no grant_type', { grant_type: undefined }, 400, 'invalid_request'],
    ['an unsupported grant type', { grant_type: 'password' }, 400, 'unsupported_grant_type'],
    ['an unknown client', { client_id: 'intruder' }, 401, 'invalid_client'],
    ['no client', { client_id: undefined }, 401, 'invalid_client'],
    ['a client secret', { client_secret: 'guess' }, 401, 'invalid_client'],
    ['no code', { code: undefined }, 400, 'invalid_request'],
    ['no verifier', { code_verifier: undefined }, 400, 'invalid_request'],
    ['an unknown code', { code: 'x'.repeat(43) }, 400, 'invalid_grant'],
    ['another redirect_uri', { redirect_uri: 'http://127.0.0.1:8765/other' }, 400, 'invalid_grant'],
    ['a wrong verifier', { code_verifier: 'v'.repeat(43) }, 400, 'invalid_grant'],
    ['a malformed verifier', { code_verifier: 'short' }, 400, 'invalid_grant'],
  ])('refuses %s', async (_what, change, status, error) => {
    const { verifier, code } = await codeFor();
    const values: Record<string, string | undefined> = { ...grant(code, verifier), ...(typeof change === 'object' ? change : {}) };
    for (const [k, v] of Object.entries(values)) if (v === undefined) delete values[k];
    const res =
      change === 'json'
        ? await t.inject({ method: 'POST', url: '/oidc/token', payload: values })
        : await postToken(t, values as Record<string, string>);
    expect(res.statusCode, res.body).toBe(status);
    expect(json(res)).toEqual({ error, error_description: expect.any(String) });
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('a code expires after 60 s', async () => {
    const { verifier, code } = await codeFor();
    t.clock.advance(60_000);
    expect(json(await postToken(t, grant(code, verifier))).error).toBe('invalid_grant');
  });

  it('a reused code is refused and revokes what its first use issued', async () => {
    const { verifier, code } = await codeFor();
    const first = json(await postToken(t, grant(code, verifier)));
    const again = await postToken(t, grant(code, verifier));
    expect(json(again).error).toBe('invalid_grant');
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(first.access_token) })).statusCode).toBe(401);
    expect(json(await postToken(t, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: 'overlay' })).error).toBe('invalid_grant');
  });

  it('without offline_access: no refresh token', async () => {
    const { verifier, code } = await codeFor('openid');
    const body = json(await postToken(t, grant(code, verifier)));
    expect(body.refresh_token).toBeUndefined();
    expect(body.scope).toBe('openid');
  });

  it('refresh: rotated, scope may narrow but not widen, unknown and expired tokens refused', async () => {
    const { verifier, code } = await codeFor();
    const first = json(await postToken(t, grant(code, verifier)));
    const narrowed = await postToken(t, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: 'overlay', scope: 'openid' });
    expect(narrowed.statusCode).toBe(200);
    expect(json(narrowed).scope).toBe('openid');
    expect(narrowed.headers['cache-control']).toBe('no-store');
    const wider = await postToken(t, { grant_type: 'refresh_token', refresh_token: json(narrowed).refresh_token, client_id: 'overlay', scope: 'openid offline_access profile' });
    expect(json(wider).error).toBe('invalid_scope');
    expect(json(await postToken(t, { grant_type: 'refresh_token', client_id: 'overlay' })).error).toBe('invalid_request');
    expect(json(await postToken(t, { grant_type: 'refresh_token', refresh_token: 'nonsense', client_id: 'overlay' })).error).toBe('invalid_grant');
    // 24 h later the latest refresh token has expired.
    t.clock.advance(24 * 3_600_000);
    expect(json(await postToken(t, { grant_type: 'refresh_token', refresh_token: json(narrowed).refresh_token, client_id: 'overlay' })).error).toBe('invalid_grant');
  });

  it('two uses of one refresh token at once: one rotates, the other is reuse and revokes the grant', async () => {
    const { verifier, code } = await codeFor();
    const first = json(await postToken(t, grant(code, verifier)));
    const body = { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: 'overlay' };
    const answers = await Promise.all([postToken(t, body), postToken(t, body)]);
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 400]);
    const winner = json(answers.find((a) => a.statusCode === 200)!);
    expect(json(answers.find((a) => a.statusCode === 400)!).error).toBe('invalid_grant');
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(winner.access_token) })).statusCode).toBe(401);
    expect(json(await postToken(t, { ...body, refresh_token: winner.refresh_token })).error).toBe('invalid_grant');
  });

  it('refresh tokens not held in memory (as after a restart) are read from the store, reuse included', async () => {
    const { verifier, code } = await codeFor();
    const first = json(await postToken(t, grant(code, verifier)));
    const forget = () => (t.app.core.oidc.grants as unknown as { remembered: Map<string, unknown> }).remembered.clear();
    forget();
    const second = await postToken(t, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: 'overlay' });
    expect(second.statusCode, second.body).toBe(200);
    forget();
    expect(json(await postToken(t, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: 'overlay' })).error).toBe('invalid_grant');
    expect(json(await postToken(t, { grant_type: 'refresh_token', refresh_token: json(second).refresh_token, client_id: 'overlay' })).error).toBe('invalid_grant');
  });

  it('refresh keeps the API session alive past its idle timeout while the grant lives', async () => {
    const { verifier, code } = await codeFor();
    const first = json(await postToken(t, grant(code, verifier)));
    const asid = decodeJwt(first.access_token).payload.ov_asid;
    t.clock.advance(2 * 3_600_000); // far past the 30m idle timeout
    await t.app.core.sessions.sweep();
    expect((await call(t, 'GET', `${MGMT}/api-sessions/${asid}`, { token: await asAdmin(t) })).statusCode).toBe(200);
    const next = await postToken(t, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: 'overlay' });
    expect(next.statusCode, next.body).toBe(200);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(json(next).access_token) })).statusCode).toBe(200);
  });

  it('without a grant, the API session ends with its idle timeout and its token with it', async () => {
    const { verifier, code } = await codeFor('openid');
    const tokens = json(await postToken(t, grant(code, verifier)));
    t.clock.advance(31 * 60_000);
    await t.app.core.sessions.sweep();
    const res = await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(tokens.access_token) });
    expect(res.statusCode).toBe(401);
  });
});

describe('GET /oidc/keys', () => {
  it('publishes the current key with its kid, and the previous one after a rotation', async () => {
    const before = json(await t.inject({ method: 'GET', url: '/oidc/keys' }));
    expect(before.keys).toHaveLength(1);
    expect(before.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig', kid: t.app.core.oidc.keys.current.kid });
    expect(before.keys[0].d).toBeUndefined();

    const u = await user();
    const old = await oidcLogin(t, u.username, u.password);
    await t.app.core.oidc.keys.rotate();
    const after = json(await t.inject({ method: 'GET', url: '/oidc/keys' }));
    expect(after.keys.map((k: { kid: string }) => k.kid)).toEqual([t.app.core.oidc.keys.current.kid, before.keys[0].kid]);
    // A token of the previous key still validates; new tokens carry the new kid.
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(old.access_token) })).statusCode).toBe(200);
    const fresh = await oidcLogin(t, u.username, u.password);
    expect(decodeJwt(fresh.access_token).header.kid).toBe(t.app.core.oidc.keys.current.kid);
    // A second rotation drops the first key: its tokens stop validating.
    await t.app.core.oidc.keys.rotate();
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(old.access_token) })).statusCode).toBe(401);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(fresh.access_token) })).statusCode).toBe(200);
  });
});

describe('/oidc/userinfo', () => {
  it('answers sub, name, ov_ia and ov_eid', async () => {
    const u = await user();
    expect((await call(t, 'PATCH', `${MGMT}/identities/${u.id}`, { token: admin, body: { externalId: `ext-${u.id}` } })).statusCode).toBe(200);
    const tokens = await oidcLogin(t, u.username, u.password);
    const res = await t.inject({ method: 'GET', url: '/oidc/userinfo', headers: bearer(tokens.access_token) });
    expect(res.statusCode).toBe(200);
    expect(json(res)).toEqual({ sub: u.id, name: u.username, ov_ia: false, ov_eid: `ext-${u.id}` });
  });

  it('without a token: 401 with the missing bearer challenge; a bad token: invalid', async () => {
    const missing = await t.inject({ method: 'GET', url: '/oidc/userinfo' });
    expectError(missing, 401, 'UNAUTHORIZED');
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="overlay-oidc" error="missing" error_description="no matching token was provided"');
    const bad = await t.inject({ method: 'GET', url: '/oidc/userinfo', headers: bearer('x.y.z') });
    expectError(bad, 401, 'UNAUTHORIZED');
    expect(bad.headers['www-authenticate']).toBe('Bearer realm="overlay-oidc" error="invalid" error_description="token is invalid"');
  });
});

describe('/oidc/end_session', () => {
  it('with the bearer and no redirect: 200, the session is gone', async () => {
    const u = await user();
    const tokens = await oidcLogin(t, u.username, u.password);
    const res = await t.inject({ method: 'POST', url: '/oidc/end_session', headers: bearer(tokens.access_token) });
    expect(res.statusCode).toBe(200);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(tokens.access_token) })).statusCode).toBe(401);
  });

  it('a refused bearer is an OAuth invalid_request naming why, with no challenge', async () => {
    const res = await t.inject({ method: 'POST', url: '/oidc/end_session', headers: bearer('x.y.z') });
    expect(res.statusCode).toBe(400);
    expect(json(res)).toEqual({ error: 'invalid_request', error_description: 'the bearer token is not accepted: the token is not a JWT' });
    expect(res.headers['www-authenticate']).toBeUndefined();
  });

  it('refuses an unlisted post_logout_redirect_uri without revoking anything', async () => {
    const u = await user();
    const tokens = await oidcLogin(t, u.username, u.password);
    const res = await t.inject({
      method: 'GET',
      url: `/oidc/end_session?${form({ id_token_hint: tokens.id_token, post_logout_redirect_uri: 'https://evil.example.com/' })}`,
    });
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
    expect(json(res).error).toBe('invalid_request');
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(tokens.access_token) })).statusCode).toBe(200);
  });

  it('needs an id_token_hint or a bearer; a hint must be an ID token of this provider', async () => {
    expect(json(await t.inject({ method: 'GET', url: '/oidc/end_session' })).error).toBe('invalid_request');
    const u = await user();
    const tokens = await oidcLogin(t, u.username, u.password);
    for (const hint of ['not-a-jwt', tokens.access_token, `${tokens.id_token.slice(0, -4)}AAAA`]) {
      const res = await t.inject({ method: 'GET', url: `/oidc/end_session?${form({ id_token_hint: hint })}` });
      expect(res.statusCode).toBe(400);
      expect(json(res).error).toBe('invalid_request');
    }
  });
});

describe('issuer', () => {
  it('follows the Host the client used when it names this controller, else the advertised address', async () => {
    const issuerAt = async (host: string) => json(await t.inject({ method: 'GET', url: '/.well-known/openid-configuration', headers: { host } })).issuer;
    expect(await issuerAt(`localhost:${port}`)).toBe(`https://localhost:${port}/oidc`);
    expect(await issuerAt(`127.0.0.1:${port}`)).toBe(`https://127.0.0.1:${port}/oidc`);
    expect(await issuerAt(`[::1]:${port}`)).toBe(`https://[::1]:${port}/oidc`);
    expect(await issuerAt(`evil.example.com:${port}`)).toBe(`https://127.0.0.1:${port}/oidc`);
    expect(await issuerAt('localhost:1')).toBe(`https://127.0.0.1:${port}/oidc`);
  });

  it('tokens carry the issuer of the token request’s address', async () => {
    const u = await user();
    const { verifier, challenge } = pkce();
    const { id } = await startAuthorization(t, { challenge });
    const login = await t.inject({ method: 'POST', url: '/oidc/login/password', payload: { authRequestId: id, username: u.username, password: u.password }, headers: { host: `localhost:${port}` } });
    expect(new URL(String(login.headers.location)).searchParams.get('iss')).toBe(`https://localhost:${port}/oidc`);
    const code = new URL(String(login.headers.location)).searchParams.get('code')!;
    const res = await postToken(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: 'overlay', code_verifier: verifier }, { host: `localhost:${port}` });
    const tokens = json(res);
    expect(decodeJwt(tokens.access_token).payload.iss).toBe(`https://localhost:${port}/oidc`);
    expect(decodeJwt(tokens.access_token).payload.aud).toEqual(['overlay', `https://localhost:${port}`]);
    expect(decodeJwt(tokens.id_token).payload.iss).toBe(`https://localhost:${port}/oidc`);
  });
});

describe('informational', () => {
  it('the version record lists the OIDC API and the capabilities OIDC_AUTH', async () => {
    const version = json(await t.inject({ method: 'GET', url: `${CLIENT}/version` })).data;
    expect(version.apiVersions['edge-oidc']).toEqual({ v1: { path: '/oidc', version: 'v1', apiBaseUrls: [`https://127.0.0.1:${port}/oidc`] } });
    expect(version.capabilities).toContain('OIDC_AUTH');
  });

  it('an unknown OIDC path is 404 in the error envelope', async () => {
    expectError(await t.inject({ method: 'GET', url: '/oidc/nothing-here' }), 404, 'NOT_FOUND');
  });
});

describe('redirect URIs from the controller settings', () => {
  it('a pattern of the global setting is allowed from the next authorization on, and gone once removed', async () => {
    const uri = 'https://app.example.com/auth/callback';
    const refused = await authorize(authorizeQuery({ redirect_uri: uri }));
    expect(refused.statusCode).toBe(400);
    admin = await asAdmin(t);
    const created = await call(t, 'POST', `${MGMT}/controller-settings`, {
      token: admin,
      body: { controllerId: 'global', oidc: { redirectUris: ['https://app.example.com/auth/callback'] } },
    });
    expect(created.statusCode, created.body).toBe(201);
    await t.app.core.oidcSettings.load(); // the change feed reloads it in the background; wait for it here
    const allowed = await authorize(authorizeQuery({ redirect_uri: uri }));
    expect(allowed.statusCode, allowed.body).toBe(302);
    expect(allowed.headers.location).toMatch(/\/oidc\/login\/password\?authRequestID=/);
    expect((await call(t, 'DELETE', `${MGMT}/controller-settings/global`, { token: admin })).statusCode).toBe(200);
    await t.app.core.oidcSettings.load();
    expect((await authorize(authorizeQuery({ redirect_uri: uri }))).statusCode).toBe(400);
  });
});
