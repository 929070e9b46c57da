// List parameters (behaviour.md §3): limit, offset, filter and sort, turned into a store query.
import { ApiError } from '../errors.js';
import { checkQuery, compileWhere, parseFilter, parseSort } from '../query/index.js';
import type { SqlFlavor } from '../query/flavor.js';
import type { FilterSpec } from '../resources/kit.js';
import type { ListQuery } from '../store/repository.js';
import type { Meta } from './envelope.js';

export const DEFAULT_LIMIT = 10;
export const MAX_LIMIT = 500;
export const MAX_FILTER_LENGTH = 4096;

const INTEGER = /^\d{1,10}$/;

function single(query: Record<string, unknown>, key: string): string | undefined {
  const v = query[key];
  if (v === undefined) return undefined;
  if (typeof v === 'string') return v;
  throw new ApiError('COULD_NOT_VALIDATE', `${key} may be given once`, { field: key, reason: 'may be given once' });
}

function integer(query: Record<string, unknown>, key: string): number | undefined {
  const raw = single(query, key);
  if (raw === undefined || raw === '') return undefined;
  if (!INTEGER.test(raw) || Number(raw) > 2 ** 31 - 1) {
    throw new ApiError('INVALID_PAGINATION', `${key} must be a non-negative integer`, {
      field: key,
      reason: 'must be a non-negative integer',
      value: raw.slice(0, 64),
    });
  }
  return Number(raw);
}

export interface ListRequest {
  query: ListQuery;
  /** For meta.pagination; limit is the page size asked for (every row: the total). */
  limit: number | null;
  offset: number;
}

export function parseList(
  raw: Record<string, unknown>,
  spec: FilterSpec,
  flavor: SqlFlavor,
): ListRequest {
  let limit: number | null = integer(raw, 'limit') ?? DEFAULT_LIMIT;
  let offset = integer(raw, 'offset') ?? 0;
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
  if (parsed.limit !== undefined) limit = parsed.limit === 'none' ? null : parsed.limit;
  if (parsed.skip !== undefined) offset = parsed.skip;
  if (limit !== null) limit = Math.min(limit, MAX_LIMIT);
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
    pagination: { limit: list.limit ?? total, offset: list.offset, totalCount: total },
    filterableFields: spec.fields,
  };
}
