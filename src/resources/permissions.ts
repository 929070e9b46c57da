// Identity permissions of the interface document: admin_readonly, each resource group with its
// actions, and ops without create.
export const PERMISSION_GROUPS = [
  'auth-policy',
  'ca',
  'config',
  'config-type',
  'edge-router-policy',
  'enrollment',
  'external-jwt-signer',
  'identity',
  'posture-check',
  'router',
  'service',
  'service-edge-router-policy',
  'service-policy',
  'terminator',
] as const;

export const PERMISSIONS: readonly string[] = [
  'admin_readonly',
  ...PERMISSION_GROUPS.flatMap((g) => [g, `${g}.read`, `${g}.create`, `${g}.update`, `${g}.delete`]),
  'ops',
  'ops.read',
  'ops.update',
  'ops.delete',
];
