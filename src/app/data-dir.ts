// The data directory holds the store (password hashes, identity data), the CA keys and the OIDC
// signing keys: only the controller's user may read any of it. Files are 0600 and folders 0700 when
// created here; at every start, looser modes left by an older version, a restore or a careless copy
// are narrowed to the owner's bits, with a warning naming each path.
import { chmod, lstat, mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

export const DATA_DIR_MODE = 0o700;
export const DATA_FILE_MODE = 0o600;
/** Group and other permission bits: none may be set on anything in the data directory. */
const SHARED_BITS = 0o077;

/**
 * Creates `dir` (0700) if missing, then walks it and removes group and other permissions from every
 * entry that has any, calling `warn` for each. Symbolic links inside are neither followed nor changed
 * (their targets are the operator's); the data directory itself may be one.
 */
export async function secureDataDirectory(
  dir: string,
  warn: (path: string, message: string) => void,
): Promise<void> {
  const created = await mkdir(dir, { recursive: true, mode: DATA_DIR_MODE });
  if (created !== undefined) await chmod(dir, DATA_DIR_MODE);

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
