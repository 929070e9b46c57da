// What a caller who is not an admin may not touch, whatever permissions it holds: an admin, an
// identity that holds permissions, their credentials and what their access depends on. Every domain
// module that writes such records asks here, and so do the reads of enrollment secrets.
import { ApiError } from '../errors.js';
import { allows, isPrivileged, type Permitted } from '../auth/permissions.js';

export { isPrivileged };
import type { EntityOf } from '../resources/index.js';
import type { WriteContext } from './resources.js';

/**
 * A caller who is not an admin may not change an admin, its credentials or what its access depends
 * on (its auth policy, revocations naming it or its API sessions), nor the credentials of an
 * identity that holds permissions, whatever permissions it holds: otherwise `identity.update`,
 * `enrollment`, `auth-policy` or `ops` would be a path to the account and the permissions it holds,
 * or a way to lock every admin out.
 */
export function adminOnly(what = 'change an admin, an identity that holds permissions, or their credentials'): ApiError {
  return new ApiError('UNAUTHORIZED', `only an admin may ${what}`);
}

/** Whether the write is by a caller who is not an admin (the controller's own writes have none). */
export function byDelegate(ctx: WriteContext): boolean {
  return ctx.actor !== undefined && !ctx.actor.isAdmin;
}

/**
 * The auth policies that admins and identities holding permissions, other than the caller, log in
 * under: what a delegate may not change (their policy, a signer it takes).
 */
export async function privilegedPolicies(ctx: WriteContext): Promise<Set<string>> {
  return new Set((await privilegedOthers(ctx)).map((i) => String(i.authPolicyId)));
}

/** The admins and identities holding permissions, other than the caller: whose logins a delegate may not touch. */
export async function privilegedOthers(ctx: WriteContext): Promise<EntityOf<'identities'>[]> {
  const { dialect } = ctx.resources.store;
  const identities = ctx.resources.get('identities').repo;
  const rows = await ctx.tx
    .selectFrom('identities')
    .selectAll()
    .where((eb) => eb.or([eb('is_admin', '=', dialect.toDb('boolean', true) as number), eb('permissions', '!=', dialect.toDb('json', []) as string)]))
    .execute();
  return rows.map((r) => identities.fromRow(r)).filter((i) => isPrivileged(i) && i.id !== ctx.actor?.id);
}

export async function isAdminIdentity(ctx: WriteContext, identityId: string): Promise<boolean> {
  const target = await ctx.resources.get('identities').repo.get(ctx.tx, identityId);
  return target?.isAdmin === true;
}

/** Refuses a delegate's change of an admin (see adminOnly). */
export async function assertMayManage(ctx: WriteContext, identityId: string): Promise<void> {
  if (byDelegate(ctx) && (await isAdminIdentity(ctx, identityId))) throw adminOnly();
}

/**
 * Refuses a delegate's change of how a privileged identity (one that holds permissions too) gets in:
 * its credentials (authenticators, enrollments, MFA), which would lend its rights to the delegate,
 * and its state (deleted, disabled, enabled), which would lock it out or let in one an admin locked out.
 */
export async function assertMayManageAccess(ctx: WriteContext, identityId: string): Promise<void> {
  // Its own credentials lend a caller nothing it does not hold.
  if (!byDelegate(ctx) || ctx.actor!.id === identityId) return;
  const target = await ctx.resources.get('identities').repo.get(ctx.tx, identityId);
  if (target && isPrivileged(target)) throw adminOnly();
}

/**
 * Whether a reader may see the secrets of an identity's pending enrollments (the one-time token and
 * the JWT that carries it): they enroll a credential of that identity, so only a reader that could
 * make such an enrollment itself sees them: an admin, or a caller that may write enrollments or
 * identities, for an identity it may manage. A read-only caller sees the enrollment without them.
 */
export function maySeeEnrollmentSecrets(reader: (Permitted & { id?: string }) | undefined, target: { id: string; isAdmin?: unknown; permissions?: unknown }): boolean {
  if (!reader) return false;
  if (reader.isAdmin) return true;
  // Its own enrollments, which it may make (assertMayManageAccess), lend it nothing it lacks.
  if (isPrivileged(target) && reader.id !== target.id) return false;
  return (['enrollment', 'identity'] as const).some((group) => allows(reader, group, 'create') || allows(reader, group, 'update'));
}

/** Whether a reader may see a router's enrollment token and JWT: one that could make or renew the enrollment. */
export function maySeeRouterEnrollmentSecrets(reader: Permitted | undefined): boolean {
  return reader !== undefined && (allows(reader, 'router', 'create') || allows(reader, 'router', 'update'));
}
