// The store and the key that sealed its secrets (`<dataDir>/secrets.key`: TOTP secrets and recovery
// codes of MFA enrollments, the JWTs of pending enrollments) belong together. A store started beside
// another key (a database restored without its key, a key file replaced) would serve secrets it can
// no longer open: the identity list and MFA logins fail with 500. So the store keeps a check of its
// key in controller_state, and a start with another key (or none, where the store has one) is refused
// before anything is written. A key that is truly lost is the operator's explicit choice
// (--forget-sealed-secrets): what was sealed under it is removed and the identities enroll again.
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { SECRET_KEY_FILE, SecretBox } from '../auth/secret-box.js';
import { enrollmentSealContext } from '../domain/enrollments.js';
import { routerSealContext } from '../domain/router-enrollment.js';
import { SECRETS_KEY_CHECK_KEY, secretsKeyCheckOf } from '../store/controller-state.js';
import type { Executor, Store, Tx } from '../store/store.js';
import { DataDirError, inDataDir } from './data-dir.js';

/** The option that forgets what was sealed under a lost key, as the operator gives it. */
export const FORGET_OPTION = '--forget-sealed-secrets (OVERLAY_FORGET_SEALED_SECRETS=true)';

export interface SecretsKeyStart {
  dataDir: string;
  /** The store file, for the messages. */
  storePath: string;
  store: Store;
  /** The operator's choice to remove what was sealed under another key (--forget-sealed-secrets). */
  forget: boolean;
  /** Now, as the store writes times. */
  now: () => string;
  log: Logger;
}

/** What was removed because it was sealed under a key that is gone. */
export interface ForgottenSecrets {
  mfaEnrollments: number;
  identityEnrollments: number;
  edgeRouterEnrollments: number;
  transitRouterEnrollments: number;
}

/** A sealed value of the store and the context it was sealed to. */
interface Sealed {
  sealed: string;
  context: string;
}

/**
 * One sealed value of the store, if it holds any: for a store from before the check was kept, the
 * only way to tell the key that sealed it.
 */
async function someSealedValue(ex: Executor): Promise<Sealed | undefined> {
  const mfa = await ex.selectFrom('mfas').select(['id', 'secret']).limit(1).executeTakeFirst();
  // A TOTP secret is sealed to its MFA enrollment's id (auth/mfa.ts).
  if (mfa) return { sealed: String(mfa.secret), context: String(mfa.id) };
  const enrollment = await ex.selectFrom('enrollments').select(['id', 'sealed_jwt']).limit(1).executeTakeFirst();
  if (enrollment) return { sealed: String(enrollment.sealed_jwt), context: enrollmentSealContext(String(enrollment.id)) };
  for (const table of ['edge_routers', 'routers'] as const) {
    const router = await ex
      .selectFrom(table)
      .select(['id', 'enrollment_sealed_jwt'])
      .where('enrollment_sealed_jwt', 'is not', null)
      .limit(1)
      .executeTakeFirst();
    if (router) return { sealed: String(router.enrollment_sealed_jwt), context: routerSealContext(String(router.id)) };
  }
  return undefined;
}

function opens(box: SecretBox, { sealed, context }: Sealed): boolean {
  try {
    box.open(sealed, context);
    return true;
  } catch {
    return false;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/**
 * Removes everything sealed or digested under the store's former key, in `tx`: every MFA enrollment
 * (secret and recovery codes), every pending identity enrollment, and the outstanding enrollment of
 * every router (which stays, unverified, for the operator to re-enroll). No change is announced: this
 * runs before any cache is loaded or any request is served, so nothing holds what is removed.
 */
async function forgetSealedSecrets(tx: Tx, now: string): Promise<ForgottenSecrets> {
  const count = (result: { numDeletedRows?: bigint; numUpdatedRows?: bigint }) => Number(result.numDeletedRows ?? result.numUpdatedRows ?? 0);
  const mfaEnrollments = count(await tx.deleteFrom('mfas').executeTakeFirst());
  const identityEnrollments = count(await tx.deleteFrom('enrollments').executeTakeFirst());
  const noEnrollment = {
    enrollment_token_hash: null,
    enrollment_sealed_jwt: null,
    enrollment_created_at: null,
    enrollment_expires_at: null,
    updated_at: now,
  };
  const clear = async (table: 'edge_routers' | 'routers') =>
    count(await tx.updateTable(table).set(noEnrollment).where('enrollment_sealed_jwt', 'is not', null).executeTakeFirst());
  const edgeRouterEnrollments = await clear('edge_routers');
  const transitRouterEnrollments = await clear('routers');
  return { mfaEnrollments, identityEnrollments, edgeRouterEnrollments, transitRouterEnrollments };
}

function refusal(path: string, storePath: string, what: string): DataDirError {
  return new DataDirError(
    `${path} ${what} the store ${storePath} was sealed with (the TOTP secrets of its MFA enrollments, the JWTs of its pending enrollments): ` +
      `restore the ${SECRET_KEY_FILE} kept with this store; if it is lost, start once with ${FORGET_OPTION}, ` +
      'which removes every MFA enrollment and pending enrollment (identities then enroll again)',
  );
}

/**
 * The data directory's secrets key, checked against the store (migrated): refused when the store was
 * sealed under another key, unless `forget`, which then removes what that key sealed. The key is made
 * when there is none and the store holds nothing sealed; the store records its check at its first
 * start with a key (a store from before the check adopts the key it finds, when that opens its
 * secrets), and one holding nothing sealed takes the key it finds.
 */
export async function openSecretsKey(start: SecretsKeyStart): Promise<SecretBox> {
  const { dataDir, storePath, store, forget, log } = start;
  const path = join(dataDir, SECRET_KEY_FILE);
  const recorded = await secretsKeyCheckOf(store.db, store.dialect);
  // A store that holds nothing sealed (any more) loses nothing to another key: it takes the one found.
  const sample = await someSealedValue(store.db);
  // Without the file and with something sealed, no key made now could open it: refused before the
  // file is made, so that restoring the right one is all it takes.
  if (sample !== undefined && !forget && !(await inDataDir(dataDir, 'read the secrets key', path, () => exists(path)))) {
    throw refusal(path, storePath, 'is missing: it holds the key');
  }
  const box = await inDataDir(dataDir, 'open the secrets key', path, () => SecretBox.open(dataDir));
  const check = box.keyCheck();
  const mismatch = sample !== undefined && (recorded !== undefined ? recorded !== check : !opens(box, sample));
  if (mismatch && !forget) throw refusal(path, storePath, 'is not the key');

  const forgotten = await store.transaction(async (tx) => {
    const removed = mismatch ? await forgetSealedSecrets(tx, start.now()) : undefined;
    if (recorded !== check) {
      const value = store.dialect.toDb('json', check);
      await tx.deleteFrom('controller_state').where('key', '=', SECRETS_KEY_CHECK_KEY).execute();
      await tx.insertInto('controller_state').values({ key: SECRETS_KEY_CHECK_KEY, value, updated_at: start.now() }).execute();
    }
    return removed;
  });
  if (forgotten) {
    log.warn(
      { ...forgotten, path },
      `the store was sealed under another ${SECRET_KEY_FILE}; as asked (--forget-sealed-secrets), removed every MFA enrollment, ` +
        'pending identity enrollment and router enrollment sealed under it: identities enroll their MFA again, ' +
        'and those pending need new enrollments (re-enroll the edge routers, create the transit routers again)',
    );
  } else if (forget) {
    log.info({ path }, `${SECRET_KEY_FILE} opens the store's secrets: --forget-sealed-secrets changed nothing`);
  }
  return box;
}
