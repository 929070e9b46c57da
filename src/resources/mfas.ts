import { field, defineResource } from './kit.js';

/**
 * An identity's TOTP enrollment. Served only through the MFA operations of the current identity and
 * the admin removal, never as a collection: nothing of it but `isVerified` is public. The secret and
 * the recovery codes not yet confirmed are sealed with the data directory's key; confirmed recovery
 * codes are kept as keyed hashes only.
 */
export const mfas = defineResource({
  name: 'mfas',
  label: 'MFA enrollment',
  table: 'mfas',
  permission: null,
  operations: [],
  owner: 'identityId',
  fields: {
    identityId: field.ref('identities', 'the enrolled identity', {
      readOnly: true,
      required: 'always',
      unique: true,
      ref: { collection: 'identities', onDelete: 'cascade' },
    }),
    isVerified: field.boolean('a live code has confirmed the enrollment', { readOnly: true, default: false }),
    secret: field.string('the TOTP secret, sealed', { readOnly: true, writeOnly: true, required: 'always', maxLength: 512 }),
    recoveryCodes: field.string('keyed hashes of the unused recovery codes, comma-separated', {
      readOnly: true,
      writeOnly: true,
      required: 'always',
      maxLength: 4096,
    }),
    pendingRecoveryCodes: field.string('the recovery codes while the enrollment is unconfirmed, sealed', {
      readOnly: true,
      writeOnly: true,
      nullable: true,
      maxLength: 1024,
    }),
    lastTotpStep: field.integer('the time step of the last code accepted: no code of it or before is accepted again', {
      readOnly: true,
      writeOnly: true,
      nullable: true,
    }),
  },
});
