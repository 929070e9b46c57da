import type { StoreMigration } from '../store.js';
import { createEntityTable } from './ddl.js';

/**
 * The audit log: one row per recorded change, login or failed login. Indexed for what it is asked
 * (newest first, by actor, by entity) and for pruning by age; the count bound prunes by the same
 * index.
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
    await db.schema.createIndex('audit_events_actor_identity_id_idx').on('audit_events').column('actor_identity_id').execute();
    await db.schema.createIndex('audit_events_entity_idx').on('audit_events').columns(['entity_type', 'entity_id']).execute();
  },
};
