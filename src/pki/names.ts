// The names a certificate carries that a CA's external id claim may read: the subject's common name
// and the URI and email subject alternative names, in the order the certificate lists them. Read
// with @peculiar/x509 from the DER, because node:crypto gives them only as display text, which
// escapes and joins values in ways a claim must not depend on.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import type { X509Certificate } from 'node:crypto';

export interface CertificateNames {
  /** The subject's common name; the last one when it has several, '' when none. */
  commonName: string;
  /** URI subject alternative names. */
  uris: string[];
  /** Email (rfc822Name) subject alternative names. */
  emails: string[];
}

/** The pathLenConstraint of a CA certificate's basic constraints; undefined when it sets none. */
export function pathLengthOf(cert: X509Certificate): number | undefined {
  return new x509.X509Certificate(cert.raw).getExtension(x509.BasicConstraintsExtension)?.pathLength;
}

export function certificateNames(cert: X509Certificate): CertificateNames {
  const parsed = new x509.X509Certificate(cert.raw);
  // Several common names are rare; the last is the one Go's x509 (the established controller's) reads.
  const commonName = parsed.subjectName.getField('CN').at(-1) ?? '';
  const san = parsed.getExtension(x509.SubjectAlternativeNameExtension);
  const items = san?.names.items ?? [];
  return {
    commonName,
    uris: items.filter((n) => n.type === 'url').map((n) => n.value),
    emails: items.filter((n) => n.type === 'email').map((n) => n.value),
  };
}
