// How the filter language shows client text in its messages and turns a problem into the API error.
import { describe, expect, it } from 'vitest';
import { QueryProblem, queryError, quote } from './problem.js';

describe('quote', () => {
  it.each([
    ['', undefined, '""'],
    ['name', undefined, '"name"'],
    ['say "hi"\n', undefined, '"say \\"hi\\"\\n"'],
    ['x'.repeat(40), undefined, `"${'x'.repeat(40)}"`],
    [`${'x'.repeat(40)}y`, undefined, `"${'x'.repeat(40)}..."`],
    ['abcdef', 3, '"abc..."'],
    ['abc', 3, '"abc"'],
  ])('%j (at most %s characters)', (text, max, expected) => {
    expect(quote(text, max)).toBe(expected);
  });
});

describe('QueryProblem', () => {
  it('carries the offset and the detail, and says what it is', () => {
    const p = new QueryProblem(3, 'unknown field "x"');
    expect(p).toBeInstanceOf(Error);
    expect([p.name, p.pos, p.detail, p.message]).toEqual(['QueryProblem', 3, 'unknown field "x"', 'unknown field "x"']);
  });
});

describe('queryError', () => {
  it('names the place 1-based, the parameter, and the text sent', () => {
    const err = queryError('INVALID_SORT_IDENTIFIER', 'sort', 4, 'unknown sort field "x"', 'name,x');
    expect(err.code).toBe('INVALID_SORT_IDENTIFIER');
    expect(err.status).toBe(400);
    expect(err.message).toBe('invalid sort at character 5: unknown sort field "x"');
    expect(err.cause).toEqual({ field: 'sort', reason: 'at character 5: unknown sort field "x"', value: 'name,x' });
  });
});
