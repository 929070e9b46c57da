// Edge router enrollment (behaviour.md §7): a router is created unverified with an enrollment — a
// one-time token kept as a digest beside the router and inside its JWT (em "erott", sub the router),
// sealed — which the router exchanges, with two CSRs, for a client certificate naming it and a TLS
// server certificate for the names it asks for. The router is then verified, known by its client
// certificate's fingerprint, and may extend both certificates with that certificate; re-enrolling
// forgets it and makes a new enrollment. A token is used once: the exchange clears the enrollment
// where the router still holds the same token digest, so of two exchanges at the same time one
// finds nothing to clear and fails; an extension likewise replaces only the fingerprint it showed.
import { X509Certificate } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { hashToken } from '../auth/tokens.js';
import type { CertificateTrust } from '../auth/cert-trust.js';
import { iso, type Clock } from '../clock.js';
import { ApiError, notFound } from '../errors.js';
import {
  createRouterClientCertificate,
  createRouterServerCertificate,
  fingerprintOfCertificate,
  importSigningKey,
  validAt,
  type CheckedCsr,
  type Issuer,
  type Pki,
} from '../pki/index.js';
import type { EntityOf } from '../resources/index.js';
import type { edgeRouters } from '../resources/routers.js';
import { computed, type Actor, type Resources, type WriteContext } from './resources.js';
import { controllerUrls, tokenInJwt, type EnrollmentTokens } from './enrollments.js';
import { maySeeRouterEnrollmentSecrets } from './delegates.js';
import { spendToken, unknownToken } from './spent-tokens.js';
import { readCsr } from './client-certificates.js';

type EdgeRouter = EntityOf<'edge-routers'>;

/** The enrollment method of edge routers. */
export const ROUTER_ENROLLMENT_METHOD = 'erott';

/** What an edge router is given at enrollment and extension. */
export interface RouterCertificates {
  /** The CAs to trust: root and signing CA. */
  ca: string;
  /** The client certificate and the signing CA. */
  cert: string;
  /** The server certificate and the signing CA. */
  serverCert: string;
}

/** The PEM texts of the CSRs a router sends, and the fields that carried them (for errors). */
export interface RouterCsrs {
  server: { pem: string | undefined; field: string };
  client: { pem: string | undefined; field: string };
}

function sealContext(routerId: string): string {
  return `edge-router-enrollment:${routerId}`;
}

/** The enrollment fields of a router that has none outstanding. */
const NO_ENROLLMENT = {
  enrollmentTokenHash: null,
  enrollmentSealedJwt: null,
  enrollmentCreatedAt: null,
  enrollmentExpiresAt: null,
} as const;

/** A new enrollment for a router, as its fields, lasting the configured router enrollment duration. */
export async function newRouterEnrollment(ctx: WriteContext, tokens: EnrollmentTokens, routerId: string): Promise<Partial<EdgeRouter>> {
  const expiresAt = iso(Date.parse(ctx.now) + tokens.routerDuration);
  const ctrls = await controllerUrls(ctx.tx, tokens.issuer);
  const issued = tokens.issueSealed({ sub: routerId, em: ROUTER_ENROLLMENT_METHOD, expiresAt }, sealContext(routerId), ctx.now, ctrls);
  return {
    enrollmentTokenHash: issued.tokenHash,
    enrollmentSealedJwt: issued.sealedJwt,
    enrollmentCreatedAt: ctx.now,
    enrollmentExpiresAt: expiresAt,
  };
}

/** The read fields of an outstanding enrollment: its JWT and the token in it; null once enrolled. */
export function routerEnrollmentReadFields(tokens: EnrollmentTokens) {
  return computed<typeof edgeRouters>(
    {
      enrollmentJwt: Type.Union([Type.String(), Type.Null()], {
        description: 'the enrollment JWT handed to the router; null once enrolled, and to a reader that may not enroll routers',
      }),
      enrollmentToken: Type.Union([Type.String(), Type.Null()], { description: 'the one-time token (the jti of the JWT); null as enrollmentJwt is' }),
    },
    async (_ex, entities, answers, read) => {
      const secrets = maySeeRouterEnrollmentSecrets(read.reader);
      for (const [i, e] of entities.entries()) {
        const jwt = e.enrollmentSealedJwt === null || !secrets ? null : tokens.openSealed(e.enrollmentSealedJwt, sealContext(e.id));
        answers[i]!.enrollmentJwt = jwt;
        answers[i]!.enrollmentToken = jwt === null ? null : tokenInJwt(jwt, `edge router ${e.id}`);
      }
    },
  );
}

export interface RouterEnrollmentsOptions {
  resources: Resources;
  tokens: EnrollmentTokens;
  pki: Pick<Pki, 'signingCertPem' | 'signingKeyPem' | 'trustDomain' | 'trustBundlePem'>;
  /** Which client certificates chain to the network. */
  trust: Pick<CertificateTrust, 'verify'>;
  clock: Clock;
}

/** Enrollment, extension and re-enrollment of edge routers. */
export class RouterEnrollments {
  private issuer: Promise<Issuer> | undefined;

  constructor(private readonly opts: RouterEnrollmentsOptions) {}

  /** Whether `token` is the token of an edge router's outstanding (or expired) enrollment. */
  async holds(token: string): Promise<boolean> {
    return (await this.byToken(token)) !== undefined;
  }

  /**
   * A new enrollment for a router, replacing an outstanding one; the router is no longer verified
   * and its certificates no longer extend.
   */
  async reEnroll(id: string, actor?: Actor): Promise<void> {
    await this.opts.resources.write(async (ctx) => {
      if (!(await ctx.resources.get('edge-routers').repo.exists(ctx.tx, id))) throw notFound('edge router', id);
      const values = { ...(await newRouterEnrollment(ctx, this.opts.tokens, id)), isVerified: false, fingerprint: null, updatedAt: ctx.now };
      await ctx.update('edge-routers', id, values);
    }, actor);
  }

  /**
   * erott: the router of the token gets a client and a server certificate for its CSRs and becomes
   * verified with the client certificate's fingerprint; its enrollment is gone.
   */
  async enroll(token: string, csrs: RouterCsrs): Promise<RouterCertificates> {
    const router = await this.byToken(token);
    if (!router) {
      throw await unknownToken(this.opts.resources.store.db, hashToken(token), iso(this.opts.clock()), 'no outstanding edge router enrollment has this token');
    }
    if (Date.parse(router.enrollmentExpiresAt!) <= this.opts.clock()) throw new ApiError('ENROLLMENT_EXPIRED', 'the enrollment has expired');
    const issued = await this.issue(router.id, csrs);
    const tokenHash = router.enrollmentTokenHash!;
    await this.opts.resources.write(async (ctx) => {
      if (Date.parse(router.enrollmentExpiresAt!) <= Date.parse(ctx.now)) throw new ApiError('ENROLLMENT_EXPIRED', 'the enrollment has expired');
      const values = { ...NO_ENROLLMENT, isVerified: true, fingerprint: issued.fingerprint, updatedAt: ctx.now };
      const done = await this.updateWhere(ctx, router.id, 'enrollment_token_hash', tokenHash, values);
      // Used meanwhile (410), or re-enrolled or deleted meanwhile (400).
      if (!done) throw await unknownToken(ctx.tx, tokenHash, ctx.now, 'no outstanding edge router enrollment has this token');
      await spendToken(ctx, tokenHash, router.enrollmentExpiresAt!);
    });
    return issued.answer;
  }

  /**
   * New client and server certificates for the enrolled router whose current client certificate
   * (`leaf`, presented in the TLS handshake with `chain`) chains to the network and is the one it
   * enrolled or last extended with; that certificate no longer counts afterwards.
   */
  async extend(leaf: X509Certificate | undefined, chain: readonly X509Certificate[], csrs: RouterCsrs): Promise<RouterCertificates> {
    if (!leaf) throw unauthorized('no client certificate was presented');
    const origin = await this.opts.trust.verify(leaf, chain);
    if (origin?.kind !== 'network') throw unauthorized('the client certificate does not chain to the network');
    if (leaf.ca || !validAt(leaf, this.opts.clock())) throw unauthorized('the client certificate is not a valid leaf certificate now');
    const fingerprint = fingerprintOfCertificate(leaf);
    const repo = this.opts.resources.get('edge-routers').repo;
    const row = await this.opts.resources.store.db.selectFrom('edge_routers').selectAll().where('fingerprint', '=', fingerprint).executeTakeFirst();
    const router = row ? repo.fromRow(row) : undefined;
    if (!router || router.isVerified !== true) throw unauthorized('the client certificate is not that of an enrolled edge router');
    const issued = await this.issue(router.id, csrs);
    await this.opts.resources.write(async (ctx) => {
      const values = { fingerprint: issued.fingerprint, updatedAt: ctx.now };
      const done = await this.updateWhere(ctx, router.id, 'fingerprint', fingerprint, values);
      if (!done) throw unauthorized('the client certificate has been replaced meanwhile');
    });
    return issued.answer;
  }

  private async byToken(token: string): Promise<EdgeRouter | undefined> {
    const repo = this.opts.resources.get('edge-routers').repo;
    const row = await this.opts.resources.store.db
      .selectFrom('edge_routers')
      .selectAll()
      .where('enrollment_token_hash', '=', hashToken(token))
      .executeTakeFirst();
    return row ? repo.fromRow(row) : undefined;
  }

  /** Updates a router where `column` still holds `expected`; answers whether it did. */
  private async updateWhere(ctx: WriteContext, id: string, column: string, expected: string, values: Partial<EdgeRouter>): Promise<boolean> {
    const repo = ctx.resources.get('edge-routers').repo;
    const result = await ctx.tx.updateTable('edge_routers').set(repo.toRow(values)).where('id', '=', id).where(column, '=', expected).executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) return false;
    ctx.changed({ collection: 'edge-routers', kind: 'update', id });
    return true;
  }

  /** Both certificates for a router's CSRs, checked first, and the answer carrying them. */
  private async issue(routerId: string, csrs: RouterCsrs): Promise<{ fingerprint: string; answer: RouterCertificates }> {
    const serverCsr = await readCsr(csrs.server.pem, csrs.server.field);
    checkServerNames(serverCsr, csrs.server.field);
    const clientCsr = await readCsr(csrs.client.pem, csrs.client.field);
    const { pki } = this.opts;
    const issuer = await this.signingIssuer();
    const now = new Date(this.opts.clock());
    const client = await createRouterClientCertificate(clientCsr.publicKey, pki.trustDomain, routerId, issuer, now);
    const server = await createRouterServerCertificate(serverCsr.publicKey, routerId, serverCsr.altNamesDer, issuer, now);
    return {
      fingerprint: fingerprintOfCertificate(client.cert),
      answer: { ca: pki.trustBundlePem, cert: client.certPem + pki.signingCertPem, serverCert: server.certPem + pki.signingCertPem },
    };
  }

  private signingIssuer(): Promise<Issuer> {
    this.issuer ??= importSigningKey(this.opts.pki.signingKeyPem).then((key) => ({ cert: new X509Certificate(this.opts.pki.signingCertPem), key }));
    return this.issuer;
  }
}

function unauthorized(message: string): ApiError {
  return new ApiError('UNAUTHORIZED', message);
}

/** Names a router's server certificate may carry. */
const SERVER_NAME_TYPES = new Set(['dns', 'ip', 'email', 'url']);

/**
 * The names a server CSR asks for: host names, addresses, e-mail addresses and URIs, but no SPIFFE
 * id — those name identities and routers of a trust domain, which a router does not choose.
 */
function checkServerNames(csr: CheckedCsr, field: string): void {
  for (const name of csr.altNames) {
    const refused = !SERVER_NAME_TYPES.has(name.type)
      ? `subject alternative names of type ${name.type} are not accepted`
      : name.type === 'url' && /^spiffe:/i.test(name.value)
        ? 'SPIFFE ids are not accepted in a server certificate'
        : undefined;
    if (refused) throw new ApiError('COULD_NOT_PROCESS_CSR', `${field}: ${refused}`, { field, reason: refused, value: name.value });
  }
}
