// Authenticators beyond CRUD: the rules of each method, password hashing under the identity's
// auth policy, certificate fingerprints, and the count of wrong passwords that locks an identity.
// Passwords and hashes never leave this module.
import { sql } from 'kysely';
import { ApiError, fieldError } from '../errors.js';
import type { Clock } from '../clock.js';
import { checkPasswordRules, hashPassword } from '../auth/passwords.js';
import { isDisabledAt } from '../auth/identity-directory.js';
import { fingerprintOfPem, parsePemCertificates } from '../pki/index.js';
import type { Entity } from '../store/repository.js';
import type { Executor } from '../store/store.js';
import type { ResourceBehaviour, Resources, WriteContext } from './resources.js';
import { policyRules } from './auth-policies.js';
import { assertMayManage, markDisabled } from './identities.js';

function certificateFingerprint(pem: unknown): string {
  if (typeof pem !== 'string' || pem.trim() === '') throw fieldError('certPem', 'is required for method cert');
  let certs;
  try {
    certs = parsePemCertificates(pem);
  } catch {
    throw fieldError('certPem', 'must be a PEM certificate');
  }
  if (certs.length !== 1) throw fieldError('certPem', 'must hold exactly one certificate');
  return fingerprintOfPem(pem);
}

/** Hashes a new password after checking it against the identity's auth policy. */
export async function setPassword(ctx: WriteContext, next: Entity, password: string): Promise<void> {
  const identity = await ctx.resources.get('identities').repo.get(ctx.tx, next.identityId as string);
  const rules = await policyRules(ctx.resources, ctx.tx, identity?.authPolicyId as string | undefined);
  checkPasswordRules(password, rules.primary.updb);
  next.passwordHash = await hashPassword(password);
  next.failedAttempts = 0;
}

export function authenticatorBehaviour(): ResourceBehaviour {
  return {
    async validate(ctx, next, prev) {
      await assertMayManage(ctx, next.identityId as string);
      if (next.method === 'updb') {
        if (next.certPem !== null && next.certPem !== undefined) throw fieldError('certPem', 'is only for method cert');
        if (typeof next.username !== 'string') throw fieldError('username', 'is required for method updb');
        if (typeof next.password === 'string') await setPassword(ctx, next, next.password);
        else if (!prev) throw fieldError('password', 'is required for method updb');
      } else {
        if (next.username !== null && next.username !== undefined) throw fieldError('username', 'is only for method updb');
        if (next.password !== undefined && next.password !== null) throw fieldError('password', 'is only for method updb');
        if (!prev) next.fingerprint = certificateFingerprint(next.certPem);
      }
      if (!prev) {
        const existing = await ctx.tx
          .selectFrom('authenticators')
          .select('id')
          .where('identity_id', '=', next.identityId as string)
          .where('method', '=', next.method as string)
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
      await assertMayManage(ctx, prev.identityId as string);
    },
  };
}

/**
 * Counts one wrong password against an authenticator and applies the identity's auth policy, in
 * one transaction: the count is taken in the store (not read, raised and written back), so
 * guesses that arrive together each count. At `maxAttempts` (0: never) the identity is disabled
 * for `lockoutDurationMinutes` (0: until enabled) and the count starts again. Guesses at an
 * identity that is disabled already count nothing. Answers the id of the identity it locked.
 */
export async function countWrongPassword(resources: Resources, clock: Clock, authenticatorId: string): Promise<string | undefined> {
  return resources.write(async (ctx) => {
    const owner = await ctx.tx
      .selectFrom('authenticators')
      .select('identity_id')
      .where('id', '=', authenticatorId)
      .executeTakeFirst();
    const identity = owner && (await resources.get('identities').repo.get(ctx.tx, owner.identity_id as string));
    if (!identity) return undefined;
    const now = clock();
    const disabledUntil = typeof identity.disabledUntil === 'string' ? Date.parse(identity.disabledUntil) : null;
    if (isDisabledAt({ disabled: identity.disabled === true, disabledUntil }, now)) return undefined;
    const { maxAttempts, lockoutDurationMinutes } = (await policyRules(resources, ctx.tx, identity.authPolicyId as string)).primary.updb;
    const counted = await ctx.tx
      .updateTable('authenticators')
      .set({ failed_attempts: sql`failed_attempts + 1` })
      .where('id', '=', authenticatorId)
      .returning('failed_attempts')
      .executeTakeFirstOrThrow();
    if (maxAttempts <= 0 || Number(counted.failed_attempts) < maxAttempts) return undefined;
    await ctx.tx.updateTable('authenticators').set({ failed_attempts: 0 }).where('identity_id', '=', identity.id).execute();
    await markDisabled(ctx, identity.id, now, lockoutDurationMinutes);
    return identity.id;
  });
}

/** A right password ends a run of wrong ones: the count starts again. */
export async function clearWrongPasswords(ex: Executor, authenticatorId: string): Promise<void> {
  await ex.updateTable('authenticators').set({ failed_attempts: 0 }).where('id', '=', authenticatorId).where('failed_attempts', '>', 0).execute();
}
