// The filter compiler's dialect hooks for SQLite (JSON1 functions, booleans stored as 0/1).

import { sql, type RawBuilder, type SqlBool } from 'kysely';
import { TAG_KEY_PATTERN, type SqlFlavor } from '../query/flavor.js';

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

  // instr() is a plain substring search: no wildcards to escape. lower() folds ASCII letters only
  // (SQLite without ICU), so icontains ignores case for A-Z.
  contains: (haystack, needle, caseInsensitive) =>
    caseInsensitive
      ? sql<SqlBool>`(instr(lower(${haystack}), lower(${needle})) > 0)`
      : sql<SqlBool>`(instr(${haystack}, ${needle}) > 0)`,

  arrayLength: (column) => sql<number>`json_array_length(${column})`,

  // The element subquery reads from json_each, whose own columns (key, value, type, atom, id, parent,
  // fullkey, path, json, root) would shadow an unqualified outer column of the same name: a set field
  // stored in a column so named must be declared as "table.column".
  arraySome: (column, predicate) =>
    sql<SqlBool>`(exists (select 1 from json_each(${column}) as "elem" where ${predicate(sql<string>`"elem"."value"`)}))`,

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
