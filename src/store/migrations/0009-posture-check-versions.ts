import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';

/** Posture checks count their revisions: each existing check is at its first. */
export const m0009PostureCheckVersions: StoreMigration = {
  name: '0009-posture-check-versions',
  async up(db, d) {
    await db.schema
      .alterTable('posture_checks')
      .addColumn('version', sql.raw(d.columnType('integer')), (c) => c.notNull().defaultTo(sql.raw('1')))
      .execute();
  },
};
