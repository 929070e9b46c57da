// Enrollments beyond CRUD: the one-time token of each (hashed, and inside its JWT, sealed), the rules of
// creating one (one outstanding per method and identity, the method's own fields), refreshing it,
// exchanging it for an authenticator (a client certificate for a CSR, a password, or the certificate
// of the enrollment's CA the client presents in the TLS handshake), an identity created by a CA's
// certificate alone (auto CA enrollment), and reverting an authenticator to an enrollment. A token is
// used once: the exchange deletes the enrollment by id AND token digest in the same transaction that
// creates the authenticator, so of two exchanges at the same time one finds nothing to delete and fails.
import { randomUUID, sign, X509Certificate } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { JWK } from 'jose';
import { ApiError, fieldError, notFound } from '../errors.js';
import { iso, type Clock } from '../clock.js';
import { hashToken } from '../auth/tokens.js';
import { readExternalId } from '../auth/external-id.js';
import { claimAt, ExtJwtError, type ExternalJwtSigners } from '../auth/ext-jwt.js';
import { DEFAULT_CLAIMS_PROPERTY } from '../resources/external-jwt-signers.js';
import { enrollmentRefusal } from './external-jwt-signers.js';
import { DEFAULT_AUTH_POLICY_ID } from '../resources/auth-policies.js';
import { newId } from '../ids.js';
import type { SecretBox } from '../auth/secret-box.js';
import { signCompact } from '../oidc/jws.js';
import type { SigningKeys } from '../oidc/keys.js';
import {
  certificateNames,
  createClientCertificate,
  fingerprintOfCertificate,
  importSigningKey,
  toPem,
  type Issuer,
  type Pki,
} from '../pki/index.js';
import { entityRef, EntityRefSchema, type EntityRef } from '../resources/kit.js';
import type { enrollments } from '../resources/enrollments.js';
import type { EntityOf } from '../resources/index.js';
import type { Executor } from '../store/store.js';
import { computed, type Actor, type ResourceBehaviour, type Resources, type WriteContext } from './resources.js';
import { assertMayManageAccess, maySeeEnrollmentSecrets } from './delegates.js';
import { spendToken, unknownToken } from './spent-tokens.js';
import { readCsr } from './client-certificates.js';
import { formatIdentityName, issuingCa, uniqueIdentityName, type PresentedCertificates } from './ca-enrollments.js';

export type Enrollment = EntityOf<'enrollments'>;

/** What an enrollment JWT says (behaviour.md §7). */
export interface EnrollmentClaims {
  iss: string;
  sub: string;
  jti: string;
  iat: number;
  exp: number;
  em: string;
  ctrls: string[];
}

/** The name of the one network JWT (GET /network-jwts). */
export const NETWORK_JWT_NAME = 'default';

export interface EnrollmentTokenOptions {
  /** Seals the JWTs, which carry the tokens (the data directory's key). */
  box: SecretBox;
  /** The keys enrollment JWTs are signed with: the OIDC provider's, opened after the resources. */
  keys: () => SigningKeys;
  /** This controller's advertised Client API address, host:port: the JWTs' issuer. */
  address: string;
  clock: Clock;
  /** How long an enrollment made with an identity lasts (edge.enrollment.edgeIdentity.duration). */
  identityDuration: number;
  /** How long an edge router's enrollment lasts (edge.enrollment.edgeRouter.duration). */
  routerDuration: number;
}

/** A new one-time token, as the store keeps it. */
export interface IssuedToken {
  tokenHash: string;
  sealedJwt: string;
  issuedAt: string;
}

/** The tokens of enrollments and the JWTs that carry them. */
export class EnrollmentTokens {
  private networkJwt: { kid: string; jwt: string } | undefined;

  constructor(private readonly opts: EnrollmentTokenOptions) {}

  get issuer(): string {
    return `https://${this.opts.address}`;
  }

  get identityDuration(): number {
    return this.opts.identityDuration;
  }

  get routerDuration(): number {
    return this.opts.routerDuration;
  }

  get keys(): SigningKeys {
    return this.opts.keys();
  }

  /**
   * A new token for an enrollment and its JWT, signed now: the token is a random UUID (what clients
   * of this interface expect in the `token` query parameter); the store keeps its digest and the
   * JWT sealed to this enrollment.
   */
  issue(e: Pick<Enrollment, 'id' | 'identityId' | 'method' | 'expiresAt'>, now: string, ctrls: string[]): IssuedToken {
    return this.issueSealed({ sub: e.identityId, em: e.method, expiresAt: e.expiresAt }, enrollmentSealContext(e.id), now, ctrls);
  }

  /**
   * A new token of method `em` for `sub` and its JWT, the JWT sealed to `context` (which names the
   * record keeping it, so a sealed JWT moved to another record does not open).
   */
  issueSealed(of: { sub: string; em: string; expiresAt: string }, context: string, now: string, ctrls: string[]): IssuedToken {
    const token = randomUUID();
    const claims: EnrollmentClaims = {
      iss: this.issuer,
      sub: of.sub,
      jti: token,
      iat: Math.floor(Date.parse(now) / 1000),
      exp: Math.floor(Date.parse(of.expiresAt) / 1000),
      em: of.em,
      ctrls,
    };
    return { tokenHash: hashToken(token), sealedJwt: this.opts.box.seal(this.sign(claims), context), issuedAt: now };
  }

  /** A JWT sealed by issueSealed under `context`. */
  openSealed(sealedJwt: string, context: string): string {
    return this.opts.box.open(sealedJwt, context);
  }

  /** The JWT of an enrollment, unsealed; it carries the token as `jti`. */
  jwtOf(e: Pick<Enrollment, 'id' | 'sealedJwt'>): string {
    return this.opts.box.open(e.sealedJwt, enrollmentSealContext(e.id));
  }

  /** The one-time token of an enrollment: the `jti` of its JWT. */
  tokenOf(e: Pick<Enrollment, 'id' | 'sealedJwt'>): string {
    return tokenInJwt(this.jwtOf(e), `enrollment ${e.id}`);
  }

  /**
   * The network JWT a client bootstraps its trust in the controller with: no token in it, so one is
   * made per signing key and kept.
   */
  networkToken(ctrls: string[]): string {
    const kid = this.keys.current.kid;
    if (this.networkJwt?.kid !== kid) {
      const issuer = `${this.issuer}/`;
      const jwt = this.sign({ iss: issuer, sub: issuer, jti: randomUUID(), iat: Math.floor(this.opts.clock() / 1000), em: 'network', ctrls });
      this.networkJwt = { kid, jwt };
    }
    return this.networkJwt.jwt;
  }

  /** The public keys that verify enrollment JWTs. */
  jwks(): { keys: JWK[] } {
    return this.keys.jwks();
  }

  private sign(claims: object): string {
    const key = this.keys.current;
    return signCompact(key.alg, key.privateKey, key.headers.jwt, claims);
  }
}

/** What the JWT of enrollment `id` is sealed to (its record). */
export function enrollmentSealContext(id: string): string {
  return `enrollment:${id}`;
}

/** The one-time token an enrollment JWT carries as `jti`; `of` names its record in an error. */
export function tokenInJwt(jwt: string, of: string): string {
  const payload = jwt.split('.')[1] ?? '';
  const { jti } = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { jti?: unknown };
  if (typeof jti !== 'string') throw new Error(`${of}: its JWT carries no token`);
  return jti;
}

/** The Client API addresses of every controller of the network: the `ctrls` of enrollment JWTs, as of their issue. */
export async function controllerUrls(ex: Executor, fallback: string): Promise<string[]> {
  const rows = await ex.selectFrom('controllers').select('address').orderBy('address').execute();
  const urls = [...new Set(rows.map((r) => String(r.address)).filter((a) => a !== '').map((a) => `https://${a}`))];
  return urls.length > 0 ? urls : [fallback];
}

// ---- the resource's behaviour ---------------------------------------------------------------------

/** The CA an ottca enrollment names, as a reference; null while CAs are not a collection here. */
async function caNames(resources: Resources, ex: Executor, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0 || !resources.has('cas')) return new Map();
  return resources.get('cas').repo.names(ex, ids);
}

/** A reference to an identity as enrollment answers carry it: with `urlName` too. */
const IdentityRefSchema = Type.Union([Type.Composite([EntityRefSchema, Type.Object({ urlName: Type.String() })]), Type.Null()]);

/**
 * The behaviour of enrollments. `resources` is the controller's (read fields name the CA of an ottca
 * enrollment when CAs are a collection of it).
 */
export function enrollmentBehaviour(tokens: EnrollmentTokens, resources: Resources): ResourceBehaviour<typeof enrollments> {
  return {
    async validate(ctx, next, prev) {
      if (prev) return;
      await assertMayManageAccess(ctx, next.identityId);
      const expiresAt = Date.parse(next.expiresAt);
      if (!(expiresAt > Date.parse(ctx.now))) throw fieldError('expiresAt', 'must be in the future', next.expiresAt);
      next.expiresAt = iso(expiresAt);
      await checkMethodFields(ctx, next);
      const outstanding = await outstandingEnrollment(ctx, next.identityId, next.method);
      if (outstanding) {
        throw new ApiError('ENROLLMENT_EXISTS', `an enrollment of method ${next.method} is already outstanding for the identity`, {
          field: 'method',
          reason: 'an enrollment of this method is outstanding',
          value: next.method,
        });
      }
      const authenticatorMethod = next.method === 'updb' ? 'updb' : 'cert';
      const authenticator = await ctx.tx
        .selectFrom('authenticators')
        .select('id')
        .where('identity_id', '=', next.identityId)
        .where('method', '=', authenticatorMethod)
        .executeTakeFirst();
      if (authenticator) {
        throw fieldError('method', `the identity already has a ${authenticatorMethod} authenticator`, next.method);
      }
      Object.assign(next, tokens.issue(next, ctx.now, await controllerUrls(ctx.tx, tokens.issuer)));
    },
    async beforeDelete(ctx, prev) {
      await assertMayManageAccess(ctx, prev.identityId);
    },
    computed: [
      computed<typeof enrollments>(
        {
          token: Type.Union([Type.String(), Type.Null()], { description: 'the one-time token; null to a reader that may not enroll the identity' }),
          jwt: Type.Union([Type.String(), Type.Null()], { description: 'the enrollment JWT handed to the device; carries the token; null as token is' }),
          identity: IdentityRefSchema,
          ca: Type.Union([EntityRefSchema, Type.Null()]),
        },
        async (ex, entities, answers, read) => {
          if (entities.length === 0) return;
          const identityRepo = resources.get('identities').repo;
          const identityRows = await ex
            .selectFrom('identities')
            .selectAll()
            .where('id', 'in', [...new Set(entities.map((e) => e.identityId))])
            .execute();
          const identitiesById = new Map(identityRows.map((r) => [String(r.id), identityRepo.fromRow(r)]));
          const cas = await caNames(resources, ex, [...new Set(entities.flatMap((e) => (e.caId === null ? [] : [e.caId])))]);
          for (const [i, e] of entities.entries()) {
            const identity = identitiesById.get(e.identityId);
            const name = identity?.name;
            const secrets = identity !== undefined && maySeeEnrollmentSecrets(read.reader, identity);
            Object.assign(answers[i]!, {
              token: secrets ? tokens.tokenOf(e) : null,
              jwt: secrets ? tokens.jwtOf(e) : null,
              identity: name === undefined ? null : { ...entityRef('identities', e.identityId, name), urlName: 'identities' },
              ca: e.caId !== null && cas.has(e.caId) ? entityRef('cas', e.caId, cas.get(e.caId)!) : null,
            });
          }
        },
      ),
    ],
  };
}

/** Each method's own fields: caId for ottca (a CA that exists), username for updb (not taken). */
/** The id of the identity's outstanding enrollment of a method, if any (at most one of each). */
async function outstandingEnrollment(ctx: WriteContext, identityId: string, method: string): Promise<{ id: unknown } | undefined> {
  return ctx.tx.selectFrom('enrollments').select('id').where('identity_id', '=', identityId).where('method', '=', method).executeTakeFirst();
}

async function checkMethodFields(ctx: WriteContext, next: Enrollment): Promise<void> {
  if (next.method !== 'ottca' && next.caId !== null) throw fieldError('caId', 'is only for method ottca', next.caId);
  if (next.method !== 'updb' && next.username !== null) throw fieldError('username', 'is only for method updb', next.username);
  if (next.method === 'ottca') {
    if (next.caId === null) throw fieldError('caId', 'is required for method ottca');
    if (!(await caExists(ctx, next.caId))) {
      throw new ApiError('REFERENCED_ENTITY_NOT_FOUND', `caId: no CA with id ${next.caId}`, {
        field: 'caId',
        reason: 'no CA with this id',
        value: next.caId,
      });
    }
  }
  if (next.method === 'updb') {
    if (next.username === null) throw fieldError('username', 'is required for method updb');
    const taken =
      (await ctx.tx.selectFrom('authenticators').select('id').where('username', '=', next.username).executeTakeFirst()) !== undefined ||
      (await anotherIsEnrollingAs(ctx.tx, next.username, next.identityId));
    if (taken) throw fieldError('username', 'another identity already has or is enrolling with this username', next.username);
  }
}

/** Whether a CA exists: none does while CAs are not a collection of the controller. */
async function caExists(ctx: WriteContext, caId: string): Promise<boolean> {
  return ctx.resources.has('cas') && (await ctx.resources.get('cas').repo.exists(ctx.tx, caId));
}

/** What an identity's `enrollment` create field asks for (resources/identities.ts). */
export interface IdentityEnrollmentRequest {
  ott?: boolean;
  ottca?: string;
  updb?: string;
}

/**
 * The enrollments an identity is created with, in the identity's own write, each lasting the
 * configured identity enrollment duration.
 */
export async function createIdentityEnrollments(
  ctx: WriteContext,
  identityId: string,
  request: IdentityEnrollmentRequest,
  duration: number,
): Promise<void> {
  const service = ctx.resources.get('enrollments');
  const expiresAt = iso(Date.parse(ctx.now) + duration);
  const at = (field: string) => (err: unknown) => {
    // A problem of one of them names it within the identity's `enrollment` field.
    if (err instanceof ApiError && err.cause && 'field' in err.cause) {
      throw new ApiError(err.code, err.message, { ...err.cause, field: `enrollment.${field}` });
    }
    throw err;
  };
  if (request.ott === true) await service.createIn(ctx, { method: 'ott', identityId, expiresAt }).catch(at('ott'));
  if (request.updb !== undefined) {
    await service.createIn(ctx, { method: 'updb', identityId, expiresAt, username: request.updb }).catch(at('updb'));
  }
  if (request.ottca !== undefined) {
    await service.createIn(ctx, { method: 'ottca', identityId, expiresAt, caId: request.ottca }).catch(at('ottca'));
  }
}

/** What an identity's `enrollment` reads as: its outstanding enrollments by method. */
export interface PendingEnrollment {
  id: string;
  jwt: string | null;
  token: string | null;
  expiresAt: string;
  caId?: string;
  ca?: EntityRef;
}

/** The outstanding enrollments of some identities, by identity and method, with token and JWT. */
export async function pendingEnrollments(
  tokens: EnrollmentTokens,
  resources: Resources,
  ex: Executor,
  identityIds: string[],
  /** Whose tokens and JWTs the reader may see: the others read null, and are never decrypted. */
  withSecrets: (identityId: string) => boolean,
): Promise<Map<string, Record<string, PendingEnrollment>>> {
  const out = new Map<string, Record<string, PendingEnrollment>>();
  if (identityIds.length === 0) return out;
  const repo = resources.get('enrollments').repo;
  const rows = await ex.selectFrom('enrollments').selectAll().where('identity_id', 'in', identityIds).execute();
  if (rows.length === 0) return out;
  const entities = rows.map((r) => repo.fromRow(r));
  const cas = await caNames(resources, ex, entities.flatMap((e) => (e.caId === null ? [] : [e.caId])));
  for (const e of entities) {
    const open = withSecrets(e.identityId);
    const pending: PendingEnrollment = { id: e.id, jwt: open ? tokens.jwtOf(e) : null, token: open ? tokens.tokenOf(e) : null, expiresAt: e.expiresAt };
    if (e.method === 'ottca' && e.caId !== null) {
      pending.caId = e.caId;
      pending.ca = entityRef('cas', e.caId, cas.get(e.caId) ?? e.caId);
    }
    const mine = out.get(e.identityId) ?? {};
    mine[e.method] = pending;
    out.set(e.identityId, mine);
  }
  return out;
}

// ---- refresh, exchange, revert ------------------------------------------------------------------

/** What the Client API answers an enrollment with. */
export interface EnrolledCertificate {
  /** The client certificate and the signing CA: the chain a device presents. */
  cert: string;
}

export interface EnrollmentsOptions {
  resources: Resources;
  tokens: EnrollmentTokens;
  pki: Pick<Pki, 'signingCertPem' | 'signingKeyPem' | 'trustDomain' | 'trustBundlePem'>;
  clock: Clock;
}

/** Gives an enrollment a new token and JWT lasting until `expiresAt`, in the caller's write: the old token is dead. */
export async function reissueIn(ctx: WriteContext, tokens: EnrollmentTokens, e: Enrollment, expiresAt: string): Promise<void> {
  const ctrls = await controllerUrls(ctx.tx, tokens.issuer);
  const values = { ...tokens.issue({ ...e, expiresAt }, ctx.now, ctrls), expiresAt, updatedAt: ctx.now };
  await ctx.update('enrollments', e.id, values, e.identityId);
}

/** The enrollment operations of both APIs. */
export class Enrollments {
  private issuer: Promise<Issuer> | undefined;

  constructor(private readonly opts: EnrollmentsOptions) {}

  /** A new token and JWT for an enrollment, outstanding or expired, lasting until `expiresAt`; the old token is dead. */
  async refresh(id: string, expiresAt: string, actor?: Actor): Promise<void> {
    await this.opts.resources.write(async (ctx) => {
      const e = await ctx.resources.get('enrollments').repo.get(ctx.tx, id);
      if (!e) throw notFound('enrollment', id);
      await assertMayManageAccess(ctx, e.identityId);
      const until = Date.parse(expiresAt);
      if (!(until > Date.parse(ctx.now))) throw fieldError('expiresAt', 'must be in the future', expiresAt);
      await reissueIn(ctx, this.opts.tokens, e, iso(until));
    }, actor);
  }

  /**
   * The enrollment of a token, when it is outstanding: INVALID_ENROLLMENT_TOKEN for a token of no
   * enrollment (never issued, used, refreshed or deleted) or of another method, ENROLLMENT_EXPIRED
   * after its expiresAt.
   */
  async outstanding(token: string, method: Enrollment['method'], ex: Executor = this.opts.resources.store.db): Promise<Enrollment> {
    const repo = this.opts.resources.get('enrollments').repo;
    const tokenHash = hashToken(token);
    const row = await ex.selectFrom('enrollments').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
    const e = row ? repo.fromRow(row) : undefined;
    const none = `no outstanding ${method} enrollment has this token`;
    if (!e) throw await unknownToken(ex, tokenHash, iso(this.opts.clock()), none);
    if (e.method !== method) throw new ApiError('INVALID_ENROLLMENT_TOKEN', none);
    if (Date.parse(e.expiresAt) <= this.opts.clock()) throw new ApiError('ENROLLMENT_EXPIRED', 'the enrollment has expired');
    return e;
  }

  /** The method of a token's enrollment; INVALID_ENROLLMENT_TOKEN for a token of none. */
  async methodOf(token: string): Promise<Enrollment['method']> {
    const db = this.opts.resources.store.db;
    const tokenHash = hashToken(token);
    const row = await db.selectFrom('enrollments').select('method').where('token_hash', '=', tokenHash).executeTakeFirst();
    if (!row) throw await unknownToken(db, tokenHash, iso(this.opts.clock()), 'no outstanding enrollment has this token');
    return row.method as Enrollment['method'];
  }

  /** The public keys that verify enrollment JWTs. */
  jwks(): { keys: JWK[] } {
    return this.opts.tokens.jwks();
  }

  /**
   * ott: a client certificate for the public key of `csrPem`, signed by the signing CA, and the
   * identity's cert authenticator for it; the enrollment is gone.
   */
  async enrollOtt(token: string, csrPem: string | undefined, field = 'clientCsr'): Promise<EnrolledCertificate> {
    const e = await this.outstanding(token, 'ott');
    const csr = await readCsr(csrPem, field);
    const { pki } = this.opts;
    const issued = await createClientCertificate(csr.publicKey, pki.trustDomain, e.identityId, await this.signingIssuer(), new Date(this.opts.clock()));
    await this.opts.resources.write(async (ctx) => {
      await consume(ctx, e);
      await ctx.resources
        .get('authenticators')
        .createIn(ctx, { method: 'cert', identityId: e.identityId, certPem: issued.certPem }, { isIssuedByNetwork: true });
    });
    return { cert: issued.certPem + pki.signingCertPem };
  }

  /** updb: the identity's password authenticator with the enrollment's username; the enrollment is gone. */
  async enrollUpdb(token: string, password: string): Promise<{ username: string }> {
    const e = await this.outstanding(token, 'updb');
    const username = e.username!;
    await this.opts.resources.write(async (ctx) => {
      await consume(ctx, e);
      // The identity's auth policy holds the password to its rules (domain/authenticators.ts).
      await ctx.resources.get('authenticators').createIn(ctx, { method: 'updb', identityId: e.identityId, username, password });
    });
    return { username };
  }

  /**
   * ottca: the certificate the client presents in the TLS handshake becomes the identity's cert
   * authenticator, when it chains to the enrollment's CA, which must be verified and allow ottca
   * enrollments; the enrollment is gone.
   */
  async enrollOttCa(token: string, presented: PresentedCertificates): Promise<void> {
    const e = await this.outstanding(token, 'ottca');
    await this.opts.resources.write(async (ctx) => {
      const ca = e.caId === null ? undefined : await ctx.resources.get('cas').repo.get(ctx.tx, e.caId);
      if (!ca) throw new ApiError('INVALID_ENROLLMENT_TOKEN', 'the CA of the enrollment no longer exists');
      if (ca.isVerified !== true || ca.isOttCaEnrollmentEnabled !== true) {
        throw new ApiError('ENROLLMENT_CA_NOT_VALID', 'the CA of the enrollment is not verified or does not allow ottca enrollments');
      }
      if (!issuingCa(presented, [ca], Date.parse(ctx.now))) {
        throw new ApiError(
          'CERTIFICATE_FAILED_VALIDATION',
          presented.peerCertificate
            ? 'the client certificate does not chain to the CA of the enrollment, is not valid now, or is not for client authentication'
            : 'no client certificate was presented in the TLS handshake',
        );
      }
      const cert = presented.peerCertificate!;
      await refuseCertificateInUse(ctx, cert);
      await consume(ctx, e);
      await ctx.resources
        .get('authenticators')
        .createIn(ctx, { method: 'cert', identityId: e.identityId, certPem: toPem('CERTIFICATE', cert.raw) }, { caId: ca.id });
    });
  }

  /**
   * Auto CA enrollment: the certificate the client presents in the TLS handshake, of a verified CA
   * that allows it, creates an identity named by the CA's identityNameFormat (`requestedName` fills
   * [requestedName]; the new id when none is asked for) with the CA's identityRoles. With the CA's
   * external id claim the identity gets the id it reads and no authenticator (its certificate logins
   * find it by that id); without, a cert authenticator for the certificate.
   */
  async enrollCa(presented: PresentedCertificates, requestedName?: string): Promise<void> {
    const cert = presented.peerCertificate;
    if (!cert) throw new ApiError('CERT_FAILED_VALIDATION', 'no client certificate was presented in the TLS handshake');
    await this.opts.resources.write(async (ctx) => {
      const { items } = await ctx.resources.get('cas').repo.list(ctx.tx, { sort: [], offset: 0, limit: null });
      if (items.length === 0) throw new ApiError('ENROLLMENT_NO_VALID_CAS', 'no CA is registered');
      const eligible = items.filter((ca) => ca.isVerified === true && ca.isAutoCaEnrollmentEnabled === true);
      const ca = issuingCa(presented, eligible, Date.parse(ctx.now));
      if (!ca) {
        throw new ApiError(
          'CERT_FAILED_VALIDATION',
          'the client certificate does not chain to a verified CA that allows auto enrollment, is not valid now, or is not for client authentication',
        );
      }
      const reading = readExternalId(ca.externalIdClaim, certificateNames(cert));
      if (reading.kind === 'missing') throw new ApiError('MISSING_CERT_CLAIM', `the certificate carries no external id for the CA's claim: ${reading.reason}`);
      if (reading.kind === 'none') await refuseCertificateInUse(ctx, cert);
      const identityId = newId();
      const name = await uniqueIdentityName(
        ctx.tx,
        formatIdentityName(ca.identityNameFormat, {
          caName: ca.name,
          caId: ca.id,
          commonName: certificateNames(cert).commonName,
          requestedName: requestedName !== undefined && requestedName !== '' ? requestedName : identityId,
          identityId,
        }),
      );
      const identity = {
        name,
        type: 'Default',
        isAdmin: false,
        roleAttributes: ca.identityRoles,
        ...(reading.kind === 'found' ? { externalId: reading.externalId } : {}),
      };
      await ctx.resources.get('identities').createIn(ctx, identity, { id: identityId });
      if (reading.kind === 'none') {
        await ctx.resources
          .get('authenticators')
          .createIn(ctx, { method: 'cert', identityId, certPem: toPem('CERTIFICATE', cert.raw) }, { caId: ca.id });
      }
    });
  }

  /**
   * Token enrollment: a JWT of an external signer that allows it creates an identity named by the
   * signer's enrollNameClaimsSelector (default sub), with the role attributes of its
   * enrollAttributeClaimsSelector (a claim holding a string array), the auth policy
   * enrollAuthPolicyId and the mapped claim as externalId. With a CSR (enrollToCertEnabled) the
   * identity gets a network certificate for it and answers it; without (enrollToTokenEnabled) it logs
   * in with the signer's JWTs. `issuerId` names the signer when given (overlay-token-issuer-id).
   */
  async enrollToken(
    signers: Pick<ExternalJwtSigners, 'verify'>,
    token: string | undefined,
    issuerId: string | undefined,
    csrPem: string | undefined,
  ): Promise<Partial<EnrolledCertificate>> {
    let verified;
    try {
      verified = await signers.verify(token, issuerId !== undefined ? { signerId: issuerId } : {});
    } catch (err) {
      if (!(err instanceof ExtJwtError)) throw err;
      throw tokenRefused(err);
    }
    const { signer, claims, subject } = verified;
    const toCert = csrPem !== undefined && csrPem.trim() !== '';
    if (toCert && !signer.enrollToCertEnabled) throw enrollmentNotAllowed(`the signer ${signer.id} does not allow enrollment to a certificate`);
    if (!toCert && !signer.enrollToTokenEnabled) throw enrollmentNotAllowed(`the signer ${signer.id} does not allow enrollment to token logins`);
    const nameClaim = signer.enrollNameClaimsSelector || DEFAULT_CLAIMS_PROPERTY;
    const requested = claimAt(claims, nameClaim);
    if (typeof requested !== 'string' || requested.trim() === '') {
      throw new ApiError('COULD_NOT_VALIDATE', `the token has no name for the identity: its claim ${nameClaim} (enrollNameClaimsSelector) is missing or not a string`);
    }
    const roleAttributes = enrollRoleAttributes(claims, signer.enrollAttributeClaimsSelector);
    const publicKey = toCert ? (await readCsr(csrPem, 'clientCsr')).publicKey : undefined;
    const identityId = newId();
    const issued = publicKey
      ? await createClientCertificate(publicKey, this.opts.pki.trustDomain, identityId, await this.signingIssuer(), new Date(this.opts.clock()))
      : undefined;
    const authPolicyId = signer.enrollAuthPolicyId || DEFAULT_AUTH_POLICY_ID;
    await this.opts.resources.write(async (ctx) => {
      // The policy may have changed since the signer was written: an identity it would not let log in
      // is not made (it could not enroll again either, its external id being taken).
      const refusal = await enrollmentRefusal(ctx.tx, signer.id, authPolicyId, toCert ? 'cert' : 'token');
      if (refusal) throw enrollmentNotAllowed(refusal);
      // One identity per external id: a second enrollment of the same subject is refused.
      const existing = await ctx.tx.selectFrom('identities').select('id').where('external_id', '=', subject).executeTakeFirst();
      if (existing) throw new ApiError('ENROLLMENT_EXISTS', `an identity with the external id of this token already exists (${String(existing.id)})`);
      const name = await uniqueIdentityName(ctx.tx, requested.trim().slice(0, 255));
      const identity = {
        name,
        type: 'Default',
        isAdmin: false,
        roleAttributes,
        externalId: subject,
        authPolicyId,
      };
      await ctx.resources.get('identities').createIn(ctx, identity, { id: identityId });
      if (issued) {
        await ctx.resources.get('authenticators').createIn(ctx, { method: 'cert', identityId, certPem: issued.certPem }, { isIssuedByNetwork: true });
      }
    });
    return issued ? { cert: issued.certPem + this.opts.pki.signingCertPem } : {};
  }

  /**
   * An authenticator reverted to an enrollment: the authenticator is deleted (its identity can no
   * longer log in with it) and an enrollment made in its place — updb for a password, ottca of its
   * CA for a certificate of a third-party CA, ott for another certificate. While one of that method
   * is outstanding it is refused 409 ENROLLMENT_EXISTS and the authenticator stays, as the established
   * controller refuses it: its token may already be in someone's hands. Answers the enrollment's id.
   */
  async revertAuthenticator(authenticatorId: string, expiresAt: string, actor?: Actor): Promise<string> {
    return this.opts.resources.write(async (ctx) => {
      const authenticators = ctx.resources.get('authenticators');
      const a = await authenticators.repo.get(ctx.tx, authenticatorId);
      if (!a) throw notFound('authenticator', authenticatorId);
      await assertMayManageAccess(ctx, a.identityId);
      await authenticators.deleteIn(ctx, a.id);
      const method = a.method === 'updb' ? 'updb' : a.caId !== null && a.caId !== undefined ? 'ottca' : 'ott';
      const enrollments = ctx.resources.get('enrollments');
      const body = {
        method,
        identityId: a.identityId,
        expiresAt,
        ...(method === 'updb' ? { username: a.username } : {}),
        ...(method === 'ottca' ? { caId: a.caId } : {}),
      };
      return (await enrollments.createIn(ctx, body)).id;
    }, actor);
  }

  /** The network JWTs a client bootstraps its trust in the controller with. */
  async networkJwts(): Promise<{ name: string; token: string }[]> {
    const ctrls = await controllerUrls(this.opts.resources.store.db, this.opts.tokens.issuer);
    return [{ name: NETWORK_JWT_NAME, token: this.opts.tokens.networkToken(ctrls) }];
  }

  /**
   * Proof that this network holds the private key of `keyId` (one of the enrollment JWKS): the
   * signature of the caller's nonce, and the CAs it should trust.
   */
  async challenge(keyId: string, nonce: string): Promise<{ algorithm: string; caPool: string; kid: string; signature: string }> {
    const key = this.opts.tokens.keys.get(keyId);
    if (!key) throw fieldError('keyId', 'is not a key of the enrollment JWKS', keyId);
    const data = Buffer.from(nonce, 'utf8');
    const signature = sign('sha256', data, key.alg === 'ES256' ? { key: key.privateKey, dsaEncoding: 'ieee-p1363' } : key.privateKey);
    return { algorithm: key.alg, caPool: this.opts.pki.trustBundlePem, kid: key.kid, signature: signature.toString('base64url') };
  }

  private signingIssuer(): Promise<Issuer> {
    this.issuer ??= importSigningKey(this.opts.pki.signingKeyPem).then((key) => ({ cert: new X509Certificate(this.opts.pki.signingCertPem), key }));
    return this.issuer;
  }
}

/** CERT_IN_USE when an authenticator already holds the certificate (its fingerprint), as the established controller answers. */
async function refuseCertificateInUse(ctx: WriteContext, cert: X509Certificate): Promise<void> {
  const fingerprint = fingerprintOfCertificate(cert);
  const existing = await ctx.tx.selectFrom('authenticators').select('id').where('fingerprint', '=', fingerprint).executeTakeFirst();
  if (existing) throw new ApiError('CERT_IN_USE', 'the certificate is already the authenticator of an identity', { code: 'CERT_IN_USE', message: 'the certificate is in use', data: { fingerprint } });
}

/**
 * Deletes the enrollment of a token inside the write that uses it: by id and token digest, so a
 * token refreshed, deleted or used meanwhile (by an exchange at the same time) is refused; and
 * again only while it has not expired.
 */
/**
 * A token enrollment whose token does not verify (none, malformed, no enabled signer, a failed
 * check): 400 INVALID_ENROLLMENT_TOKEN saying which check failed, as the established controller
 * answers it (an enrollment token, not a login: no challenge).
 */
function tokenRefused(err: ExtJwtError): ApiError {
  return new ApiError('INVALID_ENROLLMENT_TOKEN', `the token cannot enroll: ${err.message}`);
}

/** A verified token whose signer or auth policy does not allow this enrollment: 409, the established code. */
function enrollmentNotAllowed(reason: string): ApiError {
  return new ApiError('INVALID_ENROLLMENT_NOT_ALLOWED', `the token cannot enroll: ${reason}`);
}

/** The role attributes a token enrolls an identity with: the string array of the signer's claim, or none. */
function enrollRoleAttributes(claims: Record<string, unknown>, selector: string): string[] {
  if (selector === '') return [];
  const value = claimAt(claims, selector);
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw new ApiError('COULD_NOT_VALIDATE', `the token's claim ${selector} (enrollAttributeClaimsSelector) is not an array of strings`);
  }
  const usable = (v: string) => v !== '' && v.length <= 255 && !v.startsWith('#') && !v.startsWith('@');
  return [...new Set(value.filter(usable))].slice(0, 100);
}

/** Whether an outstanding updb enrollment of an identity other than `identityId` will take `username`. */
export async function anotherIsEnrollingAs(ex: Executor, username: string, identityId: string): Promise<boolean> {
  const row = await ex.selectFrom('enrollments').select('id').where('username', '=', username).where('identity_id', '!=', identityId).executeTakeFirst();
  return row !== undefined;
}

async function consume(ctx: WriteContext, e: Enrollment): Promise<void> {
  if (Date.parse(e.expiresAt) <= Date.parse(ctx.now)) throw new ApiError('ENROLLMENT_EXPIRED', 'the enrollment has expired');
  const result = await ctx.tx.deleteFrom('enrollments').where('id', '=', e.id).where('token_hash', '=', e.tokenHash).executeTakeFirst();
  // Used meanwhile (410), or deleted or refreshed meanwhile (400).
  if (Number(result.numDeletedRows) !== 1) throw await unknownToken(ctx.tx, e.tokenHash, ctx.now, `no outstanding ${e.method} enrollment has this token`);
  await spendToken(ctx, e.tokenHash, e.expiresAt);
  ctx.changed({ collection: 'enrollments', kind: 'delete', id: e.id, ownerId: e.identityId }, { before: e });
}
