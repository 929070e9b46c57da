// Passwords: Argon2id hashes (at least 19 MiB and 2 passes), constant-time checks, upgrades of
// hashes made under weaker parameters, and the auth policy's password rules.
import { hash, verify } from '@node-rs/argon2';
import { fieldError } from '../errors.js';

export const ARGON2_PARAMS = { algorithm: 2 /* Argon2id */, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return hash(password, ARGON2_PARAMS);
}

// Checked against when no account matches, so a wrong username costs what a wrong password does.
let dummyHash: Promise<string> | undefined;

export interface PasswordCheck {
  ok: boolean;
  /** The stored hash was made with weaker parameters than today's: store a new one. */
  needsRehash: boolean;
}

export async function verifyPassword(storedHash: string | null | undefined, password: string): Promise<PasswordCheck> {
  if (!storedHash) {
    dummyHash ??= hashPassword('not a password of anyone');
    await verify(await dummyHash, password).catch(() => false);
    return { ok: false, needsRehash: false };
  }
  const ok = await verify(storedHash, password).catch(() => false);
  return { ok, needsRehash: ok && isWeaker(storedHash) };
}

/** True when a PHC string is not Argon2id or uses less memory, time or parallelism than today. */
export function isWeaker(phc: string): boolean {
  const m = /^\$(argon2(?:id|i|d))\$v=(\d+)\$m=(\d+),t=(\d+),p=(\d+)\$/.exec(phc);
  if (!m) return true;
  return (
    m[1] !== 'argon2id' ||
    Number(m[2]) < 19 ||
    Number(m[3]) < ARGON2_PARAMS.memoryCost ||
    Number(m[4]) < ARGON2_PARAMS.timeCost
  );
}

export interface PasswordRules {
  minPasswordLength: number;
  requireMixedCase: boolean;
  requireNumberChar: boolean;
  requireSpecialChar: boolean;
}

/** Throws 400 COULD_NOT_VALIDATE naming `field` when the password breaks a rule of the policy. */
export function checkPasswordRules(password: string, rules: PasswordRules, field = 'password'): void {
  const fail = (reason: string) => {
    throw fieldError(field, reason);
  };
  if ([...password].length < rules.minPasswordLength) fail(`must be at least ${rules.minPasswordLength} characters`);
  if (rules.requireMixedCase && !(/\p{Lu}/u.test(password) && /\p{Ll}/u.test(password))) {
    fail('must contain upper and lower case letters');
  }
  if (rules.requireNumberChar && !/\p{Nd}/u.test(password)) fail('must contain a digit');
  if (rules.requireSpecialChar && !/[^\p{L}\p{Nd}]/u.test(password)) fail('must contain a special character');
}
