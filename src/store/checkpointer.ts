// Checkpoints of the SQLite WAL off the event loop. SQLite copies the WAL back into the database file
// (and syncs both) from within a commit once the WAL holds 1,000 pages; on the one connection of the
// controller that holds the event loop for milliseconds at best, and for as long as the disk takes
// under load. Instead the store's connection never checkpoints itself, and a worker thread with a
// connection of its own runs a passive checkpoint (which waits for no reader or writer) at most
// every `intervalMs` while commits come in. Should the worker fail, the connection checkpoints
// itself again, as SQLite does by default.
import type Database from 'better-sqlite3';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** SQLite's own default: pages in the WAL after which a commit checkpoints. */
const AUTO_CHECKPOINT_PAGES = 1000;

/** Least time between two checkpoints while commits come in. */
const CHECKPOINT_INTERVAL_MS = 250;

/** Failed checkpoints in a row after which the connection checkpoints itself again. */
const MAX_FAILED_CHECKPOINTS = 3;

// Plain JavaScript, evaluated: it runs the same from the sources (under test) as from the build.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
parentPort.on('message', () => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage({ ok: true });
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
  /** Told when the worker fails, before the connection takes checkpoints back. */
  onFailure?: (err: unknown) => void;
}

export interface Checkpointer {
  /** Tells of a commit: a checkpoint starts when the last one is old enough and none is running. */
  committed(): void;
  /** Stops the worker (its connection closed) before the store's own connection closes. */
  close(): Promise<void>;
}

export function startCheckpointer(database: Database.Database, path: string, options: CheckpointerOptions = {}): Checkpointer {
  const intervalMs = options.intervalMs ?? CHECKPOINT_INTERVAL_MS;
  const driver = options.driver ?? createRequire(import.meta.url).resolve('better-sqlite3');
  database.pragma('wal_autocheckpoint = 0');
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { path, driver } });
  // The worker never keeps the process alive on its own.
  worker.unref();
  let running = false;
  let failed = false;
  let lastAt = 0;
  let pending = false;
  let closed = false;
  const fail = (err: unknown): void => {
    if (failed || closed) return;
    failed = true;
    options.onFailure?.(err);
    database.pragma(`wal_autocheckpoint = ${AUTO_CHECKPOINT_PAGES}`);
    void worker.terminate();
  };
  const start = (): void => {
    pending = false;
    if (running || failed || closed) return;
    running = true;
    worker.postMessage('checkpoint');
  };
  let failures = 0;
  worker.on('message', (result: { ok: boolean; message?: string }) => {
    running = false;
    lastAt = performance.now();
    // A checkpoint may find the lock taken now and then (a backup's, the closing connection's).
    failures = result.ok ? 0 : failures + 1;
    if (failures >= MAX_FAILED_CHECKPOINTS) fail(new Error(`checkpoints keep failing: ${result.message}`));
  });
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`the checkpoint worker exited (code ${code})`)));
  return {
    committed() {
      if (running || pending || failed || closed) return;
      const wait = lastAt + intervalMs - performance.now();
      if (wait <= 0) return start();
      pending = true;
      setTimeout(start, wait).unref();
    },
    async close() {
      closed = true;
      await worker.terminate();
    },
  };
}
