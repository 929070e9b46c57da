// Auth policies beyond CRUD: the rules an identity logs in under, and who may change the policies
// admins log in under.
import type { authPolicies, AuthPolicyRules } from '../resources/auth-policies.js';
import { authPolicyRules } from '../auth/lockout.js';
import type { Executor } from '../store/store.js';
import { adminOnly, byDelegate } from './identities.js';
import type { ResourceBehaviour, Resources, WriteContext } from './resources.js';

/** The rules of an identity's auth policy (the default policy when it names none). */
export function policyRules(resources: Resources, ex: Executor, policyId: string | null | undefined): Promise<AuthPolicyRules> {
  return authPolicyRules(resources.get('auth-policies').repo, ex, policyId);
}

/** Whether some admin identity logs in under the policy. */
async function usedByAnAdmin(ctx: WriteContext, policyId: string): Promise<boolean> {
  const isAdmin = ctx.resources.store.dialect.toDb('boolean', true) as number;
  const row = await ctx.tx
    .selectFrom('identities')
    .select('id')
    .where('is_admin', '=', isAdmin)
    .where('auth_policy_id', '=', policyId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Changing or deleting the policy an admin logs in under changes the admin's access (say
 * `primary.updb.allowed: false`), so only an admin may do it, as only an admin may change an admin.
 */
export function authPolicyBehaviour(): ResourceBehaviour<typeof authPolicies> {
  const guard = async (ctx: WriteContext, policyId: string) => {
    if (byDelegate(ctx) && (await usedByAnAdmin(ctx, policyId))) throw adminOnly('change the auth policy of an admin');
  };
  return {
    async validate(ctx, _next, prev) {
      if (prev) await guard(ctx, prev.id);
    },
    async beforeDelete(ctx, prev) {
      await guard(ctx, prev.id);
    },
  };
}
