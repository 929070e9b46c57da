// The primary credential checks called directly (no HTTP): each refusal and what it says, the
// certificate validity bounds to the millisecond, which keys the failed-login throttle counts (and
// which errors it does not), the current-password check, what a login writes to the identity, the
// upgrade of weak password hashes (and only of those) and the lockout warning.
import { X509Certificate } from 'node:crypto';
import { hash } from '@node-rs/argon2';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Core } from '../src/core/core.js';
import { authenticatePrimary, checkCurrentPassword, login, type PrimaryCredentials } from '../src/auth/login.js';
import { isWeaker, verifyPassword } from '../src/auth/passwords.js';
import { ApiError } from '../src/errors.js';
import type { EntityOf } from '../src/resources/index.js';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  createIdentity,
  createIdentityWithPassword,
  json,
  MGMT,
  networkIssuer,
  selfSignedCertificate,
  testCertificate,
  startTestController,
  testClock,
  type TestController,
} from './helpers.js';

const DAY = 86_400_000;

let t: TestController;
let core: Core;
let admin: string;
let strictPolicy: string;
let lockPolicy: string;

function policy(name: string, cert: { allowed: boolean; allowExpiredCerts: boolean }, maxAttempts = 0) {
  return {
    name,
    primary: {
      cert,
      extJwt: { allowed: false, allowedSigners: null },
      updb: {
        allowed: true,
        maxAttempts,
        lockoutDurationMinutes: 5,
        minPasswordLength: 5,
        requireMixedCase: false,
        requireNumberChar: false,
        requireSpecialChar: false,
      },
    },
    secondary: { requireTotp: false, requireExtJwtSigner: null },
  };
}

async function createPolicy(body: ReturnType<typeof policy>): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/auth-policies`, { token: admin, body });
  expect(res.statusCode, res.body).toBe(201);
  return json(res).data.id as string;
}

beforeAll(async () => {
  // Certificates are made against the real time, so the controller's clock starts at it.
  t = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
  core = t.app.core;
  admin = await asAdmin(t);
  strictPolicy = await createPolicy(policy('strict-certs', { allowed: true, allowExpiredCerts: false }));
  lockPolicy = await createPolicy(policy('lock-after-2', { allowed: true, allowExpiredCerts: true }, 2));
});
afterAll(async () => {
  await t.close();
});
afterEach(() => {
  vi.restoreAllMocks();
});

let address = 0;
/** A client address no other check used, so the throttle counts only what a test does. */
const freshAddress = () => `10.9.${Math.floor(++address / 250)}.${address % 250}`;

/** The ApiError a check fails with. */
async function refusal(check: Promise<unknown>): Promise<ApiError> {
  const err = await check.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

async function certIdentity(name: string, authPolicyId?: string) {
  const id = await createIdentity(t, admin, { name, ...(authPolicyId && { authPolicyId }) });
  const now = t.clock();
  // Not before the network CA that issues it (made when the controller started), so the chain holds at its start.
  const cert = await testCertificate(name, { issuer: await networkIssuer(t), notBefore: new Date(now), notAfter: new Date(now + DAY) });
  const res = await call(t, 'POST', `${MGMT}/authenticators`, { token: admin, body: { method: 'cert', identityId: id, certPem: cert.certPem } });
  expect(res.statusCode, res.body).toBe(201);
  return { id, authenticatorId: json(res).data.id as string, certificate: new X509Certificate(cert.certPem) };
}

const byCert = (peerCertificate?: X509Certificate): PrimaryCredentials => ({
  method: 'cert',
  ipAddress: freshAddress(),
  ...(peerCertificate && { peerCertificate }),
});

async function authenticator(id: string): Promise<EntityOf<'authenticators'>> {
  return (await core.resources.get('authenticators').repo.get(core.store.db, id))!;
}

describe('refusals say why, to the holder of the credential', () => {
  it('ext-jwt: no token is presented', async () => {
    const err = await refusal(authenticatePrimary(core, { method: 'ext-jwt', ipAddress: freshAddress() }));
    expect([err.code, err.message]).toEqual(['INVALID_AUTH', 'the external JWT is refused: no bearer token was provided']);
    expect(err.headers?.['www-authenticate']).toBe('Bearer realm="overlay-primary-ext-jwt" error="missing" error_description="no bearer token was provided"');
  });

  it('cert: none presented, one of no trusted CA, or one no identity has', async () => {
    const none = await refusal(authenticatePrimary(core, byCert()));
    expect([none.code, none.message]).toEqual(['INVALID_AUTH', 'no client certificate was presented']);
    const selfSigned = new X509Certificate((await selfSignedCertificate('self-signed')).certPem);
    const untrusted = await refusal(authenticatePrimary(core, byCert(selfSigned)));
    expect([untrusted.code, untrusted.message]).toEqual([
      'INVALID_AUTH',
      'the client certificate does not chain to the network or to a verified CA that allows logins',
    ]);
    const stranger = new X509Certificate((await testCertificate('stranger', { issuer: await networkIssuer(t) })).certPem);
    const unknown = await refusal(authenticatePrimary(core, byCert(stranger)));
    expect([unknown.code, unknown.message]).toEqual(['INVALID_AUTH', 'the client certificate belongs to no identity']);
  });

  it('cert: the auth policy does not allow certificate logins', async () => {
    const noCerts = await createPolicy(policy('no-certs', { allowed: false, allowExpiredCerts: true }));
    const { certificate } = await certIdentity('cert-refused-by-policy', noCerts);
    const err = await refusal(authenticatePrimary(core, byCert(certificate)));
    expect([err.code, err.message]).toEqual(['INVALID_AUTH', 'the auth policy does not allow certificate logins']);
  });
});

describe('certificate validity, to the millisecond', () => {
  it('from its start', async () => {
    const { id, certificate } = await certIdentity('cert-not-yet');
    const start = Date.parse(certificate.validFrom);
    t.clock.set(start - 1);
    const err = await refusal(authenticatePrimary(core, byCert(certificate)));
    expect([err.code, err.message]).toEqual(['INVALID_AUTH', 'the client certificate is not valid yet']);
    t.clock.set(start);
    expect((await authenticatePrimary(core, byCert(certificate))).identity.id).toBe(id);
    t.clock.set(Date.now());
  });

  it('to its end, and after it only where the policy allows expired certificates', async () => {
    const strict = await certIdentity('cert-end-strict', strictPolicy);
    const lenient = await certIdentity('cert-end-lenient');
    const end = Date.parse(strict.certificate.validTo);
    t.clock.set(end);
    expect((await authenticatePrimary(core, byCert(strict.certificate))).identity.id).toBe(strict.id);
    t.clock.set(end + 1);
    const err = await refusal(authenticatePrimary(core, byCert(strict.certificate)));
    expect([err.code, err.message]).toEqual(['INVALID_AUTH', 'the client certificate has expired']);
    t.clock.set(Date.parse(lenient.certificate.validTo) + 1);
    expect((await authenticatePrimary(core, byCert(lenient.certificate))).identity.id).toBe(lenient.id);
    t.clock.set(Date.now());
  });
});

describe('the session a login opens', () => {
  it('is extendable only for a certificate login with a certificate the network issued', async () => {
    const { authenticatorId, certificate } = await certIdentity('cert-extendable');
    const open = (req: PrimaryCredentials) => login(core, { ...req, configTypes: [] });
    expect((await open(byCert(certificate))).session.isCertExtendable).toBe(false);
    await core.resources.get('authenticators').repo.update(core.store.db, authenticatorId, { isIssuedByNetwork: true });
    const extendable = await open(byCert(certificate));
    expect([extendable.session.isCertExtendable, extendable.session.authMethod]).toEqual([true, 'cert']);

    const pw = await createIdentityWithPassword(t, admin, { name: 'pw-not-extendable', username: 'pw-not-extendable', password: 'pw-not-ext-1' });
    await core.resources.get('authenticators').repo.update(core.store.db, pw.authenticatorId, { isIssuedByNetwork: true });
    const byPassword = await open({ method: 'password', username: 'pw-not-extendable', password: 'pw-not-ext-1', ipAddress: freshAddress() });
    expect(byPassword.session.isCertExtendable).toBe(false);
  });
});

describe('the failed-login throttle', () => {
  it('counts a login without a username under its address only', async () => {
    for (let i = 0; i < 25; i++) expect((await refusal(authenticatePrimary(core, byCert()))).code).toBe('INVALID_AUTH');
    const { id, certificate } = await certIdentity('cert-after-strangers');
    expect((await authenticatePrimary(core, byCert(certificate))).identity.id).toBe(id);
  });

  it('refuses with 429, Retry-After and a reason after too many failures', async () => {
    const ipAddress = freshAddress();
    for (let i = 0; i < 21; i++) await refusal(authenticatePrimary(core, { method: 'cert', ipAddress }));
    const err = await refusal(authenticatePrimary(core, { method: 'cert', ipAddress }));
    expect([err.code, err.status, err.message]).toEqual(['SERVER_TOO_MANY_REQUESTS', 429, 'too many failed logins; try again later']);
    expect(Number(err.headers?.['retry-after'])).toBeGreaterThan(0);
  });

  it('gives the place back when a check fails for another reason than the credentials', async () => {
    await createIdentityWithPassword(t, admin, { name: 'store-trouble', username: 'store-trouble', password: 'store-trouble-1' });
    // Only the check's own refusal counts: not another API error, nor an error that merely has its code.
    for (const trouble of [
      new Error('store unavailable'),
      new ApiError('NOT_FOUND', 'identity cache unavailable'),
      Object.assign(new Error('driver trouble'), { code: 'INVALID_AUTH' }),
    ]) {
      const ipAddress = freshAddress();
      const req: PrimaryCredentials = { method: 'password', username: 'store-trouble', password: 'store-trouble-1', ipAddress };
      const get = vi.spyOn(core.identities, 'get').mockRejectedValue(trouble);
      // One more than the budget of 20 failures: had they counted, the next check would be refused.
      for (let i = 0; i < 21; i++) await expect(authenticatePrimary(core, req)).rejects.toBe(trouble);
      get.mockRestore();
      expect((await authenticatePrimary(core, req)).authenticator?.username).toBe('store-trouble');
    }
  });
});

describe('the current password, before an identity changes its own', () => {
  it('a wrong one is refused naming the field and counted; the right one clears the count', async () => {
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'own-change', username: 'own-change', password: 'own-change-1' });
    const err = await refusal(checkCurrentPassword(core, await authenticator(authenticatorId), 'wrong-guess', freshAddress()));
    expect([err.code, err.message]).toEqual(['INVALID_AUTH', 'the current password is not correct']);
    expect(err.cause).toEqual({ field: 'currentPassword', reason: 'is not correct' });
    await refusal(checkCurrentPassword(core, await authenticator(authenticatorId), 'wrong-again', freshAddress()));
    expect((await authenticator(authenticatorId)).failedAttempts).toBe(2);
    await checkCurrentPassword(core, await authenticator(authenticatorId), 'own-change-1', freshAddress());
    expect((await authenticator(authenticatorId)).failedAttempts).toBe(0);
  });

  it('wrong ones count under the address, for every login from it', async () => {
    const guessed = await createIdentityWithPassword(t, admin, { name: 'guessed-own', username: 'guessed-own', password: 'guessed-own-1' });
    await createIdentityWithPassword(t, admin, { name: 'same-address', username: 'same-address', password: 'same-address-1' });
    const ipAddress = freshAddress();
    for (let i = 0; i < 21; i++) await refusal(checkCurrentPassword(core, await authenticator(guessed.authenticatorId), `guess-${i}`, ipAddress));
    const err = await refusal(authenticatePrimary(core, { method: 'password', username: 'same-address', password: 'same-address-1', ipAddress }));
    expect(err.code).toBe('SERVER_TOO_MANY_REQUESTS');
  });
});

describe('password logins', () => {
  it('without a username or a password are refused like wrong ones', async () => {
    await createIdentityWithPassword(t, admin, { name: 'half-given', username: 'half-given', password: 'half-given-1' });
    for (const req of [{ password: 'half-given-1' }, { username: 'half-given' }, {}]) {
      const err = await refusal(authenticatePrimary(core, { method: 'password', ipAddress: freshAddress(), ...req }));
      expect([err.code, err.message]).toEqual(['INVALID_AUTH', 'the credentials are not valid']);
    }
  });

  it('an identity deleted while its password is checked is refused like unknown credentials', async () => {
    await createIdentityWithPassword(t, admin, { name: 'vanishing', username: 'vanishing', password: 'vanishing-1' });
    vi.spyOn(core.kernel.repo('identities'), 'get').mockResolvedValueOnce(undefined);
    const err = await refusal(authenticatePrimary(core, { method: 'password', username: 'vanishing', password: 'vanishing-1', ipAddress: freshAddress() }));
    expect([err.code, err.message]).toEqual(['INVALID_AUTH', 'the credentials are not valid']);
  });
});

describe('what a login writes to the identity', () => {
  async function stored(id: string) {
    const e = (await core.kernel.repo('identities').get(core.store.db, id))!;
    return { envInfo: e.envInfo, sdkInfo: e.sdkInfo, updatedAt: e.updatedAt };
  }
  const open = (username: string, extra: { envInfo?: Record<string, string>; sdkInfo?: Record<string, string> }) =>
    login(core, { method: 'password', username, password: `${username}-1`, ipAddress: freshAddress(), configTypes: [], ...extra });

  it('envInfo alone, or sdkInfo alone, is stored with the time of the login', async () => {
    const { id } = await createIdentityWithPassword(t, admin, { name: 'env-only', username: 'env-only', password: 'env-only-1' });
    const before = await stored(id);
    t.clock.advance(1_000);
    await open('env-only', { envInfo: { os: 'linux' } });
    expect(await stored(id)).toEqual({ envInfo: { os: 'linux' }, sdkInfo: before.sdkInfo, updatedAt: new Date(t.clock()).toISOString() });
    t.clock.advance(1_000);
    await open('env-only', { sdkInfo: { version: '1.2.3' } });
    expect(await stored(id)).toEqual({ envInfo: { os: 'linux' }, sdkInfo: { version: '1.2.3' }, updatedAt: new Date(t.clock()).toISOString() });
  });

  it('nothing, when the login brings neither', async () => {
    const { id } = await createIdentityWithPassword(t, admin, { name: 'no-info', username: 'no-info', password: 'no-info-1' });
    const before = await stored(id);
    t.clock.advance(1_000);
    await open('no-info', {});
    expect(await stored(id)).toEqual(before);
  });
});

describe('password hashes', () => {
  it("a hash made with today's parameters is kept at login", async () => {
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'strong-hash', username: 'strong-hash', password: 'strong-hash-1' });
    const before = (await authenticator(authenticatorId)).passwordHash;
    await authenticatePrimary(core, { method: 'password', username: 'strong-hash', password: 'strong-hash-1', ipAddress: freshAddress() });
    expect((await authenticator(authenticatorId)).passwordHash).toBe(before);
  });

  it('a hash made with weaker parameters is replaced at the next login, and still verifies', async () => {
    const { authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'weak-hash', username: 'weak-hash', password: 'weak-hash-1' });
    const weak = await hash('weak-hash-1', { algorithm: 2, memoryCost: 8192, timeCost: 1, parallelism: 1 });
    await core.resources.get('authenticators').repo.update(core.store.db, authenticatorId, { passwordHash: weak });
    await authenticatePrimary(core, { method: 'password', username: 'weak-hash', password: 'weak-hash-1', ipAddress: freshAddress() });
    const stored = (await authenticator(authenticatorId)).passwordHash as string;
    expect(stored).not.toBe(weak);
    expect(isWeaker(stored)).toBe(false);
    expect((await verifyPassword(stored, 'weak-hash-1')).ok).toBe(true);
  });
});

describe('lockout', () => {
  it('is logged with the identity when wrong passwords lock it', async () => {
    const { id } = await createIdentityWithPassword(t, admin, { name: 'locks', username: 'locks', password: 'locks-pw-1', authPolicyId: lockPolicy });
    const warn = vi.spyOn(core.log, 'warn');
    const wrong = () => refusal(authenticatePrimary(core, { method: 'password', username: 'locks', password: 'not-it', ipAddress: freshAddress() }));
    await wrong();
    expect(warn).not.toHaveBeenCalled();
    await wrong();
    expect(warn).toHaveBeenCalledExactlyOnceWith({ identityId: id }, 'identity locked after wrong passwords');
  });
});
