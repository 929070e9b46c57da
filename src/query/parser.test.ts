import { describe, expect, it } from 'vitest';
import type { Expr, Literal, Subject } from './ast.js';
import { MAX_ARRAY_ITEMS, MAX_DEPTH, MAX_PREDICATES, MAX_VALUES, normaliseDateTime, parseFilter, parseSort } from './index.js';
import { apiError, position } from './expect-error.test-support.js';

// A compact rendering of the tree, so expectations read like the filter they describe.
function lit(l: Literal): string {
  switch (l.kind) {
    case 'string':
      return JSON.stringify(l.value);
    case 'number':
      return String(l.value);
    case 'boolean':
      return String(l.value);
    case 'null':
      return 'null';
    case 'datetime':
      return `dt:${l.value}`;
  }
}

function subj(s: Subject): string {
  return s.kind === 'field' ? s.field.name : `${s.kind}(${s.field.name})`;
}

function show(e: Expr): string {
  switch (e.kind) {
    case 'and':
    case 'or':
      return `(${e.kind} ${e.operands.map(show).join(' ')})`;
    case 'not':
      return `(not ${show(e.operand)})`;
    case 'compare':
      return `(${e.op} ${subj(e.subject)} ${lit(e.value)})`;
    case 'in':
      return `(${e.negated ? 'not-in' : 'in'} ${subj(e.subject)} [${e.values.map(lit).join(' ')}])`;
    case 'between':
      return `(${e.negated ? 'not-between' : 'between'} ${subj(e.subject)} ${lit(e.low)} ${lit(e.high)})`;
    case 'contains': {
      const op = `${e.negated ? 'not-' : ''}${e.caseInsensitive ? 'icontains' : 'contains'}`;
      return `(${op} ${subj(e.subject)} ${lit(e.value)})`;
    }
    case 'isTrue':
      return e.field.name;
    case 'isEmpty':
      return `(isEmpty ${e.field.name})`;
    case 'constant':
      return `#${e.value}`;
  }
}

function where(text: string): string {
  const q = parseFilter(text);
  if (q.where === undefined) throw new Error(`no condition parsed from ${text}`);
  return show(q.where);
}

describe('parseFilter: operators and literals', () => {
  it.each([
    ['name = "a"', '(= name "a")'],
    ['name != "a"', '(!= name "a")'],
    ['size < 3', '(< size 3)'],
    ['size <= 3', '(<= size 3)'],
    ['size > 3', '(> size 3)'],
    ['size >= 3', '(>= size 3)'],
    ['size=3', '(= size 3)'],
    ['score = -5', '(= score -5)'],
    ['score = 1.5', '(= score 1.5)'],
    ['score = -0.25', '(= score -0.25)'],
    ['score = 007', '(= score 7)'],
    ['isSystem = true', '(= isSystem true)'],
    ['isSystem = FALSE', '(= isSystem false)'],
    ['name = null', '(= name null)'],
    ['name != NULL', '(!= name null)'],
    ['createdAt > datetime(2026-01-02T03:04:05Z)', '(> createdAt dt:2026-01-02T03:04:05.000Z)'],
    ['createdAt > DateTime( 2026-01-02t03:04:05.1234+02:30 )', '(> createdAt dt:2026-01-02T00:34:05.123Z)'],
    ['createdAt > datetime (2026-01-02T03:04:05Z)', '(> createdAt dt:2026-01-02T03:04:05.000Z)'],
    ['createdAt = "2026-01-02T03:04:05Z"', '(= createdAt "2026-01-02T03:04:05Z")'],
    // "datetime" not followed by "(" is a name like any other
    ['datetime = 1', '(= datetime 1)'],
    ['name in ["a", "b"]', '(in name ["a" "b"])'],
    ['size in [1,2,3]', '(in size [1 2 3])'],
    ['size not in [1, 2]', '(not-in size [1 2])'],
    ['name in []', '(in name [])'],
    ['createdAt in [datetime(2026-01-01T00:00:00Z)]', '(in createdAt [dt:2026-01-01T00:00:00.000Z])'],
    ['size between 1 and 5', '(between size 1 5)'],
    ['size not between 1 and 5', '(not-between size 1 5)'],
    ['name contains "x"', '(contains name "x")'],
    ['name not contains "x"', '(not-contains name "x")'],
    ['name icontains "x"', '(icontains name "x")'],
    ['name not icontains "x"', '(not-icontains name "x")'],
    ['isSystem', 'isSystem'],
    ['not isSystem', '(not isSystem)'],
    ['anyOf(roleAttributes) = "a"', '(= anyOf(roleAttributes) "a")'],
    ['anyOf(roleAttributes) in ["a", "b"]', '(in anyOf(roleAttributes) ["a" "b"])'],
    ['anyOf(roleAttributes) contains "x"', '(contains anyOf(roleAttributes) "x")'],
    ['allOf(roleAttributes) != "b"', '(!= allOf(roleAttributes) "b")'],
    ['count(roleAttributes) > 2', '(> count(roleAttributes) 2)'],
    ['count(roleAttributes) between 1 and 3', '(between count(roleAttributes) 1 3)'],
    ['isEmpty(roleAttributes)', '(isEmpty roleAttributes)'],
    ['not isEmpty(roleAttributes)', '(not (isEmpty roleAttributes))'],
    ['ANYOF ( roleAttributes ) = "a"', '(= anyOf(roleAttributes) "a")'],
    ['IsEmpty(roleAttributes)', '(isEmpty roleAttributes)'],
    ['tags.env = "prod"', '(= tags.env "prod")'],
    ['tags.my-key_1 = true', '(= tags.my-key_1 true)'],
    ['tags.9 != null', '(!= tags.9 null)'],
  ])('%s', (text, expected) => {
    expect(where(text)).toBe(expected);
  });
});

describe('parseFilter: precedence, parentheses, keyword case', () => {
  it.each([
    ['a and b or c', '(or (and a b) c)'],
    ['a or b and c', '(or a (and b c))'],
    ['not a and b', '(and (not a) b)'],
    ['not a or not b', '(or (not a) (not b))'],
    ['a and not b or c and d', '(or (and a (not b)) (and c d))'],
    ['not (a or b)', '(not (or a b))'],
    ['a and (b or c)', '(and a (or b c))'],
    ['((a))', 'a'],
    ['a and b and c', '(and a b c)'],
    ['a or b or c or d', '(or a b c d)'],
    ['not not a', '(not (not a))'],
    ['A AND B OR NOT C', '(or (and A B) (not C))'],
    ['x NOT IN ["a"] And y Between 1 AnD 2', '(and (not-in x ["a"]) (between y 1 2))'],
    ['x ICONTAINS "a" or x NOT CONTAINS "b"', '(or (icontains x "a") (not-contains x "b"))'],
    ['x between 1 and 2 and y', '(and (between x 1 2) y)'],
    ['name="a"and(b)', '(and (= name "a") b)'],
    ['\n\tname\r\n=\t"a" ', '(= name "a")'],
  ])('%s', (text, expected) => {
    expect(where(text)).toBe(expected);
  });

  it('keeps field names case-sensitive', () => {
    expect(where('Name = "a"')).toBe('(= Name "a")');
    expect(where('Zeta_9 = "a" and _z')).toBe('(and (= Zeta_9 "a") _z)');
  });
});

// behaviour.md §3: `true` (or `false`) alone is a whole condition; as a primary it also combines.
describe('parseFilter: true and false as conditions', () => {
  it.each([
    ['true', '#true'],
    ['false', '#false'],
    ['TRUE', '#true'],
    ['False', '#false'],
    [' true ', '#true'],
    ['(true)', '#true'],
    ['not true', '(not #true)'],
    ['not false', '(not #false)'],
    ['true and name = "x"', '(and #true (= name "x"))'],
    ['name = "x" or false', '(or (= name "x") #false)'],
    ['isSystem and true or false', '(or (and isSystem #true) #false)'],
    ['not (true and isSystem)', '(not (and #true isSystem))'],
  ])('%j → %s', (text, expected) => {
    expect(where(text)).toBe(expected);
  });

  it('keeps the position of the literal', () => {
    expect(parseFilter('  true').where).toEqual({ kind: 'constant', value: true, pos: 2 });
  });

  it.each([
    ['true sort by name limit 100', true, { sort: [{ field: 'name', direction: 'asc' }], limit: 100 }],
    ['true limit none', true, { limit: 'none' }],
    ['false skip 5', false, { skip: 5 }],
    ['TRUE SORT BY name DESC', true, { sort: [{ field: 'name', direction: 'desc' }] }],
  ] as const)('%j takes the trailing clauses', (text, value, clauses) => {
    const q = parseFilter(text);
    expect(q.where).toMatchObject({ kind: 'constant', value });
    expect(q).toMatchObject(clauses);
  });

  it.each([
    ['true = true', 6, 'expected "and", "or", "sort by", "skip", "limit" or end of filter, found "="'],
    ['true isSystem', 6, 'found "isSystem"'],
    ['true true', 6, 'found keyword "true"'],
    ['null', 1, 'expected a field name, true, false, "not" or "(", found keyword "null"'],
    ['true and', 9, 'expected a field name, true, false, "not" or "(", found end of filter'],
    ['anyOf(true) = "a"', 7, 'expected a field name inside anyOf(...), found keyword "true"'],
    ['sort by true', 9, 'expected a field name to sort by, found keyword "true"'],
  ])('refuses %j at character %i', (text, pos, fragment) => {
    const err = apiError(() => parseFilter(text));
    expect(err.code).toBe('INVALID_FILTER');
    expect(position(err)).toBe(pos);
    expect((err.cause as { reason: string }).reason).toContain(fragment);
  });
});

describe('parseFilter: number literals', () => {
  it.each([
    ['3', 3, true],
    ['-0', -0, true],
    ['1.5', 1.5, false],
    ['2.0', 2, false],
  ])('%s', (source, value, integer) => {
    expect(parseFilter(`size = ${source}`).where).toMatchObject({ value: { kind: 'number', value, integer } });
  });
});

describe('parseFilter: string escapes', () => {
  it.each([
    ['"plain"', 'plain'],
    ['"a\\"b"', 'a"b'],
    ['"back\\\\slash"', 'back\\slash'],
    ['"l1\\nl2\\rl3\\tend"', 'l1\nl2\rl3\tend'],
    ['"\\\\\\""', '\\"'],
    ['""', ''],
    ['"ünïcødé ✓"', 'ünïcødé ✓'],
    ['"it\'s"', "it's"],
    ['"and or not ) ("', 'and or not ) ('],
  ])('%s', (source, value) => {
    const q = parseFilter(`name = ${source}`);
    expect(q.where).toMatchObject({ kind: 'compare', value: { kind: 'string', value } });
  });
});

describe('parseFilter: trailing clauses', () => {
  it.each([
    ['', {}],
    ['   \n\t', {}],
    ['limit none', { limit: 'none' }],
    ['LIMIT NONE', { limit: 'none' }],
    ['limit 0', { limit: 0 }],
    ['skip 5', { skip: 5 }],
    ['skip 2147483647', { skip: 2147483647 }],
    // taken as written; the list brings them within its bounds
    ['skip -3', { skip: -3 }],
    ['limit -1', { limit: -1 }],
    ['skip 99999999999 limit 2147483648', { skip: 99999999999, limit: 2147483648 }],
    ['limit 99999999999999999999', { limit: 1e20 }],
    ['sort by name', { sort: [{ field: 'name', direction: 'asc' }] }],
    [
      'SORT BY name DESC, createdAt asc, id skip 10 limit 5',
      {
        sort: [
          { field: 'name', direction: 'desc' },
          { field: 'createdAt', direction: 'asc' },
          { field: 'id', direction: 'asc' },
        ],
        skip: 10,
        limit: 5,
      },
    ],
    ['sort by name skip 0', { sort: [{ field: 'name', direction: 'asc' }], skip: 0 }],
    ['skip 3 limit none', { skip: 3, limit: 'none' }],
  ])('%j', (text, expected) => {
    const { where: w, text: source, ...rest } = parseFilter(text);
    expect(w).toBeUndefined();
    expect(source).toBe(text);
    expect(rest).toMatchObject(expected);
    for (const k of ['sort', 'skip', 'limit'] as const) {
      if (!(k in expected)) expect(rest[k]).toBeUndefined();
    }
  });

  it('follows a condition', () => {
    const q = parseFilter('name = "a" or isSystem sort by name desc skip 20 limit 10');
    expect(show(q.where!)).toBe('(or (= name "a") isSystem)');
    expect(q.sort).toMatchObject([{ field: 'name', direction: 'desc' }]);
    expect(q.skip).toBe(20);
    expect(q.limit).toBe(10);
  });

  it('says the clauses come in order only when a clause word is out of place', () => {
    const reason = (text: string) => (apiError(() => parseFilter(text)).cause as { reason: string }).reason;
    expect(reason('limit 5 name = "a"')).toBe('at character 9: expected end of filter, found "name"');
    expect(reason('limit 1 limit 2')).toBe(
      'at character 9: expected end of filter, found keyword "limit" (clauses come once each, in the order sort by, skip, limit)',
    );
    expect(reason('skip 1 sort by x')).toMatch(/found keyword "sort" \(clauses come once each/);
  });

  it('records where each sort key was written', () => {
    const text = 'x sort by name, id desc';
    expect(parseFilter(text).sort).toEqual([
      { field: 'name', direction: 'asc', origin: { param: 'filter', text, pos: 10 } },
      { field: 'id', direction: 'desc', origin: { param: 'filter', text, pos: 16 } },
    ]);
  });
});

describe('parseFilter: errors name the character position (1-based)', () => {
  it.each([
    // lexical
    ['name = "abc', 8, 'unterminated string'],
    ['name = "a\\x"', 10, 'invalid escape \\x'],
    ['name = "a\\', 10, 'invalid escape \\ at the end of the text in string'],
    ['name ! "a"', 6, 'unexpected "!"'],
    ["name = 'a'", 8, 'unexpected character "\'"'],
    ['name = 1.', 8, 'invalid number "1."'],
    ['name = 12abc', 8, 'invalid number "12abc"'],
    ['name = 12abc and x', 8, 'invalid number "12abc"'],
    ['name = 1.2.3', 8, 'invalid number "1.2.3"'],
    ['name = .5', 8, 'unexpected character "."'],
    ['name = 99999999999999999999', 8, 'out of range'],
    ['name = - 1', 8, 'unexpected character "-"'],
    ['name = "a" ; x', 12, 'unexpected character ";"'],
    ['name ~ 1', 6, 'unexpected character "~"'],
    ['é = 1', 1, 'unexpected character "é"'],
    ['[x] = 1', 1, 'expected a field name, true, false, "not" or "(", found "["'],
    ['tags. = "a"', 6, 'expected a name after "." in "tags."'],
    ['createdAt = datetime(2026-01-02T03:04:05Z', 13, 'unterminated datetime'],
    ['createdAt = datetime(2026-13-02T03:04:05Z)', 22, 'invalid datetime "2026-13-02T03:04:05Z"'],
    ['createdAt = datetime(2026-01-02T03:04:05)', 22, 'invalid datetime'],
    ['createdAt = datetime( yesterday )', 23, 'invalid datetime "yesterday"'],
    ['createdAt = datetime(  yesterday )', 24, 'invalid datetime "yesterday"'],
    // syntax
    ['name =', 7, 'expected a value after "=" (a string, number, true, false, null or datetime(...)), found end of filter'],
    ['name == "a"', 7, 'expected a value after "="'],
    ['name = and', 8, 'found keyword "and"'],
    ['name = ["a"]', 8, 'a list [...] is only allowed after "in"'],
    ['name = foo', 8, 'expected a value after "="'],
    ['(name = "a"', 12, 'expected ")" to close the "(" at character 1, found end of filter'],
    ['a and (b or (c)', 16, 'to close the "(" at character 7'],
    ['name = "a")', 11, 'expected "and", "or", "sort by", "skip", "limit" or end of filter, found ")"'],
    ['name = "a" name = "b"', 12, 'expected "and", "or"'],
    ['and = 1', 1, 'expected a field name, true, false, "not" or "(", found keyword "and"'],
    ['= 1', 1, 'expected a field name'],
    ['"name" = "a"', 1, 'expected a field name, true, false, "not" or "(", found string "name"'],
    ['datetime(2026-01-01T00:00:00Z) = 1', 1, 'expected a field name, true, false, "not" or "(", found "datetime(2026-01-01T00:00:00Z)"'],
    ['name = "a" and', 15, 'expected a field name, true, false, "not" or "(", found end of filter'],
    ['name = "a" or or b', 15, 'found keyword "or"'],
    ['not', 4, 'found end of filter'],
    ['()', 2, 'expected a field name'],
    ['name in "a"', 9, 'expected "[" to start the list after "in"'],
    ['name in ["a" "b"]', 14, 'expected "," or "]" in the list opened at character 9'],
    ['name in ["a",]', 14, 'expected a list item'],
    ['name in ["a"', 13, 'expected "," or "]"'],
    ['name in [null, ["a"]]', 16, 'only allowed after "in"'],
    ['name not = "a"', 10, 'expected "in", "between", "contains" or "icontains" after "not"'],
    ['name not', 9, 'after "not", found end of filter'],
    ['size between 1', 15, 'expected "and" between the bounds of "between"'],
    ['size between 1 or 2', 16, 'expected "and" between the bounds'],
    ['size between and 2', 14, 'expected a lower bound after "between"'],
    ['size between 1 and', 19, 'expected an upper bound after "and"'],
    ['name contains', 14, 'expected a value after "contains"'],
    ['name icontains', 15, 'expected a value after "icontains"'],
    ['foo(x) = 1', 1, 'unknown function "foo" (expected anyOf, allOf, count or isEmpty)'],
    ['anyOf(roleAttributes)', 22, 'expected a comparison after anyOf(roleAttributes), found end of filter'],
    ['count(roleAttributes) and x', 23, 'expected a comparison after count(roleAttributes)'],
    ['anyOf(roleAttributes = "a"', 22, 'expected ")" after anyOf(roleAttributes'],
    ['anyOf() = "a"', 7, 'expected a field name inside anyOf(...)'],
    ['isEmpty("x")', 9, 'expected a field name inside isEmpty(...)'],
    // trailing clauses
    ['limit 1.5', 7, 'expected an integer or "none" after "limit", found number 1.5'],
    ['limit -1.0', 7, 'expected an integer or "none" after "limit"'],
    ['limit all', 7, 'after "limit", found "all"'],
    ['limit', 6, 'found end of filter'],
    ['skip x', 6, 'expected an integer after "skip", found "x"'],
    ['skip 0.5', 6, 'expected an integer after "skip"'],
    ['skip none', 6, 'expected an integer after "skip", found "none"'],
    ['limit 5 skip 2', 9, 'expected end of filter, found keyword "skip" (clauses come once each, in the order sort by, skip, limit)'],
    ['skip 1 sort by name', 8, 'in the order sort by, skip, limit'],
    ['limit 1 limit 2', 9, 'expected end of filter, found keyword "limit"'],
    ['skip 1 skip 2', 8, 'expected "limit" or end of filter'],
    ['limit 5 name = "a"', 9, 'expected end of filter, found "name"'],
    ['sort name', 6, 'expected "by" after "sort"'],
    ['sort by', 8, 'expected a field name to sort by, found end of filter'],
    ['sort by name,', 14, 'expected a field name to sort by'],
    ['sort by , name', 9, 'expected a field name to sort by, found ","'],
    ['sort by name up', 14, 'expected ",", "skip", "limit" or end of filter, found "up"'],
    ['sort by name desc asc', 19, 'found "asc"'],
    ['sort by limit', 9, 'expected a field name to sort by, found keyword "limit"'],
    ['name = "a" sort by name sort by id', 25, 'in the order sort by, skip, limit'],
  ])('%j → character %i', (text, pos, fragment) => {
    const err = apiError(() => parseFilter(text));
    expect(err.code).toBe('INVALID_FILTER');
    expect(err.status).toBe(400);
    expect(position(err)).toBe(pos);
    expect(err.message).toBe(`invalid filter at character ${pos}: ${(err.cause as { reason: string }).reason.replace(/^at character \d+: /, '')}`);
    expect(err.cause).toMatchObject({ field: 'filter', value: text });
    expect((err.cause as { reason: string }).reason).toContain(fragment);
  });
});

describe('parseFilter: bounds', () => {
  const nested = (n: number) => `${'('.repeat(n)}a${')'.repeat(n)}`;

  it(`accepts ${MAX_DEPTH} levels of nesting and refuses one more`, () => {
    expect(where(nested(MAX_DEPTH))).toBe('a');
    const err = apiError(() => parseFilter(nested(MAX_DEPTH + 1)));
    expect(err.code).toBe('INVALID_FILTER');
    expect(position(err)).toBe(MAX_DEPTH + 1);
    expect(err.message).toContain('nested too deeply');
  });

  it('counts the depth of nesting, not the number of parentheses', () => {
    const groups = Array.from({ length: MAX_DEPTH * 2 }, (_, i) => `(x${i})`).join(' and ');
    expect(where(groups)).toMatch(/^\(and x0 x1 /);
    expect(where(`${'not (a) and '.repeat(MAX_DEPTH)}b`)).toMatch(/^\(and \(not a\)/);
  });

  it('counts "not" towards the nesting depth', () => {
    expect(where(`${'not '.repeat(MAX_DEPTH)}a`)).toMatch(/^\(not /);
    const err = apiError(() => parseFilter(`${'not '.repeat(MAX_DEPTH + 1)}a`));
    expect(position(err)).toBe(MAX_DEPTH * 4 + 1);
  });

  it('refuses very deep nesting with INVALID_FILTER, not a stack overflow', () => {
    for (const text of [nested(100_000), `${'not '.repeat(100_000)}a`, '('.repeat(200_000)]) {
      expect(apiError(() => parseFilter(text)).code).toBe('INVALID_FILTER');
    }
  });

  it(`accepts lists of ${MAX_ARRAY_ITEMS} items and refuses one more`, () => {
    const items = (n: number) => Array.from({ length: n }, (_, i) => String(i)).join(',');
    const q = parseFilter(`size in [${items(MAX_ARRAY_ITEMS)}]`);
    expect(q.where).toMatchObject({ kind: 'in' });
    expect((q.where as { values: unknown[] }).values).toHaveLength(MAX_ARRAY_ITEMS);
    const err = apiError(() => parseFilter(`size in [${items(MAX_ARRAY_ITEMS + 1)}]`));
    expect(err.code).toBe('INVALID_FILTER');
    expect(err.message).toContain('list has too many items');
  });

  it(`accepts ${MAX_PREDICATES} conditions and refuses one more`, () => {
    const chain = (n: number) => Array.from({ length: n }, (_, i) => `size = ${i}`).join(' or ');
    const q = parseFilter(chain(MAX_PREDICATES));
    expect(q.where).toMatchObject({ kind: 'or' });
    expect((q.where as { operands: unknown[] }).operands).toHaveLength(MAX_PREDICATES);
    const err = apiError(() => parseFilter(chain(MAX_PREDICATES + 1)));
    expect(err.message).toContain('too many conditions');
  });

  it('counts isEmpty(...) as a condition', () => {
    const chain = (n: number) => Array.from({ length: n }, () => 'isEmpty(roleAttributes)').join(' or ');
    expect((parseFilter(chain(MAX_PREDICATES)).where as { operands: unknown[] }).operands).toHaveLength(MAX_PREDICATES);
    const err = apiError(() => parseFilter(chain(MAX_PREDICATES + 1)));
    expect(err.message).toContain(`filter has too many conditions (at most ${MAX_PREDICATES})`);
    expect(position(err)).toBe(MAX_PREDICATES * 'isEmpty(roleAttributes) or '.length + 1);
  });

  it('counts true and false as conditions', () => {
    const chain = (n: number) => Array.from({ length: n }, (_, i) => (i % 2 === 0 ? 'true' : 'false')).join(' or ');
    expect((parseFilter(chain(MAX_PREDICATES)).where as { operands: unknown[] }).operands).toHaveLength(MAX_PREDICATES);
    const text = chain(MAX_PREDICATES + 1);
    const err = apiError(() => parseFilter(text));
    expect(err.message).toContain(`filter has too many conditions (at most ${MAX_PREDICATES})`);
    expect(position(err)).toBe(text.lastIndexOf(' or ') + ' or '.length + 1);
  });

  it(`accepts ${MAX_VALUES} literal values and refuses one more`, () => {
    // Lists of at most MAX_ARRAY_ITEMS items, so only the total of values is over a bound.
    const lists = (n: number) => {
      const out: string[] = [];
      for (let left = n; left > 0; left -= MAX_ARRAY_ITEMS) {
        const items = Array.from({ length: Math.min(left, MAX_ARRAY_ITEMS) }, (_, i) => String(i));
        out.push(`size in [${items.join(',')}]`);
      }
      return out.join(' or ');
    };
    expect(parseFilter(lists(MAX_VALUES)).where).toMatchObject({ kind: 'or' });
    const text = lists(MAX_VALUES + 1);
    const err = apiError(() => parseFilter(text));
    expect(err.message).toContain(`filter has too many values (at most ${MAX_VALUES})`);
    expect(position(err)).toBe(text.lastIndexOf('[0]') + 2);
  });

  it(`accepts ${MAX_ARRAY_ITEMS} sort fields and refuses one more`, () => {
    const sortBy = (n: number) => `sort by ${Array.from({ length: n }, (_, i) => `f${i}`).join(', ')}`;
    expect(parseFilter(sortBy(MAX_ARRAY_ITEMS)).sort).toHaveLength(MAX_ARRAY_ITEMS);
    const text = sortBy(MAX_ARRAY_ITEMS + 1);
    const err = apiError(() => parseFilter(text));
    expect(err.message).toContain(`too many sort fields (at most ${MAX_ARRAY_ITEMS})`);
    expect(position(err)).toBe(text.indexOf(`f${MAX_ARRAY_ITEMS}`) + 1);
    expect(apiError(() => parseSort(text.slice('sort by '.length))).code).toBe('INVALID_SORT_IDENTIFIER');
  });

  it('keeps long and/or chains flat', () => {
    const q = parseFilter(Array.from({ length: 500 }, () => 'a').join(' and '));
    expect(q.where).toMatchObject({ kind: 'and' });
    expect((q.where as { operands: unknown[] }).operands).toHaveLength(500);
  });
});

describe('parseSort (the sort query parameter)', () => {
  it.each([
    ['name desc,createdAt', [{ field: 'name', direction: 'desc' }, { field: 'createdAt', direction: 'asc' }]],
    ['name', [{ field: 'name', direction: 'asc' }]],
    [' name ASC , tags.env DESC ', [{ field: 'name', direction: 'asc' }, { field: 'tags.env', direction: 'desc' }]],
    ['a,b,c', ['a', 'b', 'c'].map((field) => ({ field, direction: 'asc' }))],
    ['', []],
    ['   ', []],
  ])('%j', (text, expected) => {
    expect(parseSort(text)).toMatchObject(expected);
  });

  it('records the origin of each key', () => {
    expect(parseSort('name desc, id')[1]!.origin).toEqual({ param: 'sort', text: 'name desc, id', pos: 11 });
  });

  it.each([
    ['name up', 6, 'expected "asc", "desc", "," or end of sort, found "up"'],
    ['name desc desc', 11, 'expected "," or end of sort, found "desc"'],
    ['name,,createdAt', 6, 'expected a field name to sort by, found ","'],
    ['name,', 6, 'expected a field name to sort by, found end of sort'],
    [',name', 1, 'expected a field name to sort by, found ","'],
    ['"name"', 1, 'found string "name"'],
    ['name;drop table t', 5, 'unexpected character ";"'],
    ['sort by name', 1, 'expected a field name to sort by, found keyword "sort"'],
    ['name by', 6, 'expected "asc", "desc", "," or end of sort, found "by"'],
    ['limit', 1, 'found keyword "limit"'],
    ['name desc limit 5', 11, 'found keyword "limit"'],
  ])('%j → character %i', (text, pos, fragment) => {
    const err = apiError(() => parseSort(text));
    expect(err.code).toBe('INVALID_SORT_IDENTIFIER');
    expect(err.status).toBe(400);
    expect(position(err)).toBe(pos);
    expect(err.message).toMatch(/^invalid sort at character \d+: /);
    expect(err.cause).toMatchObject({ field: 'sort', value: text });
    expect((err.cause as { reason: string }).reason).toContain(fragment);
  });
});

describe('normaliseDateTime', () => {
  it.each([
    ['2026-01-02T03:04:05Z', '2026-01-02T03:04:05.000Z'],
    ['2026-01-02T03:04:05.678Z', '2026-01-02T03:04:05.678Z'],
    ['2026-01-02T03:04:05.6Z', '2026-01-02T03:04:05.600Z'],
    ['2026-01-02T03:04:05.123456789Z', '2026-01-02T03:04:05.123Z'],
    ['2026-01-02t03:04:05z', '2026-01-02T03:04:05.000Z'],
    ['2026-01-02T03:04:05+02:00', '2026-01-02T01:04:05.000Z'],
    ['2026-01-01T00:30:00+01:00', '2025-12-31T23:30:00.000Z'],
    ['2025-12-31T23:30:00-01:30', '2026-01-01T01:00:00.000Z'],
    ['2024-02-29T00:00:00Z', '2024-02-29T00:00:00.000Z'],
    ['0050-06-01T00:00:00Z', '0050-06-01T00:00:00.000Z'],
    // leap years: every 4th, not every 100th, but every 400th
    ['2000-02-29T00:00:00Z', '2000-02-29T00:00:00.000Z'],
    // the largest field values
    ['2026-12-31T23:59:59Z', '2026-12-31T23:59:59.000Z'],
    ['2026-01-01T23:59:59+23:59', '2026-01-01T00:00:59.000Z'],
    ['2026-01-01T00:00:00-00:59', '2026-01-01T00:59:00.000Z'],
  ])('%s → %s', (input, output) => {
    expect(normaliseDateTime(input)).toBe(output);
  });

  it.each([
    '2026-01-02T03:04:05',
    '2026-01-02',
    '2026-01-02 03:04:05Z',
    '2026-13-01T00:00:00Z',
    '2026-02-29T00:00:00Z',
    '2026-04-31T00:00:00Z',
    '2026-01-00T00:00:00Z',
    '2026-01-01T24:00:00Z',
    '2026-01-01T00:60:00Z',
    '2026-01-01T00:00:60Z',
    '2026-01-01T00:00:00+24:00',
    '2026-01-01T00:00:00+01:60',
    '1900-02-29T00:00:00Z',
    '2026-00-10T00:00:00Z',
    '2026-01-01T00:00:00.Z',
    '2026-01-01T00:00:00.1234567890Z',
    '0000-01-01T00:00:00+01:00',
    '+2026-01-01T00:00:00Z',
    '',
  ])('refuses %j', (input) => {
    expect(normaliseDateTime(input)).toBeUndefined();
  });
});
