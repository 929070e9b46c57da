import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';
import { createEntityTable } from './ddl.js';

/**
 * Sessions (Dial or Bind of one service inside one API session), the posture data clients report,
 * and the record of session requests refused for posture.
 *
 * - A session belongs to its API session and goes with it (and with its identity or service). One
 *   API session has at most one session per service and type: asking again answers the same one.
 * - Posture data is kept per API session (the device that reported it), one row per kind of data
 *   (`item_key` tells processes apart by path), and goes with the API session.
 * - A refused request is kept after its API session or service is gone (it names both), and goes
 *   with its identity.
 */
export const m0006Sessions: StoreMigration = {
  name: '0006-sessions',
  async up(db, d) {
    const text = sql.raw(d.columnType('text'));
    const json = sql.raw(d.columnType('json'));
    await createEntityTable(db, d, 'sessions', {
      api_session_id: { type: 'text', notNull: true, references: { table: 'api_sessions', onDelete: 'cascade' } },
      identity_id: { type: 'text', notNull: true, references: { table: 'identities', onDelete: 'cascade' } },
      service_id: { type: 'text', notNull: true, references: { table: 'services', onDelete: 'cascade' } },
      type: { type: 'text', notNull: true },
    });
    await db.schema
      .createIndex('sessions_api_session_service_type')
      .on('sessions')
      .columns(['api_session_id', 'service_id', 'type'])
      .unique()
      .execute();

    await db.schema
      .createTable('posture_data')
      .addColumn('api_session_id', text, (c) => c.notNull().references('api_sessions.id').onDelete('cascade'))
      .addColumn('identity_id', text, (c) => c.notNull().references('identities.id').onDelete('cascade'))
      .addColumn('kind', text, (c) => c.notNull())
      .addColumn('item_key', text, (c) => c.notNull().defaultTo(''))
      .addColumn('posture_check_id', text)
      .addColumn('data', json, (c) => c.notNull())
      .addColumn('updated_at', text, (c) => c.notNull())
      .addPrimaryKeyConstraint('posture_data_pk', ['api_session_id', 'kind', 'item_key'])
      .execute();
    await db.schema.createIndex('posture_data_identity_id_idx').on('posture_data').column('identity_id').execute();

    await db.schema
      .createTable('failed_service_requests')
      .addColumn('id', 'text', (c) => c.primaryKey().notNull())
      .addColumn('identity_id', text, (c) => c.notNull().references('identities.id').onDelete('cascade'))
      .addColumn('api_session_id', text, (c) => c.notNull())
      .addColumn('service_id', text, (c) => c.notNull())
      .addColumn('service_name', text, (c) => c.notNull())
      .addColumn('session_type', text, (c) => c.notNull())
      .addColumn('policy_failures', json, (c) => c.notNull())
      .addColumn('created_at', text, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('failed_service_requests_identity_idx')
      .on('failed_service_requests')
      .columns(['identity_id', 'created_at'])
      .execute();
  },
};
