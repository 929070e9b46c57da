// The OIDC provider over real HTTPS with openid-client (a certified relying party) as the client:
// discovery, the code flow with PKCE, ID token validation (signature included), both Edge APIs
// with the access token, userinfo, refresh with reuse detection, end_session, and the attacks.
import { request as httpsRequest } from 'node:https';
import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as client from 'openid-client';
import { SignJWT, createLocalJWKSet, importJWK, jwtVerify } from 'jose';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentityWithPassword,
  json,
  MGMT,
  networkIssuer,
  testCertificate,
  startTestController,
  testClock,
  type TestController,
} from './helpers.js';
import { decodeJwt, httpsFetch } from './oidc-helpers.js';

const REDIRECT = 'http://127.0.0.1:43210/callback';
const BEARER_INVALID = 'Bearer realm="overlay-oidc" error="invalid" error_description="token is invalid"';
const BEARER_EXPIRED = 'Bearer realm="overlay-oidc" error="expired" error_description="token expired"';

let t: TestController;
let port: number;
let ca: string;
let admin: string;
let user: { id: string; username: string; password: string };

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTPS request to the controller, verified against its CA. */
function https(
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: string; host?: string; client?: { certPem: string; keyPem: string } } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: opts.host ?? '127.0.0.1',
        port,
        path,
        method,
        headers: opts.headers,
        ca,
        agent: false,
        ...(opts.client && { cert: opts.client.certPem, key: opts.client.keyPem }),
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

async function discover(host = '127.0.0.1', clientId = 'overlay'): Promise<client.Configuration> {
  const config = await client.discovery(new URL(`https://${host}:${port}/oidc`), clientId, undefined, client.None(), {
    [client.customFetch]: httpsFetch(ca) as client.CustomFetch,
  });
  client.enableNonRepudiationChecks(config);
  return config;
}

interface Flow {
  callback: URL;
  verifier: string;
  state: string;
  nonce: string;
}

/** Authorization request, then the password login; answers the callback URL the login redirects to. */
async function authorize(config: client.Configuration, username: string, password: string, scope = 'openid offline_access'): Promise<Flow> {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT,
    scope,
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });
  const fetcher = httpsFetch(ca);
  const started = await fetcher(url.href, { method: 'GET' });
  expect(started.status).toBe(302);
  const loginUrl = new URL(started.headers.get('location')!, url);
  expect(loginUrl.pathname).toBe('/oidc/login/password');
  const id = loginUrl.searchParams.get('authRequestID')!;
  const login = await fetcher(new URL('/oidc/login/password', url).href, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ authRequestId: id, username, password }),
  });
  expect(login.status, await login.clone().text()).toBe(302);
  return { callback: new URL(login.headers.get('location')!), verifier, state, nonce };
}

async function exchange(config: client.Configuration, flow: Flow, overrides: Partial<Flow> = {}) {
  const f = { ...flow, ...overrides };
  return client.authorizationCodeGrant(config, f.callback, {
    pkceCodeVerifier: f.verifier,
    expectedState: f.state,
    expectedNonce: f.nonce,
    idTokenExpected: true,
  });
}

async function fullLogin(config: client.Configuration, scope?: string) {
  const flow = await authorize(config, user.username, user.password, scope);
  return exchange(config, flow);
}

async function oauthError(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof client.ResponseBodyError) return err.error;
    throw err;
  }
  throw new Error('expected an OAuth error');
}

beforeAll(async () => {
  // openid-client checks token times against the real clock: the controller starts at it.
  t = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
  ca = t.app.core.pki.trustBundlePem;
  admin = await asAdmin(t);
  const created = await createIdentityWithPassword(t, admin, { name: 'oidc-user', username: 'oidc-user', password: 'oidc-user-pw1' });
  user = { id: created.id, username: 'oidc-user', password: 'oidc-user-pw1' };
});
afterAll(async () => {
  await t.close();
});

describe('discovery', () => {
  it('is served at /.well-known/openid-configuration and /oidc/.well-known/openid-configuration', async () => {
    const root = await https('GET', '/.well-known/openid-configuration');
    const under = await https('GET', '/oidc/.well-known/openid-configuration');
    expect(root.status).toBe(200);
    expect(JSON.parse(root.body)).toEqual(JSON.parse(under.body));
    const doc = JSON.parse(root.body);
    const issuer = `https://127.0.0.1:${port}/oidc`;
    expect(doc).toMatchObject({
      issuer,
      authorization_endpoint: `${issuer}/authorization`,
      token_endpoint: `${issuer}/token`,
      userinfo_endpoint: `${issuer}/userinfo`,
      jwks_uri: `${issuer}/keys`,
      end_session_endpoint: `${issuer}/end_session`,
      code_challenge_methods_supported: ['S256'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      response_types_supported: ['code'],
      token_endpoint_auth_methods_supported: ['none'],
      login_password_endpoint: `${issuer}/login/password`,
      login_cert_endpoint: `${issuer}/login/cert`,
      login_ext_jwt_endpoint: `${issuer}/login/ext-jwt`,
      login_auth_queries_endpoint: `${issuer}/login/auth-queries`,
    });
    expect(doc.id_token_signing_alg_values_supported).toContain('ES256');
  });

  it('openid-client accepts it: the issuer is the address the client used', async () => {
    for (const host of ['127.0.0.1', 'localhost']) {
      const config = await discover(host);
      expect(config.serverMetadata().issuer).toBe(`https://${host}:${port}/oidc`);
    }
  });
});

describe('the code flow with PKCE', () => {
  it('issues access, ID and refresh tokens that openid-client validates', async () => {
    const config = await discover();
    const tokens = await fullLogin(config);
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.expires_in).toBe(1800);
    expect(tokens.scope).toBe('openid offline_access');
    expect(typeof tokens.refresh_token).toBe('string');
    const idClaims = tokens.claims()!;
    expect(idClaims).toMatchObject({
      iss: `https://127.0.0.1:${port}/oidc`,
      sub: user.id,
      aud: 'overlay',
      amr: ['password'],
      name: 'oidc-user',
      ov_ia: false,
    });
    expect(typeof idClaims.auth_time).toBe('number');

    // The access token verifies against the published key set, with every listed claim.
    const jwks = createLocalJWKSet(JSON.parse((await https('GET', '/oidc/keys')).body));
    const { payload, protectedHeader } = await jwtVerify(tokens.access_token, jwks, {
      issuer: `https://127.0.0.1:${port}/oidc`,
      audience: 'overlay',
    });
    expect(protectedHeader.kid).toBe(t.app.core.oidc.keys.current.kid);
    expect(payload).toMatchObject({ sub: user.id, amr: ['password'], scope: 'openid offline_access', client_id: 'overlay', ov_t: 'a', ov_ia: false, ov_ice: false, ov_ct: [] });
    expect(payload.aud).toEqual(['overlay', `https://127.0.0.1:${port}`]);
    for (const claim of ['exp', 'iat', 'nbf', 'jti', 'auth_time', 'ov_asid']) expect(payload[claim]).toBeDefined();
  });

  it('the access token works on both Edge APIs and names its API session', async () => {
    const config = await discover();
    const tokens = await fullLogin(config);
    const asid = decodeJwt(tokens.access_token).payload.ov_asid;
    for (const api of [CLIENT, MGMT]) {
      const me = await https('GET', `${api}/current-identity`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      expect(me.status, me.body).toBe(200);
      expect(JSON.parse(me.body).data.id).toBe(user.id);
      const exp = decodeJwt(tokens.access_token).payload.exp;
      expect(me.headers['expires-at']).toBe(new Date(exp * 1000).toISOString());
      expect(Number(me.headers['expiration-seconds'])).toBeGreaterThan(1790);
    }
    const session = await https('GET', `${CLIENT}/current-api-session`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(JSON.parse(session.body).data.id).toBe(asid);
    // The API session is listed to admins like a legacy one.
    const listed = await call(t, 'GET', `${MGMT}/api-sessions/${asid}`, { token: admin });
    expect(listed.statusCode).toBe(200);
    expect(json(listed).data).toMatchObject({ identityId: user.id, authMethod: 'password' });
  });

  it('userinfo answers the claims of the bearer', async () => {
    const config = await discover();
    const tokens = await fullLogin(config);
    const info = await client.fetchUserInfo(config, tokens.access_token, user.id);
    expect(info).toEqual({ sub: user.id, name: 'oidc-user', ov_ia: false });
  });

  it('without offline_access there is no refresh token', async () => {
    const config = await discover();
    const tokens = await fullLogin(config, 'openid');
    expect(tokens.refresh_token).toBeUndefined();
    expect(tokens.scope).toBe('openid');
  });

  it('tokens issued through localhost carry that issuer and work as well', async () => {
    const config = await discover('localhost');
    const tokens = await fullLogin(config);
    expect(tokens.claims()!.iss).toBe(`https://localhost:${port}/oidc`);
    expect(decodeJwt(tokens.access_token).payload.iss).toBe(`https://localhost:${port}/oidc`);
    const me = await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(me.status).toBe(200);
  });
});

describe('certificate login', () => {
  it('a client presenting a certificate is sent to /oidc/login/cert and logs in with it', async () => {
    const id = json(await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: 'oidc-cert', type: 'Device', isAdmin: false } })).data.id as string;
    // A certificate of the network; the client's TLS sends the signing CA with it (from its trust bundle).
    const cert = await testCertificate('oidc-cert', { issuer: await networkIssuer(t) });
    expect((await call(t, 'POST', `${MGMT}/authenticators`, { token: admin, body: { method: 'cert', identityId: id, certPem: cert.certPem } })).statusCode).toBe(201);
    const config = await discover();
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT,
      scope: 'openid',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
    });
    // Without a method hint: a certificate in the handshake chooses the certificate login ...
    const started = await https('GET', url.pathname + url.search, { client: cert });
    expect(started.status).toBe(302);
    const location = new URL(String(started.headers.location), url);
    expect(location.pathname).toBe('/oidc/login/cert');
    // ... and no certificate chooses the password login.
    expect(String((await https('GET', url.pathname + url.search)).headers.location)).toMatch(/^\/oidc\/login\/password\?/);

    const login = await https('POST', '/oidc/login/cert', {
      client: cert,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ authRequestId: location.searchParams.get('authRequestID') }),
    });
    expect(login.status, login.body).toBe(302);
    const tokens = await client.authorizationCodeGrant(config, new URL(String(login.headers.location)), { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens.claims()).toMatchObject({ sub: id, amr: ['cert'] });
    expect(decodeJwt(tokens.access_token).payload).toMatchObject({ sub: id, amr: ['cert'], ov_ice: false });
    const session = await https('GET', `${CLIENT}/current-api-session`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(JSON.parse(session.body).data).toMatchObject({ identityId: id, isCertExtendable: false, improperClientCertChain: false });
  });

  it('the certificate login without a certificate: 401 INVALID_AUTH, the request stays Started', async () => {
    const config = await discover();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT,
      scope: 'openid',
      code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      method: 'cert',
    });
    const started = await https('GET', url.pathname + url.search);
    const id = new URL(String(started.headers.location), url).searchParams.get('authRequestID')!;
    const res = await https('POST', '/oidc/login/cert', { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ authRequestId: id }) });
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body).error.code).toBe('INVALID_AUTH');
    expect(t.app.core.oidc.requests.get(id).status).toBe('started');
  });
});

describe('refresh', () => {
  it('rotates the refresh token; presenting a rotated one revokes the whole grant', async () => {
    const config = await discover();
    const first = await fullLogin(config);
    const second = await client.refreshTokenGrant(config, first.refresh_token!);
    expect(second.refresh_token).toBeDefined();
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(second.claims()!.sub).toBe(user.id);
    expect(decodeJwt(second.access_token).payload.ov_asid).toBe(decodeJwt(first.access_token).payload.ov_asid);
    const third = await client.refreshTokenGrant(config, second.refresh_token!);
    const ok = await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${third.access_token}` } });
    expect(ok.status).toBe(200);

    // The first token again: reuse. Everything of the grant stops working.
    expect(await oauthError(client.refreshTokenGrant(config, first.refresh_token!))).toBe('invalid_grant');
    for (const token of [first.access_token, second.access_token, third.access_token]) {
      const res = await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toBe(BEARER_INVALID);
    }
    expect(await oauthError(client.refreshTokenGrant(config, third.refresh_token!))).toBe('invalid_grant');
  });
});

describe('end_session', () => {
  it('revokes the API session of the id_token_hint and redirects to the allowed URI with state', async () => {
    const config = await discover();
    const tokens = await fullLogin(config);
    const url = client.buildEndSessionUrl(config, {
      id_token_hint: tokens.id_token!,
      post_logout_redirect_uri: 'http://127.0.0.1:43210/bye',
      state: 'after-logout',
    });
    const res = await https('GET', url.pathname + url.search);
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('http://127.0.0.1:43210/bye?state=after-logout');
    const me = await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(me.status).toBe(401);
    expect(await oauthError(client.refreshTokenGrant(config, tokens.refresh_token!))).toBe('invalid_grant');
  });
});

describe('attacks', () => {
  it('code reuse: refused, and what the code issued is revoked', async () => {
    const config = await discover();
    const flow = await authorize(config, user.username, user.password);
    const tokens = await exchange(config, flow);
    expect(await oauthError(exchange(config, flow))).toBe('invalid_grant');
    const me = await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(me.status).toBe(401);
    expect(await oauthError(client.refreshTokenGrant(config, tokens.refresh_token!))).toBe('invalid_grant');
  });

  it('a wrong code verifier is refused (and the code still works with the right one)', async () => {
    const config = await discover();
    const flow = await authorize(config, user.username, user.password);
    expect(await oauthError(exchange(config, flow, { verifier: client.randomPKCECodeVerifier() }))).toBe('invalid_grant');
    expect((await exchange(config, flow)).access_token).toBeTruthy();
  });

  it('a redirect URI other than the authorization request’s is refused', async () => {
    const config = await discover();
    const flow = await authorize(config, user.username, user.password);
    const elsewhere = new URL(flow.callback.href.replace('/callback', '/elsewhere'));
    expect(await oauthError(exchange(config, flow, { callback: elsewhere }))).toBe('invalid_grant');
  });

  it('another client is refused: at authorization without a redirect, at the token endpoint with 401', async () => {
    const intruder = await discover('127.0.0.1', 'intruder');
    const verifier = client.randomPKCECodeVerifier();
    const url = client.buildAuthorizationUrl(intruder, {
      redirect_uri: REDIRECT,
      scope: 'openid',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const res = await https('GET', url.pathname + url.search);
    expect(res.status).toBe(400);
    expect(res.headers.location).toBeUndefined();
    expect(JSON.parse(res.body).error).toBe('invalid_request');

    const config = await discover();
    const flow = await authorize(config, user.username, user.password);
    expect(await oauthError(exchange(intruder, flow))).toBe('invalid_client');
  });

  it('a tampered access token is invalid', async () => {
    const config = await discover();
    const tokens = await fullLogin(config);
    const [h, p, s] = tokens.access_token.split('.');
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    claims.ov_ia = true;
    const forged = `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`;
    for (const api of [CLIENT, MGMT]) {
      const res = await https('GET', `${api}/current-identity`, { headers: { authorization: `Bearer ${forged}` } });
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toBe(BEARER_INVALID);
    }
    const info = await https('GET', '/oidc/userinfo', { headers: { authorization: `Bearer ${forged}` } });
    expect(info.status).toBe(401);
    expect(info.headers['www-authenticate']).toBe(BEARER_INVALID);
  });

  it('an expired access token: 401 with the expired challenge', async () => {
    const config = await discover();
    const tokens = await fullLogin(config, 'openid');
    t.clock.advance(31 * 60_000);
    try {
      const res = await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toBe(BEARER_EXPIRED);
    } finally {
      t.clock.advance(-31 * 60_000);
    }
  });

  it('a revoked access token (JTI) is invalid at once', async () => {
    const config = await discover();
    const tokens = await fullLogin(config);
    const jti = decodeJwt(tokens.access_token).payload.jti;
    const revoked = await call(t, 'POST', `${MGMT}/revocations`, { token: admin, body: { id: jti, type: 'JTI' } });
    expect(revoked.statusCode, revoked.body).toBe(201);
    const res = await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe(BEARER_INVALID);
    // The grant itself lives on: a refresh gives a new token that works.
    const next = await client.refreshTokenGrant(config, tokens.refresh_token!);
    expect((await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${next.access_token}` } })).status).toBe(200);
  });

  it('a token signed by another key is invalid, whatever kid it names', async () => {
    const config = await discover();
    const tokens = await fullLogin(config);
    const { payload } = decodeJwt(tokens.access_token);
    const foreign = await importJWK(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' }) as never, 'ES256');
    for (const kid of [t.app.core.oidc.keys.current.kid, 'someone-else']) {
      const forged = await new SignJWT(payload).setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' }).sign(foreign);
      const res = await https('GET', `${MGMT}/current-identity`, { headers: { authorization: `Bearer ${forged}` } });
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toBe(BEARER_INVALID);
    }
    // An unsigned token does not pass either.
    const none = `${Buffer.from(JSON.stringify({ alg: 'none' })).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.`;
    expect((await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${none}` } })).status).toBe(401);
  });

  it('an ID token is not an access token', async () => {
    const config = await discover();
    const tokens = await fullLogin(config);
    const res = await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${tokens.id_token}` } });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe(BEARER_INVALID);
  });
});

describe('done when', () => {
  it('a new user logs in with openid-client, calls both Edge APIs, refreshes, and loses access the moment an admin revokes the session', async () => {
    const newcomer = await createIdentityWithPassword(t, admin, { name: 'newcomer', username: 'newcomer', password: 'newcomer-pw1' });
    const config = await discover();
    const flow = await authorize(config, 'newcomer', 'newcomer-pw1');
    const tokens = await exchange(config, flow);
    for (const api of [CLIENT, MGMT]) {
      const me = await https('GET', `${api}/current-identity`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      expect(me.status).toBe(200);
      expect(JSON.parse(me.body).data.id).toBe(newcomer.id);
    }
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    const asid = decodeJwt(refreshed.access_token).payload.ov_asid;
    expect((await https('GET', `${CLIENT}/current-identity`, { headers: { authorization: `Bearer ${refreshed.access_token}` } })).status).toBe(200);

    const deleted = await call(t, 'DELETE', `${MGMT}/api-sessions/${asid}`, { token: admin });
    expect(deleted.statusCode).toBe(200);
    for (const api of [CLIENT, MGMT]) {
      const me = await https('GET', `${api}/current-identity`, { headers: { authorization: `Bearer ${refreshed.access_token}` } });
      expect(me.status).toBe(401);
      expect(me.headers['www-authenticate']).toBe(BEARER_INVALID);
    }
    expect(await oauthError(client.refreshTokenGrant(config, refreshed.refresh_token!))).toBe('invalid_grant');
  });
});
