import { describe, expect, it } from 'vitest';
import { newId, randomBase64url } from './ids.js';

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
});
