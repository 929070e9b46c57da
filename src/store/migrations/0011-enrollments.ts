import type { StoreMigration } from '../store.js';
import { createEntityTable } from './ddl.js';

/**
 * Outstanding enrollments of identities. `ca_id` names a CA without a foreign key: the CAs' table is
 * another migration's, and an enrollment of a CA that is gone is refused at enrollment.
 */
export const m0011Enrollments: StoreMigration = {
  name: '0011-enrollments',
  async up(db, d) {
    await createEntityTable(db, d, 'enrollments', {
      method: { type: 'text', notNull: true },
      identity_id: { type: 'text', notNull: true, references: { table: 'identities', onDelete: 'cascade' } },
      expires_at: { type: 'text', notNull: true },
      ca_id: { type: 'text' },
      username: { type: 'text' },
      issued_at: { type: 'text' },
      token_hash: { type: 'text', notNull: true, unique: true },
      sealed_jwt: { type: 'text', notNull: true },
    });
  },
};
