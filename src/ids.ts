import { randomFillSync } from 'node:crypto';

/** Random bytes drawn at a time from the CSPRNG; each call into it costs more than the bytes. */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let drawn = POOL_BYTES;

/** The offset of `bytes` fresh random bytes in the pool, refilled when too few are left; the caller wipes them. */
function draw(bytes: number): number {
  if (bytes > POOL_BYTES) throw new RangeError(`at most ${POOL_BYTES} random bytes at a time`);
  if (drawn + bytes > POOL_BYTES) {
    randomFillSync(pool);
    drawn = 0;
  }
  const at = drawn;
  drawn += bytes;
  return at;
}

/**
 * `bytes` random bytes, URL-safe base64: taken from a pool filled by the CSPRNG a page at a time
 * (as randomUUID does), and wiped from the pool once taken.
 */
export function randomBase64url(bytes: number): string {
  const at = draw(bytes);
  const text = pool.toString('base64url', at, at + bytes);
  pool.fill(0, at, at + bytes);
  return text;
}

/** A short, URL-safe, random entity id (11 characters of [0-9A-Za-z_-]). Never used as a secret. */
export function newId(): string {
  return randomBase64url(8);
}

const uuid = Buffer.alloc(16);

/**
 * A UUID of version 7 (RFC 9562): the time `now` in ms, then 74 random bits. Records made in order
 * get ids in order, so each insert adds to the end of the id index instead of to a random page of
 * it (a page written per record and index, and copied again at the checkpoint). Never a secret.
 */
export function newUuid(now: number): string {
  uuid.writeUIntBE(Math.max(0, Math.floor(now)) % 2 ** 48, 0, 6);
  const at = draw(10);
  pool.copy(uuid, 6, at, at + 10);
  pool.fill(0, at, at + 10);
  uuid[6] = 0x70 | (uuid[6]! & 0x0f);
  uuid[8] = 0x80 | (uuid[8]! & 0x3f);
  const hex = uuid.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
