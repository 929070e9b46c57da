// TOTP MFA on the Edge APIs, driven as a client with an authenticator app would: enrollment (also
// while a login waits for it), confirmation, logins completed with live and recovery codes, window
// edges and replays, recovery codes, removal by the identity and by an admin, the attempt limit under
// parallel requests, and what is kept at rest.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import jsqr from 'jsqr';
import { PNG } from 'pngjs';
import {
  ADMIN_ENV,
  asAdmin,
  authenticatorApp,
  call,
  CLIENT,
  createIdentityWithPassword,
  createTotpPolicy,
  expectError,
  expectMissingCredential,
  json,
  login,
  MGMT,
  overTls,
  startTestController,
  type TestController,
} from './helpers.js';

const MFA = `${CLIENT}/current-identity/mfa`;

const app = authenticatorApp;

/** The text of a QR code image, as a camera would read it. */
function readQr(png: Buffer): string | undefined {
  const image = PNG.sync.read(png);
  // The package is CommonJS; its types describe the ES module view, where the function is `default`.
  return jsqr.default(new Uint8ClampedArray(image.data), image.width, image.height)?.data;
}

let t: TestController;
let admin: string;

beforeEach(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterEach(async () => {
  await t.close();
});

async function person(name = 'alice', extra: Record<string, unknown> = {}) {
  const { id } = await createIdentityWithPassword(t, admin, { name, username: name, password: 'alice-password-1', ...extra });
  return { id, token: await login(t, name, 'alice-password-1', CLIENT) };
}

/** Enrolls and confirms TOTP with the session `token`; answers the app and the recovery codes. */
async function enroll(token: string) {
  const started = await call(t, 'POST', MFA, { token, body: {} });
  expect(started.statusCode).toBe(201);
  const { provisioningUrl, recoveryCodes } = json(started).data;
  const codeAt = app(provisioningUrl);
  const verified = await call(t, 'POST', `${MFA}/verify`, { token, body: { code: codeAt(t.clock()) } });
  expect(verified.statusCode, verified.body).toBe(200);
  return { codeAt, recoveryCodes: recoveryCodes as string[] };
}

describe('TOTP enrollment', () => {
  it('starts with a provisioning URL, 20 recovery codes and a QR code, and refuses a second start', async () => {
    const { token } = await person();
    expectError(await call(t, 'GET', MFA, { token }), 404, 'MFA_ENROLLMENT_NOT_STARTED');
    const res = await call(t, 'POST', MFA, { token, body: {} });
    expect(res.statusCode).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    const data = json(res).data;
    expect(data.isVerified).toBe(false);
    expect(data.id).toEqual(expect.any(String));
    expect(data._links.self.href).toBe('./current-identity/mfa');
    expect(data._links['qr-code'].href).toBe('./current-identity/mfa/qr-code');
    expect(data.provisioningUrl).toMatch(/^otpauth:\/\/totp\/alice\?issuer=overlay&secret=[A-Z2-7]{32}$/);
    expect(data.recoveryCodes).toHaveLength(20);
    for (const c of data.recoveryCodes) expect(c).toMatch(/^[A-Z2-7]{6}$/);
    expect(new Set(data.recoveryCodes).size).toBe(20);

    // In progress: the same secret and codes are shown again.
    const detail = json(await call(t, 'GET', MFA, { token })).data;
    expect(detail).toMatchObject({ isVerified: false, provisioningUrl: data.provisioningUrl, recoveryCodes: data.recoveryCodes });

    const qr = await call(t, 'GET', `${MFA}/qr-code`, { token });
    expect(qr.statusCode).toBe(200);
    expect(qr.headers['content-type']).toBe('image/png');
    // What an authenticator app's camera reads from it: the provisioning URL.
    expect(readQr(qr.rawPayload)).toBe(data.provisioningUrl);

    expectError(await call(t, 'POST', MFA, { token, body: {} }), 409, 'MFA_EXISTS');
  });

  it('two starts at once make one enrollment', async () => {
    const { token } = await person();
    const answers = await Promise.all(Array.from({ length: 6 }, () => call(t, 'POST', MFA, { token, body: {} })));
    expect(answers.filter((r) => r.statusCode === 201)).toHaveLength(1);
    for (const r of answers.filter((r) => r.statusCode !== 201)) expectError(r, 409, 'MFA_EXISTS');
  });

  it('is confirmed by a live code only, then asks for a code at every login', async () => {
    const { id, token } = await person();
    const start = json(await call(t, 'POST', MFA, { token, body: {} })).data;
    const codeAt = app(start.provisioningUrl);
    // A recovery code does not confirm an enrollment, nor does a wrong code.
    expectError(await call(t, 'POST', `${MFA}/verify`, { token, body: { code: start.recoveryCodes[0] } }), 401, 'MFA_INVALID_TOKEN');
    expectError(await call(t, 'POST', `${MFA}/verify`, { token, body: { code: '000000' === codeAt(t.clock()) ? '111111' : '000000' } }), 401, 'MFA_INVALID_TOKEN');
    expectError(await call(t, 'POST', `${MFA}/verify`, { token, body: {} }), 400, 'COULD_NOT_VALIDATE', 'code');
    expect((await call(t, 'POST', `${MFA}/verify`, { token, body: { code: codeAt(t.clock()) } })).statusCode).toBe(200);

    const detail = json(await call(t, 'GET', MFA, { token })).data;
    expect(detail.isVerified).toBe(true);
    expect(detail.provisioningUrl).toBeUndefined();
    expect(detail.recoveryCodes).toBeUndefined();
    expectError(await call(t, 'GET', `${MFA}/qr-code`, { token }), 404, 'NOT_FOUND');
    expectError(await call(t, 'POST', MFA, { token, body: {} }), 409, 'MFA_EXISTS');
    expectError(await call(t, 'POST', `${MFA}/verify`, { token, body: { code: codeAt(t.clock()) } }), 404, 'MFA_ENROLLMENT_NOT_STARTED');

    expect(json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data.isMfaEnabled).toBe(true);
    expect(json(await call(t, 'GET', `${CLIENT}/current-identity`, { token })).data.isMfaEnabled).toBe(true);

    const pending = json(await call(t, 'POST', `${CLIENT}/authenticate?method=password`, { body: { username: 'alice', password: 'alice-password-1' } })).data;
    expect(pending).toMatchObject({ isMfaRequired: true, isMfaComplete: false });
    expect(pending.authQueries).toEqual([
      { typeId: 'MFA', provider: 'overlay', format: 'alphaNumeric', httpMethod: 'POST', httpUrl: './authenticate/mfa', minLength: 6, maxLength: 6, isTotpEnrolled: true },
    ]);
  });

  it('an unconfirmed enrollment is cancelled with an empty code', async () => {
    const { token } = await person();
    await call(t, 'POST', MFA, { token, body: {} });
    expect((await call(t, 'DELETE', MFA, { token, body: { code: '' } })).statusCode).toBe(200);
    expectError(await call(t, 'GET', MFA, { token }), 404, 'MFA_ENROLLMENT_NOT_STARTED');
    expectError(await call(t, 'DELETE', MFA, { token }), 404, 'MFA_ENROLLMENT_NOT_STARTED');
  });

  it('a cancel read before a confirmation commits leaves the confirmed enrollment in place', async () => {
    const { id, token } = await person();
    const { provisioningUrl } = json(await call(t, 'POST', MFA, { token, body: {} })).data;
    const unconfirmed = (await t.app.core.mfa.of(id))!;
    expect((await call(t, 'POST', `${MFA}/verify`, { token, body: { code: app(provisioningUrl)(t.clock()) } })).statusCode).toBe(200);
    // Both ways of cancelling saw the enrollment as it was before the confirmation.
    const read = vi.spyOn(t.app.core.mfa, 'of').mockResolvedValue(unconfirmed);
    try {
      expectError(await call(t, 'DELETE', MFA, { token, body: { code: '' } }), 401, 'MFA_INVALID_TOKEN');
      await expect(t.app.core.mfa.cancel(id)).rejects.toMatchObject({ code: 'MFA_ENROLLMENT_NOT_STARTED' });
    } finally {
      read.mockRestore();
    }
    expect((await t.app.core.mfa.of(id))?.isVerified).toBe(true);
  });
});

describe('a login waiting for its second factor', () => {
  it('reaches only the MFA operations and its own API session until a code completes it', async () => {
    const { token } = await person();
    const { codeAt } = await enroll(token);
    t.clock.advance(30_000);
    const waiting = await login(t, 'alice', 'alice-password-1', CLIENT);
    for (const [method, url] of [
      ['GET', `${CLIENT}/current-identity`],
      ['GET', `${CLIENT}/services`],
      ['GET', `${CLIENT}/current-identity/authenticators`],
      ['GET', `${MFA}/recovery-codes`],
      ['GET', `${MGMT}/current-identity`],
    ] as const) {
      expect((await call(t, method, url, { token: waiting, headers: { 'mfa-validation-code': codeAt(t.clock()) } })).statusCode, url).toBe(401);
    }
    expect((await call(t, 'GET', `${CLIENT}/current-api-session`, { token: waiting })).statusCode).toBe(200);
    expect((await call(t, 'GET', MFA, { token: waiting })).statusCode).toBe(200);

    const done = await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: waiting, body: { code: codeAt(t.clock()) } });
    expect(done.statusCode, done.body).toBe(200);
    expect(json(done).data).toEqual({});
    const session = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { token: waiting })).data;
    expect(session).toMatchObject({ isMfaRequired: true, isMfaComplete: true, authQueries: [] });
    expect((await call(t, 'GET', `${CLIENT}/services`, { token: waiting })).statusCode).toBe(200);
  });

  it('accepts one step either side, refuses older codes and a code used before', async () => {
    const { token } = await person();
    const { codeAt } = await enroll(token);
    const fresh = () => login(t, 'alice', 'alice-password-1', CLIENT);
    const mfa = (tok: string, code: string) => call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: tok, body: { code } });

    // The code that confirmed the enrollment cannot complete a login in its window.
    expectError(await mfa(await fresh(), codeAt(t.clock())), 401, 'MFA_INVALID_TOKEN');
    t.clock.advance(60_000);
    // Two steps old: refused; one step ahead: accepted; then the current one is older: refused.
    expectError(await mfa(await fresh(), codeAt(t.clock() - 60_000)), 401, 'MFA_INVALID_TOKEN');
    expect((await mfa(await fresh(), codeAt(t.clock() + 30_000))).statusCode).toBe(200);
    expectError(await mfa(await fresh(), codeAt(t.clock())), 401, 'MFA_INVALID_TOKEN');
    t.clock.advance(90_000);
    // One step behind is accepted when nothing as late was taken.
    expect((await mfa(await fresh(), codeAt(t.clock() - 30_000))).statusCode).toBe(200);
    // The same code at once from two sessions: one passes.
    t.clock.advance(30_000);
    const [a, b] = await Promise.all([fresh(), fresh()]);
    const code = codeAt(t.clock());
    const both = await Promise.all([mfa(a, code), mfa(b, code)]);
    expect(both.map((r) => r.statusCode).sort()).toEqual([200, 401]);
  });

  it('takes a recovery code once', async () => {
    const { token } = await person();
    const { codeAt, recoveryCodes } = await enroll(token);
    const first = await login(t, 'alice', 'alice-password-1', CLIENT);
    expect((await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: first, body: { code: recoveryCodes[3]!.toLowerCase() } })).statusCode).toBe(200);
    const second = await login(t, 'alice', 'alice-password-1', CLIENT);
    expectError(await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: second, body: { code: recoveryCodes[3] } }), 401, 'MFA_INVALID_TOKEN');
    t.clock.advance(30_000);
    const codes = json(await call(t, 'GET', `${MFA}/recovery-codes`, { token: first, headers: { 'mfa-validation-code': codeAt(t.clock()) } })).data;
    expect(codes.remaining).toBe(19);
    expect(codes.recoveryCodes).toEqual([]);
  });

  it('takes a TOTP code typed with spaces, as authenticator apps show it', async () => {
    const { token } = await person();
    const { codeAt } = await enroll(token);
    t.clock.advance(30_000);
    const waiting = await login(t, 'alice', 'alice-password-1', CLIENT);
    const code = codeAt(t.clock());
    const res = await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: waiting, body: { code: ` ${code.slice(0, 3)} ${code.slice(3)} ` } });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('answers 409 MFA_NOT_ENROLLED without an enrollment', async () => {
    const { token } = await person();
    expectError(await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token, body: { code: '123456' } }), 409, 'MFA_NOT_ENROLLED');
    expectMissingCredential(await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { body: { code: '123456' } }));
  });

  it('allows 5 wrong codes per API session in 5 minutes, even sent at once, then 429 until the window passes', async () => {
    const { token } = await person();
    const { codeAt } = await enroll(token);
    t.clock.advance(30_000);
    const waiting = await login(t, 'alice', 'alice-password-1', CLIENT);
    const wrong = codeAt(t.clock()) === '000000' ? '111111' : '000000';
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: waiting, body: { code: wrong } })),
    );
    expect(answers.filter((r) => r.statusCode === 401)).toHaveLength(5);
    const refused = answers.filter((r) => r.statusCode === 429);
    expect(refused).toHaveLength(7);
    expect(Number(refused[0]!.headers['retry-after'])).toBeGreaterThan(0);
    // The right code is refused too while the limit holds.
    expectError(await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: waiting, body: { code: codeAt(t.clock()) } }), 429, 'SERVER_TOO_MANY_REQUESTS');
    t.clock.advance(5 * 60_000);
    expect((await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: waiting, body: { code: codeAt(t.clock()) } })).statusCode).toBe(200);
  });
});

describe('recovery codes', () => {
  it('are replaced after a valid code, the old ones then refused', async () => {
    const { token } = await person();
    const { codeAt, recoveryCodes } = await enroll(token);
    expectError(await call(t, 'POST', `${MFA}/recovery-codes`, { token, body: { code: '12345' } }), 401, 'MFA_INVALID_TOKEN');
    expectError(await call(t, 'GET', `${MFA}/recovery-codes`, { token }), 401, 'MFA_INVALID_TOKEN');
    const res = await call(t, 'POST', `${MFA}/recovery-codes`, { token, body: { code: recoveryCodes[0] } });
    expect(res.statusCode).toBe(200);
    const fresh: string[] = json(res).data.recoveryCodes;
    expect(fresh).toHaveLength(20);
    expect(fresh.some((c) => recoveryCodes.includes(c))).toBe(false);
    const waiting = await login(t, 'alice', 'alice-password-1', CLIENT);
    expectError(await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: waiting, body: { code: recoveryCodes[1] } }), 401, 'MFA_INVALID_TOKEN');
    expect((await call(t, 'POST', `${CLIENT}/authenticate/mfa`, { token: waiting, body: { code: fresh[1] } })).statusCode).toBe(200);
    t.clock.advance(30_000);
    const read = json(await call(t, 'GET', `${MFA}/recovery-codes`, { token, headers: { 'mfa-validation-code': codeAt(t.clock()) } })).data;
    expect(read.remaining).toBe(19);
  });
});

describe('reading recovery codes', () => {
  it('is for a confirmed enrollment only (404 before), and without a code is 401 MFA_INVALID_TOKEN, as in the established controller', async () => {
    const { token } = await person();
    expectError(await call(t, 'GET', `${MFA}/recovery-codes`, { token }), 404, 'MFA_ENROLLMENT_NOT_STARTED');
    const started = json(await call(t, 'POST', MFA, { token, body: {} })).data;
    const codeAt = app(started.provisioningUrl);
    expectError(await call(t, 'GET', `${MFA}/recovery-codes`, { token }), 404, 'MFA_ENROLLMENT_NOT_STARTED');
    const unconfirmed = await call(t, 'GET', `${MFA}/recovery-codes`, { token, headers: { 'mfa-validation-code': codeAt(t.clock()) } });
    expectError(unconfirmed, 404, 'MFA_ENROLLMENT_NOT_STARTED');
    expect((await call(t, 'POST', `${MFA}/verify`, { token, body: { code: codeAt(t.clock()) } })).statusCode).toBe(200);
    expectError(await call(t, 'GET', `${MFA}/recovery-codes`, { token }), 401, 'MFA_INVALID_TOKEN');
    t.clock.advance(30_000);
    expect((await call(t, 'GET', `${MFA}/recovery-codes`, { token, headers: { 'mfa-validation-code': codeAt(t.clock()) } })).statusCode).toBe(200);
  });
});

describe('reading recovery codes with the code in the body of the GET', () => {
  it('takes it over a real connection, as clients of the established controller send it; an empty one gives way to the header', async () => {
    const { token } = await person();
    const { codeAt, recoveryCodes } = await enroll(token);
    const [url] = await t.app.listen();
    const port = Number(new URL(url!).port);
    const read = await overTls(t, port, 'GET', `${MFA}/recovery-codes`, { token, body: { code: recoveryCodes[0] } });
    expect(read.statusCode, read.body).toBe(200);
    expect(JSON.parse(read.body).data.remaining).toBe(19);
    t.clock.advance(30_000);
    const viaHeader = await overTls(t, port, 'GET', `${MFA}/recovery-codes`, { token, body: { code: '' }, headers: { 'mfa-validation-code': codeAt(t.clock()) } });
    expect(viaHeader.statusCode, viaHeader.body).toBe(200);
    // And without a body at all, the header alone.
    const headerOnly = await overTls(t, port, 'GET', `${MFA}/recovery-codes`, { token, headers: { 'mfa-validation-code': recoveryCodes[2]! } });
    expect(headerOnly.statusCode, headerOnly.body).toBe(200);
    // A wrong code in the body is checked (and counted), not passed over for the header.
    const wrong = await overTls(t, port, 'GET', `${MFA}/recovery-codes`, { token, body: { code: '999999' }, headers: { 'mfa-validation-code': recoveryCodes[1]! } });
    expect(wrong.statusCode).toBe(401);
  });

  it('refuses a body that is not a code, not JSON or too large, with the error envelope', async () => {
    const { token } = await person();
    await enroll(token);
    const [url] = await t.app.listen();
    const port = Number(new URL(url!).port);
    const cases: [unknown, Record<string, string>, number, string][] = [
      [{ code: 123456 }, {}, 400, 'COULD_NOT_VALIDATE'],
      [{ code: 'x'.repeat(33) }, {}, 400, 'COULD_NOT_VALIDATE'],
      [{ code: '123456', pad: 'x'.repeat(5000) }, {}, 413, 'REQUEST_ENTITY_TOO_LARGE'],
    ];
    for (const [body, headers, status, code] of cases) {
      const res = await overTls(t, port, 'GET', `${MFA}/recovery-codes`, { token, body, headers });
      expect(res.statusCode, res.body).toBe(status);
      expect(JSON.parse(res.body).error.code).toBe(code);
    }
    const raw = await call(t, 'GET', `${MFA}/recovery-codes`, { token, headers: { 'content-type': 'application/json' }, body: '{"code":' });
    expectError(raw, 400, 'COULD_NOT_PARSE_BODY');
    const text = await call(t, 'GET', `${MFA}/recovery-codes`, { token, headers: { 'content-type': 'text/plain' }, body: '123456' });
    expectError(text, 415, 'UNSUPPORTED_MEDIA_TYPE');
    // The caller is known before any body is read.
    expectError(await call(t, 'GET', `${MFA}/recovery-codes`, { body: { code: '123456' } }), 401, 'UNAUTHORIZED');
  });
});

describe('removal', () => {
  it('by the identity with a valid code; the next login asks for nothing', async () => {
    const { id, token } = await person();
    const { codeAt } = await enroll(token);
    expectError(await call(t, 'DELETE', MFA, { token, body: { code: '' } }), 401, 'MFA_INVALID_TOKEN');
    t.clock.advance(30_000);
    expect((await call(t, 'DELETE', MFA, { token, headers: { 'mfa-validation-code': codeAt(t.clock()) } })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data.isMfaEnabled).toBe(false);
    const next = json(await call(t, 'POST', `${CLIENT}/authenticate?method=password`, { body: { username: 'alice', password: 'alice-password-1' } })).data;
    expect(next).toMatchObject({ isMfaRequired: false, authQueries: [] });
  });

  it('by an admin, confirmed or not; 404 without one or for an unknown identity; refused to others', async () => {
    const { id, token } = await person();
    await enroll(token);
    const bob = await person('bobby');
    expectMissingCredential(await call(t, 'DELETE', `${MGMT}/identities/${id}/mfa`));
    expectError(await call(t, 'DELETE', `${MGMT}/identities/${id}/mfa`, { token: bob.token }), 401, 'UNAUTHORIZED');
    expect((await call(t, 'DELETE', `${MGMT}/identities/${id}/mfa`, { token: admin })).statusCode).toBe(200);
    expectError(await call(t, 'DELETE', `${MGMT}/identities/${id}/mfa`, { token: admin }), 404, 'NOT_FOUND');
    expectError(await call(t, 'DELETE', `${MGMT}/identities/no-such-identity/mfa`, { token: admin }), 404, 'NOT_FOUND');
    await call(t, 'POST', MFA, { token: bob.token, body: {} });
    expect((await call(t, 'DELETE', `${MGMT}/identities/${bob.id}/mfa`, { token: admin })).statusCode).toBe(200);
    expectError(await call(t, 'GET', MFA, { token: bob.token }), 404, 'MFA_ENROLLMENT_NOT_STARTED');
  });
});

describe('an auth policy requiring TOTP', () => {
  it('leaves a login waiting until the identity enrolls during it', async () => {
    const { token } = await person('alice', { authPolicyId: await createTotpPolicy(t, admin, 'totp-required') });
    const session = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { token })).data;
    expect(session).toMatchObject({ isMfaRequired: true, isMfaComplete: false });
    expect(session.authQueries[0].isTotpEnrolled).toBe(false);
    expect((await call(t, 'GET', `${CLIENT}/services`, { token })).statusCode).toBe(401);
    // Enrolled as a person would: the app scans the QR code, and its code confirms.
    expect((await call(t, 'POST', MFA, { token, body: {} })).statusCode).toBe(201);
    const scanned = readQr((await call(t, 'GET', `${MFA}/qr-code`, { token })).rawPayload)!;
    expect((await call(t, 'POST', `${MFA}/verify`, { token, body: { code: app(scanned)(t.clock()) } })).statusCode).toBe(200);
    expect(json(await call(t, 'GET', `${CLIENT}/current-api-session`, { token })).data.isMfaComplete).toBe(true);
    expect((await call(t, 'GET', `${CLIENT}/services`, { token })).statusCode).toBe(200);
  });
});

describe('at rest', () => {
  it('keeps no usable secret or recovery code in the store', async () => {
    const { token } = await person();
    const started = json(await call(t, 'POST', MFA, { token, body: {} })).data;
    const secret = new URL(started.provisioningUrl).searchParams.get('secret')!;
    const before = JSON.stringify(await t.app.core.store.db.selectFrom('mfas').selectAll().execute());
    expect(before).not.toContain(secret);
    for (const c of started.recoveryCodes) expect(before).not.toContain(c);
    const codeAt = app(started.provisioningUrl);
    await call(t, 'POST', `${MFA}/verify`, { token, body: { code: codeAt(t.clock()) } });
    const [row] = await t.app.core.store.db.selectFrom('mfas').selectAll().execute();
    expect(row!.pending_recovery_codes).toBeNull();
    expect(String(row!.recovery_codes).split(',')).toHaveLength(20);
    expect(JSON.stringify(row)).not.toContain(secret);
  });
});
