// Every resource definition of the controller: the one list that registration, the relations, the
// kernel, the schema test and anything else that goes over all resources enumerate. The store's
// migrations must produce exactly the tables these imply (test/schema.test.ts checks it).
import type { EntityOfDef, ResourceDef } from './kit.js';
import { apiSessions } from './api-sessions.js';
import { apiSessionCertificates } from './api-session-certificates.js';
import { authPolicies } from './auth-policies.js';
import { authenticators } from './authenticators.js';
import { identities } from './identities.js';
import { identityTypes } from './identity-types.js';
import { configs, configTypes, services, terminators } from './services.js';
import { edgeRouters, routers, transitRouters } from './routers.js';
import { edgeRouterPolicies, serviceEdgeRouterPolicies, servicePolicies } from './policies.js';
import { postureChecks, postureCheckTypes } from './posture-checks.js';
import { controllers, controllerSettings, revocations } from './operations.js';
import { sessions } from './sessions.js';
import { mfas } from './mfas.js';
import { cas } from './cas.js';
import { enrollments } from './enrollments.js';
import { externalJwtSigners } from './external-jwt-signers.js';

/** Every resource, in registration order (transit-routers are the routers table served a second time). */
export const resourceDefs = [
  identityTypes,
  authPolicies,
  identities,
  cas,
  authenticators,
  apiSessions,
  apiSessionCertificates,
  mfas,
  enrollments,
  configTypes,
  configs,
  services,
  terminators,
  edgeRouters,
  routers,
  transitRouters,
  servicePolicies,
  edgeRouterPolicies,
  serviceEdgeRouterPolicies,
  postureCheckTypes,
  postureChecks,
  revocations,
  controllerSettings,
  controllers,
  sessions,
  externalJwtSigners,
] as const satisfies readonly ResourceDef[];

/** The name of a resource of the controller: a collection of its own. */
export type ResourceName = (typeof resourceDefs)[number]['name'];

/** The definition of a resource of the controller by its name; every definition without one. */
export type ResourceDefOf<N extends ResourceName = ResourceName> = Extract<(typeof resourceDefs)[number], { name: N }>;

export function tableOf(collection: string): string {
  const def = resourceDefs.find((d) => d.name === collection);
  return def?.table ?? collection.replace(/-/g, '_');
}

/**
 * An entity as the store holds it, inferred from its definition, named either by the definition or
 * by its resource name: `EntityOf<'identities'>`.
 */
export type EntityOf<R extends ResourceName | ResourceDef> = R extends ResourceName
  ? EntityOfDef<ResourceDefOf<R>>
  : R extends ResourceDef
    ? EntityOfDef<R>
    : never;
