// Lockout after failed password logins, under the identity's auth policy.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

let t: TestController;
let lock5: string;
let lockForever: string;

function policy(name: string, maxAttempts: number, lockoutDurationMinutes: number) {
  return {
    name,
    primary: {
      cert: { allowed: true, allowExpiredCerts: true },
      extJwt: { allowed: true, allowedSigners: null },
      updb: {
        allowed: true,
        maxAttempts,
        lockoutDurationMinutes,
        minPasswordLength: 5,
        requireMixedCase: false,
        requireNumberChar: false,
        requireSpecialChar: false,
      },
    },
    secondary: { requireTotp: false, requireExtJwtSigner: null },
  };
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  const admin = await asAdmin(t);
  const a = await call(t, 'POST', `${MGMT}/auth-policies`, { token: admin, body: policy('lock-5', 3, 5) });
  const b = await call(t, 'POST', `${MGMT}/auth-policies`, { token: admin, body: policy('lock-forever', 3, 0) });
  expect(a.statusCode).toBe(201);
  expect(b.statusCode).toBe(201);
  lock5 = json(a).data.id;
  lockForever = json(b).data.id;
});
afterAll(async () => {
  await t.close();
});

let address = 0;
/** Every test logs in from its own address, so the failure throttle stays out of the way. */
const nextAddress = () => `10.7.0.${++address}`;

async function identity(name: string, authPolicyId: string) {
  return createIdentityWithPassword(t, await asAdmin(t), { name, username: name, password: `${name}-pw`, authPolicyId });
}

describe('lockout', () => {
  it('maxAttempts 3, 5 minutes: the third failure disables the identity for 5 minutes', async () => {
    const { id } = await identity('locky', lock5);
    const remoteAddress = nextAddress();
    const session = await login(t, 'locky', 'locky-pw');
    for (let i = 0; i < 2; i++) expectError(await authenticate(t, 'locky', 'wrong-pw', { remoteAddress }), 401, 'INVALID_AUTH');
    // Two failures lock nothing.
    expect((await authenticate(t, 'locky', 'locky-pw', { remoteAddress: nextAddress() })).statusCode).toBe(200);
    const fresh = await login(t, 'locky', 'locky-pw');
    for (let i = 0; i < 3; i++) expectError(await authenticate(t, 'locky', 'wrong-pw', { remoteAddress }), 401, 'INVALID_AUTH');
    const lockedAt = t.clock();

    expectError(await authenticate(t, 'locky', 'locky-pw', { remoteAddress: nextAddress() }), 401, 'INVALID_AUTH');
    const e = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: await asAdmin(t) })).data;
    expect(e.disabled).toBe(true);
    expect(e.disabledAt).toBe(new Date(lockedAt).toISOString());
    expect(Date.parse(e.disabledUntil) - lockedAt).toBe(5 * MINUTE);
    // Its live sessions are refused while locked.
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token: fresh })).statusCode).toBe(401);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token: session })).statusCode).toBe(401);

    t.clock.advance(4 * MINUTE);
    expectError(await authenticate(t, 'locky', 'locky-pw', { remoteAddress: nextAddress() }), 401, 'INVALID_AUTH');
    t.clock.advance(1 * MINUTE);
    const after = await authenticate(t, 'locky', 'locky-pw', { remoteAddress: nextAddress() });
    expect(after.statusCode).toBe(200);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token: json(after).data.token })).statusCode).toBe(200);
  });

  it('the count starts again after the lockout ends', async () => {
    await identity('relock', lock5);
    const remoteAddress = nextAddress();
    for (let i = 0; i < 3; i++) expectError(await authenticate(t, 'relock', 'wrong-pw', { remoteAddress }), 401, 'INVALID_AUTH');
    t.clock.advance(5 * MINUTE);
    // Two more failures after the lockout do not lock again.
    for (let i = 0; i < 2; i++) expectError(await authenticate(t, 'relock', 'wrong-pw', { remoteAddress }), 401, 'INVALID_AUTH');
    expect((await authenticate(t, 'relock', 'relock-pw', { remoteAddress: nextAddress() })).statusCode).toBe(200);
  });

  it('successful logins never count: 2 failures, 1 success, 2 failures do not lock', async () => {
    const { id } = await identity('steady', lock5);
    const remoteAddress = nextAddress();
    for (let i = 0; i < 2; i++) expectError(await authenticate(t, 'steady', 'wrong-pw', { remoteAddress }), 401, 'INVALID_AUTH');
    expect((await authenticate(t, 'steady', 'steady-pw', { remoteAddress })).statusCode).toBe(200);
    for (let i = 0; i < 2; i++) expectError(await authenticate(t, 'steady', 'wrong-pw', { remoteAddress }), 401, 'INVALID_AUTH');
    expect((await authenticate(t, 'steady', 'steady-pw', { remoteAddress })).statusCode).toBe(200);
    const e = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: await asAdmin(t) })).data;
    expect(e.disabled).toBe(false);
  });

  it('lockoutDurationMinutes 0: disabled until an admin enables it', async () => {
    const { id } = await identity('frozen', lockForever);
    const remoteAddress = nextAddress();
    for (let i = 0; i < 3; i++) expectError(await authenticate(t, 'frozen', 'wrong-pw', { remoteAddress }), 401, 'INVALID_AUTH');
    const admin = await asAdmin(t);
    const e = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: admin })).data;
    expect(e.disabled).toBe(true);
    expect(e.disabledUntil).toBeNull();

    t.clock.advance(30 * 24 * 60 * MINUTE);
    expectError(await authenticate(t, 'frozen', 'frozen-pw', { remoteAddress: nextAddress() }), 401, 'INVALID_AUTH');

    const admin2 = await asAdmin(t);
    expect((await call(t, 'POST', `${MGMT}/identities/${id}/enable`, { token: admin2 })).statusCode).toBe(200);
    expect((await authenticate(t, 'frozen', 'frozen-pw', { remoteAddress: nextAddress() })).statusCode).toBe(200);
    // Enabling cleared the failure count: two failures do not lock it again.
    for (let i = 0; i < 2; i++) expectError(await authenticate(t, 'frozen', 'wrong-pw', { remoteAddress }), 401, 'INVALID_AUTH');
    expect((await authenticate(t, 'frozen', 'frozen-pw', { remoteAddress: nextAddress() })).statusCode).toBe(200);
  });

  it('failures of one identity do not lock another', async () => {
    const { id } = await identity('bystander', lock5);
    await identity('culprit', lock5);
    const remoteAddress = nextAddress();
    for (let i = 0; i < 3; i++) expectError(await authenticate(t, 'culprit', 'wrong-pw', { remoteAddress }), 401, 'INVALID_AUTH');
    expect((await authenticate(t, 'bystander', 'bystander-pw', { remoteAddress: nextAddress() })).statusCode).toBe(200);
    const e = json(await call(t, 'GET', `${MGMT}/identities/${id}`, { token: await asAdmin(t) })).data;
    expect(e.disabled).toBe(false);
  });

  it('the default policy (maxAttempts 0) never locks', async () => {
    await identity('unlockable', 'default');
    const remoteAddress = nextAddress();
    for (let i = 0; i < 15; i++) expectError(await authenticate(t, 'unlockable', 'wrong-pw', { remoteAddress }), 401, 'INVALID_AUTH');
    expect((await authenticate(t, 'unlockable', 'unlockable-pw', { remoteAddress: nextAddress() })).statusCode).toBe(200);
  });
});
