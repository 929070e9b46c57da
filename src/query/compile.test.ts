import Database from 'better-sqlite3';
import { Kysely, sql, SqliteDialect } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../errors.js';
import { registerFlavorFunctions, sqliteFlavor } from '../store/sqlite-flavor.js';
import type { FilterField, FilterSymbols } from './ast.js';
import { checkQuery, compileWhere, MAX_ARRAY_ITEMS, MAX_PREDICATES, parseFilter } from './index.js';

interface Row {
  id: number;
  name: string | null;
  size: number | null;
  score: number | null;
  is_system: number | null;
  created_at: string | null;
  role_attributes: string;
  tags: string;
}

interface Db {
  t: Row;
}

// Storage as the repositories keep it: booleans 0/1, datetimes as RFC 3339 UTC text with milliseconds,
// sets as JSON arrays (never NULL), tags as JSON objects.
const rows: Row[] = [
  row(1, 'Alpha', 1, 1.5, 1, '2026-01-01T00:00:00.000Z', ['a', 'b'], { env: 'prod', on: true, x: null }),
  row(2, 'beta', 2, 2, 0, '2026-01-02T00:00:00.000Z', ['a'], { env: 'dev', on: false }),
  row(3, null, null, null, null, null, [], {}),
  row(4, '100%_off', 10, -1.25, 0, '2026-01-02T12:00:00.500Z', ['b', 'c', 'd'], { env: 'PROD', on: 'true' }),
  row(5, 'say "hi"', 0, 0, 1, '2025-12-31T23:59:59.999Z', ['ab'], { env: null, x: 'null' }),
  row(6, "O'Brien", 5, 3, 0, '2026-02-01T00:00:00.000Z', ['c'], { on: true, 'my-key': 'v' }),
  row(7, 'ALPHA', 3, 0.5, null, '2026-01-01T00:00:00.001Z', ['a', 'b', 'c'], { env: 'prod' }),
  row(8, '1000 off', 100, null, 0, '2026-03-01T00:00:00.000Z', ['x'], { env: 'prod-eu', on: false }),
];
const ALL = rows.map((r) => r.id);

function row(
  id: number,
  name: string | null,
  size: number | null,
  score: number | null,
  isSystem: number | null,
  createdAt: string | null,
  roles: string[],
  tags: Record<string, string | boolean | null>,
): Row {
  return {
    id,
    name,
    size,
    score,
    is_system: isSystem,
    created_at: createdAt,
    role_attributes: JSON.stringify(roles),
    tags: JSON.stringify(tags),
  };
}

const fields: FilterField[] = [
  { name: 'id', type: 'integer', column: 'id' },
  { name: 'name', type: 'string', column: 't.name' },
  { name: 'size', type: 'integer', column: 'size' },
  { name: 'score', type: 'number', column: 'score' },
  { name: 'isSystem', type: 'boolean', column: 'is_system' },
  { name: 'createdAt', type: 'datetime', column: 'created_at' },
  { name: 'roleAttributes', type: 'set', column: 'role_attributes' },
  { name: 'tags', type: 'tags', column: 't.tags' },
];
const symbols: FilterSymbols = new Map(fields.map((f) => [f.name, f]));

let database: Database.Database;
let db: Kysely<Db>;

beforeAll(async () => {
  database = new Database(':memory:');
  registerFlavorFunctions(database);
  database.exec(`create table t (
    id integer primary key,
    name text,
    size integer,
    score real,
    is_system integer,
    created_at text,
    role_attributes text not null,
    tags text not null
  )`);
  db = new Kysely<Db>({ dialect: new SqliteDialect({ database }) });
  await db.insertInto('t').values(rows).execute();
});

afterAll(async () => {
  await db.destroy();
});

function compile(text: string) {
  const q = parseFilter(text);
  checkQuery(q, symbols, new Set());
  if (q.where === undefined) throw new Error(`no condition in ${text}`);
  return db.selectFrom('t').select('id').where(compileWhere(q.where, symbols, sqliteFlavor)).orderBy('id');
}

async function ids(text: string): Promise<number[]> {
  const result = await compile(text).execute();
  return result.map((r) => r.id);
}

const complement = (matched: number[]) => ALL.filter((id) => !matched.includes(id));

const cases: Array<[string, number[]]> = [
  // strings
  ['name = "Alpha"', [1]],
  ['name != "Alpha"', [2, 3, 4, 5, 6, 7, 8]],
  ['name < "B"', [1, 4, 7, 8]],
  ['name >= "beta"', [2, 5]],
  ['name <= "ALPHA"', [4, 7, 8]],
  ['name > "O\'Brien"', [2, 5]],
  ['name in ["Alpha", "beta", "nope"]', [1, 2]],
  ['name not in ["Alpha", "beta"]', [3, 4, 5, 6, 7, 8]],
  ['name in []', []],
  ['name not in []', ALL],
  ['name between "A" and "B"', [1, 7]],
  ['name not between "A" and "B"', [2, 3, 4, 5, 6, 8]],
  ['name contains "lph"', [1]],
  ['name icontains "LPH"', [1, 7]],
  ['name not contains "lph"', [2, 3, 4, 5, 6, 7, 8]],
  ['name not icontains "lph"', [2, 3, 4, 5, 6, 8]],
  ['name contains "%"', [4]],
  ['name contains "_"', [4]],
  ['name contains "0%"', [4]],
  ['name icontains "%_O"', [4]],
  ['name contains "0_o"', []],
  ['name contains "\\"hi\\""', [5]],
  ['name = "say \\"hi\\""', [5]],
  ['name = "O\'Brien"', [6]],
  ['name contains "\'"', [6]],
  ['name contains ""', [1, 2, 4, 5, 6, 7, 8]],
  ['name = null', [3]],
  ['name != null', [1, 2, 4, 5, 6, 7, 8]],
  // integers and numbers
  ['id = 4', [4]],
  ['size = 10', [4]],
  ['size != 10', [1, 2, 3, 5, 6, 7, 8]],
  ['size > 2', [4, 6, 7, 8]],
  ['size >= 2', [2, 4, 6, 7, 8]],
  ['size < 2', [1, 5]],
  ['size <= 0', [5]],
  ['size > -1', [1, 2, 4, 5, 6, 7, 8]],
  ['size = 2.0', [2]],
  ['size > 1.5', [2, 4, 6, 7, 8]],
  ['size between 1 and 5', [1, 2, 7]],
  ['size not between 1 and 5', [3, 4, 5, 6, 8]],
  ['size in [0, 100]', [5, 8]],
  ['size not in [0, 100]', [1, 2, 3, 4, 6, 7]],
  ['size = null', [3]],
  ['score = 1.5', [1]],
  ['score = 2', [2]],
  ['score < 0', [4]],
  ['score >= 0.5', [1, 2, 6, 7]],
  ['score between -2 and 1', [4, 5, 7]],
  ['score = null', [3, 8]],
  ['score != null', [1, 2, 4, 5, 6, 7]],
  // booleans
  ['isSystem', [1, 5]],
  ['isSystem = true', [1, 5]],
  ['isSystem = false', [2, 4, 6, 8]],
  ['isSystem != true', [2, 3, 4, 6, 7, 8]],
  ['isSystem != false', [1, 3, 5, 7]],
  ['isSystem = null', [3, 7]],
  ['isSystem in [true]', [1, 5]],
  ['isSystem not in [false]', [1, 3, 5, 7]],
  // datetimes
  ['createdAt = datetime(2026-01-01T00:00:00Z)', [1]],
  ['createdAt = datetime(2026-01-01T01:00:00+01:00)', [1]],
  ['createdAt = "2026-01-01T00:00:00Z"', [1]],
  ['createdAt != datetime(2026-01-01T00:00:00Z)', [2, 3, 4, 5, 6, 7, 8]],
  ['createdAt > datetime(2026-01-01T00:00:00Z)', [2, 4, 6, 7, 8]],
  ['createdAt > datetime(2026-01-01T00:00:00.001Z)', [2, 4, 6, 8]],
  ['createdAt < datetime(2026-01-01T00:00:00Z)', [5]],
  ['createdAt <= datetime(2026-01-02T12:00:00.5Z)', [1, 2, 4, 5, 7]],
  ['createdAt between datetime(2026-01-02T00:00:00Z) and datetime(2026-02-01T00:00:00Z)', [2, 4]],
  ['createdAt not between datetime(2026-01-02T00:00:00Z) and datetime(2026-02-01T00:00:00Z)', [1, 3, 5, 6, 7, 8]],
  ['createdAt in [datetime(2026-01-02T00:00:00Z), "2026-02-01T01:00:00+01:00"]', [2, 6]],
  ['createdAt = null', [3]],
  // an instant within a millisecond (2026-01-01T00:00:00.0005Z lies between rows 1 and 7): no stored
  // datetime equals it, and the one at .000 is below it
  ['createdAt = datetime(2026-01-01T00:00:00.0005Z)', []],
  ['createdAt != datetime(2026-01-01T00:00:00.0005Z)', ALL],
  ['createdAt < datetime(2026-01-01T00:00:00.0005Z)', [1, 5]],
  ['createdAt <= datetime(2026-01-01T00:00:00.000999999Z)', [1, 5]],
  ['createdAt > datetime(2026-01-01T01:00:00.0005+01:00)', [2, 4, 6, 7, 8]],
  ['createdAt >= "2026-01-01T00:00:00.0005Z"', [2, 4, 6, 7, 8]],
  ['not createdAt < "2026-01-01T00:00:00.0005Z"', [2, 3, 4, 6, 7, 8]],
  ['createdAt between datetime(2025-12-31T23:59:59.9995Z) and datetime(2026-01-01T00:00:00.0005Z)', [1]],
  ['createdAt not between datetime(2025-12-31T23:59:59.9995Z) and "2026-01-01T00:00:00.0005Z"', [2, 3, 4, 5, 6, 7, 8]],
  ['createdAt in [datetime(2026-01-01T00:00:00.0005Z), "2026-01-02T00:00:00.000000Z"]', [2]],
  ['createdAt in ["2026-01-01T01:00:00.000500+01:00"]', []],
  ['createdAt not in [datetime(2026-01-01T00:00:00.0005Z)]', ALL],
  // sets
  ['anyOf(roleAttributes) = "a"', [1, 2, 7]],
  ['anyOf(roleAttributes) != "a"', [1, 4, 5, 6, 7, 8]],
  ['anyOf(roleAttributes) in ["c", "x"]', [4, 6, 7, 8]],
  ['anyOf(roleAttributes) not in ["a", "b"]', [4, 5, 6, 7, 8]],
  ['anyOf(roleAttributes) contains "b"', [1, 4, 5, 7]],
  ['anyOf(roleAttributes) icontains "B"', [1, 4, 5, 7]],
  ['anyOf(roleAttributes) not contains "b"', [1, 2, 4, 6, 7, 8]],
  ['anyOf(roleAttributes) < "b"', [1, 2, 5, 7]],
  ['anyOf(roleAttributes) between "b" and "c"', [1, 4, 7]],
  ['allOf(roleAttributes) != "b"', [2, 3, 5, 6, 8]],
  ['allOf(roleAttributes) = "a"', [2, 3]],
  ['allOf(roleAttributes) in ["a", "b", "c"]', [1, 2, 3, 6, 7]],
  ['allOf(roleAttributes) not in ["a"]', [3, 4, 5, 6, 8]],
  ['allOf(roleAttributes) contains "b"', [3, 5]],
  ['allOf(roleAttributes) > "a"', [3, 4, 5, 6, 8]],
  ['count(roleAttributes) = 0', [3]],
  ['count(roleAttributes) > 2', [4, 7]],
  ['count(roleAttributes) between 1 and 3', [1, 2, 5, 6, 8]],
  ['count(roleAttributes) in [1, 3]', [2, 4, 5, 6, 7, 8]],
  ['count(roleAttributes) != 1', [1, 3, 4, 7]],
  ['isEmpty(roleAttributes)', [3]],
  ['not isEmpty(roleAttributes)', [1, 2, 4, 5, 6, 7, 8]],
  // tags: the literal's type picks the comparison
  ['tags.env = "prod"', [1, 7]],
  ['tags.env != "prod"', [2, 3, 4, 5, 6, 8]],
  ['tags.env contains "prod"', [1, 7, 8]],
  ['tags.env icontains "prod"', [1, 4, 7, 8]],
  ['tags.env in ["dev", "PROD"]', [2, 4]],
  ['tags.env not in ["dev", "PROD"]', [1, 3, 5, 6, 7, 8]],
  ['tags.env < "e"', [2, 4]],
  ['tags.env between "p" and "q"', [1, 7, 8]],
  ['tags.env = null', [3, 5, 6]],
  ['tags.env != null', [1, 2, 4, 7, 8]],
  ['tags.on = true', [1, 6]],
  ['tags.on = false', [2, 8]],
  ['tags.on != true', [2, 3, 4, 5, 7, 8]],
  ['tags.on = "true"', [4]],
  ['tags.x = null', [1, 2, 3, 4, 6, 7, 8]],
  ['tags.x = "null"', [5]],
  ['tags.x != null', [5]],
  ['tags.my-key = "v"', [6]],
  ['tags.missing = "a"', []],
  ['tags.missing = null', ALL],
  // logic
  ['name = "Alpha" or name = "beta"', [1, 2]],
  ['isSystem and size > 0', [1]],
  ['isSystem or size > 50 and score = null', [1, 5, 8]],
  ['(isSystem or size > 50) and score = null', [8]],
  ['not isSystem and not isEmpty(roleAttributes)', [2, 4, 6, 7, 8]],
  ['not (isSystem or anyOf(roleAttributes) = "a")', [3, 4, 6, 8]],
  ['not (size > 2 and score > 0)', [1, 2, 3, 4, 5, 8]],
  ['not not isSystem', [1, 5]],
  ['not (name = "Alpha")', [2, 3, 4, 5, 6, 7, 8]],
  ['not (name < "B")', [2, 3, 5, 6]],
  ['not (size > 2)', [1, 2, 3, 5]],
  ['not (name = null)', [1, 2, 4, 5, 6, 7, 8]],
  ['not anyOf(roleAttributes) = "a"', [3, 4, 5, 6, 8]],
  ['not allOf(roleAttributes) = "a"', [1, 4, 5, 6, 7, 8]],
  ['not tags.env = null', [1, 2, 4, 7, 8]],
  ['name = "x" limit 5', []],
  // true and false: every row, or none (nulls included), alone or combined
  ['true', ALL],
  ['TRUE', ALL],
  ['false', []],
  ['not true', []],
  ['not false', ALL],
  ['(true)', ALL],
  ['true and name = "Alpha"', [1]],
  ['false and name = "Alpha"', []],
  ['true or name = "Alpha"', ALL],
  ['false or name = "Alpha"', [1]],
  ['not (true and isSystem)', [2, 3, 4, 6, 7, 8]],
  ['true limit 100', ALL],
];

describe('compileWhere on SQLite', () => {
  it.each(cases)('%s', async (text, expected) => {
    expect(await ids(text)).toEqual(expected);
  });

  // Two-valued logic: `not (f)` matches exactly the rows `f` does not, nulls included.
  it.each(cases.filter(([text]) => !text.includes('limit')))('not (%s) is the complement', async (text, expected) => {
    expect(await ids(`not (${text})`)).toEqual(complement(expected));
  });

  it('binds every literal as a parameter', () => {
    const { sql, parameters } = compile(
      'name = "Alpha" and size between 1 and 5 and isSystem = true and tags.env = "prod" and ' +
        'createdAt > datetime(2026-01-01T01:00:00+01:00) and anyOf(roleAttributes) in ["a", "b"]',
    ).compile();
    expect(parameters).toEqual(['Alpha', 1, 5, 1, '$."env"', '$."env"', 'prod', '2026-01-01T00:00:00.000Z', 'a', 'b']);
    for (const text of ['Alpha', 'prod', '2026', 'env']) expect(sql).not.toContain(text);
    expect(sql).toContain('"t"."name"');
  });

  it('normalises datetime strings before binding', () => {
    const { parameters } = compile('createdAt < "2026-01-01T00:30:00.1+01:00"').compile();
    expect(parameters).toEqual(['2025-12-31T23:30:00.100Z']);
  });

  it(`runs ${MAX_PREDICATES} or-ed conditions (balanced, within SQLite's expression depth)`, async () => {
    const text = Array.from({ length: MAX_PREDICATES }, (_, i) => `size = ${i * 5}`).join(' or ');
    expect(await ids(text)).toEqual([4, 5, 6, 8]); // sizes 10, 0, 5 and 100
  });

  it(`runs ${MAX_PREDICATES} and-ed negations`, async () => {
    const text = Array.from({ length: MAX_PREDICATES }, (_, i) => `not size = ${i + 1000}`).join(' and ');
    expect(await ids(text)).toEqual(ALL);
  });

  it(`runs a list of ${MAX_ARRAY_ITEMS} items`, async () => {
    const items = Array.from({ length: MAX_ARRAY_ITEMS }, (_, i) => `"n${i}"`);
    items[500] = '"beta"';
    expect(await ids(`name in [${items.join(', ')}]`)).toEqual([2]);
    expect(await ids(`anyOf(roleAttributes) in [${items.join(', ')}]`)).toEqual([]);
  });

  it('runs the deepest nesting the parser allows', async () => {
    // 8 × (not + parenthesis) + 16 parentheses = 32 levels
    const text = `${'not ('.repeat(8)}${'('.repeat(16)}isSystem${')'.repeat(24)}`;
    expect(await ids(text)).toEqual([1, 5]);
  });
});

describe('filter text never becomes SQL text', () => {
  async function tableIntact(): Promise<void> {
    const tables = database.prepare(`select name from sqlite_master where type = 'table'`).all() as { name: string }[];
    expect(tables.map((t) => t.name)).toContain('t');
    expect(database.prepare('select count(*) as n from t').get()).toEqual({ n: rows.length });
  }

  it.each([
    ['name = "x\\" or 1=1 --"', 'x" or 1=1 --', []],
    ['name = "\'; drop table t; --"', "'; drop table t; --", []],
    ['name = "a\' OR \'1\'=\'1"', "a' OR '1'='1", []],
    ['name = "/* x */ 1"', '/* x */ 1', []],
    ['name contains "%\' or 1=1; --"', "%' or 1=1; --", []],
    ['name icontains "\\") or (1=1"', '") or (1=1', []],
    ['tags.env = "\') or 1=1 --"', "') or 1=1 --", []],
    ['anyOf(roleAttributes) = "a\') or 1=1 --"', "a') or 1=1 --", []],
    ['name in ["x", "y\\"); drop table t; --"]', 'y"); drop table t; --', []],
    ['name = "O\'Brien"', "O'Brien", [6]],
  ] as Array<[string, string, number[]]>)('%s', async (text, value, expected) => {
    const query = compile(text);
    const { sql, parameters } = query.compile();
    expect(sql).not.toContain(value);
    expect(sql.toLowerCase()).not.toContain('drop');
    expect(sql).not.toContain('1=1');
    expect(parameters).toContain(value);
    expect((await query.execute()).map((r) => r.id)).toEqual(expected);
    await tableIntact();
  });

  it('binds a tag key as a JSON path parameter', async () => {
    const query = compile('tags.--x = "a" or tags.drop_table_t = null');
    const { sql, parameters } = query.compile();
    expect(sql).not.toContain('--x');
    expect(sql).not.toContain('drop_table_t');
    expect(parameters).toEqual(['$."--x"', '$."--x"', 'a', '$."drop_table_t"']);
    expect((await query.execute()).map((r) => r.id)).toEqual(ALL);
    await tableIntact();
  });

  it.each([
    ['name = "a" or 1=1', 15, 'expected a field name, true, false, "not" or "(", found number 1'],
    ['name = "a" or 1 = 1', 15, 'found number 1'],
    ['name = "a" -- comment', 12, 'unexpected character "-"'],
    ['name = "a" /* comment */', 12, 'unexpected character "/"'],
    ['name = "a"; drop table t', 11, 'unexpected character ";"'],
    ['"name" = "a"', 1, 'found string "name"'],
    ['na"me = "a"', 3, 'expected'],
    ['name"; drop table t; -- = 1', 5, 'unterminated string'],
    ["name' = 'a", 5, 'unexpected character "\'"'],
    ['`name` = "a"', 1, 'unexpected character "`"'],
    ['[name] = "a"', 1, 'expected a field name'],
    ['tags.x") or 1=1 -- = "a"', 7, 'found string'],
    ['tags.a"b = "x"', 7, 'found string'],
    ['sqlite_master = "t"', 1, 'unknown field "sqlite_master"'],
    ['t.name = "Alpha"', 1, 'unknown field "t.name"'],
    ['role_attributes = "a"', 1, 'unknown field "role_attributes"'],
    ['name = "a" sort by name; drop table t', 24, 'unexpected character ";"'],
  ])('refuses %j', async (text, pos, fragment) => {
    let err: unknown;
    try {
      const q = parseFilter(text);
      checkQuery(q, symbols, new Set(['name']));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ApiError);
    const apiErr = err as ApiError;
    expect(apiErr.code).toBe('INVALID_FILTER');
    expect(apiErr.message).toContain(`at character ${pos}:`);
    expect(apiErr.message).toContain(fragment);
    await tableIntact();
  });

  it('refuses a hand-built tree naming a column or a crafted tag key', () => {
    const field = (name: string) => ({ kind: 'field' as const, field: { name, pos: 0 }, pos: 0 });
    const value = { kind: 'string' as const, value: 'a', pos: 0 };
    for (const name of ['t.name', 'name; drop table t', 'tags.a"]', 'tags.a.b', 'tags.']) {
      const expr = { kind: 'compare' as const, subject: field(name), op: '=' as const, value, pos: 0 };
      expect(() => compileWhere(expr, symbols, sqliteFlavor)).toThrow(ApiError);
    }
  });

  it('the SQLite flavor refuses a tag key outside the charset even when called directly', () => {
    expect(() => sqliteFlavor.tagString(sql.ref('tags'), 'a"b')).toThrow(/invalid tag key/);
    expect(() => sqliteFlavor.tagIsNull(sql.ref('tags'), 'a.b')).toThrow(/invalid tag key/);
    expect(() => sqliteFlavor.tagBoolean(sql.ref('tags'), '')).toThrow(/invalid tag key/);
  });
});
