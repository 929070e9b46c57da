import { randomBytes, randomUUID } from 'node:crypto';

/** A short, URL-safe, random entity id (11 characters of [0-9A-Za-z_-]). Never used as a secret. */
export function newId(): string {
  return randomBytes(8).toString('base64url');
}

export { randomUUID as newUuid };
