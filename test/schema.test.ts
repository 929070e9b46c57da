// The migrated schema must be what the resource definitions imply: same columns, nullability,
// types, unique columns and references, the link tables their relations imply (the policies'
// role lists and the link lists), and the views definitions read from. A definition change
// without a migration fails here.
import { existsSync, fstatSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import Database from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CompiledQuery, sql } from 'kysely';
import { resourceDefs } from '../src/resources/index.js';
import { tableSpec, type ResourceDef } from '../src/resources/kit.js';
import { LINK_LISTS, LINK_TABLES, POLICY_SPECS } from '../src/resources/relations.js';
import { migrations } from '../src/store/migrations/index.js';
import { openSqlite } from '../src/store/sqlite.js';
import { Store, type Tx } from '../src/store/store.js';
import { widgetMigration, widgets } from './fixtures/widgets.js';

let store: Store;
beforeAll(async () => {
  store = new Store(openSqlite(':memory:'));
  await store.migrate([...migrations, widgetMigration]);
});
afterAll(async () => {
  await store.close();
});

const defs: ResourceDef[] = [...resourceDefs, widgets];
const tableOf = (collection: string) => defs.find((d) => d.name === collection)?.table ?? collection;

describe.each(defs.map((d) => [d.name, d] as const))('table of %s', (_name, def) => {
  it('has exactly the columns, types and nullability the definition implies', async () => {
    const spec = tableSpec(def, tableOf);
    const actual = await store.dialect.columns(def.table);
    expect(actual.map((c) => c.name).sort()).toEqual(spec.columns.map((c) => c.name).sort());
    for (const column of spec.columns) {
      const found = actual.find((c) => c.name === column.name)!;
      expect({ column: column.name, type: found.ddlType, nullable: found.nullable }).toEqual({
        column: column.name,
        type: store.dialect.columnType(column.type),
        nullable: column.name === 'id' ? found.nullable : column.nullable,
      });
    }
  });

  it('has a unique index on exactly the unique fields', async () => {
    const spec = tableSpec(def, tableOf);
    expect((await store.dialect.uniqueColumns(def.table)).sort()).toEqual([...spec.unique].sort());
  });

  it('has a foreign key for every reference', async () => {
    const spec = tableSpec(def, tableOf);
    const { rows } = await sql<{ from: string; table: string }>`
      select "from", "table" from pragma_foreign_key_list(${def.table})`.execute(store.db);
    expect(rows.map((r) => ({ column: r.from, table: r.table })).sort((a, b) => a.column.localeCompare(b.column))).toEqual(
      [...spec.references].sort((a, b) => a.column.localeCompare(b.column)),
    );
  });
});

const withViews = defs.filter((d) => d.readFrom !== undefined);

describe.each(withViews.map((d) => [d.name, d] as const))('view read by %s', (_name, def) => {
  it('has exactly the columns of the definition, of the same types', async () => {
    const spec = tableSpec(def, tableOf);
    const { rows } = await sql<{ name: string; type: string }>`select name, type from pragma_table_info(${def.readFrom!})`.execute(store.db);
    expect(rows.map((r) => ({ name: r.name, type: r.type.toLowerCase() })).sort((a, b) => a.name.localeCompare(b.name))).toEqual(
      spec.columns.map((c) => ({ name: c.name, type: store.dialect.columnType(c.type) })).sort((a, b) => a.name.localeCompare(b.name)),
    );
  });
});

describe('views', () => {
  it('are the routers\u2019 (read by routers and transit-routers), and every view is read by a definition', async () => {
    expect(withViews.map((d) => d.name).sort()).toEqual(['routers', 'transit-routers']);
    const { rows } = await sql<{ name: string }>`select name from sqlite_master where type = 'view'`.execute(store.db);
    expect(rows.map((r) => r.name).sort()).toEqual([...new Set(withViews.map((d) => d.readFrom!))].sort());
  });
});

/** Every link table and its two sides, in primary key order: policy then entity, owner then member. */
const linkTables = [
  ...LINK_TABLES.map((l) => ({ table: l.table, sides: [l.policy, l.entity] })),
  ...LINK_LISTS.map((l) => ({ table: l.table, sides: [l.owner, l.member] })),
];

describe.each(linkTables.map((l) => [l.table, l] as const))('link table %s', (_name, link) => {
  const columns = link.sides.map((side) => side.column);

  it('has exactly the columns of its two sides, text and not null, in that order its primary key', async () => {
    const { rows } = await sql<{ name: string; type: string; notnull: number; pk: number }>`
      select name, type, "notnull", pk from pragma_table_info(${link.table}) order by pk`.execute(store.db);
    expect(rows.map((r) => ({ name: r.name, type: r.type.toLowerCase(), notNull: r.notnull === 1, pk: r.pk }))).toEqual(
      columns.map((name, i) => ({ name, type: store.dialect.columnType('text'), notNull: true, pk: i + 1 })),
    );
  });

  it('refers to both sides, a row going with either', async () => {
    const { rows } = await sql<{ from: string; table: string; to: string; on_delete: string }>`
      select "from", "table", "to", on_delete from pragma_foreign_key_list(${link.table})`.execute(store.db);
    expect(rows.sort((a, b) => a.from.localeCompare(b.from))).toEqual(
      link.sides
        .map((side) => ({ from: side.column, table: side.table, to: 'id', on_delete: 'CASCADE' }))
        .sort((a, b) => a.from.localeCompare(b.from)),
    );
  });

  it('is indexed second side first too', async () => {
    const { rows } = await sql<{ name: string }>`
      select name from pragma_index_info(${`${link.table}_reverse`}) order by seqno`.execute(store.db);
    expect(rows.map((r) => r.name)).toEqual([...columns].reverse());
  });
});

describe('link tables', () => {
  it('are exactly the tables that refer to a policy by policy_id', async () => {
    const policyTables = Object.values(POLICY_SPECS).map((p) => p.table);
    const { rows } = await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(store.db);
    const referring: string[] = [];
    for (const { name } of rows) {
      const keys = await sql<{ from: string; table: string }>`select "from", "table" from pragma_foreign_key_list(${name})`.execute(store.db);
      if (keys.rows.some((k) => k.from === 'policy_id' && policyTables.includes(k.table))) referring.push(name);
    }
    expect(referring.sort()).toEqual(LINK_TABLES.map((l) => l.table).sort());
    expect(LINK_TABLES.length).toBeGreaterThan(0);
  });

  it('are, with the link lists, exactly the tables of two references that form their primary key', async () => {
    const { rows } = await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(store.db);
    const pairs: string[] = [];
    for (const { name } of rows) {
      const columns = await sql<{ name: string; pk: number }>`select name, pk from pragma_table_info(${name})`.execute(store.db);
      const keys = await sql<{ from: string }>`select "from" from pragma_foreign_key_list(${name})`.execute(store.db);
      const referring = new Set(keys.rows.map((k) => k.from));
      if (columns.rows.length === 2 && columns.rows.every((c) => c.pk > 0 && referring.has(c.name))) pairs.push(name);
    }
    expect(pairs.sort()).toEqual(linkTables.map((l) => l.table).sort());
    expect(LINK_LISTS.map((l) => l.table)).toEqual(['service_configs']);
  });
});

describe('migrations', () => {
  it('are applied once: a second run applies nothing', async () => {
    expect(await store.migrate([...migrations, widgetMigration])).toEqual([]);
  });

  it('have unique, ordered names', () => {
    const names = migrations.map((m) => m.name);
    expect(names).toEqual([...names].sort());
    expect(new Set(names).size).toBe(names.length);
  });

  it('run with foreign keys enforced, and a file store journals in WAL, synced by SQLite at checkpoints', async () => {
    const { rows } = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(store.db);
    expect(rows[0]!.foreign_keys).toBe(1);
    const dir = mkdtempSync(join(tmpdir(), 'overlay-schema-'));
    const file = new Store(openSqlite(join(dir, 'overlay.db')));
    try {
      await file.migrate(migrations);
      const mode = await sql<{ journal_mode: string }>`pragma journal_mode`.execute(file.db);
      expect(mode.rows[0]!.journal_mode).toBe('wal');
      const sync = await sql<{ synchronous: number }>`pragma synchronous`.execute(file.db);
      expect(sync.rows[0]!.synchronous).toBe(1); // NORMAL: the commit itself flushes the WAL (below)
    } finally {
      await file.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a transaction answers once the WAL is flushed; commits made during a flush share the next one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'overlay-schema-'));
    // Flushes pass at once until `held`, then wait for the test.
    let held = false;
    const flushes: { fd: number; done: () => void }[] = [];
    const file = new Store(
      openSqlite(join(dir, 'overlay.db'), { flush: (fd) => (held ? new Promise<void>((done) => flushes.push({ fd, done })) : Promise.resolve()) }),
    );
    const insert = (id: string) => (tx: Tx) => tx.insertInto('identity_types').values({ id, name: id, created_at: 'now', updated_at: 'now', tags: '{}' }).execute();
    try {
      await file.migrate(migrations);
      held = true;
      const answered: string[] = [];
      const first = file.transaction(insert('First')).then(() => answered.push('First'));
      await vi.waitFor(() => expect(flushes).toHaveLength(1));
      // The WAL of this very store is what is flushed.
      expect(fstatSync(flushes[0]!.fd).ino).toBe(statSync(join(dir, 'overlay.db-wal')).ino);
      // Committed (other reads see it), not answered before it is on disk.
      const seen = await file.db.selectFrom('identity_types').select('id').where('id', '=', 'First').execute();
      expect(seen).toHaveLength(1);
      // Two more commits while the first flush runs: it may have started before them, so they wait
      // for one flush after it, together.
      const later = [file.transaction(insert('Second')), file.transaction(insert('Third'))].map((p, i) => p.then(() => answered.push(['Second', 'Third'][i]!)));
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(answered).toEqual([]);
      expect(flushes).toHaveLength(1);
      flushes.shift()!.done();
      await first;
      expect(answered).toEqual(['First']);
      await vi.waitFor(() => expect(flushes).toHaveLength(1));
      flushes.shift()!.done();
      await Promise.all(later);
      expect(answered).toEqual(['First', 'Second', 'Third']);
      expect(flushes).toHaveLength(0);
    } finally {
      held = false;
      for (const f of flushes) f.done();
      await file.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('compiled statements', () => {
  it('of a write transaction run in it, and roll back with it; one outside waits for its end', async () => {
    const own = new Store(openSqlite(':memory:'));
    const d = own.dialect;
    const count = CompiledQuery.raw('select count(*) as n from things');
    const n = async (ex: Parameters<typeof d.execute>[0]) => Number((await d.execute<{ n: number }>(ex, count)).rows[0]!.n);
    try {
      await sql`create table things (id text primary key)`.execute(own.db);
      let outside: Promise<number> | undefined;
      let settled = false;
      const failed = own.commit(async (tx) => {
        const inserted = await d.execute(tx, CompiledQuery.raw('insert into things (id) values (?), (?)', ['a', 'b']));
        expect(inserted).toMatchObject({ numAffectedRows: 2n, rows: [] });
        expect(await n(tx)).toBe(2);
        outside = n(own.db).finally(() => (settled = true));
        await new Promise((resolve) => setTimeout(resolve, 10));
        expect(settled).toBe(false);
        throw new Error('rolled back');
      });
      await expect(failed).rejects.toThrow('rolled back');
      expect(await outside).toBe(0);
      expect(await n(own.db)).toBe(0);
      // The next write transaction's statements run in it, as the first one's did; once it has
      // ended, a statement on it is refused, as the query builder refuses it.
      let ended!: Tx;
      await own.commit(async (tx) => {
        ended = tx;
        await d.execute(tx, CompiledQuery.raw('insert into things (id) values (?)', ['c']));
      });
      expect(await n(own.db)).toBe(1);
      await expect(d.execute(ended, CompiledQuery.raw('insert into things (id) values (?)', ['d']))).rejects.toThrow('already committed');
      expect(await n(own.db)).toBe(1);
      // A statement outside waits for any transaction that is open, whoever opened it: here one of
      // the query builder's own.
      settled = false;
      await expect(
        own.db.transaction().execute(async (tx) => {
          await tx.insertInto('things' as never).values({ id: 'e' } as never).execute();
          outside = n(own.db).finally(() => (settled = true));
          await new Promise((resolve) => setTimeout(resolve, 10));
          expect(settled).toBe(false);
          throw new Error('rolled back too');
        }),
      ).rejects.toThrow('rolled back too');
      expect(await outside).toBe(1);
    } finally {
      await own.close();
    }
  });
});

describe('checkpoints of the WAL', () => {
  it('run on a worker thread, not in the commits: the database file takes what was committed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'overlay-schema-'));
    const failures: unknown[] = [];
    const file = new Store(openSqlite(join(dir, 'overlay.db'), { checkpointer: { intervalMs: 0, onFailure: (err) => failures.push(err) } }));
    try {
      await file.migrate(migrations);
      const auto = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(file.db);
      expect(auto.rows[0]!.wal_autocheckpoint).toBe(0);
      // In WAL mode only a checkpoint writes the database file itself.
      const before = statSync(join(dir, 'overlay.db')).size;
      const big = 'x'.repeat(4000);
      for (let i = 0; i < 20; i++) {
        await file.transaction((tx) => tx.insertInto('identity_types').values({ id: `T${i}`, name: `T${i}`, created_at: 'now', updated_at: 'now', tags: JSON.stringify({ big }) }).execute());
      }
      await vi.waitFor(() => expect(statSync(join(dir, 'overlay.db')).size).toBeGreaterThan(before + 20 * 4000), { timeout: 5000 });
      expect(failures).toEqual([]);
    } finally {
      await file.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('follow a commit that lands while one runs: its pages reach the database file without another commit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'overlay-schema-'));
    // A driver whose checkpoints answer 200 ms late: the second commit lands while the first one's runs.
    const driver = join(dir, 'slow-driver.cjs');
    writeFileSync(
      driver,
      `const Database = require(${JSON.stringify(createRequire(import.meta.url).resolve('better-sqlite3'))});
module.exports = class extends Database {
  pragma(text) {
    const result = super.pragma(text);
    if (text.startsWith('wal_checkpoint')) { const until = Date.now() + 200; while (Date.now() < until); }
    return result;
  }
};`,
    );
    const failures: unknown[] = [];
    const file = new Store(openSqlite(join(dir, 'overlay.db'), { checkpointer: { intervalMs: 0, driver, onFailure: (err) => failures.push(err) } }));
    /** The ids the database file holds by itself, read from a copy of it without its WAL. */
    const inFile = (): string[] => {
      const copy = join(dir, 'copy.db');
      for (const suffix of ['', '-wal', '-shm']) rmSync(copy + suffix, { force: true });
      writeFileSync(copy, readFileSync(join(dir, 'overlay.db')));
      const db = new Database(copy);
      try {
        return (db.prepare("select id from identity_types where id in ('First', 'Second') order by id").all() as { id: string }[]).map((r) => r.id);
      } finally {
        db.close();
      }
    };
    try {
      await file.migrate(migrations);
      const insert = (id: string) => file.transaction((tx) => tx.insertInto('identity_types').values({ id, name: id, created_at: 'now', updated_at: 'now', tags: '{}' }).execute());
      await insert('First');
      // Its checkpoint has copied it, and answers 200 ms later.
      await vi.waitFor(() => expect(inFile()).toEqual(['First']), { timeout: 5000, interval: 10 });
      await insert('Second');
      await vi.waitFor(() => expect(inFile()).toEqual(['First', 'Second']), { timeout: 5000, interval: 100 });
      expect(failures).toEqual([]);
    } finally {
      await file.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('let the WAL start over under writes that never pause: new writes wait while the worker copies its end', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'overlay-schema-'));
    const failures: unknown[] = [];
    const file = new Store(openSqlite(join(dir, 'overlay.db'), { checkpointer: { intervalMs: 0, restartFrames: 20, onFailure: (err) => failures.push(err) } }));
    try {
      await file.migrate(migrations);
      const big = 'x'.repeat(4000);
      // Four writers, each starting its next write as soon as the last is on disk: a few pages a write,
      // with no moment between writes for a checkpoint to catch up.
      let next = 0;
      const writer = async () => {
        while (next < 1200) {
          const id = `W${next++}`;
          await file.transaction((tx) => tx.insertInto('identity_types').values({ id, name: id, created_at: 'now', updated_at: 'now', tags: JSON.stringify({ big }) }).execute());
        }
      };
      await Promise.all([writer(), writer(), writer(), writer()]);
      const count = await file.db.selectFrom('identity_types').select((eb) => eb.fn.countAll<number>().as('n')).where('id', 'like', 'W%').executeTakeFirstOrThrow();
      expect(Number(count.n)).toBe(1200);
      // The WAL file keeps the size it grew to (it is overwritten from its start). Had it never started
      // over, it would hold every page written: over 25 MiB.
      expect(statSync(join(dir, 'overlay.db-wal')).size).toBeLessThan(8 * 1024 * 1024);
      expect(failures).toEqual([]);
    } finally {
      await file.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('let held writes go on when the worker dies while it copies the end of the WAL', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'overlay-schema-'));
    // A driver whose second checkpoint ends the worker: the one writes are held for.
    const driver = join(dir, 'dying-driver.cjs');
    writeFileSync(
      driver,
      `const Database = require(${JSON.stringify(createRequire(import.meta.url).resolve('better-sqlite3'))});
let checkpoints = 0;
module.exports = class extends Database {
  pragma(text) {
    if (text.startsWith('wal_checkpoint') && ++checkpoints === 2) process.exit(3);
    return super.pragma(text);
  }
};`,
    );
    const failures: unknown[] = [];
    const file = new Store(openSqlite(join(dir, 'overlay.db'), { checkpointer: { intervalMs: 0, restartFrames: 1, driver, onFailure: (err) => failures.push(err) } }));
    try {
      await file.migrate(migrations);
      const insert = (id: string) => file.transaction((tx) => tx.insertInto('identity_types').values({ id, name: id, created_at: 'now', updated_at: 'now', tags: '{}' }).execute());
      await insert('First');
      await vi.waitFor(() => expect(failures).toHaveLength(1));
      expect(String(failures[0])).toContain('exited (code 3)');
      // Writes go on, and the connection checkpoints itself again.
      await insert('Second');
      const auto = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(file.db);
      expect(auto.rows[0]!.wal_autocheckpoint).toBe(1000);
      expect(await file.db.selectFrom('identity_types').select('id').where('id', 'in', ['First', 'Second']).execute()).toHaveLength(2);
    } finally {
      await file.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // Terminating a worker while it was inside the driver's native code (loading it) aborted the
  // whole process: a store closed soon after it opened did that now and then.
  it('end with the worker closing its own connection, even when asked while it still loads the driver', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'overlay-schema-'));
    // A driver slow to load, whose connections say when they close.
    const driver = join(dir, 'telling-driver.cjs');
    const told = join(dir, 'closed');
    writeFileSync(
      driver,
      `const Database = require(${JSON.stringify(createRequire(import.meta.url).resolve('better-sqlite3'))});
const until = Date.now() + 200;
while (Date.now() < until);
module.exports = class extends Database {
  close() {
    require('node:fs').appendFileSync(${JSON.stringify(told)}, 'closed\\n');
    return super.close();
  }
};`,
    );
    const failures: unknown[] = [];
    try {
      for (const settle of [0, 400]) {
        rmSync(told, { force: true });
        const file = new Store(openSqlite(join(dir, `overlay-${settle}.db`), { checkpointer: { intervalMs: 0, driver, onFailure: (err) => failures.push(err) } }));
        await new Promise((resolve) => setTimeout(resolve, settle));
        await file.close();
        expect(existsSync(told) ? readFileSync(told, 'utf8') : 'never closed').toBe('closed\n');
      }
      expect(failures).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('are taken back by the commits when the worker fails', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'overlay-schema-'));
    const failures: unknown[] = [];
    const file = new Store(openSqlite(join(dir, 'overlay.db'), { checkpointer: { driver: join(dir, 'no-such-driver.js'), onFailure: (err) => failures.push(err) } }));
    try {
      await vi.waitFor(() => expect(failures).toHaveLength(1));
      const auto = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(file.db);
      expect(auto.rows[0]!.wal_autocheckpoint).toBe(1000);
      await file.migrate(migrations);
    } finally {
      await file.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a write the disk refuses', () => {
  it('fails with the error that stopped it, which SQLite rolled back itself, not with the rollback after it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'overlay-schema-'));
    const file = new Store(openSqlite(join(dir, 'overlay.db')));
    try {
      await sql`create table filler (v text)`.execute(file.db);
      // A store that may not grow: what a full file system does to it.
      await sql`pragma max_page_count = 20`.execute(file.db);
      const write = file.transaction(async (tx) => {
        for (let i = 0; i < 100; i++) await sql`insert into filler values (${'x'.repeat(4000)})`.execute(tx);
      });
      await expect(write).rejects.toMatchObject({ code: 'SQLITE_FULL' });
      // The store goes on: a write that fits commits.
      await file.transaction((tx) => sql`insert into filler values ('small')`.execute(tx));
      const { rows } = await sql<{ n: number }>`select count(*) as n from filler`.execute(file.db);
      expect(rows[0]!.n).toBe(1);
    } finally {
      await file.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
