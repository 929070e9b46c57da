// Authenticators beyond CRUD: the rules of each method, password hashing under the identity's
// auth policy and certificate fingerprints (the count of wrong passwords that locks an identity is
// auth/lockout.ts). Passwords and hashes never leave this module.
import { ApiError, fieldError } from '../errors.js';
import { checkPasswordRules, hashPassword } from '../auth/passwords.js';
import { fingerprintOfPem, parsePemCertificates } from '../pki/index.js';
import type { Entity } from '../store/repository.js';
import type { ResourceBehaviour, WriteContext } from './resources.js';
import { policyRules } from './auth-policies.js';
import { assertMayManage } from './identities.js';

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
