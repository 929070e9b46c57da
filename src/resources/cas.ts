// Third-party certificate authorities: a CA certificate an administrator registers, verified by proof
// that its key signs a certificate naming the verification token, after which its certificates may
// log in (isAuthEnabled) and enroll identities (ottca, auto enrollment). The domain rules are in
// domain/cas.ts.
import { Type } from '@sinclair/typebox';
import { field, MAX_NAME, defineResource } from './kit.js';
import { MAX_CERT_PEM } from './authenticators.js';

export const EXTERNAL_ID_LOCATIONS = ['COMMON_NAME', 'SAN_URI', 'SAN_EMAIL'] as const;
export const EXTERNAL_ID_MATCHERS = ['ALL', 'PREFIX', 'SUFFIX', 'SCHEME'] as const;
export const EXTERNAL_ID_PARSERS = ['NONE', 'SPLIT'] as const;

/** The name an identity enrolled through a CA gets unless the CA says otherwise (the established default). */
export const DEFAULT_IDENTITY_NAME_FORMAT = '[caName]-[commonName]';

const claimParts = {
  index: Type.Integer({ minimum: 0, maximum: 1000, description: 'which of the values found is the external id' }),
  location: Type.Union(
    EXTERNAL_ID_LOCATIONS.map((v) => Type.Literal(v)),
    { description: 'where in the certificate the value is read' },
  ),
  matcher: Type.Union(
    EXTERNAL_ID_MATCHERS.map((v) => Type.Literal(v)),
    { description: 'which values found there count' },
  ),
  matcherCriteria: Type.String({ maxLength: MAX_NAME, description: 'the prefix, suffix or scheme the matcher wants' }),
  parser: Type.Union(
    EXTERNAL_ID_PARSERS.map((v) => Type.Literal(v)),
    { description: 'how a value is cut into ids' },
  ),
  parserCriteria: Type.String({ maxLength: MAX_NAME, description: 'the separator of SPLIT' }),
};

export const ExternalIdClaimSchema = Type.Object(claimParts, { title: 'externalIdClaim' });
export const ExternalIdClaimPatchSchema = Type.Object(
  Object.fromEntries(Object.entries(claimParts).map(([k, s]) => [k, Type.Optional(s)])),
  { title: 'externalIdClaimPatch' },
);

export const cas = defineResource({
  name: 'cas',
  label: 'CA',
  table: 'cas',
  permission: 'ca',
  operationIds: { get: 'detailCa', create: 'createCa', update: 'updateCa', patch: 'patchCa', delete: 'deleteCa' },
  // behaviour.md §1: its verification (POST) and its enrollment JWT.
  links: ['verify', 'jwt'],
  fields: {
    name: field.name(),
    certPem: field.string('the PEM certificate of the CA', { required: 'create', createOnly: true, minLength: 1, maxLength: MAX_CERT_PEM, filterable: false }),
    fingerprint: field.string('SHA-1 fingerprint of the CA certificate', { readOnly: true, required: 'always', unique: true, maxLength: MAX_NAME }),
    isVerified: field.boolean('its key was shown to sign a certificate naming the verification token', { readOnly: true, default: false }),
    adminWritten: field.boolean('an admin wrote it last: one written by a caller without admin rights logs in no admin or permission holder', {
      readOnly: true,
      writeOnly: true,
      default: true,
    }),
    verificationToken: field.string('the common name the verification certificate must carry', { readOnly: true, required: 'always', maxLength: 64 }),
    isAuthEnabled: field.boolean('certificates it issued may log in once it is verified', { required: 'always' }),
    isAutoCaEnrollmentEnabled: field.boolean('certificates it issued may enroll new identities', { required: 'always' }),
    isOttCaEnrollmentEnabled: field.boolean('certificates it issued may complete ottca enrollments', { required: 'always' }),
    identityRoles: field.set('role attributes given to identities enrolled through it', {
      required: 'always',
      schema: Type.String({ minLength: 1, maxLength: MAX_NAME, pattern: '^[^#@]' }),
    }),
    identityNameFormat: field.string('the name of identities enrolled through it; [caName], [caId], [commonName], [requestedName], [identityId] are replaced', {
      required: 'update',
      minLength: 1,
      maxLength: MAX_NAME,
      default: DEFAULT_IDENTITY_NAME_FORMAT,
    }),
    externalIdClaim: field.json(ExternalIdClaimSchema, 'where the external id of an enrolling certificate is read', {
      nullable: true,
      patchSchema: ExternalIdClaimPatchSchema,
      filterable: false,
    }),
  },
});
