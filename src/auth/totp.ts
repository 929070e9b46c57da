// TOTP as behaviour.md §5 fixes it: RFC 6238, SHA-1, 6 digits, 30-second steps, one step either side
// accepted; secrets of 160 bits; recovery codes of 6 base32 characters. Pure: time is passed in.
import { randomBytes, randomInt } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';

export const TOTP_DIGITS = 6;
export const TOTP_PERIOD_SECONDS = 30;
/** Steps accepted either side of the current one. */
export const TOTP_WINDOW = 1;
export const SECRET_BYTES = 20;
export const RECOVERY_CODE_COUNT = 20;
export const RECOVERY_CODE_LENGTH = 6;
const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** A new secret, base32 (160 random bits). */
export function newTotpSecret(): string {
  // Stryker: the library's own default is 20 random bytes too; the size is named here so it is ours.
  return new Secret({ buffer: randomBytes(SECRET_BYTES).buffer }).base32;
}

/** The otpauth URI an authenticator app reads: otpauth://totp/<name>?issuer=<issuer>&secret=<secret>. */
export function provisioningUrl(issuer: string, name: string, secret: string): string {
  return `otpauth://totp/${encodeURIComponent(name)}?issuer=${encodeURIComponent(issuer)}&secret=${secret}`;
}

function totpOf(secret: string): TOTP {
  return new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: TOTP_DIGITS, period: TOTP_PERIOD_SECONDS });
}

/** Whether `code` has the form of a TOTP code (six digits); checked before a secret is opened. */
export function isTotpCodeForm(code: string): boolean {
  return /^[0-9]{6}$/.test(code);
}

/** A TOTP code as typed (spaces around it, or inside as apps show "123 456") in its six-digit form; undefined when it cannot be one. */
export function normalTotpCode(code: string): string | undefined {
  const c = code.replace(/\s/g, '');
  return isTotpCodeForm(c) ? c : undefined;
}

/** The time step a code of `secret` belongs to at `nowMs`, within the window; undefined when it matches none. */
export function matchingStep(secret: string, code: string, nowMs: number): number | undefined {
  // Stryker: the library refuses a code of any other length too, so either anchor alone holds.
  if (!isTotpCodeForm(code)) return undefined;
  const delta = totpOf(secret).validate({ token: code, timestamp: nowMs, window: TOTP_WINDOW });
  return delta === null ? undefined : Math.floor(nowMs / 1000 / TOTP_PERIOD_SECONDS) + delta;
}

/** The code of `secret` at `nowMs` (what an authenticator app shows). */
export function totpCode(secret: string, nowMs: number): string {
  return totpOf(secret).generate({ timestamp: nowMs });
}

/** 20 new recovery codes. */
export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODE_COUNT }, () =>
    Array.from({ length: RECOVERY_CODE_LENGTH }, () => BASE32[randomInt(BASE32.length)]).join(''),
  );
}

/** A recovery code as typed (any case, spaces around) in the form it was made; undefined when it cannot be one. */
export function normalRecoveryCode(code: string): string | undefined {
  const c = code.trim().toUpperCase();
  return c.length === RECOVERY_CODE_LENGTH && [...c].every((ch) => BASE32.includes(ch)) ? c : undefined;
}
