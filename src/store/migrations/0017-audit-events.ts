import type { StoreMigration } from '../store.js';
import { createEntityTable } from './ddl.js';

/**
 * The audit log: one row per recorded change, login or failed login. Indexed by time only (newest
 * first, time ranges, pruning by age and by count): its ids and times grow, so every insert appends
 * to the end of each tree. Indexes by actor or entity would take an insert at a random place in each
 * for every write (measured: about a fifth fewer writes/s); a filter on those reads the rows of its
 * time range, at most the retention bound.
 */
export const m0017AuditEvents: StoreMigration = {
  name: '0017-audit-events',
  async up(db, d) {
    await createEntityTable(db, d, 'audit_events', {
      actor_identity_id: { type: 'text' },
      actor_name: { type: 'text' },
      actor_api_session_id: { type: 'text' },
      actor_method: { type: 'text' },
      action: { type: 'text', notNull: true },
      entity_type: { type: 'text', notNull: true },
      entity_id: { type: 'text' },
      entity_name: { type: 'text' },
      changes: { type: 'json', notNull: true, default: "'{}'" },
      request_id: { type: 'text' },
      ip_address: { type: 'text' },
    });
    await db.schema.createIndex('audit_events_created_at_idx').on('audit_events').columns(['created_at', 'id']).execute();
  },
};
