// Client certificates the controller signs after enrollment: a renewed certificate of an
// identity's own (authenticator extension) and the short-lived ones of API sessions. The CSR is
// checked first (its self-signature, its key kind); a CSR that cannot be used is the caller's
// mistake and answers 400 naming the field it came in.
import { X509Certificate } from 'node:crypto';
import type { Clock } from '../clock.js';
import { ApiError } from '../errors.js';
import {
  checkCsrPem,
  createClientCertificate,
  CsrProblem,
  importSigningKey,
  type CheckedCsr,
  type ClientCertificateOptions,
  type Issuer,
  type Pki,
} from '../pki/index.js';

export interface SignedClientCertificate {
  cert: X509Certificate;
  /** The certificate alone. */
  certPem: string;
  /** The certificate and the signing CA: the chain a client presents. */
  chainPem: string;
}

/** A CSR read and checked; the field it came in is named when it is missing or refused. */
export async function readCsr(pem: string | undefined, field: string): Promise<CheckedCsr> {
  if (pem === undefined || pem.trim() === '') {
    throw new ApiError('MISSING_OR_INVALID_CSR', `${field}: a PEM certificate signing request is required`, { field, reason: 'is required' });
  }
  try {
    return await checkCsrPem(pem);
  } catch (err) {
    if (!(err instanceof CsrProblem)) throw err;
    throw new ApiError(err.unreadable ? 'MISSING_OR_INVALID_CSR' : 'COULD_NOT_PROCESS_CSR', `${field}: ${err.message}`, { field, reason: err.message });
  }
}

export class ClientCertificateSigner {
  private issuer: Promise<Issuer> | undefined;

  constructor(
    private readonly pki: Pick<Pki, 'signingCertPem' | 'signingKeyPem' | 'trustDomain' | 'trustBundlePem'>,
    private readonly clock: Clock,
  ) {}

  /** The CAs a client should trust: root and signing CA. */
  get caPem(): string {
    return this.pki.trustBundlePem;
  }

  get trustDomain(): string {
    return this.pki.trustDomain;
  }

  /** The CSR of a request, checked; COULD_NOT_PROCESS_CSR naming `field` when it cannot be signed. */
  async checkCsr(csrPem: string, field: string): Promise<CheckedCsr> {
    try {
      return await checkCsrPem(csrPem);
    } catch (err) {
      if (!(err instanceof CsrProblem)) throw err;
      throw new ApiError('COULD_NOT_PROCESS_CSR', `the CSR could not be processed: ${err.message}`, { field, reason: err.message });
    }
  }

  /** A client certificate of `identityId` for the key of a checked CSR, signed by the signing CA now. */
  async sign(csr: CheckedCsr, identityId: string, options: ClientCertificateOptions = {}): Promise<SignedClientCertificate> {
    const issued = await createClientCertificate(csr.publicKey, this.pki.trustDomain, identityId, await this.signingIssuer(), new Date(this.clock()), options);
    return { cert: issued.cert, certPem: issued.certPem, chainPem: issued.certPem + this.pki.signingCertPem };
  }

  private signingIssuer(): Promise<Issuer> {
    this.issuer ??= importSigningKey(this.pki.signingKeyPem).then((key) => ({ cert: new X509Certificate(this.pki.signingCertPem), key }));
    return this.issuer;
  }
}
