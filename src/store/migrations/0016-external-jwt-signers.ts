import type { StoreMigration } from '../store.js';
import { createEntityTable } from './ddl.js';

/** External JWT signers: identity providers whose JWTs log in, satisfy a second factor and enroll. */
export const m0016ExternalJwtSigners: StoreMigration = {
  name: '0016-external-jwt-signers',
  async up(db, d) {
    await createEntityTable(db, d, 'external_jwt_signers', {
      name: { type: 'text', notNull: true, unique: true },
      issuer: { type: 'text', notNull: true, unique: true },
      audience: { type: 'text' },
      enabled: { type: 'boolean', notNull: true },
      cert_pem: { type: 'text' },
      jwks_endpoint: { type: 'text' },
      kid: { type: 'text', unique: true },
      claims_property: { type: 'text', notNull: true, default: "'sub'" },
      use_external_id: { type: 'boolean', notNull: true, default: 0 },
      client_id: { type: 'text' },
      external_auth_url: { type: 'text' },
      scopes: { type: 'json', notNull: true, default: "'[]'" },
      target_token: { type: 'text', notNull: true, default: "'ACCESS'" },
      enroll_to_cert_enabled: { type: 'boolean', notNull: true, default: 0 },
      enroll_to_token_enabled: { type: 'boolean', notNull: true, default: 0 },
      enroll_auth_policy_id: { type: 'text', notNull: true, default: "''" },
      enroll_name_claims_selector: { type: 'text', notNull: true, default: "''" },
      enroll_attribute_claims_selector: { type: 'text', notNull: true, default: "''" },
      common_name: { type: 'text' },
      fingerprint: { type: 'text', unique: true },
      not_before: { type: 'text' },
      not_after: { type: 'text' },
    });
  },
};
