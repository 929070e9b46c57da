// Legacy API sessions called directly over an in-memory store: the token kept only as its hash, the
// sliding expiry to the millisecond, holds, activity written in batches and never lost to a cache
// reset, the sweep (and what it must keep), the change feed, and reads racing invalidations.
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { iso } from '../clock.js';
import type { Change } from '../kernel/changes.js';
import { Kernel } from '../kernel/kernel.js';
import { DEFAULT_AUTH_POLICY_ID, DEFAULT_PRIMARY, DEFAULT_SECONDARY } from '../resources/auth-policies.js';
import { migrations } from '../store/migrations/index.js';
import { openSqlite } from '../store/sqlite.js';
import { Store } from '../store/store.js';
import { ApiSessions, type NewApiSession } from './api-sessions.js';
import { hashToken } from './tokens.js';

const T0 = Date.parse('2026-03-04T05:06:07.089Z');
const MINUTE = 60_000;
const TIMEOUT = 30 * MINUTE;

let store: Store;
let kernel: Kernel;
let now: number;
const clock = () => now;
let sessions: ApiSessions;
let changes: Change[];
let stopListening: () => void;

beforeEach(async () => {
  now = T0;
  store = new Store(openSqlite(':memory:'));
  await store.migrate(migrations);
  kernel = new Kernel({ store, clock });
  await kernel.write(async (ctx) => {
    const base = { createdAt: ctx.now, updatedAt: ctx.now, tags: {} };
    await ctx.insert('auth-policies', { ...base, id: DEFAULT_AUTH_POLICY_ID, name: 'Default', isSystem: true, primary: DEFAULT_PRIMARY, secondary: DEFAULT_SECONDARY });
    for (const id of ['alice', 'bob']) {
      await ctx.insert('identities', { ...base, id, name: id, type: 'User', isAdmin: false, isDefaultAdmin: false, authPolicyId: DEFAULT_AUTH_POLICY_ID });
    }
  });
  sessions = new ApiSessions(kernel, clock, TIMEOUT);
  // The sessions follow the change feed, as the controller's cache registry has them do.
  changes = [];
  stopListening = kernel.changes.subscribe((c) => {
    changes.push(c);
    sessions.onChange(c);
  });
});
afterEach(async () => {
  stopListening();
  vi.restoreAllMocks();
  await sessions.stop();
  await store.close();
});

const values = (over: Partial<NewApiSession> = {}): NewApiSession => ({
  identityId: 'alice',
  authenticatorId: 'alice-password',
  authMethod: 'password',
  configTypes: ['ct-1', 'ct-2'],
  ipAddress: '192.0.2.7',
  isMfaRequired: true,
  isCertExtendable: true,
  ...over,
});

async function row(id: string) {
  return store.db.selectFrom('api_sessions').selectAll().where('id', '=', id).executeTakeFirst();
}

async function storedActivity(id: string): Promise<string | undefined> {
  return (await row(id))?.last_activity_at as string | undefined;
}

/** An ApiSessions over the same store with nothing in memory, as after a restart. */
const restarted = () => new ApiSessions(kernel, clock, TIMEOUT);

describe('create', () => {
  it('answers the session and a fresh token; the store keeps only the hash of the token', async () => {
    const { session, token } = await sessions.create(values());
    expect(token).toMatch(/^[0-9a-z]{9}[A-Za-z0-9_-]{43}$/);
    expect(session).toEqual({
      ...values(),
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      tokenHash: hashToken(token),
      createdAt: T0,
      lastActivityAt: T0,
      storedActivityAt: T0,
      isMfaComplete: false,
      mfaPassedAt: null,
      improperClientCertChain: false,
      tags: {},
    });
    const stored = await row(session.id);
    expect(stored).toMatchObject({
      token_hash: hashToken(token),
      identity_id: 'alice',
      authenticator_id: 'alice-password',
      auth_method: 'password',
      ip_address: '192.0.2.7',
      created_at: iso(T0),
      updated_at: iso(T0),
      last_activity_at: iso(T0),
      is_mfa_required: 1,
      is_mfa_complete: 0,
      is_cert_extendable: 1,
      improper_client_cert_chain: 0,
    });
    expect(JSON.parse(String(stored!.config_types))).toEqual(['ct-1', 'ct-2']);
    expect(JSON.stringify(stored)).not.toContain(token);
    expect(changes).toEqual([{ collection: 'api-sessions', kind: 'create', id: session.id, ownerId: 'alice' }]);
    // Kept in memory once committed.
    expect(sessions.cached(session.id)).toBe(session);
  });

  it('gives every session its own id and token', async () => {
    const a = await sessions.create(values());
    const b = await sessions.create(values());
    expect(a.session.id).not.toBe(b.session.id);
    expect(a.token).not.toBe(b.token);
    expect((await sessions.resolve(a.token))?.id).toBe(a.session.id);
    expect((await sessions.resolve(b.token))?.id).toBe(b.session.id);
  });
});

describe('resolve', () => {
  it('reads what the store holds of a session: its tags and certificate flags', async () => {
    const { session, token } = await sessions.create(values());
    await store.db
      .updateTable('api_sessions')
      .set({ tags: JSON.stringify({ team: 'blue' }), improper_client_cert_chain: 1 })
      .where('id', '=', session.id)
      .execute();
    expect(await restarted().resolve(token)).toMatchObject({ tags: { team: 'blue' }, improperClientCertChain: true });
  });


  it('finds the session of a token issued before tokens began with their time (its hash alone stored)', async () => {
    const { session } = await sessions.create(values());
    const older = 'Q'.repeat(43);
    await store.db.updateTable('api_sessions').set({ token_hash: createHash('sha256').update(older).digest('hex') }).where('id', '=', session.id).execute();
    expect(await restarted().resolve(older)).toMatchObject({ id: session.id, identityId: 'alice' });
  });

  it('finds the session of a token, from memory or from the store, and nothing for another token', async () => {
    const { session, token } = await sessions.create(values());
    expect(await sessions.resolve(token)).toBe(session);
    expect(await sessions.resolve(`${token}x`)).toBeUndefined();
    expect(await sessions.resolve(session.tokenHash)).toBeUndefined();

    const other = restarted();
    const read = await other.resolve(token);
    expect(read).toEqual({ ...session, configTypes: ['ct-1', 'ct-2'] });
    // Kept: the next resolve needs no read.
    expect(other.cached(session.id)).toBe(read);
    expect(await other.resolve(token)).toBe(read);
  });

  it('reads a session without optional values as having none', async () => {
    const { session, token } = await sessions.create(values({ authenticatorId: null, ipAddress: null, isMfaRequired: false, isCertExtendable: false }));
    expect(await restarted().resolve(token)).toMatchObject({
      id: session.id,
      authenticatorId: null,
      ipAddress: null,
      isMfaRequired: false,
      isMfaComplete: false,
      isCertExtendable: false,
      improperClientCertChain: false,
      tags: {},
    });
  });

  it('expires a session exactly the timeout after its last activity, and deletes it', async () => {
    const { session, token } = await sessions.create(values());
    now = T0 + TIMEOUT - 1;
    expect(await sessions.resolve(token)).toBe(session);
    now = T0 + TIMEOUT;
    expect(await sessions.resolve(token)).toBeUndefined();
    expect(await row(session.id)).toBeUndefined();
    expect(sessions.cached(session.id)).toBeUndefined();
    // Stays gone, also when the clock goes back.
    now = T0;
    expect(await sessions.resolve(token)).toBeUndefined();
  });

  it('an expired session read from the store is refused too', async () => {
    const { session, token } = await sessions.create(values());
    now = T0 + TIMEOUT;
    expect(await restarted().resolve(token)).toBeUndefined();
    expect(await row(session.id)).toBeUndefined();
  });

  it('a read under way when the session changes does not fill the cache', async () => {
    const { session, token } = await sessions.create(values());
    const other = restarted();
    const pending = other.resolve(token);
    // The session changes (MFA completed, say) while the read is under way.
    other.onChange({ collection: 'api-sessions', kind: 'update', id: session.id });
    expect((await pending)?.id).toBe(session.id);
    expect(other.cached(session.id)).toBeUndefined();
    // The next read is kept.
    const again = await other.resolve(token);
    expect(other.cached(session.id)).toBe(again);
  });
});

describe('the sliding expiry', () => {
  it('slides with every request; the idle time counts from the last one', async () => {
    const { session, token } = await sessions.create(values());
    now = T0 + 20 * MINUTE;
    sessions.touch((await sessions.resolve(token))!);
    expect(session.lastActivityAt).toBe(now);
    expect(sessions.expiresAt(session)).toBe(now + TIMEOUT);
    now = T0 + 20 * MINUTE + TIMEOUT - 1;
    expect(await sessions.resolve(token)).toBe(session);
    now += 1;
    expect(await sessions.resolve(token)).toBeUndefined();
  });

  it('never slides back: a request seen late does not shorten the session', async () => {
    const { session } = await sessions.create(values());
    now = T0 + 10 * MINUTE;
    sessions.touch(session);
    now = T0 + 5 * MINUTE;
    sessions.touch(session);
    expect(session.lastActivityAt).toBe(T0 + 10 * MINUTE);
    expect(await sessions.flush()).toBe(1);
    expect(await storedActivity(session.id)).toBe(iso(T0 + 10 * MINUTE));
  });

  it('a hold keeps a session past its idle timeout until it ends or is released', async () => {
    const { session, token } = await sessions.create(values());
    sessions.hold(session.id, T0 + 2 * TIMEOUT);
    expect(sessions.expiresAt(session)).toBe(T0 + 2 * TIMEOUT);
    now = T0 + 2 * TIMEOUT - 1;
    expect(await sessions.resolve(token)).toBe(session);
    // A hold shorter than the idle timeout changes nothing.
    sessions.hold(session.id, T0 + MINUTE);
    expect(sessions.expiresAt(session)).toBe(T0 + TIMEOUT);
    sessions.hold(session.id, T0 + 3 * TIMEOUT);
    sessions.release(session.id);
    expect(sessions.expiresAt(session)).toBe(T0 + TIMEOUT);
    expect(await sessions.resolve(token)).toBeUndefined();
  });

  it('a hold ending exactly at the idle expiry is the idle expiry', async () => {
    const { session } = await sessions.create(values());
    sessions.hold(session.id, T0 + TIMEOUT);
    expect(sessions.expiresAt(session)).toBe(T0 + TIMEOUT);
    sessions.hold(session.id, T0 + TIMEOUT + 1);
    expect(sessions.expiresAt(session)).toBe(T0 + TIMEOUT + 1);
  });
});

describe('activity written in batches', () => {
  it('a request is written at the next flush, once; a request at the stored time writes nothing', async () => {
    const { session } = await sessions.create(values());
    sessions.touch(session);
    expect(await sessions.flush()).toBe(0);
    now = T0 + MINUTE;
    sessions.touch(session);
    now = T0 + 2 * MINUTE;
    sessions.touch(session);
    expect(await storedActivity(session.id)).toBe(iso(T0));
    changes = [];
    expect(await sessions.flush()).toBe(1);
    expect(await storedActivity(session.id)).toBe(iso(T0 + 2 * MINUTE));
    expect(changes).toEqual([{ collection: 'api-sessions', kind: 'update', id: session.id, ownerId: 'alice' }]);
    expect(await sessions.flush()).toBe(0);
    // The write was a change of the session, one its kept copy already knew: that copy stays.
    const read = (await sessions.load(session.id))!;
    expect(read).toBe(session);
    expect([read.lastActivityAt, read.storedActivityAt]).toEqual([T0 + 2 * MINUTE, T0 + 2 * MINUTE]);
    // Touched again at the time now stored: nothing to write.
    sessions.touch(read);
    expect(await sessions.flush()).toBe(0);
  });

  it('a session kept stays kept through a flush, not read back, and learns what was written', async () => {
    const { session, token } = await sessions.create(values());
    now = T0 + MINUTE;
    sessions.touch(session);
    changes = [];
    expect(await sessions.flush()).toBe(1);
    expect(changes).toEqual([{ collection: 'api-sessions', kind: 'update', id: session.id, ownerId: 'alice' }]);
    expect(sessions.cached(session.id)).toBe(session);
    expect(await sessions.resolve(token)).toBe(session);
    expect(session.storedActivityAt).toBe(T0 + MINUTE);
    // Touched again at the time now stored: nothing to write.
    sessions.touch(session);
    expect(await sessions.flush()).toBe(0);
  });

  it('a flush does not bring back a copy that a change by another path dropped', async () => {
    const { session, token } = await sessions.create(values());
    await sessions.setMfaComplete(session);
    now = T0 + MINUTE;
    sessions.touch(session);
    // Queued together: one batch, the other path's write first.
    const other = kernel.write((ctx) => ctx.update('api-sessions', session.id, { mfaPassedAt: null }, 'alice'));
    const flushed = sessions.flush();
    await Promise.all([other, flushed]);
    expect(sessions.cached(session.id)).toBeUndefined();
    const read = await sessions.resolve(token);
    expect(read?.mfaPassedAt).toBeNull();
    expect(read?.lastActivityAt).toBe(T0 + MINUTE);
  });

  it('writes the activity of many sessions in one flush', async () => {
    const a = await sessions.create(values());
    const b = await sessions.create(values({ identityId: 'bob' }));
    now = T0 + MINUTE;
    sessions.touch(a.session);
    now = T0 + 2 * MINUTE;
    sessions.touch(b.session);
    expect(await sessions.flush()).toBe(2);
    expect(await storedActivity(a.session.id)).toBe(iso(T0 + MINUTE));
    expect(await storedActivity(b.session.id)).toBe(iso(T0 + 2 * MINUTE));
  });

  it('activity newer than a flush under way is kept for the next flush', async () => {
    const { session } = await sessions.create(values());
    now = T0 + MINUTE;
    sessions.touch(session);
    const flushing = sessions.flush();
    now = T0 + 2 * MINUTE;
    sessions.touch(session);
    expect(await flushing).toBe(1);
    expect(await storedActivity(session.id)).toBe(iso(T0 + MINUTE));
    expect(sessions.lastActivityOf(session.id, T0)).toBe(T0 + 2 * MINUTE);
    expect(await sessions.flush()).toBe(1);
    expect(await storedActivity(session.id)).toBe(iso(T0 + 2 * MINUTE));
  });

  it('activity not yet written survives a reset of the cache, and keeps the session alive', async () => {
    const { session, token } = await sessions.create(values());
    now = T0 + 20 * MINUTE;
    sessions.touch(session);
    sessions.reset();
    expect(sessions.cached(session.id)).toBeUndefined();
    now = T0 + TIMEOUT + MINUTE;
    const read = await sessions.resolve(token);
    expect(read?.lastActivityAt).toBe(T0 + 20 * MINUTE);
    expect(read?.storedActivityAt).toBe(T0);
    expect(await sessions.flush()).toBe(1);
    expect(await storedActivity(session.id)).toBe(iso(T0 + 20 * MINUTE));
  });

  it('stop writes what is pending', async () => {
    const { session } = await sessions.create(values());
    now = T0 + MINUTE;
    sessions.touch(session);
    await sessions.stop();
    expect(await storedActivity(session.id)).toBe(iso(T0 + MINUTE));
  });

  it('lastActivityOf: the latest of the store, memory and activity not yet written', async () => {
    const { session } = await sessions.create(values());
    expect(sessions.lastActivityOf(session.id, T0 - MINUTE)).toBe(T0);
    expect(sessions.lastActivityOf(session.id, T0 + MINUTE)).toBe(T0 + MINUTE);
    now = T0 + 2 * MINUTE;
    sessions.touch(session);
    sessions.reset();
    expect(sessions.lastActivityOf(session.id, T0)).toBe(T0 + 2 * MINUTE);
    expect(sessions.lastActivityOf('unknown', T0 + 5)).toBe(T0 + 5);
  });
});

describe('sweep', () => {
  it('keeps a session active while it runs until the timeout has passed since, to the millisecond', async () => {
    const early = await sessions.create(values());
    const late = await sessions.create(values({ identityId: 'bob' }));
    // Requests after the sweep's flush; the sweep looks at the time the timeout after the earlier one.
    const sweep = sessions.sweep();
    now = T0 + MINUTE - 1;
    sessions.touch(early.session);
    now = T0 + MINUTE;
    sessions.touch(late.session);
    now = T0 + MINUTE - 1 + TIMEOUT;
    expect(await sweep).toBe(1);
    expect(await row(early.session.id)).toBeUndefined();
    expect(await row(late.session.id)).toBeDefined();
  });

  it('removes sessions idle for the timeout from the store and keeps the others', async () => {
    const idle = await sessions.create(values());
    now = T0 + MINUTE;
    const fresh = await sessions.create(values({ identityId: 'bob' }));
    now = T0 + TIMEOUT - 1;
    expect(await sessions.sweep()).toBe(0);
    now = T0 + TIMEOUT;
    changes = [];
    expect(await sessions.sweep()).toBe(1);
    expect(await row(idle.session.id)).toBeUndefined();
    expect(await row(fresh.session.id)).toBeDefined();
    expect(changes).toEqual([{ collection: 'api-sessions', kind: 'delete', id: idle.session.id, ownerId: 'alice' }]);
    // Memory followed the change: the token is refused.
    expect(sessions.cached(idle.session.id)).toBeUndefined();
    now = T0;
    expect(await sessions.resolve(idle.token)).toBeUndefined();
  });

  it('keeps a session active since the last write: it writes the activity first', async () => {
    const { session } = await sessions.create(values());
    now = T0 + 20 * MINUTE;
    sessions.touch(session);
    now = T0 + TIMEOUT + MINUTE;
    expect(await sessions.sweep()).toBe(0);
    expect(await storedActivity(session.id)).toBe(iso(T0 + 20 * MINUTE));
  });

  it('keeps a session active while the sweep is under way', async () => {
    const { session, token } = await sessions.create(values());
    now = T0 + 10 * MINUTE;
    const sweeping = sessions.sweep();
    // A request arrives after the sweep wrote the activity, before it reads what is idle.
    sessions.touch(session);
    now = T0 + TIMEOUT + 5 * MINUTE;
    expect(await sweeping).toBe(0);
    expect(await row(session.id)).toBeDefined();
    expect(await sessions.resolve(token)).toBe(session);
  });

  it('keeps a held session until its hold ends', async () => {
    const { session } = await sessions.create(values());
    sessions.hold(session.id, T0 + 2 * TIMEOUT);
    now = T0 + 2 * TIMEOUT - 1;
    expect(await sessions.sweep()).toBe(0);
    now = T0 + 2 * TIMEOUT;
    expect(await sessions.sweep()).toBe(1);
    expect(await row(session.id)).toBeUndefined();
  });

  it('removes many idle sessions in batches', async () => {
    const created: string[] = [];
    for (let i = 0; i < 1_003; i++) created.push((await sessions.create(values({ identityId: i % 2 ? 'alice' : 'bob' }))).session.id);
    now = T0 + TIMEOUT;
    expect(await sessions.sweep()).toBe(1_003);
    expect(await store.db.selectFrom('api_sessions').select('id').execute()).toEqual([]);
    for (const id of created.slice(0, 3)) expect(sessions.cached(id)).toBeUndefined();
  });

  it('does not remove a session that became active in the store after it was found idle', async () => {
    const { session } = await sessions.create(values());
    now = T0 + TIMEOUT;
    // Another controller writes activity of the session between the sweep's read and its delete.
    const write = kernel.write.bind(kernel);
    vi.spyOn(kernel, 'write').mockImplementation(async (fn) => {
      await store.db.updateTable('api_sessions').set({ last_activity_at: iso(now) }).where('id', '=', session.id).execute();
      return write(fn);
    });
    expect(await sessions.sweep()).toBe(0);
    expect(await row(session.id)).toBeDefined();
  });
});

describe('the change feed and deletes', () => {
  it('delete drops activity not yet written, also without the change feed and while a flush runs', async () => {
    const alone = restarted();
    const { session } = await alone.create(values());
    now = T0 + MINUTE;
    alone.touch(session);
    expect(await alone.delete(session.id)).toBe(true);
    expect(await alone.flush()).toBe(0);
    const other = await sessions.create(values());
    now = T0 + 2 * MINUTE;
    sessions.touch(other.session);
    expect(await Promise.all([sessions.flush(), sessions.delete(other.session.id)])).toEqual([1, true]);
    expect(await sessions.flush()).toBe(0);
    await alone.stop();
  });

  it('an identity deleted takes its sessions out of memory, and only its own', async () => {
    const alices = await sessions.create(values());
    const bobs = await sessions.create(values({ identityId: 'bob' }));
    sessions.onChange({ collection: 'mfas', kind: 'delete', id: 'alice' });
    sessions.onChange({ collection: 'identities', kind: 'update', id: 'alice' });
    expect(sessions.cached(alices.session.id)).toBe(alices.session);
    sessions.onChange({ collection: 'identities', kind: 'delete', id: 'alice' });
    expect(sessions.cached(alices.session.id)).toBeUndefined();
    expect(sessions.cached(bobs.session.id)).toBe(bobs.session);
  });


  it('delete removes a session from the store and memory; a second delete answers false', async () => {
    const { session, token } = await sessions.create(values());
    sessions.hold(session.id, T0 + 2 * TIMEOUT);
    changes = [];
    expect(await sessions.delete(session.id)).toBe(true);
    expect(changes).toEqual([{ collection: 'api-sessions', kind: 'delete', id: session.id, ownerId: 'alice' }]);
    expect(await row(session.id)).toBeUndefined();
    expect(await sessions.resolve(token)).toBeUndefined();
    expect(await sessions.delete(session.id)).toBe(false);
    expect(await sessions.delete('never-was')).toBe(false);
  });

  it('a session deleted by another path is forgotten with its activity and hold', async () => {
    const { session, token } = await sessions.create(values());
    now = T0 + MINUTE;
    sessions.touch(session);
    sessions.hold(session.id, T0 + 2 * TIMEOUT);
    await kernel.write((ctx) => ctx.remove('api-sessions', session.id, 'alice'));
    expect(sessions.cached(session.id)).toBeUndefined();
    expect(await sessions.resolve(token)).toBeUndefined();
    expect(sessions.expiresAt(session)).toBe(T0 + MINUTE + TIMEOUT);
    expect(await sessions.flush()).toBe(0);
  });

  it('a session changed by another path is read again when next used', async () => {
    const { session, token } = await sessions.create(values());
    await kernel.write((ctx) => ctx.update('api-sessions', session.id, { isMfaComplete: true }, 'alice'));
    expect(sessions.cached(session.id)).toBeUndefined();
    const read = await sessions.resolve(token);
    expect(read).not.toBe(session);
    expect(read?.isMfaComplete).toBe(true);
  });

  it('setMfaComplete marks the session and the store', async () => {
    const { session, token } = await sessions.create(values());
    now = T0 + MINUTE;
    await sessions.setMfaComplete(session);
    expect(session.isMfaComplete).toBe(true);
    expect(await row(session.id)).toMatchObject({ is_mfa_complete: 1, updated_at: iso(T0 + MINUTE) });
    expect((await restarted().resolve(token))?.isMfaComplete).toBe(true);
    // The copy it brought up to date is kept, not read back.
    const findBy = vi.spyOn(kernel.repo('api-sessions'), 'findBy');
    expect(sessions.cached(session.id)).toBe(session);
    expect(await sessions.resolve(token)).toBe(session);
    expect(findBy).not.toHaveBeenCalled();
    // A later change by another path is read again.
    await kernel.write((ctx) => ctx.update('api-sessions', session.id, { mfaPassedAt: null }, 'alice'));
    expect(sessions.cached(session.id)).toBeUndefined();
    expect((await sessions.resolve(token))?.mfaPassedAt).toBeNull();
  });

  it('a read under way when the MFA write commits does not replace the copy that write kept', async () => {
    const { token } = await sessions.create(values());
    sessions.reset();
    const stale = await kernel.repo('api-sessions').findBy(store.db, 'tokenHash', hashToken(token));
    let release!: () => void;
    vi.spyOn(kernel.repo('api-sessions'), 'findBy').mockImplementationOnce(async () => {
      await new Promise<void>((resolve) => (release = resolve));
      return stale;
    });
    const pending = sessions.resolve(token);
    // A second request reads the session meanwhile, is kept, and completes MFA.
    const session = (await sessions.resolve(token))!;
    expect(sessions.cached(session.id)).toBe(session);
    await sessions.setMfaComplete(session);
    release();
    expect((await pending)?.isMfaComplete).toBe(false);
    expect(sessions.cached(session.id)).toBe(session);
    expect((await sessions.resolve(token))?.isMfaComplete).toBe(true);
  });

  it('an MFA write keeps no copy but the one it brought up to date', async () => {
    const { session, token } = await sessions.create(values());
    // Another path changes the session; the next request reads it again.
    await kernel.write((ctx) => ctx.update('api-sessions', session.id, { ipAddress: '192.0.2.8' }, 'alice'));
    const read = (await sessions.resolve(token))!;
    expect(read).not.toBe(session);
    // A request that resolved it before completes MFA on the copy it holds.
    await sessions.setMfaComplete(session);
    expect(sessions.cached(session.id)).toBeUndefined();
    expect(await sessions.resolve(token)).toMatchObject({ isMfaComplete: true, ipAddress: '192.0.2.8' });
  });

  it('a reset between an MFA write and its change leaves nothing kept', async () => {
    const { session } = await sessions.create(values());
    await kernel.write(async (ctx) => {
      await sessions.mfaCompleteIn(ctx, session);
      ctx.afterCommit(() => sessions.reset());
    });
    expect(session.isMfaComplete).toBe(true);
    expect(sessions.cached(session.id)).toBeUndefined();
  });

  it('an MFA write that finds its session gone keeps nothing, then or at a later change', async () => {
    const { session, token } = await sessions.create(values());
    await kernel.write((ctx) => ctx.remove('api-sessions', session.id, 'alice'));
    await sessions.setMfaComplete(session);
    expect(sessions.cached(session.id)).toBeUndefined();
    sessions.onChange({ collection: 'api-sessions', kind: 'update', id: session.id });
    expect(sessions.cached(session.id)).toBeUndefined();
    expect(await sessions.resolve(token)).toBeUndefined();
  });

  it("an identity deleted takes its sessions' memory and unwritten activity with it, and no other's", async () => {
    const a = await sessions.create(values());
    const b = await sessions.create(values({ identityId: 'bob' }));
    now = T0 + MINUTE;
    sessions.touch(a.session);
    sessions.touch(b.session);
    await kernel.write((ctx) => ctx.remove('identities', 'alice'));
    expect(sessions.cached(a.session.id)).toBeUndefined();
    expect(sessions.cached(b.session.id)).toBe(b.session);
    expect(await sessions.resolve(a.token)).toBeUndefined();
    expect(await sessions.flush()).toBe(1);
    expect(await storedActivity(b.session.id)).toBe(iso(T0 + MINUTE));
  });

  it('forgetIdentity drops unwritten activity even of sessions no longer kept', async () => {
    const { session } = await sessions.create(values());
    now = T0 + MINUTE;
    sessions.touch(session);
    sessions.reset();
    sessions.forgetIdentity('alice');
    expect(await sessions.flush()).toBe(0);
    expect(sessions.lastActivityOf(session.id, T0)).toBe(T0);
  });

  it('changes of other collections, or other kinds, leave the sessions alone', async () => {
    const { session } = await sessions.create(values());
    for (const c of [
      { collection: 'identities', kind: 'update', id: 'alice' },
      { collection: 'identities', kind: 'create', id: session.id },
      { collection: 'authenticators', kind: 'delete', id: session.id },
      { collection: 'api-sessions', kind: 'create', id: session.id },
    ] as Change[]) {
      sessions.onChange(c);
    }
    expect(sessions.cached(session.id)).toBe(session);
  });

  it('load reads a session by id from memory, else from the store', async () => {
    const { session } = await sessions.create(values());
    expect(await sessions.load(session.id)).toBe(session);
    const other = restarted();
    const read = await other.load(session.id);
    expect(read?.tokenHash).toBe(session.tokenHash);
    expect(other.cached(session.id)).toBe(read);
    expect(await other.load(session.id)).toBe(read);
    expect(await other.load('never-was')).toBeUndefined();
  });

  it('a load under way when the session changes does not fill the cache', async () => {
    const { session } = await sessions.create(values());
    const other = restarted();
    const pending = other.load(session.id);
    other.onChange({ collection: 'api-sessions', kind: 'update', id: session.id });
    expect((await pending)?.id).toBe(session.id);
    expect(other.cached(session.id)).toBeUndefined();
  });
});

describe('memory bounds', () => {
  it('sessions dropped from a full cache are read from the store again; their tokens still resolve', async () => {
    const small = new ApiSessions(kernel, clock, TIMEOUT, 1);
    const a = await small.create(values());
    const b = await small.create(values());
    expect(small.cached(a.session.id)).toBeUndefined();
    expect(small.cached(b.session.id)).toBe(b.session);
    const again = await small.resolve(a.token);
    expect(again?.id).toBe(a.session.id);
    expect(small.cached(b.session.id)).toBeUndefined();
    expect((await small.resolve(b.token))?.id).toBe(b.session.id);
    // The token index follows the cache: a dropped session's token is not kept either.
    const byHash = (small as unknown as { byHash: Map<string, string> }).byHash;
    expect([...byHash.values()]).toEqual([b.session.id]);
  });

  it('is named as the cache registry knows it', () => {
    expect(sessions.name).toBe('api-sessions');
  });
});

describe('the timers', () => {
  it('flush and sweep run on their own, and never keep the process alive', async () => {
    const set = vi.spyOn(globalThis, 'setInterval');
    const { session } = await sessions.create(values());
    now = T0 + MINUTE;
    sessions.touch(session);
    sessions.start(5, 10);
    const timers = set.mock.results.map((r) => r.value as NodeJS.Timeout);
    expect(timers).toHaveLength(2);
    for (const timer of timers) expect(timer.hasRef()).toBe(false);
    await vi.waitFor(async () => expect(await storedActivity(session.id)).toBe(iso(T0 + MINUTE)), { timeout: 10_000 });
    now = T0 + MINUTE + TIMEOUT;
    await vi.waitFor(async () => expect(await row(session.id)).toBeUndefined(), { timeout: 10_000 });
    await sessions.stop();
  });

  it('stop ends them', async () => {
    const { session } = await sessions.create(values());
    sessions.start(5, 5);
    await sessions.stop();
    now = T0 + TIMEOUT;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await row(session.id)).toBeDefined();
  });
});
