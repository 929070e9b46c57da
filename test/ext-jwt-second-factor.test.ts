// The external JWT as a second factor (secondary.requireExtJwtSigner): a password session is asked
// for the signer's token (EXT-JWT auth query) and is refused on every request without a valid token
// of that signer naming the same identity (realm overlay-secondary-ext-jwt); OIDC completes a login
// only once a login request carries it, `amr` gaining ejs:<signerId>. Tokens come from a real
// oidc-provider.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authPolicyBody,
  ADMIN_ENV,
  asAdmin,
  authenticate,
  call,
  CLIENT,
  createIdentityWithPassword,
  createSigner,
  json,
  MGMT,
  startTestController,
  tempDir,
  testClock,
  type TestController,
} from './helpers.js';
import { AUDIENCE, configAllowingLoopbackJwks, startExternalIdp, type ExternalIdp } from './external-idp.js';
import { decodeJwt, pkce, postLogin, postToken, REDIRECT_URI, startAuthorization } from './oidc-helpers.js';

let t: TestController;
let idp: ExternalIdp;
let admin: string;
let signer: string;
let policy: string;
const dir = tempDir('overlay-ext-jwt-2fa-');

beforeAll(async () => {
  idp = await startExternalIdp(['dave-laptop', 'erin-laptop']);
  t = await startTestController({ env: { ...ADMIN_ENV, OVERLAY_CONFIG: configAllowingLoopbackJwks(dir.path) }, clock: testClock(Date.now()) });
  admin = await asAdmin(t);
  signer = await createSigner(t, admin, {
    name: 'second-factor-idp',
    issuer: idp.issuer,
    audience: AUDIENCE,
    jwksEndpoint: idp.jwksUrl,
    useExternalId: true,
    externalAuthUrl: `${idp.issuer}/auth`,
    clientId: 'overlay-app',
    scopes: ['openid', 'overlay'],
  });
  const res = await call(t, 'POST', `${MGMT}/auth-policies`, {
    token: admin,
    body: authPolicyBody('password-and-idp', { primary: { updb: { allowed: true } }, secondary: { requireExtJwtSigner: signer } }),
  });
  policy = json(res).data.id;
  await createIdentityWithPassword(t, admin, { name: 'dave', username: 'dave', password: 'dave-password', externalId: 'dave-laptop', authPolicyId: policy });
  await createIdentityWithPassword(t, admin, { name: 'erin', username: 'erin', password: 'erin-password', externalId: 'erin-laptop', authPolicyId: policy });
});
afterAll(async () => {
  await t.close();
  await idp.close();
  dir.remove();
});

const withToken = (token: string) => ({ authorization: `Bearer ${token}` });

describe('a legacy API session', () => {
  let session: string;

  it('is opened by the password, asking for the signer token with an EXT-JWT query', async () => {
    const res = await authenticate(t, 'dave', 'dave-password', { api: CLIENT });
    expect(res.statusCode, res.body).toBe(200);
    const answer = json(res).data;
    session = answer.token;
    expect(answer.authQueries).toEqual([
      { typeId: 'EXT-JWT', provider: 'url', id: signer, httpUrl: `${idp.issuer}/auth`, clientId: 'overlay-app', scopes: ['openid', 'overlay'] },
    ]);
  });

  it('is refused without the token on every request, with the secondary challenge', async () => {
    const res = await call(t, 'GET', `${CLIENT}/services`, { token: session });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toBe(
      `Bearer realm="overlay-secondary-ext-jwt" error="missing" error_description="no bearer token was provided" id="${signer}" issuer="${idp.issuer}"`,
    );
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token: session })).statusCode).toBe(401);
  });

  it('is served with a valid token of the signer naming the same identity, on each request', async () => {
    const token = await idp.token('dave-laptop');
    for (const path of ['/services', '/current-identity', '/external-jwt-signers']) {
      const res = await call(t, 'GET', `${CLIENT}${path}`, { token: session, headers: withToken(token) });
      expect(res.statusCode, `${path} ${res.body}`).toBe(200);
    }
  });

  it('is refused with a token of another identity, or a token that is no JWT', async () => {
    const erin = await call(t, 'GET', `${CLIENT}/services`, { token: session, headers: withToken(await idp.token('erin-laptop')) });
    expect(erin.statusCode).toBe(401);
    expect(String(erin.headers['www-authenticate'])).toContain('error="invalid" error_description="the token names another identity');
    const junk = await call(t, 'GET', `${CLIENT}/services`, { token: session, headers: withToken('junk') });
    expect(String(junk.headers['www-authenticate'])).toContain('not a well-formed signed JWT');
  });

  it('still answers its own session (a partial route) without the token, showing the query', async () => {
    const res = await call(t, 'GET', `${CLIENT}/current-api-session`, { token: session });
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res).data.authQueries).toEqual([expect.objectContaining({ typeId: 'EXT-JWT', id: signer })]);
    const carried = await call(t, 'GET', `${CLIENT}/current-api-session`, { token: session, headers: withToken(await idp.token('dave-laptop')) });
    expect(json(carried).data.authQueries).toEqual([]);
  });

  it('asks nothing when the login itself carried the token', async () => {
    const res = await call(t, 'POST', `${CLIENT}/authenticate?method=password`, {
      body: { username: 'dave', password: 'dave-password' },
      headers: withToken(await idp.token('dave-laptop')),
    });
    expect(json(res).data.authQueries).toEqual([]);
  });

  it('follows the policy: once it no longer requires the signer, the session needs no token', async () => {
    const patched = await call(t, 'PATCH', `${MGMT}/auth-policies/${policy}`, { token: admin, body: { secondary: { requireExtJwtSigner: null } } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect((await call(t, 'GET', `${CLIENT}/services`, { token: session })).statusCode).toBe(200);
    expect((await call(t, 'PATCH', `${MGMT}/auth-policies/${policy}`, { token: admin, body: { secondary: { requireExtJwtSigner: signer } } })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${CLIENT}/services`, { token: session })).statusCode).toBe(401);
  });
});

describe('OIDC', () => {
  async function codeOf(location: string, verifier: string) {
    const code = new URL(location).searchParams.get('code')!;
    const res = await postToken(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: 'overlay', code_verifier: verifier });
    expect(res.statusCode, res.body).toBe(200);
    return json(res);
  }

  it('a password login without the token waits with the EXT-JWT query; the token at /oidc/login/ext-jwt completes it', async () => {
    const { verifier, challenge } = pkce();
    const { id } = await startAuthorization(t, { challenge });
    const first = await postLogin(t, id, 'dave', 'dave-password');
    expect(first.statusCode, first.body).toBe(200);
    expect(json(first).authQueries).toEqual([expect.objectContaining({ typeId: 'EXT-JWT', provider: 'url', id: signer, httpUrl: `${idp.issuer}/auth` })]);
    const wrong = await t.inject({ method: 'POST', url: '/oidc/login/ext-jwt', payload: { authRequestId: id }, headers: withToken(await idp.token('erin-laptop')) });
    expect(wrong.statusCode).toBe(401);
    expect(String(wrong.headers['www-authenticate'])).toContain('realm="overlay-secondary-ext-jwt" error="invalid"');
    const right = await t.inject({ method: 'POST', url: '/oidc/login/ext-jwt', payload: { authRequestId: id }, headers: withToken(await idp.token('dave-laptop')) });
    expect(right.statusCode, right.body).toBe(302);
    const tokens = await codeOf(String(right.headers.location), verifier);
    expect(decodeJwt(tokens.id_token).payload.amr).toEqual(['password', `ejs:${signer}`]);
  });

  it('a password login carrying the token completes at once', async () => {
    const { verifier, challenge } = pkce();
    const { id } = await startAuthorization(t, { challenge });
    const res = await t.inject({
      method: 'POST',
      url: '/oidc/login/password',
      payload: { authRequestId: id, username: 'dave', password: 'dave-password' },
      headers: withToken(await idp.token('dave-laptop')),
    });
    expect(res.statusCode, res.body).toBe(302);
    const tokens = await codeOf(String(res.headers.location), verifier);
    expect(decodeJwt(tokens.access_token).payload.amr).toEqual(['password', `ejs:${signer}`]);
    // The OIDC access token is the credential of its session: its requests need no second token.
    expect((await call(t, 'GET', `${CLIENT}/services`, { headers: { authorization: `Bearer ${tokens.access_token}` } })).statusCode).toBe(200);
  });

  it('a password login carrying a bad token is refused with the secondary challenge', async () => {
    const { challenge } = pkce();
    const { id } = await startAuthorization(t, { challenge });
    const res = await t.inject({
      method: 'POST',
      url: '/oidc/login/password',
      payload: { authRequestId: id, username: 'dave', password: 'dave-password' },
      headers: withToken(await idp.token('erin-laptop')),
    });
    expect(res.statusCode).toBe(401);
    expect(String(res.headers['www-authenticate'])).toContain(`realm="overlay-secondary-ext-jwt" error="invalid"`);
    expect(t.app.core.oidc.requests.get(id)).toMatchObject({ status: 'partial', outstanding: ['ext-jwt'] });
  });
});
