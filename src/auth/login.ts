// Primary authentication: password, client certificate and external JWT, under the identity's auth
// policy, with lockout and throttling. The legacy API (POST /authenticate) opens an API session with
// it; the OIDC login endpoints run the same check and then the authorization request's next step.
import type { X509Certificate } from 'node:crypto';
import { fingerprintOfCertificate } from '../pki/index.js';
import { ApiError } from '../errors.js';
import { iso } from '../clock.js';
import type { Core } from '../app/core.js';
import { policyRules } from '../domain/auth-policies.js';
import type { AuthPolicyRules } from '../resources/auth-policies.js';
import { disableIdentity } from '../domain/identities.js';
import type { Entity } from '../store/repository.js';
import type { ApiSession } from './api-sessions.js';
import { hashPassword, verifyPassword } from './passwords.js';

export type LoginMethod = 'password' | 'cert' | 'ext-jwt';
export const LOGIN_METHODS: readonly LoginMethod[] = ['password', 'cert', 'ext-jwt'];

export interface LoginRequest {
  method: LoginMethod;
  username?: string;
  password?: string;
  /** The leaf certificate the client presented in the TLS handshake. */
  peerCertificate?: X509Certificate;
  ipAddress: string;
  configTypes: string[];
  envInfo?: Record<string, string>;
  sdkInfo?: Record<string, string>;
}

/** The credentials of a primary login, whatever opens the session afterwards. */
export type PrimaryCredentials = Pick<LoginRequest, 'method' | 'username' | 'password' | 'peerCertificate' | 'ipAddress'>;

export interface PrimaryAuthentication {
  identity: Entity;
  authenticator: Entity;
  /** The rules of the identity's auth policy, as checked. */
  rules: AuthPolicyRules;
}

export interface LoginResult {
  session: ApiSession;
  token: string;
  identity: Entity;
}

function invalidAuth(message = 'the credentials are not valid'): ApiError {
  return new ApiError('INVALID_AUTH', message);
}

export async function login(core: Core, req: LoginRequest): Promise<LoginResult> {
  return openSession(core, req, await authenticatePrimary(core, req));
}

/**
 * Checks primary credentials: throttled per client address and username (429 with Retry-After),
 * failures counted; answers the identity, its authenticator and its policy rules, or throws
 * INVALID_AUTH.
 */
export async function authenticatePrimary(core: Core, req: PrimaryCredentials): Promise<PrimaryAuthentication> {
  const keys = [`ip:${req.ipAddress}`, ...(req.username ? [`user:${req.username}`] : [])];
  const retryAfter = Math.max(...keys.map((k) => core.loginThrottle.retryAfter(k)));
  if (retryAfter > 0) {
    throw new ApiError('SERVER_TOO_MANY_REQUESTS', 'too many failed logins; try again later', undefined, {
      'retry-after': String(retryAfter),
    });
  }
  try {
    return req.method === 'password' ? await byPassword(core, req) : req.method === 'cert' ? await byCertificate(core, req) : await byExternalJwt();
  } catch (err) {
    if (err instanceof ApiError && err.code === 'INVALID_AUTH') for (const k of keys) core.loginThrottle.fail(k);
    throw err;
  }
}

async function byPassword(core: Core, req: PrimaryCredentials): Promise<PrimaryAuthentication> {
  const authenticators = core.resources.get('authenticators').repo;
  const row = await core.store.db
    .selectFrom('authenticators')
    .selectAll()
    .where('username', '=', req.username ?? '')
    .where('method', '=', 'updb')
    .executeTakeFirst();
  const authenticator = row ? authenticators.fromRow(row as Record<string, unknown>) : undefined;
  const check = await verifyPassword(authenticator?.passwordHash as string | undefined, req.password ?? '');
  if (!authenticator) throw invalidAuth();
  const identity = await usableIdentity(core, authenticator);
  const rules = await policyRules(core.resources, core.store.db, identity.authPolicyId as string);
  if (!rules.primary.updb.allowed) throw invalidAuth('the auth policy does not allow password logins');
  if (!check.ok) {
    const attempts = (authenticator.failedAttempts as number) + 1;
    const { maxAttempts, lockoutDurationMinutes } = rules.primary.updb;
    const locked = maxAttempts > 0 && attempts >= maxAttempts;
    await authenticators.update(core.store.db, authenticator.id, { failedAttempts: locked ? 0 : attempts });
    if (locked) {
      await disableIdentity(core.resources, core.clock, identity.id, lockoutDurationMinutes);
      core.log.warn({ identityId: identity.id }, 'identity locked after failed logins');
    }
    throw invalidAuth();
  }
  const changes: Record<string, unknown> = {};
  if ((authenticator.failedAttempts as number) > 0) changes.failedAttempts = 0;
  if (check.needsRehash) changes.passwordHash = await hashPassword(req.password ?? '');
  if (Object.keys(changes).length > 0) await authenticators.update(core.store.db, authenticator.id, changes);
  return { identity, authenticator, rules };
}

async function byCertificate(core: Core, req: PrimaryCredentials): Promise<PrimaryAuthentication> {
  const cert = req.peerCertificate;
  if (!cert) throw invalidAuth('no client certificate was presented');
  const fingerprint = fingerprintOfCertificate(cert);
  const row = await core.store.db
    .selectFrom('authenticators')
    .selectAll()
    .where('fingerprint', '=', fingerprint)
    .where('method', '=', 'cert')
    .executeTakeFirst();
  if (!row) throw invalidAuth('the client certificate belongs to no identity');
  const authenticator = core.resources.get('authenticators').repo.fromRow(row as Record<string, unknown>);
  const identity = await usableIdentity(core, authenticator);
  const rules = await policyRules(core.resources, core.store.db, identity.authPolicyId as string);
  if (!rules.primary.cert.allowed) throw invalidAuth('the auth policy does not allow certificate logins');
  const now = core.clock();
  if (now < Date.parse(cert.validFrom)) throw invalidAuth('the client certificate is not valid yet');
  if (now > Date.parse(cert.validTo) && !rules.primary.cert.allowExpiredCerts) {
    throw invalidAuth('the client certificate has expired');
  }
  return { identity, authenticator, rules };
}

async function byExternalJwt(): Promise<never> {
  // Only a token of a configured external JWT signer can authenticate; none is configured.
  throw invalidAuth('no external JWT signer accepts the token');
}

async function usableIdentity(core: Core, authenticator: Entity): Promise<Entity> {
  const identity = await core.resources.get('identities').repo.get(core.store.db, authenticator.identityId as string);
  if (!identity) throw invalidAuth();
  const state = await core.identities.get(identity.id);
  if (!state || core.identities.isDisabled(state)) throw invalidAuth('the identity is disabled');
  return identity;
}

async function openSession(core: Core, req: LoginRequest, { identity, authenticator, rules }: PrimaryAuthentication): Promise<LoginResult> {
  if (req.envInfo || req.sdkInfo) {
    await core.resources.get('identities').repo.update(core.store.db, identity.id, {
      ...(req.envInfo ? { envInfo: req.envInfo } : {}),
      ...(req.sdkInfo ? { sdkInfo: req.sdkInfo } : {}),
      updatedAt: iso(core.clock()),
    });
  }
  const { session, token } = await core.sessions.create({
    identityId: identity.id,
    authenticatorId: authenticator.id,
    authMethod: req.method,
    configTypes: req.configTypes,
    ipAddress: req.ipAddress,
    isMfaRequired: rules.secondary.requireTotp,
    isCertExtendable: req.method === 'cert' && authenticator.isIssuedByNetwork === true,
  });
  return { session, token, identity };
}
