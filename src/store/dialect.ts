// What differs between the embedded SQLite store and PostgreSQL, in one interface. Everything
// else in the store (migrations, repositories) is written once against it.
import type { CompiledQuery, Kysely, QueryResult, Transaction } from 'kysely';
import type { ColumnType } from '../resources/kit.js';
import type { SqlFlavor } from '../query/flavor.js';

// Tables are addressed by name from resource definitions, so the database is untyped here.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Db = Kysely<any>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Tx = Transaction<any>;
/** Either the database or an open transaction: what repository methods run on. */
export type Executor = Db | Tx;

export interface ColumnInfo {
  name: string;
  /** The declared type, lower case; compare with columnType(). */
  ddlType: string;
  nullable: boolean;
}

export interface Dialect {
  readonly name: 'sqlite' | 'postgres';
  readonly db: Db;
  readonly flavor: SqlFlavor;
  /** DDL type for a kit column type. */
  columnType(type: ColumnType): string;
  /**
   * Runs fn in a write transaction (Store.commit opens them all). SQLite runs one at a time, on its
   * one connection.
   */
  writeTransaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Runs a compiled query on `ex`. SQLite runs those of its open write transaction, and those on the
   * store while no transaction is open, straight on the connection: the query builder's way there (a
   * connection queue and a chain of promises) costs more than a simple statement, and a write
   * transaction runs several per write. A statement on the store while a transaction is open waits
   * for its end that way, so it never sees uncommitted rows.
   */
  execute<R = unknown>(ex: Executor, query: CompiledQuery): Promise<QueryResult<R>>;
  /** A value as the driver binds it. */
  toDb(type: ColumnType, value: unknown): unknown;
  /** A value as the driver returned it, back to its JSON form. */
  fromDb(type: ColumnType, value: unknown): unknown;
  /** The column a unique-constraint failure names, or undefined when the error is something else. */
  uniqueViolation(err: unknown, table: string): string | undefined;
  isForeignKeyViolation(err: unknown): boolean;
  /** Introspection for the schema test and data-integrity checks. */
  columns(table: string): Promise<ColumnInfo[]>;
  /** The single columns a unique index covers; read through `ex` when given (a reader's transaction). */
  uniqueColumns(table: string, ex?: Db): Promise<string[]>;
  /**
   * Copies the committed store, consistently, into the file `path` (created empty, owner-only, by the
   * caller) while writes go on.
   */
  backup(path: string): Promise<void>;
  /**
   * A read-only connection of its own, for long reads that must see one moment of the store without
   * holding writers up (the data integrity checks); the store's own connection where there can be
   * no other (an in-memory store). Closed by the caller.
   */
  reader(): { db: Db; close(): Promise<void> };
  /**
   * Resolves once every transaction committed so far is on disk (a commit itself does not wait
   * for the disk); rejects when the flush fails.
   */
  durable(): Promise<void>;
  /**
   * Why the store's file is no longer the one it writes to (removed or replaced while it runs: its
   * writes would be lost at the next start), or undefined.
   */
  fileProblem(): string | undefined;
  /**
   * Counts a write transaction in, before it begins: at once (undefined), or once the store lets
   * writes go on again (SQLite holds them for a moment so that its WAL can start over). Each is
   * counted out by endWrite when it has ended.
   */
  beginWrite(): Promise<void> | undefined;
  endWrite(): void;
  close(): Promise<void>;
}
