// TOTP in the OIDC flow over real HTTPS, openid-client (a certified relying party) as the client at
// the controller's injected clock: the TOTP factor a policy or an enrollment asks for, enrollment
// while the request waits, wrong, replayed and recovery codes, the attempt limit under parallel
// requests, the tokens and API session of such a login, and TOTP tokens on both Edge APIs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as client from 'openid-client';
import { createLocalJWKSet, jwtVerify } from 'jose';
import {
  ADMIN_ENV,
  asAdmin,
  authenticatorApp,
  call,
  CLIENT,
  createSigner,
  createIdentityWithPassword,
  expectError,
  expectMissingCredential,
  json,
  login,
  MGMT,
  startTestController,
  type TestController,
} from './helpers.js';
import { bearer, decodeJwt, httpsFetch } from './oidc-helpers.js';

const REDIRECT = 'http://127.0.0.1:43211/callback';
const BEARER_INVALID = 'Bearer realm="overlay-oidc" error="invalid" error_description="token is invalid"';

let t: TestController;
let port: number;
let ca: string;
let n = 0;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
  ca = t.app.core.pki.trustBundlePem;
});
afterAll(async () => {
  await t.close();
});

/** A code of the app that is none of `codes`. */
function wrongCode(...codes: string[]): string {
  return ['000000', '111111', '222222'].find((c) => !codes.includes(c))!;
}

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

/** One HTTPS request to the controller: JSON by default, form-encoded with `form`. */
async function send(method: string, path: string, body?: Record<string, string>, opts: { form?: boolean; headers?: Record<string, string> } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  const payload = body === undefined ? undefined : opts.form ? new URLSearchParams(body).toString() : JSON.stringify(body);
  if (payload !== undefined) {
    headers['content-type'] = opts.form ? 'application/x-www-form-urlencoded' : 'application/json';
    // Node sends a DELETE body unframed unless its length is given.
    headers['content-length'] = String(Buffer.byteLength(payload));
  }
  const res = await httpsFetch(ca)(`https://127.0.0.1:${port}${path}`, { method, headers, ...(payload !== undefined && { body: payload }) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) };
}

function expectApiError(res: Answer, status: number, code: string, field?: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.error.code).toBe(code);
  if (field !== undefined) expect(res.body.error.cause.field).toBe(field);
}

/** openid-client at the controller's clock (which the tests move). */
function discover(): Promise<client.Configuration> {
  const skew = Math.round((t.clock() - Date.now()) / 1000);
  return client.discovery(new URL(`https://127.0.0.1:${port}/oidc`), 'overlay', { [client.clockSkew]: skew }, client.None(), {
    [client.customFetch]: httpsFetch(ca) as client.CustomFetch,
  });
}

interface Flow {
  id: string;
  verifier: string;
  state: string;
  nonce: string;
}

/** An authorization request as openid-client makes it; answers its id from the login redirect. */
async function begin(): Promise<Flow> {
  const config = await discover();
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT,
    scope: 'openid offline_access',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });
  const started = await httpsFetch(ca)(url.href, { method: 'GET' });
  expect(started.status).toBe(302);
  const id = new URL(started.headers.get('location')!, url).searchParams.get('authRequestID')!;
  return { id, verifier, state, nonce };
}

function passwordLogin(flow: Flow, u: Person): Promise<Answer> {
  return send('POST', '/oidc/login/password', { authRequestId: flow.id, username: u.username, password: u.password });
}

/** The redirect of a complete login, exchanged by openid-client for tokens it has validated. */
async function finish(flow: Flow, answer: Answer) {
  expect(answer.status, JSON.stringify(answer.body)).toBe(302);
  const callback = new URL(answer.headers.get('location')!);
  expect(callback.searchParams.get('state')).toBe(flow.state);
  return client.authorizationCodeGrant(await discover(), callback, {
    pkceCodeVerifier: flow.verifier,
    expectedState: flow.state,
    expectedNonce: flow.nonce,
    idTokenExpected: true,
  });
}

interface Person {
  id: string;
  username: string;
  password: string;
}

async function person(opts: { authPolicyId?: string } = {}): Promise<Person> {
  const name = `oidc-totp-${++n}`;
  const admin = await asAdmin(t);
  const { id } = await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw`, ...opts });
  return { id, username: name, password: `${name}-pw` };
}

async function policy(secondary: { requireTotp: boolean; requireExtJwtSigner: string | null }): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/auth-policies`, {
    token: await asAdmin(t),
    body: {
      name: `oidc-totp-policy-${++n}`,
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

/** Enrolls and confirms TOTP through a legacy session; answers the app, the recovery codes and the session. */
async function enrolled(u: Person) {
  const token = await login(t, u.username, u.password, CLIENT);
  const started = json(await call(t, 'POST', `${CLIENT}/current-identity/mfa`, { token, body: {} })).data;
  const codeAt = authenticatorApp(started.provisioningUrl);
  expect((await call(t, 'POST', `${CLIENT}/current-identity/mfa/verify`, { token, body: { code: codeAt(t.clock()) } })).statusCode).toBe(200);
  return { codeAt, recoveryCodes: started.recoveryCodes as string[], legacyToken: token };
}

function totpQuery(isTotpEnrolled: boolean) {
  return { typeId: 'TOTP', provider: 'overlay', format: 'numeric', httpMethod: 'POST', httpUrl: './oidc/login/totp', minLength: 6, maxLength: 6, isTotpEnrolled };
}

async function authQueries(flow: Flow): Promise<unknown> {
  const res = await send('GET', `/oidc/login/auth-queries?id=${encodeURIComponent(flow.id)}`);
  expect(res.status).toBe(200);
  return res.body.authQueries;
}

describe('a policy requiring TOTP, the identity not enrolled', () => {
  it('asks for TOTP; enrolling while the request waits and confirming it completes the login with amr totp', async () => {
    const u = await person({ authPolicyId: await policy({ requireTotp: true, requireExtJwtSigner: null }) });
    const flow = await begin();
    const partial = await passwordLogin(flow, u);
    expect(partial.status).toBe(200);
    expect(partial.headers.get('totp-required')).toBe('true');
    expect(partial.headers.get('location')).toBeNull();
    expect(partial.body).toEqual({ authQueries: [totpQuery(false)] });
    // Without an enrollment no code can satisfy it.
    expectApiError(await send('POST', '/oidc/login/totp', { id: flow.id, code: '123456' }), 409, 'MFA_NOT_ENROLLED');

    const started = await send('POST', '/oidc/login/totp/enroll', { authRequestId: flow.id }, { form: true });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    expect(started.headers.get('cache-control')).toBe('no-store');
    expect(started.body).toMatchObject({ isVerified: false, id: expect.any(String), createdAt: expect.any(String) });
    expect(started.body.provisioningUrl).toMatch(new RegExp(`^otpauth://totp/${u.username}\\?issuer=overlay&secret=[A-Z2-7]{32}$`));
    expect(started.body.recoveryCodes).toHaveLength(20);
    expectApiError(await send('POST', '/oidc/login/totp/enroll', { authRequestId: flow.id }), 409, 'MFA_EXISTS');
    const codeAt = authenticatorApp(started.body.provisioningUrl);

    // A recovery code does not confirm an enrollment, nor does a wrong code: 400, the request waits on.
    const byRecovery = await send('POST', '/oidc/login/totp/enroll/verify', { authRequestId: flow.id, code: started.body.recoveryCodes[0] });
    expectApiError(byRecovery, 400, 'MFA_INVALID_TOKEN');
    expect(await authQueries(flow)).toEqual([totpQuery(false)]);
    expectApiError(await send('POST', '/oidc/login/totp/enroll/verify', { authRequestId: flow.id }), 400, 'COULD_NOT_VALIDATE', 'code');

    const verified = await send('POST', '/oidc/login/totp/enroll/verify', { authRequestId: flow.id, code: codeAt(t.clock()) });
    const tokens = await finish(flow, verified);
    expect(tokens.claims()!.amr).toEqual(['password', 'totp']);
    const access = decodeJwt(tokens.access_token).payload;
    expect(access.amr).toEqual(['password', 'totp']);

    // Its API session passed MFA when the code was exchanged.
    const session = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { headers: bearer(tokens.access_token) })).data;
    expect(session).toMatchObject({ id: access.ov_asid, isMfaRequired: true, isMfaComplete: true, authQueries: [] });
    expect((await t.app.core.sessions.load(access.ov_asid))!.mfaPassedAt).toBe(t.clock());
    expect((await call(t, 'GET', `${CLIENT}/services`, { headers: bearer(tokens.access_token) })).statusCode).toBe(200);
    // The identity is enrolled from now on.
    expect(json(await call(t, 'GET', `${MGMT}/identities/${u.id}`, { token: await asAdmin(t) })).data.isMfaEnabled).toBe(true);
    const next = await begin();
    expect((await passwordLogin(next, u)).body).toEqual({ authQueries: [totpQuery(true)] });
  });

  it('an abandoned enrollment is gone, the request waits on, and a new one confirms it', async () => {
    const u = await person({ authPolicyId: await policy({ requireTotp: true, requireExtJwtSigner: null }) });
    const flow = await begin();
    expect((await passwordLogin(flow, u)).status).toBe(200);
    const first = await send('POST', '/oidc/login/totp/enroll', { authRequestId: flow.id });
    expect(first.status).toBe(201);

    const abandoned = await send('DELETE', '/oidc/login/totp/enroll', { authRequestId: flow.id });
    expect(abandoned.status).toBe(200);
    expect(abandoned.headers.get('totp-required')).toBe('true');
    expect(abandoned.body).toEqual({ authQueries: [totpQuery(false)] });
    expect(await t.app.core.mfa.of(u.id)).toBeUndefined();
    expectApiError(await send('DELETE', '/oidc/login/totp/enroll', { authRequestId: flow.id }), 404, 'MFA_ENROLLMENT_NOT_STARTED');
    expectApiError(
      await send('POST', '/oidc/login/totp/enroll/verify', { authRequestId: flow.id, code: authenticatorApp(first.body.provisioningUrl)(t.clock()) }),
      404,
      'MFA_ENROLLMENT_NOT_STARTED',
    );

    const second = await send('POST', '/oidc/login/totp/enroll', { authRequestId: flow.id });
    expect(second.status).toBe(201);
    expect(second.body.provisioningUrl).not.toBe(first.body.provisioningUrl);
    // The abandoned secret is worth nothing.
    const stale = authenticatorApp(first.body.provisioningUrl)(t.clock());
    const fresh = authenticatorApp(second.body.provisioningUrl)(t.clock());
    if (stale !== fresh) expectApiError(await send('POST', '/oidc/login/totp/enroll/verify', { authRequestId: flow.id, code: stale }), 400, 'MFA_INVALID_TOKEN');
    const tokens = await finish(flow, await send('POST', '/oidc/login/totp/enroll/verify', { authRequestID: flow.id, code: fresh }, { form: true }));
    expect(tokens.claims()!.amr).toEqual(['password', 'totp']);
  });

  it('with an external JWT required too, TOTP done leaves that query outstanding', async () => {
    const signer = await createSigner(t, await asAdmin(t));
    const u = await person({ authPolicyId: await policy({ requireTotp: true, requireExtJwtSigner: signer }) });
    const flow = await begin();
    expect((await passwordLogin(flow, u)).body.authQueries.map((q: { typeId: string }) => q.typeId)).toEqual(['TOTP', 'EXT-JWT']);
    const started = await send('POST', '/oidc/login/totp/enroll', { authRequestId: flow.id });
    const done = await send('POST', '/oidc/login/totp/enroll/verify', { authRequestId: flow.id, code: authenticatorApp(started.body.provisioningUrl)(t.clock()) });
    expect(done.status).toBe(200);
    expect(done.headers.get('totp-required')).toBeNull();
    expect(done.body).toEqual({ authQueries: [expect.objectContaining({ typeId: 'EXT-JWT', id: signer })] });
    // TOTP is no longer outstanding: nothing more of it is taken.
    expectApiError(await send('POST', '/oidc/login/totp', { id: flow.id, code: '123456' }), 400, 'COULD_NOT_VALIDATE');
    expect(t.app.core.oidc.requests.get(flow.id)).toMatchObject({ status: 'partial', amr: ['password', 'totp'] });
  });
});

describe('an identity with a confirmed enrollment (default policy)', () => {
  it('must give TOTP; a wrong code is 400 and may be retried; a replayed code is refused', async () => {
    const u = await person();
    const { codeAt } = await enrolled(u);
    t.clock.advance(30_000);
    const flow = await begin();
    const partial = await passwordLogin(flow, u);
    expect(partial.status).toBe(200);
    expect(partial.headers.get('totp-required')).toBe('true');
    expect(partial.body).toEqual({ authQueries: [totpQuery(true)] });

    const code = codeAt(t.clock());
    const wrong = await send('POST', '/oidc/login/totp', { id: flow.id, code: wrongCode(code) });
    expectApiError(wrong, 400, 'MFA_INVALID_TOKEN', 'code');
    expect(await authQueries(flow)).toEqual([totpQuery(true)]);
    expectApiError(await send('POST', '/oidc/login/totp', { id: flow.id }), 400, 'COULD_NOT_VALIDATE', 'code');
    expectApiError(await send('POST', '/oidc/login/totp', { code }), 400, 'COULD_NOT_VALIDATE', 'id');
    expectApiError(await send('POST', '/oidc/login/totp', { id: flow.id, code: `${code}${' '.repeat(40)}` }), 400, 'COULD_NOT_VALIDATE', 'code');
    // Enrolled already: no enrollment mid-flow, and a confirmed one is not abandoned here.
    expectApiError(await send('POST', '/oidc/login/totp/enroll', { authRequestId: flow.id }), 409, 'MFA_EXISTS');
    expectApiError(await send('DELETE', '/oidc/login/totp/enroll', { authRequestId: flow.id }), 404, 'MFA_ENROLLMENT_NOT_STARTED');
    expect((await t.app.core.mfa.of(u.id))?.isVerified).toBe(true);

    const tokens = await finish(flow, await send('POST', '/oidc/login/totp', { id: flow.id, code }, { form: true }));
    expect(tokens.claims()!.amr).toEqual(['password', 'totp']);
    expect(decodeJwt(tokens.access_token).payload.amr).toEqual(['password', 'totp']);

    // The same code in another request: taken once only.
    const again = await begin();
    await passwordLogin(again, u);
    expectApiError(await send('POST', '/oidc/login/totp', { id: again.id, code }), 400, 'MFA_INVALID_TOKEN');
  });

  it('dates the MFA pass of its API session when the code was given, not when the code is exchanged', async () => {
    const u = await person();
    const { codeAt } = await enrolled(u);
    t.clock.advance(30_000);
    const flow = await begin();
    await passwordLogin(flow, u);
    const answer = await send('POST', '/oidc/login/totp', { id: flow.id, code: codeAt(t.clock()) });
    const givenAt = t.clock();
    // The client exchanges its code late in the code's minute: MFA posture checks time out from the code.
    t.clock.advance(50_000);
    const tokens = await finish(flow, answer);
    const asid = decodeJwt(tokens.access_token).payload.ov_asid as string;
    const session = await t.app.core.sessions.load(asid);
    expect([session!.isMfaComplete, session!.mfaPassedAt]).toEqual([true, givenAt]);
    const stored = await t.app.core.kernel.repo('api-sessions').get(t.app.core.store.db, asid);
    expect(stored!.mfaPassedAt).toBe(new Date(givenAt).toISOString());
  });

  it('the same code sent at once in two requests completes one of them', async () => {
    const u = await person();
    const { codeAt } = await enrolled(u);
    t.clock.advance(30_000);
    const [a, b] = await Promise.all([begin(), begin()]);
    await Promise.all([passwordLogin(a, u), passwordLogin(b, u)]);
    const code = codeAt(t.clock());
    const answers = await Promise.all([a, b].map((f) => send('POST', '/oidc/login/totp', { id: f.id, code })));
    expect(answers.map((r) => r.status).sort()).toEqual([302, 400]);
  });

  it('takes a recovery code once', async () => {
    const u = await person();
    const { recoveryCodes } = await enrolled(u);
    const flow = await begin();
    await passwordLogin(flow, u);
    const tokens = await finish(flow, await send('POST', '/oidc/login/totp', { authRequestId: flow.id, code: recoveryCodes[4]!.toLowerCase() }));
    expect(tokens.claims()!.amr).toEqual(['password', 'totp']);
    const session = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { headers: bearer(tokens.access_token) })).data;
    expect(session).toMatchObject({ isMfaRequired: true, isMfaComplete: true });

    const again = await begin();
    await passwordLogin(again, u);
    expectApiError(await send('POST', '/oidc/login/totp', { id: again.id, code: recoveryCodes[4]! }), 400, 'MFA_INVALID_TOKEN');
    expect(t.app.core.oidc.requests.get(again.id).status).toBe('partial');
  });

  it('allows 5 wrong codes per authorization request, even sent at once, then 429 until the window passes', async () => {
    const u = await person();
    const { codeAt } = await enrolled(u);
    t.clock.advance(30_000);
    const flow = await begin();
    await passwordLogin(flow, u);
    const wrong = wrongCode(codeAt(t.clock()), codeAt(t.clock() - 30_000), codeAt(t.clock() + 30_000));
    const answers = await Promise.all(Array.from({ length: 12 }, () => send('POST', '/oidc/login/totp', { id: flow.id, code: wrong })));
    expect(answers.filter((r) => r.status === 400)).toHaveLength(5);
    const refused = answers.filter((r) => r.status === 429);
    expect(refused).toHaveLength(7);
    expect(refused[0]!.body.error.code).toBe('SERVER_TOO_MANY_REQUESTS');
    expect(Number(refused[0]!.headers.get('retry-after'))).toBeGreaterThan(0);
    // The right code is refused too while the limit holds; the request still waits.
    expectApiError(await send('POST', '/oidc/login/totp', { id: flow.id, code: codeAt(t.clock()) }), 429, 'SERVER_TOO_MANY_REQUESTS');
    expect(t.app.core.oidc.requests.get(flow.id).status).toBe('partial');
    t.clock.advance(5 * 60_000);
    const tokens = await finish(flow, await send('POST', '/oidc/login/totp', { id: flow.id, code: codeAt(t.clock()) }));
    expect(tokens.claims()!.amr).toEqual(['password', 'totp']);
  });
});

describe('TOTP steps outside a partially authenticated request', () => {
  it('404 for an unknown request; 400 before the primary login and where TOTP is not outstanding', async () => {
    const steps = [
      ['POST', '/oidc/login/totp', { code: '123456' }],
      ['POST', '/oidc/login/totp/enroll', {}],
      ['POST', '/oidc/login/totp/enroll/verify', { code: '123456' }],
      ['DELETE', '/oidc/login/totp/enroll', {}],
    ] as const;
    const started = await begin();
    const extJwtOnly = await person({ authPolicyId: await policy({ requireTotp: false, requireExtJwtSigner: await createSigner(t, await asAdmin(t)) }) });
    const waiting = await begin();
    expect((await passwordLogin(waiting, extJwtOnly)).status).toBe(200);
    for (const [method, path, body] of steps) {
      expectApiError(await send(method, path, { ...body, authRequestId: 'no-such-request' }), 404, 'NOT_FOUND');
      expectApiError(await send(method, path, body), 400, 'COULD_NOT_VALIDATE', path === '/oidc/login/totp' ? 'id' : 'authRequestId');
      const early = await send(method, path, { ...body, authRequestId: started.id });
      expectApiError(early, 400, 'COULD_NOT_VALIDATE');
      expect(early.body.error.message).toBe('the authorization request is started; it cannot take this step');
      const notOutstanding = await send(method, path, { ...body, authRequestId: waiting.id });
      expectApiError(notOutstanding, 400, 'COULD_NOT_VALIDATE');
      expect(notOutstanding.body.error.message).toBe('TOTP is not outstanding for this authorization request');
    }
    // Nothing was enrolled for the identity whose request did not wait for TOTP.
    expect(await t.app.core.mfa.of(extJwtOnly.id)).toBeUndefined();
    // A complete request has made its code and is gone.
    const plain = await person();
    const done = await begin();
    expect((await passwordLogin(done, plain)).status).toBe(302);
    expectApiError(await send('POST', '/oidc/login/totp', { id: done.id, code: '123456' }), 404, 'NOT_FOUND');
  });

  it('the discovery document lists the TOTP endpoints', async () => {
    const doc = (await send('GET', '/oidc/.well-known/openid-configuration')).body;
    const issuer = `https://127.0.0.1:${port}/oidc`;
    expect(doc).toMatchObject({
      login_totp_endpoint: `${issuer}/login/totp`,
      login_totp_enroll_endpoint: `${issuer}/login/totp/enroll`,
      login_totp_enroll_verify_endpoint: `${issuer}/login/totp/enroll/verify`,
    });
  });
});

describe('POST /current-api-session/totp-token', () => {
  it('answers a signed TOTP token to a bearer caller after a live code, and records the MFA pass', async () => {
    const u = await person();
    const { codeAt, recoveryCodes, legacyToken } = await enrolled(u);
    t.clock.advance(30_000);
    const flow = await begin();
    await passwordLogin(flow, u);
    const tokens = await finish(flow, await send('POST', '/oidc/login/totp', { id: flow.id, code: codeAt(t.clock()) }));
    const access = decodeJwt(tokens.access_token).payload;
    const path = `${CLIENT}/current-api-session/totp-token`;

    expectMissingCredential(await call(t, 'POST', path, { body: { code: '123456' } }));
    expectError(await call(t, 'POST', path, { headers: bearer(tokens.access_token), body: {} }), 400, 'COULD_NOT_VALIDATE', 'code');
    // A legacy session has no access token to stand for.
    expectError(await call(t, 'POST', path, { token: legacyToken, body: { code: codeAt(t.clock()) } }), 400, 'INVALID_BACKING_TOKEN_TYPE');
    expectError(await call(t, 'POST', `${MGMT}/current-api-session/totp-token`, { token: legacyToken, body: { code: '123456' } }), 400, 'INVALID_BACKING_TOKEN_TYPE');
    // Live TOTP codes only: a wrong one, a recovery code and the code already taken are refused.
    expectError(await call(t, 'POST', path, { headers: bearer(tokens.access_token), body: { code: wrongCode(codeAt(t.clock())) } }), 401, 'MFA_INVALID_TOKEN');
    expectError(await call(t, 'POST', path, { headers: bearer(tokens.access_token), body: { code: recoveryCodes[0] } }), 401, 'MFA_INVALID_TOKEN');
    expectError(await call(t, 'POST', path, { headers: bearer(tokens.access_token), body: { code: codeAt(t.clock()) } }), 401, 'MFA_INVALID_TOKEN');

    t.clock.advance(60_000);
    const res = await call(t, 'POST', path, { headers: bearer(tokens.access_token), body: { code: codeAt(t.clock()) } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const { issuedAt, token } = json(res).data;
    const nowSeconds = Math.floor(t.clock() / 1000);
    expect(issuedAt).toBe(new Date(nowSeconds * 1000).toISOString());
    const jwks = createLocalJWKSet(t.app.core.oidc.keys.jwks() as Parameters<typeof createLocalJWKSet>[0]);
    const { payload, protectedHeader } = await jwtVerify(token, jwks, { issuer: access.iss, audience: 'overlay', currentDate: new Date(t.clock()) });
    expect(protectedHeader.kid).toBe(t.app.core.oidc.keys.current.kid);
    expect(payload).toEqual({
      iss: access.iss,
      sub: u.id,
      aud: access.aud,
      iat: nowSeconds,
      exp: nowSeconds + 1800,
      jti: expect.any(String),
      ov_asid: access.ov_asid,
      ov_t: 't',
    });
    expect(payload.jti).not.toBe(access.jti);
    // What MFA posture checks count from.
    const session = await t.app.core.sessions.load(access.ov_asid);
    expect([session!.isMfaComplete, session!.mfaPassedAt]).toEqual([true, t.clock()]);

    // It is no access token: refused as a bearer by the Edge APIs and by userinfo.
    const asBearer = await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(token) });
    expectError(asBearer, 401, 'UNAUTHORIZED');
    expect(asBearer.headers['www-authenticate']).toBe(BEARER_INVALID);
    expect((await call(t, 'GET', `${MGMT}/current-identity`, { headers: bearer(token) })).statusCode).toBe(401);
    expect((await send('GET', '/oidc/userinfo', undefined, { headers: bearer(token) })).status).toBe(401);

    // The Management API makes them too.
    t.clock.advance(30_000);
    const mgmt = await call(t, 'POST', `${MGMT}/current-api-session/totp-token`, { headers: bearer(tokens.access_token), body: { code: codeAt(t.clock()) } });
    expect(mgmt.statusCode, mgmt.body).toBe(200);
    expect(decodeJwt(json(mgmt).data.token).payload).toMatchObject({ ov_t: 't', sub: u.id, ov_asid: access.ov_asid });
  });

  it('409 MFA_NOT_ENROLLED for a bearer caller without a confirmed enrollment', async () => {
    const u = await person();
    const flow = await begin();
    const tokens = await finish(flow, await passwordLogin(flow, u));
    expect(tokens.claims()!.amr).toEqual(['password']);
    expectError(
      await call(t, 'POST', `${CLIENT}/current-api-session/totp-token`, { headers: bearer(tokens.access_token), body: { code: '123456' } }),
      409,
      'MFA_NOT_ENROLLED',
    );
    const session = await t.app.core.sessions.load(decodeJwt(tokens.access_token).payload.ov_asid);
    expect([session!.isMfaRequired, session!.isMfaComplete, session!.mfaPassedAt]).toEqual([false, false, null]);
  });
});
