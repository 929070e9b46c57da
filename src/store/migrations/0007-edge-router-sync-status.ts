import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';

/**
 * An edge router's sync status: how far the controller has brought the router's copy of the network
 * state. Like its online state it is the router connection's to report; SYNC_UNKNOWN until then,
 * which is what a router that is not connected has.
 */
export const m0007EdgeRouterSyncStatus: StoreMigration = {
  name: '0007-edge-router-sync-status',
  async up(db, d) {
    await db.schema
      .alterTable('edge_routers')
      .addColumn('sync_status', sql.raw(d.columnType('text')), (c) => c.notNull().defaultTo(sql.raw("'SYNC_UNKNOWN'")))
      .execute();
  },
};
