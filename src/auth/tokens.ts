import { createHash, timingSafeEqual } from 'node:crypto';
import { randomBase64url } from '../ids.js';

/** An opaque bearer secret: 256 random bits, URL-safe. */
export function newToken(): string {
  return randomBase64url(32);
}

/** What the store keeps of a token: its SHA-256, so a copy of the database holds no usable token. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export function constantTimeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
