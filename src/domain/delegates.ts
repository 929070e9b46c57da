// What a caller who is not an admin may not touch, whatever permissions it holds: an admin, its
// credentials and what its access depends on. Every domain module that writes such records asks here.
import { ApiError } from '../errors.js';
import type { WriteContext } from './resources.js';

/**
 * A caller who is not an admin may not change an admin, its credentials or what its access depends
 * on (its auth policy, revocations naming it or its API sessions), whatever permissions it holds:
 * otherwise `identity.update`, `auth-policy` or `ops` would be a path to the admin's account or a
 * way to lock every admin out.
 */
export function adminOnly(what = 'change an admin or its credentials'): ApiError {
  return new ApiError('UNAUTHORIZED', `only an admin may ${what}`);
}

/** Whether the write is by a caller who is not an admin (the controller's own writes have none). */
export function byDelegate(ctx: WriteContext): boolean {
  return ctx.actor !== undefined && !ctx.actor.isAdmin;
}

export async function isAdminIdentity(ctx: WriteContext, identityId: string): Promise<boolean> {
  const target = await ctx.resources.get('identities').repo.get(ctx.tx, identityId);
  return target?.isAdmin === true;
}

/** Refuses a delegate's change of an admin or its credentials (see adminOnly). */
export async function assertMayManage(ctx: WriteContext, identityId: string): Promise<void> {
  if (byDelegate(ctx) && (await isAdminIdentity(ctx, identityId))) throw adminOnly();
}
