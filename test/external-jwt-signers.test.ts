// External JWT signers as records: CRUD on the Management API with the certificate read into
// commonName, fingerprint and validity; the checks of certPem, jwksEndpoint and externalAuthUrl; and
// the Client API's list of enabled signers with only what starts a login at the provider.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentityWithPassword,
  createSigner,
  expectError,
  json,
  login,
  MGMT,
  startTestController,
  testCertificate,
  type TestController,
} from './helpers.js';

let t: TestController;
let admin: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

const url = (id = '') => `${MGMT}/external-jwt-signers${id ? `/${id}` : ''}`;
const detail = async (id: string) => json(await call(t, 'GET', url(id), { token: admin })).data;

describe('create and read', () => {
  it('reads the certificate into commonName, fingerprint, notBefore and notAfter', async () => {
    const notBefore = new Date('2026-01-01T00:00:00Z');
    const notAfter = new Date('2027-01-01T00:00:00Z');
    const cert = await testCertificate('idp-signing', { notBefore, notAfter });
    const id = await createSigner(t, admin, { name: 'with-cert', certPem: cert.certPem, kid: 'kid-1', claimsProperty: 'email', useExternalId: true });
    const s = await detail(id);
    expect(s).toMatchObject({
      name: 'with-cert',
      issuer: 'https://with-cert.example.com',
      audience: 'overlay',
      enabled: true,
      certPem: cert.certPem,
      jwksEndpoint: null,
      kid: 'kid-1',
      claimsProperty: 'email',
      useExternalId: true,
      commonName: 'idp-signing',
      fingerprint: cert.fingerprint,
      notBefore: notBefore.toISOString(),
      notAfter: notAfter.toISOString(),
      targetToken: 'ACCESS',
      enrollToCertEnabled: false,
      enrollToTokenEnabled: false,
    });
  });

  it('replaces certificate fields when a patch moves the signer to a JWKS endpoint', async () => {
    const cert = await testCertificate('idp-moving');
    const id = await createSigner(t, admin, { name: 'moving', certPem: cert.certPem });
    const res = await call(t, 'PATCH', url(id), { token: admin, body: { certPem: null, jwksEndpoint: 'https://moving.example.com/keys' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(await detail(id)).toMatchObject({ certPem: null, jwksEndpoint: 'https://moving.example.com/keys', commonName: null, fingerprint: null, notBefore: null, notAfter: null });
  });

  const base = { name: 'bad-one', issuer: 'https://bad.example.com', audience: 'overlay', enabled: true };
  it.each([
    ['a PEM that is no certificate', { ...base, certPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' }, 'certPem'],
    ['text that is no PEM', { ...base, certPem: 'not a pem' }, 'certPem'],
    ['neither certPem nor jwksEndpoint', base, 'certPem'],
    ['a jwksEndpoint that is no URI', { ...base, jwksEndpoint: 'not a uri' }, 'jwksEndpoint'],
    ['an http jwksEndpoint (https only unless configured)', { ...base, jwksEndpoint: 'http://idp.example.com/jwks' }, 'jwksEndpoint'],
    ['a file: jwksEndpoint', { ...base, jwksEndpoint: 'file:///etc/passwd' }, 'jwksEndpoint'],
    ['an externalAuthUrl that is no URL', { ...base, jwksEndpoint: 'https://bad.example.com/jwks', externalAuthUrl: 'nope' }, 'externalAuthUrl'],
    ['a missing audience', { name: 'bad-one', issuer: 'https://bad.example.com', enabled: true, jwksEndpoint: 'https://bad.example.com/jwks' }, 'audience'],
    ['a bad targetToken', { ...base, jwksEndpoint: 'https://bad.example.com/jwks', targetToken: 'REFRESH' }, 'targetToken'],
    ['an unknown enrollAuthPolicyId', { ...base, jwksEndpoint: 'https://bad.example.com/jwks', enrollAuthPolicyId: 'no-such-policy' }, 'enrollAuthPolicyId', 'REFERENCED_ENTITY_NOT_FOUND'],
  ])('refuses %s with 400 naming the field, writing nothing', async (_what, body, field, code = 'COULD_NOT_VALIDATE') => {
    expectError(await call(t, 'POST', url(), { token: admin, body }), 400, code, field);
    const listed = json(await call(t, 'GET', `${url()}?filter=${encodeURIComponent('name = "bad-one"')}`, { token: admin }));
    expect(listed.data).toEqual([]);
  });

  it('refuses a second signer with the same issuer or the same certificate', async () => {
    const cert = await testCertificate('idp-twice');
    await createSigner(t, admin, { name: 'first-of-two', certPem: cert.certPem });
    expectError(
      await call(t, 'POST', url(), { token: admin, body: { name: 'second-of-two', issuer: 'https://first-of-two.example.com', audience: 'a', enabled: true, jwksEndpoint: 'https://x.example.com/j' } }),
      400,
      'COULD_NOT_VALIDATE',
      'issuer',
    );
    expectError(
      await call(t, 'POST', url(), { token: admin, body: { name: 'second-of-two', issuer: 'https://other.example.com', audience: 'a', enabled: true, certPem: cert.certPem } }),
      400,
      'COULD_NOT_VALIDATE',
      'certPem',
    );
  });

  it('is refused to a caller without the permission, and deleted by an admin', async () => {
    const user = await createIdentityWithPassword(t, admin, { name: 'no-signers', username: 'no-signers', password: 'no-signers-1' });
    const token = await login(t, 'no-signers', 'no-signers-1');
    expect(user.id).toBeTruthy();
    expect((await call(t, 'GET', url(), { token })).statusCode).toBe(401);
    const id = await createSigner(t, admin, { name: 'to-delete' });
    expect((await call(t, 'DELETE', url(id), { token: admin })).statusCode).toBe(200);
    expectError(await call(t, 'GET', url(id), { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('enrollment settings', () => {
  const policy = async (name: string, cert: boolean, extJwt: boolean) => {
    const updb = { allowed: true, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false };
    const res = await call(t, 'POST', `${MGMT}/auth-policies`, {
      token: admin,
      body: { name, primary: { cert: { allowed: cert, allowExpiredCerts: false }, extJwt: { allowed: extJwt, allowedSigners: [] }, updb }, secondary: { requireTotp: false, requireExtJwtSigner: null } },
    });
    return json(res).data.id as string;
  };
  const create = (name: string, body: Record<string, unknown>) =>
    call(t, 'POST', url(), { token: admin, body: { name, issuer: `https://${name}.example.com`, audience: 'overlay', enabled: true, jwksEndpoint: `https://${name}.example.com/jwks`, ...body } });

  it('needs an auth policy that allows the login enrolling leads to, and useExternalId for token-only identities', async () => {
    const certOnly = await policy('enroll-cert-only', true, false);
    const jwtOnly = await policy('enroll-jwt-only', false, true);
    expectError(await create('no-policy-cert', { enrollToCertEnabled: true }), 400, 'COULD_NOT_VALIDATE', 'enrollAuthPolicyId');
    expectError(await create('no-policy-token', { enrollToTokenEnabled: true, useExternalId: true }), 400, 'COULD_NOT_VALIDATE', 'enrollAuthPolicyId');
    expectError(await create('cert-refused', { enrollToCertEnabled: true, enrollAuthPolicyId: jwtOnly }), 400, 'COULD_NOT_VALIDATE', 'enrollAuthPolicyId');
    expectError(await create('token-refused', { enrollToTokenEnabled: true, useExternalId: true, enrollAuthPolicyId: certOnly }), 400, 'COULD_NOT_VALIDATE', 'enrollAuthPolicyId');
    expectError(await create('token-no-external-id', { enrollToTokenEnabled: true, enrollAuthPolicyId: jwtOnly }), 400, 'COULD_NOT_VALIDATE', 'useExternalId');
    expect((await create('enrolls-certs', { enrollToCertEnabled: true, enrollAuthPolicyId: certOnly })).statusCode).toBe(201);
    const tokens = await create('enrolls-tokens', { enrollToTokenEnabled: true, useExternalId: true, enrollAuthPolicyId: jwtOnly });
    expect(tokens.statusCode).toBe(201);
    // A patch is checked against the record it makes.
    expectError(await call(t, 'PATCH', url(json(tokens).data.id), { token: admin, body: { useExternalId: false } }), 400, 'COULD_NOT_VALIDATE', 'useExternalId');
  });

  it('a token-enrolling signer needs a policy that allows its own tokens, not only those of another signer', async () => {
    const other = await createSigner(t, admin, { name: 'the-other-signer' });
    const updb = { allowed: false, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false };
    const onlySigners = async (name: string, allowedSigners: string[]) =>
      json(
        await call(t, 'POST', `${MGMT}/auth-policies`, {
          token: admin,
          body: { name, primary: { cert: { allowed: false, allowExpiredCerts: false }, extJwt: { allowed: true, allowedSigners }, updb }, secondary: { requireTotp: false, requireExtJwtSigner: null } },
        }),
      ).data.id as string;
    const othersOnly = await onlySigners('other-signer-only', [other]);
    const refused = await create('not-allowed-signer', { enrollToTokenEnabled: true, useExternalId: true, enrollAuthPolicyId: othersOnly });
    expectError(refused, 400, 'COULD_NOT_VALIDATE', 'enrollAuthPolicyId');
    expect(json(refused).error.message).toContain('allowedSigners');

    const own = json(await create('allowed-signer', { useExternalId: true })).data.id as string;
    const ownOnly = await onlySigners('own-signer-only', [own]);
    const patched = await call(t, 'PATCH', url(own), { token: admin, body: { enrollToTokenEnabled: true, enrollAuthPolicyId: ownOnly } });
    expect(patched.statusCode, patched.body).toBe(200);
  });
});

describe('the Client API list', () => {
  it('lists enabled signers only, with what starts a login at the provider and nothing of how tokens are checked', async () => {
    const on = await createSigner(t, admin, {
      name: 'client-visible',
      externalAuthUrl: 'https://client-visible.example.com/authorize',
      clientId: 'overlay-app',
      scopes: ['openid', 'email'],
      targetToken: 'ID',
    });
    const off = await createSigner(t, admin, { name: 'client-hidden', enabled: false });
    const user = await createIdentityWithPassword(t, admin, { name: 'signer-lister', username: 'signer-lister', password: 'signer-lister-1' });
    expect(user.id).toBeTruthy();
    const token = await login(t, 'signer-lister', 'signer-lister-1', CLIENT);
    const res = await call(t, 'GET', `${CLIENT}/external-jwt-signers?limit=500`, { token });
    expect(res.statusCode, res.body).toBe(200);
    const listed = json(res).data as Record<string, unknown>[];
    expect(listed.map((s) => s.id)).toContain(on);
    expect(listed.map((s) => s.id)).not.toContain(off);
    const shown = listed.find((s) => s.id === on)!;
    expect(shown).toMatchObject({
      name: 'client-visible',
      externalAuthUrl: 'https://client-visible.example.com/authorize',
      clientId: 'overlay-app',
      scopes: ['openid', 'email'],
      targetToken: 'ID',
      audience: 'overlay',
    });
    for (const hidden of ['issuer', 'jwksEndpoint', 'certPem', 'claimsProperty', 'useExternalId', 'kid', 'enabled']) expect(shown).not.toHaveProperty(hidden);
    expectError(await call(t, 'GET', `${CLIENT}/external-jwt-signers?filter=${encodeURIComponent('issuer = "x"')}`, { token }), 400, 'INVALID_FILTER', 'filter');
  });
});
