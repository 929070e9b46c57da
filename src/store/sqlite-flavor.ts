// The filter compiler's dialect hooks for SQLite (JSON1 functions, booleans stored as 0/1), and the
// SQL function they need that SQLite lacks.

import type Database from 'better-sqlite3';
import { sql, type RawBuilder, type SqlBool } from 'kysely';
import { TAG_KEY_PATTERN, type SqlFlavor } from '../query/flavor.js';

/** Upper-cases text by Unicode rules (SQLite's own upper() and lower() fold A-Z only). */
const FOLD_CASE = 'overlay_fold_case';

/**
 * Registers the functions the flavor's SQL calls; every connection that runs compiled filters needs
 * them. Deterministic, so SQLite folds a bound parameter once per query, not once per row.
 */
export function registerFlavorFunctions(database: Pick<Database.Database, 'function'>): void {
  database.function(FOLD_CASE, { deterministic: true }, (value: unknown) =>
    typeof value === 'string' ? value.toUpperCase() : value,
  );
}

/**
 * The JSON path of a top-level tag, bound as a parameter. The key is also checked against the tag key
 * charset, so even a caller that skipped the filter checker cannot reach another path.
 */
function tagPath(key: string): RawBuilder<string> {
  if (!TAG_KEY_PATTERN.test(key)) throw new Error(`invalid tag key ${JSON.stringify(key)}`);
  return sql.val(`$."${key}"`);
}

export const sqliteFlavor: SqlFlavor = {
  name: 'sqlite',

  bool: (value) => sql.val(value ? 1 : 0),

  // instr() is a plain substring search: no wildcards to escape. Both sides are upper-cased, as the
  // established controller does, so "über" finds "Überwachung".
  contains: (haystack, needle, caseInsensitive) =>
    caseInsensitive
      ? sql<SqlBool>`(instr(${sql.raw(FOLD_CASE)}(${haystack}), ${sql.raw(FOLD_CASE)}(${needle})) > 0)`
      : sql<SqlBool>`(instr(${haystack}, ${needle}) > 0)`,

  arrayLength: (column) => sql<number>`json_array_length(${column})`,

  // The element subquery reads from json_each, whose own columns (key, value, type, atom, id, parent,
  // fullkey, path, json, root) would shadow an unqualified outer column of the same name: a set field
  // stored in a column so named must be declared as "table.column".
  arraySome: (column, predicate) =>
    sql<SqlBool>`(exists (select 1 from json_each(${column}) as "elem" where ${predicate(sql<string>`"elem"."value"`)}))`,

  // json_each's columns shadow outer ones of the same name (see arraySome): the element is read
  // qualified by the alias.
  arrayElements: (column, alias) => ({
    from: sql`json_each(${column}) as ${sql.id(alias)}`,
    element: sql<string>`${sql.ref(`${alias}.value`)}`,
  }),

  tagString: (column, key) => {
    const path = tagPath(key);
    return sql<string | null>`(case when json_type(${column}, ${path}) = 'text' then json_extract(${column}, ${path}) end)`;
  },

  tagBoolean: (column, key) => {
    const path = tagPath(key);
    return sql`(case when json_type(${column}, ${path}) in ('true', 'false') then json_extract(${column}, ${path}) end)`;
  },

  tagIsNull: (column, key) => sql<SqlBool>`(coalesce(json_type(${column}, ${tagPath(key)}), 'null') = 'null')`,
};
