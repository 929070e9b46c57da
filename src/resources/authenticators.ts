import { field, MAX_NAME, defineResource } from './kit.js';

export const MAX_CERT_PEM = 16 * 1024;

export const authenticators = defineResource({
  name: 'authenticators',
  label: 'authenticator',
  table: 'authenticators',
  // No group of the interface's permission list covers them: a holder of `identity` who could set
  // a password could log in as the identity. Admins only, as in the established controller.
  permission: null,
  // The identity it authenticates, as the established controller links it (no route lists an
  // authenticator's identities).
  refLinks: { identities: 'identityId' },
  owner: 'identityId',
  fields: {
    method: field.enum(['updb', 'cert'], 'updb (username and password) or cert', { required: 'create', createOnly: true }),
    identityId: field.ref('identities', 'the identity it authenticates', {
      required: 'create',
      createOnly: true,
      ref: { collection: 'identities', onDelete: 'cascade' },
    }),
    username: field.string('updb only', { minLength: 4, maxLength: 100, nullable: true, unique: true, required: 'update' }),
    password: field.string('updb only; stored as an Argon2id hash; null leaves it as it is', {
      minLength: 5,
      maxLength: 100,
      writeOnly: true,
      virtual: true,
      nullable: true,
      required: 'update',
    }),
    certPem: field.string('cert only: the PEM certificate', { maxLength: MAX_CERT_PEM, createOnly: true, nullable: true, filterable: false }),
    fingerprint: field.string('SHA-1 fingerprint of the certificate', { readOnly: true, nullable: true, unique: true, maxLength: MAX_NAME }),
    caId: field.ref('cas', 'the third-party CA whose certificate issued it; deleting the CA deletes it', {
      readOnly: true,
      writeOnly: true,
      nullable: true,
    }),
    isIssuedByNetwork: field.boolean('the certificate was issued by the controller', { readOnly: true, default: false }),
    isExtendRequested: field.boolean('flagged for extension', { readOnly: true, default: false }),
    isKeyRollRequested: field.boolean('extension should roll keys', { readOnly: true, default: false }),
    extendRequestedAt: field.datetime('when extension was requested', { readOnly: true, nullable: true }),
    lastAuthResolvedToRoot: field.boolean('the last certificate login chained to a root', { readOnly: true, default: false }),
    lastExtendRolledKeys: field.boolean('the last extension rolled keys', { readOnly: true, default: false }),
    unverifiedCertPem: field.string('cert only: the certificate an extension issued, active once the client verifies it', {
      readOnly: true,
      writeOnly: true,
      nullable: true,
      maxLength: MAX_CERT_PEM,
    }),
    unverifiedFingerprint: field.string('SHA-1 fingerprint of the certificate awaiting verification', {
      readOnly: true,
      writeOnly: true,
      nullable: true,
      maxLength: MAX_NAME,
    }),
    passwordHash: field.string('Argon2id PHC string', { readOnly: true, writeOnly: true, nullable: true, maxLength: 512 }),
    failedAttempts: field.integer('consecutive failed logins', { readOnly: true, writeOnly: true, default: 0 }),
  },
});
