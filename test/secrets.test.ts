// No answer of either API ever carries a password, a password hash or the hash of a session
// token: a full scenario is run and every answer it received is searched.
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
  ADMIN_USERNAME,
  authenticate,
  call,
  CLIENT,
  expectError,
  json,
  MGMT,
  sha256Hex,
  startTestController,
  type TestController,
} from './helpers.js';

let t: TestController;
const answers: LightMyRequestResponse[] = [];

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  const inject = t.inject;
  t.inject = async (opts) => {
    const res = await inject(opts);
    answers.push(res);
    return res;
  };
});
afterAll(async () => {
  await t.close();
});

/** Everything an answer shows: status line aside, its headers and its body. */
function rawText(res: LightMyRequestResponse, includeSessionHeader: boolean): string {
  const headers = Object.entries(res.headers)
    .filter(([name]) => includeSessionHeader || name !== 'overlay-session')
    .map(([name, value]) => `${name}: ${String(value)}`)
    .join('\n');
  return `${headers}\n\n${res.body}`;
}

describe('secrets in answers', () => {
  it('a full scenario never answers a password, a password hash or a token hash', async () => {
    const passwords = [ADMIN_PASSWORD];
    const tokens: string[] = [];
    const loginAs = async (username: string, password: string, api = MGMT) => {
      const res = await authenticate(t, username, password, { api });
      expect(res.statusCode, res.body).toBe(200);
      const token = json(res).data.token as string;
      tokens.push(token);
      return token;
    };

    const admin = await loginAs(ADMIN_USERNAME, ADMIN_PASSWORD);
    await loginAs(ADMIN_USERNAME, ADMIN_PASSWORD, CLIENT);

    // A policy with rules, identities under it and the default one.
    const policy = await call(t, 'POST', `${MGMT}/auth-policies`, {
      token: admin,
      body: {
        name: 'scenario-policy',
        primary: {
          cert: { allowed: true, allowExpiredCerts: true },
          extJwt: { allowed: true, allowedSigners: null },
          updb: {
            allowed: true,
            maxAttempts: 5,
            lockoutDurationMinutes: 1,
            minPasswordLength: 8,
            requireMixedCase: true,
            requireNumberChar: true,
            requireSpecialChar: false,
          },
        },
        secondary: { requireTotp: false, requireExtJwtSigner: null },
      },
    });
    expect(policy.statusCode).toBe(201);
    const policyId = json(policy).data.id as string;

    const users: { id: string; authId: string; username: string; password: string }[] = [];
    for (const [name, password, authPolicyId] of [
      ['scenario-one', 'Scenario-One-1', policyId],
      ['scenario-two', 'scenario-two-pw', 'default'],
    ] as const) {
      passwords.push(password);
      const identity = await call(t, 'POST', `${MGMT}/identities`, {
        token: admin,
        body: { name, type: 'User', isAdmin: false, authPolicyId, permissions: ['admin_readonly'] },
      });
      expect(identity.statusCode).toBe(201);
      const id = json(identity).data.id as string;
      const auth = await call(t, 'POST', `${MGMT}/authenticators`, {
        token: admin,
        body: { method: 'updb', identityId: id, username: name, password },
      });
      expect(auth.statusCode, auth.body).toBe(201);
      users.push({ id, authId: json(auth).data.id, username: name, password });
    }

    // Refused writes that carry passwords.
    passwords.push('weakpassword');
    expect((await call(t, 'PATCH', `${MGMT}/authenticators/${users[0]!.authId}`, { token: admin, body: { password: 'weakpassword' } })).statusCode).toBe(400);
    expect(
      (await call(t, 'POST', `${MGMT}/authenticators`, { token: admin, body: { method: 'updb', identityId: users[1]!.id, username: 'scenario-dup', password: 'weakpassword' } })).statusCode,
    ).toBe(400);

    // Logins, failed logins, a password change by the admin and by the user.
    const one = await loginAs('scenario-one', 'Scenario-One-1', CLIENT);
    const two = await loginAs('scenario-two', 'scenario-two-pw');
    expectError(await authenticate(t, 'scenario-one', 'Wrong-Password-1'), 401, 'INVALID_AUTH');
    expectError(await authenticate(t, ADMIN_USERNAME, 'not-the-admin-pw'), 401, 'INVALID_AUTH');
    passwords.push('Scenario-One-2', 'scenario-two-pw2', 'Wrong-Password-1', 'not-the-admin-pw');
    expect((await call(t, 'PATCH', `${MGMT}/authenticators/${users[0]!.authId}`, { token: admin, body: { password: 'Scenario-One-2' } })).statusCode).toBe(200);
    expect(
      (await call(t, 'PATCH', `${CLIENT}/current-identity/authenticators/${users[1]!.authId}`, {
        token: two,
        body: { password: 'scenario-two-pw2', currentPassword: 'scenario-two-pw' },
      })).statusCode,
    ).toBe(200);
    expect(
      (await call(t, 'PUT', `${MGMT}/current-identity/authenticators/${users[1]!.authId}`, {
        token: two,
        body: { username: 'scenario-two', password: 'scenario-two-pw3', currentPassword: 'wrong-current' },
      })).statusCode,
    ).toBe(401);
    passwords.push('scenario-two-pw3', 'wrong-current');
    await loginAs('scenario-one', 'Scenario-One-2');
    await loginAs('scenario-two', 'scenario-two-pw2', CLIENT);

    // Every read there is, as the admin and as the readonly users.
    for (const token of [admin, one, two]) {
      for (const api of [CLIENT, MGMT]) {
        await call(t, 'GET', `${api}/current-api-session`, { token });
        await call(t, 'GET', `${api}/current-identity`, { token });
        await call(t, 'GET', `${api}/current-identity/authenticators`, { token });
      }
      for (const path of ['/identities?limit=500', '/authenticators?limit=500', '/api-sessions?limit=500', '/auth-policies', '/identity-types']) {
        const res = await call(t, 'GET', `${MGMT}${path}`, { token });
        expect(res.statusCode, path).toBe(200);
      }
    }
    for (const u of users) {
      await call(t, 'GET', `${MGMT}/identities/${u.id}`, { token: admin });
      await call(t, 'GET', `${MGMT}/identities/${u.id}/authenticators`, { token: admin });
      await call(t, 'GET', `${MGMT}/authenticators/${u.authId}`, { token: admin });
      await call(t, 'GET', `${CLIENT}/current-identity/authenticators/${u.authId}`, { token: admin });
    }
    const sessions = json(await call(t, 'GET', `${MGMT}/api-sessions?limit=500`, { token: admin })).data as { id: string }[];
    expect(sessions.length).toBeGreaterThanOrEqual(tokens.length);
    for (const s of sessions) await call(t, 'GET', `${MGMT}/api-sessions/${s.id}`, { token: admin });
    // Errors of every kind.
    await call(t, 'GET', `${MGMT}/api-sessions?filter=${encodeURIComponent('tokenHash != null')}`, { token: admin });
    await call(t, 'GET', `${MGMT}/authenticators?filter=${encodeURIComponent('passwordHash != null')}`, { token: admin });
    await call(t, 'GET', `${CLIENT}/current-identity`, { token: sha256Hex(admin) });
    await call(t, 'GET', `${MGMT}/identities`, { token: one.slice(1) });
    // Logout and deletion of a session.
    await call(t, 'DELETE', `${CLIENT}/current-api-session`, { token: one });
    await call(t, 'DELETE', `${MGMT}/api-sessions/${sessions[0]!.id}`, { token: admin });

    expect(answers.length).toBeGreaterThan(60);
    const hashes = tokens.map(sha256Hex);
    for (const res of answers) {
      const text = rawText(res, false);
      for (const p of passwords) expect(text, `answer leaks a password: ${text}`).not.toContain(p);
      for (const h of hashes) expect(text, `answer leaks a token hash: ${text}`).not.toContain(h);
      expect(text).not.toMatch(/\$argon2/);
      // No stored secret field in any data answer (errors may name fields the request named).
      if (res.statusCode < 300) expect(text).not.toMatch(/passwordHash|tokenHash|password_hash|token_hash/);
    }
    // The stored hashes themselves never appear either.
    const stored = await t.app.core.store.db.selectFrom('authenticators').select('password_hash').execute();
    for (const { password_hash } of stored) {
      if (typeof password_hash !== 'string') continue;
      const digest = password_hash.split('$').pop()!;
      for (const res of answers) expect(rawText(res, true)).not.toContain(digest);
    }
  });

  it('a validation error never echoes a password back', async () => {
    const tooLong = `Secret-${'x'.repeat(100)}`;
    const tooShort = 'Sec1';
    const admin = json(await authenticate(t, ADMIN_USERNAME, ADMIN_PASSWORD)).data.token as string;
    const checks: LightMyRequestResponse[] = [
      await authenticate(t, ADMIN_USERNAME, tooLong),
      await authenticate(t, ADMIN_USERNAME, tooShort),
      await call(t, 'POST', `${MGMT}/authenticators`, {
        token: admin,
        body: { method: 'updb', identityId: 'whoever', username: 'echo-check', password: tooShort },
      }),
      await call(t, 'GET', `${CLIENT}/current-identity/authenticators`, { token: admin }).then(async (list) =>
        call(t, 'PATCH', `${CLIENT}/current-identity/authenticators/${json(list).data[0].id}`, {
          token: admin,
          body: { password: 'New-Password-1', currentPassword: tooShort },
        }),
      ),
    ];
    for (const res of checks) {
      expect(res.statusCode).toBe(400);
      expect(res.body).not.toContain(tooShort);
      expect(res.body).not.toContain(tooLong.slice(0, 20));
    }
  });
});
