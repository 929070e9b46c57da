// The provider's signing keys: an ES256 key made at first start and kept as a file under
// `<dataDir>/oidc/` (mode 0600, like the PKI keys), so a copy of the store alone cannot mint tokens.
// The file holds the current key first, then the previous ones: a rotation makes a new current key
// and keeps the old one published (and accepted) until every token it signed has expired.
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { calculateJwkThumbprint, type JWK } from 'jose';
import { ensureDirectory, removeStaleTempFiles, writeFileAtomic } from '../pki/files.js';
import { encodeHeader, type JwsAlgorithm } from './jws.js';

export const KEYS_FILE = 'signing-keys.json';

export interface SigningKey {
  kid: string;
  alg: JwsAlgorithm;
  createdAt: number;
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** The public JWK as published by /oidc/keys. */
  publicJwk: JWK;
  /** Encoded JWS headers of this key, by token type. */
  headers: { jwt: string; accessToken: string };
}

interface StoredKey {
  kid: string;
  alg: JwsAlgorithm;
  createdAt: string;
  privateJwk: JWK;
}

/** How many keys are kept: the current one and the previous one. */
export const KEPT_KEYS = 2;

export class SigningKeys {
  private keys: SigningKey[];
  private readonly byKid = new Map<string, SigningKey>();
  private readonly listeners = new Set<() => void>();

  private constructor(
    private readonly file: string,
    keys: SigningKey[],
  ) {
    this.keys = keys;
    for (const k of keys) this.byKid.set(k.kid, k);
  }

  /** Loads the keys of `dir`, making the first key when there is none. */
  static async open(dir: string, options: { alg?: JwsAlgorithm; now?: () => number } = {}): Promise<SigningKeys> {
    await ensureDirectory(dir, 0o700);
    // A rotation cut short leaves its temp file, which holds a private key.
    await removeStaleTempFiles(dir);
    const file = join(dir, KEYS_FILE);
    let stored: StoredKey[] | undefined;
    try {
      const parsed = JSON.parse(await readFile(file, 'utf8')) as { keys?: StoredKey[] };
      stored = parsed.keys;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new Error(
          `cannot read the OIDC signing keys in ${file}: ${(err as Error).message}; restore the file from a backup ` +
            'of the data directory, or move it aside to make a new key (tokens signed with the old one then fail)',
          { cause: err },
        );
      }
    }
    if (stored && stored.length > 0) return new SigningKeys(file, await Promise.all(stored.map(fromStored)));
    const keys = new SigningKeys(file, []);
    await keys.rotate(options.alg ?? 'ES256', options.now?.() ?? Date.now());
    return keys;
  }

  /** The key new tokens are signed with. */
  get current(): SigningKey {
    return this.keys[0]!;
  }

  /** A current or previous key. */
  get(kid: string): SigningKey | undefined {
    return this.byKid.get(kid);
  }

  get all(): readonly SigningKey[] {
    return this.keys;
  }

  /** The JWKS document: every key a token may still carry. */
  jwks(): { keys: JWK[] } {
    return { keys: this.keys.map((k) => k.publicJwk) };
  }

  /** Told after the key set changed (verified-token caches drop what a removed key signed). */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Makes a new current key; the previous current key stays published, older ones are dropped. */
  async rotate(alg: JwsAlgorithm = 'ES256', now: number = Date.now()): Promise<SigningKey> {
    const privateKey =
      alg === 'ES256'
        ? generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
        : generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    const privateJwk = privateKey.export({ format: 'jwk' }) as JWK;
    const key = await build({ kid: await thumbprint(privateJwk), alg, createdAt: new Date(now).toISOString(), privateJwk });
    const next = [key, ...this.keys].slice(0, KEPT_KEYS);
    const stored: StoredKey[] = next.map((k) => ({
      kid: k.kid,
      alg: k.alg,
      createdAt: new Date(k.createdAt).toISOString(),
      privateJwk: k.privateKey.export({ format: 'jwk' }) as JWK,
    }));
    await writeFileAtomic(this.file, JSON.stringify({ keys: stored }, null, 2) + '\n', 0o600);
    this.keys = next;
    this.byKid.clear();
    for (const k of next) this.byKid.set(k.kid, k);
    for (const l of this.listeners) l();
    return key;
  }
}

/** RFC 7638 thumbprint: made of the public members only, so the private JWK gives the same. */
function thumbprint(jwk: JWK): Promise<string> {
  return calculateJwkThumbprint(jwk, 'sha256');
}

async function fromStored(s: StoredKey): Promise<SigningKey> {
  if (s.alg !== 'ES256' && s.alg !== 'RS256') throw new Error(`OIDC signing key ${s.kid}: unsupported algorithm ${String(s.alg)}`);
  return build(s);
}

async function build(s: StoredKey): Promise<SigningKey> {
  const privateKey = createPrivateKey({ key: s.privateJwk as never, format: 'jwk' });
  const publicKey = createPublicKey(privateKey);
  const jwk = publicKey.export({ format: 'jwk' }) as JWK;
  const publicJwk: JWK = { ...jwk, kid: s.kid, alg: s.alg, use: 'sig' };
  return {
    kid: s.kid,
    alg: s.alg,
    createdAt: Date.parse(s.createdAt),
    privateKey,
    publicKey,
    publicJwk,
    headers: {
      jwt: encodeHeader({ alg: s.alg, kid: s.kid, typ: 'JWT' }),
      accessToken: encodeHeader({ alg: s.alg, kid: s.kid, typ: 'at+jwt' }),
    },
  };
}
