// The store: one dialect, its migrations, and transactions. Repositories are built on top.
import { Migrator, type Migration } from 'kysely';
import type { Db, Dialect, Tx } from './dialect.js';

export type { Executor, Tx } from './dialect.js';

/** A migration written once against the dialect interface; the list is append-only. */
export interface StoreMigration {
  name: string;
  up(db: Db, dialect: Dialect): Promise<void>;
}

export class Store {
  constructor(readonly dialect: Dialect) {}

  get db(): Db {
    return this.dialect.db;
  }

  async migrate(migrations: readonly StoreMigration[]): Promise<string[]> {
    const names = migrations.map((m) => m.name);
    if (new Set(names).size !== names.length) throw new Error('duplicate migration names');
    const byName: Record<string, Migration> = {};
    for (const m of migrations) byName[m.name] = { up: (db) => m.up(db, this.dialect) };
    const migrator = new Migrator({
      db: this.db,
      provider: { getMigrations: async () => byName },
      // Names sort in order of writing: a zero-padded sequence number leads each one.
      allowUnorderedMigrations: false,
    });
    const { error, results } = await migrator.migrateToLatest();
    if (error) throw error instanceof Error ? error : new Error(String(error));
    await this.durable();
    return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
  }

  /**
   * Runs fn in one transaction: everything it writes commits together or not at all. Answers once
   * the commit is on disk.
   */
  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const value = await this.commit(fn);
    await this.durable();
    return value;
  }

  /**
   * Runs fn in one transaction and answers at its commit, which other reads already see but which
   * may not be on disk yet: `durable()` tells when it is.
   */
  commit<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const held = this.dialect.beginWrite();
    return held ? held.then(() => this.committed(fn)) : this.committed(fn);
  }

  private async committed<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    try {
      return await this.dialect.writeTransaction(fn);
    } finally {
      this.dialect.endWrite();
    }
  }

  /** Resolves once every transaction committed so far is on disk. */
  durable(): Promise<void> {
    return this.dialect.durable();
  }

  close(): Promise<void> {
    return this.dialect.close();
  }
}
