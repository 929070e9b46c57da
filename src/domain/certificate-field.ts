// The `certPem` field of a record that holds one certificate (an authenticator, a CA, an external JWT
// signer): PEM that parses, and exactly one certificate in it, else a 400 naming the field.
import type { X509Certificate } from 'node:crypto';
import { fieldError } from '../errors.js';
import { parsePemCertificates } from '../pki/index.js';

export function singleCertificate(pem: string): X509Certificate {
  let certs: X509Certificate[];
  try {
    certs = parsePemCertificates(pem);
  } catch {
    throw fieldError('certPem', 'must be a PEM certificate');
  }
  if (certs.length !== 1) throw fieldError('certPem', 'must hold exactly one PEM certificate');
  return certs[0]!;
}
