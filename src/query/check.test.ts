import { describe, expect, it } from 'vitest';
import type { FilterField, FilterSymbols, ParsedQuery } from './ast.js';
import { checkQuery, compileWhere, parseFilter, parseSort } from './index.js';
import { sqliteFlavor } from '../store/sqlite-flavor.js';
import { apiError, position } from './expect-error.test-support.js';

const fields: FilterField[] = [
  { name: 'id', type: 'string', column: 'id' },
  { name: 'name', type: 'string', column: 'name' },
  { name: 'size', type: 'integer', column: 'size' },
  { name: 'score', type: 'number', column: 'score' },
  { name: 'isSystem', type: 'boolean', column: 'is_system' },
  { name: 'createdAt', type: 'datetime', column: 'created_at' },
  { name: 'roleAttributes', type: 'set', column: 'role_attributes' },
  { name: 'tags', type: 'tags', column: 'tags' },
];
const symbols: FilterSymbols = new Map(fields.map((f) => [f.name, f]));
const sortable: ReadonlySet<string> = new Set(['id', 'name', 'createdAt']);

function check(text: string): ParsedQuery {
  const q = parseFilter(text);
  checkQuery(q, symbols, sortable);
  return q;
}

describe('checkQuery accepts well-typed filters', () => {
  it.each([
    'name = "a"',
    'name != null',
    'name < "m" and name in ["a", "b"] and name between "a" and "c"',
    'name contains "x" or name not icontains "y"',
    'id = "abc"',
    'size = 3 and size > -1.5 and size in [1, 2] and size not between 0 and 10',
    'score >= 0.25',
    'size = null',
    'isSystem',
    'not isSystem',
    'isSystem = true and isSystem != false and isSystem = null',
    'isSystem in [true]',
    'createdAt > datetime(2026-01-02T03:04:05Z)',
    'createdAt < "2026-01-02T03:04:05.5+01:00"',
    'createdAt between "2026-01-01T00:00:00Z" and datetime(2027-01-01T00:00:00Z)',
    'createdAt in [datetime(2026-01-01T00:00:00Z), "2026-01-02T00:00:00Z"]',
    'createdAt = null',
    'anyOf(roleAttributes) = "a"',
    'anyOf(roleAttributes) in ["a", "b"]',
    'anyOf(roleAttributes) contains "x"',
    'allOf(roleAttributes) != "b"',
    'allOf(roleAttributes) icontains "x"',
    'count(roleAttributes) > 2',
    'count(roleAttributes) between 1 and 3',
    'isEmpty(roleAttributes) or not isEmpty(roleAttributes)',
    'tags.env = "prod"',
    'tags.env != "prod"',
    'tags.env icontains "pro"',
    'tags.env in ["a", "b"]',
    'tags.env between "a" and "b"',
    'tags.on = true',
    'tags.on != false',
    'tags.x = null',
    'tags.x != null',
    'tags.my-key_2 = "v"',
    '',
    'true',
    'false',
    'not true',
    'true and name = "a"',
    'true sort by name limit 100',
    'limit none',
    'sort by name desc, createdAt, id skip 5 limit 10',
  ])('%j', (text) => {
    expect(() => check(text)).not.toThrow();
  });
});

describe('checkQuery refuses misuse with INVALID_FILTER naming field and position', () => {
  it.each([
    // unknown and private fields
    ['password = "x"', 1, 'unknown field "password"'],
    ['name2 = "x"', 1, 'unknown field "name2"'],
    ['Name = "x"', 1, 'unknown field "Name"'],
    ['name.first = "x"', 1, 'unknown field "name.first"'],
    ['tagsx = "x"', 1, 'unknown field "tagsx"'],
    ['secret', 1, 'unknown field "secret"'],
    ['isEmpty(hidden)', 9, 'unknown field "hidden"'],
    ['anyOf(hidden) = "a"', 7, 'unknown field "hidden"'],
    ['name = "a" and (size > 1 or bogus = 2)', 29, 'unknown field "bogus"'],
    ['not not (x = 1)', 10, 'unknown field "x"'],
    // set fields must be wrapped
    ['roleAttributes = "a"', 1, 'set field "roleAttributes" must be wrapped: anyOf(roleAttributes), allOf(roleAttributes), count(roleAttributes) or isEmpty(roleAttributes)'],
    ['roleAttributes contains "a"', 1, 'must be wrapped'],
    ['roleAttributes in ["a"]', 1, 'must be wrapped'],
    ['roleAttributes', 1, 'must be wrapped'],
    ['roleAttributes = null', 1, 'must be wrapped'],
    ['anyOf(name) = "a"', 1, 'anyOf(...) takes a set field; "name" is a string field'],
    ['allOf(tags) = "a"', 1, 'allOf(...) takes a set field; "tags" is a tags field'],
    ['count(tags.a) > 1', 1, 'count(...) takes a set field'],
    ['count(size) > 1', 1, 'count(...) takes a set field; "size" is an integer field'],
    ['isEmpty(name)', 1, 'isEmpty(...) takes a set field'],
    ['anyOf(roleAttributes) = null', 25, 'anyOf(roleAttributes) is never null; use isEmpty(roleAttributes)'],
    ['count(roleAttributes) = null', 25, 'count(roleAttributes) is never null'],
    ['anyOf(roleAttributes) > 1', 25, 'anyOf(roleAttributes) (string) is compared with a string, found number 1'],
    ['count(roleAttributes) = "2"', 25, 'count(roleAttributes) (integer) is compared with a number, found string "2"'],
    ['count(roleAttributes) contains "2"', 23, '"contains" needs a string field'],
    // tags
    ['tags = "x"', 1, 'field "tags" is compared by key: tags.<key>'],
    ['tags', 1, 'compared by key'],
    ['tags.a.b = "x"', 6, 'invalid tag key "a.b"'],
    ['tags.x = 1', 10, 'tag "tags.x" is compared with a string, true, false or null, found number 1'],
    ['tags.x = datetime(2026-01-01T00:00:00Z)', 10, 'found datetime(2026-01-01T00:00:00.000Z)'],
    ['tags.x > true', 8, '">" is not supported on tag "tags.x" with a boolean; use = or !='],
    ['tags.x in ["a", true]', 17, 'is compared with a string here, found true'],
    ['tags.x between false and true', 16, 'a string here'],
    ['tags.x between "a" and true', 24, 'is compared with a string here, found true'],
    ['tags.x contains true', 17, '"contains" takes a string, found true'],
    ['tags.x', 1, 'tag "tags.x" needs a comparison, e.g. tags.x = true'],
    // literal types
    ['name = 1', 8, '"name" (string) is compared with a string, found number 1'],
    ['name = true', 8, 'found true'],
    ['name = datetime(2026-01-01T00:00:00Z)', 8, 'found datetime('],
    ['name in ["a", 1]', 15, 'found number 1'],
    ['name between "a" and 2', 22, 'found number 2'],
    ['size = "1"', 8, '"size" (integer) is compared with a number, found string "1"'],
    ['score > true', 9, '"score" (number) is compared with a number'],
    ['isSystem = 1', 12, '"isSystem" (boolean) is compared with true or false, found number 1'],
    ['isSystem = "true"', 12, 'found string "true"'],
    ['createdAt = 5', 13, '"createdAt" (datetime) is compared with datetime(...) or an RFC 3339 date-time string, found number 5'],
    ['createdAt = "yesterday"', 13, 'an RFC 3339 date-time with an offset'],
    ['createdAt > "2026-01-01"', 13, 'an RFC 3339 date-time with an offset'],
    ['createdAt in ["2026-01-01T00:00:00"]', 15, 'an RFC 3339 date-time with an offset'],
    // operators
    ['isSystem < true', 10, '"<" is not supported on "isSystem" (boolean); use = or !='],
    ['isSystem >= false', 10, '">=" is not supported'],
    ['isSystem between false and true', 10, '"between" is not supported on "isSystem" (boolean)'],
    ['isSystem not between false and true', 10, '"between" is not supported'],
    ['isSystem contains "t"', 10, '"contains" needs a string field, found "isSystem" (boolean)'],
    ['size icontains "1"', 6, '"icontains" needs a string field, found "size" (integer)'],
    ['createdAt contains "2026"', 11, '"contains" needs a string field'],
    ['name contains 1', 15, '"contains" takes a string, found number 1'],
    ['name contains null', 15, '"contains" takes a string, found null'],
    ['name < null', 6, 'null can only be compared with = or !=, found "<"'],
    ['name between null and "b"', 14, 'null can only be compared with = or !='],
    ['name in [null]', 10, 'null is not allowed in a list'],
    // bare names
    ['name', 1, 'field "name" is a string field, not a boolean: it needs a comparison'],
    ['size and isSystem', 1, '"size" is an integer field, not a boolean'],
  ])('%j → character %i', (text, pos, fragment) => {
    const err = apiError(() => check(text));
    expect(err.code).toBe('INVALID_FILTER');
    expect(err.status).toBe(400);
    expect(position(err)).toBe(pos);
    expect(err.cause).toMatchObject({ field: 'filter', value: text });
    expect((err.cause as { reason: string }).reason).toContain(fragment);
  });

  it.each([
    ['count(roleAttributes) = null', 'at character 25: count(roleAttributes) is never null'],
    ['allOf(roleAttributes) != null', 'at character 26: allOf(roleAttributes) is never null; use isEmpty(roleAttributes)'],
    ['isSystem between false and true', 'at character 10: "between" is not supported on "isSystem" (boolean); use = or !='],
    ['tags.on >= false', 'at character 9: ">=" is not supported on tag "tags.on" with a boolean; use = or !='],
  ])('states the whole reason: %j', (text, reason) => {
    expect((apiError(() => check(text)).cause as { reason: string }).reason).toBe(reason);
  });

  it('names no filterable fields when a resource has none', () => {
    const err = apiError(() => checkQuery(parseFilter('name = "a"'), new Map(), sortable));
    expect(err.message).toBe('invalid filter at character 1: unknown field "name"');
  });

  it('lists the filterable fields when a name is unknown', () => {
    const err = apiError(() => check('nope = 1'));
    expect(err.message).toContain('(filterable fields: createdAt, id, isSystem, name, roleAttributes, score, size, tags)');
  });

  it('compileWhere checks an unchecked tree too', () => {
    const q = parseFilter('password = "x"');
    const err = apiError(() => compileWhere(q.where!, symbols, sqliteFlavor));
    expect(err.code).toBe('INVALID_FILTER');
    expect(err.message).toMatch(/^invalid filter at character 1: /);
    expect(err.cause).toMatchObject({ field: 'filter' });
    expect(position(err)).toBe(1);
    expect(err.message).toContain('unknown field "password"');
  });

  it('compileWhere refuses a tree the compiler could translate but the checker does not allow', () => {
    const q = parseFilter('name = 1');
    const err = apiError(() => compileWhere(q.where!, symbols, sqliteFlavor));
    expect(err.code).toBe('INVALID_FILTER');
    expect(position(err)).toBe(8);
  });

  it('passes errors other than filter problems through unchanged', () => {
    const failure = new Error('flavor failed');
    const failing = {
      ...sqliteFlavor,
      contains: () => {
        throw failure;
      },
    };
    expect(() => compileWhere(parseFilter('name contains "a"').where!, symbols, failing)).toThrow(failure);
  });
});

describe('checkQuery refuses bad sort keys with INVALID_SORT_IDENTIFIER', () => {
  it.each([
    ['sort by secret', 9, 'unknown sort field "secret"'],
    ['sort by name, size desc', 15, 'field "size" cannot be sorted on'],
    ['name = "a" sort by tags.env', 20, 'unknown sort field "tags.env"'],
    ['sort by roleAttributes', 9, 'field "roleAttributes" cannot be sorted on'],
  ])('in the filter: %j → character %i', (text, pos, fragment) => {
    const err = apiError(() => check(text));
    expect(err.code).toBe('INVALID_SORT_IDENTIFIER');
    expect(err.status).toBe(400);
    expect(position(err)).toBe(pos);
    expect(err.cause).toMatchObject({ field: 'filter', value: text });
    expect((err.cause as { reason: string }).reason).toContain(fragment);
    expect(err.message).toContain('(sortable fields: createdAt, id, name)');
  });

  it('in the sort parameter', () => {
    const q: ParsedQuery = { sort: parseSort('name desc,score') };
    const err = apiError(() => checkQuery(q, symbols, sortable));
    expect(err.code).toBe('INVALID_SORT_IDENTIFIER');
    expect(position(err)).toBe(11);
    expect(err.cause).toMatchObject({ field: 'sort', value: 'name desc,score' });
    expect((err.cause as { reason: string }).reason).toContain('field "score" cannot be sorted on');
  });

  it('names no sortable fields when a resource has none', () => {
    const err = apiError(() => checkQuery({ sort: parseSort('name') }, symbols, new Set()));
    expect(err.message).toBe('invalid sort at character 1: field "name" cannot be sorted on');
  });

  it('for keys built in code', () => {
    const err = apiError(() => checkQuery({ sort: [{ field: 'nope', direction: 'asc' }] }, symbols, sortable));
    expect(err.code).toBe('INVALID_SORT_IDENTIFIER');
    expect(err.cause).toMatchObject({ field: 'sort', value: 'nope' });
  });

  it('checks the condition before the sort', () => {
    const err = apiError(() => check('bogus = 1 sort by secret'));
    expect(err.code).toBe('INVALID_FILTER');
  });
});
