// Secrets the controller must read back (TOTP secrets, recovery codes not yet confirmed) are sealed
// with AES-256-GCM under a key kept in the data directory, never in the store, so a copy of the
// database alone holds nothing usable. Short codes that need only be recognised (confirmed recovery
// codes) are kept as HMAC-SHA-256 digests under a key derived from the same one: six base32
// characters are 30 bits, which a plain hash would give up to an offline search in seconds.
// Every sealed value and digest is bound to a context (the record it belongs to), so one cannot be
// moved to another record.
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';

export const SECRET_KEY_FILE = 'secrets.key';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const VERSION = 'v1';
/** Owner read and write only, like every file of the data directory. */
const KEY_FILE_MODE = 0o600;

export class SecretBox {
  private readonly sealKey: Buffer;
  private readonly digestKey: Buffer;

  constructor(key: Buffer) {
    if (key.length !== KEY_BYTES) throw new Error(`the secret key must be ${KEY_BYTES} bytes`);
    this.sealKey = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'overlay seal', KEY_BYTES));
    this.digestKey = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'overlay digest', KEY_BYTES));
  }

  /**
   * The key of `<dir>/secrets.key`, made (32 random bytes, mode 0600) when there is none. Several
   * controllers on one store must share the file.
   */
  static async open(dir: string): Promise<SecretBox> {
    const path = join(dir, SECRET_KEY_FILE);
    try {
      const file = await open(path, 'wx', KEY_FILE_MODE);
      try {
        await file.writeFile(randomBytes(KEY_BYTES).toString('base64') + '\n');
        await file.sync();
      } finally {
        // Stryker: a descriptor left open cannot be seen by a test.
        await file.close();
      }
    } catch (err) {
      // Stryker: an error other than EEXIST (no such directory, a write that failed) also fails the
      // read below, so passing it on only keeps its first cause.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    // Stryker: base64 decoding skips the newline too; the trim says what is meant.
    const key = Buffer.from((await readFile(path, 'utf8')).trim(), 'base64');
    if (key.length !== KEY_BYTES) {
      throw new Error(
        `${path} does not hold a ${KEY_BYTES}-byte key: restore it from a backup of the data directory ` +
          '(it decrypts the TOTP secrets in the store; a new key would leave every MFA enrollment unusable)',
      );
    }
    return new SecretBox(key);
  }

  seal(plain: string, context: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.sealKey, iv);
    cipher.setAAD(Buffer.from(context));
    // Stryker: UTF-8 is also what update takes a string as when no encoding is named.
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `${VERSION}.${Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url')}`;
  }

  /** The plain text of a sealed value; throws when it was sealed under another key or context. */
  open(sealed: string, context: string): string {
    const [version, data] = sealed.split('.');
    if (version !== VERSION || data === undefined) throw new Error('not a sealed value');
    const raw = Buffer.from(data, 'base64url');
    if (raw.length < IV_BYTES + TAG_BYTES) throw new Error('not a sealed value');
    const decipher = createDecipheriv('aes-256-gcm', this.sealKey, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  }

  /**
   * What the store keeps to recognise this key (controller_state): the keyed digest of a fixed text.
   * Equal for the same key, different for any other, and, as an HMAC under a 256-bit key, no help
   * in finding the key.
   */
  keyCheck(): string {
    return this.digest('the key that sealed this store', 'controller-state:secrets-key-check');
  }

  /** A keyed digest of `value` in `context`: equal inputs give equal digests, nothing else does. */
  digest(value: string, context: string): string {
    return createHmac('sha256', this.digestKey).update(context).update('\0').update(value).digest('base64url');
  }
}
