import { field, defineResource } from './kit.js';

export const IDENTITY_TYPES = ['User', 'Device', 'Service', 'Router', 'Default'] as const;

export const identityTypes = defineResource({
  name: 'identity-types',
  label: 'identity type',
  table: 'identity_types',
  permission: 'identity',
  operations: ['list', 'get'],
  fields: {
    name: field.name('name of the identity type'),
  },
});
