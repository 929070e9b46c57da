// Certificate signing requests (PKCS#10) a device sends to enroll: read from PEM, their self-signature
// checked (the sender holds the private key), and their key held to what the controller signs —
// EC P-256 or P-384, or RSA of at least 2048 bits. Anything else is refused before any signing.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createPublicKey, webcrypto } from 'node:crypto';
import { parsePemBlocks } from './pem.js';

/** A CSR larger than this is not one a device needs to send. */
export const MAX_CSR_PEM = 16 * 1024;
export const MIN_RSA_BITS = 2048;
const EC_CURVES = new Set(['prime256v1', 'secp384r1']);

/** A CSR that may be signed: its self-signature checked, its key of an accepted kind. */
export interface CheckedCsr {
  publicKey: x509.PublicKey;
  /** The subject alternative names it asks for, as read; empty without any. */
  altNames: readonly { type: string; value: string }[];
  /** The DER value of its subject alternative name extension, to copy as it is; undefined without one. */
  altNamesDer: ArrayBuffer | undefined;
  /**
   * Whether `altNames` is every name of the extension: the reader skips a name it cannot read (an
   * otherName of an unknown kind, say), which copying the extension would then pass on unjudged.
   */
  altNamesAllRead: boolean;
}

const SUBJECT_ALT_NAME = '2.5.29.17';

/** Why a CSR is refused, for the answer (never a stack or library text alone). */
export class CsrProblem extends Error {
  constructor(
    message: string,
    /** The CSR could not be read at all (as opposed to read and refused). */
    readonly unreadable: boolean,
  ) {
    super(message);
    this.name = 'CsrProblem';
  }
}

/** Reads and checks one PEM `CERTIFICATE REQUEST`; throws CsrProblem saying what is wrong. */
export async function checkCsrPem(pem: string): Promise<CheckedCsr> {
  if (pem.length > MAX_CSR_PEM) throw new CsrProblem(`the CSR is larger than ${MAX_CSR_PEM} characters`, true);
  let blocks;
  try {
    blocks = parsePemBlocks(pem);
  } catch (err) {
    throw new CsrProblem(`the CSR is not PEM: ${(err as Error).message}`, true);
  }
  if (blocks.length !== 1) throw new CsrProblem('expected exactly one PEM block', true);
  const [block] = blocks;
  if (block!.label !== 'CERTIFICATE REQUEST' && block!.label !== 'NEW CERTIFICATE REQUEST') {
    throw new CsrProblem(`the PEM block is "${block!.label}", expected "CERTIFICATE REQUEST"`, true);
  }
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(block!.der);
  } catch {
    throw new CsrProblem('the CSR is not a valid PKCS#10 request', true);
  }
  checkKey(csr.publicKey.rawData);
  let verified = false;
  try {
    verified = await csr.verify(webcrypto);
  } catch {
    verified = false;
  }
  if (!verified) throw new CsrProblem('the CSR is not signed by the key it holds', false);
  return { publicKey: csr.publicKey, ...altNamesOf(csr) };
}

/** The subject alternative names a CSR asks for in its extension request. */
function altNamesOf(csr: x509.Pkcs10CertificateRequest): Pick<CheckedCsr, 'altNames' | 'altNamesDer' | 'altNamesAllRead'> {
  try {
    const ext = csr.extensions.find((e) => e.type === SUBJECT_ALT_NAME);
    if (!ext) return { altNames: [], altNamesDer: undefined, altNamesAllRead: true };
    const names = new x509.SubjectAlternativeNameExtension(ext.rawData).names.items.map((n) => ({ type: n.type, value: n.value }));
    // The names read, written again, are the extension's own bytes only when none was skipped.
    const rewritten = new x509.SubjectAlternativeNameExtension(names as x509.JsonGeneralNames).value;
    return { altNames: names, altNamesDer: ext.value, altNamesAllRead: Buffer.from(rewritten).equals(Buffer.from(ext.value)) };
  } catch {
    throw new CsrProblem('the extensions of the CSR cannot be read', false);
  }
}

function checkKey(spki: ArrayBuffer): void {
  let key;
  try {
    key = createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' });
  } catch {
    throw new CsrProblem('the public key of the CSR cannot be read', false);
  }
  const details = key.asymmetricKeyDetails ?? {};
  if (key.asymmetricKeyType === 'ec') {
    if (!EC_CURVES.has(details.namedCurve ?? '')) throw new CsrProblem(`EC keys must be on P-256 or P-384, not ${details.namedCurve ?? 'unknown'}`, false);
    return;
  }
  if (key.asymmetricKeyType === 'rsa') {
    if ((details.modulusLength ?? 0) < MIN_RSA_BITS) throw new CsrProblem(`RSA keys must have at least ${MIN_RSA_BITS} bits`, false);
    return;
  }
  throw new CsrProblem(`keys of type ${key.asymmetricKeyType ?? 'unknown'} are not accepted; use EC P-256, P-384 or RSA`, false);
}
