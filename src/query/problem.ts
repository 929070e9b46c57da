// How the filter language reports problems. Lexer, parser and checker throw `QueryProblem` with a
// 0-based offset; the public entry points turn it into an ApiError that names the place 1-based, as
// "character N", and quotes the text the client sent.

import { ApiError, type ErrorCode } from '../errors.js';

export class QueryProblem extends Error {
  constructor(
    /** 0-based offset into the source text. */
    readonly pos: number,
    /** What was wrong, phrased to follow "at character N: ". */
    readonly detail: string,
  ) {
    super(detail);
    this.name = 'QueryProblem';
  }
}

/**
 * The error the API returns. `param` is the request parameter the text came from (`filter` or
 * `sort`); `text` is that parameter's value when known.
 */
export function queryError(
  code: Extract<ErrorCode, 'INVALID_FILTER' | 'INVALID_SORT_IDENTIFIER'>,
  param: 'filter' | 'sort',
  pos: number,
  detail: string,
  text: string | undefined,
): ApiError {
  const reason = `at character ${pos + 1}: ${detail}`;
  return new ApiError(code, `invalid ${param} ${reason}`, { field: param, reason, value: text });
}

/** Shows a piece of user text in a message: quoted, and cut short when long. */
export function quote(text: string, max = 40): string {
  const cut = text.length > max ? `${text.slice(0, max)}...` : text;
  return JSON.stringify(cut);
}
