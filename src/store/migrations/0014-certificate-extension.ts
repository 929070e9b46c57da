import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';
import { createEntityTable } from './ddl.js';

/**
 * The certificate an authenticator's extension issued, kept beside the active one until the client
 * verifies it; and the short-lived certificates of API sessions, deleted with their session.
 */
export const m0014CertificateExtension: StoreMigration = {
  name: '0014-certificate-extension',
  async up(db, d) {
    await db.schema.alterTable('authenticators').addColumn('unverified_cert_pem', sql.raw(d.columnType('text'))).execute();
    await db.schema.alterTable('authenticators').addColumn('unverified_fingerprint', sql.raw(d.columnType('text'))).execute();
    await createEntityTable(db, d, 'api_session_certificates', {
      api_session_id: { type: 'text', notNull: true, references: { table: 'api_sessions', onDelete: 'cascade' } },
      subject: { type: 'text', notNull: true },
      fingerprint: { type: 'text', notNull: true },
      valid_from: { type: 'text', notNull: true },
      valid_to: { type: 'text', notNull: true },
      certificate: { type: 'text', notNull: true },
    });
  },
};
