import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';
import { createEntityTable } from './ddl.js';

/**
 * TOTP enrollments, one per identity at most, and the time an API session last passed MFA (what
 * MFA posture checks time out from).
 */
export const m0010Mfa: StoreMigration = {
  name: '0010-mfa',
  async up(db, d) {
    await createEntityTable(db, d, 'mfas', {
      identity_id: { type: 'text', notNull: true, unique: true, references: { table: 'identities', onDelete: 'cascade' } },
      is_verified: { type: 'boolean', notNull: true, default: 0 },
      secret: { type: 'text', notNull: true },
      recovery_codes: { type: 'text', notNull: true },
      pending_recovery_codes: { type: 'text' },
      last_totp_step: { type: 'integer' },
    });
    await db.schema.alterTable('api_sessions').addColumn('mfa_passed_at', sql.raw(d.columnType('text'))).execute();
  },
};
