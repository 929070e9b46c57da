// Recursive-descent parser for the filter language (behaviour.md §3).
//
//   query      := [or] [sort] [skip] [limit] EOF
//   or         := and ("or" and)*
//   and        := unary ("and" unary)*
//   unary      := "not" unary | primary
//   primary    := "(" or ")"
//               | "true" | "false"             -- a whole condition: every row, or none
//               | "isEmpty" "(" name ")"
//               | subject [predicate]          -- no predicate: a bare boolean field
//   subject    := name | ("anyOf" | "allOf" | "count") "(" name ")"
//   predicate  := op value
//               | ["not"] "in" "[" [value ("," value)*] "]"
//               | ["not"] "between" value "and" value
//               | ["not"] ("contains" | "icontains") value
//   value      := string | number | "true" | "false" | "null" | datetime
//   sort       := "sort" "by" sortList
//   sortList   := name ["asc" | "desc"] ("," name ["asc" | "desc"])*
//   skip       := "skip" N          limit := "limit" (N | "none")     N: an integer, negative too
//
// The integers of `skip` and `limit` are taken as written, out of range too; the list decides the
// page they give (http/list.ts).
//
// Keywords are case-insensitive. The words in RESERVED cannot be field names; the function names and
// `by`, `asc`, `desc`, `none` are keywords only where the grammar expects them.
//
// Bounds: nesting (parentheses and `not`) is capped at MAX_DEPTH, arrays at MAX_ARRAY_ITEMS, the
// number of predicates at MAX_PREDICATES and of literal values at MAX_VALUES, so no filter can exhaust
// the stack or produce a statement the database refuses. `and` / `or` chains are kept flat.

import type {
  Expr,
  FieldRef,
  Literal,
  ParsedQuery,
  SortKey,
  Subject,
  CompareOp,
} from './ast.js';
import { Lexer, type Token } from './lexer.js';
import { QueryProblem, quote } from './problem.js';

export const MAX_DEPTH = 32;
export const MAX_ARRAY_ITEMS = 1000;
export const MAX_PREDICATES = 1000;
export const MAX_VALUES = 5000;

const RESERVED = new Set([
  'and',
  'or',
  'not',
  'in',
  'between',
  'contains',
  'icontains',
  'true',
  'false',
  'null',
  'sort',
  'skip',
  'limit',
]);

const FUNCTIONS = new Map<string, 'anyOf' | 'allOf' | 'count' | 'isEmpty'>([
  ['anyof', 'anyOf'],
  ['allof', 'allOf'],
  ['count', 'count'],
  ['isempty', 'isEmpty'],
]);

type Source = 'filter' | 'sort';

function describe(tok: Token, source: Source): string {
  switch (tok.kind) {
    case 'eof':
      return `end of ${source}`;
    case 'string':
      // Stryker: a string token always has `str`; the datetime case below gives what the default would.
      return `string ${quote(tok.str ?? '')}`;
    case 'number':
      return `number ${tok.text}`;
    case 'datetime':
      return quote(tok.text);
    case 'ident':
      return RESERVED.has(tok.text.toLowerCase()) ? `keyword ${quote(tok.text)}` : quote(tok.text);
    default:
      return quote(tok.text);
  }
}

class Parser {
  private readonly lexer: Lexer;
  /** The lookahead token; the lexer runs one token ahead of the parser, never further. */
  private current: Token;
  private depth = 0;
  private predicates = 0;
  private values = 0;

  constructor(
    private readonly src: string,
    private readonly source: Source,
  ) {
    this.lexer = new Lexer(src);
    this.current = this.lexer.next();
  }

  // ---- token helpers ----

  private peek(): Token {
    return this.current;
  }

  private next(): Token {
    const tok = this.current;
    // Stryker: after the end the lexer answers eof again, so the test only saves a call.
    if (tok.kind !== 'eof') this.current = this.lexer.next();
    return tok;
  }

  // Stryker: only an ident's text can spell a keyword, so the kind test is for clarity.
  private isKw(word: string, tok: Token = this.peek()): boolean {
    return tok.kind === 'ident' && tok.text.toLowerCase() === word;
  }

  private fail(tok: Token, expected: string): never {
    throw new QueryProblem(tok.pos, `expected ${expected}, found ${describe(tok, this.source)}`);
  }

  private expectKw(word: string, expected: string = quote(word)): Token {
    const tok = this.peek();
    if (!this.isKw(word)) this.fail(tok, expected);
    return this.next();
  }

  private expectName(what: string): FieldRef {
    const tok = this.peek();
    if (tok.kind !== 'ident' || RESERVED.has(tok.text.toLowerCase())) this.fail(tok, what);
    this.next();
    return { name: tok.text, pos: tok.pos };
  }

  private enter(tok: Token): void {
    this.depth++;
    if (this.depth > MAX_DEPTH) {
      throw new QueryProblem(tok.pos, `filter is nested too deeply (at most ${MAX_DEPTH} levels of parentheses and "not")`);
    }
  }

  private leave(): void {
    this.depth--;
  }

  // ---- query ----

  parseQuery(): ParsedQuery {
    const q: ParsedQuery = {};
    const follow: string[] = [];
    const clauseStart = (): boolean => this.isKw('sort') || this.isKw('skip') || this.isKw('limit');

    if (this.peek().kind !== 'eof' && !clauseStart()) {
      q.where = this.parseOr();
      follow.push('"and"', '"or"');
    }
    if (this.isKw('sort')) {
      this.next();
      this.expectKw('by', '"by" after "sort"');
      q.sort = this.parseSortList();
      follow.length = 0;
      follow.push('","');
    }
    if (this.isKw('skip')) {
      this.next();
      q.skip = this.parseCount('skip');
      follow.length = 0;
    }
    if (this.isKw('limit')) {
      this.next();
      if (this.isKw('none')) {
        this.next();
        q.limit = 'none';
      } else {
        q.limit = this.parseCount('limit', ' or "none"');
      }
      follow.length = 0;
    }
    const tok = this.peek();
    if (tok.kind !== 'eof') {
      if (q.sort === undefined && q.skip === undefined && q.limit === undefined) follow.push('"sort by"');
      if (q.skip === undefined && q.limit === undefined) follow.push('"skip"');
      if (q.limit === undefined) follow.push('"limit"');
      follow.push('end of filter');
      const order =
        this.isKw('sort') || this.isKw('skip') || this.isKw('limit')
          ? ' (clauses come once each, in the order sort by, skip, limit)'
          : '';
      throw new QueryProblem(tok.pos, `expected ${listOf(follow)}, found ${describe(tok, this.source)}${order}`);
    }
    return q;
  }

  /** The sort query parameter: a sort list and nothing else (empty text: no keys). */
  parseSortParam(): SortKey[] {
    if (this.peek().kind === 'eof') return [];
    const keys = this.parseSortList();
    const tok = this.peek();
    if (tok.kind !== 'eof') this.fail(tok, '"," or end of sort');
    return keys;
  }

  private parseSortList(): SortKey[] {
    const keys: SortKey[] = [];
    for (;;) {
      const field = this.expectName('a field name to sort by');
      let direction: 'asc' | 'desc' = 'asc';
      if (this.isKw('asc')) {
        this.next();
      } else if (this.isKw('desc')) {
        this.next();
        direction = 'desc';
      } else if (this.source === 'sort' && this.peek().kind !== 'comma' && this.peek().kind !== 'eof') {
        this.fail(this.peek(), '"asc", "desc", "," or end of sort');
      }
      keys.push({
        field: field.name,
        direction,
        origin: { param: this.source, text: this.src, pos: field.pos },
      });
      if (keys.length > MAX_ARRAY_ITEMS) {
        throw new QueryProblem(field.pos, `too many sort fields (at most ${MAX_ARRAY_ITEMS})`);
      }
      if (this.peek().kind !== 'comma') return keys;
      this.next();
    }
  }

  private parseCount(clause: 'skip' | 'limit', alt = ''): number {
    const tok = this.peek();
    if (tok.kind !== 'number' || tok.text.includes('.')) this.fail(tok, `an integer${alt} after "${clause}"`);
    this.next();
    return tok.num!;
  }

  // ---- expressions ----

  private parseOr(): Expr {
    const first = this.parseAnd();
    if (!this.isKw('or')) return first;
    const operands = [first];
    while (this.isKw('or')) {
      this.next();
      operands.push(this.parseAnd());
    }
    return { kind: 'or', operands, pos: first.pos };
  }

  private parseAnd(): Expr {
    const first = this.parseUnary();
    if (!this.isKw('and')) return first;
    const operands = [first];
    while (this.isKw('and')) {
      this.next();
      operands.push(this.parseUnary());
    }
    return { kind: 'and', operands, pos: first.pos };
  }

  private parseUnary(): Expr {
    if (this.isKw('not')) {
      const tok = this.next();
      this.enter(tok);
      const operand = this.parseUnary();
      this.leave();
      return { kind: 'not', operand, pos: tok.pos };
    }
    return this.parsePrimary();
  }

  private parsePrimary(): Expr {
    const tok = this.peek();
    if (tok.kind === 'lparen') {
      this.next();
      this.enter(tok);
      const inner = this.parseOr();
      const close = this.peek();
      if (close.kind !== 'rparen') this.fail(close, `")" to close the "(" at character ${tok.pos + 1}`);
      this.next();
      this.leave();
      return inner;
    }
    if (this.isKw('true') || this.isKw('false')) {
      this.next();
      this.countPredicate(tok);
      return { kind: 'constant', value: this.isKw('true', tok), pos: tok.pos };
    }
    if (tok.kind !== 'ident' || RESERVED.has(tok.text.toLowerCase())) {
      this.fail(tok, 'a field name, true, false, "not" or "("');
    }
    this.next();
    if (this.peek().kind === 'lparen') {
      const fn = FUNCTIONS.get(tok.text.toLowerCase());
      if (fn === undefined) {
        throw new QueryProblem(tok.pos, `unknown function ${quote(tok.text)} (expected anyOf, allOf, count or isEmpty)`);
      }
      this.next();
      const field = this.expectName(`a field name inside ${fn}(...)`);
      const close = this.peek();
      if (close.kind !== 'rparen') this.fail(close, `")" after ${fn}(${field.name}`);
      this.next();
      if (fn === 'isEmpty') {
        this.countPredicate(tok);
        return { kind: 'isEmpty', field, pos: tok.pos };
      }
      return this.parsePredicate({ kind: fn, field, pos: tok.pos });
    }
    const field: FieldRef = { name: tok.text, pos: tok.pos };
    return this.parsePredicate({ kind: 'field', field, pos: tok.pos });
  }

  private parsePredicate(subject: Subject): Expr {
    let tok = this.peek();
    this.countPredicate(tok);

    if (tok.kind === 'op') {
      this.next();
      const value = this.parseValue(`a value after "${tok.text}"`);
      return { kind: 'compare', subject, op: tok.text as CompareOp, value, pos: tok.pos };
    }

    const opPos = tok.pos;
    let negated = false;
    if (this.isKw('not')) {
      this.next();
      negated = true;
      tok = this.peek();
      if (!['in', 'between', 'contains', 'icontains'].some((w) => this.isKw(w))) {
        this.fail(tok, '"in", "between", "contains" or "icontains" after "not"');
      }
    }

    if (this.isKw('in')) {
      this.next();
      const values = this.parseArray();
      return { kind: 'in', subject, negated, values, pos: opPos };
    }
    if (this.isKw('between')) {
      this.next();
      const low = this.parseValue('a lower bound after "between"');
      this.expectKw('and', '"and" between the bounds of "between"');
      const high = this.parseValue('an upper bound after "and"');
      return { kind: 'between', subject, negated, low, high, pos: opPos };
    }
    if (this.isKw('contains') || this.isKw('icontains')) {
      const caseInsensitive = this.isKw('icontains');
      this.next();
      const value = this.parseValue(`a value after "${caseInsensitive ? 'icontains' : 'contains'}"`);
      return { kind: 'contains', subject, negated, caseInsensitive, value, pos: opPos };
    }

    if (subject.kind !== 'field') {
      this.fail(tok, `a comparison after ${subject.kind}(${subject.field.name})`);
    }
    return { kind: 'isTrue', field: subject.field, pos: subject.pos };
  }

  private countPredicate(tok: Token): void {
    this.predicates++;
    if (this.predicates > MAX_PREDICATES) {
      throw new QueryProblem(tok.pos, `filter has too many conditions (at most ${MAX_PREDICATES})`);
    }
  }

  private parseValue(expected: string): Literal {
    const tok = this.peek();
    let lit: Literal;
    switch (tok.kind) {
      case 'string':
        lit = { kind: 'string', value: tok.str!, pos: tok.pos };
        break;
      case 'number': {
        const integer = !tok.text.includes('.');
        if (!Number.isFinite(tok.num) || (integer && !Number.isSafeInteger(tok.num))) {
          throw new QueryProblem(tok.pos, `number ${quote(tok.text)} is out of range`);
        }
        lit = { kind: 'number', value: tok.num!, integer, pos: tok.pos };
        break;
      }
      case 'datetime':
        lit = { kind: 'datetime', value: tok.str!, subMillisecond: tok.subMillisecond === true, pos: tok.pos };
        break;
      case 'ident': {
        const word = tok.text.toLowerCase();
        if (word === 'true' || word === 'false') lit = { kind: 'boolean', value: word === 'true', pos: tok.pos };
        else if (word === 'null') lit = { kind: 'null', pos: tok.pos };
        else this.fail(tok, `${expected} (a string, number, true, false, null or datetime(...))`);
        break;
      }
      case 'lbracket':
        throw new QueryProblem(tok.pos, `${expected}: a list [...] is only allowed after "in"`);
      default:
        this.fail(tok, `${expected} (a string, number, true, false, null or datetime(...))`);
    }
    this.next();
    this.values++;
    if (this.values > MAX_VALUES) {
      throw new QueryProblem(tok.pos, `filter has too many values (at most ${MAX_VALUES})`);
    }
    return lit;
  }

  private parseArray(): Literal[] {
    const open = this.peek();
    if (open.kind !== 'lbracket') this.fail(open, '"[" to start the list after "in"');
    this.next();
    const values: Literal[] = [];
    if (this.peek().kind === 'rbracket') {
      this.next();
      return values;
    }
    for (;;) {
      const item = this.parseValue('a list item');
      values.push(item);
      if (values.length > MAX_ARRAY_ITEMS) {
        throw new QueryProblem(item.pos, `list has too many items (at most ${MAX_ARRAY_ITEMS})`);
      }
      const tok = this.peek();
      if (tok.kind === 'rbracket') {
        this.next();
        return values;
      }
      if (tok.kind !== 'comma') this.fail(tok, `"," or "]" in the list opened at character ${open.pos + 1}`);
      this.next();
    }
  }
}

function listOf(items: string[]): string {
  // Stryker: the separator of at most one item is never seen.
  if (items.length <= 1) return items.join('');
  return `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`;
}

/** Parses filter text; throws QueryProblem. */
export function parseFilterText(text: string): ParsedQuery {
  const q = new Parser(text, 'filter').parseQuery();
  q.text = text;
  return q;
}

/** Parses the sort query parameter; throws QueryProblem. */
export function parseSortText(text: string): SortKey[] {
  return new Parser(text, 'sort').parseSortParam();
}
