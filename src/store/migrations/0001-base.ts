import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';

/** Controller-wide state: small named values the controller keeps about itself. */
export const m0001Base: StoreMigration = {
  name: '0001-base',
  async up(db, d) {
    await db.schema
      .createTable('controller_state')
      .addColumn('key', 'text', (c) => c.primaryKey().notNull())
      .addColumn('value', sql.raw(d.columnType('json')), (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
  },
};
