import { field, MAX_NAME, defineResource } from './kit.js';

export const apiSessions = defineResource({
  name: 'api-sessions',
  label: 'API session',
  table: 'api_sessions',
  // As in the established controller: `ops` reads and ends API sessions (an admin's only an admin ends).
  permission: 'ops',
  operations: ['list', 'get', 'delete'],
  operationIds: { list: 'listAPISessions', get: 'detailAPISessions', delete: 'deleteAPISessions' },
  links: ['sessions'],
  owner: 'identityId',
  fields: {
    tokenHash: field.string('SHA-256 of the token', { readOnly: true, writeOnly: true, required: 'always', unique: true, maxLength: 128 }),
    identityId: field.ref('identities', 'the authenticated identity', {
      readOnly: true,
      required: 'always',
      ref: { collection: 'identities', onDelete: 'cascade' },
    }),
    authenticatorId: field.string('the authenticator used', { readOnly: true, nullable: true, maxLength: MAX_NAME }),
    authMethod: field.string('password, cert or ext-jwt', { readOnly: true, required: 'always', maxLength: 16 }),
    configTypes: field.set('config types asked for', { readOnly: true }),
    ipAddress: field.string('client address', { readOnly: true, nullable: true, maxLength: 64 }),
    lastActivityAt: field.datetime('last authenticated request', { readOnly: true, required: 'always' }),
    isMfaRequired: field.boolean('a secondary factor is required', { readOnly: true, default: false }),
    isMfaComplete: field.boolean('the secondary factor was given', { readOnly: true, default: false }),
    mfaPassedAt: field.datetime('when the secondary factor was last given', { readOnly: true, nullable: true, filterable: false }),
    isCertExtendable: field.boolean('authenticated by an extendable certificate', { readOnly: true, default: false }),
    improperClientCertChain: field.boolean('the client sent a chain that does not verify', { readOnly: true, default: false }),
  },
});
