// The filter language's syntax tree and the symbol table it is checked against (behaviour.md §3).
//
// Positions: every node carries `pos`, the 0-based offset (UTF-16 code units) of its first character
// in the source text. Error messages report the same place 1-based, as "character N".

/** The kinds of value a filterable field holds, which decide the literals and operators it accepts. */
export type FieldType = 'string' | 'integer' | 'number' | 'boolean' | 'datetime' | 'set' | 'tags';

/**
 * One public, filterable field of a resource. `column` is its SQL column ("column" or "table.column"),
 * or, for a field read elsewhere (`source`), the column it is read from there.
 */
export interface FilterField {
  name: string;
  type: FieldType;
  column: string;
  source?: FieldSource;
}

/**
 * Where a field is read when it is not a column of the record itself (the columns of the record named
 * here are qualified, "table.column": they are read from within a subquery):
 * - `reference`: `column` of the row of `table` whose id the record's `key` holds (a terminator's
 *   `service.name`); NULL when there is none;
 * - `link`: a set kept in a link table: `column` of the rows of `table` whose `owner` column holds the
 *   record's `id`.
 */
export type FieldSource = { kind: 'reference'; table: string; key: string } | { kind: 'link'; table: string; owner: string; id: string };

/** The fields a filter may name, by public name. Anything not in the table is unknown to the filter. */
export type FilterSymbols = ReadonlyMap<string, FilterField>;

export interface SortKey {
  field: string;
  direction: 'asc' | 'desc';
  /** Where the key was written, so a checker error can point at it. Absent on keys built in code. */
  origin?: SortOrigin;
}

export interface SortOrigin {
  /** The request parameter the key came from. */
  param: 'filter' | 'sort';
  /** That parameter's full text. */
  text: string;
  /** 0-based offset of the field name in `text`. */
  pos: number;
}

export interface ParsedQuery {
  where?: Expr;
  sort?: SortKey[];
  /** As written: any integer, negative or past the safe range too (the list decides the page). */
  skip?: number;
  limit?: number | 'none';
  /** The filter text this was parsed from; error causes quote it. */
  text?: string;
}

// ---- literals -------------------------------------------------------------------------------------

export interface StringLiteral {
  kind: 'string';
  value: string;
  pos: number;
}

export interface NumberLiteral {
  kind: 'number';
  value: number;
  /** Written without a fractional part. */
  integer: boolean;
  pos: number;
}

export interface BooleanLiteral {
  kind: 'boolean';
  value: boolean;
  pos: number;
}

export interface NullLiteral {
  kind: 'null';
  pos: number;
}

export interface DateTimeLiteral {
  kind: 'datetime';
  /** Normalised to UTC with milliseconds: YYYY-MM-DDTHH:mm:ss.sssZ. */
  value: string;
  /** The instant written lies after `value`, within its millisecond (isSubMillisecond). */
  subMillisecond: boolean;
  pos: number;
}

export type Literal = StringLiteral | NumberLiteral | BooleanLiteral | NullLiteral | DateTimeLiteral;

// ---- what a predicate tests -----------------------------------------------------------------------

/** A field name as written, e.g. `name` or `tags.env`. */
export interface FieldRef {
  name: string;
  pos: number;
}

/** A plain field (`name`, `tags.env`). */
export interface FieldSubject {
  kind: 'field';
  field: FieldRef;
  pos: number;
}

/** A set field wrapped by a function: `anyOf(x)`, `allOf(x)` (element tests) or `count(x)` (a number). */
export interface SetSubject {
  kind: 'anyOf' | 'allOf' | 'count';
  field: FieldRef;
  pos: number;
}

export type Subject = FieldSubject | SetSubject;

// ---- expressions ----------------------------------------------------------------------------------

export type CompareOp = '=' | '!=' | '<' | '<=' | '>' | '>=';

export interface AndExpr {
  kind: 'and';
  /** Two or more operands; chains are kept flat. */
  operands: Expr[];
  pos: number;
}

export interface OrExpr {
  kind: 'or';
  operands: Expr[];
  pos: number;
}

export interface NotExpr {
  kind: 'not';
  operand: Expr;
  pos: number;
}

/** `subject op value`, including `x = null` and `x != null`. `pos` is the operator's. */
export interface CompareExpr {
  kind: 'compare';
  subject: Subject;
  op: CompareOp;
  value: Literal;
  pos: number;
}

/** `subject [not] in [v, ...]`. `pos` is the `in` (or `not`). */
export interface InExpr {
  kind: 'in';
  subject: Subject;
  negated: boolean;
  values: Literal[];
  pos: number;
}

/** `subject [not] between low and high`: low inclusive, high exclusive. */
export interface BetweenExpr {
  kind: 'between';
  subject: Subject;
  negated: boolean;
  low: Literal;
  high: Literal;
  pos: number;
}

/** `subject [not] contains|icontains value`: substring test, `icontains` ignoring case. */
export interface ContainsExpr {
  kind: 'contains';
  subject: Subject;
  negated: boolean;
  caseInsensitive: boolean;
  value: Literal;
  pos: number;
}

/** A bare boolean field name: `isSystem`. */
export interface IsTrueExpr {
  kind: 'isTrue';
  field: FieldRef;
  pos: number;
}

/** `true` or `false` standing alone as a condition: every row, or none. */
export interface ConstantExpr {
  kind: 'constant';
  value: boolean;
  pos: number;
}

/** `isEmpty(setField)`. */
export interface IsEmptyExpr {
  kind: 'isEmpty';
  field: FieldRef;
  pos: number;
}

export type Expr =
  | AndExpr
  | OrExpr
  | NotExpr
  | CompareExpr
  | InExpr
  | BetweenExpr
  | ContainsExpr
  | IsTrueExpr
  | IsEmptyExpr
  | ConstantExpr;

/** The leaf predicates that test a subject against literals. */
export type SubjectExpr = CompareExpr | InExpr | BetweenExpr | ContainsExpr;
