import { hash } from '@node-rs/argon2';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../errors.js';
import { ARGON2_PARAMS, checkPasswordRules, hashPassword, isWeaker, verifyPassword, type PasswordRules } from './passwords.js';

const LAX: PasswordRules = { minPasswordLength: 5, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false };
const STRICT: PasswordRules = { minPasswordLength: 10, requireMixedCase: true, requireNumberChar: true, requireSpecialChar: true };

const SALT = 'c29tZXNhbHRzb21lc2FsdA';
const HASH = 'ZGlnZXN0ZGlnZXN0ZGlnZXN0ZGlnZXN0ZGlnZXN0ZGk';

describe('isWeaker', () => {
  const cases: [string, boolean][] = [
    [`$argon2id$v=19$m=19456,t=2,p=1$${SALT}$${HASH}`, false],
    [`$argon2id$v=19$m=65536,t=3,p=4$${SALT}$${HASH}`, false],
    [`$argon2id$v=19$m=19456,t=2,p=2$${SALT}$${HASH}`, false],
    [`$argon2id$v=19$m=8192,t=2,p=1$${SALT}$${HASH}`, true],
    [`$argon2id$v=19$m=19455,t=2,p=1$${SALT}$${HASH}`, true],
    [`$argon2id$v=19$m=19456,t=1,p=1$${SALT}$${HASH}`, true],
    [`$argon2id$v=16$m=19456,t=2,p=1$${SALT}$${HASH}`, true],
    [`$argon2i$v=19$m=19456,t=2,p=1$${SALT}$${HASH}`, true],
    [`$argon2d$v=19$m=19456,t=2,p=1$${SALT}$${HASH}`, true],
    ['$2b$12$abcdefghijklmnopqrstuuFz0vAbCdEfGhIjKlMnOpQrStUvWxYz', true],
    ['not a hash', true],
    ['', true],
  ];
  it.each(cases)('%s → %s', (phc, expected) => {
    expect(isWeaker(phc)).toBe(expected);
  });

  it('judges real hashes: today\'s parameters are not weaker, lower ones are', async () => {
    expect(isWeaker(await hashPassword('some password'))).toBe(false);
    const weak = await hash('some password', { algorithm: 2, memoryCost: 8192, timeCost: 1, parallelism: 1 });
    expect(isWeaker(weak)).toBe(true);
  });
});

describe('hashPassword / verifyPassword', () => {
  it('hashes with Argon2id at the minimum parameters or more, salted', async () => {
    const a = await hashPassword('correct horse');
    const b = await hashPassword('correct horse');
    const m = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$/.exec(a);
    expect(m).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThanOrEqual(19_456);
    expect(Number(m![2])).toBeGreaterThanOrEqual(2);
    expect(ARGON2_PARAMS.algorithm).toBe(2);
    expect(a).not.toBe(b);
    expect(a).not.toContain('correct horse');
  });

  it('verifies the right password and refuses a wrong one', async () => {
    const stored = await hashPassword('correct horse');
    expect(await verifyPassword(stored, 'correct horse')).toEqual({ ok: true, needsRehash: false });
    expect(await verifyPassword(stored, 'correct horsf')).toEqual({ ok: false, needsRehash: false });
    expect(await verifyPassword(stored, '')).toEqual({ ok: false, needsRehash: false });
  });

  it('asks for a rehash only after a successful check of a weaker hash', async () => {
    const weak = await hash('correct horse', { algorithm: 2, memoryCost: 8192, timeCost: 1, parallelism: 1 });
    expect(await verifyPassword(weak, 'correct horse')).toEqual({ ok: true, needsRehash: true });
    expect(await verifyPassword(weak, 'wrong horse')).toEqual({ ok: false, needsRehash: false });
  });

  it('refuses when there is no stored hash or it is garbage', async () => {
    expect(await verifyPassword(undefined, 'x')).toEqual({ ok: false, needsRehash: false });
    expect(await verifyPassword(null, 'x')).toEqual({ ok: false, needsRehash: false });
    expect(await verifyPassword('garbage', 'x')).toEqual({ ok: false, needsRehash: false });
  });
});

describe('checkPasswordRules', () => {
  const cases: [string, string, PasswordRules, string | null][] = [
    ['minimum length met', 'abcde', LAX, null],
    ['one short of the minimum', 'abcd', LAX, 'at least 5'],
    ['length counts characters, not UTF-16 units', '🔒🔒🔒🔒🔒', LAX, null],
    ['astral characters below the minimum', '🔒🔒', LAX, 'at least 5'],
    ['a longer minimum', 'abcdefghi', { ...LAX, minPasswordLength: 10 }, 'at least 10'],
    ['mixed case met', 'abcDE', { ...LAX, requireMixedCase: true }, null],
    ['mixed case met with non-ASCII letters', 'äbcdÖ', { ...LAX, requireMixedCase: true }, null],
    ['lower case only', 'abcde', { ...LAX, requireMixedCase: true }, 'upper and lower'],
    ['upper case only', 'ABCDE', { ...LAX, requireMixedCase: true }, 'upper and lower'],
    ['digit met', 'abcd1', { ...LAX, requireNumberChar: true }, null],
    ['no digit', 'abcde', { ...LAX, requireNumberChar: true }, 'digit'],
    ['special met', 'abcd!', { ...LAX, requireSpecialChar: true }, null],
    ['a space is special', 'ab cd', { ...LAX, requireSpecialChar: true }, null],
    ['letters and digits are not special', 'abc12', { ...LAX, requireSpecialChar: true }, 'special'],
    ['everything at once', 'Good-Pass123', STRICT, null],
    ['strict: too short', 'Go-d1', STRICT, 'at least 10'],
    ['strict: no upper case', 'good-pass123', STRICT, 'upper and lower'],
    ['strict: no digit', 'Good-Password', STRICT, 'digit'],
    ['strict: no special', 'GoodPass1234', STRICT, 'special'],
  ];

  it.each(cases)('%s', (_name, password, rules, failure) => {
    if (failure === null) {
      expect(() => checkPasswordRules(password, rules)).not.toThrow();
      return;
    }
    let error: unknown;
    try {
      checkPasswordRules(password, rules);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ApiError);
    const apiError = error as ApiError;
    expect(apiError.code).toBe('COULD_NOT_VALIDATE');
    expect(apiError.status).toBe(400);
    expect(apiError.cause).toMatchObject({ field: 'password' });
    expect((apiError.cause as { reason: string }).reason).toContain(failure);
  });

  it('names the field it is told to', () => {
    expect(() => checkPasswordRules('abc', LAX, 'newPassword')).toThrow(
      expect.objectContaining({ cause: expect.objectContaining({ field: 'newPassword' }) }),
    );
  });

  it('never echoes the password back', () => {
    try {
      checkPasswordRules('secretive', STRICT);
      expect.unreachable();
    } catch (err) {
      expect(JSON.stringify((err as ApiError).cause)).not.toContain('secretive');
      expect((err as ApiError).message).not.toContain('secretive');
    }
  });
});
