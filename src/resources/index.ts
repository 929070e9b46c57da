// Every resource definition of the controller. The store's migrations must produce exactly the
// tables these imply (test/schema.test.ts checks it).
import type { ResourceDef } from './kit.js';
import { apiSessions } from './api-sessions.js';
import { authPolicies } from './auth-policies.js';
import { authenticators } from './authenticators.js';
import { identities } from './identities.js';
import { identityTypes } from './identity-types.js';

export const resourceDefs: readonly ResourceDef[] = [identityTypes, authPolicies, identities, authenticators, apiSessions];

export function tableOf(collection: string): string {
  const def = resourceDefs.find((d) => d.name === collection);
  return def?.table ?? collection.replace(/-/g, '_');
}
