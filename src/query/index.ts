// The filter language (behaviour.md §3): parse, check against a resource's public fields, compile to a
// parameterised SQL expression. Errors are ApiErrors (INVALID_FILTER, INVALID_SORT_IDENTIFIER) whose
// message and cause.reason name the place as "character N", counted from 1.

import type { RawBuilder, SqlBool } from 'kysely';
import type { ApiError } from '../errors.js';
import type { Expr, FilterSymbols, ParsedQuery, SortKey } from './ast.js';
import { checkWhere } from './check.js';
import { compileExpr } from './compile.js';
import type { SqlFlavor } from './flavor.js';
import { parseFilterText, parseSortText } from './parser.js';
import { QueryProblem, queryError, quote } from './problem.js';

export type * from './ast.js';
export type { SqlFlavor } from './flavor.js';
export { TAG_KEY_PATTERN } from './flavor.js';
export { normaliseDateTime } from './datetime.js';
export { MAX_ARRAY_ITEMS, MAX_DEPTH, MAX_PREDICATES, MAX_VALUES } from './parser.js';

function rethrow(err: unknown, convert: (p: QueryProblem) => ApiError): never {
  if (err instanceof QueryProblem) throw convert(err);
  throw err;
}

/**
 * Parses a `filter` parameter: an optional condition followed by optional `sort by`, `skip` and
 * `limit` clauses, in that order. Empty or blank text gives `{}`. Syntax errors → INVALID_FILTER.
 */
export function parseFilter(text: string): ParsedQuery {
  try {
    return parseFilterText(text);
  } catch (err) {
    rethrow(err, (p) => queryError('INVALID_FILTER', 'filter', p.pos, p.detail, text));
  }
}

/** Parses a `sort` parameter (`name desc,createdAt`); blank text gives `[]`. Errors → INVALID_SORT_IDENTIFIER. */
export function parseSort(text: string): SortKey[] {
  try {
    return parseSortText(text);
  } catch (err) {
    rethrow(err, (p) => queryError('INVALID_SORT_IDENTIFIER', 'sort', p.pos, p.detail, text));
  }
}

/**
 * Checks a parsed query against a resource: the condition may name only fields in `symbols`, used as
 * their types allow (INVALID_FILTER); sort keys must be in `sortable` (INVALID_SORT_IDENTIFIER).
 */
export function checkQuery(q: ParsedQuery, symbols: FilterSymbols, sortable: ReadonlySet<string>): void {
  if (q.where !== undefined) {
    try {
      checkWhere(q.where, symbols);
    } catch (err) {
      rethrow(err, (p) => queryError('INVALID_FILTER', 'filter', p.pos, p.detail, q.text));
    }
  }
  for (const key of q.sort ?? []) {
    if (sortable.has(key.field)) continue;
    const detail = symbols.has(key.field)
      ? `field ${quote(key.field)} cannot be sorted on`
      : `unknown sort field ${quote(key.field)}`;
    const known = sortable.size > 0 ? ` (sortable fields: ${[...sortable].sort().join(', ')})` : '';
    const origin = key.origin;
    throw queryError(
      'INVALID_SORT_IDENTIFIER',
      origin?.param ?? 'sort',
      origin?.pos ?? 0,
      detail + known,
      origin?.text ?? key.field,
    );
  }
}

/**
 * Compiles a condition to a boolean SQL expression for `.where(...)`. Columns come from `symbols`,
 * every literal is a bound parameter. Checks the expression first (INVALID_FILTER), so it is safe on
 * an unchecked tree.
 */
export function compileWhere(expr: Expr, symbols: FilterSymbols, flavor: SqlFlavor): RawBuilder<SqlBool> {
  try {
    return compileExpr(expr, symbols, flavor);
  } catch (err) {
    rethrow(err, (p) => queryError('INVALID_FILTER', 'filter', p.pos, p.detail, undefined));
  }
}
