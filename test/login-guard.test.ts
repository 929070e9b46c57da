// Password guessing under concurrency: lockout, the failed-login throttle and the own-authenticator
// routes hold however many requests arrive at once, and a wrong password learns nothing about the
// account. Each test sends real parallel requests.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import {
  ADMIN_ENV,
  asAdmin,
  authenticate,
  call,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  startTestController,
  type TestController,
} from './helpers.js';

const MINUTE = 60_000;
/** Failures the throttle lets through per address or account within its window: "more than 20" is refused. */
const THROTTLE_BUDGET = 21;

let t: TestController;
let lock5: string;
let passwordsOff: string;

function policy(name: string, updb: { allowed?: boolean; maxAttempts: number; lockoutDurationMinutes: number }) {
  return {
    name,
    primary: {
      cert: { allowed: true, allowExpiredCerts: true },
      extJwt: { allowed: true, allowedSigners: null },
      updb: {
        allowed: updb.allowed ?? true,
        maxAttempts: updb.maxAttempts,
        lockoutDurationMinutes: updb.lockoutDurationMinutes,
        minPasswordLength: 5,
        requireMixedCase: false,
        requireNumberChar: false,
        requireSpecialChar: false,
      },
    },
    secondary: { requireTotp: false, requireExtJwtSigner: null },
  };
}

async function createPolicy(body: unknown): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/auth-policies`, { token: await asAdmin(t), body });
  expect(res.statusCode).toBe(201);
  return json(res).data.id as string;
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  lock5 = await createPolicy(policy('lock-5', { maxAttempts: 5, lockoutDurationMinutes: 10 }));
  passwordsOff = await createPolicy(policy('no-passwords', { allowed: false, maxAttempts: 0, lockoutDurationMinutes: 0 }));
});
afterAll(async () => {
  await t.close();
});

let address = 0;
/** A client address no other test uses, so one test's failures never throttle another. */
const nextAddress = () => `10.8.${Math.floor(++address / 250)}.${address % 250}`;

async function identity(name: string, authPolicyId = 'default') {
  return createIdentityWithPassword(t, await asAdmin(t), { name, username: name, password: `${name}-pw`, authPolicyId });
}

async function identityRecord(id: string) {
  return json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: await asAdmin(t) })).data;
}

function statuses(responses: LightMyRequestResponse[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const r of responses) counts[r.statusCode] = (counts[r.statusCode] ?? 0) + 1;
  return counts;
}

/** `n` wrong passwords for `username` at once, each from its own address (no throttle in the way). */
function wrongAtOnce(username: string, n: number) {
  return Promise.all(Array.from({ length: n }, () => authenticate(t, username, 'wrong-password', { remoteAddress: nextAddress() })));
}

describe('lockout under concurrent guesses', () => {
  it('15 wrong passwords at once lock an identity whose policy allows 5', async () => {
    const { id } = await identity('burst15', lock5);
    const lockedAt = t.clock();
    const answers = await wrongAtOnce('burst15', 15);
    for (const r of answers) expectError(r, 401, 'INVALID_AUTH');

    const e = await identityRecord(id);
    expect(e.disabled).toBe(true);
    expect(Date.parse(e.disabledUntil) - lockedAt).toBe(10 * MINUTE);
    expectError(await authenticate(t, 'burst15', 'burst15-pw', { remoteAddress: nextAddress() }), 401, 'INVALID_AUTH');

    // Guesses that arrived while it was locked did not count towards the next lockout.
    t.clock.advance(10 * MINUTE);
    for (const r of await wrongAtOnce('burst15', 4)) expectError(r, 401, 'INVALID_AUTH');
    expect((await authenticate(t, 'burst15', 'burst15-pw', { remoteAddress: nextAddress() })).statusCode).toBe(200);
  });

  it('bursts of 4 failures lock at the fifth failure', async () => {
    const { id } = await identity('burst4', lock5);
    for (const r of await wrongAtOnce('burst4', 4)) expectError(r, 401, 'INVALID_AUTH');
    expect((await identityRecord(id)).disabled).toBe(false);
    for (const r of await wrongAtOnce('burst4', 4)) expectError(r, 401, 'INVALID_AUTH');
    expect((await identityRecord(id)).disabled).toBe(true);
  });

  it('exactly maxAttempts failures at once lock; one fewer does not', async () => {
    const five = await identity('exactly5', lock5);
    const four = await identity('exactly4', lock5);
    await Promise.all([wrongAtOnce('exactly5', 5), wrongAtOnce('exactly4', 4)]);
    expect((await identityRecord(five.id)).disabled).toBe(true);
    expect((await identityRecord(four.id)).disabled).toBe(false);
  });
});

describe('the failed-login throttle under concurrency', () => {
  it('100 failed logins at once from one address: only the budget reaches a password check', async () => {
    const remoteAddress = nextAddress();
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) => authenticate(t, `nobody-${i}`, 'wrong-password', { remoteAddress })),
    );
    expect(statuses(answers)).toEqual({ 401: THROTTLE_BUDGET, 429: 100 - THROTTLE_BUDGET });
    for (const r of answers.filter((a) => a.statusCode === 429)) {
      expectError(r, 429, 'SERVER_TOO_MANY_REQUESTS');
      expect(Number(r.headers['retry-after'])).toBe(10);
    }
    t.clock.advance(10_000);
  });

  it('100 failed logins at once for one account from 100 addresses: the same budget', async () => {
    await identity('popular');
    const answers = await wrongAtOnce('popular', 100);
    expect(statuses(answers)).toEqual({ 401: THROTTLE_BUDGET, 429: 100 - THROTTLE_BUDGET });
    t.clock.advance(10_000);
  });

  it('successful logins at once from one address are never refused, however many', async () => {
    await identity('crowd');
    const remoteAddress = nextAddress();
    const answers = await Promise.all(
      Array.from({ length: 40 }, () => authenticate(t, 'crowd', 'crowd-pw', { remoteAddress })),
    );
    expect(statuses(answers)).toEqual({ 200: 40 });
  });
});

describe('guessing the password through the own-authenticator routes', () => {
  const url = (authenticatorId: string) => `${CLIENT}/current-identity/authenticators/${authenticatorId}`;

  it('wrong current passwords are throttled like failed logins', async () => {
    const { authenticatorId } = await identity('stolen');
    const token = await login(t, 'stolen', 'stolen-pw', CLIENT);
    const remoteAddress = nextAddress();
    const answers: LightMyRequestResponse[] = [];
    for (let i = 0; i < 30; i++) {
      const verb = i % 2 === 0 ? 'PATCH' : 'PUT';
      answers.push(
        await call(t, verb, url(authenticatorId), {
          token,
          remoteAddress,
          body: { username: 'stolen', password: 'new-password-1', currentPassword: `guess-${i}` },
        }),
      );
    }
    expect(statuses(answers)).toEqual({ 401: THROTTLE_BUDGET, 429: 30 - THROTTLE_BUDGET });
    expect(Number(answers.at(-1)!.headers['retry-after'])).toBeGreaterThan(0);
    // The account's budget is spent everywhere, not only at that address.
    expectError(await authenticate(t, 'stolen', 'wrong-password', { remoteAddress: nextAddress() }), 429, 'SERVER_TOO_MANY_REQUESTS');
    t.clock.advance(10_000);
    expect((await authenticate(t, 'stolen', 'stolen-pw', { remoteAddress: nextAddress() })).statusCode).toBe(200);
  });

  it('30 wrong current passwords at once: no more password checks than the budget', async () => {
    const { authenticatorId } = await identity('stolen2');
    const token = await login(t, 'stolen2', 'stolen2-pw', CLIENT);
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        call(t, 'PATCH', url(authenticatorId), { token, remoteAddress: nextAddress(), body: { currentPassword: `guess-${i}` } }),
      ),
    );
    expect(statuses(answers)).toEqual({ 401: THROTTLE_BUDGET, 429: 30 - THROTTLE_BUDGET });
    t.clock.advance(10_000);
  });

  it("wrong current passwords count towards the auth policy's lockout", async () => {
    const { id, authenticatorId } = await identity('stolen3', lock5);
    const token = await login(t, 'stolen3', 'stolen3-pw', CLIENT);
    for (let i = 0; i < 5; i++) {
      const res = await call(t, 'PATCH', url(authenticatorId), { token, remoteAddress: nextAddress(), body: { currentPassword: `guess-${i}` } });
      expectError(res, 401, 'INVALID_AUTH', 'currentPassword');
    }
    expect((await identityRecord(id)).disabled).toBe(true);
    // The stolen session dies with the lock.
    expectError(
      await call(t, 'PATCH', url(authenticatorId), { token, remoteAddress: nextAddress(), body: { currentPassword: 'stolen3-pw' } }),
      401,
      'UNAUTHORIZED',
    );
  });

  it('at once, too: 15 wrong current passwords lock the identity', async () => {
    const { id, authenticatorId } = await identity('stolen4', lock5);
    const token = await login(t, 'stolen4', 'stolen4-pw', CLIENT);
    await Promise.all(
      Array.from({ length: 15 }, (_, i) =>
        call(t, 'PATCH', url(authenticatorId), { token, remoteAddress: nextAddress(), body: { currentPassword: `guess-${i}` } }),
      ),
    );
    expect((await identityRecord(id)).disabled).toBe(true);
  });
});

describe('a wrong password learns nothing about the account', () => {
  async function wrongAnswer(username: string) {
    const res = await authenticate(t, username, 'wrong-password', { remoteAddress: nextAddress() });
    const body = expectError(res, 401, 'INVALID_AUTH');
    return { code: body.error.code, message: body.error.message, cause: body.error.cause };
  }

  it('locked, disabled, password logins off and unknown all answer the same to a wrong password', async () => {
    const baseline = await wrongAnswer('no-such-account');
    expect(baseline.message).toBe('the credentials are not valid');

    const locked = await identity('leaky-locked', lock5);
    await wrongAtOnce('leaky-locked', 5);
    expect((await identityRecord(locked.id)).disabled).toBe(true);
    expect(await wrongAnswer('leaky-locked')).toEqual(baseline);

    const disabled = await identity('leaky-disabled');
    const admin = await asAdmin(t);
    expect((await call(t, 'POST', `${MGMT}/identities/${disabled.id}/disable`, { token: admin, body: { durationMinutes: 0 } })).statusCode).toBe(200);
    expect(await wrongAnswer('leaky-disabled')).toEqual(baseline);

    await identity('leaky-off', passwordsOff);
    expect(await wrongAnswer('leaky-off')).toEqual(baseline);

    await identity('leaky-fine');
    expect(await wrongAnswer('leaky-fine')).toEqual(baseline);
  });

  // An attack that worked: guesses went on during a lockout, and the right one was told apart by
  // its answer ("the identity is disabled"), to be used once the lockout ended.
  it('the right password for a locked or disabled identity gets the answer of a wrong one', async () => {
    const baseline = await wrongAnswer('no-such-account');
    const locked = await identity('honest-locked', lock5);
    await wrongAtOnce('honest-locked', 5);
    expect((await identityRecord(locked.id)).disabled).toBe(true);
    const res = await authenticate(t, 'honest-locked', 'honest-locked-pw', { remoteAddress: nextAddress() });
    const body = expectError(res, 401, 'INVALID_AUTH');
    expect({ code: body.error.code, message: body.error.message, cause: body.error.cause }).toEqual(baseline);
    const disabled = await identity('honest-disabled');
    const admin = await asAdmin(t);
    expect((await call(t, 'POST', `${MGMT}/identities/${disabled.id}/disable`, { token: admin, body: { durationMinutes: 0 } })).statusCode).toBe(200);
    const right = expectError(await authenticate(t, 'honest-disabled', 'honest-disabled-pw', { remoteAddress: nextAddress() }), 401, 'INVALID_AUTH');
    expect(right.error.message).toBe(baseline.message);

    await identity('honest-off', passwordsOff);
    const off = await authenticate(t, 'honest-off', 'honest-off-pw', { remoteAddress: nextAddress() });
    expect(expectError(off, 401, 'INVALID_AUTH').error.message).toBe('the auth policy does not allow password logins');
  });
});
