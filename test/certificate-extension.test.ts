// Extension of certificate authenticators over real TLS: an administrator flags an authenticator
// (the API sessions opened with it show it), the device that logged in with its network-issued
// certificate has a new one signed for a CSR while presenting the current one, hands it back with
// extend-verify, and from then on only the new certificate logs in. Refusals: no credential,
// another identity's authenticator, a session not opened with the certificate, a request without
// it, a certificate the network did not issue, bad CSRs and certificates, unknown ids.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto, X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentity,
  createIdentityWithPassword,
  expectError,
  expectMissingCredential,
  type HttpsAnswer,
  json,
  login,
  MGMT,
  networkIssuer,
  overTls,
  startTestController,
  testCertificate,
  testClock,
  type TestController,
} from './helpers.js';

const P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;


/** A device's key and certificate chain, as it presents them in TLS. */
interface Device {
  cert: string;
  key: string;
}

let t: TestController;
let port: number;
let admin: string;

beforeAll(async () => {
  // The TLS peers check certificates against the real time, so the controller starts at it too.
  t = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

function https(method: string, path: string, opts: { body?: unknown; client?: Device; token?: string } = {}): Promise<HttpsAnswer> {
  const { client, ...rest } = opts;
  return overTls(t, port, method, path, { ...rest, ...(client && { client: { certPem: client.cert, keyPem: client.key } }) });
}

function errorOf(res: HttpsAnswer): { code: string; cause?: { field?: string } } {
  return JSON.parse(res.body).error;
}

/** A new key (PKCS#8 PEM) and a CSR for it. */
async function keyAndCsr(): Promise<{ key: string; csr: string }> {
  const keys = (await webcrypto.subtle.generateKey(P256, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name: 'CN=device', keys, signingAlgorithm: P256 }, webcrypto);
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)).toString('base64');
  const key = `-----BEGIN PRIVATE KEY-----\n${pkcs8.replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END PRIVATE KEY-----\n`;
  return { key, csr: csr.toString('pem') };
}

/** An identity enrolled with a one-time token: its network-issued certificate and cert authenticator. */
async function enrolledDevice(name: string): Promise<{ identityId: string; authenticatorId: string; device: Device }> {
  const created = await call(t, 'POST', `${MGMT}/identities`, {
    token: admin,
    body: { name, type: 'Device', isAdmin: false, enrollment: { ott: true } },
  });
  expect(created.statusCode, created.body).toBe(201);
  const identityId = json(created).data.id as string;
  const identity = json(await call(t, 'GET', `${MGMT}/identities/${identityId}`, { token: admin })).data;
  const { key, csr } = await keyAndCsr();
  const enrolled = await call(t, 'POST', `${CLIENT}/enroll/ott`, { body: { token: identity.enrollment.ott.token, clientCsr: csr } });
  expect(enrolled.statusCode, enrolled.body).toBe(200);
  const auths = json(await call(t, 'GET', `${MGMT}/identities/${identityId}/authenticators`, { token: admin })).data;
  return { identityId, authenticatorId: auths[0].id as string, device: { cert: json(enrolled).data.cert as string, key } };
}

async function certLogin(device: Device): Promise<HttpsAnswer> {
  return https('POST', `${CLIENT}/authenticate?method=cert`, { body: {}, client: device });
}

async function certSession(device: Device): Promise<string> {
  const res = await certLogin(device);
  expect(res.statusCode, res.body).toBe(200);
  return JSON.parse(res.body).data.token as string;
}

const extendPath = (api: string, id: string) => `${api}/current-identity/authenticators/${id}/extend`;
const verifyPath = (api: string, id: string) => `${api}/current-identity/authenticators/${id}/extend-verify`;

describe('a device extends its certificate over TLS', () => {
  it.each([CLIENT, MGMT])('flagged, extended with a new key, verified: the new certificate logs in, the old one is refused (%s)', async (api) => {
    const { identityId, authenticatorId, device } = await enrolledDevice(`extend-device-${api.split('/')[2]}`);
    const login1 = await certLogin(device);
    expect(login1.statusCode, login1.body).toBe(200);
    const session = JSON.parse(login1.body).data;
    expect(session).toMatchObject({ isCertExtendable: true, isCertExtendRequested: false, isCertKeyRollRequested: false });

    // The administrator flags the authenticator; the session opened with it shows it.
    const flagged = await call(t, 'POST', `${MGMT}/authenticators/${authenticatorId}/request-extend`, { token: admin, body: { rollKeys: true } });
    expect(flagged.statusCode, flagged.body).toBe(200);
    const current = json(await call(t, 'GET', `${api}/current-api-session`, { token: session.token })).data;
    expect(current).toMatchObject({ isCertExtendRequested: true, isCertKeyRollRequested: true });
    const listed = json(await call(t, 'GET', `${MGMT}/api-sessions/${session.id}`, { token: admin })).data;
    expect(listed).toMatchObject({ isCertExtendRequested: true, isCertKeyRollRequested: true });
    const auth = json(await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin })).data;
    expect(auth).toMatchObject({ isExtendRequested: true, isKeyRollRequested: true, extendRequestedAt: expect.any(String) });

    // A new key: the CSR is signed while the current certificate is presented.
    const next = await keyAndCsr();
    const extended = await https('POST', extendPath(api, authenticatorId), { body: { clientCertCsr: next.csr }, client: device, token: session.token });
    expect(extended.statusCode, extended.body).toBe(200);
    const { clientCert, ca } = JSON.parse(extended.body).data as { clientCert: string; ca: string };
    expect(ca).toBe(t.app.core.pki.trustBundlePem);
    const newCert = new X509Certificate(clientCert);
    expect(newCert.subject).toBe(`CN=${identityId}`);
    expect(newCert.subjectAltName).toContain(`/identity/${identityId}`);
    expect(newCert.checkIssued(new X509Certificate(t.app.core.pki.signingCertPem))).toBe(true);
    const newDevice = { cert: clientCert, key: next.key };

    // Until verified the new certificate is pending: the old one still logs in, the new one not yet.
    expect((await certLogin(device)).statusCode).toBe(200);
    expect((await certLogin(newDevice)).statusCode).toBe(401);

    const verified = await call(t, 'POST', verifyPath(api, authenticatorId), { token: session.token, body: { clientCert } });
    expect(verified.statusCode, verified.body).toBe(200);

    const newLogin = await certLogin(newDevice);
    expect(newLogin.statusCode, newLogin.body).toBe(200);
    expect(JSON.parse(newLogin.body).data).toMatchObject({ identityId, authenticatorId, isCertExtendRequested: false });
    const old = await certLogin(device);
    expect(old.statusCode).toBe(401);
    expect(errorOf(old).code).toBe('INVALID_AUTH');

    const after = json(await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin })).data;
    expect(after).toMatchObject({ isExtendRequested: false, isKeyRollRequested: false, lastExtendRolledKeys: true, isIssuedByNetwork: true });
    expect(after.fingerprint).not.toBe(auth.fingerprint);
    expect(json(await call(t, 'GET', `${api}/current-api-session`, { token: session.token })).data.isCertExtendRequested).toBe(false);
  });

  it('with the same key, unflagged: the extension does not count as a key roll', async () => {
    const { authenticatorId, device } = await enrolledDevice('extend-same-key');
    const token = await certSession(device);
    // A CSR for the key the device already has.
    const der = (pem: string) => Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
    const keys = {
      privateKey: await webcrypto.subtle.importKey('pkcs8', der(device.key), P256, true, ['sign']),
      publicKey: await webcrypto.subtle.importKey('spki', new X509Certificate(device.cert).publicKey.export({ type: 'spki', format: 'der' }), P256, true, ['verify']),
    };
    const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name: 'CN=device', keys, signingAlgorithm: P256 }, webcrypto);
    const extended = await https('POST', extendPath(CLIENT, authenticatorId), { body: { clientCertCsr: csr.toString('pem') }, client: device, token });
    expect(extended.statusCode, extended.body).toBe(200);
    const clientCert = JSON.parse(extended.body).data.clientCert as string;
    expect((await call(t, 'POST', verifyPath(CLIENT, authenticatorId), { token, body: { clientCert } })).statusCode).toBe(200);
    const after = json(await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin })).data;
    expect(after.lastExtendRolledKeys).toBe(false);
    expect((await certLogin({ cert: clientCert, key: device.key })).statusCode).toBe(200);
  });
});

describe('POST /current-identity/authenticators/{id}/extend refusals', () => {
  it('no credential: 401 with the challenges', async () => {
    const { authenticatorId } = await enrolledDevice('extend-no-credential');
    expectMissingCredential(await call(t, 'POST', extendPath(CLIENT, authenticatorId), { body: { clientCertCsr: (await keyAndCsr()).csr } }));
    expectMissingCredential(await call(t, 'POST', verifyPath(CLIENT, authenticatorId), { body: { clientCert: 'x' } }));
  });

  it('a session that does not present the certificate in TLS: 401', async () => {
    const { authenticatorId, device } = await enrolledDevice('extend-no-tls-cert');
    const token = await certSession(device);
    // Same session token, no client certificate in this connection's handshake.
    const res = await https('POST', extendPath(CLIENT, authenticatorId), { body: { clientCertCsr: (await keyAndCsr()).csr }, token });
    expect(res.statusCode).toBe(401);
    expect(errorOf(res).code).toBe('UNAUTHORIZED');
    // Nothing is pending afterwards.
    expectError(await call(t, 'POST', verifyPath(CLIENT, authenticatorId), { token, body: { clientCert: device.cert } }), 409, 'CAN_NOT_UPDATE_AUTHENTICATOR');
  });

  it('a session opened with a password, even presenting the certificate: 401', async () => {
    const { identityId, authenticatorId, device } = await enrolledDevice('extend-password-session');
    const res = await call(t, 'POST', `${MGMT}/authenticators`, {
      token: admin,
      body: { method: 'updb', identityId, username: 'extend-password-session', password: 'device-password-1' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const token = await login(t, 'extend-password-session', 'device-password-1', CLIENT);
    const extended = await https('POST', extendPath(CLIENT, authenticatorId), { body: { clientCertCsr: (await keyAndCsr()).csr }, client: device, token });
    expect(extended.statusCode).toBe(401);
    expect(errorOf(extended).code).toBe('UNAUTHORIZED');
  });

  it("another identity's authenticator: 401, for extend and verify", async () => {
    const victim = await enrolledDevice('extend-victim');
    const attacker = await enrolledDevice('extend-attacker');
    const token = await certSession(attacker.device);
    const csr = (await keyAndCsr()).csr;
    for (const client of [attacker.device, victim.device]) {
      const res = await https('POST', extendPath(CLIENT, victim.authenticatorId), { body: { clientCertCsr: csr }, client, token });
      expect(res.statusCode).toBe(401);
      expect(errorOf(res).code).toBe('UNAUTHORIZED');
    }
    expectError(await call(t, 'POST', verifyPath(CLIENT, victim.authenticatorId), { token, body: { clientCert: victim.device.cert } }), 401, 'UNAUTHORIZED');
    // The victim's certificate still logs in, and only it.
    expect((await certLogin(victim.device)).statusCode).toBe(200);
  });

  it('bad input: 400 naming the field', async () => {
    const { authenticatorId, device } = await enrolledDevice('extend-bad-input');
    const token = await certSession(device);
    expectError(await call(t, 'POST', extendPath(CLIENT, authenticatorId), { token, body: {} }), 400, 'COULD_NOT_VALIDATE', 'clientCertCsr');
    expectError(await call(t, 'POST', extendPath(CLIENT, authenticatorId), { token, body: { clientCertCsr: 7 } }), 400, 'COULD_NOT_VALIDATE', 'clientCertCsr');
    for (const clientCertCsr of ['not a csr', device.cert]) {
      const res = await https('POST', extendPath(CLIENT, authenticatorId), { body: { clientCertCsr }, client: device, token });
      expect(res.statusCode, res.body).toBe(400);
      expect(errorOf(res)).toMatchObject({ code: 'COULD_NOT_PROCESS_CSR', cause: { field: 'clientCertCsr' } });
    }
    // A CSR whose signature is not its key's.
    const forged = (await keyAndCsr()).csr.replace(/[A-Za-z](?=[^\n]*\n-----END)/, (c) => (c === 'A' ? 'B' : 'A'));
    const res = await https('POST', extendPath(CLIENT, authenticatorId), { body: { clientCertCsr: forged }, client: device, token });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res).code).toBe('COULD_NOT_PROCESS_CSR');
  });

  it('unknown id: 404', async () => {
    const { device } = await enrolledDevice('extend-unknown');
    const token = await certSession(device);
    const res = await https('POST', extendPath(CLIENT, 'no-such-authenticator'), { body: { clientCertCsr: (await keyAndCsr()).csr }, client: device, token });
    expect(res.statusCode).toBe(404);
    expectError(await call(t, 'POST', verifyPath(CLIENT, 'no-such-authenticator'), { token, body: { clientCert: device.cert } }), 404, 'NOT_FOUND');
  });

  it('a certificate the network did not issue, or a password authenticator: 409 (401 first without a certificate in TLS, as in the established controller)', async () => {
    const identityId = await createIdentity(t, admin, { name: 'extend-third-party' });
    const cert = await testCertificate('extend-third-party', { issuer: await networkIssuer(t) });
    const created = await call(t, 'POST', `${MGMT}/authenticators`, { token: admin, body: { method: 'cert', identityId, certPem: cert.certPem } });
    expect(created.statusCode, created.body).toBe(201);
    const authenticatorId = json(created).data.id as string;
    const device = { cert: cert.certPem, key: cert.keyPem };
    const token = await certSession(device);
    const res = await https('POST', extendPath(CLIENT, authenticatorId), { body: { clientCertCsr: (await keyAndCsr()).csr }, client: device, token });
    expect(res.statusCode).toBe(409);
    expect(errorOf(res).code).toBe('CAN_NOT_UPDATE_AUTHENTICATOR');

    const updb = await createIdentityWithPassword(t, admin, { name: 'extend-updb', username: 'extend-updb', password: 'device-password-1' });
    const updbToken = await login(t, 'extend-updb', 'device-password-1', CLIENT);
    expectError(await call(t, 'POST', extendPath(CLIENT, updb.authenticatorId), { token: updbToken, body: { clientCertCsr: (await keyAndCsr()).csr } }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'POST', extendPath(CLIENT, 'no-such-authenticator'), { token: updbToken, body: { clientCertCsr: (await keyAndCsr()).csr } }), 401, 'UNAUTHORIZED');
    const presenting = await https('POST', extendPath(CLIENT, updb.authenticatorId), { body: { clientCertCsr: (await keyAndCsr()).csr }, client: device, token: updbToken });
    expect(presenting.statusCode).toBe(409);
    expect(errorOf(presenting).code).toBe('CAN_NOT_UPDATE_AUTHENTICATOR');
  });
});

describe('POST /current-identity/authenticators/{id}/extend-verify refusals', () => {
  it('nothing pending: 409; a certificate other than the one issued: 400; the pending one stays', async () => {
    const { authenticatorId, device } = await enrolledDevice('verify-refusals');
    const token = await certSession(device);
    expectError(await call(t, 'POST', verifyPath(CLIENT, authenticatorId), { token, body: { clientCert: device.cert } }), 409, 'CAN_NOT_UPDATE_AUTHENTICATOR');

    const next = await keyAndCsr();
    const extended = await https('POST', extendPath(CLIENT, authenticatorId), { body: { clientCertCsr: next.csr }, client: device, token });
    expect(extended.statusCode, extended.body).toBe(200);
    expectError(await call(t, 'POST', verifyPath(CLIENT, authenticatorId), { token, body: { clientCert: device.cert } }), 400, 'INVALID_CLIENT_CERT', 'clientCert');
    expectError(await call(t, 'POST', verifyPath(CLIENT, authenticatorId), { token, body: { clientCert: 'garbage' } }), 400, 'INVALID_CLIENT_CERT', 'clientCert');
    expectError(await call(t, 'POST', verifyPath(CLIENT, authenticatorId), { token, body: {} }), 400, 'COULD_NOT_VALIDATE', 'clientCert');
    // The old certificate is still the active one, and the pending one can still be verified.
    expect((await certLogin(device)).statusCode).toBe(200);
    const clientCert = JSON.parse(extended.body).data.clientCert as string;
    expect((await call(t, 'POST', verifyPath(CLIENT, authenticatorId), { token, body: { clientCert } })).statusCode).toBe(200);
    // Verified once: a second verification has nothing pending.
    expectError(await call(t, 'POST', verifyPath(CLIENT, authenticatorId), { token, body: { clientCert } }), 409, 'CAN_NOT_UPDATE_AUTHENTICATOR');
  });
});

describe('POST /authenticators/{id}/request-extend', () => {
  it('a password authenticator: 403 FORBIDDEN, nothing flagged', async () => {
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'flag-updb', username: 'flag-updb', password: 'device-password-1' });
    expectError(await call(t, 'POST', `${MGMT}/authenticators/${authenticatorId}/request-extend`, { token: admin, body: { rollKeys: false } }), 403, 'FORBIDDEN');
    expect(json(await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin })).data.isExtendRequested).toBe(false);
  });

  it('rollKeys may be left out; no credential 401; a non-admin 401; bad body 400; unknown id 404', async () => {
    const { authenticatorId } = await enrolledDevice('flag-refusals');
    const url = `${MGMT}/authenticators/${authenticatorId}/request-extend`;
    expectMissingCredential(await call(t, 'POST', url, { body: {} }));
    await createIdentityWithPassword(t, admin, { name: 'flag-user', username: 'flag-user', password: 'user-password-1' });
    expectError(await call(t, 'POST', url, { token: await login(t, 'flag-user', 'user-password-1'), body: {} }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'POST', url, { token: admin, body: { rollKeys: 'yes' } }), 400, 'COULD_NOT_VALIDATE', 'rollKeys');
    expectError(await call(t, 'POST', `${MGMT}/authenticators/no-such-authenticator/request-extend`, { token: admin, body: {} }), 404, 'NOT_FOUND');
    expect(json(await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin })).data.isExtendRequested).toBe(false);

    expect((await call(t, 'POST', url, { token: admin, body: {} })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/authenticators/${authenticatorId}`, { token: admin })).data).toMatchObject({
      isExtendRequested: true,
      isKeyRollRequested: false,
    });
  });
});
