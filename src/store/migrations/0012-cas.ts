import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';
import { createEntityTable } from './ddl.js';

/**
 * Third-party certificate authorities, and the link of a cert authenticator to the CA that issued
 * its certificate (deleting the CA deletes those authenticators; the domain does it, so their
 * deletes are announced, and the key refuses a delete that would leave one behind).
 */
export const m0012Cas: StoreMigration = {
  name: '0012-cas',
  async up(db, d) {
    await createEntityTable(db, d, 'cas', {
      name: { type: 'text', notNull: true, unique: true },
      cert_pem: { type: 'text', notNull: true },
      fingerprint: { type: 'text', notNull: true, unique: true },
      is_verified: { type: 'boolean', notNull: true, default: 0 },
      verification_token: { type: 'text', notNull: true },
      is_auth_enabled: { type: 'boolean', notNull: true },
      is_auto_ca_enrollment_enabled: { type: 'boolean', notNull: true },
      is_ott_ca_enrollment_enabled: { type: 'boolean', notNull: true },
      identity_roles: { type: 'json', notNull: true, default: "'[]'" },
      identity_name_format: { type: 'text', notNull: true },
      external_id_claim: { type: 'json' },
    });
    await db.schema
      .alterTable('authenticators')
      .addColumn('ca_id', sql.raw(d.columnType('text')), (c) => c.references('cas.id').onDelete('restrict'))
      .execute();
    await db.schema.createIndex('authenticators_ca_id_idx').on('authenticators').column('ca_id').execute();
  },
};
