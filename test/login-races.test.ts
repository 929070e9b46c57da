// Credentials checked before a write and the write itself are two steps: what the check relied on
// may change between them (another request's write commits in the gap). Each test here makes that
// interleaving explicit, holding one request between its check and its write while another runs,
// and shows the write still refuses what the check would refuse now.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Core } from '../src/core/core.js';
import { checkCurrentPassword } from '../src/auth/login.js';
import { verifyPassword } from '../src/auth/passwords.js';
import { changeOwnAuthenticator } from '../src/domain/authenticators.js';
import type { EntityOf } from '../src/resources/index.js';
import { ADMIN_ENV, asAdmin, createIdentityWithPassword, startTestController, testClock, type TestController } from './helpers.js';

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
