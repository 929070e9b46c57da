// Outstanding enrollments of identities: a one-time token an identity's device (ott, ottca) or person
// (updb) exchanges for its first authenticator. The token is kept twice, neither in the clear: as a
// SHA-256 digest, by which an enrollment is found, and inside its JWT (signed when the token is
// issued), sealed under the data directory's key: an admin reads the token and the JWT while the
// enrollment is outstanding, and a copy of the database alone holds no usable token.
import { field, MAX_NAME, defineResource } from './kit.js';

export const ENROLLMENT_METHODS = ['ott', 'ottca', 'updb'] as const;
export type EnrollmentMethod = (typeof ENROLLMENT_METHODS)[number];

export const enrollments = defineResource({
  name: 'enrollments',
  label: 'enrollment',
  table: 'enrollments',
  permission: 'enrollment',
  operations: ['list', 'get', 'create', 'delete'],
  owner: 'identityId',
  fields: {
    method: field.enum(ENROLLMENT_METHODS, 'ott (a certificate for a CSR), ottca (a certificate of a CA) or updb (a password)', {
      required: 'create',
      createOnly: true,
    }),
    identityId: field.ref('identities', 'the identity it enrolls', {
      required: 'create',
      createOnly: true,
      ref: { collection: 'identities', onDelete: 'cascade' },
    }),
    expiresAt: field.datetime('when the token stops being accepted', { required: 'create', createOnly: true }),
    caId: field.string('ottca only: the CA whose certificate the device presents', {
      nullable: true,
      createOnly: true,
      minLength: 1,
      maxLength: MAX_NAME,
    }),
    username: field.string('updb only: the username of the password authenticator it makes', {
      nullable: true,
      createOnly: true,
      minLength: 4,
      maxLength: 100,
    }),
    issuedAt: field.datetime('when the current token was issued', { readOnly: true, nullable: true }),
    tokenHash: field.string('SHA-256 of the one-time token', {
      readOnly: true,
      writeOnly: true,
      required: 'always',
      unique: true,
      maxLength: 128,
    }),
    sealedJwt: field.string('the enrollment JWT, which carries the token, sealed', {
      readOnly: true,
      writeOnly: true,
      required: 'always',
      maxLength: 8192,
    }),
  },
});
