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

describe('iso against the built-in', () => {
  /** The built-in's text, or its RangeError. */
  const builtIn = (t: number): string => {
    try {
      return new Date(t).toISOString();
    } catch (err) {
      return (err as Error).name;
    }
  };
  const ours = (t: number): string => {
    try {
      return iso(t);
    } catch (err) {
      return (err as Error).name;
    }
  };

  it('writes what toISOString writes, across seconds, years of every width, fractions and the range ends', () => {
    const times = [
      0, 1, 999, 1000, -1, -999, -1000, -1001, 0.5, -0.5, 1.9, -1.9, 86_399_999,
      Date.UTC(2026, 10, 28, 23, 59, 59, 999), Date.UTC(2026, 10, 29), Date.UTC(999, 0, 1), Date.UTC(-1, 0, 1, 0, 0, 0, 1),
      Date.UTC(10_000, 0, 1, 0, 0, 0, 42), 8.64e15, -8.64e15, 8.64e15 - 0.5, 8.64e15 + 1, -8.64e15 - 1, NaN, Infinity,
    ];
    // In turn, then alternating with later instants, as a request stamps now and an expiry.
    for (const t of [...times, ...times.flatMap((t) => [t, t + 1_800_000, t + 1, t + 1_800_001])]) expect(ours(t), String(t)).toBe(builtIn(t));
    let t = 1;
    for (let i = 0; i < 5000; i++) {
      t = (t * 48_271) % 2_147_483_647; // a fixed pseudo-random walk over ±3,000 years
      const ms = (t / 2_147_483_647 - 0.5) * 2e14;
      expect(ours(ms), String(ms)).toBe(builtIn(ms));
    }
    expect(ours(8.64e15 + 1)).toBe('RangeError');
  });
});
