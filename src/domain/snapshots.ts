// Snapshots of the store: a consistent copy taken online (writes go on meanwhile) into a new file
// next to the store, owner-only like the store itself, named after the store and the time
// (`overlay.db-20260102-030405`). Asked for through the API at most once a minute, so a caller cannot
// fill the disk; the data-integrity fix takes one first whatever the time since the last.
import { closeSync, fchmodSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { ApiError } from '../errors.js';
import type { Store } from '../store/store.js';

/** Least time between two snapshots asked for through the API. */
export const SNAPSHOT_INTERVAL_MS = 60_000;
/** Mode of a snapshot file: the store's own. */
const FILE_MODE = 0o600;
/** Names tried when the time-stamped name is taken (two snapshots within a second). */
const MAX_NAME_TRIES = 100;

export interface SnapshotOptions {
  store: Store;
  /** The directory of the store; snapshots go beside it. */
  dir: string;
  /** The store's file name, the start of every snapshot's name. */
  file: string;
  clock: Clock;
  log: Pick<Logger, 'info' | 'error'>;
}

/** `20260102-030405`: the UTC time of a snapshot in its file name. */
function stamp(ms: number): string {
  const d = new Date(ms).toISOString();
  return `${d.slice(0, 10).replace(/-/g, '')}-${d.slice(11, 19).replace(/:/g, '')}`;
}

export class Snapshots {
  private last: number | undefined;
  private running = false;

  constructor(private readonly opts: SnapshotOptions) {}

  /**
   * Takes a snapshot for an API caller: refused (429 RATE_LIMITED) while one is being taken or when
   * the last was taken less than a minute ago. Answers the path of the file.
   */
  async request(): Promise<string> {
    const now = this.opts.clock();
    const wait = this.last === undefined ? 0 : this.last + SNAPSHOT_INTERVAL_MS - now;
    if (this.running || wait > 0) {
      const seconds = Math.max(1, Math.ceil(wait / 1000));
      throw new ApiError(
        'RATE_LIMITED',
        this.running ? 'a snapshot is being taken' : `a snapshot was taken less than a minute ago; try again in ${seconds} s`,
        undefined,
        { 'retry-after': String(seconds) },
      );
    }
    // Claimed before the first await, so parallel requests see it.
    this.running = true;
    const previous = this.last;
    this.last = now;
    try {
      return await this.write(now);
    } catch (err) {
      this.last = previous;
      throw err;
    } finally {
      this.running = false;
    }
  }

  /** Takes a snapshot whatever the time since the last (before repairs of the store). */
  async take(): Promise<string> {
    const now = this.opts.clock();
    this.last = now;
    return this.write(now);
  }

  private async write(now: number): Promise<string> {
    const path = this.reserve(now);
    try {
      await this.opts.store.dialect.backup(path);
    } catch (err) {
      rmSync(path, { force: true });
      this.opts.log.error({ err, path }, 'store snapshot failed');
      throw err;
    }
    this.opts.log.info({ path }, 'store snapshot written');
    return path;
  }

  /** Creates the empty, owner-only file of a new snapshot: the time-stamped name, or that name numbered. */
  private reserve(now: number): string {
    const base = join(this.opts.dir, `${this.opts.file}-${stamp(now)}`);
    for (let n = 1; n <= MAX_NAME_TRIES; n++) {
      const path = n === 1 ? base : `${base}-${n}`;
      let fd: number;
      try {
        fd = openSync(path, 'wx', FILE_MODE);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') continue;
        throw err;
      }
      try {
        fchmodSync(fd, FILE_MODE); // the umask may have taken bits away; it cannot add any
      } finally {
        closeSync(fd);
      }
      return path;
    }
    throw new Error(`no free snapshot name beside ${base}`);
  }
}
