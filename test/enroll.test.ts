// The Client API's enrollment operations: a certificate for a CSR (ott), a first password (updb),
// the generic /enroll with JSON or a raw PEM CSR, the network JWTs, the enrollment JWKS and the
// challenge; and reverting a network-issued certificate to an ott enrollment.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createPublicKey, verify, webcrypto, X509Certificate } from 'node:crypto';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authPolicyBody,
  ADMIN_ENV,
  asAdmin,
  authenticate,
  call,
  CLIENT,
  createIdentity,
  expectError,
  holdWrites,
  json,
  MGMT,
  selfSignedCertificate,
  startTestController,
  type TestController,
} from './helpers.js';

const HOUR = 3_600_000;

let t: TestController;
let admin: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

type KeyAlgorithm = { name: 'ECDSA'; namedCurve: string; hash: string } | { name: 'RSASSA-PKCS1-v1_5'; modulusLength: number; publicExponent: Uint8Array; hash: string };
const P256: KeyAlgorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };

/** A PEM CSR for a new key of `alg`. */
async function csrPem(alg: KeyAlgorithm = P256, name = 'CN=device'): Promise<string> {
  const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name, keys, signingAlgorithm: alg }, webcrypto);
  return csr.toString('pem');
}

/** An identity with an outstanding enrollment of `method`; answers the identity and the token. */
async function enrolling(name: string, method: 'ott' | 'updb' = 'ott'): Promise<{ identityId: string; token: string; enrollmentId: string }> {
  const identityId = await createIdentity(t, admin, { name });
  const res = await call(t, 'POST', `${MGMT}/enrollments`, {
    token: admin,
    body: { method, identityId, expiresAt: new Date(t.clock() + HOUR).toISOString(), ...(method === 'updb' ? { username: name } : {}) },
  });
  expect(res.statusCode, res.body).toBe(201);
  const enrollmentId = json(res).data.id as string;
  const e = json(await call(t, 'GET', `${MGMT}/enrollments/${enrollmentId}`, { token: admin })).data;
  return { identityId, token: e.token as string, enrollmentId };
}

const enrollOtt = (body: Record<string, unknown>) => call(t, 'POST', `${CLIENT}/enroll/ott`, { body });

describe('POST /enroll/ott', () => {
  it('signs a client certificate for the CSR and records the cert authenticator; the enrollment is gone', async () => {
    const { identityId, token, enrollmentId } = await enrolling('ott-device');
    const res = await enrollOtt({ token, clientCsr: await csrPem() });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const chain = json(res).data.cert as string;
    const [leafPem, caPem] = chain.split(/(?<=-----END CERTIFICATE-----\n)/);
    expect(caPem).toBe(t.app.core.pki.signingCertPem);
    const leaf = new X509Certificate(leafPem!);
    const signing = new X509Certificate(t.app.core.pki.signingCertPem);
    expect(leaf.verify(signing.publicKey)).toBe(true);
    expect(leaf.ca).toBe(false);
    expect(leaf.subjectAltName).toBe(`URI:spiffe://${t.app.core.pki.trustDomain}/identity/${identityId}`);
    expect(leaf.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);
    const ext = new x509.X509Certificate(leaf.raw);
    expect(ext.getExtension(x509.KeyUsagesExtension)!.usages).toBe(x509.KeyUsageFlags.digitalSignature);
    expect(Date.parse(leaf.validTo) - t.clock()).toBeGreaterThan(360 * 24 * HOUR);

    const auths = json(await call(t, 'GET', `${MGMT}/identities/${identityId}/authenticators`, { token: admin })).data;
    expect(auths).toHaveLength(1);
    expect(auths[0]).toMatchObject({ method: 'cert', identityId, isIssuedByNetwork: true, fingerprint: leaf.fingerprint.replace(/:/g, '').toLowerCase() });
    expectError(await call(t, 'GET', `${MGMT}/enrollments/${enrollmentId}`, { token: admin }), 404, 'NOT_FOUND');
    // Used once: the same token again is told so (410), until its enrollment would have expired.
    expectError(await enrollOtt({ token, clientCsr: await csrPem() }), 410, 'INVALID_ENROLLMENT_ALREADY_ENROLLED');
  });

  it('accepts EC P-384 and RSA 2048 keys', async () => {
    for (const [name, alg] of [
      ['p384-device', { name: 'ECDSA', namedCurve: 'P-384', hash: 'SHA-384' }],
      ['rsa-device', { name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }],
    ] as const) {
      const { token } = await enrolling(name);
      const res = await enrollOtt({ token, clientCsr: await csrPem(alg) });
      expect(res.statusCode, `${name}: ${res.body}`).toBe(200);
    }
  });

  it('answers 400, not 410, for a token whose enrollment was deleted while it was being used', async () => {
    const { token, enrollmentId } = await enrolling('deleted-meanwhile');
    // Writes held, so the delete is queued but not committed when the enrollment reads the token,
    // and commits before the enrollment's own write.
    const writer = await holdWrites(t);
    const deleted = call(t, 'DELETE', `${MGMT}/enrollments/${enrollmentId}`, { token: admin });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const enrolled = enrollOtt({ token, clientCsr: await csrPem() });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await writer.release();
    expect((await deleted).statusCode).toBe(200);
    // The token was never used: it is no longer valid, not "already enrolled".
    expectError(await enrolled, 400, 'INVALID_ENROLLMENT_TOKEN');
  });

  it('refuses CSRs it will not sign, and the enrollment stays outstanding', async () => {
    const { token, enrollmentId } = await enrolling('bad-csr-device');
    expectError(await enrollOtt({ token }), 400, 'MISSING_OR_INVALID_CSR', 'clientCsr');
    expectError(await enrollOtt({ token, clientCsr: 'not a csr' }), 400, 'MISSING_OR_INVALID_CSR', 'clientCsr');
    expectError(await enrollOtt({ token, clientCsr: t.app.core.pki.signingCertPem }), 400, 'MISSING_OR_INVALID_CSR', 'clientCsr');
    const pem = await csrPem();
    expectError(await enrollOtt({ token, clientCsr: pem + pem }), 400, 'MISSING_OR_INVALID_CSR', 'clientCsr');
    // A CSR whose signature does not match its key: the last byte of the signature changed.
    const forged = Buffer.from(new x509.Pkcs10CertificateRequest(await csrPem()).rawData);
    forged[forged.length - 1] = forged[forged.length - 1]! ^ 0x01;
    expect(() => new x509.Pkcs10CertificateRequest(forged)).not.toThrow();
    expectError(await enrollOtt({ token, clientCsr: x509.PemConverter.encode(forged, 'CERTIFICATE REQUEST') }), 400, 'COULD_NOT_PROCESS_CSR', 'clientCsr');
    const weakRsa = { name: 'RSASSA-PKCS1-v1_5', modulusLength: 1024, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' } as const;
    expectError(await enrollOtt({ token, clientCsr: await csrPem(weakRsa) }), 400, 'COULD_NOT_PROCESS_CSR', 'clientCsr');
    expectError(await enrollOtt({ token, clientCsr: await csrPem({ name: 'ECDSA', namedCurve: 'P-521', hash: 'SHA-512' }) }), 400, 'COULD_NOT_PROCESS_CSR', 'clientCsr');
    expectError(await enrollOtt({ token, clientCsr: 'x'.repeat(20_000) }), 400, 'COULD_NOT_VALIDATE');
    expect((await call(t, 'GET', `${MGMT}/enrollments/${enrollmentId}`, { token: admin })).statusCode).toBe(200);
    expect((await enrollOtt({ token, clientCsr: await csrPem() })).statusCode).toBe(200);
  });

  it('refuses unknown, expired and wrong-method tokens, and a missing one', async () => {
    expectError(await enrollOtt({ token: '3b0f7c8e-7a43-4c1e-9a36-0c1f1b2f8e11', clientCsr: await csrPem() }), 400, 'INVALID_ENROLLMENT_TOKEN');
    expectError(await enrollOtt({ clientCsr: await csrPem() }), 400, 'COULD_NOT_VALIDATE', 'token');
    const updb = await enrolling('updb-not-ott', 'updb');
    expectError(await enrollOtt({ token: updb.token, clientCsr: await csrPem() }), 400, 'INVALID_ENROLLMENT_TOKEN');
    const { token } = await enrolling('expiring-device');
    t.clock.advance(HOUR);
    expectError(await enrollOtt({ token, clientCsr: await csrPem() }), 400, 'ENROLLMENT_EXPIRED');
    admin = await asAdmin(t);
  });

  it('a used token is told so until its enrollment would have expired; then it is unknown', async () => {
    const { token } = await enrolling('spent-device');
    expect((await enrollOtt({ token, clientCsr: await csrPem() })).statusCode).toBe(200);
    expectError(await enrollOtt({ token, clientCsr: await csrPem() }), 410, 'INVALID_ENROLLMENT_ALREADY_ENROLLED');
    t.clock.advance(HOUR + 1_000);
    admin = await asAdmin(t);
    expectError(await enrollOtt({ token, clientCsr: await csrPem() }), 400, 'INVALID_ENROLLMENT_TOKEN');
  });

  it('gives exactly one certificate for a token used by several requests at once', async () => {
    const { identityId, token } = await enrolling('raced-device');
    const csrs = await Promise.all(Array.from({ length: 6 }, () => csrPem()));
    const answers = await Promise.all(csrs.map((clientCsr) => enrollOtt({ token, clientCsr })));
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, 410, 410, 410, 410, 410]);
    for (const r of answers.filter((a) => a.statusCode !== 200)) expectError(r, 410, 'INVALID_ENROLLMENT_ALREADY_ENROLLED');
    const auths = json(await call(t, 'GET', `${MGMT}/identities/${identityId}/authenticators`, { token: admin })).data;
    expect(auths).toHaveLength(1);
  });
});

describe('POST /enroll (generic)', () => {
  it('takes a raw PEM CSR as text/plain or application/x-pem-file, and JSON', async () => {
    for (const type of ['text/plain', 'application/x-pem-file', 'application/json']) {
      const { token } = await enrolling(`generic-${type.replace(/\W/g, '-')}`);
      const pem = await csrPem();
      const res = await call(t, 'POST', `${CLIENT}/enroll?method=ott&token=${token}`, {
        body: type === 'application/json' ? JSON.stringify({ clientCsr: pem }) : pem,
        headers: { 'content-type': type },
      });
      expect(res.statusCode, `${type}: ${res.body}`).toBe(200);
      expect(json(res).data.cert).toContain('-----BEGIN CERTIFICATE-----');
    }
  });

  it('is the only enrollment route that takes text/plain: the JSON routes answer 415, as the rest of the API', async () => {
    const { token } = await enrolling('text-on-json-route');
    const body = JSON.stringify({ token, clientCsr: await csrPem() });
    for (const [method, url] of [
      ['POST', `${CLIENT}/enroll/ott`],
      ['POST', `${CLIENT}/enroll/updb?token=${token}`],
      ['POST', `${MGMT}/identities`],
    ] as const) {
      expectError(await call(t, method, url, { token: admin, body, headers: { 'content-type': 'text/plain' } }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    }
    // An empty body is no body, whatever it is said to be.
    const id = await createIdentity(t, admin, { name: 'text-empty-delete' });
    const gone = await call(t, 'DELETE', `${MGMT}/identities/${id}`, { token: admin, headers: { 'content-type': 'text/plain' } });
    expect(gone.statusCode, gone.body).toBe(200);
  });

  it('takes an application/pkcs7 CSR as DER, as its base64 or as PEM', async () => {
    for (const form of ['der', 'base64', 'pem'] as const) {
      const { token } = await enrolling(`generic-pkcs7-${form}`);
      const pem = await csrPem();
      const der = Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
      const body = form === 'der' ? der : form === 'base64' ? der.toString('base64') : pem;
      const res = await call(t, 'POST', `${CLIENT}/enroll?method=ott&token=${token}`, { body, headers: { 'content-type': 'application/pkcs7' } });
      expect(res.statusCode, `${form}: ${res.body}`).toBe(200);
      expect(json(res).data.cert).toContain('-----BEGIN CERTIFICATE-----');
    }
    const { token } = await enrolling('generic-pkcs7-junk');
    expectError(await call(t, 'POST', `${CLIENT}/enroll?method=ott&token=${token}`, { body: 'not a csr', headers: { 'content-type': 'application/pkcs7' } }), 400, 'MISSING_OR_INVALID_CSR', 'body');
  });

  it('finds the method from the token, and refuses a method the token is not for', async () => {
    const updb = await enrolling('generic-updb', 'updb');
    const res = await call(t, 'POST', `${CLIENT}/enroll?token=${updb.token}`, { body: { password: 'generic-password-1' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res).data).toEqual({ username: 'generic-updb' });
    const ott = await enrolling('generic-ott-wrong-method');
    expectError(await call(t, 'POST', `${CLIENT}/enroll?method=updb&token=${ott.token}`, { body: { password: 'generic-password-1' } }), 400, 'INVALID_ENROLLMENT_TOKEN');
    expectError(await call(t, 'POST', `${CLIENT}/enroll?token=no-such-token`, { body: { clientCsr: await csrPem() } }), 400, 'INVALID_ENROLLMENT_TOKEN');
    expectError(await call(t, 'POST', `${CLIENT}/enroll?method=erott&token=${ott.token}`, { body: {} }), 400, 'INVALID_ENROLLMENT_TOKEN');
    expectError(await call(t, 'POST', `${CLIENT}/enroll?method=no-such-method&token=${ott.token}`, { body: {} }), 400, 'COULD_NOT_VALIDATE');
    expectError(await call(t, 'POST', `${CLIENT}/enroll`, { body: {} }), 400, 'COULD_NOT_VALIDATE');
  });
});

describe('POST /enroll/updb', () => {
  it('makes the password authenticator with the enrollment username; the password then logs in', async () => {
    const { identityId, token } = await enrolling('updb-person', 'updb');
    const res = await call(t, 'POST', `${CLIENT}/enroll/updb?token=${token}`, { body: { password: 'updb-person-pw1' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res).data).toEqual({ username: 'updb-person' });
    const login = await authenticate(t, 'updb-person', 'updb-person-pw1', { api: CLIENT });
    expect(login.statusCode).toBe(200);
    expect(json(login).data.identity.id).toBe(identityId);
    expectError(await call(t, 'POST', `${CLIENT}/enroll/updb?token=${token}`, { body: { password: 'updb-person-pw2' } }), 410, 'INVALID_ENROLLMENT_ALREADY_ENROLLED');
  });

  it("holds the password to the identity's auth policy, and leaves the enrollment outstanding when it fails", async () => {
    const policy = await call(t, 'POST', `${MGMT}/auth-policies`, {
      token: admin,
      body: authPolicyBody('strict-passwords', {
        primary: { cert: { allowed: true }, updb: { allowed: true, maxAttempts: 5, minPasswordLength: 12, requireMixedCase: true, requireNumberChar: true } },
      }),
    });
    expect(policy.statusCode, policy.body).toBe(201);
    const identityId = await createIdentity(t, admin, { name: 'strict-person', authPolicyId: json(policy).data.id });
    const created = await call(t, 'POST', `${MGMT}/enrollments`, {
      token: admin,
      body: { method: 'updb', identityId, username: 'strict-person', expiresAt: new Date(t.clock() + HOUR).toISOString() },
    });
    const e = json(await call(t, 'GET', `${MGMT}/enrollments/${json(created).data.id}`, { token: admin })).data;
    expectError(await call(t, 'POST', `${CLIENT}/enroll/updb?token=${e.token}`, { body: { password: 'short' } }), 400, 'COULD_NOT_VALIDATE', 'password');
    expectError(await call(t, 'POST', `${CLIENT}/enroll/updb?token=${e.token}`, { body: { password: 'alllowercase12' } }), 400, 'COULD_NOT_VALIDATE', 'password');
    expect((await call(t, 'GET', `${MGMT}/enrollments/${e.id}`, { token: admin })).statusCode).toBe(200);
    expect((await call(t, 'POST', `${CLIENT}/enroll/updb?token=${e.token}`, { body: { password: 'Mixed-Case-123' } })).statusCode).toBe(200);
  });

  it('refuses a missing token or password, and an ott token', async () => {
    expectError(await call(t, 'POST', `${CLIENT}/enroll/updb`, { body: { password: 'some-password-1' } }), 400, 'COULD_NOT_VALIDATE', 'token');
    const { token } = await enrolling('updb-no-password', 'updb');
    expectError(await call(t, 'POST', `${CLIENT}/enroll/updb?token=${token}`, { body: {} }), 400, 'COULD_NOT_VALIDATE', 'password');
    const ott = await enrolling('ott-at-updb');
    expectError(await call(t, 'POST', `${CLIENT}/enroll/updb?token=${ott.token}`, { body: { password: 'some-password-1' } }), 400, 'INVALID_ENROLLMENT_TOKEN');
  });
});

describe('network JWTs, the enrollment JWKS and the challenge', () => {
  it('GET /network-jwts on both APIs: one JWT of method network, verified by the enrollment JWKS', async () => {
    const jwks = json(await call(t, 'GET', `${CLIENT}/enroll/jwks`));
    expect(jwks.keys.length).toBeGreaterThan(0);
    expect(jwks.keys[0]).not.toHaveProperty('d');
    for (const api of [CLIENT, MGMT]) {
      const res = await call(t, 'GET', `${api}/network-jwts`);
      expect(res.statusCode).toBe(200);
      const [item] = json(res).data;
      expect(item.name).toBe('default');
      const { payload } = await jwtVerify(item.token, createLocalJWKSet(jwks));
      expect(payload).toMatchObject({ em: 'network', iss: `https://${t.config.web[0]!.bindPoints[0]!.address}/` });
      expect(payload).not.toHaveProperty('exp');
    }
  });

  it('POST /enroll/challenge signs the nonce with the named key', async () => {
    const jwks = json(await call(t, 'GET', `${CLIENT}/enroll/jwks`));
    const jwk = jwks.keys[0];
    const nonce = '0b6f1b8e-2f0e-4c8a-9d6e-3a1b2c3d4e5f';
    const res = await call(t, 'POST', `${CLIENT}/enroll/challenge`, { body: { keyId: jwk.kid, nonce } });
    expect(res.statusCode, res.body).toBe(200);
    const answer = json(res);
    expect(answer).toMatchObject({ kid: jwk.kid, algorithm: 'ES256', caPool: t.app.core.pki.trustBundlePem });
    const ok = verify('sha256', Buffer.from(nonce), { key: createPublicKey({ key: jwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' }, Buffer.from(answer.signature, 'base64url'));
    expect(ok).toBe(true);
    expectError(await call(t, 'POST', `${CLIENT}/enroll/challenge`, { body: { keyId: 'no-such-key', nonce } }), 400, 'COULD_NOT_VALIDATE', 'keyId');
    expectError(await call(t, 'POST', `${CLIENT}/enroll/challenge`, { body: { keyId: jwk.kid, nonce: 'not-a-uuid' } }), 400, 'COULD_NOT_VALIDATE');
    expectError(await call(t, 'POST', `${CLIENT}/enroll/challenge`, { body: { nonce } }), 400, 'COULD_NOT_VALIDATE');
  });
});

describe('reverting a network-issued certificate', () => {
  it('makes an ott enrollment; the certificate no longer logs in and a new CSR enrolls again', async () => {
    const { identityId, token } = await enrolling('reverted-device');
    expect((await enrollOtt({ token, clientCsr: await csrPem() })).statusCode).toBe(200);
    const [auth] = json(await call(t, 'GET', `${MGMT}/identities/${identityId}/authenticators`, { token: admin })).data;
    const res = await call(t, 'POST', `${MGMT}/authenticators/${auth.id}/re-enroll`, { token: admin, body: { expiresAt: new Date(t.clock() + HOUR).toISOString() } });
    expect(res.statusCode, res.body).toBe(201);
    const e = json(await call(t, 'GET', `${MGMT}/enrollments/${json(res).data.id}`, { token: admin })).data;
    expect(e).toMatchObject({ method: 'ott', identityId });
    expect(json(await call(t, 'GET', `${MGMT}/identities/${identityId}/authenticators`, { token: admin })).data).toEqual([]);
    expect((await enrollOtt({ token: e.token, clientCsr: await csrPem() })).statusCode).toBe(200);
  });

  it('also a certificate the controller did not issue', async () => {
    const identityId = await createIdentity(t, admin, { name: 'own-cert-device' });
    const cert = await selfSignedCertificate('own-cert-device');
    const created = await call(t, 'POST', `${MGMT}/authenticators`, { token: admin, body: { method: 'cert', identityId, certPem: cert.certPem } });
    const res = await call(t, 'POST', `${MGMT}/authenticators/${json(created).data.id}/re-enroll`, {
      token: admin,
      body: { expiresAt: new Date(t.clock() + HOUR).toISOString() },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(json(await call(t, 'GET', `${MGMT}/enrollments/${json(res).data.id}`, { token: admin })).data.method).toBe('ott');
  });

  it('is refused 409 while an enrollment of that method is outstanding: the authenticator and the enrollment stay', async () => {
    const identityId = await createIdentity(t, admin, { name: 'pending-cert-device', enrollment: { ott: true } });
    const [pending] = json(await call(t, 'GET', `${MGMT}/identities/${identityId}/enrollments`, { token: admin })).data;
    const cert = await selfSignedCertificate('pending-cert-device');
    const created = json(await call(t, 'POST', `${MGMT}/authenticators`, { token: admin, body: { method: 'cert', identityId, certPem: cert.certPem } })).data.id as string;
    const res = await call(t, 'POST', `${MGMT}/authenticators/${created}/re-enroll`, { token: admin, body: { expiresAt: new Date(t.clock() + HOUR).toISOString() } });
    expectError(res, 409, 'ENROLLMENT_EXISTS');
    expect((await call(t, 'GET', `${MGMT}/authenticators/${created}`, { token: admin })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/identities/${identityId}/enrollments`, { token: admin })).data.map((e: { id: string }) => e.id)).toEqual([pending.id]);
  });
});
