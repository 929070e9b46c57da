import { Type } from '@sinclair/typebox';
import { field, MAX_KEY, MAX_NAME, defineResource } from './kit.js';
import { IDENTITY_TYPES } from './identity-types.js';
import { PERMISSIONS } from './permissions.js';

const PRECEDENCES = ['default', 'required', 'failed'] as const;
const Cost = Type.Integer({ minimum: 0, maximum: 65535 });
const info = (keys: readonly string[]) =>
  Type.Object(Object.fromEntries(keys.map((k) => [k, Type.Optional(Type.String({ maxLength: 255 }))])), {
    additionalProperties: false,
  });

export const ENV_INFO_KEYS = ['arch', 'domain', 'hostname', 'os', 'osRelease', 'osVersion'] as const;
export const SDK_INFO_KEYS = ['appId', 'appVersion', 'branch', 'revision', 'type', 'version'] as const;
export const EnvInfoSchema = info(ENV_INFO_KEYS);
export const SdkInfoSchema = info(SDK_INFO_KEYS);

export const EnrollmentCreateSchema = Type.Object({
  ott: Type.Optional(Type.Boolean()),
  ottca: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_NAME })),
  updb: Type.Optional(Type.String({ minLength: 4, maxLength: 100 })),
});

export const identities = defineResource({
  name: 'identities',
  label: 'identity',
  table: 'identities',
  permission: 'identity',
  system: true,
  operationIds: { list: 'listIdentities' },
  links: [
    'edge-router-policies',
    'edge-routers',
    'service-policies',
    'services',
    'posture-data',
    'failed-service-requests',
    'authenticators',
    'enrollments',
    'service-configs',
  ],
  refLinks: { 'auth-policies': 'authPolicyId' },
  related: [
    { collection: 'edge-router-policies', operationId: 'listIdentitysEdgeRouterPolicies' },
    { collection: 'edge-routers', through: 'edge-router-policies', operationId: 'listIdentityEdgeRouters' },
    { collection: 'service-policies', operationId: 'listIdentityServicePolicies' },
    { collection: 'services', through: 'service-policies', policyType: true, operationId: 'listIdentityServices' },
    { collection: 'authenticators', by: 'identityId', operationId: 'getIdentityAuthenticators' },
    { collection: 'enrollments', by: 'identityId', operationId: 'getIdentityEnrollments' },
  ],
  fields: {
    name: field.name(),
    type: field.enum(IDENTITY_TYPES, 'identity type, kept as given', { required: 'always' }),
    isAdmin: field.boolean('administrator', { required: 'always' }),
    isDefaultAdmin: field.boolean('the administrator created at first start', { readOnly: true, default: false }),
    authPolicyId: field.ref('auth-policies', 'authentication policy; the default policy when null', {
      nullable: true,
      default: 'default',
    }),
    externalId: field.string('id of the identity in an external system (external JWT claims)', {
      nullable: true,
      unique: true,
      maxLength: MAX_NAME,
    }),
    appData: field.json(Type.Record(Type.String({ minLength: 1, maxLength: MAX_KEY }), Type.Unknown(), { maxProperties: 100 }), 'application data', {
      nullable: true,
      filterable: false,
    }),
    defaultHostingCost: field.integer('cost of terminators this identity hosts', { minimum: 0, maximum: 65535, default: 0 }),
    defaultHostingPrecedence: field.enum(PRECEDENCES, 'precedence of terminators this identity hosts', {
      default: 'default',
    }),
    serviceHostingCosts: field.json(Type.Record(Type.String({ maxLength: MAX_NAME }), Cost, { maxProperties: 1000 }), 'cost per service id', {
      default: {},
      nullable: true,
    }),
    serviceHostingPrecedences: field.json(
      Type.Record(Type.String({ maxLength: MAX_NAME }), Type.Union(PRECEDENCES.map((p) => Type.Literal(p))), { maxProperties: 1000 }),
      'precedence per service id',
      { default: {}, nullable: true },
    ),
    roleAttributes: field.roleAttributes(),
    permissions: field.set('management permissions', {
      nullable: true,
      schema: Type.Union(PERMISSIONS.map((p) => Type.Literal(p))),
      maxItems: PERMISSIONS.length,
    }),
    enrollment: field.json(EnrollmentCreateSchema, 'enrollments to create with the identity', {
      virtual: true,
      createOnly: true,
    }),
    disabled: field.boolean('refused while disabled', { readOnly: true, default: false }),
    disabledAt: field.datetime('when it was disabled', { readOnly: true, nullable: true }),
    disabledUntil: field.datetime('when the disablement ends; null while disabled: indefinitely', {
      readOnly: true,
      nullable: true,
    }),
    envInfo: field.json(EnvInfoSchema, 'environment reported at the last authentication', {
      readOnly: true,
      default: {},
    }),
    sdkInfo: field.json(SdkInfoSchema, 'SDK reported at the last authentication', { readOnly: true, default: {} }),
    interfaces: field.json(Type.Array(Type.Unknown()), 'network interfaces reported by the client', {
      readOnly: true,
      default: [],
      filterable: false,
    }),
  },
});
