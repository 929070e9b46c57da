// The lockout rules called directly over an in-memory store: which auth policy applies, when wrong
// passwords lock an identity and for how long, that guesses at a disabled identity count nothing,
// and that every change of a count or an identity is announced to the caches.
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { iso } from '../clock.js';
import type { Change } from '../kernel/changes.js';
import { Kernel } from '../kernel/kernel.js';
import { DEFAULT_AUTH_POLICY_ID, DEFAULT_PRIMARY, DEFAULT_SECONDARY } from '../resources/auth-policies.js';
import { migrations } from '../store/migrations/index.js';
import { openSqlite } from '../store/sqlite.js';
import { Store } from '../store/store.js';
import { authPolicyRules, clearWrongPasswords, countWrongPassword, markDisabled, resetWrongPasswords } from './lockout.js';

const T0 = Date.parse('2026-03-04T05:06:07.089Z');
const MINUTE = 60_000;

let store: Store;
let kernel: Kernel;
let now: number;
const clock = () => now;
/** The changes the kernel announced since the test began. */
let changes: Change[];
let stopListening: () => void;
let n = 0;

beforeEach(async () => {
  now = T0;
  store = new Store(openSqlite(':memory:'));
  await store.migrate(migrations);
  kernel = new Kernel({ store, clock });
  await policy(DEFAULT_AUTH_POLICY_ID, 0, 0);
  changes = [];
  stopListening = kernel.changes.subscribe((c) => void changes.push(c));
});
afterEach(async () => {
  stopListening();
  await store.close();
});

async function policy(id: string, maxAttempts: number, lockoutDurationMinutes: number): Promise<void> {
  await kernel.write((ctx) =>
    ctx.insert('auth-policies', {
      id,
      name: `policy ${id}`,
      createdAt: ctx.now,
      updatedAt: ctx.now,
      tags: {},
      isSystem: id === DEFAULT_AUTH_POLICY_ID,
      primary: { ...DEFAULT_PRIMARY, updb: { ...DEFAULT_PRIMARY.updb, maxAttempts, lockoutDurationMinutes } },
      secondary: DEFAULT_SECONDARY,
    }),
  );
}

/** An identity under `authPolicyId` with one password authenticator; answers both ids. */
async function identity(authPolicyId: string, state: { disabled?: boolean; disabledUntil?: string | null } = {}) {
  const id = `identity-${++n}`;
  const authenticatorId = `authenticator-${n}`;
  await kernel.write(async (ctx) => {
    const base = { createdAt: ctx.now, updatedAt: ctx.now, tags: {} };
    await ctx.insert('identities', {
      ...base,
      id,
      name: id,
      type: 'User',
      isAdmin: false,
      isDefaultAdmin: false,
      authPolicyId,
      disabled: state.disabled ?? false,
      disabledAt: state.disabled ? ctx.now : null,
      disabledUntil: state.disabledUntil ?? null,
    });
    await ctx.insert('authenticators', {
      ...base,
      id: authenticatorId,
      method: 'updb',
      identityId: id,
      username: id,
      passwordHash: 'not used here',
      failedAttempts: 0,
    });
  });
  // What a test does is announced from here on.
  changes = [];
  return { id, authenticatorId };
}

async function failedAttempts(authenticatorId: string): Promise<number> {
  const row = await store.db.selectFrom('authenticators').select('failed_attempts').where('id', '=', authenticatorId).executeTakeFirstOrThrow();
  return Number(row.failed_attempts);
}

async function identityState(id: string) {
  const e = (await kernel.repo('identities').get(store.db, id))!;
  return { disabled: e.disabled, disabledAt: e.disabledAt, disabledUntil: e.disabledUntil, updatedAt: e.updatedAt };
}

describe('authPolicyRules', () => {
  it("answers the rules of the identity's policy, else of the default policy", async () => {
    await policy('strict', 3, 5);
    const policies = kernel.repo('auth-policies');
    expect((await authPolicyRules(policies, store.db, 'strict')).primary.updb).toMatchObject({ maxAttempts: 3, lockoutDurationMinutes: 5 });
    expect(await authPolicyRules(policies, store.db, 'strict')).toEqual({
      primary: { ...DEFAULT_PRIMARY, updb: { ...DEFAULT_PRIMARY.updb, maxAttempts: 3, lockoutDurationMinutes: 5 } },
      secondary: DEFAULT_SECONDARY,
    });
    for (const none of [null, undefined, 'a-policy-that-is-gone']) {
      expect(await authPolicyRules(policies, store.db, none)).toEqual({ primary: DEFAULT_PRIMARY, secondary: DEFAULT_SECONDARY });
    }
  });

  it('fails loudly when even the default policy is missing', async () => {
    await store.db.deleteFrom('auth_policies').execute();
    await expect(authPolicyRules(kernel.repo('auth-policies'), store.db, 'default')).rejects.toThrow('the default auth policy is missing');
  });
});

describe('countWrongPassword', () => {
  it('locks at maxAttempts for lockoutDurationMinutes, starts the count again and announces both', async () => {
    await policy('three-strikes', 3, 5);
    const { id, authenticatorId } = await identity('three-strikes');
    expect(await countWrongPassword(kernel, clock, authenticatorId)).toBeUndefined();
    now += 1_000;
    expect(await countWrongPassword(kernel, clock, authenticatorId)).toBeUndefined();
    expect(await failedAttempts(authenticatorId)).toBe(2);
    expect((await identityState(id)).disabled).toBe(false);
    changes = [];

    now += 1_000;
    expect(await countWrongPassword(kernel, clock, authenticatorId)).toBe(id);
    expect(await failedAttempts(authenticatorId)).toBe(0);
    expect(await identityState(id)).toEqual({
      disabled: true,
      disabledAt: iso(now),
      disabledUntil: iso(now + 5 * MINUTE),
      updatedAt: iso(now),
    });
    // The count, its reset and the lock: every cache that holds them hears of it.
    expect(changes).toEqual([
      { collection: 'authenticators', kind: 'update', id: authenticatorId, ownerId: id },
      { collection: 'authenticators', kind: 'update', id: authenticatorId, ownerId: id },
      { collection: 'identities', kind: 'update', id },
    ]);
  });

  it('each wrong password below the bound is counted and announced', async () => {
    await policy('five-strikes', 5, 5);
    const { id, authenticatorId } = await identity('five-strikes');
    for (let i = 1; i <= 4; i++) {
      expect(await countWrongPassword(kernel, clock, authenticatorId)).toBeUndefined();
      expect(await failedAttempts(authenticatorId)).toBe(i);
    }
    expect(changes).toEqual(Array(4).fill({ collection: 'authenticators', kind: 'update', id: authenticatorId, ownerId: id }));
    expect((await identityState(id)).disabled).toBe(false);
  });

  it('maxAttempts 1: the first wrong password locks', async () => {
    await policy('one-strike', 1, 10);
    const { id, authenticatorId } = await identity('one-strike');
    expect(await countWrongPassword(kernel, clock, authenticatorId)).toBe(id);
    expect(await identityState(id)).toMatchObject({ disabled: true, disabledUntil: iso(T0 + 10 * MINUTE) });
  });

  it('lockoutDurationMinutes 0 locks until enabled', async () => {
    await policy('forever', 2, 0);
    const { id, authenticatorId } = await identity('forever');
    await countWrongPassword(kernel, clock, authenticatorId);
    expect(await countWrongPassword(kernel, clock, authenticatorId)).toBe(id);
    expect(await identityState(id)).toMatchObject({ disabled: true, disabledAt: iso(T0), disabledUntil: null });
  });

  it('maxAttempts 0 never locks, however many', async () => {
    const { id, authenticatorId } = await identity(DEFAULT_AUTH_POLICY_ID);
    for (let i = 0; i < 12; i++) expect(await countWrongPassword(kernel, clock, authenticatorId)).toBeUndefined();
    expect(await failedAttempts(authenticatorId)).toBe(12);
    expect((await identityState(id)).disabled).toBe(false);
  });

  it('applies the default policy when the identity names one that is gone', async () => {
    await policy('doomed', 1, 5);
    const { id, authenticatorId } = await identity('doomed');
    // The store refuses to delete a policy in use; it is removed underneath all the same.
    await sql`PRAGMA foreign_keys = OFF`.execute(store.db);
    await store.db.deleteFrom('auth_policies').where('id', '=', 'doomed').execute();
    await sql`PRAGMA foreign_keys = ON`.execute(store.db);
    // Under the default policy (maxAttempts 0) a wrong password locks nothing.
    expect(await countWrongPassword(kernel, clock, authenticatorId)).toBeUndefined();
    expect(await failedAttempts(authenticatorId)).toBe(1);
    expect((await identityState(id)).disabled).toBe(false);
  });

  it('counts nothing against an identity that is disabled, with or without an end', async () => {
    await policy('two-strikes', 2, 5);
    const forever = await identity('two-strikes', { disabled: true, disabledUntil: null });
    const untilLater = await identity('two-strikes', { disabled: true, disabledUntil: iso(T0 + MINUTE) });
    for (const { id, authenticatorId } of [forever, untilLater]) {
      const before = await identityState(id);
      for (let i = 0; i < 3; i++) expect(await countWrongPassword(kernel, clock, authenticatorId)).toBeUndefined();
      expect(await failedAttempts(authenticatorId)).toBe(0);
      expect(await identityState(id)).toEqual(before);
    }
    expect(changes).toEqual([]);
  });

  it('counts again once a lockout has ended, to the millisecond', async () => {
    await policy('two-strikes', 2, 5);
    const { id, authenticatorId } = await identity('two-strikes', { disabled: true, disabledUntil: iso(T0 + MINUTE) });
    now = T0 + MINUTE - 1;
    expect(await countWrongPassword(kernel, clock, authenticatorId)).toBeUndefined();
    expect(await failedAttempts(authenticatorId)).toBe(0);
    now = T0 + MINUTE;
    expect(await countWrongPassword(kernel, clock, authenticatorId)).toBeUndefined();
    expect(await failedAttempts(authenticatorId)).toBe(1);
    expect(await countWrongPassword(kernel, clock, authenticatorId)).toBe(id);
    expect(await identityState(id)).toMatchObject({ disabled: true, disabledAt: iso(now), disabledUntil: iso(now + 5 * MINUTE) });
  });

  it('an identity that was enabled again counts as any other', async () => {
    await policy('two-strikes', 2, 5);
    const { id, authenticatorId } = await identity('two-strikes', { disabled: false, disabledUntil: iso(T0 + MINUTE) });
    await countWrongPassword(kernel, clock, authenticatorId);
    expect(await countWrongPassword(kernel, clock, authenticatorId)).toBe(id);
  });

  it('answers undefined for an authenticator that is gone, and writes nothing', async () => {
    expect(await countWrongPassword(kernel, clock, 'no-such-authenticator')).toBeUndefined();
    expect(changes).toEqual([]);
  });

  it('counts per authenticator: guesses at one identity never lock another', async () => {
    await policy('two-strikes', 2, 5);
    const target = await identity('two-strikes');
    const bystander = await identity('two-strikes');
    await countWrongPassword(kernel, clock, bystander.authenticatorId);
    await countWrongPassword(kernel, clock, target.authenticatorId);
    expect(await countWrongPassword(kernel, clock, target.authenticatorId)).toBe(target.id);
    expect(await failedAttempts(bystander.authenticatorId)).toBe(1);
    expect((await identityState(bystander.id)).disabled).toBe(false);
  });

  it('wrong passwords sent together each count, and lock exactly once', async () => {
    await policy('three-strikes', 3, 5);
    const { id, authenticatorId } = await identity('three-strikes');
    const locked = await Promise.all(Array.from({ length: 5 }, () => countWrongPassword(kernel, clock, authenticatorId)));
    expect(locked.filter((x) => x !== undefined)).toEqual([id]);
    expect((await identityState(id)).disabled).toBe(true);
  });
});

describe('markDisabled', () => {
  it('disables from now for the given minutes, or without an end for 0, and announces it', async () => {
    const { id } = await identity(DEFAULT_AUTH_POLICY_ID);
    now = T0 + 7;
    expect(await kernel.write((ctx) => markDisabled(ctx, id, T0, 3))).toBe(true);
    expect(await identityState(id)).toEqual({ disabled: true, disabledAt: iso(T0), disabledUntil: iso(T0 + 3 * MINUTE), updatedAt: iso(T0 + 7) });
    expect(await kernel.write((ctx) => markDisabled(ctx, id, T0, 0))).toBe(true);
    expect((await identityState(id)).disabledUntil).toBeNull();
    expect(changes).toEqual([
      { collection: 'identities', kind: 'update', id },
      { collection: 'identities', kind: 'update', id },
    ]);
  });

  it('answers false for an identity that does not exist', async () => {
    expect(await kernel.write((ctx) => markDisabled(ctx, 'nobody', T0, 3))).toBe(false);
    expect(changes).toEqual([]);
  });
});

describe('resetWrongPasswords and clearWrongPasswords', () => {
  it('reset starts the count again on every authenticator of the identity, announcing those it changed', async () => {
    const { id, authenticatorId } = await identity(DEFAULT_AUTH_POLICY_ID);
    const other = await identity(DEFAULT_AUTH_POLICY_ID);
    await kernel.write((ctx) =>
      ctx.insert('authenticators', {
        id: 'second',
        createdAt: ctx.now,
        updatedAt: ctx.now,
        tags: {},
        method: 'updb',
        identityId: id,
        username: 'second',
        passwordHash: 'not used here',
        failedAttempts: 0,
      }),
    );
    await countWrongPassword(kernel, clock, authenticatorId);
    await countWrongPassword(kernel, clock, other.authenticatorId);
    changes = [];
    await kernel.write((ctx) => resetWrongPasswords(ctx, id));
    expect(await failedAttempts(authenticatorId)).toBe(0);
    expect(await failedAttempts('second')).toBe(0);
    expect(await failedAttempts(other.authenticatorId)).toBe(1);
    // Only the authenticator that had a count changed.
    expect(changes).toEqual([{ collection: 'authenticators', kind: 'update', id: authenticatorId, ownerId: id }]);
  });

  it('clear starts one count again, announcing it only when there was one', async () => {
    const { id, authenticatorId } = await identity(DEFAULT_AUTH_POLICY_ID);
    await clearWrongPasswords(kernel, authenticatorId, id);
    expect(changes).toEqual([]);
    await countWrongPassword(kernel, clock, authenticatorId);
    await countWrongPassword(kernel, clock, authenticatorId);
    changes = [];
    await clearWrongPasswords(kernel, authenticatorId, id);
    expect(await failedAttempts(authenticatorId)).toBe(0);
    expect(changes).toEqual([{ collection: 'authenticators', kind: 'update', id: authenticatorId, ownerId: id }]);
  });
});
