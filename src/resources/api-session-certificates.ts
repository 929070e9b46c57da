// Short-lived client certificates an API session had signed for a key its client holds
// (/current-api-session/certificates). They belong to the API session and go with it: the store
// deletes them when the session is deleted or expires. Served only to that session, never as a
// collection of their own.
import { field, MAX_NAME, defineResource } from './kit.js';
import { MAX_CERT_PEM } from './authenticators.js';

export const apiSessionCertificates = defineResource({
  name: 'api-session-certificates',
  label: 'API session certificate',
  table: 'api_session_certificates',
  permission: null,
  operations: [],
  fields: {
    apiSessionId: field.ref('api-sessions', 'the API session the certificate was issued to', {
      readOnly: true,
      writeOnly: true,
      required: 'always',
      ref: { collection: 'api-sessions', onDelete: 'cascade' },
    }),
    subject: field.string('the subject of the certificate', { readOnly: true, required: 'always', maxLength: MAX_NAME }),
    fingerprint: field.string('SHA-1 fingerprint of the certificate', { readOnly: true, required: 'always', maxLength: MAX_NAME }),
    validFrom: field.datetime('the start of its validity', { readOnly: true, required: 'always' }),
    validTo: field.datetime('the end of its validity', { readOnly: true, required: 'always' }),
    certificate: field.string('the PEM certificate and the signing CA', {
      readOnly: true,
      required: 'always',
      maxLength: 2 * MAX_CERT_PEM,
      filterable: false,
    }),
  },
});
