import { describe, expect, it } from 'vitest';
import {
  matchingStep,
  newRecoveryCodes,
  newTotpSecret,
  normalRecoveryCode,
  normalTotpCode,
  provisioningUrl,
  RECOVERY_CODE_COUNT,
  totpCode,
} from './totp.js';

/** RFC 6238 appendix B, SHA-1: the secret "12345678901234567890", codes cut to 6 digits. */
const RFC_SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';
const RFC_VECTORS: [number, string][] = [
  [59, '287082'],
  [1111111109, '081804'],
  [1111111111, '050471'],
  [1234567890, '005924'],
  [2000000000, '279037'],
  [20000000000, '353130'],
];

describe('TOTP', () => {
  it.each(RFC_VECTORS)('at %i s the code is %s (RFC 6238)', (seconds, code) => {
    expect(totpCode(RFC_SECRET, seconds * 1000)).toBe(code);
    expect(matchingStep(RFC_SECRET, code, seconds * 1000)).toBe(Math.floor(seconds / 30));
  });

  it('accepts one step either side and nothing further', () => {
    const now = 1234567890_000;
    const step = Math.floor(now / 30_000);
    const at = (s: number) => totpCode(RFC_SECRET, s * 30_000);
    expect(matchingStep(RFC_SECRET, at(step - 1), now)).toBe(step - 1);
    expect(matchingStep(RFC_SECRET, at(step + 1), now)).toBe(step + 1);
    expect(matchingStep(RFC_SECRET, at(step - 2), now)).toBeUndefined();
    expect(matchingStep(RFC_SECRET, at(step + 2), now)).toBeUndefined();
  });

  it.each(['', '12345', '1234567', '12345a', ' 005924', '00592４'])('refuses %j, not six digits', (code) => {
    expect(matchingStep(RFC_SECRET, code, 1234567890_000)).toBeUndefined();
  });

  it('makes 160-bit secrets, each new', () => {
    const secret = newTotpSecret();
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(newTotpSecret()).not.toBe(secret);
  });

  it('writes the provisioning URL of behaviour.md, escaping the name and issuer', () => {
    expect(provisioningUrl('overlay', 'alice', RFC_SECRET)).toBe(`otpauth://totp/alice?issuer=overlay&secret=${RFC_SECRET}`);
    expect(provisioningUrl('my org', 'a/b?c', 'S')).toBe('otpauth://totp/a%2Fb%3Fc?issuer=my%20org&secret=S');
  });
});

describe('recovery codes', () => {
  it('are 20 codes of 6 base32 characters', () => {
    const codes = newRecoveryCodes();
    expect(codes).toHaveLength(RECOVERY_CODE_COUNT);
    for (const c of codes) expect(c).toMatch(/^[A-Z2-7]{6}$/);
    expect(new Set([...codes, ...newRecoveryCodes()]).size).toBeGreaterThan(30);
  });

  it.each([
    ['ABC234', 'ABC234'],
    ['abc234', 'ABC234'],
    ['  abc234 ', 'ABC234'],
    ['ABC23', undefined],
    ['ABC2345', undefined],
    ['ABC01O', undefined],
    ['ABC-34', undefined],
  ])('reads %j as %j', (typed, read) => {
    expect(normalRecoveryCode(typed)).toBe(read);
  });

  it.each([
    ['123456', '123456'],
    [' 123456 ', '123456'],
    ['123 456', '123456'],
    ['\t123456\n', '123456'],
    ['12345', undefined],
    ['1234567', undefined],
    ['12345a', undefined],
    ['\u0661\u0662\u0663\u0664\u0665\u0666', undefined],
    ['', undefined],
  ])('reads the TOTP code %j as %j', (typed, read) => {
    expect(normalTotpCode(typed)).toBe(read);
  });
});
