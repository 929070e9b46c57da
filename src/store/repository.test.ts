// The repository's writes over an in-memory store: inserts and updates name their statement by the
// set of columns they write and bind values by position, so fields given in any order, column sets
// that differ, and fields that are no column must each land in their own column.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { configTypes } from '../resources/services.js';
import { field, type ResourceDef } from '../resources/kit.js';
import { migrations } from './migrations/index.js';
import { Repository } from './repository.js';
import { openSqlite } from './sqlite.js';
import { Store } from './store.js';

let store: Store;
let repo: Repository;

const AT = '2026-03-04T05:06:07.089Z';
const LATER = '2026-03-04T06:00:00.000Z';

beforeEach(async () => {
  store = new Store(openSqlite(':memory:'));
  await store.migrate(migrations);
  repo = new Repository(configTypes, store.dialect);
});
afterEach(async () => {
  await store.close();
});

describe('insert and update', () => {
  it('puts each field in its column, in whatever order the fields come, and skips what is no column', async () => {
    // Fields in the reverse of the column order, and one the definition does not have.
    await repo.insert(store.db, { target: 'router', schema: { type: 'object' }, name: 'a', tags: { k: 'v' }, updatedAt: AT, createdAt: AT, id: 'ct-1', stray: 1 });
    // Another set of columns: target and schema left to the table's defaults.
    await repo.insert(store.db, { id: 'ct-2', createdAt: AT, updatedAt: AT, tags: {}, name: 'b' });
    expect(await repo.get(store.db, 'ct-1')).toEqual({ id: 'ct-1', createdAt: AT, updatedAt: AT, tags: { k: 'v' }, name: 'a', schema: { type: 'object' }, target: 'router' });
    expect(await repo.get(store.db, 'ct-2')).toMatchObject({ id: 'ct-2', name: 'b', tags: {} });
  });

  it('updates the fields given only, each set of them with its own statement', async () => {
    await repo.insert(store.db, { id: 'ct-1', createdAt: AT, updatedAt: AT, tags: {}, name: 'a', schema: {}, target: 'service' });
    expect(await repo.update(store.db, 'ct-1', { target: 'router', updatedAt: LATER })).toBe(true);
    expect(await repo.update(store.db, 'ct-1', { name: 'renamed', schema: { x: 1 }, target: undefined })).toBe(true);
    expect(await repo.get(store.db, 'ct-1')).toEqual({ id: 'ct-1', createdAt: AT, updatedAt: LATER, tags: {}, name: 'renamed', schema: { x: 1 }, target: 'router' });
  });

  it('answers whether the record exists when nothing is a column, and false for an unknown id', async () => {
    await repo.insert(store.db, { id: 'ct-1', createdAt: AT, updatedAt: AT, tags: {}, name: 'a' });
    expect(await repo.update(store.db, 'ct-1', { stray: 1, name: undefined })).toBe(true);
    expect(await repo.update(store.db, 'nope', { stray: 1 })).toBe(false);
    expect(await repo.update(store.db, 'nope', { name: 'x' })).toBe(false);
    expect(await repo.get(store.db, 'ct-1')).toMatchObject({ name: 'a' });
  });

  it('refuses a definition with more columns than a set of them can name', () => {
    const fields = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, field.string(`field ${i}`)]));
    // id, createdAt, updatedAt and tags are columns of every table.
    const def = (n: number): ResourceDef => ({ ...configTypes, fields: fields(n) }) as ResourceDef;
    expect(() => new Repository(def(49), store.dialect)).not.toThrow();
    expect(() => new Repository(def(50), store.dialect)).toThrow(/more columns/);
  });
});
