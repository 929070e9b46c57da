// Primary authentication: password, client certificate and external JWT, under the identity's auth
// policy, with lockout and throttling. The legacy API (POST /authenticate) opens an API session with
// it; the OIDC login endpoints run the same check and then the authorization request's next step.
// The current password asked for before an identity changes its own authenticator is checked here
// too, so its failures count the same way. A certificate names its identity by its fingerprint, or,
// for a CA with an external id claim, by the external id it carries.
import type { X509Certificate } from 'node:crypto';
import type { Logger } from 'pino';
import { certificateNames, fingerprintOfCertificate } from '../pki/index.js';
import { ApiError } from '../errors.js';
import { addressKey } from '../ipv6.js';
import { iso, type Clock } from '../clock.js';
import type { Kernel, WriteContext } from '../kernel/kernel.js';
import type { AuthPolicyRules } from '../resources/auth-policies.js';
import { template, type Template } from '../store/template.js';
import type { EntityOf } from '../resources/index.js';
import type { ApiSession, ApiSessions } from './api-sessions.js';
import { isDisabledAt, type IdentityDirectory, type IdentityState } from './identity-directory.js';
import { authPolicyRules, clearWrongPasswords, countWrongPassword } from './lockout.js';
import { hashPassword, verifyPassword } from './passwords.js';
import type { FailureThrottle } from './throttle.js';
import { isPrivileged } from './permissions.js';
import type { Mfa } from './mfa.js';
import type { CertificateTrust } from './cert-trust.js';
import { readExternalId } from './external-id.js';
import { ExtJwtError, type ExternalJwtSigners, type Signer } from './ext-jwt.js';
import type { AuthPolicyRulesCache } from './ext-jwt-factor.js';
import type { Revocations } from './revocations.js';

/** What a login uses: the kernel for its reads and writes, the credential caches, the throttle. */
export interface LoginDeps {
  kernel: Kernel;
  clock: Clock;
  log: Pick<Logger, 'warn'>;
  identities: IdentityDirectory;
  sessions: ApiSessions;
  loginThrottle: FailureThrottle;
  mfa: Pick<Mfa, 'isEnrolled'>;
  certificateTrust: Pick<CertificateTrust, 'verify'>;
  externalJwtSigners: Pick<ExternalJwtSigners, 'verify'>;
  authPolicyRules: Pick<AuthPolicyRulesCache, 'get'>;
  revocations: Pick<Revocations, 'isRevoked'>;
  /** Counts each primary login by method and outcome. */
  metrics?: { login(method: LoginMethod, result: LoginOutcome): void };
}

/** How a primary login ended: INVALID_AUTH, the throttle's 429, another refusal, or a failure. */
export type LoginOutcome = 'success' | 'invalid' | 'throttled' | 'refused' | 'error';

function outcomeOf(err: unknown): LoginOutcome {
  if (!(err instanceof ApiError)) return 'error';
  if (err.code === 'INVALID_AUTH') return 'invalid';
  if (err.code === 'SERVER_TOO_MANY_REQUESTS') return 'throttled';
  return err.status >= 500 ? 'error' : 'refused';
}

export type LoginMethod = 'password' | 'cert' | 'ext-jwt';
export const LOGIN_METHODS: readonly LoginMethod[] = ['password', 'cert', 'ext-jwt'];

export interface LoginRequest {
  method: LoginMethod;
  username?: string;
  password?: string;
  /** The leaf certificate the client presented in the TLS handshake: what identifies a certificate caller. */
  peerCertificate?: X509Certificate;
  /** The other certificates the client presented, which may link the leaf to a trusted CA. */
  peerChain?: readonly X509Certificate[];
  /** The `Authorization: Bearer` token of the request: an external JWT for method ext-jwt. */
  bearer?: string;
  ipAddress: string;
  configTypes: string[];
  envInfo?: Record<string, string>;
  sdkInfo?: Record<string, string>;
}

type Authenticator = EntityOf<'authenticators'>;

/** The credentials of a primary login, whatever opens the session afterwards. */
export type PrimaryCredentials = Pick<LoginRequest, 'method' | 'username' | 'password' | 'peerCertificate' | 'peerChain' | 'bearer' | 'ipAddress'>;

export interface PrimaryAuthentication {
  /** As the credential pipeline knows it (from memory), checked not disabled. */
  identity: IdentityState;
  /**
   * The authenticator the credential matched; null for a certificate of a CA with an external id
   * claim whose identity was found by that id and holds no authenticator of this certificate.
   */
  authenticator: Authenticator | null;
  /** The rules of the identity's auth policy, as checked. */
  rules: AuthPolicyRules;
  /** Whether the identity has a confirmed TOTP enrollment (every login then asks for a code). */
  isTotpEnrolled: boolean;
  /**
   * A certificate login with a network certificate whose chain the client did not present: it
   * verified only with the controller's own signing CA.
   */
  improperClientCertChain: boolean;
  /** The external JWT signer of an ext-jwt login. */
  signer?: Signer;
}

export interface LoginResult {
  session: ApiSession;
  token: string;
  identity: IdentityState;
}

function invalidAuth(message = 'the credentials are not valid'): ApiError {
  return new ApiError('INVALID_AUTH', message);
}

export async function login(core: LoginDeps, req: LoginRequest): Promise<LoginResult> {
  return openSession(core, req, await authenticatePrimary(core, req));
}

/**
 * Checks primary credentials: throttled per client address (an IPv6 /64) and username (429 with Retry-After),
 * failures counted; answers the identity, its authenticator and its policy rules, or throws
 * INVALID_AUTH.
 */
export async function authenticatePrimary(core: LoginDeps, req: PrimaryCredentials): Promise<PrimaryAuthentication> {
  const keys = [`ip:${addressKey(req.ipAddress)}`, ...(req.username ? [`user:${req.username}`] : [])];
  let found: Found;
  try {
    found = await throttled(core, keys, () =>
      req.method === 'password' ? byPassword(core, req) : req.method === 'cert' ? byCertificate(core, req) : byExternalJwt(core, req),
    );
  } catch (err) {
    if (err instanceof ApiError && err.code === 'INVALID_AUTH') await recordFailure(core, req, err.message);
    core.metrics?.login(req.method, outcomeOf(err));
    throw err;
  }
  core.metrics?.login(req.method, 'success');
  return { ...found, isTotpEnrolled: await core.mfa.isEnrolled(found.identity.id) };
}

/**
 * A failed login in the audit log, in a write of its own (nothing else of it commits). The name
 * given and the reason, never the credential. A failure to record it is logged and does not change
 * the answer.
 */
async function recordFailure(core: LoginDeps, req: PrimaryCredentials, reason: string): Promise<void> {
  try {
    await core.kernel.recordAudit({
      action: 'login-failed',
      entityType: 'identities',
      entityId: null,
      entityName: req.username ?? null,
      after: { method: req.method, reason },
    });
  } catch (err) {
    core.log.warn({ err }, 'a failed login was not recorded in the audit log');
  }
}

/**
 * Checks the current password of the caller's own password authenticator before it changes. A
 * wrong one counts as a failed login does (the throttle of the address and the account, and the
 * auth policy's lockout), so a stolen session cannot guess its way to the account's password.
 */
export async function checkCurrentPassword(core: LoginDeps, authenticator: Authenticator, password: string, ipAddress: string): Promise<void> {
  await throttled(core, [`ip:${addressKey(ipAddress)}`, `user:${String(authenticator.username)}`], async () => {
    const check = await verifyPassword(authenticator.passwordHash, password);
    if (!check.ok) {
      await countFailure(core, authenticator);
      throw new ApiError('INVALID_AUTH', 'the current password is not correct', {
        field: 'currentPassword',
        reason: 'is not correct',
      });
    }
    // Stryker: clearing a count of 0 writes nothing, so the test only saves a transaction.
    if (authenticator.failedAttempts > 0) await clearWrongPasswords(core.kernel, authenticator.id, authenticator.identityId);
  });
}

/**
 * Runs one credential check under the failed-login throttle. Its place is taken before the check
 * runs, so checks at the same time cannot exceed the budget; INVALID_AUTH counts as a failure,
 * anything else gives the place back.
 */
async function throttled<T>(core: LoginDeps, keys: string[], check: () => Promise<T>): Promise<T> {
  const admission = await core.loginThrottle.admit(keys);
  if (!admission.attempt) {
    throw new ApiError('SERVER_TOO_MANY_REQUESTS', 'too many failed logins; try again later', undefined, {
      'retry-after': String(admission.retryAfter),
    });
  }
  const { attempt } = admission;
  try {
    const result = await check();
    attempt.release();
    return result;
  } catch (err) {
    if (err instanceof ApiError && err.code === 'INVALID_AUTH') attempt.fail();
    else attempt.release();
    throw err;
  }
}

/** Who a credential check found, before anything beyond the credential is looked at. */
type Found = Omit<PrimaryAuthentication, 'isTotpEnrolled'>;

async function byPassword(core: LoginDeps, req: PrimaryCredentials): Promise<Found> {
  const authenticators = core.kernel.repo('authenticators');
  const row = await core.kernel.store.db
    .selectFrom('authenticators')
    .selectAll()
    // Stryker: no account has the username '' (nor, in any test, a stand-in), so a login without
    // one finds nothing either way.
    .where('username', '=', req.username ?? '')
    .where('method', '=', 'updb')
    .executeTakeFirst();
  const authenticator = row ? authenticators.fromRow(row) : undefined;
  // Stryker: '' is no password (nor, in any test, a stand-in), so a login without one fails either way.
  const check = await verifyPassword(authenticator?.passwordHash, req.password ?? '');
  // A wrong password learns nothing about the account: not whether it exists, is locked or
  // disabled, nor what its policy allows. Nor does the right one of a locked or disabled account:
  // it is refused as a wrong one is, or guesses would go on during a lockout and be told when right.
  if (!authenticator) throw invalidAuth();
  if (!check.ok) {
    await countFailure(core, authenticator);
    throw invalidAuth();
  }
  const identity = await core.identities.get(authenticator.identityId);
  if (!identity || core.identities.isDisabled(identity)) throw invalidAuth();
  const rules = await rulesOf(core, identity);
  if (!rules.primary.updb.allowed) throw invalidAuth('the auth policy does not allow password logins');
  // Stryker: clearing a count of 0 writes nothing, so the test only saves a transaction.
  if (authenticator.failedAttempts > 0) await clearWrongPasswords(core.kernel, authenticator.id, identity.id);
  if (check.needsRehash) {
    // Stryker: the password was right, so it is there; `?? ''` is for the type only.
    const passwordHash = await hashPassword(req.password ?? '');
    await core.kernel.write((ctx) => ctx.update('authenticators', authenticator.id, { passwordHash }, identity.id));
  }
  return { identity, authenticator, rules, improperClientCertChain: false };
}

function rulesOf(core: LoginDeps, identity: IdentityState): Promise<AuthPolicyRules> {
  return authPolicyRules(core.kernel.repo('auth-policies'), core.kernel.store.db, identity.authPolicyId);
}

async function countFailure(core: LoginDeps, authenticator: Authenticator): Promise<void> {
  const locked = await countWrongPassword(core.kernel, core.clock, authenticator.id);
  if (locked) core.log.warn({ identityId: locked }, 'identity locked after wrong passwords');
}

async function byCertificate(core: LoginDeps, req: PrimaryCredentials): Promise<Found> {
  const cert = req.peerCertificate;
  if (!cert) throw invalidAuth('no client certificate was presented');
  // The chain first: a certificate that leads to no trusted CA identifies no one, whoever has it.
  const origin = await core.certificateTrust.verify(cert, req.peerChain ?? []);
  if (!origin) throw invalidAuth('the client certificate does not chain to the network or to a verified CA that allows logins');
  const fingerprint = fingerprintOfCertificate(cert);
  const row = await core.kernel.store.db
    .selectFrom('authenticators')
    .selectAll()
    .where('fingerprint', '=', fingerprint)
    .where('method', '=', 'cert')
    .executeTakeFirst();
  let authenticator = row ? core.kernel.repo('authenticators').fromRow(row) : null;
  let identityId = authenticator?.identityId;
  // A CA with an external id claim names its identities by that id, so a renewed certificate still
  // finds its identity; one from which the claim cannot be read is looked up by fingerprint, as the
  // established controller does.
  const reading = origin.kind === 'ca' ? readExternalId(origin.externalIdClaim, certificateNames(cert)) : { kind: 'none' as const };
  if (reading.kind === 'missing' && origin.kind === 'ca') {
    core.log.warn({ caId: origin.caId, reason: reading.reason }, 'external id claim not read from a client certificate');
  }
  if (reading.kind === 'found') {
    const owner = await core.kernel.store.db.selectFrom('identities').select('id').where('external_id', '=', reading.externalId).executeTakeFirst();
    if (!owner) throw invalidAuth('no identity has the external id of the client certificate');
    identityId = String(owner.id);
    // Its own cert authenticator, when it holds this very certificate, is what the session records.
    if (authenticator?.identityId !== identityId) authenticator = null;
  }
  if (identityId === undefined) throw invalidAuth('the client certificate belongs to no identity');
  const identity = await usableIdentity(core, identityId);
  // Whoever holds a CA's key makes certificates naming any external id: through a CA a delegate
  // wrote, no way into the accounts a delegate may not touch, whenever they became such. (A
  // certificate found by its fingerprint proves the key of the identity's own authenticator.)
  if (origin.kind === 'ca' && reading.kind === 'found' && !origin.adminWritten && isPrivileged(identity)) {
    throw invalidAuth(`the CA ${origin.caId} was last written by a caller who is not an admin: it logs in no admin or identity holding permissions until an admin saves it`);
  }
  const rules = await rulesOf(core, identity);
  if (!rules.primary.cert.allowed) throw invalidAuth('the auth policy does not allow certificate logins');
  const now = core.clock();
  if (now < Date.parse(cert.validFrom)) throw invalidAuth('the client certificate is not valid yet');
  if (now > Date.parse(cert.validTo) && !rules.primary.cert.allowExpiredCerts) {
    throw invalidAuth('the client certificate has expired');
  }
  // Recorded on the authenticator when it changes (a write only then, not at every login).
  if (authenticator && authenticator.lastAuthResolvedToRoot !== origin.resolvedToRoot) {
    const { id } = authenticator;
    await core.kernel.write((ctx) => ctx.update('authenticators', id, { lastAuthResolvedToRoot: origin.resolvedToRoot }, identityId));
  }
  return { identity, authenticator, rules, improperClientCertChain: origin.improperClientCertChain };
}

/**
 * A value safe inside a quoted challenge parameter (RFC 6750's error_description characters): quotes
 * and backslashes become ', and what is not printable ASCII is percent-encoded (UTF-8). A header
 * value cannot carry characters beyond Latin-1 at all, and the token's claims and the signer's fields
 * may hold any.
 */
function quoted(text: string): string {
  return text
    .slice(0, 300)
    .replace(/["\\]/g, "'")
    .replace(/[^\x20-\x7e]/gu, (c) => [...Buffer.from(c)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''));
}

/** The WWW-Authenticate challenge of a refused external JWT, in the realm of the requirement it failed. */
export function extJwtChallenge(realm: 'overlay-primary-ext-jwt' | 'overlay-secondary-ext-jwt', err: Pick<ExtJwtError, 'kind' | 'message' | 'signer'>): string {
  const signer = err.signer ? ` id="${quoted(err.signer.id)}" issuer="${quoted(err.signer.issuer)}"` : '';
  return `Bearer realm="${realm}" error="${err.kind}" error_description="${quoted(err.message)}"${signer}`;
}

/**
 * A refused primary external JWT login: 401 INVALID_AUTH saying which check failed, in the message
 * and the challenge, and in the log (the token never).
 */
function extJwtRefused(core: LoginDeps, err: ExtJwtError): ApiError {
  core.log.warn({ signerId: err.signer?.id, reason: err.message }, 'external JWT login refused');
  return new ApiError('INVALID_AUTH', `the external JWT is refused: ${err.message}`, undefined, {
    'www-authenticate': extJwtChallenge('overlay-primary-ext-jwt', err),
  });
}

/**
 * An external JWT login: a token of an enabled signer, whose mapped claim names an identity (by id,
 * or by externalId with useExternalId), under a policy that allows ext-jwt logins by that signer.
 */
async function byExternalJwt(core: LoginDeps, req: PrimaryCredentials): Promise<Found> {
  const refuse = (message: string, signer?: Signer) => extJwtRefused(core, new ExtJwtError('invalid', message, signer));
  let verified;
  try {
    verified = await core.externalJwtSigners.verify(req.bearer);
  } catch (err) {
    if (err instanceof ExtJwtError) throw extJwtRefused(core, err);
    throw err;
  }
  const { signer, subject } = verified;
  const byExternalId = signer.useExternalId === true;
  const owner = byExternalId
    ? await core.kernel.store.db.selectFrom('identities').select('id').where('external_id', '=', subject).executeTakeFirst()
    : { id: subject };
  const identity = owner && (await core.identities.get(String(owner.id)));
  if (!identity) throw refuse(`no identity has the ${byExternalId ? 'external id' : 'id'} the claim ${signer.claimsProperty ?? 'sub'} names`, signer);
  if (core.identities.isDisabled(identity)) throw refuse('the identity is disabled', signer);
  // Whoever holds a signer's key signs its JWTs: as for a CA (byCertificate).
  if (signer.adminWritten === false && isPrivileged(identity)) {
    throw refuse('the signer was last written by a caller who is not an admin: it logs in no admin or identity holding permissions until an admin saves it', signer);
  }
  // The rules from memory (they follow the change feed): this login has no password hash to hide behind.
  const rules = await core.authPolicyRules.get(identity.authPolicyId);
  if (!rules.primary.extJwt.allowed) throw refuse('the auth policy does not allow external JWT logins', signer);
  const allowed = rules.primary.extJwt.allowedSigners ?? [];
  if (allowed.length > 0 && !allowed.includes(signer.id)) throw refuse(`the auth policy does not allow the signer ${signer.id}`, signer);
  return { identity, authenticator: null, rules, improperClientCertChain: false, signer };
}

async function usableIdentity(core: LoginDeps, identityId: string): Promise<IdentityState> {
  const identity = await core.identities.get(identityId);
  if (!identity) throw invalidAuth();
  if (core.identities.isDisabled(identity)) throw invalidAuth('the identity is disabled');
  return identity;
}

/**
 * Whether the identity still exists and is not disabled, as the write `ctx` sees it. A login's check
 * reads what has committed; the session is written later, and a disablement (an admin's, or a
 * lockout) that commits in between ends the identity's sessions before this one exists: read again
 * in the session's write, where no other write comes between, the login is refused as it would be
 * now, and no session outlives the disablement (one would work again once the identity is enabled).
 * Other changes a login relies on (its authenticator, auth policy or signer) end no session, so a
 * login racing them is no different from one made just before, and they are not read again.
 */
export async function identityUsableIn(kernel: Kernel, ctx: WriteContext, id: string): Promise<boolean> {
  const { dialect } = kernel.store;
  const [row] = (await dialect.execute(ctx.tx, identityStateQuery(kernel)({ ':id': id }))).rows as { disabled: unknown; disabled_until: unknown }[];
  if (!row) return false;
  const disabledUntil = typeof row.disabled_until === 'string' ? Date.parse(row.disabled_until) : null;
  return !isDisabledAt({ disabled: dialect.fromDb('boolean', row.disabled) === true, disabledUntil }, Date.parse(ctx.now));
}

/** What identityUsableIn reads, compiled once per store: it runs in the write of every login. */
const identityStateQueries = new WeakMap<Kernel, Template>();

function identityStateQuery(kernel: Kernel): Template {
  let query = identityStateQueries.get(kernel);
  if (!query) {
    const compiled = kernel.store.db.selectFrom('identities').select(['disabled', 'disabled_until']).where('id', '=', ':id').compile();
    query = template(compiled, [':id']);
    identityStateQueries.set(kernel, query);
  }
  return query;
}

async function openSession(
  core: LoginDeps,
  req: LoginRequest,
  { identity, authenticator, rules, isTotpEnrolled, improperClientCertChain }: PrimaryAuthentication,
): Promise<LoginResult> {
  if (req.envInfo || req.sdkInfo) {
    const values = {
      ...(req.envInfo ? { envInfo: req.envInfo } : {}),
      ...(req.sdkInfo ? { sdkInfo: req.sdkInfo } : {}),
      updatedAt: iso(core.clock()),
    };
    await core.kernel.write((ctx) => ctx.update('identities', identity.id, values));
  }
  const { session, token } = await core.sessions.create({
    identityId: identity.id,
    authenticatorId: authenticator?.id ?? null,
    authMethod: req.method,
    configTypes: req.configTypes,
    ipAddress: req.ipAddress,
    // A confirmed TOTP enrollment asks for a code at every login, whatever the policy says.
    isMfaRequired: rules.secondary.requireTotp || isTotpEnrolled,
    isCertExtendable: req.method === 'cert' && authenticator?.isIssuedByNetwork === true,
    improperClientCertChain,
  }, async (ctx) => {
    if (!(await identityUsableIn(core.kernel, ctx, identity.id))) throw invalidAuth('the identity was disabled or deleted during the login');
  });
  // An IDENTITY revocation that committed while the login ran names its session too (dated before
  // it): the sweep at the revocation missed it, so it ends here rather than lingering in the lists.
  if (core.revocations.isRevoked('IDENTITY', identity.id, session.createdAt)) {
    await core.sessions.delete(session.id);
    throw invalidAuth("the identity's sessions were revoked while it logged in");
  }
  return { session, token, identity };
}
