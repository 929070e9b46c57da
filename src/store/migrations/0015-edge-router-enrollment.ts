import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';

/**
 * The outstanding enrollment of an edge router, beside the router: the digest of its one-time token
 * (unique, as a token finds its router by it), its JWT sealed, and when it was made and expires.
 * All null once the router has enrolled. Routers made before this migration have none; re-enrolling
 * one gives it one.
 */
export const m0015EdgeRouterEnrollment: StoreMigration = {
  name: '0015-edge-router-enrollment',
  async up(db, d) {
    for (const column of ['enrollment_token_hash', 'enrollment_sealed_jwt', 'enrollment_created_at', 'enrollment_expires_at']) {
      await db.schema.alterTable('edge_routers').addColumn(column, sql.raw(d.columnType('text'))).execute();
    }
    await db.schema.createIndex('edge_routers_enrollment_token_hash_unique').on('edge_routers').column('enrollment_token_hash').unique().execute();
  },
};
