import { Type } from '@sinclair/typebox';
import { field, MAX_LIST, MAX_NAME, defineResource } from './kit.js';

export const TERMINATOR_PRECEDENCES = ['default', 'required', 'failed'] as const;

export const configTypes = defineResource({
  name: 'config-types',
  label: 'config type',
  table: 'config_types',
  permission: 'config-type',
  links: ['configs'],
  related: [{ collection: 'configs', by: 'configTypeId', operationId: 'listConfigsForConfigType' }],
  fields: {
    name: field.name(),
    schema: field.json(Type.Record(Type.String(), Type.Unknown(), { maxProperties: 1000 }), 'JSON Schema that configs of this type satisfy', {
      default: {},
      nullable: true,
      filterable: false,
    }),
    // Fixed at create, as in the established controller: configs of the type are attached by it.
    // Null on create is the default, as the established document marks it nullable.
    target: field.enum(['service', 'router'], 'what configs of this type configure', { default: 'service', nullable: true, createOnly: true }),
  },
});

export const configs = defineResource({
  name: 'configs',
  label: 'config',
  table: 'configs',
  permission: 'config',
  links: ['services'],
  related: [{ collection: 'services', operationId: 'listConfigServices' }],
  fields: {
    name: field.name(),
    configTypeId: field.ref('config-types', 'type of the config', { required: 'create', createOnly: true }),
    data: field.json(Type.Record(Type.String(), Type.Unknown(), { maxProperties: 1000 }), 'the config, shaped by its type schema', {
      required: 'always',
      filterable: false,
    }),
  },
});

export const services = defineResource({
  name: 'services',
  label: 'service',
  table: 'services',
  permission: 'service',
  links: ['service-edge-router-policies', 'service-policies', 'terminators', 'configs'],
  linkLists: { configs: 'configs' },
  related: [
    { collection: 'configs', operationId: 'listServiceConfig' },
    { collection: 'edge-routers', through: 'service-edge-router-policies', operationId: 'listServiceEdgeRouters' },
    { collection: 'identities', through: 'service-policies', policyType: true, operationId: 'listServiceIdentities' },
    { collection: 'service-edge-router-policies', operationId: 'listServiceServiceEdgeRouterPolicies' },
    { collection: 'service-policies', operationId: 'listServiceServicePolicies' },
    { collection: 'terminators', by: 'service', operationId: 'listServiceTerminators' },
  ],
  fields: {
    name: field.name(),
    configs: field.set('ids of configs, at most one of each config type', {
      virtual: true,
      nullable: true,
      uniqueItems: true,
      schema: Type.String({ minLength: 1, maxLength: MAX_NAME }),
      maxItems: MAX_LIST,
    }),
    encryptionRequired: field.boolean('end-to-end encryption required; fixed after create', { createOnly: true, default: true }),
    maxIdleTimeMillis: field.integer('idle time after which a circuit closes; 0: never', { minimum: 0, maximum: 2 ** 31 - 1, default: 0 }),
    roleAttributes: field.roleAttributes(),
    terminatorStrategy: field.string('how a terminator is chosen', { maxLength: MAX_NAME, default: 'smartrouting' }),
  },
});

export const terminators = defineResource({
  name: 'terminators',
  label: 'terminator',
  table: 'terminators',
  permission: 'terminator',
  filterNames: { service: 'services', router: 'routers' },
  fields: {
    // Written as ids; read back as entity references, with serviceId and routerId beside them.
    // The service, the identity and its secret are fixed at create, as in the established controller:
    // a terminator answers for one service and one hosting identity for its whole life.
    service: field.ref('services', 'id of the service it terminates; fixed when created', {
      column: 'service_id',
      required: 'always',
      createOnly: true,
      ref: { collection: 'services', onDelete: 'cascade' },
    }),
    router: field.string('id of the (edge or transit) router hosting it', {
      column: 'router_id',
      required: 'always',
      minLength: 1,
      maxLength: MAX_NAME,
    }),
    address: field.string('address the router dials', { required: 'always', minLength: 1, maxLength: MAX_NAME * 4 }),
    binding: field.string('how the router reaches the address', { required: 'always', minLength: 1, maxLength: MAX_NAME }),
    cost: field.integer('static cost', { minimum: 0, maximum: 65535, default: 0 }),
    precedence: field.enum(TERMINATOR_PRECEDENCES, 'precedence', { default: 'default' }),
    identity: field.string('identity the terminator answers for; fixed when created', { maxLength: MAX_NAME, default: '', createOnly: true }),
    identitySecret: field.string('base64 bytes; accepted on create only, stored as a hash, never returned', {
      createOnly: true,
      writeOnly: true,
      virtual: true,
      maxLength: 4096,
      pattern: '^[A-Za-z0-9+/]*={0,2}$',
    }),
    identitySecretHash: field.string('SHA-256 of the secret', { readOnly: true, writeOnly: true, nullable: true, maxLength: 128 }),
  },
});
