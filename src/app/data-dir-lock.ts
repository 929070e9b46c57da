// One controller per data directory: two on one SQLite store and one PKI would each think they
// own the server certificate, the signing keys and the store's migrations. The holder writes its
// pid to `overlay.lock` (created exclusively, mode 0600) and removes it when it stops. A lock left by
// a process that is gone (a crash, a kill -9) is taken over with a warning; one whose process still
// runs refuses the start, naming the pid and the file.
import { open, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { DATA_FILE_MODE, DataDirError } from './data-dir.js';

export const LOCK_FILE = 'overlay.lock';

// The lock files this process holds. A lock naming this process's own pid that is not among them
// was left by an earlier run that had the same pid (pid 1 in a container, restarted): stale.
const heldHere = new Set<string>();

export interface DataDirLock {
  readonly path: string;
  /** Removes the lock file, if it is still this process's. */
  release(): Promise<void>;
}

/** The pid written in a lock file, or undefined when it holds none (empty, truncated, not ours). */
function pidIn(text: string): number | undefined {
  const pid = Number(text.trim().split('\n')[0]);
  return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
}

/** True while a process with this pid exists (EPERM: it exists, as another user). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True when the lock's holder is a live controller other than a previous run with our pid. */
function isHeld(path: string, holder: number | undefined, pid: number): holder is number {
  if (holder === undefined) return false;
  return holder === pid ? heldHere.has(path) : isRunning(holder);
}

function inUse(dir: string, path: string, pid: number): DataDirError {
  return new DataDirError(
    `the data directory ${dir} is in use by another controller (pid ${pid}, lock file ${path}); ` +
      'stop that controller, or start this one with another --data-dir. ' +
      `If no controller runs with pid ${pid}, remove ${path}`,
  );
}

async function readLock(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Refuses early, before anything is bound or created, when a running controller holds the lock of
 * `dir`. Reads only; a missing directory or lock file passes.
 */
export async function checkDataDirLock(dir: string, pid = process.pid): Promise<void> {
  const path = join(dir, LOCK_FILE);
  let text: string | undefined;
  try {
    text = await readLock(path);
  } catch {
    return; // unreadable here: acquireDataDirLock says why, with the path
  }
  const holder = text === undefined ? undefined : pidIn(text);
  if (isHeld(path, holder, pid)) throw inUse(dir, path, holder);
}

/**
 * Takes the lock of `dir` (which must exist) for this process. `warn` hears of a stale lock taken
 * over. Throws a DataDirError naming the holder when a running process has it.
 */
export async function acquireDataDirLock(
  dir: string,
  warn: (path: string, message: string) => void,
  pid = process.pid,
): Promise<DataDirLock> {
  const path = join(dir, LOCK_FILE);
  const content = `${pid}\n`;
  // Two rounds: the second follows the removal of a stale lock. Another start racing for the same
  // stale lock then finds this process's fresh one and is refused.
  for (let round = 0; round < 2; round++) {
    try {
      const file = await open(path, 'wx', DATA_FILE_MODE);
      try {
        await file.writeFile(content);
        await file.sync();
      } finally {
        await file.close();
      }
      heldHere.add(path);
      return {
        path,
        async release() {
          heldHere.delete(path);
          // Only our own: a lock another start took over after this one was declared stale stays.
          if ((await readLock(path).catch(() => undefined)) === content) await unlink(path).catch(() => undefined);
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const text = await readLock(path);
    if (text === undefined) continue; // released between the two calls
    const holder = pidIn(text);
    if (isHeld(path, holder, pid)) throw inUse(dir, path, holder);
    // Removed only if it is still the stale lock just read.
    if ((await readLock(path)) !== text) continue;
    await unlink(path).catch((e: unknown) => {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    });
    warn(
      path,
      holder === undefined
        ? `${path} held no pid; taken over (a start was interrupted while writing it)`
        : `${path} was left by pid ${holder}, which no longer runs (the controller stopped without cleaning up); taken over`,
    );
  }
  throw new DataDirError(
    `could not take the lock ${path}: another controller is starting on the data directory ${dir} at the same time; ` +
      'start only one controller per data directory',
  );
}
