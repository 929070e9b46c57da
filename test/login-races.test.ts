// Credentials checked before a write and the write itself are two steps: what the check relied on
// may change between them (another request's write commits in the gap). Each test here makes that
// interleaving explicit, holding one request between its check and its write while another runs,
// and shows the write still refuses what the check would refuse now.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Core } from '../src/core/core.js';
import type { Kernel } from '../src/kernel/kernel.js';
import { checkCurrentPassword, login, type LoginDeps } from '../src/auth/login.js';
import { verifyPassword } from '../src/auth/passwords.js';
import { changeOwnAuthenticator } from '../src/domain/authenticators.js';
import type { EntityOf } from '../src/resources/index.js';
import { ADMIN_ENV, asAdmin, call, createIdentityWithPassword, json, MGMT, startTestController, testClock, type TestController } from './helpers.js';
import { bearer, decodeJwt, pkce, postLogin, postToken, REDIRECT_URI, startAuthorization } from './oidc-helpers.js';

let t: TestController;
let core: Core;
let admin: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
  core = t.app.core;
  admin = await asAdmin(t);
});
afterAll(async () => {
  await t.close();
});

let address = 0;
/** A client address no other check used, so the throttle counts only what a test does. */
const freshAddress = () => `10.8.${Math.floor(++address / 250)}.${address % 250}`;

/** A gate that opens once `n` callers have arrived at it: each waits for all the others. */
function rendezvous(n: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return async () => {
    if (++arrived === n) open();
    await opened;
  };
}

async function authenticator(id: string): Promise<EntityOf<'authenticators'>> {
  return (await core.resources.get('authenticators').repo.get(core.store.db, id))!;
}

describe('an identity changing its own password', () => {
  it('two changes given the same current password at once: exactly one passes', async () => {
    const { id, authenticatorId } = await createIdentityWithPassword(t, admin, { name: 'twice-changed', username: 'twice-changed', password: 'twice-old-1' });
    // Both have checked the current password before either writes.
    const bothChecked = rendezvous(2);
    const check = async (entity: EntityOf<'authenticators'>, password: string) => {
      await checkCurrentPassword(core, entity, password, freshAddress());
      await bothChecked();
    };
    const change = (password: string) =>
      changeOwnAuthenticator(core.resources, check, { identityId: id, id: authenticatorId, currentPassword: 'twice-old-1', fields: { password }, mode: 'patch' });
    const results = await Promise.allSettled([change('twice-new-a'), change('twice-new-b')]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    const refused = results.find((r) => r.status === 'rejected')!.reason as { code: string; cause: unknown };
    expect([refused.code, refused.cause]).toEqual(['INVALID_AUTH', { field: 'currentPassword', reason: 'is not correct' }]);
    // The password is the one the change that passed set.
    const winner = results[0]!.status === 'fulfilled' ? 'twice-new-a' : 'twice-new-b';
    expect((await verifyPassword((await authenticator(authenticatorId)).passwordHash, winner)).ok).toBe(true);
  });
});

describe('a password login and a write that commits between its check and its session', () => {
  /**
   * Logs in as `username`, running `meanwhile` (as an admin) after every credential check has passed
   * and before the session is written: the last thing the check does is ask whether the identity
   * has a TOTP enrollment.
   */
  async function loginWith(username: string, password: string, meanwhile: () => Promise<void>) {
    const deps: LoginDeps = {
      ...core,
      mfa: {
        isEnrolled: async (identityId: string) => {
          await meanwhile();
          return core.mfa.isEnrolled(identityId);
        },
      },
    };
    return login(deps, { method: 'password', username, password, ipAddress: freshAddress(), configTypes: [] });
  }

  async function sessionsOf(identityId: string): Promise<number> {
    const rows = await core.store.db.selectFrom('api_sessions').select('id').where('identity_id', '=', identityId).execute();
    return rows.length;
  }

  async function admin200(method: 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown) {
    const res = await call(t, method, `${MGMT}${path}`, { token: admin, ...(body !== undefined && { body }) });
    expect(res.statusCode, res.body).toBe(200);
  }

  async function refused(attempt: Promise<unknown>) {
    const err = (await attempt.then(
      () => undefined,
      (e: unknown) => e,
    )) as { code?: string } | undefined;
    expect(err?.code).toBe('INVALID_AUTH');
  }

  it('the identity disabled: no session, and none that comes back when it is enabled again', async () => {
    const { id } = await createIdentityWithPassword(t, admin, { name: 'race-disable', username: 'race-disable', password: 'race-disable-1' });
    await refused(loginWith('race-disable', 'race-disable-1', () => admin200('POST', `/identities/${id}/disable`, { durationMinutes: 0 })));
    await admin200('POST', `/identities/${id}/enable`);
    expect(await sessionsOf(id)).toBe(0);
  });

  it('the identity deleted: refused as a login of no identity, not a failed write', async () => {
    const { id } = await createIdentityWithPassword(t, admin, { name: 'race-delete', username: 'race-delete', password: 'race-delete-1' });
    await refused(loginWith('race-delete', 'race-delete-1', () => admin200('DELETE', `/identities/${id}`)));
    expect(await sessionsOf(id)).toBe(0);
  });

  it('nothing changed meanwhile: the session opens', async () => {
    const { id } = await createIdentityWithPassword(t, admin, { name: 'race-none', username: 'race-none', password: 'race-none-1' });
    const other = await createIdentityWithPassword(t, admin, { name: 'race-other', username: 'race-other', password: 'race-other-1' });
    // A write of something else does not refuse it.
    const result = await loginWith('race-none', 'race-none-1', () => admin200('PATCH', `/authenticators/${other.authenticatorId}`, { password: 'race-other-2' }));
    expect(result.identity.id).toBe(id);
    expect(await sessionsOf(id)).toBe(1);
  });
});

describe('an OIDC code exchange and a write that commits while it runs', () => {
  /** A login of a new identity asking for offline_access: its id, and the code exchange to run. */
  async function codeOf(name: string) {
    const { id } = await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw-1` });
    const { verifier, challenge } = pkce();
    const { id: requestId } = await startAuthorization(t, { challenge, scope: 'openid offline_access' });
    const login = await postLogin(t, requestId, name, `${name}-pw-1`);
    expect(login.statusCode, login.body).toBe(302);
    const code = new URL(String(login.headers.location)).searchParams.get('code')!;
    const exchange = () => postToken(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: 'overlay', code_verifier: verifier });
    return { id, exchange };
  }

  /** Runs `exchange` with `meanwhile` landing after the exchange has checked the identity, as it reads its config types. */
  async function afterChecks<T>(exchange: () => Promise<T>, meanwhile: () => Promise<void>): Promise<T> {
    const provider = core.oidc as unknown as { resolveConfigTypes(wanted: string[]): Promise<string[]> };
    const resolve = provider.resolveConfigTypes.bind(provider);
    provider.resolveConfigTypes = async (wanted) => {
      provider.resolveConfigTypes = resolve;
      await meanwhile();
      return resolve(wanted);
    };
    try {
      return await exchange();
    } finally {
      provider.resolveConfigTypes = resolve;
    }
  }

  async function left(identityId: string): Promise<{ sessions: number; grants: number }> {
    const sessions = await core.store.db.selectFrom('api_sessions').select('id').where('identity_id', '=', identityId).execute();
    const grants = await core.store.db.selectFrom('oidc_grants').select('id').where('identity_id', '=', identityId).execute();
    return { sessions: sessions.length, grants: grants.length };
  }

  async function disable(id: string) {
    const res = await call(t, 'POST', `${MGMT}/identities/${id}/disable`, { token: admin, body: { durationMinutes: 0 } });
    expect(res.statusCode, res.body).toBe(200);
  }

  it('a disablement after its checks: no session or grant, and none comes back when the identity is enabled again', async () => {
    const { id, exchange } = await codeOf('race-oidc');
    const res = await afterChecks(exchange, () => disable(id));
    expect([res.statusCode, json(res).error]).toEqual([400, 'invalid_grant']);
    const enabled = await call(t, 'POST', `${MGMT}/identities/${id}/enable`, { token: admin });
    expect(enabled.statusCode, enabled.body).toBe(200);
    expect(await left(id)).toEqual({ sessions: 0, grants: 0 });
  });

  it('a disablement right after the write that opens its session: not a failed write; what it answers no longer works', async () => {
    const { id, exchange } = await codeOf('race-oidc-after');
    // The session, its MFA state and its refresh grant are one write: a disablement committing as
    // soon as the session exists comes after the grant too (it used to come before the grant's
    // insert, which then failed on its foreign key: a 500).
    const kernel = core.kernel as { write: Kernel['write'] };
    const write = kernel.write.bind(core.kernel);
    let armed = true;
    kernel.write = (async (fn: Parameters<Kernel['write']>[0], ...rest: [never?, never?]) => {
      const result = await write(fn, ...rest);
      if (armed && (await left(id)).sessions > 0) {
        armed = false;
        await disable(id);
      }
      return result;
    }) as Kernel['write'];
    let res;
    try {
      res = await exchange();
    } finally {
      delete (kernel as { write?: unknown }).write;
    }
    expect(armed).toBe(false);
    expect(res.statusCode, res.body).toBe(200);
    const tokens = json(res) as { access_token: string; refresh_token: string };
    const asid = decodeJwt(tokens.access_token).payload.ov_asid as string;
    expect(await left(id)).toEqual({ sessions: 0, grants: 0 });
    // Nothing of the session is held in memory either.
    expect(core.sessions.expiryOf(asid, 0)).toBe(core.sessions.timeout);
    expect((await call(t, 'GET', '/edge/client/v1/current-identity', { headers: bearer(tokens.access_token) })).statusCode).toBe(401);
    const refreshed = await postToken(t, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: 'overlay' });
    expect([refreshed.statusCode, json(refreshed).error]).toEqual([400, 'invalid_grant']);
  });

  it('an IDENTITY revocation after its checks: no session or grant is left working', async () => {
    const { id, exchange } = await codeOf('race-oidc-revoked');
    const res = await afterChecks(exchange, async () => {
      const revoked = await call(t, 'POST', `${MGMT}/revocations`, { token: admin, body: { id, type: 'IDENTITY' } });
      expect(revoked.statusCode, revoked.body).toBe(201);
      // The session is written a moment later: it is not dated before the revocation.
      t.clock.advance(1_000);
    });
    expect([res.statusCode, json(res).error]).toEqual([400, 'invalid_grant']);
    expect(await left(id)).toEqual({ sessions: 0, grants: 0 });
  });
});

describe('a refresh and a delete of its API session that commits after the rotation', () => {
  it('leaves nothing of the session held in memory', async () => {
    const name = 'race-refresh';
    const { id } = await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw-1` });
    const { verifier, challenge } = pkce();
    const { id: requestId } = await startAuthorization(t, { challenge, scope: 'openid offline_access' });
    const login = await postLogin(t, requestId, name, `${name}-pw-1`);
    const code = new URL(String(login.headers.location)).searchParams.get('code')!;
    const res = await postToken(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: 'overlay', code_verifier: verifier });
    expect(res.statusCode, res.body).toBe(200);
    const tokens = json(res) as { access_token: string; refresh_token: string };
    const asid = decodeJwt(tokens.access_token).payload.ov_asid as string;
    expect(core.sessions.expiryOf(asid, 0)).toBeGreaterThan(core.sessions.timeout);
    // The refresh reads the identity as it checks the token and again once the token is rotated:
    // the delete lands at the second read.
    const identities = core.identities as { get: Core['identities']['get'] };
    const get = identities.get.bind(core.identities);
    let reads = 0;
    identities.get = async (identityId: string) => {
      if (identityId === id && ++reads === 2) {
        const deleted = await call(t, 'DELETE', `${MGMT}/api-sessions/${asid}`, { token: admin });
        expect(deleted.statusCode, deleted.body).toBe(200);
      }
      return get(identityId);
    };
    try {
      await postToken(t, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: 'overlay' });
    } finally {
      delete (identities as { get?: unknown }).get;
    }
    expect(reads).toBe(2);
    expect(core.sessions.expiryOf(asid, 0)).toBe(core.sessions.timeout);
  });
});
