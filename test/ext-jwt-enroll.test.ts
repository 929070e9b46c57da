// Token enrollment (POST /enroll/token): a JWT of an external signer that allows it creates the
// identity — named by a claim, with role attributes from a claim, the signer's auth policy and the
// mapped claim as externalId — with a network certificate for the CSR of the body (which then logs
// in over TLS), or without one for logins with the signer's JWTs. A device of a real oidc-provider
// enrolls; hand-made tokens show the refusals.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createPrivateKey, webcrypto } from 'node:crypto';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authPolicyBody,
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createSigner,
  expectError,
  json,
  MGMT,
  overTls,
  startTestController,
  tempDir,
  testCertificate,
  testClock,
  type TestController,
} from './helpers.js';
import { AUDIENCE, configAllowingLoopbackJwks, startExternalIdp, type ExternalIdp } from './external-idp.js';

const P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

let t: TestController;
let port: number;
let idp: ExternalIdp;
let admin: string;
let idpSigner: string;
let policy: string;
let handSigner: string;
let handKey: ReturnType<typeof createPrivateKey>;
const HAND_ISSUER = 'https://hand-enroll.example.com';
const dir = tempDir('overlay-ext-jwt-enroll-');

async function device(): Promise<{ csr: string; keyPem: string }> {
  const keys = (await webcrypto.subtle.generateKey(P256, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const csr = (await x509.Pkcs10CertificateRequestGenerator.create({ name: 'CN=device', keys, signingAlgorithm: P256 }, webcrypto)).toString('pem');
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)).toString('base64');
  return { csr, keyPem: `-----BEGIN PRIVATE KEY-----\n${pkcs8.replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END PRIVATE KEY-----\n` };
}

function enroll(token: string | undefined, body: unknown, issuerId?: string) {
  const headers: Record<string, string> = {};
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (issuerId !== undefined) headers['overlay-token-issuer-id'] = issuerId;
  return call(t, 'POST', `${CLIENT}/enroll/token`, { headers, body });
}

function handToken(claims: Record<string, unknown>): Promise<string> {
  const now = Math.floor(t.clock() / 1000);
  return new SignJWT({ iss: HAND_ISSUER, aud: 'overlay', ...claims }).setProtectedHeader({ alg: 'ES256' }).setIssuedAt(now).setExpirationTime(now + 300).sign(handKey);
}

async function identityByExternalId(externalId: string): Promise<Record<string, any> | undefined> {
  const res = await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent(`externalId = "${externalId}"`)}`, { token: admin });
  return json(res).data[0];
}

beforeAll(async () => {
  idp = await startExternalIdp(['frank-laptop', 'gina-phone', 'henry-tablet']);
  t = await startTestController({ env: { ...ADMIN_ENV, OVERLAY_CONFIG: configAllowingLoopbackJwks(dir.path) }, clock: testClock(Date.now()) });
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
  admin = await asAdmin(t);
  const res = await call(t, 'POST', `${MGMT}/auth-policies`, {
    token: admin,
    body: authPolicyBody('enrolled-devices', { primary: { cert: { allowed: true }, extJwt: { allowed: true } } }),
  });
  policy = json(res).data.id;
  idpSigner = await createSigner(t, admin, {
    name: 'enrolling-idp',
    issuer: idp.issuer,
    audience: AUDIENCE,
    jwksEndpoint: idp.jwksUrl,
    useExternalId: true,
    enrollToCertEnabled: true,
    enrollToTokenEnabled: true,
    enrollAuthPolicyId: policy,
    enrollNameClaimsSelector: 'client_id',
  });
  const cert = await testCertificate('hand-enroll');
  handKey = createPrivateKey(cert.keyPem);
  handSigner = await createSigner(t, admin, {
    name: 'hand-enroll',
    issuer: HAND_ISSUER,
    audience: 'overlay',
    certPem: cert.certPem,
    useExternalId: true,
    claimsProperty: 'email',
    enrollToCertEnabled: false,
    enrollToTokenEnabled: true,
    enrollAuthPolicyId: policy,
    enrollNameClaimsSelector: '/profile/name',
    enrollAttributeClaimsSelector: 'groups',
  });
});
afterAll(async () => {
  await t.close();
  await idp.close();
  dir.remove();
});

describe('to a certificate', () => {
  it('creates the identity from the token and answers a certificate that then logs in', async () => {
    const { csr, keyPem } = await device();
    const res = await enroll(await idp.token('frank-laptop'), { clientCsr: csr });
    expect(res.statusCode, res.body).toBe(200);
    const certPem = json(res).data.cert as string;
    expect(certPem).toContain('BEGIN CERTIFICATE');
    const identity = await identityByExternalId('frank-laptop');
    expect(identity).toMatchObject({ name: 'frank-laptop', externalId: 'frank-laptop', authPolicyId: policy, isAdmin: false });
    const login = await overTls(t, port, 'POST', `${CLIENT}/authenticate?method=cert`, { body: {}, client: { certPem, keyPem } });
    expect(login.statusCode, login.body).toBe(200);
    expect(JSON.parse(login.body).data.identity.id).toBe(identity!.id);
  });

  it('refuses a second enrollment of the same subject (409), creating nothing', async () => {
    const { csr } = await device();
    expectError(await enroll(await idp.token('frank-laptop'), { clientCsr: csr }), 409, 'ENROLLMENT_EXISTS');
    const res = await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent('externalId = "frank-laptop"')}`, { token: admin });
    expect(json(res).meta.pagination.totalCount).toBe(1);
  });

  it('refuses a CSR that is none', async () => {
    expectError(await enroll(await idp.token('henry-tablet'), { clientCsr: 'not a csr' }), 400, 'MISSING_OR_INVALID_CSR', 'clientCsr');
    expect(await identityByExternalId('henry-tablet')).toBeUndefined();
  });

  it('refuses a signer that does not allow enrollment to a certificate', async () => {
    const { csr } = await device();
    const res = await enroll(await handToken({ email: 'ivy@example.com', profile: { name: 'ivy' } }), { clientCsr: csr });
    expectError(res, 409, 'INVALID_ENROLLMENT_NOT_ALLOWED');
    expect(json(res).error.message).toContain(`the signer ${handSigner} does not allow enrollment to a certificate`);
  });
});

describe('to token logins', () => {
  it('creates the identity, which then logs in with the provider token', async () => {
    const token = await idp.token('gina-phone');
    const res = await enroll(token, null);
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res).data).toEqual({});
    const identity = await identityByExternalId('gina-phone');
    expect(identity).toMatchObject({ name: 'gina-phone', authPolicyId: policy });
    const login = await call(t, 'POST', `${CLIENT}/authenticate?method=ext-jwt`, { headers: { authorization: `Bearer ${token}` } });
    expect(login.statusCode, login.body).toBe(200);
    expect(json(login).data.identity.id).toBe(identity!.id);
  });

  it('names the identity and gives it role attributes from the claims the signer selects', async () => {
    const res = await enroll(await handToken({ email: 'jo@example.com', profile: { name: 'Jo Example' }, groups: ['eng', 'ops', '#all', 'eng'] }), {});
    expect(res.statusCode, res.body).toBe(200);
    const identity = await identityByExternalId('jo@example.com');
    expect(identity).toMatchObject({ name: 'Jo Example', authPolicyId: policy });
    expect([...identity!.roleAttributes].sort()).toEqual(['eng', 'ops']);
  });

  it('refuses claims of the wrong shape, and tokens without a name', async () => {
    expectError(await enroll(await handToken({ email: 'kim@example.com', profile: { name: 'kim' }, groups: 'eng' }), {}), 400, 'COULD_NOT_VALIDATE');
    const unnamed = await enroll(await handToken({ email: 'lee@example.com' }), {});
    expectError(unnamed, 400, 'COULD_NOT_VALIDATE');
    expect(json(unnamed).error.message).toContain('/profile/name');
    expect(await identityByExternalId('kim@example.com')).toBeUndefined();
  });
});

describe('refusals', () => {
  it('no token, a bad token, and a token checked against the signer overlay-token-issuer-id names: 400 INVALID_ENROLLMENT_TOKEN, as the established controller answers', async () => {
    const missing = await enroll(undefined, {});
    expectError(missing, 400, 'INVALID_ENROLLMENT_TOKEN');
    expect(json(missing).error.message).toContain('no bearer token');
    expect(missing.headers['www-authenticate']).toBeUndefined();
    expectError(await enroll('junk', {}), 400, 'INVALID_ENROLLMENT_TOKEN');
    const named = await enroll(await idp.token('henry-tablet'), {}, handSigner);
    expectError(named, 400, 'INVALID_ENROLLMENT_TOKEN');
    expect(json(named).error.message).toContain(`issuer (iss) is not ${HAND_ISSUER}`);
    expect((await enroll(await idp.token('henry-tablet'), {}, idpSigner)).statusCode).toBe(200);
  });

  it('an auth policy changed after the signer was written: enrolling is refused and makes no identity, and the signer stays editable', async () => {
    const created = await call(t, 'POST', `${MGMT}/auth-policies`, {
      token: admin,
      body: authPolicyBody('changes-later', { primary: { cert: { allowed: true }, extJwt: { allowed: true } } }),
    });
    const later = json(created).data.id as string;
    const cert = await testCertificate('policy-changes');
    const key = createPrivateKey(cert.keyPem);
    const issuer = 'https://policy-changes.example.com';
    const signer = await createSigner(t, admin, {
      name: 'policy-changes',
      issuer,
      audience: 'overlay',
      certPem: cert.certPem,
      useExternalId: true,
      enrollToCertEnabled: true,
      enrollToTokenEnabled: true,
      enrollAuthPolicyId: later,
    });
    const now = Math.floor(t.clock() / 1000);
    const token = await new SignJWT({ iss: issuer, aud: 'overlay', sub: 'nia@example.com' }).setProtectedHeader({ alg: 'ES256' }).setIssuedAt(now).setExpirationTime(now + 300).sign(key);
    const policyPatch = (primary: unknown) => call(t, 'PATCH', `${MGMT}/auth-policies/${later}`, { token: admin, body: { primary } });

    // The policy stops allowing this signer's tokens: an identity enrolled to token logins could never log in.
    expect((await policyPatch({ extJwt: { allowed: true, allowedSigners: [idpSigner] } })).statusCode).toBe(200);
    const toToken = await enroll(token, {});
    expectError(toToken, 409, 'INVALID_ENROLLMENT_NOT_ALLOWED');
    expect(json(toToken).error.message).toContain(`the auth policy ${later} of identities the signer ${signer} enrolls does not allow logins with the signer ${signer}`);
    // Then certificates.
    expect((await policyPatch({ cert: { allowed: false, allowExpiredCerts: false } })).statusCode).toBe(200);
    const toCert = await enroll(token, { clientCsr: (await device()).csr });
    expectError(toCert, 409, 'INVALID_ENROLLMENT_NOT_ALLOWED');
    expect(json(toCert).error.message).toContain('does not allow certificate logins');
    expect(await identityByExternalId('nia@example.com')).toBeUndefined();

    // The signer can still be switched off; only a change of its enrollment settings is checked again.
    expect((await call(t, 'PATCH', `${MGMT}/external-jwt-signers/${signer}`, { token: admin, body: { enabled: false } })).statusCode).toBe(200);
    expectError(await call(t, 'PATCH', `${MGMT}/external-jwt-signers/${signer}`, { token: admin, body: { enrollToTokenEnabled: false } }), 400, 'COULD_NOT_VALIDATE', 'enrollAuthPolicyId');
    expect((await call(t, 'PATCH', `${MGMT}/external-jwt-signers/${signer}`, { token: admin, body: { enrollToTokenEnabled: false, enrollToCertEnabled: false } })).statusCode).toBe(200);
  });

  it('a disabled signer enrolls nothing', async () => {
    expect((await call(t, 'PATCH', `${MGMT}/external-jwt-signers/${handSigner}`, { token: admin, body: { enabled: false } })).statusCode).toBe(200);
    const res = await enroll(await handToken({ email: 'max@example.com', profile: { name: 'max' } }), {});
    expectError(res, 400, 'INVALID_ENROLLMENT_TOKEN');
    expect(json(res).error.message).toContain('is disabled');
    expect(await identityByExternalId('max@example.com')).toBeUndefined();
  });
});
