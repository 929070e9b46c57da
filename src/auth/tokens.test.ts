// Bearer secrets: their size and alphabet, the hash the store keeps, and the comparison that takes
// the same time whatever the difference (and never throws on a length mismatch).
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { constantTimeEqual, hashToken, newSecret, newToken } from './tokens.js';

const NOW = Date.parse('2026-11-26T12:00:00.000Z');

describe('newSecret', () => {
  it('is 256 random bits, URL-safe, and never the same twice', () => {
    const secrets = new Set(Array.from({ length: 200 }, () => newSecret()));
    expect(secrets.size).toBe(200);
    for (const secret of secrets) {
      expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(secret, 'base64url')).toHaveLength(32);
    }
  });
});

describe('newToken', () => {
  it('is the issue time, then 256 random bits, URL-safe, and never the same twice', () => {
    const tokens = new Set(Array.from({ length: 200 }, () => newToken(NOW)));
    expect(tokens.size).toBe(200);
    for (const token of tokens) {
      expect(token).toMatch(/^[0-9a-z]{9}[A-Za-z0-9_-]{43}$/);
      expect(parseInt(token.slice(0, 9), 36)).toBe(NOW);
      expect(Buffer.from(token.slice(9), 'base64url')).toHaveLength(32);
    }
  });

  it('sorts by its issue time, as its stored hash does', () => {
    const times = [0, 1, 999, NOW - 1, NOW, NOW + 1, 36 ** 9 - 1];
    const tokens = times.map((t) => newToken(t));
    expect([...tokens].sort()).toEqual(tokens);
    const hashes = tokens.map((t) => hashToken(t));
    expect([...hashes].sort()).toEqual(hashes);
  });
});

describe('hashToken', () => {
  it('is the SHA-256 of the token, in hex', () => {
    expect(hashToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(hashToken('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('keeps the issue time of a token of newToken before its SHA-256, and nothing else of it', () => {
    const token = newToken(NOW);
    const digest = createHash('sha256').update(token).digest('hex');
    expect(hashToken(token)).toBe(`${token.slice(0, 9)}${digest}`);
    expect(hashToken(token)).not.toContain(token.slice(9, 20));
  });

  it('is the SHA-256 alone of anything else: an older token, a longer one, one of other characters', () => {
    const older = 'A'.repeat(43);
    const sha = (text: string) => createHash('sha256').update(text).digest('hex');
    for (const token of [older, `${newToken(NOW)}x`, `ZZZZZZZZZ${'a'.repeat(43)}`, `000000000${'a'.repeat(42)}.`]) {
      expect(hashToken(token)).toBe(sha(token));
    }
  });
});

describe('constantTimeEqual', () => {
  it('is true for the same text only', () => {
    const token = newToken(NOW);
    expect(constantTimeEqual(token, `${token}`)).toBe(true);
    expect(constantTimeEqual('', '')).toBe(true);
    expect(constantTimeEqual(token, `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`)).toBe(false);
    // A difference anywhere counts, however far from the end.
    expect(constantTimeEqual('xbcd', 'abcd')).toBe(false);
    expect(constantTimeEqual('abxd', 'abcd')).toBe(false);
  });

  it('is false, without throwing, for texts of different lengths', () => {
    expect(constantTimeEqual('abc', 'abcd')).toBe(false);
    expect(constantTimeEqual('abcd', 'abc')).toBe(false);
    expect(constantTimeEqual('', 'a')).toBe(false);
    // The same number of characters, not of bytes.
    expect(constantTimeEqual('é', 'e')).toBe(false);
  });
});
