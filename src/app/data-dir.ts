// The data directory holds the store (password hashes, identity data), the CA keys and the OIDC
// signing keys: only the controller's user may read any of it. Files are 0600 and folders 0700 when
// created here; at every start, looser modes left by an older version, a restore or a careless copy
// are narrowed to the owner's bits, with a warning naming each path.
import { chmod, lstat, readdir, stat } from 'node:fs/promises';
import { ensureDirectory } from '../pki/files.js';
import { join } from 'node:path';

export const DATA_DIR_MODE = 0o700;
export const DATA_FILE_MODE = 0o600;
/** Group and other permission bits: none may be set on anything in the data directory. */
const SHARED_BITS = 0o077;

/** Creates `dir` and its missing parents (0700 whatever the umask); nothing if it exists. */
export async function createDataDirectory(dir: string): Promise<void> {
  await ensureDirectory(dir, DATA_DIR_MODE);
}

/**
 * Creates `dir` (0700) if missing, then walks it and removes group and other permissions from every
 * entry that has any, calling `warn` for each. Symbolic links inside are neither followed nor changed
 * (their targets are the operator's); the data directory itself may be one.
 */
export async function secureDataDirectory(
  dir: string,
  warn: (path: string, message: string) => void,
): Promise<void> {
  await createDataDirectory(dir);

  const visit = async (path: string, isRoot: boolean): Promise<void> => {
    const info = isRoot ? await stat(path) : await lstat(path);
    if (info.isSymbolicLink()) return;
    const mode = info.mode & 0o7777;
    if ((mode & SHARED_BITS) !== 0) {
      const to = mode & 0o700;
      try {
        await chmod(path, to);
      } catch (err) {
        throw new Error(`cannot restrict the mode of ${path} (${octal(mode)}) to ${octal(to)}: ${(err as Error).message}`);
      }
      warn(path, `${path} had mode ${octal(mode)}, open to other users; changed to ${octal(to)}`);
    }
    if (info.isDirectory()) {
      for (const name of await readdir(path)) await visit(join(path, name), false);
    }
  };
  await visit(dir, true);
}

function octal(mode: number): string {
  return `0${mode.toString(8).padStart(3, '0')}`;
}

/** A start refused because of the data directory; the message names the path and what to do. */
export class DataDirError extends Error {
  override readonly name = 'DataDirError';
}

/** What the operator can do about a failure with this errno or SQLite code, at `path`. */
function adviceFor(code: string, dataDir: string): string | undefined {
  const user = process.getuid?.() !== undefined ? `the user with uid ${process.getuid!()}` : 'the controller\'s user';
  switch (code) {
    case 'EACCES':
    case 'EPERM':
    case 'SQLITE_READONLY':
    case 'SQLITE_CANTOPEN':
      return `${user} must be able to read and write it: give that user the directory (chown -R) or start with another --data-dir`;
    case 'ENOTDIR':
    case 'EEXIST':
      return `a file stands where a directory belongs: move it aside, or start with another --data-dir than ${dataDir}`;
    case 'EISDIR':
      return 'a directory stands where a file belongs: move it aside';
    case 'ENOSPC':
    case 'SQLITE_FULL':
      return 'the file system is full: free some space, then start again';
    case 'EROFS':
      return 'the file system is read-only: mount it writable or start with another --data-dir';
    case 'SQLITE_NOTADB':
    case 'SQLITE_CORRUPT':
      return 'it is not a usable SQLite store (damaged, or not the controller\'s): restore it from a backup or snapshot, or move it aside to start with an empty store';
    case 'SQLITE_BUSY':
    case 'SQLITE_LOCKED':
      return 'another process holds the store: stop it (only one controller may use a data directory)';
    case 'SQLITE_IOERR':
    case 'EIO':
      return 'the disk reported an I/O error: check the device, then restore from a backup if the store is damaged';
    default:
      return undefined;
  }
}

/**
 * Runs one start-up step on the data directory. An error of the file system or of SQLite (one with a
 * `code`: `unable to open database file` alone helps no one) comes back as a DataDirError naming the
 * step, the path and what to do; other errors (a damaged CA file, already explained) pass unchanged.
 */
export async function inDataDir<T>(dataDir: string, step: string, path: string, run: () => T | Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (err instanceof DataDirError || typeof code !== 'string') throw err;
    const at = (err as NodeJS.ErrnoException).path ?? path;
    const advice =
      adviceFor(code.replace(/^(SQLITE_[A-Z]+)_.*$/, '$1'), dataDir) ??
      `check the data directory ${dataDir} (--data-dir)`;
    throw new DataDirError(`cannot ${step} ${at}: ${(err as Error).message} (${code}); ${advice}`, { cause: err });
  }
}
