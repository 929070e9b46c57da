// `<dataDir>/admin-password` holds the password generated for the default admin at the first start,
// for the operator to read once. It lives only as long as that password works: once the admin sets
// another (or loses the password authenticator), a file showing a dead password misleads whoever reads
// it, and a backup of the directory would carry it along for nothing. So it is removed then, found by
// following the change feed, and checked again at every start (a change made by an older version).
import { readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { verifyPassword } from '../auth/passwords.js';
import type { ChangeFeed } from '../kernel/changes.js';
import type { Store } from '../store/store.js';

export const ADMIN_PASSWORD_FILE = 'admin-password';

/** The password hashes of the default admin's password authenticators (none: no such admin). */
async function adminPasswordHashes(store: Store): Promise<string[]> {
  const isDefaultAdmin = store.dialect.toDb('boolean', true) as number;
  const rows = await store.db
    .selectFrom('authenticators')
    .innerJoin('identities', 'identities.id', 'authenticators.identity_id')
    .select('authenticators.password_hash')
    .where('identities.is_default_admin', '=', isDefaultAdmin)
    .where('authenticators.method', '=', 'updb')
    .execute();
  return rows.map((r) => r.password_hash).filter((h): h is string => typeof h === 'string' && h !== '');
}

async function readPassword(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Removes the file now if its password no longer opens the default admin, then (while the file is
 * there) after every write that touches authenticators or identities. Answers the unsubscription.
 */
export async function followAdminPasswordFile(opts: { dataDir: string; store: Store; changes: ChangeFeed; log: Logger }): Promise<() => void> {
  const path = join(opts.dataDir, ADMIN_PASSWORD_FILE);
  // The hash last found to match the file: an unchanged hash needs no new (slow) verification.
  let matching: string | undefined;
  let gone = false;
  let unsubscribe: () => void = () => undefined;

  const check = async (): Promise<void> => {
    if (gone) return;
    const password = await readPassword(path);
    if (password === undefined) {
      gone = true;
      unsubscribe();
      return;
    }
    const hashes = await adminPasswordHashes(opts.store);
    if (matching !== undefined && hashes.includes(matching)) return;
    matching = undefined;
    for (const hash of hashes) {
      if ((await verifyPassword(hash, password)).ok) {
        matching = hash;
        return;
      }
    }
    await unlink(path).catch((err: unknown) => {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    });
    gone = true;
    unsubscribe();
    opts.log.info({ path }, `the default admin no longer has the generated password; removed ${path}`);
  };

  // Checks one after the other: two writes in a row must not race over the same file.
  let queue = Promise.resolve();
  const enqueue = (): Promise<void> => {
    queue = queue.then(check).catch((err: unknown) => opts.log.warn({ err, path }, `could not check ${path}`));
    return queue;
  };
  await check();
  if (!gone) {
    unsubscribe = opts.changes.subscribe((change) =>
      change.collection === 'authenticators' || change.collection === 'identities' ? enqueue() : undefined,
    );
  }
  return () => unsubscribe();
}
