// Which client certificates may log in: those that chain to the network PKI, or to a third-party CA
// that is verified and has isAuthEnabled (behaviour.md §7). The network anchors are fixed; the CAs
// are read from the store and dropped whenever a CA changes, so creating, verifying, disabling or
// deleting one takes effect on the next login without a restart.
//
// A network certificate is expected to come with the signing CA that issued it, so its chain leads
// to the root. One that verifies only because the controller supplies its signing CA is accepted
// but marked improperClientCertChain, as the established controller does: the client did not send
// (or did not keep) its proper chain.
//
// A CA's certificates come back with the CA's externalIdClaim, as of the same read: the login reads
// the identity's external id with it (auth/external-id.ts).
import type { X509Certificate } from 'node:crypto';
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import type { Clock } from '../clock.js';
import type { EntityOf } from '../resources/index.js';
import type { Repository } from '../store/repository.js';
import type { Store } from '../store/store.js';
import { parsePemCertificates, verifyChain, type TrustAnchor } from '../pki/index.js';
import type { ExternalIdClaim } from './external-id.js';

/** Where a client certificate's chain led. */
/**
 * Where a client certificate's chain led. `resolvedToRoot`: the chain ended at a self-signed root
 * (the network's always does; a third-party CA registered as an intermediate does not).
 */
export type CertificateOrigin =
  | { kind: 'network'; improperClientCertChain: boolean; resolvedToRoot: true }
  | { kind: 'ca'; caId: string; externalIdClaim: ExternalIdClaim | null; adminWritten: boolean; improperClientCertChain: false; resolvedToRoot: boolean };

/** What a third-party anchor stands for. */
interface TrustedCa {
  caId: string;
  externalIdClaim: ExternalIdClaim | null;
  /** An admin wrote it last: a CA a delegate wrote logs in no admin or permission holder. */
  adminWritten: boolean;
  resolvedToRoot: boolean;
}

export interface NetworkAnchors {
  rootCertPem: string;
  signingCertPem: string;
}

function single(pem: string): X509Certificate {
  const [cert] = parsePemCertificates(pem);
  if (!cert) throw new Error('the network PKI has no certificate');
  return cert;
}

/** Whether a certificate is a root: it names itself as issuer and its own key verifies it. */
function isSelfSigned(cert: X509Certificate): boolean {
  return cert.checkIssued(cert) && cert.verify(cert.publicKey);
}

export class CertificateTrust implements Cache {
  readonly name = 'certificate-trust';
  private readonly root: TrustAnchor<undefined>[];
  private readonly rootAndSigning: TrustAnchor<undefined>[];
  private thirdParty: Promise<TrustAnchor<TrustedCa>[]> | undefined;

  constructor(
    private readonly store: Store,
    private readonly repo: Repository<EntityOf<'cas'>>,
    private readonly clock: Clock,
    network: NetworkAnchors,
  ) {
    const root = { cert: single(network.rootCertPem), tag: undefined };
    this.root = [root];
    this.rootAndSigning = [root, { cert: single(network.signingCertPem), tag: undefined }];
  }

  /**
   * Where the leaf presented in the TLS handshake chains to, through the other certificates the
   * client presented; undefined when to nothing trusted.
   */
  async verify(leaf: X509Certificate, presented: readonly X509Certificate[]): Promise<CertificateOrigin | undefined> {
    const now = this.clock();
    if (verifyChain(leaf, presented, this.root, now)) return { kind: 'network', improperClientCertChain: false, resolvedToRoot: true };
    if (verifyChain(leaf, presented, this.rootAndSigning, now)) return { kind: 'network', improperClientCertChain: true, resolvedToRoot: true };
    const found = verifyChain(leaf, presented, await this.thirdPartyAnchors(), now);
    return found ? { kind: 'ca', ...found.anchor.tag, improperClientCertChain: false } : undefined;
  }

  onChange(change: Change): void {
    if (change.collection === 'cas') this.reset();
  }

  reset(): void {
    this.thirdParty = undefined;
  }

  private thirdPartyAnchors(): Promise<TrustAnchor<TrustedCa>[]> {
    if (this.thirdParty) return this.thirdParty;
    const loading = this.load();
    this.thirdParty = loading;
    // A failed read is not kept: the next login reads again.
    loading.catch(() => {
      if (this.thirdParty === loading) this.thirdParty = undefined;
    });
    return loading;
  }

  private async load(): Promise<TrustAnchor<TrustedCa>[]> {
    const { items } = await this.repo.list(this.store.db, { sort: [], offset: 0, limit: null });
    const anchors: TrustAnchor<TrustedCa>[] = [];
    for (const ca of items) {
      if (ca.isVerified !== true || ca.isAuthEnabled !== true) continue;
      const [cert] = parsePemCertificates(ca.certPem);
      if (cert) anchors.push({ cert, tag: { caId: ca.id, externalIdClaim: ca.externalIdClaim ?? null, adminWritten: ca.adminWritten !== false, resolvedToRoot: isSelfSigned(cert) } });
    }
    return anchors;
  }
}
