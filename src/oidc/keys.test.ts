// The provider's signing keys in a temp dir: the first key made and kept owner-only, read back at
// the next start, rotation keeping the previous key published and dropping older ones, RS256 keys,
// and key files that cannot be used.
import { statSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calculateJwkThumbprint } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeHeader, parseCompact, signCompact, verifySignature } from './jws.js';
import { KEYS_FILE, SigningKeys } from './keys.js';

const T0 = Date.parse('2026-03-04T05:06:07.089Z');

const dirs: string[] = [];
function dir(): string {
  const d = mkdtempSync(join(tmpdir(), 'overlay-keys-'));
  dirs.push(d);
  return join(d, 'oidc');
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const stored = (d: string) => JSON.parse(readFileSync(join(d, KEYS_FILE), 'utf8')) as { keys: { kid: string; alg: string; createdAt: string; privateJwk: { d?: string } }[] };

describe('SigningKeys', () => {
  it('makes an ES256 key at the first start, in an owner-only file, named by its thumbprint', async () => {
    const d = dir();
    const keys = await SigningKeys.open(d, { now: () => T0 });
    expect(statSync(d).mode & 0o777).toBe(0o700);
    expect(statSync(join(d, KEYS_FILE)).mode & 0o777).toBe(0o600);
    const key = keys.current;
    expect(keys.all).toEqual([key]);
    expect(key.alg).toBe('ES256');
    expect(key.createdAt).toBe(T0);
    const { kid, ...jwk } = key.publicJwk;
    expect(kid).toBe(key.kid);
    expect(key.kid).toBe(await calculateJwkThumbprint(jwk, 'sha256'));
    expect(jwk).toEqual({ kty: 'EC', crv: 'P-256', x: expect.any(String), y: expect.any(String), alg: 'ES256', use: 'sig' });
    expect(keys.jwks()).toEqual({ keys: [key.publicJwk] });
    expect(key.headers).toEqual({
      jwt: encodeHeader({ alg: 'ES256', kid: key.kid, typ: 'JWT' }),
      accessToken: encodeHeader({ alg: 'ES256', kid: key.kid, typ: 'at+jwt' }),
    });
    expect(keys.get(key.kid)).toBe(key);
    expect(keys.get('other')).toBeUndefined();
    const file = stored(d);
    expect(file.keys).toEqual([{ kid: key.kid, alg: 'ES256', createdAt: new Date(T0).toISOString(), privateJwk: expect.objectContaining({ d: expect.any(String) }) }]);
    expect(readFileSync(join(d, KEYS_FILE), 'utf8').endsWith('}\n')).toBe(true);
    // The private key signs what the public key checks.
    const token = signCompact('ES256', key.privateKey, key.headers.jwt, { sub: 'x' });
    expect(verifySignature(parseCompact(token)!, key.publicKey)).toBe(true);
  });

  it('reads the same keys at the next start; the time of a first key is now when none is given', async () => {
    const d = dir();
    const first = await SigningKeys.open(d, { now: () => T0 });
    const again = await SigningKeys.open(d, { now: () => T0 + 1000 });
    expect(again.current.kid).toBe(first.current.kid);
    expect(again.current.createdAt).toBe(T0);
    expect(again.current.publicJwk).toEqual(first.current.publicJwk);
    expect(again.get(first.current.kid)).toBe(again.current);
    const before = Date.now();
    const made = await SigningKeys.open(dir());
    expect(made.current.createdAt).toBeGreaterThanOrEqual(before - 1);
    expect(made.current.createdAt).toBeLessThanOrEqual(Date.now());
  });

  it('rotates: the new key signs, the previous one stays published, older ones are dropped', async () => {
    const d = dir();
    const keys = await SigningKeys.open(d, { now: () => T0 });
    let told = 0;
    const stop = keys.onChange(() => told++);
    const first = keys.current;
    const second = await keys.rotate('ES256', T0 + 1000);
    expect(keys.current).toBe(second);
    expect(keys.all.map((k) => k.kid)).toEqual([second.kid, first.kid]);
    expect(keys.jwks().keys.map((k) => k.kid)).toEqual([second.kid, first.kid]);
    expect(told).toBe(1);
    const third = await keys.rotate('RS256', T0 + 2000);
    expect(keys.all.map((k) => k.kid)).toEqual([third.kid, second.kid]);
    expect(keys.get(first.kid)).toBeUndefined();
    expect(keys.get(second.kid)).toBe(second);
    expect(told).toBe(2);
    expect(stored(d).keys.map((k) => [k.kid, k.alg, k.createdAt])).toEqual([
      [third.kid, 'RS256', new Date(T0 + 2000).toISOString()],
      [second.kid, 'ES256', new Date(T0 + 1000).toISOString()],
    ]);
    stop();
    await keys.rotate();
    expect(told).toBe(2);
    expect(keys.current.alg).toBe('ES256');
    // The next start reads them in the same order.
    const reopened = await SigningKeys.open(d);
    expect(reopened.all.map((k) => k.kid)).toEqual(keys.all.map((k) => k.kid));
    expect(reopened.all[1]!.alg).toBe('RS256');
  });

  it('makes an RS256 key when asked, and its tokens check', async () => {
    const keys = await SigningKeys.open(dir(), { alg: 'RS256', now: () => T0 });
    const key = keys.current;
    expect(key.alg).toBe('RS256');
    expect(key.publicJwk).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig', kid: key.kid });
    expect(key.publicJwk.d).toBeUndefined();
    const token = signCompact('RS256', key.privateKey, key.headers.accessToken, { sub: 'x' });
    const parsed = parseCompact(token)!;
    expect(parsed.header).toEqual({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' });
    expect(verifySignature(parsed, key.publicKey)).toBe(true);
  });

  it('makes a key when the file lists none', async () => {
    const d = dir();
    const keys = await SigningKeys.open(d, { now: () => T0 });
    writeFileSync(join(d, KEYS_FILE), JSON.stringify({ keys: [] }));
    const fresh = await SigningKeys.open(d, { now: () => T0 });
    expect(fresh.current.kid).not.toBe(keys.current.kid);
    writeFileSync(join(d, KEYS_FILE), JSON.stringify({}));
    expect((await SigningKeys.open(d, { now: () => T0 })).all).toHaveLength(1);
  });

  it('refuses a file it cannot read, or a key of an algorithm it does not use', async () => {
    const d = dir();
    await SigningKeys.open(d, { now: () => T0 });
    const file = join(d, KEYS_FILE);
    const content = stored(d);
    writeFileSync(file, '{"keys": [');
    await expect(SigningKeys.open(d)).rejects.toThrow(new RegExp(`^cannot read the OIDC signing keys in ${file}: `));
    const kid = content.keys[0]!.kid;
    writeFileSync(file, JSON.stringify({ keys: [{ ...content.keys[0], alg: 'HS256' }] }));
    await expect(SigningKeys.open(d)).rejects.toThrow(`OIDC signing key ${kid}: unsupported algorithm HS256`);
  });
});
