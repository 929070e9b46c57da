import type { StoreMigration } from '../store.js';
import { createEntityTable } from './ddl.js';

/** Identity types, auth policies, identities, authenticators and API sessions. */
export const m0002Identities: StoreMigration = {
  name: '0002-identities',
  async up(db, d) {
    await createEntityTable(db, d, 'identity_types', {
      name: { type: 'text', notNull: true, unique: true },
    });
    await createEntityTable(
      db,
      d,
      'auth_policies',
      {
        name: { type: 'text', notNull: true, unique: true },
        primary: { type: 'json', notNull: true },
        secondary: { type: 'json', notNull: true },
      },
      { system: true },
    );
    await createEntityTable(db, d, 'identities', {
      name: { type: 'text', notNull: true, unique: true },
      type: { type: 'text', notNull: true },
      is_admin: { type: 'boolean', notNull: true },
      is_default_admin: { type: 'boolean', notNull: true, default: 0 },
      auth_policy_id: { type: 'text', notNull: true, references: { table: 'auth_policies', onDelete: 'restrict' } },
      external_id: { type: 'text', unique: true },
      app_data: { type: 'json' },
      default_hosting_cost: { type: 'integer', notNull: true, default: 0 },
      default_hosting_precedence: { type: 'text', notNull: true, default: "'default'" },
      service_hosting_costs: { type: 'json', notNull: true, default: "'{}'" },
      service_hosting_precedences: { type: 'json', notNull: true, default: "'{}'" },
      role_attributes: { type: 'json', notNull: true, default: "'[]'" },
      permissions: { type: 'json', notNull: true, default: "'[]'" },
      disabled: { type: 'boolean', notNull: true, default: 0 },
      disabled_at: { type: 'text' },
      disabled_until: { type: 'text' },
      env_info: { type: 'json', notNull: true, default: "'{}'" },
      sdk_info: { type: 'json', notNull: true, default: "'{}'" },
      interfaces: { type: 'json', notNull: true, default: "'[]'" },
    });
    await createEntityTable(db, d, 'authenticators', {
      method: { type: 'text', notNull: true },
      identity_id: { type: 'text', notNull: true, references: { table: 'identities', onDelete: 'cascade' } },
      username: { type: 'text', unique: true },
      cert_pem: { type: 'text' },
      fingerprint: { type: 'text', unique: true },
      is_issued_by_network: { type: 'boolean', notNull: true, default: 0 },
      is_extend_requested: { type: 'boolean', notNull: true, default: 0 },
      is_key_roll_requested: { type: 'boolean', notNull: true, default: 0 },
      extend_requested_at: { type: 'text' },
      last_auth_resolved_to_root: { type: 'boolean', notNull: true, default: 0 },
      last_extend_rolled_keys: { type: 'boolean', notNull: true, default: 0 },
      password_hash: { type: 'text' },
      failed_attempts: { type: 'integer', notNull: true, default: 0 },
    });
    await createEntityTable(db, d, 'api_sessions', {
      token_hash: { type: 'text', notNull: true, unique: true },
      identity_id: { type: 'text', notNull: true, references: { table: 'identities', onDelete: 'cascade' } },
      authenticator_id: { type: 'text' },
      auth_method: { type: 'text', notNull: true },
      config_types: { type: 'json', notNull: true, default: "'[]'" },
      ip_address: { type: 'text' },
      last_activity_at: { type: 'text', notNull: true },
      is_mfa_required: { type: 'boolean', notNull: true, default: 0 },
      is_mfa_complete: { type: 'boolean', notNull: true, default: 0 },
      is_cert_extendable: { type: 'boolean', notNull: true, default: 0 },
      improper_client_cert_chain: { type: 'boolean', notNull: true, default: 0 },
    });
  },
};
