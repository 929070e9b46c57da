// External JWT signers beyond CRUD: a signer verifies by exactly one of a PEM certificate (whose
// common name, fingerprint and validity are read into the record) or a JWKS endpoint the fetch policy
// could reach; URLs are URLs; the auth policy of enrolled identities exists; and a signer an auth
// policy names cannot be deleted. Auth policies in turn may name only signers that exist.
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
    async validate(ctx, next) {
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
      await checkEnrollment(ctx, next);
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
      const users = await policiesNaming(ctx.tx, prev.id);
      if (users.length > 0) {
        throw new ApiError('CAN_NOT_DELETE_REFERENCED_ENTITY', `the external JWT signer ${prev.id} is named by the auth policies ${users.join(', ')}`);
      }
    },
  };
}

/**
 * What a signer enrolls must be able to log in: enrolling needs an auth policy that allows the login
 * it leads to (certificates, or this signer's tokens), as the established controller checks; and a
 * token-only identity is found by the externalId enrolling gives it, so only with useExternalId.
 */
async function checkEnrollment(ctx: WriteContext, next: Signer): Promise<void> {
  const policyId = next.enrollAuthPolicyId;
  const row = policyId ? await ctx.tx.selectFrom('auth_policies').select('primary').where('id', '=', policyId).executeTakeFirst() : undefined;
  if (policyId && !row) throw fieldError('enrollAuthPolicyId', 'names no auth policy', policyId);
  const primary = row ? (parsed(row.primary) as { cert?: { allowed?: unknown }; extJwt?: { allowed?: unknown } }) : undefined;
  if (next.enrollToCertEnabled) {
    if (!primary) throw fieldError('enrollAuthPolicyId', 'is required when enrollToCertEnabled is true', policyId);
    if (primary.cert?.allowed !== true) throw fieldError('enrollAuthPolicyId', 'names an auth policy that does not allow certificate logins', policyId);
  }
  if (next.enrollToTokenEnabled) {
    if (!primary) throw fieldError('enrollAuthPolicyId', 'is required when enrollToTokenEnabled is true', policyId);
    if (primary.extJwt?.allowed !== true) throw fieldError('enrollAuthPolicyId', 'names an auth policy that does not allow external JWT logins', policyId);
    if (next.useExternalId !== true) throw fieldError('useExternalId', 'must be true when enrollToTokenEnabled is true: a token-only identity is found by its externalId', next.useExternalId);
  }
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

/** Refuses an auth policy naming a signer that does not exist (400 naming the field). */
export async function checkNamedSigners(ex: Executor, primary: unknown, secondary: unknown): Promise<void> {
  const allowed = (parsed(primary).extJwt as { allowedSigners?: unknown } | undefined)?.allowedSigners;
  const required = parsed(secondary).requireExtJwtSigner;
  const exists = async (id: string) =>
    (await ex.selectFrom('external_jwt_signers').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
  if (Array.isArray(allowed)) {
    for (const id of allowed) {
      if (typeof id === 'string' && !(await exists(id))) throw fieldError('primary.extJwt.allowedSigners', `names no external JWT signer: ${id}`, id);
    }
  }
  if (typeof required === 'string' && !(await exists(required))) {
    throw fieldError('secondary.requireExtJwtSigner', `names no external JWT signer: ${required}`, required);
  }
}

/** A page of the enabled signers (what clients may log in with), filtered and sorted as asked. */
export function listEnabledSigners(resources: Resources, q: Omit<ListQuery, 'scope'>): Promise<{ items: Answer[]; total: number }> {
  const enabled = resources.store.dialect.toDb('boolean', true);
  return resources.get('external-jwt-signers').list({ ...q, scope: sql<SqlBool>`${sql.ref('external_jwt_signers.enabled')} = ${enabled}` });
}
