// No secret ever reaches the log: a scenario logs in by every method (password on both Edge APIs,
// client certificate over TLS, TOTP and a recovery code, OIDC with PKCE, a second factor and a
// refresh), enrolls (ott and updb), changes a password, and sends wrong passwords and forged tokens,
// with the controller's own logger writing at trace level; then the whole log is searched for every
// password, token, code, key and secret the scenario used. Every request line carries its request id.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';
import { Writable } from 'node:stream';
import type { DestinationStream } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
  ADMIN_USERNAME,
  authenticate,
  authenticatorApp,
  call,
  CLIENT,
  createIdentity,
  createIdentityWithPassword,
  createTotpPolicy,
  json,
  MGMT,
  overTls,
  startTestController,
  testClock,
  type TestController,
} from './helpers.js';
import { bearer, pkce, postLogin, postToken, REDIRECT_URI, startAuthorization } from './oidc-helpers.js';

const HOUR = 3_600_000;
const chunks: string[] = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    chunks.push(String(chunk));
    done();
  },
});

let t: TestController;
let port: number;
/** Everything the scenario used that must never be logged. */
const secrets = new Set<string>();
const secret = <T extends string | undefined>(value: T): T => {
  if (value !== undefined && value !== '') secrets.add(value);
  return value;
};

beforeAll(async () => {
  // TLS peers check certificates against the real time, so the controller starts at it too.
  t = await startTestController({
    env: { ...ADMIN_ENV, OVERLAY_LOG_LEVEL: 'trace', OVERLAY_LOG_FORMAT: 'json' },
    clock: testClock(Date.now()),
    log: undefined,
    logDestination: sink as unknown as DestinationStream,
  });
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
  secret(ADMIN_PASSWORD);
});
afterAll(async () => {
  await t.close();
});

function lines(): Record<string, unknown>[] {
  return chunks
    .join('')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

async function csrPem(): Promise<{ csr: string; keyPem: string }> {
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
  const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name: 'CN=device', keys, signingAlgorithm: alg }, webcrypto);
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  return { csr: csr.toString('pem'), keyPem: x509.PemConverter.encode(der, 'PRIVATE KEY') };
}

async function loginToken(username: string, password: string, api = MGMT): Promise<string> {
  const res = await authenticate(t, username, password, { api });
  expect(res.statusCode, res.body).toBe(200);
  return secret(json(res).data.token as string);
}

async function enrollment(admin: string, identityId: string, method: 'ott' | 'updb', username?: string): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/enrollments`, {
    token: admin,
    body: { method, identityId, expiresAt: new Date(t.clock() + HOUR).toISOString(), ...(username ? { username } : {}) },
  });
  expect(res.statusCode, res.body).toBe(201);
  const e = json(await call(t, 'GET', `${MGMT}/enrollments/${json(res).data.id as string}`, { token: admin })).data;
  return secret(e.token as string);
}

/** Runs the OIDC code flow after a password login; a second factor when the identity has one. */
async function oidcFlow(username: string, password: string, totp?: () => string): Promise<void> {
  const { verifier, challenge } = pkce();
  secret(verifier);
  const { id } = await startAuthorization(t, { challenge });
  let answer = await postLogin(t, id, username, password);
  if (totp) {
    expect(answer.statusCode, answer.body).toBe(200);
    answer = await t.inject({ method: 'POST', url: '/oidc/login/totp', payload: { id, code: secret(totp()) } });
  }
  expect(answer.statusCode, answer.body).toBe(302);
  const code = secret(new URL(String(answer.headers.location)).searchParams.get('code')!);
  const tokens = json(await postToken(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: 'overlay', code_verifier: verifier }));
  for (const key of ['access_token', 'id_token', 'refresh_token']) secret(tokens[key] as string);
  expect((await t.inject({ method: 'GET', url: `${MGMT}/current-identity`, headers: bearer(tokens.access_token) })).statusCode).toBe(200);
  const refreshed = json(await postToken(t, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: 'overlay' }));
  expect(refreshed.access_token).toBeDefined();
  for (const key of ['access_token', 'id_token', 'refresh_token']) secret(refreshed[key] as string);
}

describe('secrets in the log', () => {
  it('a scenario of every login, enrollment and MFA step logs none of the secrets it used', async () => {
    // Passwords on both Edge APIs, and a wrong one.
    const admin = await loginToken(ADMIN_USERNAME, ADMIN_PASSWORD);
    await loginToken(ADMIN_USERNAME, ADMIN_PASSWORD, CLIENT);
    expect((await authenticate(t, ADMIN_USERNAME, secret('Wrong-Password-771'), { remoteAddress: '10.1.1.1' })).statusCode).toBe(401);

    // A password set by an admin, then changed by its identity.
    const bob = await createIdentityWithPassword(t, admin, { name: 'bobby', username: 'bobby', password: secret('Bob-Password-1') });
    const bobToken = await loginToken('bobby', 'Bob-Password-1', CLIENT);
    const changed = await call(t, 'PATCH', `${CLIENT}/current-identity/authenticators/${bob.authenticatorId}`, {
      token: bobToken,
      body: { password: secret('Bob-Password-2'), currentPassword: 'Bob-Password-1' },
    });
    expect(changed.statusCode, changed.body).toBe(200);
    await loginToken('bobby', 'Bob-Password-2', CLIENT);

    // Enrollment by password (updb) and by certificate (ott), then a certificate login over TLS.
    const carol = await createIdentity(t, admin, { name: 'carol' });
    const updbToken = await enrollment(admin, carol, 'updb', 'carol');
    const enrolled = await call(t, 'POST', `${CLIENT}/enroll?method=updb&token=${updbToken}`, { body: { password: secret('Carol-Password-1') } });
    expect(enrolled.statusCode, enrolled.body).toBe(200);
    await loginToken('carol', 'Carol-Password-1');
    const device = await createIdentity(t, admin, { name: 'device' });
    const ottToken = await enrollment(admin, device, 'ott');
    const { csr, keyPem } = await csrPem();
    secret(keyPem.split('\n')[1]);
    const signed = await call(t, 'POST', `${CLIENT}/enroll/ott`, { body: { token: ottToken, clientCsr: csr } });
    expect(signed.statusCode, signed.body).toBe(200);
    const certLogin = await overTls(t, port, 'POST', `${CLIENT}/authenticate?method=cert`, {
      body: {},
      client: { certPem: json(signed).data.cert as string, keyPem },
    });
    expect(certLogin.statusCode, certLogin.body).toBe(200);
    secret(JSON.parse(certLogin.body).data.token as string);

    // TOTP: enrollment, a login finished with a code, one with a recovery code.
    const policy = await createTotpPolicy(t, admin, 'totp-policy');
    await createIdentityWithPassword(t, admin, { name: 'david', username: 'david', password: secret('Dave-Password-1'), authPolicyId: policy });
    const daveSetup = await loginToken('david', 'Dave-Password-1', CLIENT);
    const started = await call(t, 'POST', `${CLIENT}/current-identity/mfa`, { token: daveSetup, body: {} });
    expect(started.statusCode, started.body).toBe(201);
    const { provisioningUrl, recoveryCodes } = json(started).data as { provisioningUrl: string; recoveryCodes: string[] };
    secret(new URL(provisioningUrl).searchParams.get('secret')!);
    for (const code of recoveryCodes) secret(code);
    const codeAt = authenticatorApp(provisioningUrl);
    const verified = await call(t, 'POST', `${CLIENT}/current-identity/mfa/verify`, { token: daveSetup, body: { code: secret(codeAt(t.clock())) } });
    expect(verified.statusCode, verified.body).toBe(200);
    t.clock.advance(60_000);
    const waiting = await loginToken('david', 'Dave-Password-1', CLIENT);
    const done = await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: waiting, body: { code: secret(codeAt(t.clock())) } });
    expect(done.statusCode, done.body).toBe(200);
    const waitingAgain = await loginToken('david', 'Dave-Password-1', CLIENT);
    const recovered = await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: waitingAgain, body: { code: recoveryCodes[0] } });
    expect(recovered.statusCode, recovered.body).toBe(200);
    const wrongCode = await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: waitingAgain, body: { code: secret('ZZ77ZZ') } });
    expect(wrongCode.statusCode).toBeGreaterThanOrEqual(400);

    // OIDC: a password login, and one with a second factor; each token exchanged and refreshed.
    await oidcFlow(ADMIN_USERNAME, ADMIN_PASSWORD);
    t.clock.advance(60_000);
    await oidcFlow('david', 'Dave-Password-1', () => codeAt(t.clock()));

    // Forged credentials: a session token, a bearer token and an enrollment token in the query.
    expect((await call(t, 'GET', `${MGMT}/identities`, { token: secret('forged-session-token-4242') })).statusCode).toBe(401);
    expect((await t.inject({ method: 'GET', url: `${MGMT}/identities`, headers: bearer(secret('forged.bearer.token-4343')) })).statusCode).toBe(401);
    expect((await call(t, 'POST', `${CLIENT}/enroll?method=ott&token=${secret('forged-enrollment-token-4444')}`, { body: {} })).statusCode).toBe(400);
    expect((await call(t, 'POST', `${MGMT}/authenticate?method=password`, { body: { username: 'nobody', password: secret('Nobody-Password-9') } })).statusCode).toBe(401);

    const log = chunks.join('');
    const all = lines();
    // The log is that of the scenario: its logins and enrollments are there.
    const routes = new Set(all.map((l) => l.route));
    for (const route of [
      `${MGMT}/authenticate`,
      `${CLIENT}/authenticate`,
      `${CLIENT}/authenticate/mfa`,
      `${CLIENT}/enroll`,
      `${CLIENT}/enroll/ott`,
      `${CLIENT}/current-identity/mfa/verify`,
      '/oidc/login/password',
      '/oidc/login/totp',
      '/oidc/token',
    ]) {
      expect(routes, route).toContain(route);
    }
    expect(secrets.size).toBeGreaterThan(40);
    const leaked = [...secrets].filter((s) => log.includes(s));
    expect(leaked).toEqual([]);
    // Every line about a request carries its id.
    const requestLines = all.filter((l) => l.route !== undefined);
    expect(requestLines.length).toBeGreaterThan(40);
    expect(requestLines.filter((l) => typeof l.requestId !== 'string')).toEqual([]);
  });
});
