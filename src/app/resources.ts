// Which behaviour each resource has: the one place definitions meet their domain hooks. Every
// resource of the one list is registered; what its relations need (policy links, the attribute
// index) is added from the relations its definition declares.
import type { Clock } from '../clock.js';
import type { ApiSessions } from '../auth/api-sessions.js';
import type { PolicyLinks } from '../policy/links.js';
import { composeBehaviours, type ResourceBehaviour, type Resources } from '../domain/resources.js';
import { relationBehaviour } from '../domain/policies.js';
import { configBehaviour, configTypeBehaviour, serviceBehaviour, type ConfigValidators, type ServiceFieldsForCaller } from '../domain/services.js';
import { edgeRouterBehaviour, routerBehaviour, terminatorBehaviour } from '../domain/routers.js';
import { postureCheckBehaviour } from '../domain/posture-checks.js';
import { controllerSettingBehaviour, revocationBehaviour, type TokenLifetimes } from '../domain/operations.js';
import { identityBehaviour } from '../domain/identities.js';
import { enrollmentBehaviour, type EnrollmentTokens } from '../domain/enrollments.js';
import { authenticatorBehaviour } from '../domain/authenticators.js';
import { apiSessionBehaviour } from '../domain/api-sessions.js';
import { authPolicyBehaviour } from '../domain/auth-policies.js';
import { caBehaviour } from '../domain/cas.js';
import { externalJwtSignerBehaviour } from '../domain/external-jwt-signers.js';
import type { JwksFetchPolicy } from '../auth/jwks-fetch.js';
import { resourceDefs, type ResourceDefOf, type ResourceName } from '../resources/index.js';

export interface ResourceDeps {
  sessions: ApiSessions;
  clock: Clock;
  /** The OIDC token lifetimes (edge.oidc): how long a revocation must be kept. */
  tokenLifetimes: TokenLifetimes;
  /** Link maintenance over the controller's policy index. */
  links: PolicyLinks;
  /** Compiled config type schemas (a cache). */
  configValidators: ConfigValidators;
  /** What service answers carry for their caller (the Client API's read model, built after the resources). */
  serviceFieldsForCaller: ServiceFieldsForCaller;
  /** Tokens and JWTs of enrollments, of identities and of edge routers. */
  enrollmentTokens: EnrollmentTokens;
  /** What JWKS endpoints external JWT signers may name. */
  jwksPolicy: JwksFetchPolicy;
  /** The network's own CA certificates (PEM): no third-party CA may be one of them. */
  networkCaPems: readonly string[];
}

/** Per collection, a behaviour over that collection's own definition. */
type BehaviourOfEach = { [N in ResourceName]?: ResourceBehaviour<ResourceDefOf<N>> };

/** The domain behaviour of each collection that has one beyond CRUD and its relations. */
function domainBehaviours(resources: Resources, deps: ResourceDeps): BehaviourOfEach {
  return {
    'auth-policies': authPolicyBehaviour(),
    identities: identityBehaviour(deps.enrollmentTokens, resources, deps.clock),
    cas: caBehaviour(deps.networkCaPems),
    enrollments: enrollmentBehaviour(deps.enrollmentTokens, resources),
    authenticators: authenticatorBehaviour(),
    'api-sessions': apiSessionBehaviour(deps.sessions, deps.clock),
    'config-types': configTypeBehaviour(),
    configs: configBehaviour(deps.configValidators),
    services: serviceBehaviour(deps.serviceFieldsForCaller),
    'edge-routers': edgeRouterBehaviour(deps.links, deps.enrollmentTokens),
    routers: routerBehaviour(deps.enrollmentTokens),
    'transit-routers': routerBehaviour(deps.enrollmentTokens),
    terminators: terminatorBehaviour(),
    'posture-checks': postureCheckBehaviour(),
    revocations: revocationBehaviour(deps.tokenLifetimes),
    'controller-settings': controllerSettingBehaviour(),
    'external-jwt-signers': externalJwtSignerBehaviour(deps.jwksPolicy),
  };
}

export function registerResources(resources: Resources, deps: ResourceDeps): void {
  const behaviours = domainBehaviours(resources, deps);
  for (const def of resourceDefs) {
    const parts = [behaviours[def.name], relationBehaviour(def, deps.links)].filter((b): b is ResourceBehaviour => b !== undefined);
    resources.register(def, parts.length > 1 ? composeBehaviours(...parts) : parts[0]);
  }
}
