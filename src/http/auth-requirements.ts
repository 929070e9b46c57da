// What each route requires of its caller. Every route declares one; the credential pipeline
// enforces it, so authorization is decided on the server for every route.
import type { Action } from '../auth/permissions.js';

export type { Action } from '../auth/permissions.js';

export type RouteAuth =
  /** No credential (informational endpoints, authenticate, enrollment). */
  | { kind: 'none' }
  /** Any authenticated caller; `partial` also admits an API session still waiting for MFA. */
  | { kind: 'session'; partial?: boolean }
  /** An admin, or a caller holding the permission of `group` for `action` (null: admins only). */
  | { kind: 'admin'; group: string | null; action: Action }
  /** Admins alone, whatever the permissions (the store's upkeep: its answers reach every record). */
  | { kind: 'admin-only' };

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteAuth;
  }
}

export const PUBLIC: RouteAuth = { kind: 'none' };
export const SESSION: RouteAuth = { kind: 'session' };
export const PARTIAL_SESSION: RouteAuth = { kind: 'session', partial: true };

export const ADMIN_ONLY: RouteAuth = { kind: 'admin-only' };

export function routeAuth(group: string | null, action: Action): RouteAuth {
  return { kind: 'admin', group, action };
}
