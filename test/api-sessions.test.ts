// API sessions on the Management API: list, detail and delete by admins; tokens and their hashes
// are never shown.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CHALLENGE_SESSION_INVALID,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  json,
  MGMT,
  authenticate,
  sha256Hex,
  startTestController,
  type TestController,
} from './helpers.js';
import { bearer, decodeJwt, oidcLogin, postToken } from './oidc-helpers.js';

let t: TestController;
let admin: string;
let user: { id: string; authenticatorId: string };

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  user = await createIdentityWithPassword(t, admin, { name: 'session-user', username: 'session-user', password: 'session-user-pw' });
});
afterAll(async () => {
  await t.close();
});

async function userSession(body: Record<string, unknown> = {}): Promise<{ id: string; token: string }> {
  const res = await authenticate(t, 'session-user', 'session-user-pw', { api: CLIENT, body });
  expect(res.statusCode).toBe(200);
  return { id: json(res).data.id, token: json(res).data.token };
}

const filterBy = (f: string) => `${MGMT}/api-sessions?filter=${encodeURIComponent(f)}`;

describe('list and detail', () => {
  it('show the sessions with their fields, never a token or its hash', async () => {
    const a = await userSession({ configTypes: ['ct-x'] });
    const b = await userSession();
    const res = await call(t, 'GET', `${filterBy(`identityId = "${user.id}"`)}&sort=createdAt`, { token: admin });
    expect(res.statusCode).toBe(200);
    const body = json(res);
    const ids = body.data.map((s: { id: string }) => s.id);
    expect(ids).toEqual(expect.arrayContaining([a.id, b.id]));
    expect(body.meta.pagination.totalCount).toBe(ids.length);
    for (const token of [a.token, b.token, admin]) {
      expect(res.body).not.toContain(token);
      expect(res.body).not.toContain(sha256Hex(token));
    }
    expect(res.body).not.toMatch(/"token"|tokenHash/);
    expect(body.meta.filterableFields).not.toContain('tokenHash');

    const one = await call(t, 'GET', `${MGMT}/api-sessions/${a.id}`, { token: admin });
    expect(one.statusCode).toBe(200);
    const s = json(one).data;
    expect(s).toMatchObject({
      id: a.id,
      identityId: user.id,
      identity: { entity: 'identities', id: user.id, name: 'session-user' },
      authenticatorId: user.authenticatorId,
      authMethod: 'password',
      configTypes: ['ct-x'],
      ipAddress: '127.0.0.1',
      isMfaRequired: false,
      isMfaComplete: false,
      authQueries: [],
      expirationSeconds: 1800,
    });
    expect(s._links.self.href).toBe(`./api-sessions/${a.id}`);
    expect(s._links.sessions.href).toBe(`./api-sessions/${a.id}/sessions`);
    expect(s).not.toHaveProperty('token');
    expect(s).not.toHaveProperty('tokenHash');
    expect(one.body).not.toContain(a.token);
    expect(one.body).not.toContain(sha256Hex(a.token));
  });

  it('refuses filters on private fields', async () => {
    const s = await userSession();
    expectError(await call(t, 'GET', filterBy(`tokenHash = "${sha256Hex(s.token)}"`), { token: admin }), 400, 'INVALID_FILTER');
  });

  it('has no create or update routes', async () => {
    const s = await userSession();
    expectError(await call(t, 'POST', `${MGMT}/api-sessions`, { token: admin, body: {} }), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call(t, 'PATCH', `${MGMT}/api-sessions/${s.id}`, { token: admin, body: {} }), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call(t, 'PUT', `${MGMT}/api-sessions/${s.id}`, { token: admin, body: {} }), 405, 'METHOD_NOT_ALLOWED');
  });

  it('are for admins only', async () => {
    const s = await userSession();
    for (const [method, url] of [
      ['GET', `${MGMT}/api-sessions`],
      ['GET', `${MGMT}/api-sessions/${s.id}`],
      ['DELETE', `${MGMT}/api-sessions/${s.id}`],
    ] as const) {
      expectError(await call(t, method, url, { token: s.token }), 401, 'UNAUTHORIZED');
    }
    // The user's own session is still alive: the refusal deleted nothing.
    expect((await call(t, 'GET', `${CLIENT}/current-api-session`, { token: s.token })).statusCode).toBe(200);
  });
});

describe('delete', () => {
  it('ends the session at once', async () => {
    const s = await userSession();
    const other = await userSession();
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token: s.token })).statusCode).toBe(200);
    const res = await call(t, 'DELETE', `${MGMT}/api-sessions/${s.id}`, { token: admin });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({});
    const after = await call(t, 'GET', `${CLIENT}/current-identity`, { token: s.token });
    expectError(after, 401, 'UNAUTHORIZED');
    expect(after.headers['www-authenticate']).toBe(CHALLENGE_SESSION_INVALID);
    expectError(await call(t, 'GET', `${MGMT}/api-sessions/${s.id}`, { token: admin }), 404, 'NOT_FOUND');
    expectError(await call(t, 'DELETE', `${MGMT}/api-sessions/${s.id}`, { token: admin }), 404, 'NOT_FOUND');
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token: other.token })).statusCode).toBe(200);
  });

  it('an admin may end its own session', async () => {
    const mine = json(await call(t, 'GET', `${MGMT}/current-api-session`, { token: admin })).data.id;
    expect((await call(t, 'DELETE', `${MGMT}/api-sessions/${mine}`, { token: admin })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${MGMT}/current-api-session`, { token: admin })).statusCode).toBe(401);
    admin = await asAdmin(t);
  });
});

describe('the stored token', () => {
  it('is kept only as its SHA-256, after its issue time', async () => {
    const s = await userSession();
    const row = await t.app.core.store.db.selectFrom('api_sessions').selectAll().where('id', '=', s.id).executeTakeFirstOrThrow();
    expect(Object.values(row)).not.toContain(s.token);
    expect(JSON.stringify(row)).not.toContain(s.token);
    expect(JSON.stringify(row)).not.toContain(s.token.slice(9));
    expect(row.token_hash).toBe(`${s.token.slice(0, 9)}${sha256Hex(s.token)}`);
  });
});

describe('expiry', () => {
  it('of an OIDC API session its refresh grant keeps alive is the end of the grant, in every answer about it', async () => {
    const tokens = await oidcLogin(t, 'session-user', 'session-user-pw');
    const asid = decodeJwt(tokens.access_token).payload.ov_asid as string;
    const grantEnd = t.clock() + 24 * 3_600_000;
    // Idle past the session timeout: the grant keeps the session, and a refresh still works.
    const idle = 45 * 60_000;
    t.clock.advance(idle);
    try {
      const a = await asAdmin(t);
      const one = json(await call(t, 'GET', `${MGMT}/api-sessions/${asid}`, { token: a })).data;
      const listed = json(await call(t, 'GET', filterBy(`id = "${asid}"`), { token: a })).data[0];
      for (const s of [one, listed]) {
        expect(s.expiresAt).toBe(new Date(grantEnd).toISOString());
        expect(s.expirationSeconds).toBe((grantEnd - t.clock()) / 1000);
      }
      const refreshed = await postToken(t, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: 'overlay' });
      expect(refreshed.statusCode).toBe(200);
      const own = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { headers: bearer(json(refreshed).access_token) })).data;
      // The refresh renewed the grant: it ends a full lifetime from now.
      expect(own.expiresAt).toBe(new Date(t.clock() + 24 * 3_600_000).toISOString());
    } finally {
      t.clock.advance(-idle);
    }
  });
});
