import { Type } from '@sinclair/typebox';
import { field, MAX_NAME, defineResource } from './kit.js';

export const revocations = defineResource({
  name: 'revocations',
  label: 'revocation',
  table: 'revocations',
  permission: 'ops',
  operations: ['list', 'get', 'create'],
  idFrom: 'id',
  fields: {
    id: field.string('what is revoked: a token id (JTI), an identity id or an API session id', {
      virtual: true,
      required: 'create',
      minLength: 1,
      maxLength: MAX_NAME,
    }),
    type: field.enum(['JTI', 'IDENTITY', 'API_SESSION'], 'kind of id', { required: 'create', createOnly: true }),
    expiresAt: field.datetime('when the revocation can be forgotten (the longest token lifetime)', { readOnly: true, nullable: true }),
  },
});

/** The id of the controller setting every controller inherits. */
export const GLOBAL_SETTING_ID = 'global';

export const controllerSettings = defineResource({
  name: 'controller-settings',
  label: 'controller setting',
  table: 'controller_settings',
  permission: 'ops',
  // Their OIDC redirect URIs are where every login's code goes, an admin's included: a delegate
  // adding its own would receive the code of an admin who follows its authorization link.
  writePermission: null,
  idFrom: 'controllerId',
  fields: {
    controllerId: field.string('the controller it applies to, or "global"', {
      required: 'create',
      createOnly: true,
      minLength: 1,
      maxLength: MAX_NAME,
      // It becomes the setting's id, and ids are URL-safe (behaviour.md §1), as controller ids are.
      pattern: '^(?!\\.\\.?$)[0-9A-Za-z._~-]+$',
    }),
    oidc: field.json(Type.Object({ redirectUris: Type.Optional(Type.Array(Type.String({ maxLength: 2048 }), { maxItems: 100 })), postLogoutUris: Type.Optional(Type.Array(Type.String({ maxLength: 2048 }), { maxItems: 100 })) }, { additionalProperties: false }), 'OIDC settings', {
      default: {},
      nullable: true,
      filterable: false,
    }),
  },
});

export const controllers = defineResource({
  name: 'controllers',
  label: 'controller',
  table: 'controllers',
  permission: 'ops',
  operations: ['list'],
  fields: {
    name: field.name(),
    address: field.string('advertised address', { readOnly: true, maxLength: MAX_NAME, default: '' }),
    ctrlAddress: field.string('control channel address', { readOnly: true, maxLength: MAX_NAME, default: '' }),
    certPem: field.string('server certificate', { readOnly: true, maxLength: 16384, default: '', filterable: false }),
    fingerprint: field.string('server certificate fingerprint', { readOnly: true, maxLength: MAX_NAME, default: '' }),
    isOnline: field.boolean('running now', { readOnly: true, default: false }),
    lastJoinedAt: field.datetime('last start', { readOnly: true, nullable: true }),
    apiAddresses: field.json(Type.Record(Type.String(), Type.Unknown()), 'API addresses per binding', { readOnly: true, default: {}, filterable: false }),
  },
});
