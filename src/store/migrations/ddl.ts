// Small DDL helpers for migrations, so each table is written the same way in both dialects.
import { sql, type CreateTableBuilder } from 'kysely';
import type { ColumnType } from '../../resources/kit.js';
import type { Db, Dialect } from '../dialect.js';

export interface ColumnDecl {
  type: ColumnType;
  notNull?: boolean;
  unique?: boolean;
  /** Literal SQL default, e.g. `'{}'` or `0`. */
  default?: string | number;
  references?: { table: string; onDelete?: 'cascade' | 'restrict' | 'set null' };
}

/** Creates a table with the base entity columns (id, created_at, updated_at, tags) plus `columns`. */
export async function createEntityTable(
  db: Db,
  d: Dialect,
  table: string,
  columns: Record<string, ColumnDecl>,
  opts: { system?: boolean } = {},
): Promise<void> {
  const base: Record<string, ColumnDecl> = {
    created_at: { type: 'text', notNull: true },
    updated_at: { type: 'text', notNull: true },
    tags: { type: 'json', notNull: true, default: "'{}'" },
    ...(opts.system ? { is_system: { type: 'boolean', notNull: true, default: 0 } } : {}),
  };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let builder: CreateTableBuilder<any, any> = db.schema
    .createTable(table)
    .addColumn('id', 'text', (c) => c.primaryKey().notNull());
  for (const [name, c] of Object.entries({ ...base, ...columns })) {
    builder = builder.addColumn(name, sql.raw(d.columnType(c.type)), (col) => {
      let b = col;
      if (c.notNull) b = b.notNull();
      if (c.default !== undefined) b = b.defaultTo(sql.raw(String(c.default)));
      if (c.references) {
        b = b.references(`${c.references.table}.id`).onDelete(c.references.onDelete ?? 'restrict');
      }
      return b;
    });
  }
  await builder.execute();
  for (const [name, c] of Object.entries(columns)) {
    if (c.unique) {
      await db.schema.createIndex(`${table}_${name}_unique`).on(table).column(name).unique().execute();
    } else if (c.references) {
      await db.schema.createIndex(`${table}_${name}_idx`).on(table).column(name).execute();
    }
  }
}
