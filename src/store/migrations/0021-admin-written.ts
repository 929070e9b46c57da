import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';

/**
 * Whether an admin last wrote a CA or an external JWT signer: one a caller without admin rights
 * wrote does not log in admins or identities holding permissions (domain/delegates.ts), whatever
 * happens to them later. Who wrote the records already stored is not known: they count as an
 * admin's, as they did before.
 */
export const m0021AdminWritten: StoreMigration = {
  name: '0021-admin-written',
  async up(db, d) {
    for (const table of ['cas', 'external_jwt_signers']) {
      await db.schema
        .alterTable(table)
        .addColumn('admin_written', sql.raw(d.columnType('boolean')), (c) => c.notNull().defaultTo(sql.raw('1')))
        .execute();
    }
  },
};
