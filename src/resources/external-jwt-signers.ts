// External JWT signers: an identity provider whose JWTs the controller accepts, verified by its
// certificate or by the keys of its JWKS endpoint, for primary logins, as a second factor and for
// token enrollment (behaviour.md §7b). The checks of a write are in domain/external-jwt-signers.ts;
// verification is in auth/ext-jwt.ts.
import { Type } from '@sinclair/typebox';
import { field, MAX_NAME, MAX_STRING, defineResource } from './kit.js';
import { MAX_CERT_PEM } from './authenticators.js';

export const TARGET_TOKENS = ['ACCESS', 'ID'] as const;

/** The claim mapped to an identity, and the one an enrolled identity is named by, unless set otherwise. */
export const DEFAULT_CLAIMS_PROPERTY = 'sub';

export const externalJwtSigners = defineResource({
  name: 'external-jwt-signers',
  label: 'external JWT signer',
  table: 'external_jwt_signers',
  permission: 'external-jwt-signer',
  fields: {
    name: field.name(),
    issuer: field.string('the `iss` its JWTs carry', { required: 'always', unique: true, minLength: 1, maxLength: MAX_STRING }),
    audience: field.string('a value the `aud` of its JWTs must contain', { required: 'always', nullable: true, minLength: 1, maxLength: MAX_STRING }),
    enabled: field.boolean('its JWTs are accepted; a disabled signer verifies nothing', { required: 'always' }),
    certPem: field.string('the PEM certificate whose key signs its JWTs (or use jwksEndpoint)', {
      nullable: true,
      maxLength: MAX_CERT_PEM,
      filterable: false,
    }),
    jwksEndpoint: field.string('the https URL of its JSON Web Key Set (or use certPem)', { nullable: true, maxLength: MAX_STRING }),
    kid: field.string('the key id of certPem: JWTs naming another kid are refused', { nullable: true, unique: true, minLength: 1, maxLength: MAX_NAME }),
    claimsProperty: field.string('the claim naming the identity (default sub)', {
      nullable: true,
      minLength: 1,
      maxLength: MAX_NAME,
      default: DEFAULT_CLAIMS_PROPERTY,
    }),
    useExternalId: field.boolean('the claim is matched against identities\' externalId rather than their id', { nullable: true, default: false }),
    clientId: field.string('the OAuth client id a client starts a login at the provider with', { nullable: true, maxLength: MAX_NAME }),
    externalAuthUrl: field.string('where a client starts a login at the provider', { nullable: true, maxLength: MAX_STRING }),
    scopes: field.set('the scopes a client asks the provider for', {
      nullable: true,
      maxItems: 100,
      schema: Type.String({ minLength: 1, maxLength: MAX_NAME }),
    }),
    targetToken: field.enum(TARGET_TOKENS, 'which token of the provider a client sends: ACCESS or ID', { nullable: true, default: 'ACCESS' }),
    enrollToCertEnabled: field.boolean('its JWTs may enroll a new identity with a certificate', { default: false }),
    enrollToTokenEnabled: field.boolean('its JWTs may enroll a new identity that logs in with its JWTs', { default: false }),
    enrollAuthPolicyId: field.string('the auth policy of identities it enrolls (default: the default policy)', { maxLength: MAX_NAME, default: '' }),
    enrollNameClaimsSelector: field.string('the claim naming identities it enrolls (default sub)', { maxLength: MAX_NAME, default: '' }),
    enrollAttributeClaimsSelector: field.string('a claim holding the role attributes of identities it enrolls (a string array)', {
      maxLength: MAX_NAME,
      default: '',
    }),
    adminWritten: field.boolean('an admin wrote it last: one written by a caller without admin rights logs in no admin or permission holder', {
      readOnly: true,
      writeOnly: true,
      default: true,
    }),
    commonName: field.string('the common name of certPem', { readOnly: true, nullable: true, maxLength: MAX_STRING }),
    fingerprint: field.string('SHA-1 fingerprint of certPem', { readOnly: true, nullable: true, unique: true, maxLength: MAX_NAME }),
    notBefore: field.datetime('the start of the validity of certPem', { readOnly: true, nullable: true }),
    notAfter: field.datetime('the end of the validity of certPem', { readOnly: true, nullable: true }),
  },
});
