// The in-memory revocations over an in-memory store: what a start loads (and what it leaves out),
// following the change feed while started and not after, a reset racing a revocation being
// written, reads of one revocation racing each other, the sweep of the store and its timer, and the
// bounds of every time comparison to the millisecond.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { iso } from '../clock.js';
import { CacheRegistry } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import { Kernel } from '../kernel/kernel.js';
import { migrations } from '../store/migrations/index.js';
import { openSqlite } from '../store/sqlite.js';
import { Store } from '../store/store.js';
import { PRUNE_INTERVAL_MS, Revocations, storedRevocation, SWEEP_INTERVAL_MS, type RevocationRecord } from './revocations.js';

const T0 = Date.parse('2026-05-06T07:00:00.000Z');
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

let store: Store;
let kernel: Kernel;
let caches: CacheRegistry;
let now: number;
const clock = () => now;
let view: Revocations;

beforeEach(async () => {
  now = T0;
  store = new Store(openSqlite(':memory:'));
  await store.migrate(migrations);
  kernel = new Kernel({ store, clock });
  caches = new CacheRegistry(kernel.changes);
  view = new Revocations(clock);
});
afterEach(async () => {
  view.stop();
  vi.restoreAllMocks();
  await store.close();
});

/** Writes a revocation as the Management API does: created now, or renewed (updated) now. */
async function revoke(id: string, type: string, expiresAt: number | null, createdAt = now): Promise<void> {
  await kernel.write(async (ctx) => {
    const exists = await ctx.tx.selectFrom('revocations').select('id').where('id', '=', id).executeTakeFirst();
    const values = { type, updatedAt: ctx.now, expiresAt: expiresAt === null ? null : iso(expiresAt) };
    if (exists) await ctx.update('revocations', id, values);
    else await ctx.insert('revocations', { id, createdAt: iso(createdAt), tags: {}, ...values });
  });
}

async function storedIds(): Promise<string[]> {
  return (await store.db.selectFrom('revocations').select('id').orderBy('id').execute()).map((r) => String(r.id));
}

const record = (id: string, type: string, at: number, expiresAt: number | null, updatedAt?: number): RevocationRecord => ({
  id,
  type,
  createdAt: iso(at),
  ...(updatedAt !== undefined && { updatedAt: iso(updatedAt) }),
  expiresAt: expiresAt === null ? null : iso(expiresAt),
});

/** The view's own read of the store, bound, to wrap in a test. */
function privateLoad(v: Revocations): () => Promise<unknown> {
  const load = (v as unknown as { load(): Promise<unknown> }).load;
  return load.bind(v);
}

/** A promise and the function that settles it. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe('storedRevocation', () => {
  it('reads a revocation as stored, or nothing', async () => {
    await revoke('r1', 'IDENTITY', T0 + HOUR, T0 - MINUTE);
    await revoke('r2', 'JTI', null);
    const read = storedRevocation(store.db);
    expect(await read('r1')).toEqual({ id: 'r1', type: 'IDENTITY', createdAt: iso(T0 - MINUTE), updatedAt: iso(T0), expiresAt: iso(T0 + HOUR) });
    expect(await read('r2')).toEqual({ id: 'r2', type: 'JTI', createdAt: iso(T0), updatedAt: iso(T0), expiresAt: null });
    expect(await read('r3')).toBeUndefined();
  });
});

describe('start', () => {
  it('loads every revocation that still matters: none that expires now or earlier', async () => {
    await revoke('for-ever', 'JTI', null);
    await revoke('later', 'IDENTITY', T0 + HOUR);
    await revoke('ends-now', 'JTI', T0 + MINUTE);
    await revoke('ended', 'API_SESSION', T0 + MINUTE - 1);
    now = T0 + MINUTE;
    await view.start({ kernel, caches });
    expect(view.size).toBe(2);
    expect(view.isRevoked('JTI', 'for-ever')).toBe(true);
    expect(view.isRevoked('IDENTITY', 'later', T0)).toBe(true);
    expect(view.isRevoked('IDENTITY', 'later', T0 + 1)).toBe(false);
    expect(view.isRevoked('JTI', 'ends-now')).toBe(false);
    expect(view.isRevoked('API_SESSION', 'ended', 0)).toBe(false);
  });

  it('an IDENTITY or API_SESSION revocation takes effect at its last write', async () => {
    await revoke('renewed', 'API_SESSION', T0 + HOUR);
    now = T0 + 10 * MINUTE;
    await revoke('renewed', 'API_SESSION', T0 + 2 * HOUR);
    await view.start({ kernel, caches });
    expect(view.isRevoked('API_SESSION', 'renewed', T0 + 10 * MINUTE)).toBe(true);
    expect(view.isRevoked('API_SESSION', 'renewed', T0 + 10 * MINUTE + 1)).toBe(false);
  });

  it('follows revocations written after it, until stopped', async () => {
    await view.start({ kernel, caches });
    expect(caches.names()).toEqual(['revocations']);
    await revoke('new', 'JTI', T0 + HOUR);
    expect(view.isRevoked('JTI', 'new')).toBe(true);
    await kernel.write((ctx) => ctx.remove('revocations', 'new'));
    expect(view.isRevoked('JTI', 'new')).toBe(false);

    view.stop();
    expect(caches.names()).toEqual([]);
    await revoke('unseen', 'JTI', T0 + HOUR);
    expect(view.isRevoked('JTI', 'unseen')).toBe(false);
  });

  it('may be started again: it follows the feed once, from the store it is given', async () => {
    await view.start({ kernel, caches });
    await view.start({ kernel, caches });
    expect(caches.names()).toEqual(['revocations']);
    await revoke('once', 'JTI', T0 + HOUR);
    expect(view.isRevoked('JTI', 'once')).toBe(true);
  });
});

describe('reset', () => {
  it('before a start there is no store to read: what is held stays', async () => {
    view.add(record('held', 'JTI', T0, T0 + HOUR));
    await view.reset();
    expect(view.isRevoked('JTI', 'held')).toBe(true);
  });

  it('reads the store again and replaces what is held', async () => {
    await view.start({ kernel, caches });
    view.add(record('only-in-memory', 'JTI', T0, T0 + HOUR));
    await store.db.insertInto('revocations').values({ id: 'only-stored', type: 'JTI', created_at: iso(T0), updated_at: iso(T0), tags: '{}', expires_at: null }).execute();
    await view.reset();
    expect(view.isRevoked('JTI', 'only-in-memory')).toBe(false);
    expect(view.isRevoked('JTI', 'only-stored')).toBe(true);
  });

  it('keeps a revocation written while it reads the store, and one deleted meanwhile stays deleted', async () => {
    await revoke('deleted-meanwhile', 'IDENTITY', T0 + HOUR);
    await view.start({ kernel, caches });
    // The reset's read of the store sees neither write; they commit before it replaces what is held.
    const gate = deferred<void>();
    const reading = deferred<void>();
    const load = privateLoad(view);
    vi.spyOn(view as unknown as { load(): Promise<unknown> }, 'load').mockImplementationOnce((async () => {
      const read = await load();
      reading.resolve();
      await gate.promise;
      return read;
    }) as never);
    const resetting = view.reset();
    await reading.promise;
    await revoke('written-meanwhile', 'JTI', T0 + HOUR);
    await kernel.write((ctx) => ctx.remove('revocations', 'deleted-meanwhile'));
    gate.resolve();
    await resetting;
    expect(view.isRevoked('JTI', 'written-meanwhile')).toBe(true);
    expect(view.isRevoked('IDENTITY', 'deleted-meanwhile', 0)).toBe(false);
    // Each held once, under its own kind; nothing left behind under the others.
    expect(view.size).toBe(1);
    expect(view.prune()).toBe(0);
  });

  it('a failed read of the store keeps what is held', async () => {
    await revoke('kept', 'JTI', T0 + HOUR);
    await view.start({ kernel, caches });
    vi.spyOn(view as unknown as { load(): Promise<unknown> }, 'load').mockRejectedValueOnce(new Error('store unavailable') as never);
    await expect(view.reset()).rejects.toThrow('store unavailable');
    expect(view.isRevoked('JTI', 'kept')).toBe(true);
    await view.reset();
    expect(view.isRevoked('JTI', 'kept')).toBe(true);
  });
});

describe('following changes', () => {
  it('an older read that ends after a newer one is not applied', async () => {
    const reads: { id: string; answer: ReturnType<typeof deferred<RevocationRecord | undefined>> }[] = [];
    const ordered = new Revocations(clock, (id) => {
      const answer = deferred<RevocationRecord | undefined>();
      reads.push({ id, answer });
      return answer.promise;
    });
    const first = ordered.apply({ collection: 'revocations', kind: 'create', id: 'r' });
    const second = ordered.apply({ collection: 'revocations', kind: 'update', id: 'r' });
    reads[1]!.answer.resolve(record('r', 'IDENTITY', T0, T0 + HOUR, T0 + MINUTE));
    await second;
    reads[0]!.answer.resolve(record('r', 'IDENTITY', T0, T0 + HOUR));
    await first;
    // The newer read stands: tokens issued before its write are revoked.
    expect(ordered.isRevoked('IDENTITY', 'r', T0 + MINUTE)).toBe(true);

    // An older read that ends first is not applied, and the newer one still is when it ends.
    const older = ordered.apply({ collection: 'revocations', kind: 'update', id: 'r' });
    const newer = ordered.apply({ collection: 'revocations', kind: 'update', id: 'r' });
    reads[2]!.answer.resolve(record('r', 'JTI', T0, T0 + HOUR));
    await older;
    expect(ordered.isRevoked('JTI', 'r')).toBe(false);
    reads[3]!.answer.resolve(record('r', 'IDENTITY', T0, T0 + HOUR, T0 + 3 * MINUTE));
    await newer;
    expect(ordered.isRevoked('IDENTITY', 'r', T0 + 3 * MINUTE)).toBe(true);
    expect(ordered.isRevoked('JTI', 'r')).toBe(false);

    // A delete followed while a read is under way wins over that read.
    const third = ordered.apply({ collection: 'revocations', kind: 'update', id: 'r' });
    await ordered.apply({ collection: 'revocations', kind: 'delete', id: 'r' });
    reads[4]!.answer.resolve(record('r', 'IDENTITY', T0, T0 + HOUR, T0 + 2 * MINUTE));
    await third;
    expect(ordered.isRevoked('IDENTITY', 'r', 0)).toBe(false);
    expect(ordered.size).toBe(0);

    // Once nothing is under way, a read of the id applies again.
    const fourth = ordered.apply({ collection: 'revocations', kind: 'create', id: 'r' });
    reads[5]!.answer.resolve(record('r', 'JTI', T0, null));
    await fourth;
    expect(ordered.isRevoked('JTI', 'r')).toBe(true);
  });

  it('a changed revocation that can no longer be read is forgotten', async () => {
    const view2 = new Revocations(clock, async () => undefined);
    view2.add(record('gone', 'JTI', T0, T0 + HOUR));
    await view2.apply({ collection: 'revocations', kind: 'update', id: 'gone' });
    expect(view2.isRevoked('JTI', 'gone')).toBe(false);
  });

  it('without a reader, a change forgets the revocation (the next start reads it)', async () => {
    view.add(record('r', 'JTI', T0, T0 + HOUR));
    await view.onChange({ collection: 'revocations', kind: 'update', id: 'r' });
    expect(view.size).toBe(0);
  });

  it('a revocation changed to another kind is held under that kind only', async () => {
    const stored = new Map<string, RevocationRecord>([['r', record('r', 'API_SESSION', T0, T0 + HOUR)]]);
    const view2 = new Revocations(clock, async (id) => stored.get(id));
    view2.add(record('r', 'JTI', T0, T0 + HOUR));
    await view2.apply({ collection: 'revocations', kind: 'update', id: 'r' });
    expect(view2.isRevoked('JTI', 'r')).toBe(false);
    expect(view2.isRevoked('API_SESSION', 'r', T0)).toBe(true);
    expect(view2.size).toBe(1);
  });
});

describe('add and isRevoked, to the millisecond', () => {
  it('a record that expires at the current millisecond is not held; one a millisecond later is', () => {
    view.add(record('now', 'JTI', T0 - HOUR, T0));
    view.add(record('next', 'JTI', T0 - HOUR, T0 + 1));
    expect(view.size).toBe(1);
    expect(view.isRevoked('JTI', 'next')).toBe(true);
    now = T0 + 1;
    expect(view.isRevoked('JTI', 'next')).toBe(false);
  });

  it('takes effect at updatedAt when there is one, else at createdAt', () => {
    view.add(record('renewed', 'IDENTITY', T0 - HOUR, T0 + HOUR, T0 - MINUTE));
    view.add(record('once', 'IDENTITY', T0 - HOUR, T0 + HOUR));
    expect(view.isRevoked('IDENTITY', 'renewed', T0 - MINUTE)).toBe(true);
    expect(view.isRevoked('IDENTITY', 'renewed', T0 - MINUTE + 1)).toBe(false);
    expect(view.isRevoked('IDENTITY', 'once', T0 - HOUR)).toBe(true);
    expect(view.isRevoked('IDENTITY', 'once', T0 - HOUR + 1)).toBe(false);
  });

  it('a kind it does not know revokes nothing', () => {
    view.add(record('x', 'JTI', T0, T0 + HOUR));
    expect(view.isRevoked('SESSION' as never, 'x')).toBe(false);
  });

  it('ignores a record whose expiry or update time is not a date', () => {
    view.add({ ...record('bad-expiry', 'JTI', T0, T0 + HOUR), expiresAt: 'soon' });
    view.add({ ...record('bad-update', 'IDENTITY', T0, T0 + HOUR), updatedAt: 'recently' });
    expect(view.size).toBe(0);
    expect(view.isRevoked('IDENTITY', 'bad-update')).toBe(false);
  });

  it('a revocation held past its expiry no longer applies, before and after pruning', () => {
    view.add(record('short', 'IDENTITY', T0, T0 + 10_000));
    expect(view.isRevoked('IDENTITY', 'short')).toBe(true);
    now = T0 + 10_000;
    expect(view.isRevoked('IDENTITY', 'short')).toBe(false);
    expect(view.size).toBe(1);
  });

  it('prunes at the first check a minute after the last prune, and answers how many it dropped', () => {
    view.add(record('short', 'JTI', T0, T0 + 1_000));
    view.add(record('long', 'JTI', T0, T0 + HOUR));
    now = T0 + PRUNE_INTERVAL_MS - 1;
    view.isRevoked('JTI', 'long');
    expect(view.size).toBe(2);
    now = T0 + PRUNE_INTERVAL_MS;
    view.isRevoked('JTI', 'long');
    expect(view.size).toBe(1);
    // The next one is a minute after that prune.
    view.add(record('short-2', 'JTI', now, now + 1_000));
    now += PRUNE_INTERVAL_MS - 1;
    view.isRevoked('JTI', 'long');
    expect(view.size).toBe(2);
    now += 1;
    view.isRevoked('JTI', 'long');
    expect(view.size).toBe(1);
    view.add(record('short-3', 'JTI', now, now + 1_000));
    view.add(record('short-4', 'IDENTITY', now, now + 1_000));
    expect(view.prune(now + 1_000)).toBe(2);
    expect(view.prune(now + 1_000)).toBe(0);
  });

  it('a prune by hand moves the next automatic one', () => {
    view.add(record('long', 'JTI', T0, T0 + HOUR));
    now = T0 + 30_000;
    view.prune();
    view.add(record('short', 'JTI', T0, T0 + 40_000));
    now = T0 + PRUNE_INTERVAL_MS;
    view.isRevoked('JTI', 'long');
    expect(view.size).toBe(2);
    now = T0 + 30_000 + PRUNE_INTERVAL_MS;
    view.isRevoked('JTI', 'long');
    expect(view.size).toBe(1);
  });
});

describe('sweep', () => {
  it('before a start there is no store: nothing to sweep', async () => {
    expect(await view.sweep()).toBe(0);
  });

  it('deletes from the store what expired at or before now, announces it, and prunes memory', async () => {
    await revoke('for-ever', 'JTI', null);
    await revoke('ends-now', 'JTI', T0 + HOUR);
    await revoke('ended', 'IDENTITY', T0 + HOUR - 1);
    await revoke('later', 'API_SESSION', T0 + HOUR + 1);
    await view.start({ kernel, caches });
    // Held in memory only (the store's row went by another way): pruned all the same.
    view.add(record('memory-only', 'JTI', T0, T0 + HOUR));
    expect(view.size).toBe(5);
    const seen: Change[] = [];
    const stop = kernel.changes.subscribe((c) => void seen.push(c));
    now = T0 + HOUR;
    expect(await view.sweep()).toBe(2);
    stop();
    expect(await storedIds()).toEqual(['for-ever', 'later']);
    expect(seen).toEqual([
      { collection: 'revocations', kind: 'delete', id: 'ends-now' },
      { collection: 'revocations', kind: 'delete', id: 'ended' },
    ]);
    expect(view.size).toBe(2);
    expect(await view.sweep()).toBe(0);
  });

  it('runs every SWEEP_INTERVAL_MS once started, on a timer that never keeps the process alive', async () => {
    const setInterval = vi.spyOn(globalThis, 'setInterval');
    await revoke('ended', 'JTI', T0 + MINUTE);
    await view.start({ kernel, caches });
    expect(setInterval).toHaveBeenCalledOnce();
    const [tick, every] = setInterval.mock.calls[0]!;
    const timer = setInterval.mock.results[0]!.value as NodeJS.Timeout;
    expect(every).toBe(SWEEP_INTERVAL_MS);
    expect(timer.hasRef()).toBe(false);
    now = T0 + MINUTE;
    (tick as () => void)();
    await vi.waitFor(async () => expect(await storedIds()).toEqual([]));
    // A failed sweep is left for the next one (an unhandled rejection would fail the run).
    const write = vi.spyOn(kernel, 'write').mockRejectedValueOnce(new Error('store busy'));
    (tick as () => void)();
    await vi.waitFor(() => expect(write).toHaveBeenCalled());
    await new Promise((resolve) => setImmediate(resolve));
    const clear = vi.spyOn(globalThis, 'clearInterval');
    view.stop();
    expect(clear).toHaveBeenCalledWith(timer);
  });
});
