// Edge router enrollment (behaviour.md §7): a router is created unverified with an erott enrollment
// whose JWT the controller's keys verify; the router exchanges the token with two CSRs for a client
// certificate naming it and a server certificate for its names (once, even when asked at the same
// time), extends both over TLS with its current client certificate, and re-enrolling forgets it.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createHash, webcrypto, X509Certificate } from 'node:crypto';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  expectMissingCredential,
  type HttpsAnswer,
  json,
  login,
  MGMT,
  networkIssuer,
  overTls,
  sha256Hex,
  startTestController,
  testCa,
  testCertificate,
  testClock,
  type TestController,
} from './helpers.js';

const MINUTE = 60_000;
const P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';

let t: TestController;
let admin: string;
let port: number;

beforeAll(async () => {
  // TLS peers check certificates against the real time, so the controller starts at it too.
  t = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

interface Csr {
  pem: string;
  keyPem: string;
}

/** A PEM CSR for a new P-256 key, asking for `altNames`; with the key, PKCS#8 PEM. */
async function makeCsr(altNames: x509.JsonGeneralNames = [], extensions: x509.Extension[] = []): Promise<Csr> {
  const keys = (await webcrypto.subtle.generateKey(P256, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create(
    {
      name: 'CN=router',
      keys,
      signingAlgorithm: P256,
      extensions: altNames.length > 0 ? [new x509.SubjectAlternativeNameExtension(altNames), ...extensions] : extensions,
    },
    webcrypto,
  );
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  return { pem: csr.toString('pem'), keyPem: x509.PemConverter.encode(pkcs8, 'PRIVATE KEY') };
}

/**
 * GeneralNames of an otherName of OID 1.2.3.4 holding UTF8 "foo", then the dNSName a.test: DER written
 * out, since the x509 library cannot write an otherName of a kind it does not know.
 */
const OTHER_NAME_AND_DNS_SAN = '3016' + 'a00c' + '06032a0304' + 'a0050c03666f6f' + '8206612e74657374';

const SERVER_NAMES: x509.JsonGeneralNames = [
  { type: 'dns', value: 'router.example.test' },
  { type: 'ip', value: '10.1.2.3' },
];

async function createRouter(name: string): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/edge-routers`, { token: admin, body: { name } });
  expect(res.statusCode, res.body).toBe(201);
  return json(res).data.id as string;
}

async function getRouter(id: string): Promise<Record<string, any>> {
  const res = await call(t, 'GET', `${MGMT}/edge-routers/${id}`, { token: admin });
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
}

const erott = (body: Record<string, unknown>) => call(t, 'POST', `${CLIENT}/enroll/erott`, { body });

/** A router enrolled with fresh CSRs: its id, the answer, and the client certificate with its key. */
async function enrolledRouter(name: string) {
  const id = await createRouter(name);
  const { enrollmentToken } = await getRouter(id);
  const client = await makeCsr();
  const res = await erott({ token: enrollmentToken, serverCsr: (await makeCsr(SERVER_NAMES)).pem, clientCsr: client.pem });
  expect(res.statusCode, res.body).toBe(200);
  const data = json(res).data as { ca: string; cert: string; serverCert: string };
  return { id, data, client: { certPem: data.cert, keyPem: client.keyPem } };
}

/** The certificates of a PEM chain, leaf first. */
function chainOf(pem: string): X509Certificate[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----\n?/g) ?? []).map((p) => new X509Certificate(p));
}

function sha1Of(cert: X509Certificate): string {
  return createHash('sha1').update(cert.raw).digest('hex');
}


/** POST over real TLS, presenting `client` (a chain, leaf first, and its key) when given. */
function post(path: string, body: unknown, client?: { certPem: string; keyPem: string }): Promise<HttpsAnswer> {
  return overTls(t, port, 'POST', path, { body, ...(client && { client }) });
}

const extend = async (client: { certPem: string; keyPem: string } | undefined, csrs?: { certCsr?: string; serverCertCsr?: string }) =>
  post(`${CLIENT}/enroll/extend/router`, csrs ?? { certCsr: (await makeCsr()).pem, serverCertCsr: (await makeCsr(SERVER_NAMES)).pem }, client);

function errorOf(res: HttpsAnswer): { code: string; cause?: { field?: string } } {
  return JSON.parse(res.body).error;
}

describe('an edge router is created with an enrollment', () => {
  it('unverified, with a JWT (em erott, sub the router, jti the token) that /oidc/keys verifies; the token is stored hashed', async () => {
    const now = t.clock();
    const id = await createRouter('er-enroll-new');
    const r = await getRouter(id);
    expect(r).toMatchObject({ isVerified: false, fingerprint: null, enrollmentCreatedAt: new Date(now).toISOString() });
    // edge.enrollment.edgeRouter.duration, 180 minutes unless configured
    expect(Date.parse(r.enrollmentExpiresAt) - now).toBe(180 * MINUTE);
    expect(r.enrollmentToken).toMatch(/^[0-9a-f-]{36}$/);

    const keys = json(await t.inject({ method: 'GET', url: '/oidc/keys' }));
    const { payload } = await jwtVerify(r.enrollmentJwt, createLocalJWKSet(keys), { currentDate: new Date(now) });
    expect(payload).toMatchObject({ em: 'erott', sub: id, jti: r.enrollmentToken, exp: Math.floor(Date.parse(r.enrollmentExpiresAt) / 1000) });
    expect(String(payload.iss)).toMatch(/^https:\/\//);
    expect(payload.ctrls).toEqual([payload.iss]);

    const row = await t.app.core.store.db.selectFrom('edge_routers').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(row.enrollment_token_hash).toBe(sha256Hex(r.enrollmentToken));
    expect(JSON.stringify(row)).not.toContain(r.enrollmentToken);
    expect(JSON.stringify(row)).not.toContain(r.enrollmentJwt.split('.')[1]);
  });
});

describe('POST /enroll/erott', () => {
  it('signs a client and a server certificate; the router is verified with the client fingerprint and its enrollment is gone', async () => {
    const id = await createRouter('er-enroll-ok');
    const { enrollmentToken } = await getRouter(id);
    const serverCsr = await makeCsr([...SERVER_NAMES, { type: 'ip', value: '::1' }]);
    const res = await erott({ token: enrollmentToken, serverCsr: serverCsr.pem, clientCsr: (await makeCsr()).pem });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const { ca, cert, serverCert } = json(res).data;
    const { pki } = t.app.core;
    expect(ca).toBe(pki.trustBundlePem);
    const signing = new X509Certificate(pki.signingCertPem);

    const [clientLeaf, clientCa] = chainOf(cert);
    expect(clientCa!.raw.equals(signing.raw)).toBe(true);
    expect(clientLeaf!.verify(signing.publicKey)).toBe(true);
    expect(clientLeaf!.ca).toBe(false);
    expect(clientLeaf!.keyUsage).toEqual([CLIENT_AUTH]);
    expect(clientLeaf!.subjectAltName).toBe(`URI:spiffe://${pki.trustDomain}/router/${id}`);
    expect(clientLeaf!.subject).toBe(`CN=${id}`);

    const [serverLeaf, serverCa] = chainOf(serverCert);
    expect(serverCa!.raw.equals(signing.raw)).toBe(true);
    expect(serverLeaf!.verify(signing.publicKey)).toBe(true);
    expect(serverLeaf!.ca).toBe(false);
    expect(serverLeaf!.keyUsage).toEqual([SERVER_AUTH]);
    const askedExt = new x509.Pkcs10CertificateRequest(serverCsr.pem).extensions.find((e) => e.type === '2.5.29.17')!;
    const asked = new x509.SubjectAlternativeNameExtension(askedExt.rawData).names.toJSON();
    expect(asked).toHaveLength(3);
    expect(new x509.X509Certificate(serverLeaf!.raw).getExtension(x509.SubjectAlternativeNameExtension)!.names.toJSON()).toEqual(asked);
    expect(serverLeaf!.subjectAltName).toContain('DNS:router.example.test');
    expect(serverLeaf!.subjectAltName).toContain('IP Address:10.1.2.3');
    // Both chain to the network's root through the signing CA.
    expect(signing.verify(new X509Certificate(pki.rootCertPem).publicKey)).toBe(true);

    expect(await getRouter(id)).toMatchObject({
      isVerified: true,
      fingerprint: sha1Of(clientLeaf!),
      enrollmentJwt: null,
      enrollmentToken: null,
      enrollmentCreatedAt: null,
      enrollmentExpiresAt: null,
    });
    // Used once: told so.
    expectError(await erott({ token: enrollmentToken, serverCsr: serverCsr.pem, clientCsr: (await makeCsr()).pem }), 410, 'INVALID_ENROLLMENT_ALREADY_ENROLLED');
  });

  it('refuses bad input and leaves the enrollment outstanding', async () => {
    const id = await createRouter('er-enroll-bad');
    const { enrollmentToken: token } = await getRouter(id);
    const good = (await makeCsr()).pem;
    expectError(await erott({ serverCsr: good, clientCsr: good }), 400, 'COULD_NOT_VALIDATE', 'token');
    expectError(await erott({ token, clientCsr: good }), 400, 'MISSING_OR_INVALID_CSR', 'serverCsr');
    expectError(await erott({ token, serverCsr: good }), 400, 'MISSING_OR_INVALID_CSR', 'clientCsr');
    expectError(await erott({ token, serverCsr: good, clientCsr: 'not a csr' }), 400, 'MISSING_OR_INVALID_CSR', 'clientCsr');
    expectError(await erott({ token, serverCsr: t.app.core.pki.signingCertPem, clientCsr: good }), 400, 'MISSING_OR_INVALID_CSR', 'serverCsr');
    expectError(await erott({ token, serverCsr: good, clientCsr: 'x'.repeat(20_000) }), 400, 'COULD_NOT_VALIDATE', 'clientCsr');
    // A server certificate names hosts; a SPIFFE id names identities and routers of the network.
    const spiffe = await makeCsr([{ type: 'url', value: `spiffe://${t.app.core.pki.trustDomain}/identity/someone` }]);
    expectError(await erott({ token, serverCsr: spiffe.pem, clientCsr: good }), 400, 'COULD_NOT_PROCESS_CSR', 'serverCsr');
    // A name the reader cannot judge (an otherName of an unknown kind) beside one it can: never copied.
    const otherName = await makeCsr([], [new x509.Extension('2.5.29.17', false, Buffer.from(OTHER_NAME_AND_DNS_SAN, 'hex'))]);
    expectError(await erott({ token, serverCsr: otherName.pem, clientCsr: good }), 400, 'COULD_NOT_PROCESS_CSR', 'serverCsr');
    // A CSR whose signature does not match its key.
    const forged = Buffer.from(new x509.Pkcs10CertificateRequest(good).rawData);
    forged[forged.length - 1] = forged[forged.length - 1]! ^ 0x01;
    expectError(await erott({ token, serverCsr: good, clientCsr: x509.PemConverter.encode(forged, 'CERTIFICATE REQUEST') }), 400, 'COULD_NOT_PROCESS_CSR', 'clientCsr');

    expect(await getRouter(id)).toMatchObject({ isVerified: false, enrollmentToken: token });
    expect((await erott({ token, serverCsr: (await makeCsr(SERVER_NAMES)).pem, clientCsr: good })).statusCode).toBe(200);
  });

  it('refuses unknown tokens, tokens of identity enrollments and expired ones', async () => {
    expectError(await erott({ token: 'no-such-token', serverCsr: (await makeCsr()).pem, clientCsr: (await makeCsr()).pem }), 400, 'INVALID_ENROLLMENT_TOKEN');
    const identity = await call(t, 'POST', `${MGMT}/identities`, {
      token: admin,
      body: { name: 'er-not-a-router', type: 'Device', isAdmin: false, enrollment: { ott: true } },
    });
    expect(identity.statusCode, identity.body).toBe(201);
    const ottToken = json(await call(t, 'GET', `${MGMT}/identities/${json(identity).data.id}`, { token: admin })).data.enrollment.ott.token;
    expectError(await erott({ token: ottToken, serverCsr: (await makeCsr()).pem, clientCsr: (await makeCsr()).pem }), 400, 'INVALID_ENROLLMENT_TOKEN');

    const id = await createRouter('er-enroll-expired');
    const { enrollmentToken, enrollmentExpiresAt } = await getRouter(id);
    const start = t.clock();
    t.clock.set(Date.parse(enrollmentExpiresAt));
    try {
      expectError(await erott({ token: enrollmentToken, serverCsr: (await makeCsr()).pem, clientCsr: (await makeCsr()).pem }), 400, 'ENROLLMENT_EXPIRED');
    } finally {
      t.clock.set(start);
    }
    expect(await getRouter(id)).toMatchObject({ isVerified: false, fingerprint: null });
  });

  it('gives certificates once for a token used by several requests at once', async () => {
    const id = await createRouter('er-enroll-race');
    const { enrollmentToken: token } = await getRouter(id);
    const bodies = await Promise.all(Array.from({ length: 6 }, async () => ({ token, serverCsr: (await makeCsr()).pem, clientCsr: (await makeCsr()).pem })));
    const answers = await Promise.all(bodies.map((body) => post(`${CLIENT}/enroll/erott`, body)));
    const won = answers.filter((a) => a.statusCode === 200);
    expect(won).toHaveLength(1);
    for (const a of answers.filter((x) => x.statusCode !== 200)) {
      expect(a.statusCode).toBe(410);
      expect(errorOf(a).code).toBe('INVALID_ENROLLMENT_ALREADY_ENROLLED');
    }
    const [leaf] = chainOf(JSON.parse(won[0]!.body).data.cert);
    expect((await getRouter(id)).fingerprint).toBe(sha1Of(leaf!));
  });

  it('is also the generic POST /enroll, with method erott or found from the token', async () => {
    for (const [name, query] of [
      ['er-generic-method', (token: string) => `method=erott&token=${token}`],
      ['er-generic-found', (token: string) => `token=${token}`],
    ] as const) {
      const id = await createRouter(name);
      const { enrollmentToken } = await getRouter(id);
      const url = `${CLIENT}/enroll?${query(enrollmentToken)}`;
      expectError(await call(t, 'POST', url, { body: { certCsr: (await makeCsr()).pem } }), 400, 'MISSING_OR_INVALID_CSR', 'serverCertCsr');
      const res = await call(t, 'POST', url, { body: { serverCertCsr: (await makeCsr(SERVER_NAMES)).pem, certCsr: (await makeCsr()).pem } });
      expect(res.statusCode, `${name}: ${res.body}`).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(Object.keys(json(res).data).sort()).toEqual(['ca', 'cert', 'serverCert']);
      expect((await getRouter(id)).isVerified).toBe(true);
    }
  });
});

describe('POST /edge-routers/{id}/re-enroll', () => {
  it('makes a new enrollment and unverifies the router; the old certificates no longer extend', async () => {
    const { id, client } = await enrolledRouter('er-reenroll');
    const res = await call(t, 'POST', `${MGMT}/edge-routers/${id}/re-enroll`, { token: admin });
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res).data).toEqual({});
    const r = await getRouter(id);
    expect(r).toMatchObject({ isVerified: false, fingerprint: null, enrollmentToken: expect.any(String) });
    const keys = json(await t.inject({ method: 'GET', url: '/oidc/keys' }));
    expect((await jwtVerify(r.enrollmentJwt, createLocalJWKSet(keys), { currentDate: new Date(t.clock()) })).payload).toMatchObject({ em: 'erott', sub: id });

    const refused = await extend(client);
    expect(refused.statusCode, refused.body).toBe(401);
    expect(errorOf(refused).code).toBe('UNAUTHORIZED');

    // Again while that one is outstanding: the previous JWT no longer enrolls.
    expect((await call(t, 'POST', `${MGMT}/edge-routers/${id}/re-enroll`, { token: admin })).statusCode).toBe(200);
    const renewed = await getRouter(id);
    expect(renewed.enrollmentToken).not.toBe(r.enrollmentToken);
    expectError(await erott({ token: r.enrollmentToken, serverCsr: (await makeCsr()).pem, clientCsr: (await makeCsr()).pem }), 400, 'INVALID_ENROLLMENT_TOKEN');
    expect((await erott({ token: renewed.enrollmentToken, serverCsr: (await makeCsr()).pem, clientCsr: (await makeCsr()).pem })).statusCode).toBe(200);
  });

  it('needs a credential and the router permission; 404 for an unknown router', async () => {
    const id = await createRouter('er-reenroll-guarded');
    const before = await getRouter(id);
    expectMissingCredential(await call(t, 'POST', `${MGMT}/edge-routers/${id}/re-enroll`));
    await createIdentityWithPassword(t, admin, { name: 'er-plain-user', username: 'er-plain-user', password: 'er-plain-user-pw1' });
    const plain = await login(t, 'er-plain-user', 'er-plain-user-pw1');
    expectError(await call(t, 'POST', `${MGMT}/edge-routers/${id}/re-enroll`, { token: plain }), 401, 'UNAUTHORIZED');
    expect((await getRouter(id)).enrollmentToken).toBe(before.enrollmentToken);
    expectError(await call(t, 'POST', `${MGMT}/edge-routers/no-such-router/re-enroll`, { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('POST /enroll/extend/router over TLS', () => {
  it('gives new certificates for the current client certificate; the fingerprint follows and the old certificate stops counting', async () => {
    const { id, client } = await enrolledRouter('er-extend');
    const newClient = await makeCsr();
    const res = await extend(client, { certCsr: newClient.pem, serverCertCsr: (await makeCsr(SERVER_NAMES)).pem });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const { ca, cert, serverCert } = JSON.parse(res.body).data;
    expect(ca).toBe(t.app.core.pki.trustBundlePem);
    const [leaf] = chainOf(cert);
    const [serverLeaf] = chainOf(serverCert);
    expect(leaf!.subjectAltName).toBe(`URI:spiffe://${t.app.core.pki.trustDomain}/router/${id}`);
    expect(leaf!.keyUsage).toEqual([CLIENT_AUTH]);
    expect(serverLeaf!.keyUsage).toEqual([SERVER_AUTH]);
    expect(serverLeaf!.subjectAltName).toContain('DNS:router.example.test');
    expect(await getRouter(id)).toMatchObject({ isVerified: true, fingerprint: sha1Of(leaf!) });

    const old = await extend(client);
    expect(old.statusCode).toBe(401);
    expect(errorOf(old).code).toBe('UNAUTHORIZED');
    // The new one extends in turn.
    expect((await extend({ certPem: cert, keyPem: newClient.keyPem })).statusCode).toBe(200);
  });

  it('refuses without a certificate, with a foreign one, with a network one of no router, and without TLS', async () => {
    const none = await extend(undefined);
    expect(none.statusCode).toBe(401);
    expect(errorOf(none).code).toBe('UNAUTHORIZED');

    const foreignCa = await testCa('er foreign CA');
    const foreign = await testCertificate('er-foreign', { issuer: foreignCa });
    const foreignAnswer = await extend({ certPem: foreign.certPem + foreignCa.certPem, keyPem: foreign.keyPem });
    expect(foreignAnswer.statusCode).toBe(401);

    const stranger = await testCertificate('er-stranger', { issuer: await networkIssuer(t) });
    expect((await extend({ certPem: stranger.certPem + t.app.core.pki.signingCertPem, keyPem: stranger.keyPem })).statusCode).toBe(401);

    // A router's own fingerprint on a certificate that does not chain to the network counts for nothing.
    const { id } = await enrolledRouter('er-extend-forged');
    const selfSigned = await testCertificate('er-self-signed');
    await t.app.core.store.db.updateTable('edge_routers').set({ fingerprint: selfSigned.fingerprint }).where('id', '=', id).execute();
    expect((await extend({ certPem: selfSigned.certPem, keyPem: selfSigned.keyPem })).statusCode).toBe(401);

    const injected = await call(t, 'POST', `${CLIENT}/enroll/extend/router`, { body: { certCsr: (await makeCsr()).pem, serverCertCsr: (await makeCsr()).pem } });
    expectError(injected, 401, 'UNAUTHORIZED');
  });

  it('refuses bad input and keeps the current certificate', async () => {
    const { id, client } = await enrolledRouter('er-extend-bad');
    const { fingerprint } = await getRouter(id);
    const good = (await makeCsr()).pem;
    for (const [body, code, field] of [
      [{ serverCertCsr: good }, 'COULD_NOT_VALIDATE', 'certCsr'],
      [{ certCsr: good }, 'COULD_NOT_VALIDATE', 'serverCertCsr'],
      [{ certCsr: 'not a csr', serverCertCsr: good }, 'MISSING_OR_INVALID_CSR', 'certCsr'],
      [{ certCsr: good, serverCertCsr: '' }, 'MISSING_OR_INVALID_CSR', 'serverCertCsr'],
    ] as const) {
      const res = await extend(client, body);
      expect(res.statusCode, res.body).toBe(400);
      expect(errorOf(res)).toMatchObject({ code, cause: { field } });
    }
    expect((await getRouter(id)).fingerprint).toBe(fingerprint);
    expect((await extend(client)).statusCode).toBe(200);
  });
});

describe('a transit router enrolls too (trott), through the generic /enroll', () => {
  const getTransit = async (id: string) => {
    const res = await call(t, 'GET', `${MGMT}/transit-routers/${id}`, { token: admin });
    expect(res.statusCode, res.body).toBe(200);
    return json(res).data;
  };

  it('is created unverified with a JWT (em trott), enrolls once with two CSRs, then extends like an edge router', async () => {
    const created = await call(t, 'POST', `${MGMT}/transit-routers`, { token: admin, body: { name: 'tr-enroll' } });
    expect(created.statusCode, created.body).toBe(201);
    const id = json(created).data.id as string;
    const r = await getTransit(id);
    expect(r).toMatchObject({ isVerified: false, fingerprint: null, enrollmentToken: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const keys = json(await t.inject({ method: 'GET', url: '/oidc/keys' }));
    const { payload } = await jwtVerify(r.enrollmentJwt, createLocalJWKSet(keys), { currentDate: new Date(t.clock()) });
    expect(payload).toMatchObject({ em: 'trott', sub: id, jti: r.enrollmentToken });
    // The read at /routers is the same.
    expect(json(await call(t, 'GET', `${MGMT}/routers/${id}`, { token: admin })).data.enrollmentToken).toBe(r.enrollmentToken);

    // Not an edge router's token.
    expect((await erott({ token: r.enrollmentToken, serverCsr: (await makeCsr(SERVER_NAMES)).pem, clientCsr: (await makeCsr()).pem })).statusCode).toBe(400);
    const client = await makeCsr();
    const body = { serverCertCsr: (await makeCsr(SERVER_NAMES)).pem, certCsr: client.pem };
    const enrolled = await call(t, 'POST', `${CLIENT}/enroll?method=trott&token=${r.enrollmentToken}`, { body });
    expect(enrolled.statusCode, enrolled.body).toBe(200);
    const data = json(enrolled).data as { ca: string; cert: string; serverCert: string };
    const [leaf] = chainOf(data.cert);
    expect(leaf!.subject).toContain(`CN=${id}`);
    expect(await getTransit(id)).toMatchObject({ isVerified: true, fingerprint: sha1Of(leaf!), enrollmentToken: null, enrollmentJwt: null, enrollmentExpiresAt: null });
    // Used: 410, by either path.
    expectError(await call(t, 'POST', `${CLIENT}/enroll?token=${r.enrollmentToken}`, { body }), 410, 'INVALID_ENROLLMENT_ALREADY_ENROLLED');

    const extended = await extend({ certPem: data.cert, keyPem: client.keyPem });
    expect(extended.statusCode, extended.body).toBe(200);
    expect((await getTransit(id)).fingerprint).toBe(sha1Of(chainOf(JSON.parse(extended.body).data.cert)[0]!));
  });

  it('shows its token only to a reader that may write routers', async () => {
    const id = json(await call(t, 'POST', `${MGMT}/transit-routers`, { token: admin, body: { name: 'tr-secret' } })).data.id as string;
    await createIdentityWithPassword(t, admin, { name: 'tr-reader', username: 'tr-reader', password: 'tr-reader-pw', permissions: ['admin_readonly'] });
    const reader = await login(t, 'tr-reader', 'tr-reader-pw');
    const read = json(await call(t, 'GET', `${MGMT}/transit-routers/${id}`, { token: reader })).data;
    expect(read).toMatchObject({ enrollmentToken: null, enrollmentJwt: null, enrollmentExpiresAt: expect.any(String) });
  });
});
