// PKCS#7 / CMS "certs-only" bundles (RFC 5652 §5, degenerate SignedData; the "Simple PKI Response" of
// RFC 5272 §4.1 that EST's /cacerts answers with, RFC 7030 §4.1.3).
//
// Encoded by hand rather than with @peculiar/x509's X509Certificates.export(): that one writes an
// empty eContent OCTET STRING into encapContentInfo, whereas a certs-only message omits eContent.
// The structure is fixed and tiny, and this output is byte-identical to
// `openssl crl2pkcs7 -nocrl -certfile <pem> -outform DER`.

import { parsePemCertificates } from './pem.js';

// 1.2.840.113549.1.7.2 id-signedData, 1.2.840.113549.1.7.1 id-data
const OID_SIGNED_DATA = Buffer.from('06092a864886f70d010702', 'hex');
const OID_DATA = Buffer.from('06092a864886f70d010701', 'hex');

const SEQUENCE = 0x30;
const SET = 0x31;
const INTEGER = 0x02;
const CONTEXT_0_CONSTRUCTED = 0xa0;

function derLength(length: number): Buffer {
  if (length < 0x80) return Buffer.from([length]);
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

/**
 * DER of a certs-only PKCS#7 SignedData holding the certificates of the given PEM texts (each may
 * hold several certificates), in the given order:
 *
 *   ContentInfo { id-signedData, [0] SignedData { version 1, digestAlgorithms {}, encapContentInfo
 *   { id-data } (no eContent), certificates [0] IMPLICIT {...}, signerInfos {} } }
 *
 * Certificate order is kept as given (as OpenSSL does) instead of being DER-sorted, so readers see
 * the root first. Throws when no certificate is given or a PEM block is not a certificate.
 */
export function pkcs7CertsOnly(certPems: readonly string[]): Buffer {
  const certs = certPems.flatMap((pem) => parsePemCertificates(pem));
  if (certs.length === 0) throw new Error('a PKCS#7 bundle needs at least one certificate');
  const signedData = tlv(
    SEQUENCE,
    tlv(INTEGER, Buffer.from([1])),
    tlv(SET),
    tlv(SEQUENCE, OID_DATA),
    tlv(CONTEXT_0_CONSTRUCTED, ...certs.map((c) => c.raw)),
    tlv(SET),
  );
  return tlv(SEQUENCE, OID_SIGNED_DATA, tlv(CONTEXT_0_CONSTRUCTED, signedData));
}
