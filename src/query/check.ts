// Checks a parsed filter against a resource's public fields: every name must be in the symbol table,
// used the way its type allows, and compared with literals of a compatible type.
//
// Typing rules (behaviour.md §3):
//   string         string literals; = != < <= > >= in between contains icontains
//   integer/number number literals; = != < <= > >= in between
//   boolean        true/false; = != in, and a bare field name (`isSystem`)
//   datetime       datetime(...) or a string holding an RFC 3339 date-time; = != < <= > >= in between
//   any of those   `= null` / `!= null`
//   set            only wrapped: anyOf(f) / allOf(f) test elements as strings; count(f) is an integer;
//                  isEmpty(f). A bare set field is an error.
//   tags           only as `tags.<key>`; the literal picks the comparison: a string (every string
//                  operator), true/false (= !=) or null (= !=). Numbers and datetimes never match a tag
//                  value and are refused.
//   tag keys       [A-Za-z0-9_-], 1 to 256 characters (TAG_KEY_PATTERN); no dots.
//   true / false   alone, a condition that names no field: nothing to check.

import type { Expr, FieldRef, FilterField, FilterSymbols, Literal, Subject, SubjectExpr } from './ast.js';
import { normaliseDateTime } from './datetime.js';
import { TAG_KEY_PATTERN } from './flavor.js';
import { QueryProblem, quote } from './problem.js';

export type ScalarType = 'string' | 'integer' | 'number' | 'boolean' | 'datetime';

/** What a predicate's subject turned out to be once looked up. */
export type Resolved =
  | { kind: 'scalar'; field: FilterField; type: ScalarType }
  | { kind: 'tag'; field: FilterField; key: string }
  | { kind: 'element'; field: FilterField; quantifier: 'anyOf' | 'allOf' }
  | { kind: 'count'; field: FilterField };

function unknownField(ref: FieldRef, symbols: FilterSymbols): QueryProblem {
  const names = [...symbols.keys()].sort();
  const known = names.length > 0 ? ` (filterable fields: ${names.join(', ')})` : '';
  return new QueryProblem(ref.pos, `unknown field ${quote(ref.name)}${known}`);
}

/** Looks a name up: a field of the table, or `<tags field>.<key>`. */
function lookup(ref: FieldRef, symbols: FilterSymbols): { field: FilterField; key?: string } {
  const direct = symbols.get(ref.name);
  if (direct !== undefined) return { field: direct };
  const dot = ref.name.indexOf('.');
  if (dot > 0) {
    const base = symbols.get(ref.name.slice(0, dot));
    if (base !== undefined && base.type === 'tags') {
      const key = ref.name.slice(dot + 1);
      if (!TAG_KEY_PATTERN.test(key)) {
        throw new QueryProblem(
          ref.pos + dot + 1,
          `invalid tag key ${quote(key)} (tag keys in a filter are 1 to 256 of A-Z a-z 0-9 _ -)`,
        );
      }
      return { field: base, key };
    }
  }
  throw unknownField(ref, symbols);
}

function aType(type: string): string {
  return `${/^[aeiou]/.test(type) ? 'an' : 'a'} ${type}`;
}

function setOnly(fn: string, ref: FieldRef, field: FilterField, pos: number): never {
  throw new QueryProblem(pos, `${fn}(...) takes a set field; ${quote(ref.name)} is ${aType(field.type)} field`);
}

function bareSet(ref: FieldRef): QueryProblem {
  const n = ref.name;
  return new QueryProblem(
    ref.pos,
    `set field ${quote(n)} must be wrapped: anyOf(${n}), allOf(${n}), count(${n}) or isEmpty(${n})`,
  );
}

function bareTags(ref: FieldRef): QueryProblem {
  return new QueryProblem(ref.pos, `field ${quote(ref.name)} is compared by key: ${ref.name}.<key>`);
}

export function resolveSubject(subject: Subject, symbols: FilterSymbols): Resolved {
  const ref = subject.field;
  const { field, key } = lookup(ref, symbols);
  if (subject.kind === 'field') {
    if (key !== undefined) return { kind: 'tag', field, key };
    if (field.type === 'set') throw bareSet(ref);
    if (field.type === 'tags') throw bareTags(ref);
    return { kind: 'scalar', field, type: field.type };
  }
  // Stryker: a key only comes with a tags field, so `field.type !== 'set'` alone decides (here and in resolveSet).
  if (key !== undefined || field.type !== 'set') setOnly(subject.kind, ref, field, subject.pos);
  return subject.kind === 'count' ? { kind: 'count', field } : { kind: 'element', field, quantifier: subject.kind };
}

/** The field a bare boolean name refers to. */
export function resolveBoolean(ref: FieldRef, symbols: FilterSymbols): FilterField {
  const { field, key } = lookup(ref, symbols);
  if (key !== undefined) {
    throw new QueryProblem(ref.pos, `tag ${quote(ref.name)} needs a comparison, e.g. ${ref.name} = true`);
  }
  if (field.type === 'set') throw bareSet(ref);
  if (field.type === 'tags') throw bareTags(ref);
  if (field.type !== 'boolean') {
    throw new QueryProblem(
      ref.pos,
      `field ${quote(ref.name)} is ${aType(field.type)} field, not a boolean: it needs a comparison`,
    );
  }
  return field;
}

/** The set field of isEmpty(...). */
export function resolveSet(ref: FieldRef, symbols: FilterSymbols, pos: number): FilterField {
  const { field, key } = lookup(ref, symbols);
  if (key !== undefined || field.type !== 'set') setOnly('isEmpty', ref, field, pos);
  return field;
}

// ---- literal typing ----

function describeLiteral(lit: Literal): string {
  switch (lit.kind) {
    case 'string':
      return `string ${quote(lit.value)}`;
    case 'number':
      return `number ${lit.value}`;
    case 'boolean':
      return String(lit.value);
    case 'null':
      return 'null';
    case 'datetime':
      return `datetime(${lit.value})`;
  }
}

function subjectName(subject: Subject): string {
  return subject.kind === 'field' ? quote(subject.field.name) : `${subject.kind}(${subject.field.name})`;
}

/** The type literals are checked against: a scalar type, or 'tag'. */
type ValueType = ScalarType | 'tag';

function valueType(r: Resolved): ValueType {
  switch (r.kind) {
    case 'scalar':
      return r.type;
    case 'tag':
      return 'tag';
    case 'element':
      return 'string';
    case 'count':
      return 'integer';
  }
}

const EXPECTED: Record<ValueType, string> = {
  string: 'a string',
  integer: 'a number',
  number: 'a number',
  boolean: 'true or false',
  datetime: 'datetime(...) or an RFC 3339 date-time string',
  tag: 'a string, true, false or null',
};

function typeError(subject: Subject, type: ValueType, lit: Literal, expected = EXPECTED[type]): QueryProblem {
  const what = type === 'tag' ? `tag ${subjectName(subject)}` : `${subjectName(subject)} (${type})`;
  return new QueryProblem(lit.pos, `${what} is compared with ${expected}, found ${describeLiteral(lit)}`);
}

/** Checks one non-null literal against the subject's value type. */
function checkLiteral(subject: Subject, type: ValueType, lit: Literal, tagStringOnly: boolean): void {
  if (lit.kind === 'null') {
    throw new QueryProblem(lit.pos, 'null can only be compared with = or != (x = null, x != null)');
  }
  switch (type) {
    case 'string':
      if (lit.kind !== 'string') throw typeError(subject, type, lit);
      return;
    case 'integer':
    case 'number':
      if (lit.kind !== 'number') throw typeError(subject, type, lit);
      return;
    case 'boolean':
      if (lit.kind !== 'boolean') throw typeError(subject, type, lit);
      return;
    case 'datetime':
      if (lit.kind === 'datetime') return;
      if (lit.kind === 'string') {
        if (normaliseDateTime(lit.value) === undefined) {
          throw new QueryProblem(
            lit.pos,
            `${subjectName(subject)} (datetime) is compared with an RFC 3339 date-time with an offset, e.g. "2026-01-02T03:04:05Z"; found ${describeLiteral(lit)}`,
          );
        }
        return;
      }
      throw typeError(subject, type, lit);
    case 'tag':
      if (lit.kind === 'string') return;
      if (lit.kind === 'boolean' && !tagStringOnly) return;
      throw typeError(subject, type, lit, tagStringOnly ? 'a string here' : EXPECTED.tag);
  }
}

function opError(pos: number, op: string, subject: Subject, type: ValueType, allowed: string): QueryProblem {
  const what = type === 'tag' ? `tag ${subjectName(subject)} with a boolean` : `${subjectName(subject)} (${type})`;
  return new QueryProblem(pos, `${op} is not supported on ${what}; use ${allowed}`);
}

function checkSubjectExpr(e: SubjectExpr, symbols: FilterSymbols): void {
  const r = resolveSubject(e.subject, symbols);
  const type = valueType(r);
  const subject = e.subject;

  switch (e.kind) {
    case 'compare': {
      const lit = e.value;
      const eq = e.op === '=' || e.op === '!=';
      if (lit.kind === 'null') {
        if (!eq) throw new QueryProblem(e.pos, `null can only be compared with = or !=, found ${quote(e.op)}`);
        if (r.kind !== 'scalar' && r.kind !== 'tag') {
          const hint = r.kind === 'count' ? '' : `; use isEmpty(${subject.field.name})`;
          throw new QueryProblem(lit.pos, `${subjectName(subject)} is never null${hint}`);
        }
        return;
      }
      if (!eq && (type === 'boolean' || (type === 'tag' && lit.kind === 'boolean'))) {
        throw opError(e.pos, quote(e.op), subject, type, '= or !=');
      }
      checkLiteral(subject, type, lit, false);
      return;
    }
    case 'in':
      for (const item of e.values) {
        if (item.kind === 'null') {
          throw new QueryProblem(item.pos, 'null is not allowed in a list; use x = null or x != null');
        }
        checkLiteral(subject, type, item, true);
      }
      return;
    case 'between':
      if (type === 'boolean') throw opError(e.pos, '"between"', subject, type, '= or !=');
      checkLiteral(subject, type, e.low, true);
      checkLiteral(subject, type, e.high, true);
      return;
    case 'contains': {
      const op = e.caseInsensitive ? '"icontains"' : '"contains"';
      if (type !== 'string' && type !== 'tag') {
        throw new QueryProblem(e.pos, `${op} needs a string field, found ${subjectName(subject)} (${type})`);
      }
      if (e.value.kind !== 'string') {
        throw new QueryProblem(e.value.pos, `${op} takes a string, found ${describeLiteral(e.value)}`);
      }
      return;
    }
  }
}

/** Checks a where expression; throws QueryProblem at the first problem. */
export function checkWhere(expr: Expr, symbols: FilterSymbols): void {
  switch (expr.kind) {
    case 'and':
    case 'or':
      for (const operand of expr.operands) checkWhere(operand, symbols);
      return;
    case 'not':
      checkWhere(expr.operand, symbols);
      return;
    case 'isTrue':
      resolveBoolean(expr.field, symbols);
      return;
    case 'isEmpty':
      resolveSet(expr.field, symbols, expr.pos);
      return;
    case 'constant':
      return;
    default:
      checkSubjectExpr(expr, symbols);
  }
}
