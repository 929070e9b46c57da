// Crash-safe file writes for key material: a reader sees either the old file or the complete new
// one, never a partial write, and the final mode does not depend on the process umask.

import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';

const TEMP_SUFFIX = '.tmp';
const TEMP_NAME = /^\..+\.[0-9a-f]{12}\.tmp$/;

/**
 * Writes `data` to `path` atomically with the given mode: a temp file in the same directory (created
 * exclusively with `mode`, then chmod'ed to it regardless of the umask), fsync, rename over `path`,
 * fsync of the directory so the rename itself is durable.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode: number): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}${TEMP_SUFFIX}`);
  const fh = await open(tmp, 'wx', mode);
  try {
    try {
      await fh.chmod(mode);
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await syncDirectory(dir);
}

async function syncDirectory(dir: string): Promise<void> {
  let dh;
  try {
    dh = await open(dir, 'r');
    await dh.sync();
  } catch {
    // Some platforms and file systems do not support fsync on directories; the rename stands.
  } finally {
    await dh?.close();
  }
}

/**
 * Creates `dir` (and parents) if missing; a directory created here gets exactly `mode`. Returns
 * whether it was created.
 */
export async function ensureDirectory(dir: string, mode: number): Promise<boolean> {
  // The missing folders one at a time, from the top: Node's recursive mkdir retries for ever on a
  // path that can never be made (one under /proc).
  const missing: string[] = [];
  for (let at = resolve(dir); ; at = dirname(at)) {
    try {
      if ((await stat(at)).isDirectory() || at !== resolve(dir)) break;
      throw Object.assign(new Error(`EEXIST: file already exists, mkdir '${at}'`), { code: 'EEXIST' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    missing.push(at);
    if (dirname(at) === at) break;
  }
  for (const at of missing.reverse()) {
    try {
      await mkdir(at, { mode });
    } catch (err) {
      // Made meanwhile by another process: taken as it is.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  if (missing.length === 0) return false;
  await chmod(dir, mode);
  return true;
}

/** Removes temp files left in `dir` by an interrupted {@link writeFileAtomic}. Returns their names. */
export async function removeStaleTempFiles(dir: string): Promise<string[]> {
  const stale = (await readdir(dir)).filter((name) => TEMP_NAME.test(name));
  await Promise.all(stale.map((name) => rm(join(dir, name), { force: true })));
  return stale;
}
