// The filter language's lexer: source text → tokens. Hand-written, one pass, no backtracking.
//
// Tokens:
//   ident     a name: [A-Za-z_][A-Za-z0-9_]* followed by any number of `.segment`, where a segment is
//             [A-Za-z0-9_-]+ (so `tags.my-key` is one token). Keywords are idents the parser
//             recognises case-insensitively; field names are case-sensitive.
//   string    "..." with the escapes \" \\ \n \r \t (any other backslash is an error)
//   number    -?[0-9]+(.[0-9]+)?  — no exponent, no leading or trailing dot
//   datetime  datetime(<RFC 3339>), value normalised (see datetime.ts)
//   op        = != < <= > >=
//   ( ) [ ] ,
//   eof

import { isSubMillisecond, normaliseDateTime } from './datetime.js';
import { QueryProblem, quote } from './problem.js';

export type TokenKind =
  | 'ident'
  | 'string'
  | 'number'
  | 'datetime'
  | 'op'
  | 'lparen'
  | 'rparen'
  | 'lbracket'
  | 'rbracket'
  | 'comma'
  | 'eof';

export interface Token {
  kind: TokenKind;
  /** The source text of the token (for `string`, including the quotes). */
  text: string;
  /** 0-based offset of the first character. */
  pos: number;
  /** Decoded string, normalised datetime. */
  str?: string;
  /** Numeric value of a number token; Infinity, or an inexact integer, when out of range. */
  num?: number;
  /** A datetime token's instant lies within the millisecond after `str` (isSubMillisecond). */
  subMillisecond?: boolean;
}

const isDigit = (c: string): boolean => c >= '0' && c <= '9';
const isIdentStart = (c: string): boolean => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_';
const isIdentPart = (c: string): boolean => isIdentStart(c) || isDigit(c);
const isSegmentPart = (c: string): boolean => isIdentPart(c) || c === '-';
const isSpace = (c: string): boolean => c === ' ' || c === '\t' || c === '\n' || c === '\r';

const ESCAPES = new Map([
  ['"', '"'],
  ['\\', '\\'],
  ['n', '\n'],
  ['r', '\r'],
  ['t', '\t'],
]);

const PUNCT = new Map<string, TokenKind>([
  ['(', 'lparen'],
  [')', 'rparen'],
  ['[', 'lbracket'],
  [']', 'rbracket'],
  [',', 'comma'],
]);

/**
 * Produces tokens on demand, so the first problem reported is the first one in the text whether it
 * is lexical or syntactic. After the end of the text, `next()` keeps returning the eof token.
 */
export class Lexer {
  private i = 0;

  constructor(private readonly src: string) {}

  next(): Token {
    const src = this.src;
    const n = src.length;
    // Stryker: past the end src[k] is undefined, which no character test here accepts, so dropping or
    // loosening the `< n` bounds of `at` and of the loops below (and the `>= n` of strings) changes nothing.
    const at = (k: number): string => (k < n ? src[k]! : '');
    let i = this.i;
    while (i < n && isSpace(src[i]!)) i++;
    if (i >= n) {
      this.i = n;
      // Stryker: the text of eof and string tokens is never read (messages use `end of` and `str`).
      return { kind: 'eof', text: '', pos: n };
    }
    const start = i;
    const c = src[i]!;
    const token = (tok: Token): Token => {
      this.i = i;
      return tok;
    };

    if (c === '"') {
      i++;
      let value = '';
      let chunk = i;
      for (;;) {
        if (i >= n) throw new QueryProblem(start, 'unterminated string: the closing double quote is missing');
        const ch = src[i]!;
        if (ch === '"') break;
        if (ch === '\\') {
          value += src.slice(chunk, i);
          const esc = ESCAPES.get(at(i + 1));
          if (esc === undefined) {
            const what = i + 1 < n ? `\\${at(i + 1)}` : '\\ at the end of the text';
            throw new QueryProblem(i, `invalid escape ${what} in string (allowed: \\" \\\\ \\n \\r \\t)`);
          }
          value += esc;
          i += 2;
          chunk = i;
          continue;
        }
        i++;
      }
      value += src.slice(chunk, i);
      i++;
      // Stryker: as said at eof, a string token's `text` is never read.
      return token({ kind: 'string', text: src.slice(start, i), pos: start, str: value });
    }

    if (isDigit(c) || (c === '-' && isDigit(at(i + 1)))) {
      i++;
      while (isDigit(at(i))) i++;
      if (at(i) === '.') {
        if (!isDigit(at(i + 1))) throw new QueryProblem(start, `invalid number ${quote(src.slice(start, i + 1))}`);
        i++;
        while (isDigit(at(i))) i++;
      }
      if (at(i) === '.' || isIdentPart(at(i))) {
        let end = i;
        while (end < n && (isSegmentPart(src[end]!) || src[end] === '.')) end++;
        throw new QueryProblem(start, `invalid number ${quote(src.slice(start, end))}`);
      }
      // Whether the value is in range is for the parser: a literal must be, a page size need not.
      const text = src.slice(start, i);
      return token({ kind: 'number', text, pos: start, num: Number(text) });
    }

    if (isIdentStart(c)) {
      i++;
      while (isIdentPart(at(i))) i++;
      while (at(i) === '.') {
        if (!isSegmentPart(at(i + 1))) {
          throw new QueryProblem(i + 1, `expected a name after "." in ${quote(src.slice(start, i + 1))}`);
        }
        i++;
        while (isSegmentPart(at(i))) i++;
      }
      const text = src.slice(start, i);
      if (text.toLowerCase() === 'datetime') {
        let j = i;
        while (j < n && isSpace(src[j]!)) j++;
        if (at(j) === '(') {
          // Stryker: src[j - 1] and src[j] are never ")", and close > j > 0, so `j - 1` or `<= 0` is the same.
          const close = src.indexOf(')', j + 1);
          if (close < 0) throw new QueryProblem(start, 'unterminated datetime(...): the closing ")" is missing');
          const raw = src.slice(j + 1, close);
          const inner = raw.trim();
          const innerPos = j + 1 + (raw.length - raw.trimStart().length);
          const value = normaliseDateTime(inner);
          if (value === undefined) {
            throw new QueryProblem(
              innerPos,
              `invalid datetime ${quote(inner)} (expected RFC 3339 with an offset, e.g. 2026-01-02T03:04:05Z)`,
            );
          }
          i = close + 1;
          return token({ kind: 'datetime', text: src.slice(start, i), pos: start, str: value, subMillisecond: isSubMillisecond(inner) });
        }
      }
      return token({ kind: 'ident', text, pos: start });
    }

    const punct = PUNCT.get(c);
    if (punct !== undefined) {
      i++;
      return token({ kind: punct, text: c, pos: start });
    }

    if (c === '=') {
      i++;
      return token({ kind: 'op', text: '=', pos: start });
    }
    if (c === '!' || c === '<' || c === '>') {
      if (at(i + 1) === '=') {
        i += 2;
        return token({ kind: 'op', text: `${c}=`, pos: start });
      }
      if (c === '!') throw new QueryProblem(start, 'unexpected "!" (did you mean "!=" or "not"?)');
      i++;
      return token({ kind: 'op', text: c, pos: start });
    }

    const cp = src.codePointAt(i)!;
    throw new QueryProblem(start, `unexpected character ${quote(String.fromCodePoint(cp))}`);
  }
}
