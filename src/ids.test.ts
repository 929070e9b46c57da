import { describe, expect, it } from 'vitest';
import { newId, newUuid, randomBase64url } from './ids.js';

describe('random text from the pool', () => {
  it('is the number of bytes asked for, URL-safe, and never repeats across pool refills', () => {
    // 32 bytes a draw: 4,096 / 32 = 128 draws a fill, so 1,000 draws cross seven refills.
    const drawn = Array.from({ length: 1000 }, () => randomBase64url(32));
    for (const text of drawn) {
      expect(text).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(text, 'base64url')).toHaveLength(32);
    }
    expect(new Set(drawn).size).toBe(drawn.length);
  });

  it('takes draws that do not divide the pool, and refuses more than a pool at once', () => {
    const odd = Array.from({ length: 700 }, () => randomBase64url(7));
    expect(new Set(odd).size).toBe(odd.length);
    for (const text of odd) expect(Buffer.from(text, 'base64url')).toHaveLength(7);
    expect(randomBase64url(4096)).toHaveLength(Math.ceil((4096 * 4) / 3));
    expect(() => randomBase64url(4097)).toThrow(RangeError);
  });

  it('makes entity ids of 11 characters', () => {
    const ids = Array.from({ length: 500 }, () => newId());
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{11}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('makes version 7 UUIDs: the time first, so ids made later sort later', () => {
    const now = Date.parse('2026-11-26T12:00:00.000Z');
    const ids = Array.from({ length: 500 }, (_, i) => newUuid(now + Math.floor(i / 10)));
    for (const id of ids) {
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    expect(parseInt(ids[0]!.replace(/-/g, '').slice(0, 12), 16)).toBe(now);
    expect(parseInt(ids[499]!.replace(/-/g, '').slice(0, 12), 16)).toBe(now + 49);
    expect(new Set(ids).size).toBe(ids.length);
    // Ordered by their milliseconds (within one, at random).
    const byTime = ids.filter((_, i) => i % 10 === 0);
    expect([...byTime].sort()).toEqual(byTime);
    expect(newUuid(0)).toMatch(/^00000000-0000-7/);
  });
});
