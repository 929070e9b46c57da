import { randomFillSync, randomUUID } from 'node:crypto';

/** Random bytes drawn at a time from the CSPRNG; each call into it costs more than the bytes. */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let drawn = POOL_BYTES;

/**
 * `bytes` random bytes, URL-safe base64: taken from a pool filled by the CSPRNG a page at a time
 * (as randomUUID does), and wiped from the pool once taken.
 */
export function randomBase64url(bytes: number): string {
  if (bytes > POOL_BYTES) throw new RangeError(`at most ${POOL_BYTES} random bytes at a time`);
  if (drawn + bytes > POOL_BYTES) {
    randomFillSync(pool);
    drawn = 0;
  }
  const text = pool.toString('base64url', drawn, drawn + bytes);
  pool.fill(0, drawn, drawn + bytes);
  drawn += bytes;
  return text;
}

/** A short, URL-safe, random entity id (11 characters of [0-9A-Za-z_-]). Never used as a secret. */
export function newId(): string {
  return randomBase64url(8);
}

export { randomUUID as newUuid };
