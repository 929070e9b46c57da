// Router enrollment (behaviour.md §7): a router is created unverified with an enrollment — a
// one-time token kept as a digest beside the router and inside its JWT (em "erott" for an edge
// router, "trott" for a transit router, as the established controller names them; sub the router),
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
import type { edgeRouters, routers } from '../resources/routers.js';
import { computed, type Actor, type Resources, type WriteContext } from './resources.js';
import { controllerUrls, tokenInJwt, type EnrollmentTokens } from './enrollments.js';
import { maySeeRouterEnrollmentSecrets } from './delegates.js';
import { spendToken, unknownToken } from './spent-tokens.js';
import { readCsr } from './client-certificates.js';

type EdgeRouter = EntityOf<'edge-routers'>;
/** What enrollment reads and writes of a router, edge or transit. */
type RouterRecord = Pick<EdgeRouter, 'id' | 'isVerified' | 'fingerprint' | 'enrollmentTokenHash' | 'enrollmentSealedJwt' | 'enrollmentCreatedAt' | 'enrollmentExpiresAt' | 'updatedAt'>;

/** The enrollment method of edge routers. */
export const ROUTER_ENROLLMENT_METHOD = 'erott';
/** The enrollment method of transit routers. */
export const TRANSIT_ROUTER_ENROLLMENT_METHOD = 'trott';

type RouterMethod = typeof ROUTER_ENROLLMENT_METHOD | typeof TRANSIT_ROUTER_ENROLLMENT_METHOD;

/** Where the routers of each method are kept. */
const KINDS = {
  erott: { collection: 'edge-routers', table: 'edge_routers' },
  trott: { collection: 'routers', table: 'routers' },
} as const;

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

/** What the enrollment JWT of router `routerId`, edge or transit, is sealed to (its record). */
export function routerSealContext(routerId: string): string {
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
export async function newRouterEnrollment(
  ctx: WriteContext,
  tokens: EnrollmentTokens,
  routerId: string,
  method: RouterMethod = ROUTER_ENROLLMENT_METHOD,
): Promise<Partial<EdgeRouter>> {
  const expiresAt = iso(Date.parse(ctx.now) + tokens.routerDuration);
  const ctrls = await controllerUrls(ctx.tx, tokens.issuer);
  const issued = tokens.issueSealed({ sub: routerId, em: method, expiresAt }, routerSealContext(routerId), ctx.now, ctrls);
  return {
    enrollmentTokenHash: issued.tokenHash,
    enrollmentSealedJwt: issued.sealedJwt,
    enrollmentCreatedAt: ctx.now,
    enrollmentExpiresAt: expiresAt,
  };
}

/** The read fields of an outstanding enrollment: its JWT and the token in it; null once enrolled. */
export function routerEnrollmentReadFields<D extends typeof edgeRouters | typeof routers>(tokens: EnrollmentTokens) {
  return computed<D>(
    {
      enrollmentJwt: Type.Union([Type.String(), Type.Null()], {
        description: 'the enrollment JWT handed to the router; null once enrolled, and to a reader that may not enroll routers',
      }),
      enrollmentToken: Type.Union([Type.String(), Type.Null()], { description: 'the one-time token (the jti of the JWT); null as enrollmentJwt is' }),
    },
    async (_ex, entities, answers, read) => {
      const secrets = maySeeRouterEnrollmentSecrets(read.reader);
      for (const [i, entity] of entities.entries()) {
        const e = entity as { id: string; enrollmentSealedJwt?: string | null };
        const sealed = e.enrollmentSealedJwt ?? null;
        const jwt = sealed === null || !secrets ? null : tokens.openSealed(sealed, routerSealContext(e.id));
        answers[i]!.enrollmentJwt = jwt;
        answers[i]!.enrollmentToken = jwt === null ? null : tokenInJwt(jwt, `router ${e.id}`);
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

/** Enrollment and extension of edge and transit routers, and re-enrollment of edge routers. */
export class RouterEnrollments {
  private issuer: Promise<Issuer> | undefined;

  constructor(private readonly opts: RouterEnrollmentsOptions) {}

  /** The method of `token` when it is that of a router's outstanding (or expired) enrollment. */
  async methodOf(token: string): Promise<RouterMethod | undefined> {
    return (await this.byToken(token))?.method;
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
   * erott (an edge router's token) or trott (a transit router's): the router of the token gets a
   * client and a server certificate for its CSRs and becomes verified with the client certificate's
   * fingerprint; its enrollment is gone.
   */
  async enroll(token: string, method: RouterMethod, csrs: RouterCsrs): Promise<RouterCertificates> {
    const found = await this.byToken(token);
    const none = `no outstanding ${method === ROUTER_ENROLLMENT_METHOD ? 'edge' : 'transit'} router enrollment has this token`;
    if (found?.method !== method) throw await unknownToken(this.opts.resources.store.db, hashToken(token), iso(this.opts.clock()), none);
    const { router } = found;
    if (Date.parse(router.enrollmentExpiresAt!) <= this.opts.clock()) throw new ApiError('ENROLLMENT_EXPIRED', 'the enrollment has expired');
    const issued = await this.issue(router.id, csrs);
    const tokenHash = router.enrollmentTokenHash!;
    await this.opts.resources.write(async (ctx) => {
      if (Date.parse(router.enrollmentExpiresAt!) <= Date.parse(ctx.now)) throw new ApiError('ENROLLMENT_EXPIRED', 'the enrollment has expired');
      const values = { ...NO_ENROLLMENT, isVerified: true, fingerprint: issued.fingerprint, updatedAt: ctx.now };
      const done = await this.updateWhere(ctx, method, router.id, 'enrollment_token_hash', tokenHash, values);
      // Used meanwhile (410), or re-enrolled or deleted meanwhile (400).
      if (!done) throw await unknownToken(ctx.tx, tokenHash, ctx.now, none);
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
    const found = await this.findBy('fingerprint', fingerprint);
    if (!found || found.router.isVerified !== true) throw unauthorized('the client certificate is not that of an enrolled router');
    const { router, method } = found;
    const issued = await this.issue(router.id, csrs);
    await this.opts.resources.write(async (ctx) => {
      const values = { fingerprint: issued.fingerprint, updatedAt: ctx.now };
      const done = await this.updateWhere(ctx, method, router.id, 'fingerprint', fingerprint, values);
      if (!done) throw unauthorized('the client certificate has been replaced meanwhile');
    });
    return issued.answer;
  }

  private byToken(token: string): Promise<{ router: RouterRecord; method: RouterMethod } | undefined> {
    return this.findBy('enrollment_token_hash', hashToken(token));
  }

  /** The edge or transit router whose `column` holds `value`, and the method it enrolls by. */
  private async findBy(column: 'enrollment_token_hash' | 'fingerprint', value: string): Promise<{ router: RouterRecord; method: RouterMethod } | undefined> {
    for (const method of [ROUTER_ENROLLMENT_METHOD, TRANSIT_ROUTER_ENROLLMENT_METHOD] as const) {
      const { collection, table } = KINDS[method];
      const row = await this.opts.resources.store.db.selectFrom(table).selectAll().where(column, '=', value).executeTakeFirst();
      if (row) return { router: this.opts.resources.get(collection).repo.fromRow(row) as RouterRecord, method };
    }
    return undefined;
  }

  /** Updates a router where `column` still holds `expected`; answers whether it did. */
  private async updateWhere(ctx: WriteContext, method: RouterMethod, id: string, column: string, expected: string, values: Partial<RouterRecord>): Promise<boolean> {
    const { collection, table } = KINDS[method];
    const repo = ctx.resources.get(collection).repo;
    const result = await ctx.tx.updateTable(table).set(repo.toRow(values)).where('id', '=', id).where(column, '=', expected).executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) return false;
    ctx.changed({ collection, kind: 'update', id });
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
  if (!csr.altNamesAllRead) {
    const reason = 'subject alternative names that cannot be read are not accepted';
    throw new ApiError('COULD_NOT_PROCESS_CSR', `${field}: ${reason}`, { field, reason });
  }
  for (const name of csr.altNames) {
    const refused = !SERVER_NAME_TYPES.has(name.type)
      ? `subject alternative names of type ${name.type} are not accepted`
      : name.type === 'url' && /^spiffe:/i.test(name.value)
        ? 'SPIFFE ids are not accepted in a server certificate'
        : undefined;
    if (refused) throw new ApiError('COULD_NOT_PROCESS_CSR', `${field}: ${refused}`, { field, reason: refused, value: name.value });
  }
}
