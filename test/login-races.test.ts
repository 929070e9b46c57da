// Credentials checked before a write and the write itself are two steps: what the check relied on
// may change between them (another request's write commits in the gap). Each test here makes that
// interleaving explicit, holding one request between its check and its write while another runs,
// and shows the write still refuses what the check would refuse now.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Core } from '../src/core/core.js';
import { checkCurrentPassword, login, type LoginDeps } from '../src/auth/login.js';
import { verifyPassword } from '../src/auth/passwords.js';
import { changeOwnAuthenticator } from '../src/domain/authenticators.js';
import type { EntityOf } from '../src/resources/index.js';
import { ADMIN_ENV, asAdmin, call, createIdentityWithPassword, json, MGMT, startTestController, testClock, type TestController } from './helpers.js';
import { pkce, postLogin, postToken, REDIRECT_URI, startAuthorization } from './oidc-helpers.js';

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

describe('an OIDC code exchange and a disablement that commits between its check and its session', () => {
  it('opens no session, and none comes back when the identity is enabled again', async () => {
    const { id } = await createIdentityWithPassword(t, admin, { name: 'race-oidc', username: 'race-oidc', password: 'race-oidc-1' });
    const { verifier, challenge } = pkce();
    const { id: requestId } = await startAuthorization(t, { challenge });
    const login = await postLogin(t, requestId, 'race-oidc', 'race-oidc-1');
    expect(login.statusCode, login.body).toBe(302);
    const code = new URL(String(login.headers.location)).searchParams.get('code')!;
    // The exchange has checked the identity and reads its config types next: the disablement lands then.
    const provider = core.oidc as unknown as { resolveConfigTypes(wanted: string[]): Promise<string[]> };
    const resolve = provider.resolveConfigTypes.bind(provider);
    provider.resolveConfigTypes = async (wanted) => {
      const res = await call(t, 'POST', `${MGMT}/identities/${id}/disable`, { token: admin, body: { durationMinutes: 0 } });
      expect(res.statusCode, res.body).toBe(200);
      return resolve(wanted);
    };
    try {
      const res = await postToken(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: 'overlay', code_verifier: verifier });
      expect([res.statusCode, json(res).error]).toEqual([400, 'invalid_grant']);
    } finally {
      provider.resolveConfigTypes = resolve;
    }
    const enabled = await call(t, 'POST', `${MGMT}/identities/${id}/enable`, { token: admin });
    expect(enabled.statusCode, enabled.body).toBe(200);
    const rows = await core.store.db.selectFrom('api_sessions').select('id').where('identity_id', '=', id).execute();
    expect(rows).toEqual([]);
  });
});
