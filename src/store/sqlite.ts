// The embedded store: SQLite through better-sqlite3, WAL journal, foreign keys on, and `durable()`
// to tell when commits are on disk, so that no write is acknowledged before it would survive a
// crash (the kernel waits for it; Store.transaction too). The database file is
// owner-only (0600) before SQLite opens it: SQLite gives the -wal, -shm and journal files it creates
// later the mode of the database file, so they are owner-only too.
//
// A commit does not wait for the disk on the event loop: SQLite syncs only at checkpoints
// (synchronous = NORMAL), and `durable()` flushes the WAL (fdatasync, on a worker thread) after
// commits, which makes the same guarantee as synchronous = FULL for every commit it covers. Commits
// made while a flush runs share the next one.
import Database from 'better-sqlite3';
import { closeSync, fchmodSync, fdatasync, openSync, statSync } from 'node:fs';
import { promisify } from 'node:util';
import { Kysely, SqliteAdapter, SqliteDialect, sql, type CompiledQuery, type QueryResult } from 'kysely';
import type { ColumnType } from '../resources/kit.js';
import type { ColumnInfo, Dialect, Executor, Tx } from './dialect.js';
import { registerFlavorFunctions, sqliteFlavor } from './sqlite-flavor.js';
import { startCheckpointer, type CheckpointerOptions } from './checkpointer.js';

const DDL: Record<ColumnType, string> = {
  text: 'text',
  integer: 'integer',
  real: 'real',
  boolean: 'integer',
  json: 'text',
};

/**
 * SQLite's DDL is transactional, but the query builder's SQLite adapter says otherwise, so its
 * migrator ran each statement as a commit of its own: a start killed (or refused by a full disk)
 * within a migration left it done in part and unrecorded, and every later start failed on its
 * first statement. Said as it is, the pending migrations of a start and their records commit
 * together, or none of them does and the store stays as the previous version left it.
 */
class TransactionalDdlAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

class TransactionalDdlDialect extends SqliteDialect {
  override createAdapter(): SqliteAdapter {
    return new TransactionalDdlAdapter();
  }
}

/** Statements kept at most; queries with inline lists make many distinct texts, so the cache is bounded. */
const STATEMENT_CACHE_SIZE = 512;

/**
 * Kysely prepares every query anew, and preparing costs about as much as running a join; the
 * same texts come back on every request, so prepared statements are kept by text, the least
 * recently used going first once `size` are kept. Statements run one at a time on this connection,
 * each to its end (Kysely's and those run straight, below), so a statement is never in use twice at
 * once.
 *
 * A statement used again moves to the newest end of the order only once it has fallen into the
 * older half: moving a key of a Map (delete, then set) leaves its old slot in V8's table until the
 * next rehash, and each later move of that key walks all of them (a hot statement among 300 took
 * ~1 µs a lookup that way). A statement used within the last `size / 2` placements is therefore
 * never the one that goes.
 */
export function withStatementCache<S>(database: { prepare(sqlText: string): S; close(): unknown }, size = STATEMENT_CACHE_SIZE): { prepare(sqlText: string): S; close(): void } {
  const statements = new Map<string, { statement: S; placed: number }>();
  /** Placements at the newest end so far: an entry's distance from that end is at most the difference. */
  let placements = 0;
  return {
    prepare(sqlText: string) {
      let entry = statements.get(sqlText);
      if (entry) {
        if (placements - entry.placed < size / 2) return entry.statement;
        statements.delete(sqlText);
      } else {
        entry = { statement: database.prepare(sqlText), placed: 0 };
        if (statements.size >= size) statements.delete(statements.keys().next().value!);
      }
      entry.placed = placements++;
      statements.set(sqlText, entry);
      return entry.statement;
    },
    close() {
      statements.clear();
      database.close();
    },
  };
}

/** What a statement with nothing to do answers, in the shape the query builder's driver reads. */
const NO_OP_STATEMENT = { reader: false, run: () => ({ changes: 0, lastInsertRowid: 0 }) } as unknown as Database.Statement;

/** Pages a backup step copies (1 MiB of 4 KiB pages): a few milliseconds of the event loop each. */
const PAGES_PER_STEP = 256;

/** Mode of the database file and, through SQLite, of its -wal, -shm and journal files. */
const FILE_MODE = 0o600;

/** Creates the database file owner-only if it does not exist; `:memory:` has no file. */
function createOwnerOnly(path: string): void {
  if (path === ':memory:' || path === '') return;
  let fd: number;
  try {
    fd = openSync(path, 'wx', FILE_MODE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return;
    throw err;
  }
  try {
    fchmodSync(fd, FILE_MODE); // the umask may have taken bits away; it cannot add any
  } finally {
    closeSync(fd);
  }
}

const flushToDisk = promisify(fdatasync);

/**
 * `durable` of a WAL: a flush started after every commit made so far. A flush already running may
 * have started before the latest commit, so callers meanwhile share the one after it.
 */
function walFlusher(flush: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const start = (): Promise<void> => {
    const flushing = flush().finally(() => {
      if (running === flushing) running = undefined;
    });
    running = flushing;
    return flushing;
  };
  return () => {
    if (!running) return start();
    next ??= running
      .catch(() => undefined)
      .then(() => {
        next = undefined;
        return start();
      });
    return next;
  };
}

export interface SqliteOptions {
  /** Flushes the WAL file (its descriptor) to disk; fdatasync on a worker thread by default. */
  flush?: (walFd: number) => Promise<void>;
  /** How the WAL is checkpointed off the event loop (checkpointer.ts). */
  checkpointer?: CheckpointerOptions;
}

export function openSqlite(path: string, options: SqliteOptions = {}): Dialect {
  createOwnerOnly(path);
  const database = new Database(path);
  database.pragma('journal_mode = WAL');
  database.pragma('foreign_keys = ON');
  const inMemory = path === ':memory:' || path === '';
  // Synced at checkpoints by SQLite, and by `durable()` after commits (above).
  database.pragma(inMemory ? 'synchronous = FULL' : 'synchronous = NORMAL');
  database.pragma('busy_timeout = 5000');
  registerFlavorFunctions(database);
  // The WAL exists once WAL mode is on; opened to flush it (never written through this descriptor).
  const walFd = inMemory ? undefined : openSync(`${path}-wal`, 'a', FILE_MODE);
  // The file opened: one removed or put in its place later is not where the writes go.
  const opened = inMemory ? undefined : statSync(path);
  const checkpointer = inMemory ? undefined : startCheckpointer(database, path, options.checkpointer);
  const flush = options.flush ?? flushToDisk;
  const durable =
    walFd === undefined
      ? async () => undefined
      : walFlusher(async () => {
          await flush(walFd);
          checkpointer?.committed();
        });
  const cached = withStatementCache(database);
  const connection = {
    ...cached,
    // SQLite rolls a transaction back itself on some failures (a full disk, an I/O error); the query
    // builder's ROLLBACK after it then fails with "no transaction is active" and that error, not the
    // one that said why, would reach the caller and the log.
    prepare: (sqlText: string) => (sqlText === 'rollback' && !database.inTransaction ? NO_OP_STATEMENT : cached.prepare(sqlText)),
  };
  const db = new Kysely({ dialect: new TransactionalDdlDialect({ database: connection }) });
  let closing: Promise<void> | undefined;
  /** The write transaction open now, if any: its statements run straight on the connection. */
  let writing: Tx | undefined;
  // What the query builder's SQLite driver answers for a statement, without the way there.
  const run = (query: CompiledQuery): QueryResult<unknown> => {
    const statement = connection.prepare(query.sql);
    if (statement.reader) return { rows: statement.all(query.parameters) };
    const { changes, lastInsertRowid } = statement.run(query.parameters);
    return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
  };

  return {
    name: 'sqlite',
    db,
    flavor: sqliteFlavor,
    columnType: (type) => DDL[type],
    toDb(type, value) {
      if (value === undefined || value === null) return null;
      if (type === 'boolean') return value ? 1 : 0;
      if (type === 'json') return JSON.stringify(value);
      return value;
    },
    fromDb(type, value) {
      if (value === null || value === undefined) return null;
      if (type === 'boolean') return value === 1 || value === true;
      if (type === 'json') return typeof value === 'string' ? JSON.parse(value) : value;
      return value;
    },
    uniqueViolation(err, table) {
      if (!(err instanceof Error) || (err as { code?: string }).code !== 'SQLITE_CONSTRAINT_UNIQUE') return undefined;
      const m = new RegExp(`UNIQUE constraint failed: ${table}\\.(\\w+)`).exec(err.message);
      return m?.[1];
    },
    // RESTRICT actions report SQLITE_CONSTRAINT_TRIGGER, deferred checks SQLITE_CONSTRAINT_FOREIGNKEY.
    isForeignKeyViolation: (err) =>
      err instanceof Error &&
      String((err as { code?: string }).code).startsWith('SQLITE_CONSTRAINT') &&
      err.message.includes('FOREIGN KEY constraint failed'),
    async columns(table) {
      const { rows } = await sql<{ name: string; type: string; notnull: number }>`
        select name, type, "notnull" from pragma_table_info(${table})`.execute(db);
      return rows.map((r): ColumnInfo => ({ name: r.name, ddlType: r.type.toLowerCase(), nullable: r.notnull === 0 }));
    },
    async uniqueColumns(table, ex = db) {
      const { rows } = await sql<{ name: string; unique: number; origin: string }>`
        select name, "unique", origin from pragma_index_list(${table})`.execute(ex);
      const columns: string[] = [];
      for (const index of rows.filter((r) => r.unique === 1 && r.origin !== 'pk')) {
        const info = await sql<{ name: string }>`select name from pragma_index_info(${index.name})`.execute(ex);
        if (info.rows.length === 1) columns.push(info.rows[0]!.name);
      }
      return columns;
    },
    // A connection of its own, read-only, in one read transaction held from the first page to the
    // last: it sees the committed store of one moment (WAL), writers go on, and the copy is never
    // restarted by their commits. Copied a few pages per step, so the event loop (and with it the
    // writers) runs between steps. (The writing connection's own backup is not used: started while
    // one of its write transactions is open, better-sqlite3 13 finishes at once with an empty copy.)
    async backup(target) {
      if (path === ':memory:' || path === '') throw new Error('an in-memory store has no file to copy');
      const source = new Database(path, { readonly: true, fileMustExist: true });
      try {
        source.pragma('busy_timeout = 5000');
        source.exec('begin');
        source.prepare('select count(*) from sqlite_schema').get(); // the read transaction starts here
        await source.backup(target, { progress: () => PAGES_PER_STEP });
        source.exec('commit');
      } finally {
        source.close();
      }
    },
    writeTransaction: (fn) =>
      db.transaction().execute(async (tx) => {
        writing = tx;
        try {
          return await fn(tx);
        } finally {
          writing = undefined;
        }
      }),
    // Stryker: the query builder answers the same, only later.
    execute: async <R>(ex: Executor, query: CompiledQuery) =>
      (ex === writing || (ex === db && !database.inTransaction) ? run(query) : await ex.executeQuery(query)) as QueryResult<R>,
    durable,
    fileProblem() {
      if (!opened) return undefined;
      let now;
      try {
        now = statSync(path);
      } catch {
        return `the store file ${path} was removed while the controller runs: its writes are lost at the next start`;
      }
      return now.ino !== opened.ino || now.dev !== opened.dev
        ? `the store file ${path} was replaced while the controller runs: it writes to the one it opened`
        : undefined;
    },
    beginWrite: () => checkpointer?.beginWrite(),
    endWrite: () => checkpointer?.endWrite(),
    reader() {
      if (path === ':memory:' || path === '') return { db, close: async () => undefined };
      const database = new Database(path, { readonly: true, fileMustExist: true });
      database.pragma('busy_timeout = 5000');
      registerFlavorFunctions(database);
      const reader = new Kysely({ dialect: new SqliteDialect({ database }) });
      return { db: reader, close: () => reader.destroy() };
    },
    close() {
      // Once, however often asked. A flush still running must not outlive the descriptor it flushes.
      closing ??= (async () => {
        await durable().catch(() => undefined);
        await checkpointer?.close();
        await db.destroy();
        if (walFd !== undefined) closeSync(walFd);
      })();
      return closing;
    },
  };
}
