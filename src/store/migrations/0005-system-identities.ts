import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';

/** Identities the controller keeps itself (an edge router's tunneler identity) are system records. */
export const m0005SystemIdentities: StoreMigration = {
  name: '0005-system-identities',
  async up(db, d) {
    await db.schema
      .alterTable('identities')
      .addColumn('is_system', sql.raw(d.columnType('boolean')), (c) => c.notNull().defaultTo(sql.raw('0')))
      .execute();
  },
};
