// OIDC access tokens on both Edge APIs through the credential pipeline: accepted wherever a legacy
// session is, expiry headers from the token, and every way of ending access taking effect on the
// next request (API session deleted, JTI / API_SESSION / IDENTITY revocations, identity disabled).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
  ADMIN_USERNAME,
  asAdmin,
  call,
  CHALLENGE_MISSING,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  json,
  MGMT,
  startTestController,
  tempDir,
  type TestController,
} from './helpers.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bearer, decodeJwt, oidcLogin, type Tokens } from './oidc-helpers.js';

const BEARER_INVALID = 'Bearer realm="overlay-oidc" error="invalid" error_description="token is invalid"';

let t: TestController;
let admin: string;
let n = 0;

async function loggedIn(): Promise<{ id: string; tokens: Tokens; asid: string; jti: string }> {
  const name = `bearer-${++n}`;
  const { id } = await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw` });
  const tokens = await oidcLogin(t, name, `${name}-pw`);
  const { payload } = decodeJwt(tokens.access_token);
  return { id, tokens, asid: payload.ov_asid, jti: payload.jti };
}

function get(api: string, path: string, token: string) {
  return call(t, 'GET', `${api}${path}`, { headers: bearer(token) });
}

async function expectRefused(token: string): Promise<void> {
  for (const api of [CLIENT, MGMT]) {
    const res = await get(api, '/current-identity', token);
    expectError(res, 401, 'UNAUTHORIZED');
    expect(res.headers['www-authenticate']).toBe(BEARER_INVALID);
  }
}

async function revoke(id: string, type: 'JTI' | 'API_SESSION' | 'IDENTITY'): Promise<void> {
  const res = await call(t, 'POST', `${MGMT}/revocations`, { token: admin, body: { id, type } });
  expect(res.statusCode, res.body).toBe(201);
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

describe('accepted wherever a legacy session is', () => {
  it('on both APIs, with the expiry headers of the access token', async () => {
    const { id, tokens, asid } = await loggedIn();
    const exp = decodeJwt(tokens.access_token).payload.exp;
    for (const api of [CLIENT, MGMT]) {
      const me = await get(api, '/current-identity', tokens.access_token);
      expect(me.statusCode).toBe(200);
      expect(json(me).data.id).toBe(id);
      expect(me.headers['expires-at']).toBe(new Date(exp * 1000).toISOString());
      expect(me.headers['expiration-seconds']).toBe(String(Math.floor((exp * 1000 - t.clock()) / 1000)));
      const session = await get(api, '/current-api-session', tokens.access_token);
      expect(json(session).data).toMatchObject({ id: asid, identityId: id, isMfaRequired: false });
      expect(json(session).data.token).toBeUndefined();
    }
  });

  it('an admin’s token reaches admin operations; a plain identity’s is refused with the bearer challenge', async () => {
    const adminTokens = await oidcLogin(t, ADMIN_USERNAME, ADMIN_PASSWORD);
    const list = await get(MGMT, '/identities', adminTokens.access_token);
    expect(list.statusCode).toBe(200);
    expect(decodeJwt(adminTokens.access_token).payload.ov_ia).toBe(true);
    const { tokens } = await loggedIn();
    const refused = await get(MGMT, '/identities', tokens.access_token);
    expectError(refused, 401, 'UNAUTHORIZED');
    expect(refused.headers['www-authenticate']).toBe('Bearer realm="overlay-oidc" error="invalid" error_description="not permitted"');
  });

  it('config types asked for at authorization become ov_ct (ids) and the session’s', async () => {
    const name = `bearer-ct-${++n}`;
    await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw` });
    const types = json(await call(t, 'GET', `${MGMT}/config-types`, { token: admin })).data as { id: string; name: string }[];
    const intercept = types.find((ct) => ct.name === 'intercept.v1')!;
    const tokens = await oidcLogin(t, name, `${name}-pw`, { configTypes: 'intercept.v1,unknown-type' });
    expect(decodeJwt(tokens.access_token).payload.ov_ct).toEqual([intercept.id]);
    expect(json(await get(CLIENT, '/current-api-session', tokens.access_token)).data.configTypes).toEqual([intercept.id]);
  });

  it('the overlay-session header wins when both are sent', async () => {
    const { tokens } = await loggedIn();
    const res = await call(t, 'GET', `${CLIENT}/current-identity`, { token: 'not-a-session', headers: bearer(tokens.access_token) });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toBe('overlay-session realm="overlay-session" error="invalid" error_description="token is invalid"');
  });

  it('a malformed or empty bearer is invalid; no credential at all is missing', async () => {
    for (const header of ['Bearer', 'Bearer ', 'Bearer x', 'bearer a.b.c', `Bearer ${'y'.repeat(9000)}`]) {
      const res = await call(t, 'GET', `${CLIENT}/current-identity`, { headers: { authorization: header } });
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toBe(BEARER_INVALID);
    }
    const none = await call(t, 'GET', `${CLIENT}/current-identity`);
    expect(none.headers['www-authenticate']).toBe(CHALLENGE_MISSING);
  });

  it('checks the store only the first time: signature, session and identity come from memory after', async () => {
    const { tokens, asid } = await loggedIn();
    // As after a restart: the session is not in memory yet.
    t.app.core.sessions.forget(asid);
    expect((await get(CLIENT, '/current-api-session', tokens.access_token)).statusCode).toBe(200);
    const db = t.app.core.store.db;
    const spies = (['selectFrom', 'updateTable', 'insertInto', 'deleteFrom'] as const).map((m) => vi.spyOn(db, m));
    const load = vi.spyOn(t.app.core.sessions, 'load');
    try {
      for (let i = 0; i < 20; i++) expect((await get(CLIENT, '/current-api-session', tokens.access_token)).statusCode).toBe(200);
      for (const s of spies) expect(s).not.toHaveBeenCalled();
      expect(load).not.toHaveBeenCalled();
    } finally {
      for (const s of spies) s.mockRestore();
      load.mockRestore();
    }
  });
});

describe('ending access takes effect on the next request', () => {
  it('DELETE /api-sessions/{id} by an admin', async () => {
    const { tokens, asid } = await loggedIn();
    expect((await get(CLIENT, '/current-identity', tokens.access_token)).statusCode).toBe(200);
    expect((await call(t, 'DELETE', `${MGMT}/api-sessions/${asid}`, { token: admin })).statusCode).toBe(200);
    await expectRefused(tokens.access_token);
  });

  it('DELETE /current-api-session with the bearer itself', async () => {
    const { tokens } = await loggedIn();
    expect((await call(t, 'DELETE', `${CLIENT}/current-api-session`, { headers: bearer(tokens.access_token) })).statusCode).toBe(200);
    await expectRefused(tokens.access_token);
  });

  it('a JTI revocation kills that token only', async () => {
    const { tokens, jti } = await loggedIn();
    const refreshed = json(
      await t.inject({
        method: 'POST',
        url: '/oidc/token',
        payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: 'overlay' }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
    );
    await revoke(jti, 'JTI');
    await expectRefused(tokens.access_token);
    expect((await get(CLIENT, '/current-identity', refreshed.access_token)).statusCode).toBe(200);
  });

  it('an API_SESSION revocation kills the session’s tokens and its refresh grant', async () => {
    const { tokens, asid } = await loggedIn();
    await revoke(asid, 'API_SESSION');
    await expectRefused(tokens.access_token);
    const refresh = await t.inject({
      method: 'POST',
      url: '/oidc/token',
      payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: 'overlay' }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(json(refresh).error).toBe('invalid_grant');
  });

  it('an IDENTITY revocation kills the tokens issued before it; a later login works', async () => {
    const { id, tokens } = await loggedIn();
    await revoke(id, 'IDENTITY');
    await expectRefused(tokens.access_token);
    t.clock.advance(1_000);
    const name = `bearer-${n}`;
    const again = await oidcLogin(t, name, `${name}-pw`);
    expect((await get(CLIENT, '/current-identity', again.access_token)).statusCode).toBe(200);
  });

  it('disabling the identity (and enabling it again)', async () => {
    const { id, tokens } = await loggedIn();
    expect((await call(t, 'POST', `${MGMT}/identities/${id}/disable`, { token: admin, body: { durationMinutes: 0 } })).statusCode).toBe(200);
    await expectRefused(tokens.access_token);
    const refresh = await t.inject({
      method: 'POST',
      url: '/oidc/token',
      payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: 'overlay' }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(json(refresh).error).toBe('invalid_grant');
    // Disabling ended the API session of the token: enabled again, the identity logs in anew.
    expect((await call(t, 'POST', `${MGMT}/identities/${id}/enable`, { token: admin })).statusCode).toBe(200);
    await expectRefused(tokens.access_token);
  });

  it('deleting the identity', async () => {
    const { id, tokens } = await loggedIn();
    expect((await call(t, 'DELETE', `${MGMT}/identities/${id}`, { token: admin })).statusCode).toBe(200);
    await expectRefused(tokens.access_token);
  });
});

describe('an access token without a refresh grant', () => {
  const BEARER_EXPIRED = 'Bearer realm="overlay-oidc" error="expired" error_description="token expired"';

  it('works until its exp however short the session timeout, idle or not, then is expired', async () => {
    const dir = tempDir();
    try {
      const file = join(dir.path, 'overlay.yml');
      writeFileSync(file, 'edge:\n  api:\n    sessionTimeout: 1m\n');
      const own = await startTestController({ env: { ...ADMIN_ENV, OVERLAY_CONFIG: file } });
      try {
        const a = await asAdmin(own);
        await createIdentityWithPassword(own, a, { name: 'idle', username: 'idle-user', password: 'idle-user-pw' });
        const tokens = await oidcLogin(own, 'idle-user', 'idle-user-pw', { scope: 'openid' });
        const { exp, ov_asid: asid } = decodeJwt(tokens.access_token).payload;
        const at = (path: string) => call(own, 'GET', `${CLIENT}${path}`, { headers: bearer(tokens.access_token) });
        // Idle for 10 session timeouts, still before exp: the expiry the answers gave holds.
        own.clock.advance(10 * 60_000);
        const res = await at('/current-api-session');
        expect(res.statusCode, res.body).toBe(200);
        expect(res.headers['expires-at']).toBe(new Date(exp * 1000).toISOString());
        expect(json(res).data.expiresAt).toBe(new Date(exp * 1000).toISOString());
        await own.app.core.sessions.sweep();
        own.clock.set(exp * 1000 - 1);
        expect((await at('/current-identity')).statusCode).toBe(200);
        // Past exp (and the clock skew): expired.
        own.clock.set(exp * 1000 + 5_000);
        const expired = await at('/current-identity');
        expect(expired.statusCode).toBe(401);
        expect(expired.headers['www-authenticate']).toBe(BEARER_EXPIRED);
        // Idle past its timeout after that, the sweep removes the session.
        own.clock.advance(60_000);
        await own.app.core.sessions.sweep();
        expect((await call(own, 'GET', `${MGMT}/api-sessions/${asid}`, { token: await asAdmin(own) })).statusCode).toBe(404);
      } finally {
        await own.close();
      }
    } finally {
      dir.remove();
    }
  });

  it('is expired, not invalid, in the moments after exp while the clock skew would still take it', async () => {
    await createIdentityWithPassword(t, admin, { name: 'skew', username: 'skew-user', password: 'skew-user-pw' });
    const tokens = await oidcLogin(t, 'skew-user', 'skew-user-pw', { scope: 'openid' });
    const { exp } = decodeJwt(tokens.access_token).payload;
    const now = t.clock();
    t.clock.set(exp * 1000 + 2_000);
    try {
      const res = await get(CLIENT, '/current-identity', tokens.access_token);
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toBe(BEARER_EXPIRED);
    } finally {
      t.clock.set(now);
    }
  });
});
