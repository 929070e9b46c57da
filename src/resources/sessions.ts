import { field, defineResource } from './kit.js';

export const SESSION_TYPES = ['Dial', 'Bind'] as const;
export type SessionType = (typeof SESSION_TYPES)[number];

/**
 * A session: an identity's Dial or Bind of one service, inside one API session. Clients create them
 * (POST /sessions on the Client API); nothing of it is written through the generic routes. Its
 * token is a JWT signed by the controller, never stored.
 */
export const sessions = defineResource({
  name: 'sessions',
  label: 'session',
  table: 'sessions',
  permission: 'ops',
  operations: ['list', 'get', 'delete'],
  links: ['route-path'],
  owner: 'identityId',
  fields: {
    apiSessionId: field.ref('api-sessions', 'the API session it belongs to; it ends with it', {
      readOnly: true,
      required: 'always',
      ref: { collection: 'api-sessions', onDelete: 'cascade' },
    }),
    identityId: field.ref('identities', 'the identity of the API session', {
      readOnly: true,
      required: 'always',
      ref: { collection: 'identities', onDelete: 'cascade' },
    }),
    serviceId: field.ref('services', 'the service dialled or bound', {
      readOnly: true,
      required: 'always',
      ref: { collection: 'services', onDelete: 'cascade' },
    }),
    type: field.enum(SESSION_TYPES, 'Dial or Bind', { readOnly: true, required: 'always' }),
  },
});
