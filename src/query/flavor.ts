// What the filter compiler needs from an SQL dialect. The compiler builds everything else (comparisons,
// IN lists, BETWEEN, boolean structure, null handling) in SQL common to SQLite and PostgreSQL; the
// hooks below cover booleans, substring tests and the JSON columns, which the dialects spell
// differently. A flavor lives in `store/` beside its dialect.
//
// Storage conventions every flavor relies on:
// - set fields: a JSON array of strings; a nullable set column's NULL reads as the empty set;
// - tags: a JSON object whose values are null, string or boolean;
// - booleans: the dialect's own representation (SQLite 0/1, PostgreSQL boolean).
//
// Contract for the hooks: `column` is a column reference built by the compiler from the symbol
// table; `value`/`needle` arguments are already bound parameters (or expressions built from them).
// A hook must never place caller-supplied text into the SQL text: a tag key is bound as a parameter
// (or, if a dialect cannot bind it, validated against the tag key charset before use). Hooks marked
// "never NULL" must evaluate to true or false for every stored row, because the compiler negates them
// with a plain NOT.

import type { RawBuilder, SqlBool } from 'kysely';

/** The tag keys a filter may name: `tags.<key>`. Dots, quotes and anything else are refused. */
export const TAG_KEY_PATTERN = /^[A-Za-z0-9_-]{1,256}$/;

export interface SqlFlavor {
  readonly name: string;

  /** A boolean as a bound parameter in the dialect's representation (comparable to a boolean column). */
  bool(value: boolean): RawBuilder<unknown>;

  /**
   * True when `haystack` contains `needle` as a substring: exactly, or ignoring case. Characters that
   * are wildcards elsewhere (`%`, `_`) are literal. NULL only when `haystack` is NULL.
   */
  contains(haystack: RawBuilder<unknown>, needle: RawBuilder<unknown>, caseInsensitive: boolean): RawBuilder<SqlBool>;

  /** The number of elements of a JSON-array column. */
  arrayLength(column: RawBuilder<unknown>): RawBuilder<number>;

  /**
   * True when some element of the JSON-array column satisfies `predicate`, which receives the element
   * as a (non-NULL) text expression. Never NULL: false on an empty array.
   */
  arraySome(
    column: RawBuilder<unknown>,
    predicate: (element: RawBuilder<string>) => RawBuilder<SqlBool>,
  ): RawBuilder<SqlBool>;

  /**
   * The elements of a JSON-array column as rows: a FROM item named `alias`, joined after the column's
   * table (`from t cross join <from>`), one row per element, each read as the (non-NULL) text
   * expression `element`.
   */
  arrayElements(column: RawBuilder<unknown>, alias: string): { from: RawBuilder<unknown>; element: RawBuilder<string> };

  /** The value of tag `key` as text when it is a JSON string; NULL when absent, null or boolean. */
  tagString(column: RawBuilder<unknown>, key: string): RawBuilder<string | null>;

  /**
   * The value of tag `key` in the dialect's boolean representation when it is a JSON boolean; NULL
   * when absent, null or a string.
   */
  tagBoolean(column: RawBuilder<unknown>, key: string): RawBuilder<unknown>;

  /** True when tag `key` is absent or JSON null. Never NULL. */
  tagIsNull(column: RawBuilder<unknown>, key: string): RawBuilder<SqlBool>;
}
