// Which behaviour each resource has: the one place definitions meet their domain hooks.
import type { Clock } from '../clock.js';
import type { ApiSessions } from '../auth/api-sessions.js';
import type { IdentityDirectory } from '../auth/identity-directory.js';
import type { Resources } from '../domain/resources.js';
import { identityBehaviour } from '../domain/identities.js';
import { authenticatorBehaviour } from '../domain/authenticators.js';
import { apiSessionBehaviour } from '../domain/api-sessions.js';
import { apiSessions } from '../resources/api-sessions.js';
import { authPolicies } from '../resources/auth-policies.js';
import { authenticators } from '../resources/authenticators.js';
import { identities } from '../resources/identities.js';
import { identityTypes } from '../resources/identity-types.js';

export interface ResourceDeps {
  sessions: ApiSessions;
  identities: IdentityDirectory;
  clock: Clock;
}

export function registerResources(resources: Resources, deps: ResourceDeps): void {
  resources.register(identityTypes);
  resources.register(authPolicies);
  resources.register(identities, identityBehaviour());
  resources.register(authenticators, authenticatorBehaviour());
  resources.register(apiSessions, apiSessionBehaviour(deps.sessions, deps.clock));

  // What each in-memory view of the credential pipeline drops when a record moves.
  resources.changes.subscribe((c) => {
    if (c.collection === 'identities') {
      deps.identities.invalidate(c.id);
      if (c.kind === 'delete') deps.sessions.forgetIdentity(c.id);
    } else if (c.collection === 'api-sessions' && c.kind === 'delete') {
      deps.sessions.forget(c.id);
    }
  });
}
