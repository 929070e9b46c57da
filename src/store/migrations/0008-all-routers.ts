import type { StoreMigration } from '../store.js';

/**
 * Every router in one view: an edge router is a router too, so the routers collection reads the
 * routers table and the edge routers together (their common columns); each table stays as it was
 * and keeps its own writes. Names alone are not kept unique across the two by the store (see
 * domain/routers.ts).
 */
export const m0008AllRouters: StoreMigration = {
  name: '0008-all-routers',
  async up(db) {
    const columns = ['id', 'created_at', 'updated_at', 'tags', 'name', 'cost', 'disabled', 'no_traversal', 'ctrl_chan_listeners', 'fingerprint', 'is_online', 'is_verified'];
    await db.schema
      .createView('all_routers')
      .as(db.selectFrom('routers').select(columns).unionAll(db.selectFrom('edge_routers').select(columns)))
      .execute();
  },
};
