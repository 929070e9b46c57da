// Certificate login over real TLS: POST /authenticate?method=cert identifies the caller by the leaf
// certificate of the TLS handshake, matched by fingerprint to a cert authenticator, when its chain
// leads to the network PKI or to a verified CA that allows logins (behaviour.md §7). CAs created,
// verified, disabled and deleted while the controller runs take effect at the next login.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentity,
  expectError,
  type HttpsAnswer,
  json,
  MGMT,
  networkIssuer,
  overTls,
  selfSignedCertificate,
  startTestController,
  testCa,
  testCertificate,
  type TestCertificate,
  testClock,
  type TestController,
  type TestIssuer,
} from './helpers.js';

const DAY = 86_400_000;


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

/**
 * POST over TLS; `client.certPem` may be a chain (leaf first), sent as it is. The client trusts the
 * network's root and signing CA unless `trust` says otherwise; its TLS completes a lone leaf's chain
 * from what it trusts, so a client trusting the root alone sends a network leaf without its issuer.
 */
function post(path: string, body: unknown, client?: { certPem: string; keyPem: string }, trust?: string): Promise<HttpsAnswer> {
  return overTls(t, port, 'POST', path, { body, ...(client && { client }), ...(trust !== undefined && { trust }) });
}

async function certIdentity(name: string, validity: { notBefore?: Date; notAfter?: Date } = {}, authPolicyId?: string) {
  const admin = await asAdmin(t);
  const id = await createIdentity(t, admin, { name, ...(authPolicyId && { authPolicyId }) });
  const cert = await testCertificate(name, { ...validity, issuer: await networkIssuer(t) });
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
    // The network's chain ends at its self-signed root.
    expect(json(await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin })).data.lastAuthResolvedToRoot).toBe(true);
  });

  it('without a client certificate: 401 INVALID_AUTH', async () => {
    const res = await post(`${CLIENT}/authenticate?method=cert`, {});
    expect(res.statusCode).toBe(401);
    expect(JSON.parse(res.body).error.code).toBe('INVALID_AUTH');
    expect(res.headers['overlay-session']).toBeUndefined();
  });

  it('with a certificate no identity has: 401 INVALID_AUTH', async () => {
    const stranger = await testCertificate('stranger', { issuer: await networkIssuer(t) });
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

/** Creates a CA of `issuer` as the admin; answers its id and verification token. */
async function registerCa(admin: string, name: string, issuer: TestIssuer, isAuthEnabled = true) {
  const res = await call(t, 'POST', `${MGMT}/cas`, {
    token: admin,
    body: { name, certPem: issuer.certPem, isAuthEnabled, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: false, identityRoles: [] },
  });
  expect(res.statusCode, res.body).toBe(201);
  const id = json(res).data.id as string;
  const token = json(await call(t, 'GET', `${MGMT}/cas/${id}`, { token: admin })).data.verificationToken as string;
  return { id, token };
}

async function verifyCa(admin: string, ca: { id: string; token: string }, issuer: TestIssuer): Promise<void> {
  const proof = await testCertificate(ca.token, { issuer });
  const res = await call(t, 'POST', `${MGMT}/cas/${ca.id}/verify`, { token: admin, body: proof.certPem, headers: { 'content-type': 'text/plain' } });
  expect(res.statusCode, res.body).toBe(200);
}

/** An identity whose cert authenticator holds `cert`. */
async function identityWith(admin: string, name: string, cert: Pick<TestCertificate, 'certPem'>): Promise<{ id: string; authenticatorId: string }> {
  const id = await createIdentity(t, admin, { name });
  const res = await call(t, 'POST', `${MGMT}/authenticators`, { token: admin, body: { method: 'cert', identityId: id, certPem: cert.certPem } });
  expect(res.statusCode, res.body).toBe(201);
  return { id, authenticatorId: json(res).data.id as string };
}

const loginWith = (client: { certPem: string; keyPem: string }, trust?: string) => post(`${CLIENT}/authenticate?method=cert`, {}, client, trust);

function refused(res: HttpsAnswer): void {
  expect(res.statusCode, res.body).toBe(401);
  expect(JSON.parse(res.body).error.code).toBe('INVALID_AUTH');
  expect(res.headers['overlay-session']).toBeUndefined();
}

describe('the chain of a certificate login', () => {
  it('a certificate of no trusted CA logs no one in, though an authenticator holds it', async () => {
    const admin = await asAdmin(t);
    const cert = await selfSignedCertificate('self-signed-holder');
    await identityWith(admin, 'self-signed-holder', cert);
    refused(await loginWith(cert));
  });

  it('a network certificate sent without its signing CA logs in, marked improperClientCertChain; with it, not', async () => {
    const admin = await asAdmin(t);
    const cert = await testCertificate('improper-chain', { issuer: await networkIssuer(t) });
    const { id } = await identityWith(admin, 'improper-chain', cert);
    const { rootCertPem, signingCertPem } = t.app.core.pki;

    // Trusting the root alone, the client's TLS has nothing to complete the chain with: the leaf goes alone.
    const alone = await loginWith(cert, rootCertPem);
    expect(alone.statusCode, alone.body).toBe(200);
    expect(JSON.parse(alone.body).data).toMatchObject({ identityId: id, improperClientCertChain: true });
    const stored = await call(t, 'GET', `${MGMT}/api-sessions/${JSON.parse(alone.body).data.id}`, { token: admin });
    expect(json(stored).data.improperClientCertChain).toBe(true);

    const chained = await loginWith({ certPem: cert.certPem + signingCertPem, keyPem: cert.keyPem }, rootCertPem);
    expect(chained.statusCode, chained.body).toBe(200);
    expect(JSON.parse(chained.body).data).toMatchObject({ identityId: id, improperClientCertChain: false });
  });

  it('a third-party CA: refused while unverified, admitted once verified, refused when isAuthEnabled is false or it is deleted', async () => {
    const admin = await asAdmin(t);
    const issuer = await testCa('third-party login CA');
    const ca = await registerCa(admin, 'third-party-login', issuer);
    const cert = await testCertificate('third-party-user', { issuer });
    const { id, authenticatorId } = await identityWith(admin, 'third-party-user', cert);

    refused(await loginWith(cert));
    await verifyCa(admin, ca, issuer);
    const admitted = await loginWith(cert);
    expect(admitted.statusCode, admitted.body).toBe(200);
    expect(JSON.parse(admitted.body).data).toMatchObject({ identityId: id, authenticatorId, improperClientCertChain: false });
    // Sent with the CA certificate after it, the leaf still identifies the caller.
    expect((await loginWith({ certPem: cert.certPem + issuer.certPem, keyPem: cert.keyPem })).statusCode).toBe(200);

    expect((await call(t, 'PATCH', `${MGMT}/cas/${ca.id}`, { token: admin, body: { isAuthEnabled: false } })).statusCode).toBe(200);
    refused(await loginWith(cert));
    expect((await call(t, 'PATCH', `${MGMT}/cas/${ca.id}`, { token: admin, body: { isAuthEnabled: true } })).statusCode).toBe(200);
    expect((await loginWith(cert)).statusCode).toBe(200);

    expect((await call(t, 'DELETE', `${MGMT}/cas/${ca.id}`, { token: admin })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin })).statusCode).toBe(404);
    refused(await loginWith(cert));
  });

  it('records whether the last login chained to a root: a self-signed CA yes, a CA registered as an intermediate no', async () => {
    const admin = await asAdmin(t);
    const root = await testCa('resolved root');
    const intermediate = await testCa('resolved intermediate', { issuer: root });
    const results: boolean[] = [];
    for (const [name, issuer] of [
      ['resolved-by-root', root],
      ['resolved-by-intermediate', intermediate],
    ] as const) {
      const ca = await registerCa(admin, name, issuer);
      await verifyCa(admin, ca, issuer);
      const cert = await testCertificate(`${name}-user`, { issuer });
      const { authenticatorId } = await identityWith(admin, `${name}-user`, cert);
      expect((await loginWith(cert)).statusCode).toBe(200);
      results.push(json(await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin })).data.lastAuthResolvedToRoot);
    }
    expect(results).toEqual([true, false]);
  });

  it('a verified CA with isAuthEnabled false never admits its certificates', async () => {
    const admin = await asAdmin(t);
    const issuer = await testCa('no-auth CA');
    const ca = await registerCa(admin, 'no-auth-ca', issuer, false);
    await verifyCa(admin, ca, issuer);
    const cert = await testCertificate('no-auth-user', { issuer });
    await identityWith(admin, 'no-auth-user', cert);
    refused(await loginWith(cert));
  });

  it('a rogue leaf is not admitted by a legitimate certificate further up its chain', async () => {
    const admin = await asAdmin(t);
    const legit = await testCa('legit CA');
    await verifyCa(admin, await registerCa(admin, 'legit-ca', legit), legit);
    const legitUser = await testCertificate('legit-user', { issuer: legit });
    const { id: legitId } = await identityWith(admin, 'legit-user', legitUser);

    // A leaf naming the legitimate CA as its issuer but signed by another key, with an authenticator of its own.
    const rogueCa = await testCa('rogue CA');
    const rogue = await testCertificate('rogue-user', { issuer: rogueCa, issuerName: legit.cert.subject });
    await identityWith(admin, 'rogue-user', rogue);
    refused(await loginWith({ certPem: rogue.certPem + legit.certPem, keyPem: rogue.keyPem }));
    refused(await loginWith({ certPem: rogue.certPem + rogueCa.certPem + legit.certPem, keyPem: rogue.keyPem }));

    // A rogue self-signed leaf with the legitimate user's certificate (and its CA) as fillers: the leaf
    // is who calls, and it chains to nothing.
    const stranger = await selfSignedCertificate('filler-carrier');
    const carried = await loginWith({ certPem: stranger.certPem + legitUser.certPem + legit.certPem, keyPem: stranger.keyPem });
    refused(carried);
    // The legitimate user still logs in as itself.
    const own = await loginWith(legitUser);
    expect(own.statusCode, own.body).toBe(200);
    expect(JSON.parse(own.body).data.identityId).toBe(legitId);
  });
});
