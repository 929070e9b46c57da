// Bearer secrets: their size and alphabet, the hash the store keeps, and the comparison that takes
// the same time whatever the difference (and never throws on a length mismatch).
import { describe, expect, it } from 'vitest';
import { constantTimeEqual, hashToken, newToken } from './tokens.js';

describe('newToken', () => {
  it('is 256 random bits, URL-safe, and never the same twice', () => {
    const tokens = new Set(Array.from({ length: 200 }, () => newToken()));
    expect(tokens.size).toBe(200);
    for (const token of tokens) {
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(token, 'base64url')).toHaveLength(32);
    }
  });
});

describe('hashToken', () => {
  it('is the SHA-256 of the token, in hex', () => {
    expect(hashToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(hashToken('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });
});

describe('constantTimeEqual', () => {
  it('is true for the same text only', () => {
    const token = newToken();
    expect(constantTimeEqual(token, `${token}`)).toBe(true);
    expect(constantTimeEqual('', '')).toBe(true);
    expect(constantTimeEqual(token, `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`)).toBe(false);
  });

  it('is false, without throwing, for texts of different lengths', () => {
    expect(constantTimeEqual('abc', 'abcd')).toBe(false);
    expect(constantTimeEqual('abcd', 'abc')).toBe(false);
    expect(constantTimeEqual('', 'a')).toBe(false);
    // The same number of characters, not of bytes.
    expect(constantTimeEqual('é', 'e')).toBe(false);
  });
});
