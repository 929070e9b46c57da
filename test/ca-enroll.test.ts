// Enrolling with certificates of third-party CAs over real TLS, with CAs made for the test: ottca
// (the identity's one-time token plus a certificate of the enrollment's CA presented in the
// handshake), auto CA enrollment (the certificate alone creates the identity, named and given roles
// by the CA), certificate logins of a CA with an external id claim (the identity found by the id
// the certificate carries), and a CA's cert authenticator reverted to an ottca enrollment.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentity,
  type HttpsAnswer,
  json,
  MGMT,
  overTls,
  startTestController,
  testCa,
  testCertificate,
  type TestCertificate,
  testClock,
  type TestClock,
  type TestController,
  type TestIssuer,
} from './helpers.js';

const HOUR = 3_600_000;
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';


let t: TestController;
let clock: TestClock;
let port: number;
let admin: string;

beforeAll(async () => {
  // The TLS peers check certificates against the real time, so the controller starts at it too.
  clock = testClock(Date.now());
  t = await startTestController({ env: ADMIN_ENV, clock });
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

type Client = Pick<TestCertificate, 'certPem' | 'keyPem'>;

/** POST over TLS, presenting `client` (its certPem may be a chain, leaf first) when given. */
function post(path: string, body: unknown, client?: Client): Promise<HttpsAnswer> {
  return overTls(t, port, 'POST', path, { body, ...(client && { client }) });
}

function refused(res: HttpsAnswer, status: number, code: string): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(JSON.parse(res.body).error.code).toBe(code);
}

function ok(res: HttpsAnswer): void {
  expect(res.statusCode, res.body).toBe(200);
  expect(JSON.parse(res.body).data).toEqual({});
  expect(res.headers['cache-control']).toBe('no-store');
}

interface CaFlags {
  isAuthEnabled?: boolean;
  isAutoCaEnrollmentEnabled?: boolean;
  isOttCaEnrollmentEnabled?: boolean;
  identityRoles?: string[];
  identityNameFormat?: string;
  externalIdClaim?: Record<string, unknown>;
  verified?: boolean;
}

/** A CA made for the test, registered (and verified unless told otherwise). */
async function registerCa(name: string, flags: CaFlags = {}): Promise<{ id: string; issuer: TestIssuer & TestCertificate }> {
  const issuer = await testCa(`${name} CA`);
  const { verified = true, ...fields } = flags;
  const res = await call(t, 'POST', `${MGMT}/cas`, {
    token: admin,
    body: {
      name,
      certPem: issuer.certPem,
      isAuthEnabled: true,
      isAutoCaEnrollmentEnabled: false,
      isOttCaEnrollmentEnabled: true,
      identityRoles: [],
      ...fields,
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  const id = json(res).data.id as string;
  if (verified) {
    const token = json(await call(t, 'GET', `${MGMT}/cas/${id}`, { token: admin })).data.verificationToken as string;
    const proof = await testCertificate(token, { issuer });
    const verify = await call(t, 'POST', `${MGMT}/cas/${id}/verify`, { token: admin, body: proof.certPem, headers: { 'content-type': 'text/plain' } });
    expect(verify.statusCode, verify.body).toBe(200);
  }
  return { id, issuer };
}

/** An identity created with an ottca enrollment of `caId`; answers its id and token. */
async function ottcaIdentity(name: string, caId: string): Promise<{ id: string; token: string }> {
  const id = await createIdentity(t, admin, { name, enrollment: { ottca: caId } });
  const identity = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data;
  return { id, token: identity.enrollment.ottca.token as string };
}

/** The cert authenticators of an identity as the store keeps them (caId is not part of answers). */
async function certAuthenticators(identityId: string) {
  return t.app.core.store.db
    .selectFrom('authenticators')
    .select(['id', 'fingerprint', 'ca_id', 'is_issued_by_network', 'cert_pem'])
    .where('identity_id', '=', identityId)
    .where('method', '=', 'cert')
    .execute();
}

async function identityNamed(name: string) {
  const res = await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent(`name = "${name}"`)}`, { token: admin });
  expect(res.statusCode).toBe(200);
  return json(res).data as { id: string; name: string; roleAttributes: string[]; externalId: string | null }[];
}

const loginWith = (client: Client) => post(`${CLIENT}/authenticate?method=cert`, {}, client);

async function loggedInAs(client: Client): Promise<{ identityId: string; authenticatorId: string | null }> {
  const res = await loginWith(client);
  expect(res.statusCode, res.body).toBe(200);
  return JSON.parse(res.body).data;
}

describe('POST /enroll/ca with no CA registered', () => {
  // First in the file: later tests register CAs.
  it('refuses with ENROLLMENT_NO_VALID_CAS', async () => {
    const lone = await testCa('lone CA');
    refused(await post(`${CLIENT}/enroll/ca`, {}, await testCertificate('lone-user', { issuer: lone })), 400, 'ENROLLMENT_NO_VALID_CAS');
  });
});

describe('POST /enroll/ottca', () => {
  it('makes the presented certificate the identity\'s cert authenticator of the CA; the certificate then logs in; the token is used up', async () => {
    const ca = await registerCa('ottca-main');
    const { id, token } = await ottcaIdentity('ottca-device', ca.id);
    const cert = await testCertificate('ottca-device', { issuer: ca.issuer });

    ok(await post(`${CLIENT}/enroll/ottca`, { token }, cert));
    const [authenticator] = await certAuthenticators(id);
    expect(authenticator).toMatchObject({ fingerprint: cert.fingerprint, ca_id: ca.id });
    expect(Boolean(authenticator!.is_issued_by_network)).toBe(false);
    expect(authenticator!.cert_pem).toBe(cert.certPem);
    const identity = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data;
    expect(identity.enrollment).toEqual({});
    expect(identity.authenticators.cert).toMatchObject({ id: authenticator!.id, fingerprint: cert.fingerprint });

    expect(await loggedInAs(cert)).toMatchObject({ identityId: id, authenticatorId: authenticator!.id });
    refused(await post(`${CLIENT}/enroll/ottca`, { token }, cert), 410, 'INVALID_ENROLLMENT_ALREADY_ENROLLED');
  });

  it('accepts a certificate of an intermediate of the CA presented with the intermediate', async () => {
    const ca = await registerCa('ottca-root');
    const intermediate = await testCa('ottca intermediate', { issuer: ca.issuer });
    const leaf = await testCertificate('ottca-deep', { issuer: intermediate });
    const { id, token } = await ottcaIdentity('ottca-deep', ca.id);
    // Without the intermediate nothing links the leaf to the CA.
    refused(await post(`${CLIENT}/enroll/ottca`, { token }, leaf), 400, 'CERTIFICATE_FAILED_VALIDATION');
    const chained = { certPem: leaf.certPem + intermediate.certPem, keyPem: leaf.keyPem };
    ok(await post(`${CLIENT}/enroll/ottca`, { token }, chained));
    expect((await certAuthenticators(id))[0]).toMatchObject({ fingerprint: leaf.fingerprint, ca_id: ca.id });
    expect((await loggedInAs(chained)).identityId).toBe(id);
  });

  it('refuses no certificate, another CA\'s, a self-made one and one not for client authentication; the token stays usable', async () => {
    const ca = await registerCa('ottca-strict');
    const other = await registerCa('ottca-other');
    const { id, token } = await ottcaIdentity('ottca-strict-device', ca.id);
    const url = `${CLIENT}/enroll/ottca`;
    refused(await post(url, { token }), 400, 'CERTIFICATE_FAILED_VALIDATION');
    refused(await post(url, { token }, await testCertificate('wrong-ca', { issuer: other.issuer })), 400, 'CERTIFICATE_FAILED_VALIDATION');
    refused(await post(url, { token }, await testCertificate('self-made')), 400, 'CERTIFICATE_FAILED_VALIDATION');
    // Naming the CA as issuer without its signature links nothing.
    const forger = await testCa('forger');
    refused(await post(url, { token }, await testCertificate('forged', { issuer: forger, issuerName: ca.issuer.cert.subject })), 400, 'CERTIFICATE_FAILED_VALIDATION');
    const serverOnly = await testCertificate('server-only', { issuer: ca.issuer, extendedKeyUsages: [SERVER_AUTH] });
    refused(await post(url, { token }, serverOnly), 400, 'CERTIFICATE_FAILED_VALIDATION');
    expect(await certAuthenticators(id)).toEqual([]);

    ok(await post(url, { token }, await testCertificate('right-ca', { issuer: ca.issuer })));
  });

  it('refuses unknown, expired and other-method tokens', async () => {
    const ca = await registerCa('ottca-tokens');
    const cert = await testCertificate('ottca-tokens', { issuer: ca.issuer });
    refused(await post(`${CLIENT}/enroll/ottca`, { token: '3b241101-e2bb-4255-8caf-4136c566a962' }, cert), 400, 'INVALID_ENROLLMENT_TOKEN');
    refused(await post(`${CLIENT}/enroll/ottca`, {}, cert), 400, 'COULD_NOT_VALIDATE');

    const ottId = await createIdentity(t, admin, { name: 'ott-not-ottca', enrollment: { ott: true } });
    const ottToken = json(await call(t, 'GET', `${MGMT}/identities/${ottId}`, { token: admin })).data.enrollment.ott.token as string;
    refused(await post(`${CLIENT}/enroll/ottca`, { token: ottToken }, cert), 400, 'INVALID_ENROLLMENT_TOKEN');

    const identityId = await createIdentity(t, admin, { name: 'ottca-expiring' });
    const created = await call(t, 'POST', `${MGMT}/enrollments`, {
      token: admin,
      body: { method: 'ottca', identityId, caId: ca.id, expiresAt: new Date(clock() + 60_000).toISOString() },
    });
    expect(created.statusCode, created.body).toBe(201);
    const token = json(await call(t, 'GET', `${MGMT}/enrollments/${json(created).data.id}`, { token: admin })).data.token as string;
    const now = clock();
    clock.advance(2 * 60_000);
    try {
      refused(await post(`${CLIENT}/enroll/ottca`, { token }, cert), 400, 'ENROLLMENT_EXPIRED');
    } finally {
      clock.set(now);
    }
    expect(await certAuthenticators(identityId)).toEqual([]);
  });

  it('refuses while the CA does not allow ottca enrollments or is not verified (ENROLLMENT_CA_NOT_VALID)', async () => {
    const ca = await registerCa('ottca-disabled');
    const { token } = await ottcaIdentity('ottca-disabled-device', ca.id);
    const cert = await testCertificate('ottca-disabled-device', { issuer: ca.issuer });
    expect((await call(t, 'PATCH', `${MGMT}/cas/${ca.id}`, { token: admin, body: { isOttCaEnrollmentEnabled: false } })).statusCode).toBe(200);
    refused(await post(`${CLIENT}/enroll/ottca`, { token }, cert), 400, 'ENROLLMENT_CA_NOT_VALID');
    expect((await call(t, 'PATCH', `${MGMT}/cas/${ca.id}`, { token: admin, body: { isOttCaEnrollmentEnabled: true } })).statusCode).toBe(200);
    ok(await post(`${CLIENT}/enroll/ottca`, { token }, cert));

    const unverified = await registerCa('ottca-unverified', { verified: false });
    const pending = await ottcaIdentity('ottca-unverified-device', unverified.id);
    refused(await post(`${CLIENT}/enroll/ottca`, { token: pending.token }, await testCertificate('u', { issuer: unverified.issuer })), 400, 'ENROLLMENT_CA_NOT_VALID');
  });

  it('refuses a certificate another identity already holds (CERT_IN_USE)', async () => {
    const ca = await registerCa('ottca-in-use');
    const cert = await testCertificate('shared', { issuer: ca.issuer });
    const first = await ottcaIdentity('ottca-first-holder', ca.id);
    ok(await post(`${CLIENT}/enroll/ottca`, { token: first.token }, cert));
    const second = await ottcaIdentity('ottca-second-holder', ca.id);
    refused(await post(`${CLIENT}/enroll/ottca`, { token: second.token }, cert), 409, 'CERT_IN_USE');
    expect(await certAuthenticators(second.id)).toEqual([]);
  });

  it('is used once under concurrent requests: one certificate becomes the authenticator, the others are refused', async () => {
    const ca = await registerCa('ottca-race');
    const { id, token } = await ottcaIdentity('ottca-race-device', ca.id);
    const certs = await Promise.all(Array.from({ length: 6 }, (_, i) => testCertificate(`racer-${i}`, { issuer: ca.issuer })));
    const answers = await Promise.all(certs.map((c) => post(`${CLIENT}/enroll/ottca`, { token }, c)));
    const winners = answers.flatMap((a, i) => (a.statusCode === 200 ? [i] : []));
    expect(winners).toHaveLength(1);
    for (const a of answers) if (a.statusCode !== 200) refused(a, 410, 'INVALID_ENROLLMENT_ALREADY_ENROLLED');
    const stored = await certAuthenticators(id);
    expect(stored.map((a) => a.fingerprint)).toEqual([certs[winners[0]!]!.fingerprint]);
  });

  it('through the generic POST /enroll, by method=ottca or by the token alone', async () => {
    const ca = await registerCa('ottca-generic');
    const a = await ottcaIdentity('ottca-generic-a', ca.id);
    const certA = await testCertificate('generic-a', { issuer: ca.issuer });
    ok(await post(`${CLIENT}/enroll?method=ottca&token=${a.token}`, {}, certA));
    expect((await loggedInAs(certA)).identityId).toBe(a.id);

    const b = await ottcaIdentity('ottca-generic-b', ca.id);
    const certB = await testCertificate('generic-b', { issuer: ca.issuer });
    refused(await post(`${CLIENT}/enroll?token=${b.token}`, {}), 400, 'CERTIFICATE_FAILED_VALIDATION');
    ok(await post(`${CLIENT}/enroll?token=${b.token}`, {}, certB));
    expect((await loggedInAs(certB)).identityId).toBe(b.id);
    refused(await post(`${CLIENT}/enroll?method=ottca`, {}, certB), 400, 'COULD_NOT_VALIDATE');
  });
});

describe('POST /authenticators/{id}/re-enroll of a CA\'s cert authenticator', () => {
  it('gives an ottca enrollment of that CA, which the CA\'s certificate completes again', async () => {
    const ca = await registerCa('revert-ca');
    const { id, token } = await ottcaIdentity('revert-device', ca.id);
    const cert = await testCertificate('revert-device', { issuer: ca.issuer });
    ok(await post(`${CLIENT}/enroll/ottca`, { token }, cert));
    const [authenticator] = await certAuthenticators(id);

    const expiresAt = new Date(clock() + HOUR).toISOString();
    const res = await call(t, 'POST', `${MGMT}/authenticators/${authenticator!.id}/re-enroll`, { token: admin, body: { expiresAt } });
    expect(res.statusCode, res.body).toBe(201);
    const enrollment = json(await call(t, 'GET', `${MGMT}/enrollments/${json(res).data.id}`, { token: admin })).data;
    expect(enrollment).toMatchObject({ method: 'ottca', identityId: id, caId: ca.id, expiresAt, ca: { id: ca.id, name: 'revert-ca' } });
    expect(await certAuthenticators(id)).toEqual([]);
    refused(await loginWith(cert), 401, 'INVALID_AUTH');

    const renewed = await testCertificate('revert-device-renewed', { issuer: ca.issuer });
    ok(await post(`${CLIENT}/enroll/ottca`, { token: enrollment.token }, renewed));
    expect((await loggedInAs(renewed)).identityId).toBe(id);
  });
});

describe('POST /enroll/ca (auto CA enrollment)', () => {
  it('creates an identity named by the CA\'s format with its roles and a cert authenticator of the CA; it then logs in', async () => {
    const ca = await registerCa('auto-main', { isAutoCaEnrollmentEnabled: true, identityRoles: ['auto', 'sensors'] });
    const cert = await testCertificate('sensor-1', { issuer: ca.issuer });
    ok(await post(`${CLIENT}/enroll/ca`, {}, cert));
    const [identity] = await identityNamed('auto-main-sensor-1');
    expect(identity).toMatchObject({ name: 'auto-main-sensor-1', roleAttributes: ['auto', 'sensors'], externalId: null });
    const [authenticator] = await certAuthenticators(identity!.id);
    expect(authenticator).toMatchObject({ fingerprint: cert.fingerprint, ca_id: ca.id });
    expect(Boolean(authenticator!.is_issued_by_network)).toBe(false);
    expect(await loggedInAs(cert)).toMatchObject({ identityId: identity!.id, authenticatorId: authenticator!.id });

    // The same certificate again is refused, and makes no second identity.
    refused(await post(`${CLIENT}/enroll/ca`, {}, cert), 409, 'CERT_IN_USE');
    expect(await identityNamed('auto-main-sensor-1000001')).toEqual([]);
  });

  it('fills every placeholder of the format, and counts up names already taken', async () => {
    const ca = await registerCa('auto-format', { isAutoCaEnrollmentEnabled: true, identityNameFormat: '[caName]/[caId]/[commonName]/[requestedName]' });
    const base = `auto-format/${ca.id}/gateway`;
    const named: string[] = [];
    for (let i = 0; i < 3; i++) {
      ok(await post(`${CLIENT}/enroll?method=ca`, { name: 'asked' }, await testCertificate('gateway', { issuer: ca.issuer })));
      named.push(...(await identityNamed(i === 0 ? `${base}/asked` : `${base}/asked${String(i).padStart(6, '0')}`)).map((x) => x.name));
    }
    expect(named).toEqual([`${base}/asked`, `${base}/asked000001`, `${base}/asked000002`]);

    // Without a requested name, [requestedName] is the new identity's id; [identityId] always is.
    const idFormat = await registerCa('auto-ids', { isAutoCaEnrollmentEnabled: true, identityNameFormat: '[requestedName]=[identityId]' });
    const cert = await testCertificate('no-name', { issuer: idFormat.issuer });
    ok(await post(`${CLIENT}/enroll/ca`, {}, cert));
    const { identityId } = await loggedInAs(cert);
    const identity = json(await call(t, 'GET', `${MGMT}/identities/${identityId}`, { token: admin })).data;
    expect(identity.name).toBe(`${identityId}=${identityId}`);
  });

  it('takes a request without a body, as clients send it; without a certificate it is refused, not malformed', async () => {
    for (const url of [`${CLIENT}/enroll/ca`, `${CLIENT}/enroll?method=ca`]) {
      const res = await call(t, 'POST', url);
      expect(res.statusCode, res.body).toBe(400);
      expect(json(res).error.code, `${url}: ${res.body}`).toBe('CERT_FAILED_VALIDATION');
    }
  });

  it('refuses a CA without isAutoCaEnrollmentEnabled, an unverified CA, no certificate, and a certificate of no CA', async () => {
    const disabled = await registerCa('auto-disabled', { isAutoCaEnrollmentEnabled: false });
    const unverified = await registerCa('auto-unverified', { isAutoCaEnrollmentEnabled: true, verified: false });
    refused(await post(`${CLIENT}/enroll/ca`, {}, await testCertificate('d-user', { issuer: disabled.issuer })), 400, 'CERT_FAILED_VALIDATION');
    refused(await post(`${CLIENT}/enroll/ca`, {}, await testCertificate('u-user', { issuer: unverified.issuer })), 400, 'CERT_FAILED_VALIDATION');
    refused(await post(`${CLIENT}/enroll/ca`, {}), 400, 'CERT_FAILED_VALIDATION');
    refused(await post(`${CLIENT}/enroll/ca`, {}, await testCertificate('nobody')), 400, 'CERT_FAILED_VALIDATION');
    for (const name of ['auto-disabled-d-user', 'auto-unverified-u-user']) expect(await identityNamed(name)).toEqual([]);

    // Once allowed, the same certificate enrolls.
    expect((await call(t, 'PATCH', `${MGMT}/cas/${disabled.id}`, { token: admin, body: { isAutoCaEnrollmentEnabled: true } })).statusCode).toBe(200);
    ok(await post(`${CLIENT}/enroll/ca`, {}, await testCertificate('d-user', { issuer: disabled.issuer })));
    expect(await identityNamed('auto-disabled-d-user')).toHaveLength(1);
  });

  it('with an external id claim: the identity gets the id the certificate carries and no authenticator; a renewed certificate logs in as it', async () => {
    const claim = { index: 0, location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe', parser: 'NONE', parserCriteria: '' };
    const ca = await registerCa('auto-spiffe', { isAutoCaEnrollmentEnabled: true, externalIdClaim: claim, identityRoles: ['workload'] });
    const spiffe = 'spiffe://acme.example/workload/billing';
    const cert = await testCertificate('billing', { issuer: ca.issuer, sans: [{ type: 'url', value: 'https://acme.example/' }, { type: 'url', value: spiffe }] });
    ok(await post(`${CLIENT}/enroll/ca`, {}, cert));
    const [identity] = await identityNamed('auto-spiffe-billing');
    expect(identity).toMatchObject({ externalId: spiffe, roleAttributes: ['workload'] });
    expect(await certAuthenticators(identity!.id)).toEqual([]);
    expect(await loggedInAs(cert)).toEqual(expect.objectContaining({ identityId: identity!.id, authenticatorId: null }));
    const renewed = await testCertificate('billing', { issuer: ca.issuer, sans: [{ type: 'url', value: spiffe }] });
    expect((await loggedInAs(renewed)).identityId).toBe(identity!.id);

    // A certificate without the claim's value is refused, as the established controller refuses it.
    const bare = await testCertificate('bare', { issuer: ca.issuer });
    refused(await post(`${CLIENT}/enroll/ca`, {}, bare), 400, 'MISSING_CERT_CLAIM');
    expect(await identityNamed('auto-spiffe-bare')).toEqual([]);
  });
});

describe('certificate login with a CA\'s external id claim', () => {
  it('finds the identity by the external id read from the certificate, not by its fingerprint', async () => {
    const claim = { index: 0, location: 'SAN_EMAIL', matcher: 'SUFFIX', matcherCriteria: '@corp.example', parser: 'NONE', parserCriteria: '' };
    const ca = await registerCa('login-claim', { externalIdClaim: claim });
    const id = await createIdentity(t, admin, { name: 'claimed-alice', externalId: 'alice' });
    const cert = await testCertificate('alice laptop', { issuer: ca.issuer, sans: [{ type: 'email', value: 'alice@home.example' }, { type: 'email', value: 'alice@corp.example' }] });
    expect(await loggedInAs(cert)).toMatchObject({ identityId: id, authenticatorId: null });

    // A certificate naming an external id no identity has logs no one in, though an authenticator holds it.
    const mallory = await testCertificate('mallory', { issuer: ca.issuer, sans: [{ type: 'email', value: 'mallory@corp.example' }] });
    const holder = await createIdentity(t, admin, { name: 'mallory-holder' });
    expect((await call(t, 'POST', `${MGMT}/authenticators`, { token: admin, body: { method: 'cert', identityId: holder, certPem: mallory.certPem } })).statusCode).toBe(201);
    refused(await loginWith(mallory), 401, 'INVALID_AUTH');

    // One from which the claim cannot be read is looked up by its fingerprint.
    const plain = await testCertificate('plain', { issuer: ca.issuer });
    const plainHolder = await createIdentity(t, admin, { name: 'plain-holder' });
    const created = await call(t, 'POST', `${MGMT}/authenticators`, { token: admin, body: { method: 'cert', identityId: plainHolder, certPem: plain.certPem } });
    expect(created.statusCode).toBe(201);
    expect(await loggedInAs(plain)).toMatchObject({ identityId: plainHolder, authenticatorId: json(created).data.id });

    // Without the claim, the fingerprint decides again.
    expect((await call(t, 'PATCH', `${MGMT}/cas/${ca.id}`, { token: admin, body: { externalIdClaim: null } })).statusCode).toBe(200);
    refused(await loginWith(cert), 401, 'INVALID_AUTH');
    expect((await loggedInAs(mallory)).identityId).toBe(holder);
  });
});
