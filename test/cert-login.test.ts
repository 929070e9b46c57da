// Certificate login over real TLS: POST /authenticate?method=cert identifies the caller by the
// client certificate of the TLS handshake, matched by fingerprint to a cert authenticator.
import { request } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentity,
  expectError,
  json,
  MGMT,
  selfSignedCertificate,
  startTestController,
  testClock,
  type TestController,
} from './helpers.js';

const DAY = 86_400_000;

interface HttpsAnswer {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

let t: TestController;
let port: number;

beforeAll(async () => {
  // The TLS peers check certificates against the real time, so the controller starts at it too.
  t = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
});
afterAll(async () => {
  await t.close();
});

function post(path: string, body: unknown, client?: { certPem: string; keyPem: string }): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent: false,
        ca: t.app.core.pki.trustBundlePem,
        ...(client && { cert: client.certPem, key: client.keyPem }),
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function certIdentity(name: string, validity: { notBefore?: Date; notAfter?: Date } = {}, authPolicyId?: string) {
  const admin = await asAdmin(t);
  const id = await createIdentity(t, admin, { name, ...(authPolicyId && { authPolicyId }) });
  const cert = await selfSignedCertificate(name, validity);
  const res = await call(t, 'POST', `${MGMT}/authenticators`, {
    token: admin,
    body: { method: 'cert', identityId: id, certPem: cert.certPem },
  });
  expect(res.statusCode, res.body).toBe(201);
  return { id, authenticatorId: json(res).data.id as string, cert };
}

describe('POST /authenticate?method=cert over TLS', () => {
  it.each([CLIENT, MGMT])('logs in the identity whose certificate the client presents (%s)', async (api) => {
    const { id, authenticatorId, cert } = await certIdentity(`cert-login-${api.split('/')[2]}`);
    const res = await post(`${api}/authenticate?method=cert`, {}, cert);
    expect(res.statusCode, res.body).toBe(200);
    const s = JSON.parse(res.body).data;
    expect(s).toMatchObject({ identityId: id, authenticatorId, isMfaRequired: false });
    expect(res.headers['overlay-session']).toBe(s.token);
    const me = await call(t, 'GET', `${CLIENT}/current-identity`, { token: s.token });
    expect(me.statusCode).toBe(200);
    expect(json(me).data.id).toBe(id);
    const admin = await asAdmin(t);
    expect(json(await call(t, 'GET', `${MGMT}/api-sessions/${s.id}`, { token: admin })).data.authMethod).toBe('cert');
  });

  it('without a client certificate: 401 INVALID_AUTH', async () => {
    const res = await post(`${CLIENT}/authenticate?method=cert`, {});
    expect(res.statusCode).toBe(401);
    expect(JSON.parse(res.body).error.code).toBe('INVALID_AUTH');
    expect(res.headers['overlay-session']).toBeUndefined();
  });

  it('with a certificate no identity has: 401 INVALID_AUTH', async () => {
    const stranger = await selfSignedCertificate('stranger');
    const res = await post(`${CLIENT}/authenticate?method=cert`, {}, stranger);
    expect(res.statusCode).toBe(401);
    expect(JSON.parse(res.body).error.code).toBe('INVALID_AUTH');
  });

  it('the certificate of the cert authenticator is needed: a password login is a password login', async () => {
    const { cert } = await certIdentity('cert-and-password');
    // Presenting a certificate does not turn a password login into a certificate login.
    const res = await post(`${CLIENT}/authenticate?method=password`, { username: 'nobody-at-all', password: 'whatever' }, cert);
    expect(res.statusCode).toBe(401);
  });

  it('refuses a disabled identity', async () => {
    const { id, cert } = await certIdentity('cert-disabled');
    const admin = await asAdmin(t);
    expect((await call(t, 'POST', `${MGMT}/identities/${id}/disable`, { token: admin, body: { durationMinutes: 0 } })).statusCode).toBe(200);
    const res = await post(`${CLIENT}/authenticate?method=cert`, {}, cert);
    expect(res.statusCode).toBe(401);
    expect(JSON.parse(res.body).error.code).toBe('INVALID_AUTH');
  });

  it('honours the policy: cert not allowed, expired certificates', async () => {
    const admin = await asAdmin(t);
    const policy = await call(t, 'POST', `${MGMT}/auth-policies`, {
      token: admin,
      body: {
        name: 'strict-certs',
        primary: {
          cert: { allowed: true, allowExpiredCerts: false },
          extJwt: { allowed: false, allowedSigners: null },
          updb: {
            allowed: true,
            maxAttempts: 0,
            lockoutDurationMinutes: 0,
            minPasswordLength: 5,
            requireMixedCase: false,
            requireNumberChar: false,
            requireSpecialChar: false,
          },
        },
        secondary: { requireTotp: false, requireExtJwtSigner: null },
      },
    });
    expect(policy.statusCode).toBe(201);
    const policyId = json(policy).data.id as string;
    const now = Date.now();
    const expired = { notBefore: new Date(now - 10 * DAY), notAfter: new Date(now - DAY) };

    // An expired certificate under the default policy (allowExpiredCerts true) logs in ...
    const lenient = await certIdentity('cert-expired-ok', expired);
    expect((await post(`${CLIENT}/authenticate?method=cert`, {}, lenient.cert)).statusCode).toBe(200);
    // ... under a policy refusing expired certificates it does not.
    const strict = await certIdentity('cert-expired-refused', expired, policyId);
    const refused = await post(`${CLIENT}/authenticate?method=cert`, {}, strict.cert);
    expect(refused.statusCode).toBe(401);
    expect(JSON.parse(refused.body).error.code).toBe('INVALID_AUTH');

    // cert.allowed false refuses certificate logins altogether.
    const valid = await certIdentity('cert-not-allowed', {}, policyId);
    expect((await post(`${CLIENT}/authenticate?method=cert`, {}, valid.cert)).statusCode).toBe(200);
    expect((await call(t, 'PATCH', `${MGMT}/auth-policies/${policyId}`, { token: admin, body: { primary: { cert: { allowed: false } } } })).statusCode).toBe(200);
    const notAllowed = await post(`${CLIENT}/authenticate?method=cert`, {}, valid.cert);
    expect(notAllowed.statusCode).toBe(401);
    expect(JSON.parse(notAllowed.body).error.code).toBe('INVALID_AUTH');
  });

  it('password logins work over the same TLS listener', async () => {
    const res = await post(`${MGMT}/authenticate?method=password`, { username: 'admin', password: 'admin-password-1' });
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body).data.token).toBeTruthy();
    expectError(
      await call(t, 'POST', `${CLIENT}/authenticate?method=cert`, { body: {} }),
      401,
      'INVALID_AUTH',
    );
  });
});
