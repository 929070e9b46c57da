import { hash } from 'node:crypto';
import { randomBase64url } from '../ids.js';

/** Characters of the issue time that begin a token: ms in base 36, zero-padded (until the year 5188). */
const TIME_CHARS = 9;
const TIMED_TOKEN = /^[0-9a-z]{9}[A-Za-z0-9_-]{43}$/;

/** A secret of 256 random bits, URL-safe: a code or request id the controller keeps in memory only. */
export function newSecret(): string {
  return randomBase64url(32);
}

/**
 * An opaque bearer secret the store keeps the hash of: its issue time (ms, base 36), then 256
 * random bits, URL-safe. The time is kept in front of its stored hash (see hashToken), so tokens
 * issued in order are stored in order: each adds to the end of the token index instead of to a
 * random page of it.
 */
export function newToken(now: number): string {
  return Math.max(0, Math.floor(now)).toString(36).padStart(TIME_CHARS, '0') + randomBase64url(32);
}

/**
 * What the store keeps of a token: its SHA-256 in hex, so a copy of the database holds no usable
 * token; after the issue time a token of newToken begins with (which is no secret).
 */
export function hashToken(token: string): string {
  const digest = hash('sha256', token, 'hex');
  return TIMED_TOKEN.test(token) ? token.slice(0, TIME_CHARS) + digest : digest;
}

/**
 * Whether two strings are equal, in a time that depends on their length only: every character is
 * compared, with no early exit. (Encoding both into buffers for timingSafeEqual cost more than the
 * rest of a recovery code's check, which compares its digest with each stored one.)
 */
export function constantTimeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  let i = a.length;
  while (i--) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}
