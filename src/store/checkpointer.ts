// Checkpoints of the SQLite WAL off the event loop. SQLite copies the WAL back into the database file
// (and syncs both) from within a commit once the WAL holds 1,000 pages; on the one connection of the
// controller that holds the event loop for milliseconds at best, and for as long as the disk takes
// under load. Instead the store's connection never checkpoints itself, and a worker thread with a
// connection of its own runs a passive checkpoint (which waits for no reader or writer) at most
// every `intervalMs` while commits come in. Should the worker fail, the connection checkpoints
// itself again, as SQLite does by default.
//
// The WAL starts over from its beginning only when a write begins with all of it copied back. Under
// writes that never pause, a passive checkpoint never catches up with them, and the WAL would grow
// without end (each flush then extends the file too, which costs the disk more than overwriting).
// So once it holds `restartFrames` pages after a checkpoint, new write transactions wait (the event
// loop does not) while the worker copies the few pages written during that checkpoint: the next
// write then starts the WAL over.
import type Database from 'better-sqlite3';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** SQLite's own default: pages in the WAL after which a commit checkpoints. */
const AUTO_CHECKPOINT_PAGES = 1000;

/** Least time between two checkpoints while commits come in. */
const CHECKPOINT_INTERVAL_MS = 250;

/** Pages in the WAL at a checkpoint beyond which writes wait, after it, for the rest to be copied. */
const RESTART_FRAMES = 1000;

/** Failed checkpoints in a row after which the connection checkpoints itself again. */
const MAX_FAILED_CHECKPOINTS = 3;

// Plain JavaScript, evaluated: it runs the same from the sources (under test) as from the build.
// The worker is never terminated from outside: a worker stopped while inside the driver's native
// code (loading it, or in a call) aborts the whole process. Asked to close, it closes its
// connection and its port between two messages, and ends by itself.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
parentPort.on('message', (message) => {
  if (message === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  try {
    const [result] = db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage({ ok: true, log: result.log });
  } catch (err) {
    parentPort.postMessage({ ok: false, message: String(err && err.message) });
  }
});
`;

export interface CheckpointerOptions {
  /** Least time between two checkpoints, ms. */
  intervalMs?: number;
  /** The driver module the worker loads (tests give a broken one). */
  driver?: string;
  /** Pages in the WAL at a checkpoint beyond which writes wait for the rest to be copied after it. */
  restartFrames?: number;
  /** Told when the worker fails, before the connection takes checkpoints back. */
  onFailure?: (err: unknown) => void;
}

export interface Checkpointer {
  /** Tells of a commit: a checkpoint starts when the last one is old enough and none is running. */
  committed(): void;
  /**
   * Counts a write transaction in, before it begins: at once (undefined), or when writes held for
   * the end of a checkpoint go on. Each is counted out by endWrite once it has ended.
   */
  beginWrite(): Promise<void> | undefined;
  endWrite(): void;
  /** Stops the worker (its connection closed) before the store's own connection closes. */
  close(): Promise<void>;
}

interface CheckpointResult {
  ok: boolean;
  message?: string;
  /** Pages in the WAL when the checkpoint began. */
  log?: number;
}

export function startCheckpointer(database: Database.Database, path: string, options: CheckpointerOptions = {}): Checkpointer {
  const intervalMs = options.intervalMs ?? CHECKPOINT_INTERVAL_MS;
  const restartFrames = options.restartFrames ?? RESTART_FRAMES;
  const driver = options.driver ?? createRequire(import.meta.url).resolve('better-sqlite3');
  database.pragma('wal_autocheckpoint = 0');
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { path, driver } });
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  // The worker never keeps the process alive on its own (only while it closes, below).
  worker.unref();
  /** Asks the worker to end (a message it takes after the one it is handling); nothing once it has. */
  const stop = (): void => worker.postMessage('close');
  let running = false;
  let failed = false;
  let lastAt = 0;
  let pending = false;
  // A commit came in while a checkpoint ran: its pages wait for the next one.
  let committedSince = false;
  let closed = false;
  // Write transactions open now; while `held`, new ones wait for it (and `whenIdle` runs once none is open).
  let openWrites = 0;
  let held: { done: Promise<void>; release: () => void } | undefined;
  let whenIdle: (() => void) | undefined;
  const release = (): void => {
    const hold = held;
    held = undefined;
    whenIdle = undefined;
    hold?.release();
  };
  const fail = (err: unknown): void => {
    if (failed || closed) return;
    failed = true;
    release();
    options.onFailure?.(err);
    database.pragma(`wal_autocheckpoint = ${AUTO_CHECKPOINT_PAGES}`);
    stop();
  };
  const start = (): void => {
    pending = false;
    if (running || failed || closed) return;
    running = true;
    committedSince = false;
    worker.postMessage('checkpoint');
  };
  const schedule = (): void => {
    if (pending || failed || closed) return;
    const wait = lastAt + intervalMs - performance.now();
    if (wait <= 0) return start();
    pending = true;
    setTimeout(start, wait).unref();
  };
  // Holds new writes; once the open one has ended, checkpoints what is left of the WAL.
  const finish = (): void => {
    let open!: () => void;
    held = { done: new Promise<void>((resolve) => (open = resolve)), release: () => open() };
    if (openWrites === 0) start();
    else whenIdle = start;
  };
  let failures = 0;
  worker.on('message', (result: CheckpointResult) => {
    running = false;
    lastAt = performance.now();
    // A checkpoint may find the lock taken now and then (a backup's, the closing connection's).
    failures = result.ok ? 0 : failures + 1;
    if (failures >= MAX_FAILED_CHECKPOINTS) return fail(new Error(`checkpoints keep failing: ${result.message}`));
    if (held) release();
    // The checkpoint copied the WAL as it was when it began; writes went on meanwhile.
    else if (result.ok && (result.log ?? 0) >= restartFrames) return finish();
    // Without a checkpoint after it, the last commit's pages would stay in the WAL until another commit.
    if (committedSince) schedule();
  });
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`the checkpoint worker exited (code ${code})`)));
  const beginWrite = (): Promise<void> | undefined => {
    if (!held) {
      openWrites++;
      return undefined;
    }
    return held.done.then(beginWrite);
  };
  return {
    committed() {
      if (running) committedSince = true;
      else schedule();
    },
    beginWrite,
    endWrite() {
      openWrites--;
      if (openWrites === 0 && whenIdle) {
        const run = whenIdle;
        whenIdle = undefined;
        run();
      }
    },
    async close() {
      closed = true;
      release();
      worker.ref();
      stop();
      await exited;
    },
  };
}
