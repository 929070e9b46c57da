// Who may do what on the Management API: pure, from the identity's flags and permissions.
/** What a route does to its records, as permissions name it. */
export type Action = 'read' | 'create' | 'update' | 'delete';

export interface Permitted {
  isAdmin: boolean;
  permissions: readonly string[];
}

/**
 * Admins may do everything. Otherwise `admin_readonly` grants every read, `<group>` every action of
 * that group and `<group>.<action>` that one action; a null group is for admins only (and, for
 * reads, admin_readonly).
 */
export function allows(caller: Permitted, group: string | null, action: Action): boolean {
  if (caller.isAdmin) return true;
  const granted = new Set(caller.permissions);
  if (action === 'read' && granted.has('admin_readonly')) return true;
  if (group === null) return false;
  return granted.has(group) || granted.has(`${group}.${action}`);
}

/**
 * An identity only an admin may manage: an admin, or one that holds permissions. A CA or external
 * JWT signer a caller without admin rights wrote last logs none of them in (domain/delegates.ts).
 */
export function isPrivileged(identity: { isAdmin?: unknown; permissions?: unknown }): boolean {
  return identity.isAdmin === true || (Array.isArray(identity.permissions) && identity.permissions.length > 0);
}
