// Which behaviour each resource has: the one place definitions meet their domain hooks.
import type { Clock } from '../clock.js';
import type { ApiSessions } from '../auth/api-sessions.js';
import type { PolicyLinks } from '../policy/links.js';
import { composeBehaviours, type Resources } from '../domain/resources.js';
import {
  edgeRouterPolicyBehaviour,
  roleLinkBehaviour,
  serviceEdgeRouterPolicyBehaviour,
  servicePolicyBehaviour,
} from '../domain/policies.js';
import { configBehaviour, configTypeBehaviour, serviceBehaviour, type ConfigValidators } from '../domain/services.js';
import { edgeRouterBehaviour, routerBehaviour, terminatorBehaviour } from '../domain/routers.js';
import { postureCheckBehaviour } from '../domain/posture-checks.js';
import { controllerSettingBehaviour, revocationBehaviour, type TokenLifetimes } from '../domain/operations.js';
import { configs, configTypes, services, terminators } from '../resources/services.js';
import { edgeRouters, routers, transitRouters } from '../resources/routers.js';
import { edgeRouterPolicies, serviceEdgeRouterPolicies, servicePolicies } from '../resources/policies.js';
import { postureChecks, postureCheckTypes } from '../resources/posture-checks.js';
import { controllers, controllerSettings, revocations } from '../resources/operations.js';
import { identityBehaviour } from '../domain/identities.js';
import { authenticatorBehaviour } from '../domain/authenticators.js';
import { apiSessionBehaviour } from '../domain/api-sessions.js';
import { authPolicyBehaviour } from '../domain/auth-policies.js';
import { apiSessions } from '../resources/api-sessions.js';
import { authPolicies } from '../resources/auth-policies.js';
import { authenticators } from '../resources/authenticators.js';
import { identities } from '../resources/identities.js';
import { identityTypes } from '../resources/identity-types.js';
import { sessions } from '../resources/sessions.js';

export interface ResourceDeps {
  sessions: ApiSessions;
  clock: Clock;
  /** The OIDC token lifetimes (edge.oidc): how long a revocation must be kept. */
  tokenLifetimes: TokenLifetimes;
  /** Link maintenance over the controller's policy index. */
  links: PolicyLinks;
  /** Compiled config type schemas (a cache). */
  configValidators: ConfigValidators;
}

export function registerResources(resources: Resources, deps: ResourceDeps): void {
  resources.register(identityTypes);
  resources.register(authPolicies, authPolicyBehaviour());
  resources.register(identities, composeBehaviours(identityBehaviour(), roleLinkBehaviour('identity', deps.links)));
  resources.register(authenticators, authenticatorBehaviour());
  resources.register(apiSessions, apiSessionBehaviour(deps.sessions, deps.clock));
  resources.register(configTypes, configTypeBehaviour());
  resources.register(configs, configBehaviour(deps.configValidators));
  resources.register(services, composeBehaviours(serviceBehaviour(), roleLinkBehaviour('service', deps.links)));
  resources.register(edgeRouters, composeBehaviours(edgeRouterBehaviour(deps.links), roleLinkBehaviour('edge-router', deps.links)));
  resources.register(routers, routerBehaviour());
  resources.register(transitRouters, routerBehaviour());
  resources.register(terminators, terminatorBehaviour());
  resources.register(servicePolicies, servicePolicyBehaviour(deps.links));
  resources.register(edgeRouterPolicies, edgeRouterPolicyBehaviour(deps.links));
  resources.register(serviceEdgeRouterPolicies, serviceEdgeRouterPolicyBehaviour(deps.links));
  resources.register(postureCheckTypes);
  resources.register(postureChecks, composeBehaviours(postureCheckBehaviour(), roleLinkBehaviour('posture-check', deps.links)));
  resources.register(revocations, revocationBehaviour(deps.tokenLifetimes));
  resources.register(controllerSettings, controllerSettingBehaviour());
  resources.register(controllers);
  resources.register(sessions);
}
