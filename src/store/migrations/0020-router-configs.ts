import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';

/**
 * The configs of a transit router, beside it, as an edge router keeps its own (0003); the view of
 * every router (0008) shows them for both. Routers made before this migration have none.
 */
export const m0020RouterConfigs: StoreMigration = {
  name: '0020-router-configs',
  async up(db, d) {
    await db.schema
      .alterTable('routers')
      .addColumn('configs', sql.raw(d.columnType('json')), (c) => c.notNull().defaultTo(sql.raw("'[]'")))
      .execute();
    const enrollment = ['enrollment_token_hash', 'enrollment_sealed_jwt', 'enrollment_created_at', 'enrollment_expires_at'];
    const columns = ['id', 'created_at', 'updated_at', 'tags', 'name', 'cost', 'disabled', 'no_traversal', 'ctrl_chan_listeners', 'fingerprint', 'is_online', 'is_verified', ...enrollment, 'configs'];
    await db.schema.dropView('all_routers').execute();
    await db.schema
      .createView('all_routers')
      .as(db.selectFrom('routers').select(columns).unionAll(db.selectFrom('edge_routers').select(columns)))
      .execute();
  },
};
