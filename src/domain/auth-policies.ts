import { DEFAULT_AUTH_POLICY_ID, type AuthPolicyRules } from '../resources/auth-policies.js';
import type { Executor } from '../store/store.js';
import type { Resources } from './resources.js';

/** The rules of an identity's auth policy (the default policy when it names none). */
export async function policyRules(resources: Resources, ex: Executor, policyId: string | null | undefined): Promise<AuthPolicyRules> {
  const repo = resources.get('auth-policies').repo;
  const policy = (await repo.get(ex, policyId ?? DEFAULT_AUTH_POLICY_ID)) ?? (await repo.get(ex, DEFAULT_AUTH_POLICY_ID));
  if (!policy) throw new Error('the default auth policy is missing');
  return { primary: policy.primary, secondary: policy.secondary } as AuthPolicyRules;
}
