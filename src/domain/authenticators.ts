// Authenticators beyond CRUD: the rules of each method, password hashing under the identity's
// auth policy and certificate fingerprints (the count of wrong passwords that locks an identity is
// auth/lockout.ts), the caller's own authenticators, and what an identity may change on its own.
// Passwords and hashes never leave this module.
import { ApiError, fieldError, notFound } from '../errors.js';
import { checkPasswordRules, hashPassword } from '../auth/passwords.js';
import type { X509Certificate } from 'node:crypto';
import { fingerprintOfCertificate } from '../pki/index.js';
import type { ListQuery } from '../store/repository.js';
import type { EntityOf } from '../resources/index.js';
import type { authenticators } from '../resources/authenticators.js';
import type { Actor, Answer, ResourceBehaviour, Resources, WriteContext } from './resources.js';
import { singleCertificate } from './certificate-field.js';
import { policyRules } from './auth-policies.js';
import { assertMayManageAccess } from './delegates.js';
import { relationOf } from './related.js';
import { issuingCaOf } from './cas.js';
import { anotherIsEnrollingAs } from './enrollments.js';

function authenticatorCertificate(pem: unknown): X509Certificate {
  if (typeof pem !== 'string' || pem.trim() === '') throw fieldError('certPem', 'is required for method cert');
  return singleCertificate(pem);
}

/** Hashes a new password after checking it against the identity's auth policy. */
export async function setPassword(ctx: WriteContext, next: EntityOf<'authenticators'>, password: string): Promise<void> {
  const identity = await ctx.resources.get('identities').repo.get(ctx.tx, next.identityId);
  const rules = await policyRules(ctx.resources, ctx.tx, identity?.authPolicyId);
  checkPasswordRules(password, rules.primary.updb);
  next.passwordHash = await hashPassword(password);
  next.failedAttempts = 0;
}

export function authenticatorBehaviour(): ResourceBehaviour<typeof authenticators> {
  return {
    async validate(ctx, next, prev) {
      await assertMayManageAccess(ctx, next.identityId);
      if (next.method === 'updb') {
        if (next.certPem !== null && next.certPem !== undefined) throw fieldError('certPem', 'is only for method cert');
        if (typeof next.username !== 'string') throw fieldError('username', 'is required for method updb');
        // A username an outstanding enrollment of another identity will take is taken already.
        if (next.username !== prev?.username && (await anotherIsEnrollingAs(ctx.tx, next.username, next.identityId))) {
          throw fieldError('username', 'another identity is enrolling with this username', next.username);
        }
        if (typeof next.password === 'string') await setPassword(ctx, next, next.password);
        else if (!prev) throw fieldError('password', 'is required for method updb');
      } else {
        if (next.username !== null && next.username !== undefined) throw fieldError('username', 'is only for method updb');
        if (next.password !== undefined && next.password !== null) throw fieldError('password', 'is only for method updb');
        if (!prev) {
          const cert = authenticatorCertificate(next.certPem);
          next.fingerprint = fingerprintOfCertificate(cert);
          // A certificate of a registered CA goes with that CA: the one an enrollment verified it
          // against (through intermediates, perhaps), else the one that signed it. One the network
          // issued is no third-party CA's.
          next.caId = next.caId ?? (next.isIssuedByNetwork === true ? null : await issuingCaOf(ctx.tx, cert)) ?? null;
        }
      }
      if (!prev) {
        const existing = await ctx.tx
          .selectFrom('authenticators')
          .select('id')
          .where('identity_id', '=', next.identityId)
          .where('method', '=', next.method)
          .executeTakeFirst();
        if (existing) {
          throw new ApiError('COULD_NOT_VALIDATE', `the identity already has a ${String(next.method)} authenticator`, {
            field: 'method',
            reason: 'the identity already has an authenticator of this method',
            value: next.method,
          });
        }
      }
      delete next.password;
    },
    async beforeDelete(ctx, prev) {
      await assertMayManageAccess(ctx, prev.identityId);
    },
  };
}

// ---- the authenticators of one identity ------------------------------------------------------------

/** The related list identities/authenticators, whose scope is an identity's own. */
const authenticatorsOfIdentity = relationOf('identities', 'authenticators');

/** A page of the caller's own authenticators: scoped to the caller before any filter. */
export async function listOwnAuthenticators(
  resources: Resources,
  identityId: string,
  q: ListQuery,
): Promise<{ items: Answer[]; total: number }> {
  const page = await resources.get('authenticators').list({ ...q, scope: authenticatorsOfIdentity.scope(identityId) });
  return { ...page, items: page.items.map(asOwn) };
}

/**
 * An own authenticator links where its owner reads it, as the established controller links it: the
 * admins' paths (/authenticators, the identity) answer the owner 401 or nothing on the Client API.
 */
function asOwn(answer: Answer): Answer {
  return { ...answer, _links: { self: { href: `./current-identity/authenticators/${String(answer.id)}` } } };
}

/** The caller's own authenticator; another identity's is NOT_FOUND, as if it did not exist. */
export async function ownAuthenticator(resources: Resources, identityId: string, id: string): Promise<EntityOf<'authenticators'>> {
  const entity = await resources.get('authenticators').repo.get(resources.store.db, id);
  if (!entity || entity.identityId !== identityId) throw notFound('authenticator', id);
  return entity;
}

/** The caller's own authenticator as it is answered. */
export async function ownAuthenticatorAnswer(resources: Resources, identityId: string, id: string): Promise<Answer> {
  const entity = await ownAuthenticator(resources, identityId, id);
  const [answer] = await resources.get('authenticators').present(resources.store.db, [entity]);
  return asOwn(answer!);
}

export interface OwnAuthenticatorChange {
  /** The caller: the identity whose authenticator it must be. */
  identityId: string;
  id: string;
  /** The password the authenticator has now. */
  currentPassword: string;
  /** The fields to change, as a patch (only those given) or a full update. */
  fields: Record<string, unknown>;
  mode: 'patch' | 'update';
  actor?: Actor;
}

/**
 * Checks the current password of an identity's own authenticator before it changes; a wrong one
 * throws INVALID_AUTH naming currentPassword. Given by the login path, which throttles and counts
 * these checks as it does failed logins.
 */
export type CurrentPasswordCheck = (authenticator: EntityOf<'authenticators'>, currentPassword: string) => Promise<void>;

/**
 * An identity changes its own authenticator: only one of its own (another is NOT_FOUND), only a
 * username/password one (a certificate is re-issued, not edited), and only after its current
 * password checks out; then the change is an ordinary patch or full update of the authenticator.
 */
export async function changeOwnAuthenticator(
  resources: Resources,
  checkCurrentPassword: CurrentPasswordCheck,
  change: OwnAuthenticatorChange,
): Promise<void> {
  const entity = await ownAuthenticator(resources, change.identityId, change.id);
  if (entity.method !== 'updb') throw fieldError('method', 'only username/password authenticators can be changed');
  await checkCurrentPassword(entity, change.currentPassword);
  await resources.write(async (ctx) => {
    // The password checked is the one still stored: two changes given the same current password at
    // once must not both pass (nor one that a reset or another change beat).
    // (A rehash of the same password by a login meanwhile refuses it too; it may be given again.)
    const authenticators = ctx.resources.get('authenticators');
    const stored = await authenticators.repo.get(ctx.tx, entity.id);
    if (stored && stored.passwordHash !== entity.passwordHash) {
      throw new ApiError('INVALID_AUTH', 'the current password is not correct', { field: 'currentPassword', reason: 'is not correct' });
    }
    if (change.mode === 'patch') await authenticators.patchIn(ctx, entity.id, change.fields);
    else await authenticators.updateIn(ctx, entity.id, change.fields);
  }, change.actor);
}
