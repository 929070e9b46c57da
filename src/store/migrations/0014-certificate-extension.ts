import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';

/** The certificate an authenticator's extension issued, kept beside the active one until the client verifies it. */
export const m0014CertificateExtension: StoreMigration = {
  name: '0014-certificate-extension',
  async up(db, d) {
    await db.schema.alterTable('authenticators').addColumn('unverified_cert_pem', sql.raw(d.columnType('text'))).execute();
    await db.schema.alterTable('authenticators').addColumn('unverified_fingerprint', sql.raw(d.columnType('text'))).execute();
  },
};
