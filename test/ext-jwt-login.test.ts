// Primary login with an external JWT: tokens of a real identity provider (oidc-provider, its JWKS
// fetched from loopback as the test configuration allows) log in on both Edge APIs and through OIDC;
// hand-made tokens and signers show every refusal answering 401 in realm overlay-primary-ext-jwt with
// the check that failed, in the challenge and in the log, never with the token.
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { SignJWT } from 'jose';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentity,
  createSigner,
  json,
  MGMT,
  overTls,
  startTestController,
  tempDir,
  testCertificate,
  testClock,
  type TestController,
} from './helpers.js';
import { AUDIENCE, configAllowingLoopbackJwks, startExternalIdp, type ExternalIdp } from './external-idp.js';
import { decodeJwt, pkce, postToken, REDIRECT_URI, startAuthorization } from './oidc-helpers.js';

let t: TestController;
let port: number;
let idp: ExternalIdp;
let admin: string;
let silent: Server;
let silentUrl: string;
/** A JWKS on the same loopback server whose one key (kid broken-1) has bad key data. */
let brokenUrl: string;
const held: ServerResponse[] = [];
const logLines: string[] = [];
const dir = tempDir('overlay-ext-jwt-');

/** The signer of the identity provider, and a signer whose certificate's key the test holds. */
let idpSigner: string;
let handSigner: string;
let handKey: KeyObject;
let alice: string;
let carol: string;
const HAND_ISSUER = 'https://hand.example.com';
let address = 0;
const freshAddress = () => `10.20.${Math.floor(++address / 250)}.${address % 250}`;

beforeAll(async () => {
  idp = await startExternalIdp(['alice-laptop', 'nobody-device', 'carol-phone']);
  const brokenKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
  const brokenJwks = JSON.stringify({ keys: [{ ...brokenKey, x: `${brokenKey.x!.slice(0, -4)}AAAA`, kid: 'broken-1', use: 'sig' }] });
  silent = createServer((req, res) => {
    if (req.url === '/broken-jwks') res.writeHead(200, { 'content-type': 'application/json' }).end(brokenJwks);
    else held.push(res);
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const a = silent.address();
  silentUrl = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}/jwks`;
  brokenUrl = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}/broken-jwks`;
  const log = pino(
    { level: 'warn' },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        logLines.push(chunk.toString());
        done();
      },
    }),
  );
  // The provider's tokens carry the real time: so does the controller's clock.
  t = await startTestController({ env: { ...ADMIN_ENV, OVERLAY_CONFIG: configAllowingLoopbackJwks(dir.path) }, clock: testClock(Date.now()), log });
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
  admin = await asAdmin(t);
  idpSigner = await createSigner(t, admin, { name: 'company-idp', issuer: idp.issuer, audience: AUDIENCE, jwksEndpoint: idp.jwksUrl, useExternalId: true });
  const cert = await testCertificate('hand-signer');
  handKey = (await import('node:crypto')).createPrivateKey(cert.keyPem);
  handSigner = await createSigner(t, admin, { name: 'hand-idp', issuer: HAND_ISSUER, audience: 'overlay', certPem: cert.certPem, kid: 'hand-1' });
  alice = await createIdentity(t, admin, { name: 'alice', externalId: 'alice-laptop' });
  carol = await createIdentity(t, admin, { name: 'carol' });
});
afterAll(async () => {
  for (const res of held) res.destroy();
  await new Promise((resolve) => silent.close(resolve));
  await t.close();
  await idp.close();
  dir.remove();
});

interface HandToken {
  iss?: string;
  aud?: string;
  sub?: string;
  exp?: number;
  nbf?: number;
  kid?: string;
  key?: KeyObject;
}

function handToken(o: HandToken = {}): Promise<string> {
  const now = Math.floor(t.clock() / 1000);
  return new SignJWT({ iss: o.iss ?? HAND_ISSUER, aud: o.aud ?? 'overlay', sub: o.sub ?? carol, ...(o.nbf !== undefined && { nbf: o.nbf }) })
    .setProtectedHeader({ alg: 'ES256', kid: o.kid ?? 'hand-1' })
    .setIssuedAt(now)
    .setExpirationTime(o.exp ?? now + 300)
    .sign(o.key ?? handKey);
}

function extJwtLogin(token: string | undefined, api = CLIENT) {
  return call(t, 'POST', `${api}/authenticate?method=ext-jwt`, {
    ...(token !== undefined && { headers: { authorization: `Bearer ${token}` } }),
    remoteAddress: freshAddress(),
  });
}

/** Asserts a refusal: 401 INVALID_AUTH, the primary ext-jwt challenge naming the reason, a log line without the token. */
function expectRefused(res: Awaited<ReturnType<typeof call>>, reason: string, token?: string, error = 'invalid'): void {
  expect(res.statusCode, res.body).toBe(401);
  expect(json(res).error.code).toBe('INVALID_AUTH');
  expect(json(res).error.message).toContain(reason);
  const challenge = String(res.headers['www-authenticate']);
  expect(challenge).toMatch(new RegExp(`^Bearer realm="overlay-primary-ext-jwt" error="${error}" error_description="[^"]*"`));
  expect(challenge).toContain(reason.replace(/"/g, "'"));
  const line = logLines.findLast((l) => l.includes('external JWT login refused'));
  expect(line).toContain(reason.replace(/"/g, '\\"'));
  if (token !== undefined) expect(logLines.join('\n')).not.toContain(token);
}

describe('tokens of a real identity provider', () => {
  it('log in on the Client API, and the session lists services', async () => {
    const res = await extJwtLogin(await idp.token('alice-laptop'));
    expect(res.statusCode, res.body).toBe(200);
    const session = json(res).data;
    expect(session.identity.id).toBe(alice);
    expect(session.authQueries).toEqual([]);
    const services = await call(t, 'GET', `${CLIENT}/services`, { token: session.token });
    expect(services.statusCode, services.body).toBe(200);
    expect(json(services).data).toEqual([]);
  });

  it('log in on the Management API', async () => {
    const res = await extJwtLogin(await idp.token('alice-laptop'), MGMT);
    expect(res.statusCode, res.body).toBe(200);
    const me = await call(t, 'GET', `${MGMT}/current-identity`, { token: json(res).data.token });
    expect(json(me).data.id).toBe(alice);
  });

  it('log in through OIDC, the tokens saying amr ext-jwt', async () => {
    const { verifier, challenge } = pkce();
    const { id, location } = await startAuthorization(t, { challenge, extra: { method: 'ext-jwt' } });
    expect(location).toContain('/oidc/login/ext-jwt');
    const login = await t.inject({
      method: 'POST',
      url: '/oidc/login/ext-jwt',
      payload: { authRequestId: id },
      headers: { authorization: `Bearer ${await idp.token('alice-laptop')}` },
    });
    expect(login.statusCode, login.body).toBe(302);
    const code = new URL(String(login.headers.location)).searchParams.get('code')!;
    const tokens = await postToken(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: 'overlay', code_verifier: verifier });
    expect(tokens.statusCode, tokens.body).toBe(200);
    const access = decodeJwt(json(tokens).access_token).payload;
    expect(access.sub).toBe(alice);
    expect(decodeJwt(json(tokens).id_token).payload.amr).toEqual(['ext-jwt']);
  });

  it('refuses a provider token whose subject no identity has', async () => {
    const token = await idp.token('nobody-device');
    expectRefused(await extJwtLogin(token), 'no identity has the external id the claim sub names', token);
  });
});

describe('under concurrent logins', () => {
  it('tokens with an unknown kid sent at once fetch the JWKS once, and only after 30 s', async () => {
    const unknownKid = () =>
      handToken({ iss: idp.issuer, aud: AUDIENCE, kid: 'rotated-away', key: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey });
    const before = idp.jwksFetches();
    const send = (token: string) => overTls(t, port, 'POST', `${CLIENT}/authenticate?method=ext-jwt`, { body: {}, headers: { authorization: `Bearer ${token}` } });
    // Within 30 s of the last fetch: no fetch at all.
    const early = await Promise.all(Array.from({ length: 10 }, async () => send(await unknownKid())));
    expect(early.map((r) => r.statusCode)).toEqual(Array(10).fill(401));
    expect(idp.jwksFetches()).toBe(before);
    t.clock.advance(30_000);
    const late = await Promise.all(Array.from({ length: 10 }, async () => send(await unknownKid())));
    expect(late.map((r) => r.statusCode)).toEqual(Array(10).fill(401));
    expect(JSON.parse(late[0]!.body).error.message).toContain("no key of the signer's JWKS matches");
    expect(idp.jwksFetches()).toBe(before + 1);
  });
});

describe('every refusal says why', () => {
  it('no token at all', async () => {
    expectRefused(await extJwtLogin(undefined), 'no bearer token was provided', undefined, 'missing');
  });

  it.each<[string, () => Promise<string>, string, string?]>([
    ['a wrong audience', () => handToken({ aud: 'someone-else' }), 'audience (aud) does not contain overlay'],
    ['an issuer no signer has', () => handToken({ iss: 'https://stranger.example.com' }), 'no external JWT signer has the issuer https://stranger.example.com'],
    ['an expired token', () => handToken({ exp: Math.floor(t.clock() / 1000) - 600 }), 'the token has expired', 'expired'],
    ['a token not valid yet', () => handToken({ nbf: Math.floor(t.clock() / 1000) + 600 }), 'not valid yet'],
    ['a foreign key', () => handToken({ key: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey }), "signature does not verify with the signer's key"],
    ['another kid than the certificate\'s', () => handToken({ kid: 'hand-2' }), "kid hand-2 is not the signer's kid"],
    [
      'an unknown kid at the provider',
      () => handToken({ iss: idp.issuer, aud: AUDIENCE, kid: 'rotated-away', key: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey }),
      "no key of the signer's JWKS matches",
    ],
    [
      'alg none',
      async () => {
        const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
        return `${part({ alg: 'none' })}.${part({ iss: HAND_ISSUER, aud: 'overlay', sub: carol, exp: Math.floor(t.clock() / 1000) + 60 })}.`;
      },
      'alg none is refused',
    ],
    ['a subject no identity has', () => handToken({ sub: 'no-such-identity' }), 'no identity has the id the claim sub names'],
  ])('%s', async (_what, make, reason, error = 'invalid') => {
    const token = await make();
    const res = await extJwtLogin(token);
    expectRefused(res, reason, token, error);
  });

  it('characters beyond ASCII in the token or the signer are percent-encoded in the challenge, never a 500', async () => {
    // A header value cannot hold characters beyond Latin-1: these once answered a bare 500.
    const emoji = await extJwtLogin(await handToken({ iss: 'https://emoji.example.com/\u{1F600}' }));
    expect(emoji.statusCode, emoji.body).toBe(401);
    expect(json(emoji).error.message).toContain('https://emoji.example.com/\u{1F600}');
    const challenge = String(emoji.headers['www-authenticate']);
    expect(challenge).toContain('no external JWT signer has the issuer https://emoji.example.com/%F0%9F%98%80');
    expect(challenge).toMatch(/^[\x20-\x7e]*$/);

    const cert = await testCertificate('cjk-signer');
    const key = (await import('node:crypto')).createPrivateKey(cert.keyPem);
    const issuer = 'https://idp.example.com/\u4e2d\u6587 caf\u00e9';
    const id = await createSigner(t, admin, { name: 'cjk-idp', issuer, audience: 'overlay', certPem: cert.certPem, enabled: true });
    const refused = await extJwtLogin(await handToken({ iss: issuer, aud: 'someone-else', key }));
    expect(refused.statusCode, refused.body).toBe(401);
    expect(String(refused.headers['www-authenticate'])).toContain(`id="${id}" issuer="https://idp.example.com/%E4%B8%AD%E6%96%87 caf%C3%A9"`);
  });

  it('names the signer in the challenge once it is known', async () => {
    const res = await extJwtLogin(await handToken({ aud: 'x' }));
    expect(String(res.headers['www-authenticate'])).toContain(`id="${handSigner}" issuer="${HAND_ISSUER}"`);
  });

  it('a disabled signer', async () => {
    const cert = await testCertificate('disabled-signer');
    const key = (await import('node:crypto')).createPrivateKey(cert.keyPem);
    const id = await createSigner(t, admin, { name: 'disabled-idp', issuer: 'https://disabled.example.com', audience: 'overlay', certPem: cert.certPem, enabled: false });
    const token = await handToken({ iss: 'https://disabled.example.com', key });
    expectRefused(await extJwtLogin(token), `the external JWT signer ${id} is disabled`, token);
  });

  it('a signer disabled after a login: its tokens stop working at once', async () => {
    const ok = await extJwtLogin(await handToken());
    expect(ok.statusCode, ok.body).toBe(200);
    expect((await call(t, 'PATCH', `${MGMT}/external-jwt-signers/${handSigner}`, { token: admin, body: { enabled: false } })).statusCode).toBe(200);
    expectRefused(await extJwtLogin(await handToken()), 'is disabled');
    expect((await call(t, 'PATCH', `${MGMT}/external-jwt-signers/${handSigner}`, { token: admin, body: { enabled: true } })).statusCode).toBe(200);
    expect((await extJwtLogin(await handToken())).statusCode).toBe(200);
  });

  it('policies that allow no ext-jwt login, or not this signer', async () => {
    const policy = async (name: string, extJwt: { allowed: boolean; allowedSigners: string[] }) => {
      const res = await call(t, 'POST', `${MGMT}/auth-policies`, {
        token: admin,
        body: {
          name,
          primary: {
            cert: { allowed: false, allowExpiredCerts: false },
            extJwt,
            updb: { allowed: false, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false },
          },
          secondary: { requireTotp: false, requireExtJwtSigner: null },
        },
      });
      return json(res).data.id as string;
    };
    const none = await createIdentity(t, admin, { name: 'no-ext-jwt', authPolicyId: await policy('no-ext-jwt', { allowed: false, allowedSigners: [] }) });
    expectRefused(await extJwtLogin(await handToken({ sub: none })), 'the auth policy does not allow external JWT logins');
    const other = await createIdentity(t, admin, { name: 'other-signer', authPolicyId: await policy('idp-only', { allowed: true, allowedSigners: [idpSigner] }) });
    expectRefused(await extJwtLogin(await handToken({ sub: other })), `the auth policy does not allow the signer ${handSigner}`);
    const allowed = await createIdentity(t, admin, { name: 'hand-allowed', authPolicyId: await policy('hand-allowed', { allowed: true, allowedSigners: [handSigner] }) });
    expect((await extJwtLogin(await handToken({ sub: allowed }))).statusCode).toBe(200);
  });

  it('a disabled identity', async () => {
    const id = await createIdentity(t, admin, { name: 'disabled-person' });
    expect((await call(t, 'POST', `${MGMT}/identities/${id}/disable`, { token: admin, body: { durationMinutes: 0 } })).statusCode).toBe(200);
    expectRefused(await extJwtLogin(await handToken({ sub: id })), 'the identity is disabled');
  });
});

describe('JWKS endpoints the controller will not fetch', () => {
  const tokenOf = (issuer: string) => handToken({ iss: issuer });

  it.each([
    ['a link-local target (cloud metadata)', 'https://169.254.169.254/latest/jwks', 'link-local address 169.254.169.254'],
    ['a private target', 'https://10.1.2.3/jwks', 'private address 10.1.2.3'],
    ['a private IPv6 target', 'https://[fd00::1]/jwks', 'private address fd00::1'],
  ])('%s', async (what, jwksEndpoint, reason) => {
    const slug = what.replace(/[^a-z0-9]+/gi, '-');
    const issuer = `https://${slug}.example.com`;
    await createSigner(t, admin, { name: `ssrf-${slug}`, issuer, audience: 'overlay', jwksEndpoint });
    expectRefused(await extJwtLogin(await tokenOf(issuer)), reason);
  });

  it('a JWKS whose key is broken: the token naming it is refused, and the controller does not fail', async () => {
    const issuer = 'https://broken.example.com';
    await createSigner(t, admin, { name: 'broken-idp', issuer, audience: 'overlay', jwksEndpoint: brokenUrl });
    expectRefused(await extJwtLogin(await handToken({ iss: issuer, kid: 'broken-1' })), "the signer's key for the token cannot be read");
  });

  it('an endpoint that never answers: refused after 5 s, and not asked again for 30 s', async () => {
    const issuer = 'https://silent.example.com';
    await createSigner(t, admin, { name: 'silent-idp', issuer, audience: 'overlay', jwksEndpoint: silentUrl });
    const started = Date.now();
    expectRefused(await extJwtLogin(await tokenOf(issuer)), 'did not answer within 5000 ms');
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_900);
    const again = Date.now();
    expectRefused(await extJwtLogin(await tokenOf(issuer)), 'did not answer within 5000 ms');
    expect(Date.now() - again).toBeLessThan(1_000);
    expect(held.length).toBe(1);
  }, 15_000);
});
