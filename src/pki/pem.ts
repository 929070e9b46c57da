// PEM text handling (RFC 7468): splitting PEM text into blocks, certificates from PEM, fingerprints.

import { X509Certificate, createHash } from 'node:crypto';

export interface PemBlock {
  label: string;
  der: Buffer;
}

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n([\s\S]*?)-----END ([A-Z0-9 ]+)-----/g;
const BASE64_BODY = /^[A-Za-z0-9+/=\s]*$/;

/**
 * Splits PEM text into its blocks. Explanatory text between blocks (e.g. openssl's "Bag Attributes"
 * or "subject=" lines) is ignored, as RFC 7468 allows; a malformed or unterminated block throws.
 */
export function parsePemBlocks(text: string): PemBlock[] {
  const blocks: PemBlock[] = [];
  let consumedUpTo = 0;
  for (const m of text.matchAll(BLOCK)) {
    const [, label = '', body = '', endLabel] = m;
    if (label !== endLabel) {
      throw new Error(`PEM block "${label}" ends with "-----END ${endLabel}-----"`);
    }
    if (!BASE64_BODY.test(body)) {
      throw new Error(`PEM block "${label}" is not valid base64 (headers are not supported)`);
    }
    const der = Buffer.from(body.replace(/\s+/g, ''), 'base64');
    if (der.length === 0) {
      throw new Error(`PEM block "${label}" is empty`);
    }
    blocks.push({ label, der });
    consumedUpTo = (m.index ?? 0) + m[0].length;
  }
  if (text.indexOf('-----BEGIN ', consumedUpTo) !== -1) {
    throw new Error('PEM text holds an unterminated or malformed block');
  }
  return blocks;
}

/** Encodes DER as a PEM block: 64-column base64 lines, "\n" line ends, trailing newline. */
export function toPem(label: string, der: Uint8Array): string {
  const b64 = Buffer.from(der.buffer, der.byteOffset, der.byteLength).toString('base64');
  const lines = b64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}

/**
 * Parses every certificate in PEM text, in order. Every block must be a `CERTIFICATE` holding exactly
 * one DER certificate; any other block (keys, CSRs, PKCS#7) throws. Text without blocks yields [].
 */
export function parsePemCertificates(text: string): X509Certificate[] {
  return parsePemBlocks(text).map((block, i) => {
    if (block.label !== 'CERTIFICATE') {
      throw new Error(`PEM block ${i + 1} is "${block.label}", expected "CERTIFICATE"`);
    }
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(block.der);
    } catch (err) {
      throw new Error(`PEM block ${i + 1} is not a valid X.509 certificate: ${(err as Error).message}`);
    }
    if (cert.raw.length !== block.der.length) {
      throw new Error(`PEM block ${i + 1} has trailing data after the certificate`);
    }
    return cert;
  });
}

/** PEM text of certificates, one block each, concatenated in the given order. */
export function certificatesToPem(certs: readonly X509Certificate[]): string {
  return certs.map((c) => toPem('CERTIFICATE', c.raw)).join('');
}

/** SHA-1 of a certificate's DER as lowercase hex: the fingerprint recorded by cert authenticators. */
export function fingerprintOfCertificate(cert: X509Certificate): string {
  return createHash('sha1').update(cert.raw).digest('hex');
}

/**
 * Fingerprint (see {@link fingerprintOfCertificate}) of the first certificate in PEM text: for a
 * chain that is the leaf. Throws when the text holds no certificate.
 */
export function fingerprintOfPem(pem: string): string {
  const [first] = parsePemCertificates(pem);
  if (!first) throw new Error('PEM text holds no certificate');
  return fingerprintOfCertificate(first);
}
