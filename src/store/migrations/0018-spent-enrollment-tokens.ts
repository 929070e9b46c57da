import type { StoreMigration } from '../store.js';

/**
 * Hashes of the enrollment tokens that were used, each kept until its enrollment would have expired:
 * a token used again is told so (410) rather than unknown. Pruned by expiry, so indexed by it.
 */
export const m0018SpentEnrollmentTokens: StoreMigration = {
  name: '0018-spent-enrollment-tokens',
  async up(db) {
    await db.schema
      .createTable('spent_enrollment_tokens')
      .addColumn('token_hash', 'text', (c) => c.primaryKey().notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('spent_enrollment_tokens_expires_at_idx').on('spent_enrollment_tokens').column('expires_at').execute();
  },
};
