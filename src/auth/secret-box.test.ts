import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SECRET_KEY_FILE, SecretBox } from './secret-box.js';

const dirs: string[] = [];
function dir(): string {
  const d = mkdtempSync(join(tmpdir(), 'overlay-box-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('SecretBox', () => {
  it('makes its key once, owner-only, and reads the same key at the next start', async () => {
    const d = dir();
    const first = await SecretBox.open(d);
    const path = join(d, SECRET_KEY_FILE);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(Buffer.from(readFileSync(path, 'utf8').trim(), 'base64')).toHaveLength(32);
    // One line of base64, as a text file should be.
    expect(readFileSync(path, 'utf8')).toMatch(/^[A-Za-z0-9+/]{43}=\n$/);
    const sealed = first.seal('JBSWY3DPEHPK3PXP', 'mfa-1');
    const again = await SecretBox.open(d);
    expect(again.open(sealed, 'mfa-1')).toBe('JBSWY3DPEHPK3PXP');
    expect(again.digest('ABC234', 'mfa-1')).toBe(first.digest('ABC234', 'mfa-1'));
  });

  it('seals to a different text every time, without the plain text in it', async () => {
    const box = await SecretBox.open(dir());
    const a = box.seal('JBSWY3DPEHPK3PXP', 'mfa-1');
    const b = box.seal('JBSWY3DPEHPK3PXP', 'mfa-1');
    expect(a).not.toBe(b);
    expect(a).toMatch(/^v1\.[A-Za-z0-9_-]+$/);
    expect(a).not.toContain('JBSWY3DPEHPK3PXP');
  });

  it('refuses a value of another record, another key, or one changed', async () => {
    const box = await SecretBox.open(dir());
    const other = await SecretBox.open(dir());
    const sealed = box.seal('secret', 'mfa-1');
    expect(() => box.open(sealed, 'mfa-2')).toThrow();
    expect(() => other.open(sealed, 'mfa-1')).toThrow();
    const raw = Buffer.from(sealed.slice(3), 'base64url');
    raw[14] = raw[14]! ^ 1;
    expect(() => box.open(`v1.${raw.toString('base64url')}`, 'mfa-1')).toThrow();
    for (const bad of ['', 'v1.', 'v2.AAAA', 'v1.AAAA', 'plain']) expect(() => box.open(bad, 'mfa-1'), bad).toThrow();
  });

  it('digests by value and record, under its own key', async () => {
    const box = await SecretBox.open(dir());
    const other = await SecretBox.open(dir());
    const d = box.digest('ABC234', 'mfa-1');
    expect(d).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(box.digest('ABC235', 'mfa-1')).not.toBe(d);
    expect(box.digest('ABC234', 'mfa-2')).not.toBe(d);
    expect(other.digest('ABC234', 'mfa-1')).not.toBe(d);
    // the separator keeps value and record apart
    expect(box.digest('1ABC', 'mfa')).not.toBe(box.digest('ABC', 'mfa1'));
  });

  it('opens what an earlier start sealed, and digests as it did (AES-256-GCM and HMAC-SHA-256 under HKDF keys)', () => {
    // Made with the key of 32 bytes 0x07; the layout is v1.<iv 12 bytes | ciphertext | tag 16 bytes>.
    const box = new SecretBox(Buffer.alloc(32, 7));
    expect(box.open('v1._5zgMPjDg5M-2qMqDJJBK-ZyTilq5Jzb2kfvDF_mO6ySmdG0rfoyi8YU9D4', 'mfa-1')).toBe('JBSWY3DPEHPK3PXP');
    expect(box.digest('ABC234', 'mfa-1')).toBe('sVxAIk9TZfTqH563SVHLZ5Vd9gNYmFkmccH0r1MCh4A');
  });

  it('checks its key by a digest that is the same for the same key only, and is not the key', () => {
    const key = Buffer.alloc(32, 7);
    const check = new SecretBox(key).keyCheck();
    expect(check).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(new SecretBox(Buffer.from(key)).keyCheck()).toBe(check);
    expect(new SecretBox(Buffer.alloc(32, 8)).keyCheck()).not.toBe(check);
    // Kept in stores: it must not change with a release.
    expect(check).toBe(new SecretBox(key).digest('the key that sealed this store', 'controller-state:secrets-key-check'));
    for (const form of ['base64', 'base64url', 'hex'] as const) expect(check).not.toContain(key.toString(form).slice(0, 16));
  });

  it('seals and opens an empty text (a value of IV and tag only)', () => {
    const box = new SecretBox(Buffer.alloc(32, 7));
    const sealed = box.seal('', 'mfa-1');
    expect(Buffer.from(sealed.slice(3), 'base64url')).toHaveLength(12 + 16);
    expect(box.open(sealed, 'mfa-1')).toBe('');
    // One byte short of IV and tag is not a sealed value.
    const short = Buffer.from(sealed.slice(3), 'base64url').subarray(1).toString('base64url');
    expect(() => box.open(`v1.${short}`, 'mfa-1')).toThrow('not a sealed value');
    expect(() => box.open('v1', 'mfa-1')).toThrow('not a sealed value');
    expect(() => box.open('v2.AAAA', 'mfa-1')).toThrow('not a sealed value');
    // Another version is refused before its body is read, sound as the body may be.
    expect(() => box.open(`v2.${sealed.slice(3)}`, 'mfa-1')).toThrow('not a sealed value');
  });

  it('does not make a key where the data directory is missing', async () => {
    const missing = join(dir(), 'no-such-dir');
    await expect(SecretBox.open(missing)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses a key file that does not hold 32 bytes', async () => {
    const d = dir();
    writeFileSync(join(d, SECRET_KEY_FILE), Buffer.alloc(16).toString('base64'));
    await expect(SecretBox.open(d)).rejects.toThrow(`${join(d, SECRET_KEY_FILE)} does not hold a 32-byte key`);
    expect(() => new SecretBox(Buffer.alloc(31))).toThrow('the secret key must be 32 bytes');
  });
});
