// /current-api-session/certificates on the Client API: an API session has short-lived client
// certificates signed for CSRs it sends, lists, reads and deletes them; another session (of the
// same identity or another) sees none of them, and they go when the session goes.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto, X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  expectMissingCredential,
  json,
  login,
  MGMT,
  startTestController,
  type TestController,
} from './helpers.js';

const P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const HOUR = 3_600_000;
const PATH = `${CLIENT}/current-api-session/certificates`;

let t: TestController;
let admin: string;
let identityId: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  identityId = (await createIdentityWithPassword(t, admin, { name: 'session-certs', username: 'session-certs', password: 'user-password-1' })).id;
});
afterAll(async () => {
  await t.close();
});

async function csrPem(): Promise<string> {
  const keys = (await webcrypto.subtle.generateKey(P256, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  return (await x509.Pkcs10CertificateRequestGenerator.create({ name: 'CN=whatever', keys, signingAlgorithm: P256 }, webcrypto)).toString('pem');
}

const session = () => login(t, 'session-certs', 'user-password-1', CLIENT);

async function create(token: string): Promise<{ id: string; certificate: string; cas: string }> {
  const res = await call(t, 'POST', PATH, { token, body: { csr: await csrPem() } });
  expect(res.statusCode, res.body).toBe(201);
  return json(res).data;
}

describe('/current-api-session/certificates', () => {
  it('signs a 12-hour certificate naming the identity and the session; lists, reads and deletes it', async () => {
    const token = await session();
    const apiSessionId = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { token })).data.id as string;
    const created = await call(t, 'POST', PATH, { token, body: { csr: await csrPem() } });
    expect(created.statusCode, created.body).toBe(201);
    const data = json(created).data;
    expect(data._links.self.href).toBe(`./current-api-session/certificates/${data.id}`);
    expect(data.cas).toBe(t.app.core.pki.trustBundlePem);
    const cert = new X509Certificate(data.certificate);
    expect(cert.subject).toBe(`CN=${identityId}`);
    expect(cert.subjectAltName).toContain(`/identity/${identityId}/apiSession/${apiSessionId}/apiSessionCertificate/${data.id}`);
    expect(Date.parse(cert.validTo) - t.clock()).toBeGreaterThan(12 * HOUR - 2000);
    expect(Date.parse(cert.validTo) - t.clock()).toBeLessThanOrEqual(12 * HOUR);
    expect(cert.checkIssued(new X509Certificate(t.app.core.pki.signingCertPem))).toBe(true);
    // The chain: the certificate, then the signing CA.
    expect(data.certificate).toBe(cert.toString() + t.app.core.pki.signingCertPem);

    const detail = json(await call(t, 'GET', `${PATH}/${data.id}`, { token })).data;
    expect(detail).toMatchObject({
      id: data.id,
      subject: cert.subject,
      fingerprint: expect.stringMatching(/^[0-9a-f]{40}$/),
      validFrom: new Date(cert.validFrom).toISOString(),
      validTo: new Date(cert.validTo).toISOString(),
      certificate: data.certificate,
    });
    expect(detail.apiSessionId).toBeUndefined();

    const second = await create(token);
    const list = json(await call(t, 'GET', PATH, { token }));
    expect(list.data.map((c: { id: string }) => c.id).sort()).toEqual([data.id, second.id].sort());
    expect(list.meta.pagination.totalCount).toBe(2);
    const filtered = json(await call(t, 'GET', `${PATH}?filter=${encodeURIComponent(`id = "${second.id}"`)}`, { token })).data;
    expect(filtered.map((c: { id: string }) => c.id)).toEqual([second.id]);

    expect((await call(t, 'DELETE', `${PATH}/${data.id}`, { token })).statusCode).toBe(200);
    expectError(await call(t, 'GET', `${PATH}/${data.id}`, { token }), 404, 'NOT_FOUND');
    expect(json(await call(t, 'GET', PATH, { token })).data.map((c: { id: string }) => c.id)).toEqual([second.id]);
  });

  it('no credential: 401 with the challenges, for every operation', async () => {
    expectMissingCredential(await call(t, 'GET', PATH));
    expectMissingCredential(await call(t, 'POST', PATH, { body: { csr: await csrPem() } }));
    expectMissingCredential(await call(t, 'GET', `${PATH}/some-id`));
    expectMissingCredential(await call(t, 'DELETE', `${PATH}/some-id`));
  });

  it("another API session's certificates are not found, even the same identity's", async () => {
    const mine = await session();
    const theirs = await session();
    const cert = await create(mine);
    expect(json(await call(t, 'GET', PATH, { token: theirs })).data).toEqual([]);
    expectError(await call(t, 'GET', `${PATH}/${cert.id}`, { token: theirs }), 404, 'NOT_FOUND');
    expectError(await call(t, 'DELETE', `${PATH}/${cert.id}`, { token: theirs }), 404, 'NOT_FOUND');
    // A filter cannot widen the scope.
    const widened = await call(t, 'GET', `${PATH}?filter=${encodeURIComponent(`id = "${cert.id}" or id != ""`)}`, { token: theirs });
    expect(widened.statusCode, widened.body).toBe(200);
    expect(json(widened).data).toEqual([]);
    expect(json(await call(t, 'GET', `${PATH}/${cert.id}`, { token: mine })).data.id).toBe(cert.id);
  });

  it('bad input: 400 naming the field', async () => {
    const token = await session();
    expectError(await call(t, 'POST', PATH, { token, body: {} }), 400, 'COULD_NOT_VALIDATE', 'csr');
    expectError(await call(t, 'POST', PATH, { token, body: { csr: 42 } }), 400, 'COULD_NOT_VALIDATE', 'csr');
    expectError(await call(t, 'POST', PATH, { token, body: { csr: 'not a csr' } }), 400, 'COULD_NOT_PROCESS_CSR', 'csr');
    expectError(await call(t, 'POST', PATH, { token, body: { csr: t.app.core.pki.signingCertPem } }), 400, 'COULD_NOT_PROCESS_CSR', 'csr');
    expectError(await call(t, 'GET', `${PATH}?limit=abc`, { token }), 400, 'INVALID_PAGINATION');
    expectError(await call(t, 'GET', `${PATH}?filter=${encodeURIComponent('apiSessionId = "x"')}`, { token }), 400, 'INVALID_FILTER');
    expect(json(await call(t, 'GET', PATH, { token })).data).toEqual([]);
  });

  it('unknown id: 404', async () => {
    const token = await session();
    expectError(await call(t, 'GET', `${PATH}/no-such-certificate`, { token }), 404, 'NOT_FOUND');
    expectError(await call(t, 'DELETE', `${PATH}/no-such-certificate`, { token }), 404, 'NOT_FOUND');
  });

  it('go with their API session', async () => {
    const token = await session();
    const cert = await create(token);
    const apiSessionId = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { token })).data.id as string;
    expect((await call(t, 'DELETE', `${MGMT}/api-sessions/${apiSessionId}`, { token: admin })).statusCode).toBe(200);
    const rows = await t.app.core.store.db.selectFrom('api_session_certificates').select('id').where('id', '=', cert.id).execute();
    expect(rows).toEqual([]);
  });

  it('are a Client API operation only', async () => {
    expect((await call(t, 'GET', `${MGMT}/current-api-session/certificates`, { token: admin })).statusCode).toBe(404);
  });
});
