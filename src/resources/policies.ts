// The three policy kinds. Each names its role lists and the collection each selects; the link
// tables, the role attribute lists and the related lists of both sides derive from that.
import { field, defineResource } from './kit.js';

export const SEMANTICS = ['AllOf', 'AnyOf'] as const;

const semantic = field.enum(SEMANTICS, 'how #attribute roles combine', { required: 'always' });

export const servicePolicies = defineResource({
  name: 'service-policies',
  label: 'service policy',
  table: 'service_policies',
  permission: 'service-policy',
  links: ['services', 'identities', 'posture-checks'],
  operationIds: { list: 'listServicePolicies' },
  roleLists: { identityRoles: 'identities', serviceRoles: 'services', postureCheckRoles: 'posture-checks' },
  related: [
    { collection: 'identities', operationId: 'listServicePolicyIdentities' },
    { collection: 'posture-checks', operationId: 'listServicePolicyPostureChecks' },
    { collection: 'services', operationId: 'listServicePolicyServices' },
  ],
  fields: {
    name: field.name(),
    type: field.enum(['Dial', 'Bind'], 'what the policy grants', { required: 'always' }),
    semantic,
    identityRoles: field.roles('identities it applies to'),
    serviceRoles: field.roles('services it grants'),
    postureCheckRoles: field.roles('posture checks a session must pass'),
  },
});

export const edgeRouterPolicies = defineResource({
  name: 'edge-router-policies',
  label: 'edge router policy',
  table: 'edge_router_policies',
  permission: 'edge-router-policy',
  system: true,
  links: ['edge-routers', 'identities'],
  operationIds: { list: 'listEdgeRouterPolicies' },
  roleLists: { identityRoles: 'identities', edgeRouterRoles: 'edge-routers' },
  related: [
    { collection: 'edge-routers', operationId: 'listEdgeRouterPolicyEdgeRouters' },
    { collection: 'identities', operationId: 'listEdgeRouterPolicyIdentities' },
  ],
  fields: {
    name: field.name(),
    semantic,
    edgeRouterRoles: field.roles('edge routers the identities may use'),
    identityRoles: field.roles('identities it applies to'),
  },
});

export const serviceEdgeRouterPolicies = defineResource({
  name: 'service-edge-router-policies',
  label: 'service edge router policy',
  table: 'service_edge_router_policies',
  permission: 'service-edge-router-policy',
  links: ['edge-routers', 'services'],
  operationIds: { list: 'listServiceEdgeRouterPolicies' },
  roleLists: { serviceRoles: 'services', edgeRouterRoles: 'edge-routers' },
  related: [
    { collection: 'edge-routers', operationId: 'listServiceEdgeRouterPolicyEdgeRouters' },
    { collection: 'services', operationId: 'listServiceEdgeRouterPolicyServices' },
  ],
  fields: {
    name: field.name(),
    semantic,
    edgeRouterRoles: field.roles('edge routers that may carry the services'),
    serviceRoles: field.roles('services it applies to'),
  },
});
