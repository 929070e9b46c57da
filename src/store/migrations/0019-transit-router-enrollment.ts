import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';

/**
 * The outstanding enrollment of a transit router, beside it, as edge routers have theirs (0015);
 * the view of every router (0008) shows it for both. Routers made before this migration have none.
 */
export const m0019TransitRouterEnrollment: StoreMigration = {
  name: '0019-transit-router-enrollment',
  async up(db, d) {
    const enrollment = ['enrollment_token_hash', 'enrollment_sealed_jwt', 'enrollment_created_at', 'enrollment_expires_at'];
    for (const column of enrollment) await db.schema.alterTable('routers').addColumn(column, sql.raw(d.columnType('text'))).execute();
    await db.schema.createIndex('routers_enrollment_token_hash_unique').on('routers').column('enrollment_token_hash').unique().execute();
    const columns = ['id', 'created_at', 'updated_at', 'tags', 'name', 'cost', 'disabled', 'no_traversal', 'ctrl_chan_listeners', 'fingerprint', 'is_online', 'is_verified', ...enrollment];
    await db.schema.dropView('all_routers').execute();
    await db.schema
      .createView('all_routers')
      .as(db.selectFrom('routers').select(columns).unionAll(db.selectFrom('edge_routers').select(columns)))
      .execute();
  },
};
