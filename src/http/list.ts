// List parameters (behaviour.md §3): limit, offset, filter and sort, turned into a store query.
import { ApiError } from '../errors.js';
import { checkQuery, compileWhere, parseFilter, parseSort } from '../query/index.js';
import type { SqlFlavor } from '../query/flavor.js';
import type { FilterSpec } from '../resources/kit.js';
import type { ListQuery } from '../store/repository.js';
import type { Meta } from './envelope.js';

export const DEFAULT_LIMIT = 10;
export const MAX_LIMIT = 500;
export const MAX_OFFSET = 100_000;
/**
 * Characters of a filter (and of a sort): room for a few hundred names in one filter. Nesting and the
 * number of conditions and values have bounds of their own (query/parser.ts), and the request line
 * is bounded by the HTTP server's header limit.
 */
export const MAX_FILTER_LENGTH = 16_384;
/** The limit that asks for every row, as the query parameter and the filter write it and answers show it. */
const EVERY_ROW = -1;

/** An integer of any size, signed or not; an integer past the bounds is brought within them below. */
const INTEGER = /^[+-]?\d+$/;

function single(query: Record<string, unknown>, key: string): string | undefined {
  const v = query[key];
  if (v === undefined) return undefined;
  if (typeof v === 'string') return v;
  throw new ApiError('COULD_NOT_VALIDATE', `${key} may be given once`, { field: key, reason: 'may be given once' });
}

function integer(query: Record<string, unknown>, key: string): number | undefined {
  const raw = single(query, key);
  if (raw === undefined || raw === '') return undefined;
  if (!INTEGER.test(raw)) {
    throw new ApiError('INVALID_PAGINATION', `${key} must be an integer`, {
      field: key,
      reason: 'must be an integer',
      value: raw.slice(0, 64),
    });
  }
  return Number(raw);
}

/**
 * The page a list answers, from the limit and offset asked for (the filter's `limit` and `skip` winning
 * over the query parameters). Any integer is taken, normalised as the established controller does:
 * a limit of 0 or below -1 is the default, -1 (or `none`) every row, one above MAX_LIMIT is MAX_LIMIT;
 * a negative offset is 0, one above MAX_OFFSET is MAX_OFFSET.
 */
function pageOf(limit: number | 'none' | undefined, offset: number | undefined): { limit: number | null; offset: number } {
  let rows: number | null;
  if (limit === 'none' || limit === EVERY_ROW) rows = null;
  else if (limit === undefined || limit === 0 || limit < EVERY_ROW) rows = DEFAULT_LIMIT;
  else rows = Math.min(limit, MAX_LIMIT);
  return { limit: rows, offset: Math.min(Math.max(offset ?? 0, 0), MAX_OFFSET) };
}

export interface ListRequest {
  query: ListQuery;
  /** For meta.pagination: the page size (null: every row, answered as -1) and offset of the query. */
  limit: number | null;
  offset: number;
}

export function parseList(
  raw: Record<string, unknown>,
  spec: FilterSpec,
  flavor: SqlFlavor,
): ListRequest {
  const limitParam = integer(raw, 'limit');
  const offsetParam = integer(raw, 'offset');
  const filterText = single(raw, 'filter') ?? '';
  if (filterText.length > MAX_FILTER_LENGTH) {
    throw new ApiError('INVALID_FILTER', `the filter is longer than ${MAX_FILTER_LENGTH} characters`, {
      field: 'filter',
      reason: `longer than ${MAX_FILTER_LENGTH} characters`,
    });
  }
  const sortText = single(raw, 'sort');
  if (sortText !== undefined && sortText.length > MAX_FILTER_LENGTH) {
    throw new ApiError('INVALID_SORT_IDENTIFIER', 'the sort is too long', { field: 'sort', reason: 'too long' });
  }
  const parsed = parseFilter(filterText);
  const sort = parsed.sort ?? (sortText ? parseSort(sortText) : []);
  checkQuery({ ...parsed, sort }, spec.symbols, spec.sortable);
  const { limit, offset } = pageOf(parsed.limit ?? limitParam, parsed.skip ?? offsetParam);
  // `true` alone is how clients say "no condition"; without a where the lists keep their fast paths.
  const where = parsed.where?.kind === 'constant' && parsed.where.value ? undefined : parsed.where;
  return {
    query: {
      where: where ? compileWhere(where, spec.symbols, flavor) : undefined,
      sort,
      offset,
      limit,
    },
    limit,
    offset,
  };
}

export function listMeta(list: ListRequest, total: number, spec: FilterSpec): Partial<Meta> {
  return {
    pagination: { limit: list.limit ?? EVERY_ROW, offset: list.offset, totalCount: total },
    filterableFields: spec.fields,
  };
}
