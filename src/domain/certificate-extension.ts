// Extending a certificate authenticator: an administrator may flag one for early extension (and a
// new key), which the API sessions authenticated with it show; the identity then has a new
// certificate signed for a CSR, which stays pending beside the active one until the client hands
// it back (extend-verify), after which only the new one logs in.
//
// Only certificates the network issued are extended, and only by a caller who holds the current
// one: its API session was opened with this authenticator and the request presents the active
// certificate in its TLS handshake (which proves the private key). Each step re-reads the
// authenticator inside its write, so an extension and a verification at the same time cannot
// cross: a verification only activates the certificate still pending.
import type { X509Certificate } from 'node:crypto';
import { ApiError, notFound } from '../errors.js';
import { fingerprintOfCertificate, parsePemCertificates } from '../pki/index.js';
import type { EntityOf } from '../resources/index.js';
import type { Executor } from '../store/store.js';
import type { ClientCertificateSigner } from './client-certificates.js';
import { assertMayManageAccess } from './delegates.js';
import type { Actor, Resources, WriteContext } from './resources.js';

type Authenticator = EntityOf<'authenticators'>;

/** What an extension answers: the new certificate (with the signing CA) and the CAs to trust. */
export interface ExtendedCertificate {
  clientCert: string;
  ca: string;
}

export interface ExtendRequest {
  /** The caller's identity. */
  identityId: string;
  /** The authenticator that opened the caller's API session. */
  sessionAuthenticatorId: string | null;
  authenticatorId: string;
  /** The leaf certificate of the request's TLS handshake. */
  peerCertificate: X509Certificate | undefined;
  csrPem: string;
}

function unauthorized(message: string): ApiError {
  return new ApiError('UNAUTHORIZED', message);
}

function cannotUpdate(message: string): ApiError {
  return new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', message);
}

async function read(ex: Executor, resources: Resources, id: string): Promise<Authenticator | undefined> {
  return resources.get('authenticators').repo.get(ex, id);
}

/** The caller's own authenticator; another identity's is refused as the established interface does (401). */
async function ownCertAuthenticator(ex: Executor, resources: Resources, identityId: string, id: string): Promise<Authenticator> {
  const a = await read(ex, resources, id);
  if (!a) throw notFound('authenticator', id);
  if (a.identityId !== identityId) throw unauthorized('the authenticator is not one of the caller');
  if (a.method !== 'cert') throw cannotUpdate('only certificate authenticators are extended');
  return a;
}

function sameKey(a: X509Certificate, b: X509Certificate): boolean {
  const der = (c: X509Certificate) => c.publicKey.export({ type: 'spki', format: 'der' });
  return der(a).equals(der(b));
}

export class CertificateExtension {
  constructor(
    private readonly resources: Resources,
    private readonly signer: ClientCertificateSigner,
  ) {}

  /**
   * Flags a certificate authenticator for extension, asking for a new key too when `rollKeys`.
   * Any other authenticator is FORBIDDEN (403): the one case the interface answers so.
   */
  async request(id: string, rollKeys: boolean, actor?: Actor): Promise<void> {
    await this.resources.write(async (ctx) => {
      const a = await read(ctx.tx, this.resources, id);
      if (!a) throw notFound('authenticator', id);
      await assertMayManageAccess(ctx, a.identityId);
      if (a.method !== 'cert') throw new ApiError('FORBIDDEN', 'only certificate authenticators can be flagged for extension');
      const values = { isExtendRequested: true, isKeyRollRequested: rollKeys, extendRequestedAt: ctx.now, updatedAt: ctx.now };
      await ctx.update('authenticators', a.id, values, a.identityId);
    }, actor);
  }

  /**
   * A new certificate for the caller's own network-issued certificate authenticator, for the key of
   * the CSR; kept pending until verified, the active certificate still logging in meanwhile.
   */
  async extend(req: ExtendRequest): Promise<ExtendedCertificate> {
    // Without a certificate in the handshake nothing is looked at, as in the established controller:
    // 401 whatever the authenticator.
    if (!req.peerCertificate) throw unauthorized("the request must present the authenticator's current certificate");
    const db = this.resources.store.db;
    const a = await ownCertAuthenticator(db, this.resources, req.identityId, req.authenticatorId);
    if (a.isIssuedByNetwork !== true || !a.certPem || !a.fingerprint) {
      throw cannotUpdate('only certificates the network issued are extended');
    }
    if (req.sessionAuthenticatorId !== a.id) {
      throw unauthorized('the API session was not authenticated with this authenticator');
    }
    if (!req.peerCertificate || fingerprintOfCertificate(req.peerCertificate) !== a.fingerprint) {
      throw unauthorized("the request must present the authenticator's current certificate");
    }
    const csr = await this.signer.checkCsr(req.csrPem, 'clientCertCsr');
    const issued = await this.signer.sign(csr, a.identityId);
    await this.resources.write(async (ctx) => {
      const now = await read(ctx.tx, this.resources, a.id);
      // Verified (or deleted) since it was read: the certificate presented is no longer the active one.
      if (!now || now.fingerprint !== a.fingerprint) throw unauthorized("the request must present the authenticator's current certificate");
      const values = { unverifiedCertPem: issued.certPem, unverifiedFingerprint: fingerprintOfCertificate(issued.cert), updatedAt: ctx.now };
      await ctx.update('authenticators', a.id, values, a.identityId);
    });
    return { clientCert: issued.chainPem, ca: this.signer.caPem };
  }

  /**
   * The client hands back the certificate the extension issued: it becomes the authenticator's
   * certificate (the old one no longer logs in) and the extension flags are cleared.
   */
  async verify(identityId: string, authenticatorId: string, clientCertPem: string): Promise<void> {
    await this.resources.write(async (ctx) => {
      const a = await ownCertAuthenticator(ctx.tx, this.resources, identityId, authenticatorId);
      if (!a.unverifiedCertPem || !a.unverifiedFingerprint) throw cannotUpdate('the authenticator has no extension awaiting verification');
      const cert = firstCertificate(clientCertPem);
      if (fingerprintOfCertificate(cert) !== a.unverifiedFingerprint) {
        throw new ApiError('INVALID_CLIENT_CERT', 'the certificate is not the one the extension issued', {
          field: 'clientCert',
          reason: 'is not the certificate the extension issued',
        });
      }
      await activate(ctx, a, cert);
    });
  }
}

async function activate(ctx: WriteContext, a: Authenticator, cert: X509Certificate): Promise<void> {
  const previous = a.certPem ? parsePemCertificates(a.certPem)[0] : undefined;
  const values = {
    certPem: a.unverifiedCertPem,
    fingerprint: a.unverifiedFingerprint,
    unverifiedCertPem: null,
    unverifiedFingerprint: null,
    isExtendRequested: false,
    isKeyRollRequested: false,
    lastExtendRolledKeys: previous === undefined || !sameKey(previous, cert),
    updatedAt: ctx.now,
  };
  await ctx.update('authenticators', a.id, values, a.identityId);
}

/** The first certificate of a PEM; INVALID_CLIENT_CERT naming clientCert when there is none. */
function firstCertificate(pem: string): X509Certificate {
  let certs: X509Certificate[];
  try {
    certs = parsePemCertificates(pem);
  } catch {
    certs = [];
  }
  const [cert] = certs;
  if (!cert) {
    throw new ApiError('INVALID_CLIENT_CERT', 'the client certificate is not a PEM certificate', {
      field: 'clientCert',
      reason: 'must be a PEM certificate',
    });
  }
  return cert;
}
