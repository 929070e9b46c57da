// Assertions the filter-language tests share: the ApiError a call throws, and the character
// position its message names.
import { expect } from 'vitest';
import { ApiError } from '../errors.js';

/** Runs `fn`, expecting an ApiError; returns it. */
export function apiError(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error('expected an ApiError, nothing was thrown');
}

/** The 1-based character position an error message names. */
export function position(err: ApiError): number {
  const m = /at character (\d+)/.exec(err.message);
  expect(m, err.message).not.toBeNull();
  return Number(m![1]);
}
