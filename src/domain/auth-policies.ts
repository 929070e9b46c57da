// Auth policies beyond CRUD: the rules an identity logs in under, who may change the policies
// admins log in under, the external JWT signer list always a list, naming only signers that exist.
import { PrimaryReadSchema, type authPolicies, type AuthPolicyRules } from '../resources/auth-policies.js';
import { authPolicyRules } from '../auth/lockout.js';
import type { Executor } from '../store/store.js';
import { adminOnly, byDelegate, privilegedPolicies } from './delegates.js';
import { ApiError } from '../errors.js';
import { checkNamedSigners } from './external-jwt-signers.js';
import { computed, type ResourceBehaviour, type Resources, type WriteContext } from './resources.js';

/** The rules of an identity's auth policy (the default policy when it names none). */
export function policyRules(resources: Resources, ex: Executor, policyId: string | null | undefined): Promise<AuthPolicyRules> {
  return authPolicyRules(resources.get('auth-policies').repo, ex, policyId);
}

/** `primary` with its signer list a list: a null one (written so, or stored so before) is [], any signer. */
function withSignerList(primary: unknown): unknown {
  if (typeof primary !== 'object' || primary === null) return primary;
  const p = primary as { extJwt?: { allowedSigners?: unknown } };
  if (!p.extJwt || Array.isArray(p.extJwt.allowedSigners)) return primary;
  return { ...p, extJwt: { ...p.extJwt, allowedSigners: [] } };
}

/** `secondary` with requireExtJwtSigner, null when a write left it out (no signer required). */
function withSignerRequirement<S extends { requireExtJwtSigner?: string | null }>(secondary: S): S {
  return secondary.requireExtJwtSigner === undefined ? { ...secondary, requireExtJwtSigner: null } : secondary;
}

/** `primary` reads with `extJwt.allowedSigners` a list, whatever a policy was stored with. */
const primaryAsRead = computed({ primary: PrimaryReadSchema }, async (_ex, entities, answers) => {
  for (const [i, e] of entities.entries()) answers[i]!.primary = withSignerList(e.primary);
});

/**
 * Changing or deleting the policy an admin logs in under changes the admin's access (say
 * `primary.updb.allowed: false`), so only an admin may do it, as only an admin may change an admin;
 * likewise the policy of an identity holding permissions, which could be made to take a signer the
 * delegate writes.
 */
export function authPolicyBehaviour(): ResourceBehaviour<typeof authPolicies> {
  const guard = async (ctx: WriteContext, policyId: string) => {
    if (byDelegate(ctx) && (await privilegedPolicies(ctx)).has(policyId)) throw adminOnly('change the auth policy of an admin or an identity holding permissions');
  };
  return {
    async validate(ctx, next, prev) {
      if (prev) await guard(ctx, prev.id);
      next.primary = withSignerList(next.primary);
      next.secondary = withSignerRequirement(next.secondary);
      await checkNamedSigners(ctx.tx, next.primary, next.secondary);
    },
    async beforeDelete(ctx, prev) {
      await guard(ctx, prev.id);
      // Identities a signer enrolls would otherwise be created under a policy that is gone.
      const signers = await ctx.tx.selectFrom('external_jwt_signers').select('id').where('enroll_auth_policy_id', '=', prev.id).execute();
      if (signers.length > 0) {
        throw new ApiError(
          'CAN_NOT_DELETE_REFERENCED_ENTITY',
          `the auth policy ${prev.id} is the enroll auth policy of the external JWT signers ${signers.map((s) => String(s.id)).join(', ')}`,
        );
      }
    },
    computed: [primaryAsRead],
  };
}
