import { describe, expect, it } from 'vitest';
import { iso } from './clock.js';

describe('iso', () => {
  it('formats RFC 3339 UTC with milliseconds, the same time again and another one after it', () => {
    expect(iso(Date.UTC(2026, 0, 2, 3, 4, 5, 6))).toBe('2026-01-02T03:04:05.006Z');
    expect(iso(Date.UTC(2026, 0, 2, 3, 4, 5, 6))).toBe('2026-01-02T03:04:05.006Z');
    expect(iso(Date.UTC(2026, 0, 2, 3, 4, 5, 7))).toBe('2026-01-02T03:04:05.007Z');
    expect(iso(0)).toBe('1970-01-01T00:00:00.000Z');
  });

  it('refuses a time that is not one, every time', () => {
    expect(() => iso(NaN)).toThrow(RangeError);
    expect(() => iso(NaN)).toThrow(RangeError);
    expect(() => iso(Infinity)).toThrow(RangeError);
  });
});
