// Certificate authorities on the Management API: CRUD with the CA certificate's rules, verification
// by a certificate the CA signed naming its token (each refusal and its code), the enrollment JWT
// verifiable against /oidc/keys, and the cert authenticators a CA issued going with it.
import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  createIdentity,
  createIdentityWithPassword,
  expectError,
  expectMissingCredential,
  json,
  login,
  MGMT,
  selfSignedCertificate,
  startTestController,
  testCa,
  testCertificate,
  testClock,
  type TestController,
  type TestIssuer,
} from './helpers.js';

let t: TestController;
let admin: string;

beforeAll(async () => {
  // Certificates are made against the real time, so the controller's clock starts at it.
  t = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

const url = (id = '', sub = '') => `${MGMT}/cas${id ? `/${id}` : ''}${sub ? `/${sub}` : ''}`;

function caBody(name: string, issuer: { certPem: string }, extra: Record<string, unknown> = {}) {
  return { name, certPem: issuer.certPem, isAuthEnabled: true, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: true, identityRoles: ['from-ca'], ...extra };
}

async function createCa(name: string, issuer: { certPem: string }, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await call(t, 'POST', url(), { token: admin, body: caBody(name, issuer, extra) });
  expect(res.statusCode, res.body).toBe(201);
  return json(res).data.id as string;
}

async function detail(id: string) {
  const res = await call(t, 'GET', url(id), { token: admin });
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
}

const verify = (id: string, body: string, token = admin) =>
  call(t, 'POST', url(id, 'verify'), { token, body, headers: { 'content-type': 'text/plain' } });

/** A certificate the issuer signs naming `cn`, as PEM. */
async function proof(issuer: TestIssuer, cn: string): Promise<string> {
  return (await testCertificate(cn, { issuer })).certPem;
}

describe('CA records', () => {
  it('create, read, list: unverified with a random token, the certificate fingerprint, defaults filled', async () => {
    const issuer = await testCa('records CA');
    const id = await createCa('records-ca', issuer, { tags: { team: 'pki' } });
    const ca = await detail(id);
    expect(ca).toMatchObject({
      id,
      name: 'records-ca',
      certPem: issuer.certPem,
      fingerprint: issuer.fingerprint,
      isVerified: false,
      isAuthEnabled: true,
      isAutoCaEnrollmentEnabled: false,
      isOttCaEnrollmentEnabled: true,
      identityRoles: ['from-ca'],
      identityNameFormat: '[caName]-[commonName]',
      externalIdClaim: null,
      tags: { team: 'pki' },
    });
    expect(ca.verificationToken).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // Its verification and enrollment JWT are linked (behaviour.md §1).
    expect(ca._links).toEqual({ self: { href: `./cas/${id}` }, verify: { href: `./cas/${id}/verify` }, jwt: { href: `./cas/${id}/jwt` } });
    const other = await detail(await createCa('records-ca-2', await testCa('records CA 2')));
    expect(other.verificationToken).not.toBe(ca.verificationToken);

    const list = await call(t, 'GET', `${url()}?filter=${encodeURIComponent('name = "records-ca"')}`, { token: admin });
    expect(list.statusCode).toBe(200);
    expect(json(list).data.map((c: { id: string }) => c.id)).toEqual([id]);
    expect(json(list).meta.filterableFields).toEqual(expect.arrayContaining(['name', 'fingerprint', 'isVerified', 'isAuthEnabled', 'verificationToken']));
  });

  it('full update and patch change what may change; isVerified, the token and the certificate stay', async () => {
    const issuer = await testCa('update CA');
    const id = await createCa('update-ca', issuer);
    const before = await detail(id);
    const claim = { index: 0, location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe', parser: 'NONE', parserCriteria: '' };
    const put = await call(t, 'PUT', url(id), {
      token: admin,
      body: {
        name: 'update-ca-renamed',
        isAuthEnabled: false,
        isAutoCaEnrollmentEnabled: true,
        isOttCaEnrollmentEnabled: false,
        identityRoles: ['a', 'b'],
        identityNameFormat: '[caName]/[commonName]',
        externalIdClaim: claim,
        isVerified: true,
        verificationToken: 'chosen',
      },
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(await detail(id)).toMatchObject({
      name: 'update-ca-renamed',
      isAuthEnabled: false,
      isAutoCaEnrollmentEnabled: true,
      identityRoles: ['a', 'b'],
      identityNameFormat: '[caName]/[commonName]',
      externalIdClaim: claim,
      isVerified: false,
      verificationToken: before.verificationToken,
      fingerprint: before.fingerprint,
    });

    const patch = await call(t, 'PATCH', url(id), { token: admin, body: { externalIdClaim: { matcherCriteria: 'urn' }, isVerified: true } });
    expect(patch.statusCode, patch.body).toBe(200);
    expect(await detail(id)).toMatchObject({ name: 'update-ca-renamed', externalIdClaim: { ...claim, matcherCriteria: 'urn' }, isVerified: false });

    // The certificate is fixed once the CA exists.
    const other = await testCa('another CA');
    expectError(await call(t, 'PATCH', url(id), { token: admin, body: { certPem: other.certPem } }), 400, 'COULD_NOT_VALIDATE', 'certPem');
    // A full update names identityNameFormat.
    const { certPem: _certPem, ...withoutFormat } = caBody('update-ca-renamed', issuer);
    expectError(await call(t, 'PUT', url(id), { token: admin, body: withoutFormat }), 400, 'COULD_NOT_VALIDATE');
  });

  it('refuses what is not one CA certificate, a certificate already registered and impossible claims, naming the field', async () => {
    const leaf = await selfSignedCertificate('not a CA');
    const bad = (body: Record<string, unknown>) => call(t, 'POST', url(), { token: admin, body });
    expectError(await bad(caBody('leaf-ca', leaf)), 400, 'COULD_NOT_VALIDATE', 'certPem');
    expectError(await bad(caBody('garbage-ca', { certPem: 'not a certificate' })), 400, 'COULD_NOT_VALIDATE', 'certPem');
    expectError(
      await bad(caBody('broken-ca', { certPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' })),
      400,
      'COULD_NOT_VALIDATE',
      'certPem',
    );
    const a = await testCa('bundle A');
    const b = await testCa('bundle B');
    expectError(await bad(caBody('bundle-ca', { certPem: a.certPem + b.certPem })), 400, 'COULD_NOT_VALIDATE', 'certPem');
    expectError(await bad(caBody('key-ca', { certPem: a.keyPem })), 400, 'COULD_NOT_VALIDATE', 'certPem');

    await createCa('first-of-its-cert', a);
    expectError(await bad(caBody('second-of-its-cert', a)), 400, 'COULD_NOT_VALIDATE', 'certPem');

    const { isAuthEnabled: _auth, ...withoutAuth } = caBody('no-auth-flag', b);
    expectError(await bad(withoutAuth), 400, 'COULD_NOT_VALIDATE', 'isAuthEnabled');
    const claim = { index: 0, location: 'COMMON_NAME', matcher: 'PREFIX', matcherCriteria: '', parser: 'NONE', parserCriteria: '' };
    expectError(await bad(caBody('claim-ca', b, { externalIdClaim: claim })), 400, 'COULD_NOT_VALIDATE', 'externalIdClaim.matcherCriteria');
    expectError(await bad(caBody('claim-ca', b, { externalIdClaim: { ...claim, matcher: 'SCHEME', matcherCriteria: 'x' } })), 400, 'COULD_NOT_VALIDATE', 'externalIdClaim.matcher');
    expectError(await bad(caBody('claim-ca', b, { externalIdClaim: { ...claim, matcher: 'ALL', parser: 'SPLIT' } })), 400, 'COULD_NOT_VALIDATE', 'externalIdClaim.parserCriteria');
    expectError(await bad(caBody('claim-ca', b, { externalIdClaim: { ...claim, location: 'NOWHERE' } })), 400, 'COULD_NOT_VALIDATE', 'externalIdClaim.location');
    // A patch leaving a stored-less claim incomplete is refused too.
    const id = await createCa('claim-ca', b);
    expectError(await call(t, 'PATCH', url(id), { token: admin, body: { externalIdClaim: { location: 'COMMON_NAME' } } }), 400, 'COULD_NOT_VALIDATE', 'externalIdClaim');
    // Nothing of the refused writes was kept.
    const names = json(await call(t, 'GET', `${url()}?limit=500`, { token: admin })).data.map((c: { name: string }) => c.name);
    expect(names).not.toContain('leaf-ca');
    expect(names).not.toContain('second-of-its-cert');
  });

  // An attack that worked: a holder of `ca` registered the network's signing CA, which took every
  // network-issued certificate authenticator as its own, then deleted it and them with it.
  it("refuses the network's own root and signing CA", async () => {
    for (const [name, certPem] of [
      ['network-root', t.app.core.pki.rootCertPem],
      ['network-signing', t.app.core.pki.signingCertPem],
    ] as const) {
      const res = await call(t, 'POST', url(), { token: admin, body: caBody(name, { certPem }) });
      expect(expectError(res, 400, 'COULD_NOT_VALIDATE', 'certPem').error.cause.reason).toBe('is a CA of this network itself, not a third-party CA');
    }
  });

  it('without a credential: 401 with both challenges; a caller without the ca permission: 401; an unknown id: 404', async () => {
    const issuer = await testCa('access CA');
    const id = await createCa('access-ca', issuer);
    expectMissingCredential(await call(t, 'GET', url()));
    expectMissingCredential(await call(t, 'POST', url(), { body: caBody('anon-ca', await testCa('anon CA')) }));
    expectMissingCredential(await call(t, 'GET', url(id, 'jwt')));
    expectMissingCredential(await call(t, 'POST', url(id, 'verify'), { body: await proof(issuer, 'x'), headers: { 'content-type': 'text/plain' } }));

    await createIdentityWithPassword(t, admin, { name: 'ca-stranger', username: 'ca-stranger', password: 'ca-stranger-1' });
    const stranger = await login(t, 'ca-stranger', 'ca-stranger-1');
    expectError(await call(t, 'GET', url(), { token: stranger }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'DELETE', url(id), { token: stranger }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'GET', url(id, 'jwt'), { token: stranger }), 401, 'UNAUTHORIZED');
    const token = (await detail(id)).verificationToken as string;
    expectError(await verify(id, await proof(issuer, token), stranger), 401, 'UNAUTHORIZED');
    expect((await detail(id)).isVerified).toBe(false);

    for (const [method, path] of [
      ['GET', url('no-such-ca')],
      ['PATCH', url('no-such-ca')],
      ['DELETE', url('no-such-ca')],
      ['GET', url('no-such-ca', 'jwt')],
    ] as const) {
      expectError(await call(t, method, path, { token: admin, ...(method === 'PATCH' && { body: { name: 'x' } }) }), 404, 'NOT_FOUND');
    }
    expectError(await verify('no-such-ca', await proof(issuer, token)), 404, 'NOT_FOUND');
  });
});

describe('POST /cas/{id}/verify', () => {
  it('each refusal has its code and leaves the CA unverified; the right certificate verifies it once', async () => {
    const issuer = await testCa('verify CA');
    const id = await createCa('verify-ca', issuer);
    const token = (await detail(id)).verificationToken as string;

    expectError(await verify(id, await proof(issuer, 'not-the-token')), 400, 'INVALID_COMMON_NAME');
    const other = await testCa('other signer');
    expectError(await verify(id, await proof(other, token)), 400, 'CERT_FAILED_VALIDATION');
    // Naming the CA as its issuer does not make another key's signature the CA's.
    const forged = await testCertificate(token, { issuer: other, issuerName: issuer.cert.subject });
    expectError(await verify(id, forged.certPem), 400, 'CERT_FAILED_VALIDATION');
    // Signed by the CA but expired.
    const expired = await testCertificate(token, { issuer, notBefore: new Date(Date.now() - 3 * 86_400_000), notAfter: new Date(Date.now() - 86_400_000) });
    expectError(await verify(id, expired.certPem), 400, 'CERT_FAILED_VALIDATION');
    expectError(await verify(id, 'hello, this is no certificate'), 400, 'EXPECTED_PEM_CERTIFICATE');
    expectError(await verify(id, ''), 400, 'EXPECTED_PEM_CERTIFICATE');
    expectError(await verify(id, issuer.keyPem), 400, 'EXPECTED_PEM_CERTIFICATE');
    expect((await detail(id)).isVerified).toBe(false);

    const right = await proof(issuer, token);
    const ok = await verify(id, right);
    expect(ok.statusCode, ok.body).toBe(200);
    expect(json(ok).data).toEqual({});
    expect((await detail(id)).isVerified).toBe(true);
    expectError(await verify(id, right), 409, 'CA_ALREADY_VERIFIED');
  });

  it('of two verifications at once, one verifies and the other finds it verified', async () => {
    const issuer = await testCa('race CA');
    const id = await createCa('race-ca', issuer);
    const right = await proof(issuer, (await detail(id)).verificationToken as string);
    const answers = await Promise.all([verify(id, right), verify(id, right)]);
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 409]);
  });
});

describe('GET /cas/{id}/jwt', () => {
  it('answers application/jwt: an enrollment JWT (em ca, the CA as subject) that /oidc/keys verifies', async () => {
    const id = await createCa('jwt-ca', await testCa('jwt CA'));
    const res = await call(t, 'GET', url(id, 'jwt'), { token: admin });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/jwt/);
    const keys = json(await t.inject({ method: 'GET', url: '/oidc/keys' }));
    const { payload, protectedHeader } = await jwtVerify(res.body, createLocalJWKSet(keys), { currentDate: new Date(t.clock()) });
    expect(protectedHeader.kid).toBe(keys.keys[0].kid);
    expect(payload).toMatchObject({ em: 'ca', sub: id, jti: id });
    expect(String(payload.iss)).toMatch(/^https:\/\//);
    expect(payload.ctrls).toEqual([payload.iss]);
  });
});

describe('deleting a CA', () => {
  it('deletes the cert authenticators it issued, those made before it was registered too, and no others', async () => {
    const issuer = await testCa('delete CA');
    const before = await createIdentity(t, admin, { name: 'ca-user-before' });
    const beforeAuth = await call(t, 'POST', `${MGMT}/authenticators`, {
      token: admin,
      body: { method: 'cert', identityId: before, certPem: (await testCertificate('ca-user-before', { issuer })).certPem },
    });
    expect(beforeAuth.statusCode, beforeAuth.body).toBe(201);
    const id = await createCa('delete-ca', issuer);
    const after = await createIdentity(t, admin, { name: 'ca-user-after' });
    const afterAuth = await call(t, 'POST', `${MGMT}/authenticators`, {
      token: admin,
      body: { method: 'cert', identityId: after, certPem: (await testCertificate('ca-user-after', { issuer })).certPem },
    });
    expect(afterAuth.statusCode, afterAuth.body).toBe(201);
    const unrelated = await createIdentity(t, admin, { name: 'ca-user-unrelated' });
    const unrelatedAuth = await call(t, 'POST', `${MGMT}/authenticators`, {
      token: admin,
      body: { method: 'cert', identityId: unrelated, certPem: (await testCertificate('ca-user-unrelated', { issuer: await testCa('unrelated CA') })).certPem },
    });
    expect(unrelatedAuth.statusCode).toBe(201);
    const enrolling = await createIdentity(t, admin, { name: 'ca-user-enrolling' });
    const pending = await call(t, 'POST', `${MGMT}/enrollments`, {
      token: admin,
      body: { method: 'ottca', identityId: enrolling, caId: id, expiresAt: new Date(t.clock() + 3_600_000).toISOString() },
    });
    expect(pending.statusCode, pending.body).toBe(201);

    const deleted = await call(t, 'DELETE', url(id), { token: admin });
    expect(deleted.statusCode, deleted.body).toBe(200);
    expectError(await call(t, 'GET', url(id), { token: admin }), 404, 'NOT_FOUND');
    for (const res of [beforeAuth, afterAuth]) {
      expectError(await call(t, 'GET', `${MGMT}/authenticators/${json(res).data.id}`, { token: admin }), 404, 'NOT_FOUND');
    }
    expect((await call(t, 'GET', `${MGMT}/authenticators/${json(unrelatedAuth).data.id}`, { token: admin })).statusCode).toBe(200);
    // Its enrollments went too: none is left naming a CA that is gone.
    expectError(await call(t, 'GET', `${MGMT}/enrollments/${json(pending).data.id}`, { token: admin }), 404, 'NOT_FOUND');
    // The identities stay; only their authenticators went.
    expect((await call(t, 'GET', `${MGMT}/identities/${before}`, { token: admin })).statusCode).toBe(200);
  });
});
