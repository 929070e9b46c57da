// The auth policy an identity logs in under, and the lockout it sets: wrong passwords are counted
// per authenticator in the store, and at the policy's bound the identity is disabled for a while.
// Every write here goes through the kernel and announces what it changed, so the credential caches
// (the identity directory, the current identity's answer) follow at once.
import { sql } from 'kysely';
import type { Clock } from '../clock.js';
import { iso } from '../clock.js';
import type { Kernel, WriteContext } from '../kernel/kernel.js';
import { DEFAULT_AUTH_POLICY_ID, type AuthPolicyRules } from '../resources/auth-policies.js';
import type { Repository } from '../store/repository.js';
import type { Executor } from '../store/store.js';
import { isDisabledAt } from './identity-directory.js';

/** The rules of an auth policy (the default policy when it names none, or names one that is gone). */
export async function authPolicyRules(policies: Repository, ex: Executor, policyId: string | null | undefined): Promise<AuthPolicyRules> {
  const policy = (await policies.get(ex, policyId ?? DEFAULT_AUTH_POLICY_ID)) ?? (await policies.get(ex, DEFAULT_AUTH_POLICY_ID));
  if (!policy) throw new Error('the default auth policy is missing');
  return { primary: policy.primary, secondary: policy.secondary } as AuthPolicyRules;
}

/**
 * Disables an identity inside a write, from `now` for `minutes` (0: until enabled), and ends its API
 * sessions, as the established controller does: one stolen before stays dead after the identity is
 * enabled again. Answers false when there is no such identity.
 */
export async function markDisabled(ctx: WriteContext, id: string, now: number, minutes: number): Promise<boolean> {
  const found = await ctx.update('identities', id, {
    disabled: true,
    disabledAt: iso(now),
    disabledUntil: minutes > 0 ? iso(now + minutes * 60_000) : null,
    updatedAt: ctx.now,
  });
  if (found) await endApiSessions(ctx, { identityId: id });
  return found;
}

/**
 * Ends API sessions, legacy and OIDC alike, in the caller's write: the one with `id`, or those of
 * an identity (made at or before `madeBy`, when given). Their sessions and refresh grants go with
 * them (the foreign keys cascade), and every cache holding one hears of its end from the change feed
 * before the write is answered.
 */
export async function endApiSessions(ctx: Pick<WriteContext, 'tx' | 'remove'>, which: { id: string } | { identityId: string; madeBy?: string }): Promise<void> {
  let query = ctx.tx.selectFrom('api_sessions').select(['id', 'identity_id']);
  if ('id' in which) query = query.where('id', '=', which.id);
  else {
    query = query.where('identity_id', '=', which.identityId);
    if (which.madeBy !== undefined) query = query.where('created_at', '<=', which.madeBy);
  }
  // One by one, so the audit log has each session as it was.
  for (const row of await query.execute()) await ctx.remove('api-sessions', String(row.id), String(row.identity_id));
}

/** Starts the count of wrong passwords again on every authenticator of an identity. */
export async function resetWrongPasswords(ctx: WriteContext, identityId: string): Promise<void> {
  const reset = await ctx.tx
    .updateTable('authenticators')
    .set({ failed_attempts: 0 })
    .where('identity_id', '=', identityId)
    .where('failed_attempts', '>', 0)
    .returning('id')
    .execute();
  for (const r of reset) ctx.changed({ collection: 'authenticators', kind: 'update', id: String(r.id), ownerId: identityId }, { audited: false });
}

/**
 * Counts one wrong password against an authenticator and applies the identity's auth policy, in
 * one transaction: the count is taken in the store (not read, raised and written back), so
 * guesses that arrive together each count. At `maxAttempts` (0: never) the identity is disabled
 * for `lockoutDurationMinutes` (0: until enabled) and the count starts again. Guesses at an
 * identity that is disabled already count nothing. Answers the id of the identity it locked.
 */
export async function countWrongPassword(kernel: Kernel, clock: Clock, authenticatorId: string): Promise<string | undefined> {
  // Never refused for a full write queue: a guess that went uncounted would escape the lockout.
  return kernel.write(async (ctx) => {
    const owner = await ctx.tx
      .selectFrom('authenticators')
      .select('identity_id')
      .where('id', '=', authenticatorId)
      .executeTakeFirst();
    const identity = owner && (await kernel.repo('identities').get(ctx.tx, owner.identity_id as string));
    if (!identity) return undefined;
    const now = clock();
    const disabledUntil = typeof identity.disabledUntil === 'string' ? Date.parse(identity.disabledUntil) : null;
    if (isDisabledAt({ disabled: identity.disabled === true, disabledUntil }, now)) return undefined;
    const rules = await authPolicyRules(kernel.repo('auth-policies'), ctx.tx, identity.authPolicyId);
    const { maxAttempts, lockoutDurationMinutes } = rules.primary.updb;
    const counted = await ctx.tx
      .updateTable('authenticators')
      .set({ failed_attempts: sql`failed_attempts + 1` })
      .where('id', '=', authenticatorId)
      .returning('failed_attempts')
      .executeTakeFirstOrThrow();
    // The count is shown nowhere; the failed login is audited as such (login.ts).
    ctx.changed({ collection: 'authenticators', kind: 'update', id: authenticatorId, ownerId: identity.id }, { audited: false });
    if (maxAttempts <= 0 || Number(counted.failed_attempts) < maxAttempts) return undefined;
    await resetWrongPasswords(ctx, identity.id);
    await markDisabled(ctx, identity.id, now, lockoutDurationMinutes);
    return identity.id;
  }, undefined, { bounded: false });
}

/** A right password ends a run of wrong ones: the count starts again. */
export async function clearWrongPasswords(kernel: Kernel, authenticatorId: string, identityId: string): Promise<void> {
  await kernel.write(async (ctx) => {
    const cleared = await ctx.tx
      .updateTable('authenticators')
      .set({ failed_attempts: 0 })
      .where('id', '=', authenticatorId)
      .where('failed_attempts', '>', 0)
      .executeTakeFirst();
    if (Number(cleared.numUpdatedRows) > 0) ctx.changed({ collection: 'authenticators', kind: 'update', id: authenticatorId, ownerId: identityId }, { audited: false });
  });
}
