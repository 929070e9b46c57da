import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { migrations } from '../store/migrations/index.js';
import { openSqlite } from '../store/sqlite.js';
import { Store } from '../store/store.js';
import { CacheRegistry, type Cache } from './caches.js';
import type { Change } from './changes.js';
import { Kernel } from './kernel.js';
import { AuditTrail, scrubbed } from './audit.js';
import { authenticators } from '../resources/authenticators.js';

let store: Store;
let kernel: Kernel;
const failures: unknown[] = [];

beforeAll(async () => {
  store = new Store(openSqlite(':memory:'));
  await store.migrate(migrations);
  kernel = new Kernel({ store, clock: () => Date.parse('2026-01-02T03:04:05.000Z'), log: { error: (obj: unknown) => failures.push(obj) } as never });
});

afterAll(async () => {
  await store.close();
});

const identityType = (id: string) => ({ id, name: id, createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:00:00.000Z', tags: {} });

describe('the kernel', () => {
  it('delivers the changes of a write after its commit, and resolves the write only once listeners are done', async () => {
    const seen: string[] = [];
    const stop = kernel.changes.subscribe(async (c) => {
      // The row is committed: a read outside the transaction sees it.
      const row = await store.db.selectFrom('identity_types').select('id').where('id', '=', c.id).executeTakeFirst();
      await new Promise((resolve) => setTimeout(resolve, 5));
      seen.push(`${c.collection} ${c.kind} ${c.id} ${row ? 'stored' : 'absent'}`);
    });
    try {
      await kernel.write(async (ctx) => {
        await ctx.insert('identity-types', identityType('k1'));
        await ctx.update('identity-types', 'k1', { name: 'k1 renamed' });
        expect(seen).toEqual([]);
      });
      expect(seen).toEqual(['identity-types create k1 stored', 'identity-types update k1 stored']);
    } finally {
      stop();
    }
  });

  it('writes arriving together share one transaction; one that throws is rolled back alone', async () => {
    const seen: string[] = [];
    const stop = kernel.changes.subscribe((c) => void seen.push(`${c.kind} ${c.id}`));
    let transactions = 0;
    const transaction = store.commit.bind(store);
    store.commit = (fn) => {
      transactions++;
      return transaction(fn);
    };
    try {
      const writes = ['g1', 'g2', 'g3', 'g4', 'g5'].map((id) =>
        kernel.write(async (ctx) => {
          await ctx.insert('identity-types', identityType(id));
          if (id === 'g3') {
            // its insert is undone with it, the others stay
            await ctx.update('identity-types', 'g1', { name: 'changed by g3' });
            throw new Error('g3 refused');
          }
          return id;
        }),
      );
      const outcomes = await Promise.allSettled(writes);
      expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message))).toEqual(['g1', 'g2', 'g3 refused', 'g4', 'g5']);
      // issued together, they shared one transaction
      expect(transactions).toBe(1);
      const rows = await store.db.selectFrom('identity_types').select(['id', 'name']).where('id', 'like', 'g%').orderBy('id').execute();
      expect(rows).toEqual([
        { id: 'g1', name: 'g1' },
        { id: 'g2', name: 'g2' },
        { id: 'g4', name: 'g4' },
        { id: 'g5', name: 'g5' },
      ]);
      expect(seen).toEqual(['create g1', 'create g2', 'create g4', 'create g5']);
    } finally {
      store.commit = transaction;
      stop();
    }
  });

  it('a batch whose commit fails fails every write of it, and the next writes go on', async () => {
    const transaction = store.commit.bind(store);
    let fail = true;
    store.commit = async (fn) => {
      const result = await transaction(async (tx) => {
        const value = await fn(tx);
        if (fail) throw new Error('the disk is full');
        return value;
      });
      return result;
    };
    try {
      const both = await Promise.allSettled([
        kernel.write((ctx) => ctx.insert('identity-types', identityType('f1'))),
        kernel.write((ctx) => ctx.insert('identity-types', identityType('f2'))),
      ]);
      expect(both.map((o) => o.status)).toEqual(['rejected', 'rejected']);
      fail = false;
      await kernel.write((ctx) => ctx.insert('identity-types', identityType('f3')));
      const ids = (await store.db.selectFrom('identity_types').select('id').where('id', 'like', 'f%').execute()).map((r) => r.id);
      expect(ids).toEqual(['f3']);
    } finally {
      store.commit = transaction;
    }
  });

  it('announces nothing for a write that rolls back', async () => {
    const seen: Change[] = [];
    const stop = kernel.changes.subscribe((c) => void seen.push(c));
    try {
      await expect(
        kernel.write(async (ctx) => {
          await ctx.insert('identity-types', identityType('k2'));
          throw new Error('abort');
        }),
      ).rejects.toThrow('abort');
      expect(seen).toEqual([]);
      expect(await kernel.repo('identity-types').exists(store.db, 'k2')).toBe(false);
    } finally {
      stop();
    }
  });

  it('records the owner of a record from its definition, and only rows that were there', async () => {
    const seen: Change[] = [];
    const stop = kernel.changes.subscribe((c) => void seen.push(c));
    try {
      await kernel.write(async (ctx) => {
        expect(await ctx.update('identity-types', 'nothing-here', { name: 'x' })).toBe(false);
        expect(await ctx.remove('identity-types', 'nothing-here')).toBe(false);
        await ctx.remove('identity-types', 'k1', 'owner-1');
      });
      expect(seen).toEqual([{ collection: 'identity-types', kind: 'delete', id: 'k1', ownerId: 'owner-1' }]);
    } finally {
      stop();
    }
  });

  it('logs a failing listener and never fails the committed write; later listeners still hear', async () => {
    const heard: string[] = [];
    const stops = [
      kernel.changes.subscribe(() => {
        throw new Error('listener broke');
      }),
      kernel.changes.subscribe((c) => void heard.push(c.id)),
    ];
    failures.length = 0;
    try {
      await kernel.write((ctx) => ctx.insert('identity-types', identityType('k3')));
      expect(heard).toEqual(['k3']);
      expect(failures).toHaveLength(1);
      expect(await kernel.repo('identity-types').exists(store.db, 'k3')).toBe(true);
    } finally {
      for (const stop of stops) stop();
    }
  });
});

describe('the cache registry', () => {
  function cache(name: string, onChange: (c: Change) => void = () => undefined): Cache & { resets: number; heard: string[] } {
    return {
      name,
      resets: 0,
      heard: [],
      onChange(c) {
        this.heard.push(c.id);
        onChange(c);
      },
      reset() {
        this.resets++;
      },
    };
  }

  it('tells every registered cache of each change, resets one whose listener fails, and resets all on demand', async () => {
    const registry = new CacheRegistry(kernel.changes, { error: () => undefined } as never);
    const good = registry.register(cache('good'));
    const bad = registry.register(
      cache('bad', () => {
        throw new Error('cannot follow');
      }),
    );
    expect(registry.names()).toEqual(['good', 'bad']);
    expect(() => registry.register(good)).toThrow(/twice/);

    await kernel.write((ctx) => ctx.insert('identity-types', identityType('k4')));
    expect(good.heard).toEqual(['k4']);
    expect(bad.heard).toEqual(['k4']);
    expect([good.resets, bad.resets]).toEqual([0, 1]);

    await registry.resetAll();
    expect([good.resets, bad.resets]).toEqual([1, 2]);

    registry.unregister(bad);
    await kernel.write((ctx) => ctx.remove('identity-types', 'k4'));
    expect(good.heard).toEqual(['k4', 'k4']);
    expect(bad.heard).toEqual(['k4']);
    registry.unregister(good);
  });
});

describe('transaction timing', () => {
  it('tells how long each transaction took and whether it committed', async () => {
    const observed: [number, boolean][] = [];
    const timed = new Kernel({ store, clock: () => 0, observeTransaction: (seconds, committed) => observed.push([seconds, committed]) });
    await timed.write((ctx) => ctx.insert('identity-types', identityType('timed-1')));
    await expect(
      timed.write(async (ctx) => {
        await ctx.insert('identity-types', identityType('timed-2'));
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    expect(observed.map(([, committed]) => committed)).toEqual([true, false]);
    for (const [seconds] of observed) expect(seconds).toBeGreaterThanOrEqual(0);
    expect(await store.db.selectFrom('identity_types').select('id').where('id', 'in', ['timed-1', 'timed-2']).execute()).toEqual([{ id: 'timed-1' }]);
  });
});

describe('the write queue of requests', () => {
  const origin = { requestId: 'r1', ipAddress: '10.0.0.1', actor: { identityId: 'someone', name: 'someone' } };

  it('refuses a write of a request at once when the bound is reached; the controller’s own writes always wait', async () => {
    const bounded = new Kernel({ store, clock: () => Date.parse('2026-01-02T03:04:05.000Z'), maxQueuedWrites: 2 });
    // Queued together (before the first batch is taken): two fit, the rest are refused.
    const writes = bounded.withOrigin(origin, () => [1, 2, 3, 4].map((n) => bounded.write(async () => n)));
    const own = [5, 6, 7].map((n) => bounded.write(async () => n));
    const results = await Promise.allSettled([...writes, ...own]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    const refused = (results[2] as PromiseRejectedResult).reason;
    expect(refused).toMatchObject({ code: 'SERVER_TOO_MANY_REQUESTS', status: 429, headers: { 'retry-after': '1' } });
    // Once the queue drained, writes of requests are taken again.
    await expect(bounded.withOrigin(origin, () => bounded.write(async () => 'again'))).resolves.toBe('again');
  });

  it('takes a request\'s write that says it is not bounded (the counts of security limits, failed logins) even when full', async () => {
    const audit = new AuditTrail(store, () => Date.parse('2026-01-02T03:04:05.000Z'));
    const bounded = new Kernel({ store, clock: () => Date.parse('2026-01-02T03:04:05.000Z'), maxQueuedWrites: 1, audit });
    const results = await Promise.allSettled(
      bounded.withOrigin(origin, () => [
        bounded.write(async () => 'fits'),
        bounded.write(async () => 'refused'),
        bounded.write(async () => 'unbounded', undefined, { bounded: false }),
        bounded.recordAudit({ action: 'login-failed', entityType: 'identities', entityId: null, entityName: 'someone' }).then(() => 'recorded'),
      ]),
    );
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : 'rejected'))).toEqual(['fits', 'rejected', 'unbounded', 'recorded']);
  });
});

describe('writes and the disk', () => {
  let dir: string;
  let disk: Store;
  /** Flushes of the WAL: they pass at once unless held, and then wait for the test (or fail). */
  let held = false;
  const flushes: { done: () => void; fail: (err: Error) => void }[] = [];
  const logged: unknown[] = [];
  let onDisk: Kernel;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'overlay-kernel-'));
    disk = new Store(
      openSqlite(join(dir, 'overlay.db'), {
        flush: () => (held ? new Promise<void>((done, fail) => flushes.push({ done, fail })) : Promise.resolve()),
      }),
    );
    await disk.migrate(migrations);
    onDisk = new Kernel({ store: disk, clock: () => Date.parse('2026-01-02T03:04:05.000Z'), log: { error: (obj: unknown) => logged.push(obj) } as never });
  });

  afterAll(async () => {
    held = false;
    for (const f of flushes) f.done();
    await disk.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a write answers once its commit is on disk; the next is committed meanwhile, and answered after it', async () => {
    held = true;
    const announced: string[] = [];
    const answered: string[] = [];
    const stop = onDisk.changes.subscribe((c) => void announced.push(c.id));
    try {
      const first = onDisk.write((ctx) => ctx.insert('identity-types', identityType('d1'))).then(() => answered.push('d1'));
      await vi.waitFor(() => expect(flushes).toHaveLength(1));
      // Committed and announced, not answered: the disk has not said it holds it.
      expect(announced).toEqual(['d1']);
      const second = onDisk.write((ctx) => ctx.insert('identity-types', identityType('d2'))).then(() => answered.push('d2'));
      // The next write does not wait for the disk to commit.
      await vi.waitFor(() => expect(announced).toEqual(['d1', 'd2']));
      expect(answered).toEqual([]);
      flushes.shift()!.done();
      await first;
      expect(answered).toEqual(['d1']);
      await vi.waitFor(() => expect(flushes).toHaveLength(1));
      flushes.shift()!.done();
      await second;
      expect(answered).toEqual(['d1', 'd2']);
    } finally {
      held = false;
      stop();
    }
  });

  /** A listener that keeps the delivery of changes waiting until `release`; `end` also unsubscribes it. */
  function holdDelivery(): { release: () => void; end: () => void } {
    let release!: () => void;
    const delivering = new Promise<void>((resolve) => (release = resolve));
    const stop = onDisk.changes.subscribe(() => delivering);
    return {
      release,
      end: () => {
        release();
        stop();
      },
    };
  }

  it('the flush starts at the commit, while its changes are delivered; the write answers once both are done', async () => {
    held = true;
    const delivery = holdDelivery();
    let answered = false;
    try {
      const write = onDisk.write((ctx) => ctx.insert('identity-types', identityType('d5'))).then(() => (answered = true));
      // The listener has not finished, and the disk is already asked for the commit.
      await vi.waitFor(() => expect(flushes).toHaveLength(1));
      flushes.shift()!.done();
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(answered).toBe(false);
      delivery.release();
      await write;
      expect(answered).toBe(true);
    } finally {
      held = false;
      delivery.end();
    }
  });

  it('a flush that fails while the changes are still delivered fails the write once they are', async () => {
    held = true;
    const delivery = holdDelivery();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const write = onDisk.write((ctx) => ctx.insert('identity-types', identityType('d6')));
      const outcome = write.then(
        () => 'answered',
        (err: Error) => err.message,
      );
      await vi.waitFor(() => expect(flushes).toHaveLength(1));
      flushes.shift()!.fail(new Error('EIO: the disk failed'));
      await new Promise((resolve) => setTimeout(resolve, 10));
      delivery.release();
      expect(await outcome).toBe('EIO: the disk failed');
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      held = false;
      delivery.end();
    }
  });

  it('a flush that fails fails the writes it covers, logged; the next writes go on', async () => {
    held = true;
    const failing = onDisk.write((ctx) => ctx.insert('identity-types', identityType('d3')));
    await vi.waitFor(() => expect(flushes).toHaveLength(1));
    flushes.shift()!.fail(new Error('EIO: the disk failed'));
    await expect(failing).rejects.toThrow('EIO: the disk failed');
    expect(logged).toContainEqual(expect.objectContaining({ err: expect.objectContaining({ message: 'EIO: the disk failed' }) }));
    held = false;
    await expect(onDisk.write(async (ctx) => (await ctx.insert('identity-types', identityType('d4')), 'stored'))).resolves.toBe('stored');
  });
});

describe('the audit trail of a write', () => {
  it('is written in the transaction of the change: a write that throws leaves neither', async () => {
    const trail = new AuditTrail(store, () => Date.parse('2026-01-02T03:04:05.000Z'));
    const audited = new Kernel({ store, clock: () => Date.parse('2026-01-02T03:04:05.000Z'), audit: trail });
    const origin = { requestId: 'req-audit', ipAddress: '10.0.0.2' };
    await audited.withOrigin(origin, () => audited.write((ctx) => ctx.insert('identity-types', identityType('a1'))));
    await expect(
      audited.withOrigin(origin, () =>
        audited.write(async (ctx) => {
          await ctx.insert('identity-types', identityType('a2'));
          throw new Error('refused');
        }),
      ),
    ).rejects.toThrow('refused');
    // Two writes sharing a batch: the one that throws is rolled back with its event, the other kept.
    const shared = audited.withOrigin({ requestId: 'req-batch', ipAddress: '10.0.0.2' }, () => [
      audited.write((ctx) => ctx.insert('identity-types', identityType('b1'))),
      audited.write(async (ctx) => {
        await ctx.insert('identity-types', identityType('b2'));
        throw new Error('refused too');
      }),
    ]);
    expect((await Promise.allSettled(shared)).map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
    const batchRows = await store.db.selectFrom('audit_events').select('entity_id').where('request_id', '=', 'req-batch').execute();
    expect(batchRows).toEqual([{ entity_id: 'b1' }]);
    // No origin: the controller's own write is not audited.
    await audited.write((ctx) => ctx.insert('identity-types', identityType('a3')));
    const rows = await store.db.selectFrom('audit_events').select(['entity_id', 'action', 'request_id']).where('request_id', '=', 'req-audit').execute();
    expect(rows).toEqual([{ entity_id: 'a1', action: 'create', request_id: 'req-audit' }]);
    const own = await store.db.selectFrom('audit_events').select('id').where('entity_id', '=', 'a3').execute();
    expect(own).toEqual([]);
  });

  it('merges the changes of one record within a write and keeps no secret field', async () => {
    const trail = new AuditTrail(store, () => Date.parse('2026-01-02T03:04:05.000Z'));
    const audited = new Kernel({ store, clock: () => Date.parse('2026-01-02T03:04:05.000Z'), audit: trail });
    await audited.withOrigin({ requestId: 'req-merge', ipAddress: '10.0.0.3' }, () =>
      audited.write(async (ctx) => {
        await ctx.insert('identity-types', identityType('m1'));
        await ctx.update('identity-types', 'm1', { name: 'm1 renamed' });
      }),
    );
    const rows = await store.db.selectFrom('audit_events').select(['action', 'changes']).where('request_id', '=', 'req-merge').execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.action).toBe('create');
    expect(JSON.parse(String(rows[0]!.changes))).toMatchObject({ after: { id: 'm1', name: 'm1 renamed' } });
    expect(scrubbed(authenticators, { id: 'x', username: 'u', passwordHash: 'h', password: 'p', failedAttempts: 3, unknownField: 1 })).toEqual({
      id: 'x',
      username: 'u',
    });
  });
});
