import { sql } from 'kysely';
import type { StoreMigration } from '../store.js';

/**
 * OIDC refresh grants. A grant belongs to the API session its login opened and goes with it (and
 * with its identity). Refresh tokens are kept only as SHA-256 hashes; a rotated token stays, marked,
 * until its grant ends, so presenting it again is recognised as reuse. Times are ISO text.
 */
export const m0004Oidc: StoreMigration = {
  name: '0004-oidc',
  async up(db, d) {
    const text = sql.raw(d.columnType('text'));
    const json = sql.raw(d.columnType('json'));
    await db.schema
      .createTable('oidc_grants')
      .addColumn('id', 'text', (c) => c.primaryKey().notNull())
      .addColumn('api_session_id', text, (c) => c.notNull().references('api_sessions.id').onDelete('cascade'))
      .addColumn('identity_id', text, (c) => c.notNull().references('identities.id').onDelete('cascade'))
      .addColumn('client_id', text, (c) => c.notNull())
      .addColumn('scopes', json, (c) => c.notNull())
      .addColumn('amr', json, (c) => c.notNull())
      .addColumn('auth_time', text, (c) => c.notNull())
      .addColumn('created_at', text, (c) => c.notNull())
      .addColumn('expires_at', text, (c) => c.notNull())
      .execute();
    await db.schema.createIndex('oidc_grants_api_session_id_unique').on('oidc_grants').column('api_session_id').unique().execute();
    await db.schema.createIndex('oidc_grants_identity_id_idx').on('oidc_grants').column('identity_id').execute();
    await db.schema.createIndex('oidc_grants_expires_at_idx').on('oidc_grants').column('expires_at').execute();

    await db.schema
      .createTable('oidc_refresh_tokens')
      .addColumn('token_hash', 'text', (c) => c.primaryKey().notNull())
      .addColumn('grant_id', text, (c) => c.notNull().references('oidc_grants.id').onDelete('cascade'))
      .addColumn('created_at', text, (c) => c.notNull())
      .addColumn('expires_at', text, (c) => c.notNull())
      .addColumn('rotated_at', text)
      .execute();
    await db.schema.createIndex('oidc_refresh_tokens_grant_id_idx').on('oidc_refresh_tokens').column('grant_id').execute();
  },
};
