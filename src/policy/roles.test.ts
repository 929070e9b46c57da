import { describe, expect, it } from 'vitest';
import { matches, matchesParsed, parseRoles, rolesDisplay, validateRoles, type Semantic } from './roles.js';

describe('parseRoles', () => {
  it.each<[string, string[] | null, ReturnType<typeof parseRoles>]>([
    ['empty', [], { all: false, attributes: [], ids: [] }],
    ['null', null, { all: false, attributes: [], ids: [] }],
    ['attributes and ids', ['#a', '@x', '#b', '@y'], { all: false, attributes: ['a', 'b'], ids: ['x', 'y'] }],
    ['#all', ['#all'], { all: true, attributes: [], ids: [] }],
    ['duplicates collapse', ['#a', '#a', '@x', '@x'], { all: false, attributes: ['a'], ids: ['x'] }],
    ['non-roles are ignored', ['a', 'xy', '!x', '#', '@', ''], { all: false, attributes: [], ids: [] }],
    ['#All is an ordinary attribute', ['#All'], { all: false, attributes: ['All'], ids: [] }],
  ])('%s', (_name, roles, expected) => {
    expect(parseRoles(roles)).toEqual(expected);
  });
});

describe('validateRoles', () => {
  it.each<[string, string[] | null]>([
    ['empty', []],
    ['null', null],
    ['attributes', ['#a', '#b']],
    ['ids', ['@x']],
    ['mixed', ['#a', '@x']],
    ['#all alone', ['#all']],
    ['#all twice', ['#all', '#all']],
  ])('accepts %s', (_name, roles) => {
    expect(validateRoles(roles)).toBeUndefined();
  });

  it.each<[string, string[], string, RegExp]>([
    ['no prefix', ['#a', 'b'], 'b', /start with # .* or @/],
    ['empty entry', [''], '', /start with/],
    ['other prefix', ['!x'], '!x', /start with/],
    ['prefix only (#)', ['#'], '#', /after its prefix/],
    ['prefix only (@)', ['@x', '@'], '@', /after its prefix/],
    ['#all with an attribute', ['#all', '#a'], '#all', /stands alone/],
    ['#all with an id', ['@x', '#all'], '#all', /stands alone/],
  ])('rejects %s, naming the entry', (_name, roles, entry, reason) => {
    const problem = validateRoles(roles);
    expect(problem?.entry).toBe(entry);
    expect(problem?.reason).toMatch(reason);
  });
});

describe('matches', () => {
  const cases: [string, Semantic, string[], string, string[], boolean][] = [
    // [name, semantic, roles, entity id, entity attributes, expected]
    ['AllOf: carries all', 'AllOf', ['#a', '#b'], 'e1', ['a', 'b', 'c'], true],
    ['AllOf: carries some', 'AllOf', ['#a', '#b'], 'e1', ['a'], false],
    ['AllOf: carries none', 'AllOf', ['#a'], 'e1', [], false],
    ['AllOf: one attribute', 'AllOf', ['#a'], 'e1', ['a'], true],
    ['AnyOf: carries one', 'AnyOf', ['#a', '#b'], 'e1', ['b'], true],
    ['AnyOf: carries none', 'AnyOf', ['#a', '#b'], 'e1', ['c'], false],
    ['AnyOf: no attributes at all', 'AnyOf', ['#a'], 'e1', [], false],
    ['@id names it', 'AllOf', ['@e1'], 'e1', [], true],
    ['@id names another', 'AllOf', ['@e2'], 'e1', ['a'], false],
    ['@id wins over failing AllOf', 'AllOf', ['#a', '#b', '@e1'], 'e1', [], true],
    ['@id only under AllOf does not select by attributes', 'AllOf', ['@e2'], 'e1', [], false],
    ['AllOf with @ids checks the attributes', 'AllOf', ['#a', '@e2'], 'e1', ['a'], true],
    ['AnyOf with @ids checks the attributes', 'AnyOf', ['#a', '@e2'], 'e1', ['b'], false],
    ['#all under AllOf', 'AllOf', ['#all'], 'e1', [], true],
    ['#all under AnyOf', 'AnyOf', ['#all'], 'e1', ['x'], true],
    ['empty list selects nothing (AllOf)', 'AllOf', [], 'e1', ['a'], false],
    ['empty list selects nothing (AnyOf)', 'AnyOf', [], 'e1', ['a'], false],
    ['the attribute "all" is not #all', 'AllOf', ['#a'], 'e1', ['all'], false],
    ['#all needs no attribute "all"', 'AllOf', ['#all'], 'e1', ['all'], true],
    ['attribute matching is exact', 'AnyOf', ['#a'], 'e1', ['A', 'ab'], false],
  ];
  it.each(cases)('%s', (_name, semantic, roles, id, roleAttributes, expected) => {
    expect(matches({ semantic, roles }, { id, roleAttributes })).toBe(expected);
    expect(matchesParsed(semantic, parseRoles(roles), id, new Set(roleAttributes))).toBe(expected);
  });

  it('treats null role lists and attributes as empty', () => {
    expect(matches({ semantic: 'AnyOf', roles: null }, { id: 'e1', roleAttributes: ['a'] })).toBe(false);
    expect(matches({ semantic: 'AnyOf', roles: ['#a'] }, { id: 'e1', roleAttributes: null })).toBe(false);
    expect(matches({ semantic: 'AnyOf', roles: ['@e1'] }, { id: 'e1', roleAttributes: null })).toBe(true);
  });
});

describe('rolesDisplay', () => {
  const names = new Map([
    ['x1', 'web server'],
    ['x2', 'db'],
  ]);
  it.each<[string, string[] | null, { role: string; name: string }[]]>([
    ['empty', [], []],
    ['null', null, []],
    ['attribute shows itself', ['#sales'], [{ role: '#sales', name: '#sales' }]],
    ['#all shows itself', ['#all'], [{ role: '#all', name: '#all' }]],
    ['@id shows the entity name', ['@x1'], [{ role: '@x1', name: '@web server' }]],
    [
      'keeps the order of the list',
      ['@x2', '#a', '@x1'],
      [
        { role: '@x2', name: '@db' },
        { role: '#a', name: '#a' },
        { role: '@x1', name: '@web server' },
      ],
    ],
    ['unknown id shows the role itself', ['@gone'], [{ role: '@gone', name: '@gone' }]],
    ['an attribute spelled like an entity id shows itself', ['#x1', 'x1'], [{ role: '#x1', name: '#x1' }, { role: 'x1', name: 'x1' }]],
  ])('%s', (_name, roles, expected) => {
    expect(rolesDisplay(roles, names)).toEqual(expected);
  });
});
