// External JWT signers beyond CRUD: a signer verifies by exactly one of a PEM certificate (whose
// common name, fingerprint and validity are read into the record) or a JWKS endpoint the fetch policy
// could reach; URLs are URLs; the auth policy of enrolled identities exists; a signer an auth policy
// names cannot be deleted; and only an admin writes a signer an admin or a permission holder logs in
// with. Auth policies in turn may name only signers that exist.
import { sql, type SqlBool } from 'kysely';
import { fieldError, ApiError } from '../errors.js';
import { fingerprintOfCertificate } from '../pki/index.js';
import { checkJwksUrl, JwksFetchError, type JwksFetchPolicy } from '../auth/jwks-fetch.js';
import type { externalJwtSigners } from '../resources/external-jwt-signers.js';
import type { EntityOf } from '../resources/index.js';
import type { Executor } from '../store/store.js';
import type { ListQuery } from '../store/repository.js';
import type { Answer, ResourceBehaviour, Resources, WriteContext } from './resources.js';
import { singleCertificate } from './certificate-field.js';
import { adminOnly, byDelegate, privilegedPolicies } from './delegates.js';

type Signer = EntityOf<'external-jwt-signers'>;

/** Reads the certificate fields of a signer from its PEM; clears them without one. */
function certificateFields(next: Partial<Signer>): void {
  const pem = next.certPem;
  if (pem === null || pem === undefined || pem === '') {
    next.certPem = null;
    Object.assign(next, { commonName: null, fingerprint: null, notBefore: null, notAfter: null });
    return;
  }
  const cert = singleCertificate(pem);
  const commonName = cert.subject
    .split('\n')
    .find((line) => line.startsWith('CN='))
    ?.slice(3);
  Object.assign(next, {
    commonName: commonName ?? '',
    fingerprint: fingerprintOfCertificate(cert),
    notBefore: new Date(cert.validFrom).toISOString(),
    notAfter: new Date(cert.validTo).toISOString(),
  });
}

function checkUrl(field: string, value: string | null | undefined): void {
  if (value === null || value === undefined) return;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw fieldError(field, 'must be a URL', value);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw fieldError(field, 'must be an http or https URL', value);
}

export function externalJwtSignerBehaviour(policy: JwksFetchPolicy): ResourceBehaviour<typeof externalJwtSigners> {
  return {
    async validate(ctx, next, prev) {
      await assertMayWriteSigner(ctx, next.id);
      next.adminWritten = !byDelegate(ctx);
      if (next.jwksEndpoint === '') next.jwksEndpoint = null;
      if (next.externalAuthUrl === '') next.externalAuthUrl = null;
      certificateFields(next);
      const hasCert = typeof next.certPem === 'string';
      const hasJwks = typeof next.jwksEndpoint === 'string';
      if (!hasCert && !hasJwks) throw fieldError('certPem', 'certPem or jwksEndpoint is required');
      if (hasCert && hasJwks) throw fieldError('jwksEndpoint', 'give certPem or jwksEndpoint, not both', next.jwksEndpoint);
      if (hasJwks) {
        try {
          checkJwksUrl(next.jwksEndpoint!, policy);
        } catch (err) {
          if (err instanceof JwksFetchError) throw fieldError('jwksEndpoint', err.message, next.jwksEndpoint);
          throw err;
        }
      }
      checkUrl('externalAuthUrl', next.externalAuthUrl);
      // Checked when what it depends on changes: a signer whose policy changed since stays editable
      // (it can be disabled), and enrolling checks the policy again (enrollmentRefusal).
      const enrolling = ['enrollToCertEnabled', 'enrollToTokenEnabled', 'enrollAuthPolicyId', 'useExternalId'] as const;
      if (!prev || enrolling.some((field) => next[field] !== prev[field])) await checkEnrollment(ctx, next);
      if (next.fingerprint) {
        const same = await ctx.tx
          .selectFrom('external_jwt_signers')
          .select('id')
          .where('fingerprint', '=', next.fingerprint)
          .where('id', '!=', next.id)
          .executeTakeFirst();
        if (same) throw fieldError('certPem', `the certificate is already the signer ${String(same.id)}`);
      }
    },
    async beforeDelete(ctx, prev) {
      await assertMayWriteSigner(ctx, prev.id);
      const users = await policiesNaming(ctx.tx, prev.id);
      if (users.length > 0) {
        throw new ApiError('CAN_NOT_DELETE_REFERENCED_ENTITY', `the external JWT signer ${prev.id} is named by the auth policies ${users.join(', ')}`);
      }
    },
  };
}

/**
 * Refuses a delegate's write of a signer that an admin or an identity holding permissions logs in
 * with: its auth policy takes external JWTs of any signer or of this one, or names it as the second
 * factor. Whoever holds the signer's key signs that identity's logins, so writing the signer is
 * writing its credentials (delegates.ts); deleting it would lock the identity out. The caller's own
 * logins lend it nothing it does not hold.
 */
async function assertMayWriteSigner(ctx: WriteContext, signerId: string): Promise<void> {
  if (!byDelegate(ctx)) return;
  for (const policyId of await privilegedPolicies(ctx)) {
    const row = await ctx.tx.selectFrom('auth_policies').select(['primary', 'secondary']).where('id', '=', policyId).executeTakeFirst();
    if (!row) continue;
    const takes = loginRefusal(parsed(row.primary), signerId, 'token') === undefined || parsed(row.secondary).requireExtJwtSigner === signerId;
    if (takes) throw adminOnly(`write an external JWT signer that an admin or an identity holding permissions logs in with (auth policy ${policyId})`);
  }
}

/**
 * What a signer enrolls must be able to log in: enrolling needs an auth policy that allows the login
 * it leads to (certificates, or this signer's tokens), as the established controller checks; and a
 * token-only identity is found by the externalId enrolling gives it, so only with useExternalId.
 */
async function checkEnrollment(ctx: WriteContext, next: Signer): Promise<void> {
  const policyId = next.enrollAuthPolicyId;
  const primary = policyId ? await primaryOf(ctx.tx, policyId) : undefined;
  if (policyId && !primary) throw fieldError('enrollAuthPolicyId', 'names no auth policy', policyId, 'REFERENCED_ENTITY_NOT_FOUND');
  for (const to of ['cert', 'token'] as const) {
    if (!(to === 'cert' ? next.enrollToCertEnabled : next.enrollToTokenEnabled)) continue;
    const flag = to === 'cert' ? 'enrollToCertEnabled' : 'enrollToTokenEnabled';
    if (!primary) throw fieldError('enrollAuthPolicyId', `is required when ${flag} is true`, policyId);
    const refusal = loginRefusal(primary, next.id, to);
    if (refusal) throw fieldError('enrollAuthPolicyId', `names an auth policy that ${refusal}`, policyId);
  }
  if (next.enrollToTokenEnabled && next.useExternalId !== true) {
    throw fieldError('useExternalId', 'must be true when enrollToTokenEnabled is true: a token-only identity is found by its externalId', next.useExternalId);
  }
}

/** The primary login rules of an auth policy, or undefined when there is no such policy. */
async function primaryOf(ex: Executor, policyId: string): Promise<Record<string, unknown> | undefined> {
  const row = await ex.selectFrom('auth_policies').select('primary').where('id', '=', policyId).executeTakeFirst();
  return row ? parsed(row.primary) : undefined;
}

/** Why a policy's primary rules refuse the login an enrollment of `signerId` leads to; undefined when they allow it. */
function loginRefusal(primary: Record<string, unknown>, signerId: string, to: 'cert' | 'token'): string | undefined {
  if (to === 'cert') return (primary.cert as { allowed?: unknown } | undefined)?.allowed === true ? undefined : 'does not allow certificate logins';
  const extJwt = primary.extJwt as { allowed?: unknown; allowedSigners?: unknown } | undefined;
  if (extJwt?.allowed !== true) return 'does not allow external JWT logins';
  const signers = extJwt.allowedSigners;
  if (Array.isArray(signers) && signers.length > 0 && !signers.includes(signerId)) return `does not allow logins with the signer ${signerId} (allowedSigners)`;
  return undefined;
}

/**
 * Why enrolling through `signer` now would make an identity that cannot log in: its auth policy
 * changed since the signer was written, or is gone. Undefined when it can.
 */
export async function enrollmentRefusal(ex: Executor, signerId: string, policyId: string, to: 'cert' | 'token'): Promise<string | undefined> {
  const primary = await primaryOf(ex, policyId);
  if (!primary) return `the auth policy ${policyId} of identities the signer ${signerId} enrolls does not exist`;
  const refusal = loginRefusal(primary, signerId, to);
  return refusal && `the auth policy ${policyId} of identities the signer ${signerId} enrolls ${refusal}`;
}

interface PolicyRow {
  id: unknown;
  primary: unknown;
  secondary: unknown;
}

function parsed(value: unknown): Record<string, unknown> {
  const v = typeof value === 'string' ? (JSON.parse(value) as unknown) : value;
  return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};
}

/** The signer ids an auth policy names (primary allowedSigners, secondary requireExtJwtSigner). */
export function signersNamedBy(primary: unknown, secondary: unknown): string[] {
  const allowed = (parsed(primary).extJwt as { allowedSigners?: unknown } | undefined)?.allowedSigners;
  const required = parsed(secondary).requireExtJwtSigner;
  return [...(Array.isArray(allowed) ? allowed.filter((s): s is string => typeof s === 'string') : []), ...(typeof required === 'string' ? [required] : [])];
}

/** The auth policies naming a signer. Policies are few; they are read whole. */
async function policiesNaming(ex: Executor, signerId: string): Promise<string[]> {
  const rows = (await ex.selectFrom('auth_policies').select(['id', 'primary', 'secondary']).execute()) as PolicyRow[];
  return rows.filter((r) => signersNamedBy(r.primary, r.secondary).includes(signerId)).map((r) => String(r.id));
}

/** Refuses an auth policy naming a signer that does not exist (400 REFERENCED_ENTITY_NOT_FOUND naming the field). */
export async function checkNamedSigners(ex: Executor, primary: unknown, secondary: unknown): Promise<void> {
  const allowed = (parsed(primary).extJwt as { allowedSigners?: unknown } | undefined)?.allowedSigners;
  const required = parsed(secondary).requireExtJwtSigner;
  const exists = async (id: string) =>
    (await ex.selectFrom('external_jwt_signers').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
  if (Array.isArray(allowed)) {
    for (const id of allowed) {
      if (typeof id === 'string' && !(await exists(id))) throw fieldError('primary.extJwt.allowedSigners', `names no external JWT signer: ${id}`, id, 'REFERENCED_ENTITY_NOT_FOUND');
    }
  }
  if (typeof required === 'string' && !(await exists(required))) {
    throw fieldError('secondary.requireExtJwtSigner', `names no external JWT signer: ${required}`, required, 'REFERENCED_ENTITY_NOT_FOUND');
  }
}

/** A page of the enabled signers (what clients may log in with), filtered and sorted as asked. */
export function listEnabledSigners(resources: Resources, q: Omit<ListQuery, 'scope'>): Promise<{ items: Answer[]; total: number }> {
  const enabled = resources.store.dialect.toDb('boolean', true);
  return resources.get('external-jwt-signers').list({ ...q, scope: sql<SqlBool>`${sql.ref('external_jwt_signers.enabled')} = ${enabled}` });
}
