import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { migrations } from '../store/migrations/index.js';
import { openSqlite } from '../store/sqlite.js';
import { Store } from '../store/store.js';
import type { Resources } from './resources.js';
import { seed } from './seed.js';

describe('seed, with a generated admin password', () => {
  let store: Store;
  let dataDir: string;
  beforeEach(async () => {
    store = new Store(openSqlite(':memory:'));
    await store.migrate(migrations);
    dataDir = mkdtempSync(join(tmpdir(), 'overlay-seed-'));
  });
  afterEach(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  // A crash after the admin's commit and before its password reached the disk left an admin nobody
  // could log in as: the password is now written first.
  it('writes the password to disk before the admin is written, and removes it when the write fails', async () => {
    const file = join(dataDir, 'admin-password');
    const seen: boolean[] = [];
    const failing = {
      store,
      write: () => {
        seen.push(existsSync(file));
        return Promise.reject(new Error('the disk went away'));
      },
    } as unknown as Resources;
    const announced: string[] = [];
    await expect(seed(failing, { dataDir, admin: {}, announce: (m) => announced.push(m) })).rejects.toThrow('the disk went away');
    expect(seen).toEqual([true]);
    expect(existsSync(file)).toBe(false);
    expect(announced).toEqual([]);
  });
});
