// Compiles a checked filter expression to a Kysely SQL expression.
//
// Nothing from the filter text becomes SQL text: columns come from the symbol table (`sql.ref`), every
// literal and every tag key is a bound parameter, and the operators are chosen from fixed tables.
//
// Null semantics: a filter is two-valued. Every predicate is true or false for every row, never
// unknown, and `not (e)` is exactly the rows `e` does not match:
//   - `x = v`, `x < v`, `x in [..]`, `x between a and b`, `x contains v` are false when x is null;
//   - their negations `x != v`, `x not in [..]`, `x not between`, `x not contains`, and `not (x < v)`
//     are true when x is null (`x != "a"` matches a row whose x is null);
//   - `x = null` / `x != null` test for null (for a tag: absent or JSON null / present and not null).
// Datetimes compare as instants. Stored ones are whole milliseconds, so a literal written with finer
// digits (T plus less than 1 ms) equals none of them; below it means at most T, above it T + 1 ms or later.
// `not` is pushed down to the predicates (De Morgan), and a negated predicate P over a nullable x
// compiles to `(x is null or not P)`; SQL's three-valued logic never reaches a NOT.
//
// `and` / `or` chains compile to balanced trees so the SQL expression depth stays logarithmic in the
// number of predicates (SQLite refuses expressions nested more than 1000 deep).

import { sql, type RawBuilder, type SqlBool } from 'kysely';
import type { CompareOp, Expr, FilterField, FilterSymbols, Literal, SubjectExpr } from './ast.js';
import { checkWhere, resolveBoolean, resolveSet, resolveSubject, type ScalarType } from './check.js';
import { isSubMillisecond, normaliseDateTime } from './datetime.js';
import type { SqlFlavor } from './flavor.js';

type Bool = RawBuilder<SqlBool>;
type Value = RawBuilder<unknown>;

const COMPARE: Record<Exclude<CompareOp, '!='>, (a: Value, b: Value) => Bool> = {
  '=': (a, b) => sql<SqlBool>`(${a} = ${b})`,
  '<': (a, b) => sql<SqlBool>`(${a} < ${b})`,
  '<=': (a, b) => sql<SqlBool>`(${a} <= ${b})`,
  '>': (a, b) => sql<SqlBool>`(${a} > ${b})`,
  '>=': (a, b) => sql<SqlBool>`(${a} >= ${b})`,
};

/**
 * The comparison with T (a literal's stored form) that a whole-millisecond value passes exactly when it
 * passes the comparison with an instant between T and T + 1 ms.
 */
const PAST_MILLISECOND: Record<Exclude<CompareOp, '=' | '!='>, Exclude<CompareOp, '=' | '!='>> = {
  '<': '<=',
  '<=': '<=',
  '>': '>',
  '>=': '>',
};

const TRUE: Bool = sql<SqlBool>`(1 = 1)`;
const FALSE: Bool = sql<SqlBool>`(1 = 0)`;

function not(p: Bool): Bool {
  return sql<SqlBool>`(not ${p})`;
}

function join(parts: Bool[], op: 'and' | 'or'): Bool {
  if (parts.length === 1) return parts[0]!;
  const mid = parts.length >> 1;
  const left = join(parts.slice(0, mid), op);
  const right = join(parts.slice(mid), op);
  return op === 'and' ? sql<SqlBool>`(${left} and ${right})` : sql<SqlBool>`(${left} or ${right})`;
}

class Compiler {
  constructor(
    private readonly symbols: FilterSymbols,
    private readonly flavor: SqlFlavor,
  ) {}

  compile(e: Expr, negate: boolean): Bool {
    switch (e.kind) {
      case 'and':
      case 'or': {
        const parts = e.operands.map((operand) => this.compile(operand, negate));
        // Stryker: join() only tells 'and' from anything else, so the 'or' literal is not looked at.
        const op = (e.kind === 'and') !== negate ? 'and' : 'or';
        return join(parts, op);
      }
      case 'not':
        return this.compile(e.operand, !negate);
      case 'isTrue': {
        const value = this.value(resolveBoolean(e.field, this.symbols));
        return this.nullable(value, COMPARE['='](value, this.flavor.bool(true)), negate);
      }
      case 'isEmpty': {
        const field = resolveSet(e.field, this.symbols, e.pos);
        const empty = field.source?.kind === 'link' ? not(this.linkSome(field, field.source, () => TRUE)) : sql<SqlBool>`(${this.length(field)} = 0)`;
        return negate ? not(empty) : empty;
      }
      case 'constant':
        return e.value !== negate ? TRUE : FALSE;
      default:
        return this.subjectExpr(e, negate);
    }
  }

  // Stryker: the type given to scalar() matters only when it is 'datetime' (see param), so the literal
  // types of count, tag and element tests are not looked at; and `lit` matters only for = / != and
  // contains, since the checker refuses null and booleans in a tag's list or range.
  private subjectExpr(e: SubjectExpr, negate: boolean): Bool {
    const r = resolveSubject(e.subject, this.symbols);
    const column = this.value(r.field);
    switch (r.kind) {
      case 'scalar':
        return this.scalar(column, e, r.type, negate);
      case 'count':
        return this.scalar(this.length(r.field), e, 'integer', negate);
      case 'tag': {
        const lit = e.kind === 'in' ? undefined : e.kind === 'between' ? e.low : e.value;
        if (lit?.kind === 'null') {
          const isNull = this.flavor.tagIsNull(column, r.key);
          return isNullWanted(e, negate) ? isNull : not(isNull);
        }
        if (lit?.kind === 'boolean') return this.scalar(this.flavor.tagBoolean(column, r.key), e, 'boolean', negate);
        return this.scalar(this.flavor.tagString(column, r.key), e, 'string', negate);
      }
      case 'element': {
        // Elements are never null, so a plain NOT is the complement of an element test.
        const test = (negateElement: boolean) => (element: RawBuilder<string>) => {
          const [p, inverted] = this.positive(element, e, 'string');
          return inverted !== negateElement ? not(p) : p;
        };
        if (r.quantifier === 'anyOf') {
          const some = this.some(r.field, test(false));
          return negate ? not(some) : some;
        }
        // allOf(x) P  ==  not anyOf(x) (not P); true on an empty set.
        const counterexample = this.some(r.field, test(true));
        return negate ? counterexample : not(counterexample);
      }
    }
  }

  /** A field's value: its column, or what its source reads. */
  private value(field: FilterField): Value {
    const source = field.source;
    if (source?.kind !== 'reference') return sql.ref(field.column);
    return sql`(select ${sql.ref(`filter_ref.${field.column}`)} from ${sql.table(source.table)} as filter_ref where filter_ref.id = ${sql.ref(source.key)})`;
  }

  /** Whether some element of a set field satisfies `predicate`. */
  private some(field: FilterField, predicate: (element: RawBuilder<string>) => Bool): Bool {
    const source = field.source;
    return source?.kind === 'link' ? this.linkSome(field, source, predicate) : this.flavor.arraySome(sql.ref(field.column), predicate);
  }

  private linkSome(field: FilterField, source: Extract<FilterField['source'], { kind: 'link' }>, predicate: (element: RawBuilder<string>) => Bool): Bool {
    const element = sql.ref(`filter_link.${field.column}`) as RawBuilder<string>;
    return sql<SqlBool>`(exists (select 1 from ${sql.table(source.table)} as filter_link where ${sql.ref(`filter_link.${source.owner}`)} = ${sql.ref(source.id)} and ${predicate(element)}))`;
  }

  /** The number of elements of a set field; 0 for a set column left NULL (a posture check's unused `domains`). */
  private length(field: FilterField): Value {
    const source = field.source;
    if (source?.kind !== 'link') return sql`coalesce(${this.flavor.arrayLength(sql.ref(field.column))}, 0)`;
    return sql`(select count(*) from ${sql.table(source.table)} as filter_link where ${sql.ref(`filter_link.${source.owner}`)} = ${sql.ref(source.id)})`;
  }

  /** A predicate over a value that may be NULL. */
  private scalar(subject: Value, e: SubjectExpr, type: ScalarType, negate: boolean): Bool {
    if (e.kind === 'compare' && e.value.kind === 'null') {
      return isNullWanted(e, negate) ? sql<SqlBool>`(${subject} is null)` : sql<SqlBool>`(${subject} is not null)`;
    }
    const [p, inverted] = this.positive(subject, e, type);
    return this.nullable(subject, p, inverted !== negate);
  }

  /** `p`, or its complement where a NULL subject counts as not matching `p`. */
  private nullable(subject: Value, p: Bool, negate: boolean): Bool {
    return negate ? sql<SqlBool>`(${subject} is null or not ${p})` : p;
  }

  /**
   * The positive form of a predicate (false or NULL when the subject is NULL, never NULL otherwise),
   * and whether the predicate as written is its negation (`!=`, `not in`, `not between`, `not contains`).
   */
  private positive(subject: Value, e: SubjectExpr, type: ScalarType): [Bool, boolean] {
    switch (e.kind) {
      case 'compare': {
        const value = this.param(e.value, type);
        const finer = this.finer(e.value, type);
        if (e.op === '=' || e.op === '!=') return [finer ? FALSE : COMPARE['='](subject, value), e.op === '!='];
        const compare = COMPARE[finer ? PAST_MILLISECOND[e.op] : e.op];
        // Stryker: unreachable after the parser and checker (as are the two throws in param); kept as guards.
        if (compare === undefined) throw new Error(`unsupported operator ${JSON.stringify(e.op)}`);
        return [compare(subject, value), false];
      }
      case 'in': {
        const listed = e.values.filter((v) => !this.finer(v, type));
        if (listed.length === 0) return [FALSE, e.negated];
        const values = listed.map((v) => this.param(v, type));
        return [sql<SqlBool>`(${subject} in (${sql.join(values)}))`, e.negated];
      }
      case 'between': {
        const low = COMPARE[this.finer(e.low, type) ? '>' : '>='](subject, this.param(e.low, type));
        const high = COMPARE[this.finer(e.high, type) ? '<=' : '<'](subject, this.param(e.high, type));
        return [sql<SqlBool>`(${low} and ${high})`, e.negated];
      }
      case 'contains':
        return [this.flavor.contains(subject, this.param(e.value, type), e.caseInsensitive), e.negated];
    }
  }

  /** Whether a literal compared with a datetime names an instant within the millisecond after its stored form. */
  private finer(lit: Literal, type: ScalarType): boolean {
    if (type !== 'datetime') return false;
    return lit.kind === 'datetime' ? lit.subMillisecond : lit.kind === 'string' && isSubMillisecond(lit.value);
  }

  private param(lit: Literal, type: ScalarType): Value {
    switch (lit.kind) {
      case 'string': {
        if (type !== 'datetime') return sql.val(lit.value);
        const normalised = normaliseDateTime(lit.value);
        if (normalised === undefined) throw new Error('unchecked datetime literal');
        return sql.val(normalised);
      }
      case 'number':
      case 'datetime':
        return sql.val(lit.value);
      case 'boolean':
        return this.flavor.bool(lit.value);
      case 'null':
        throw new Error('null literal outside = / !=');
    }
  }
}

// Stryker: only called for a comparison with null, so the kind test is for clarity.
function isNullWanted(e: SubjectExpr, negate: boolean): boolean {
  return e.kind === 'compare' && (e.op === '=') !== negate;
}

/** Checks and compiles; throws QueryProblem for a filter the checker refuses. */
export function compileExpr(expr: Expr, symbols: FilterSymbols, flavor: SqlFlavor): Bool {
  checkWhere(expr, symbols);
  return new Compiler(symbols, flavor).compile(expr, false);
}
