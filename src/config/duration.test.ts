import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.js';

const S = 1_000;
const M = 60 * S;
const H = 60 * M;

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['90s', 90 * S],
    ['30m', 30 * M],
    ['24h', 24 * H],
    ['1h30m', H + 30 * M],
    ['1h30m15s250ms', H + 30 * M + 15 * S + 250],
    ['1.5h', H + 30 * M],
    ['.5s', 500],
    ['2m0s', 2 * M],
    ['0s', 0],
    ['87600h', 87600 * H],
  ])('%s → %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each([
    ['', /empty/],
    ['30', /a unit is required.*"30s"/],
    ['0', /a unit is required/],
    ['1.5', /a unit is required/],
    ['-5m', /must not be negative/],
    ['+5m', /unexpected "\+"/],
    ['1d', /days are not a unit; use hours/],
    ['30M', /unknown unit "M"/],
    ['10us', /unknown unit "us"/],
    ['1h 30m', /unexpected " " at position 3/],
    ['h', /unexpected "h" at position 1/],
    ['1h30', /a unit is required after 30/],
    ['0.5ms', /whole number of milliseconds/],
    ['9'.repeat(30) + 'h', /too large/],
    ['1h'.repeat(40), /longer than 64 characters/],
  ])('rejects %j', (text, message) => {
    expect(() => parseDuration(text)).toThrow(message);
  });

  it('names the input in the error', () => {
    expect(() => parseDuration('abc')).toThrow('invalid duration "abc"');
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [500, '500ms'],
    [1_500, '1s500ms'],
    [90 * S, '1m30s'],
    [30 * M, '30m'],
    [H + 30 * M, '1h30m'],
    [24 * H, '24h'],
    [31 * M, '31m'],
    [-90 * S, '-1m30s'],
  ])('%d ms → %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it.each([0, 1, 999, 1_000, 59_999, 60_000, 3_600_001, 24 * H + 1, 87_600 * H, 123_456_789])(
    'round-trips %d ms',
    (ms) => {
      expect(parseDuration(formatDuration(ms))).toBe(ms);
    },
  );

  it('rejects non-finite values', () => {
    expect(() => formatDuration(Number.NaN)).toThrow(RangeError);
    expect(() => formatDuration(Number.POSITIVE_INFINITY)).toThrow(RangeError);
  });
});
