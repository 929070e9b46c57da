// Migrations of a store file that stop part way (the process killed, a full disk, a statement
// refused): what they did is undone, so the next start applies them from the beginning. SQLite runs
// each ALTER TABLE as its own commit unless a transaction holds them; a migration applied in part
// was not recorded, and the next start failed on its first statement ("duplicate column name") for
// good.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { migrations } from './migrations/index.js';
import { openSqlite } from './sqlite.js';
import { Store, type StoreMigration } from './store.js';

let dir: string;
let path: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'overlay-store-'));
  path = join(dir, 'overlay.db');
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `fn` on the store file opened anew, as a start does, and closes it. */
async function withStore<T>(fn: (store: Store) => Promise<T>): Promise<T> {
  const store = new Store(openSqlite(path));
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

const last = migrations.at(-1)!;
const before = migrations.slice(0, -1);

/** The last migration, stopped after its first statement as a killed process or a full disk stops it. */
const stoppedHalfWay: StoreMigration = {
  name: last.name,
  async up(db) {
    await sql`alter table cas add column admin_written integer not null default 1`.execute(db);
    throw new Error('disk I/O error');
  },
};

const columnsOf = async (store: Store, table: string) => (await store.dialect.columns(table)).map((c) => c.name);

describe('a migration that stops part way', () => {
  it('leaves nothing of itself, and the next start applies it whole', async () => {
    expect(last.name).toBe('0021-admin-written');
    await withStore((store) => store.migrate(before));
    await expect(withStore((store) => store.migrate([...before, stoppedHalfWay]))).rejects.toThrow('disk I/O error');

    await withStore(async (store) => {
      expect(await columnsOf(store, 'cas')).not.toContain('admin_written');
      expect(await store.migrate(migrations)).toEqual([last.name]);
      expect(await columnsOf(store, 'cas')).toContain('admin_written');
      expect(await columnsOf(store, 'external_jwt_signers')).toContain('admin_written');
    });
  });

  it('takes the migrations of the same start with it: the store stays at the version it had', async () => {
    await withStore((store) => store.migrate(migrations.slice(0, -2)));
    const recorded = async (store: Store) =>
      (await sql<{ name: string }>`select name from kysely_migration order by name`.execute(store.db)).rows.map((r) => r.name);
    const was = await withStore(recorded);
    await expect(withStore((store) => store.migrate([...before, stoppedHalfWay]))).rejects.toThrow('disk I/O error');

    // The version before this start still finds every migration it knows of, and no other: it can
    // run on the store again.
    await withStore(async (store) => {
      expect(await recorded(store)).toEqual(was);
      expect(await store.migrate(migrations)).toEqual(migrations.slice(-2).map((m) => m.name));
    });
  });
});
