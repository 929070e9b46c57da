// An audit event: who changed what, when, from where, and how the record looked before and after.
// Written by the kernel in the transaction of the change it records (kernel/audit.ts), read by admins
// and admin_readonly callers only (a null permission group). Kept outside the list of resources the
// generic routes and the change feed go over: nobody creates, updates or deletes one through the API,
// and a write of one is never itself audited. The actor is stored in columns of its own so filters
// can name its parts (`actor.name = "admin"`); answers show it as one object.
import { Type } from '@sinclair/typebox';
import { defineResource, field, MAX_NAME } from './kit.js';

/** Before and after images of the entity, its secrets removed; absent where there is none. */
export const AuditChangesSchema = Type.Object(
  {
    before: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
    after: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
  },
  { title: 'auditChanges' },
);

const text = (description: string) => field.string(description, { readOnly: true, nullable: true, maxLength: MAX_NAME });

export const auditEvents = defineResource({
  name: 'audit-events',
  label: 'audit event',
  table: 'audit_events',
  permission: null,
  operations: ['list', 'get'],
  fields: {
    actorIdentityId: text('the identity that made the change; null for the controller itself or an unknown caller'),
    actorName: text('the name of that identity when the change was made'),
    actorApiSessionId: text('the API session the change was made in'),
    actorMethod: text('how the actor authenticated: password, cert, ext-jwt or oidc'),
    action: field.string('create, update, delete, login, logout or login-failed', { readOnly: true, required: 'always', maxLength: 64 }),
    entityType: field.string('the collection of the entity changed, e.g. service-policies', { readOnly: true, required: 'always', maxLength: 64 }),
    entityId: text('the id of the entity changed'),
    entityName: text('its name, when it has one'),
    changes: field.json(AuditChangesSchema, 'the entity before and after the change, secrets removed', { readOnly: true, default: {}, filterable: false }),
    requestId: text('the id of the request that made the change'),
    ipAddress: text('the client address of that request'),
  },
});

/** The actor parts, as filters and answers name them, and the fields holding them. */
export const AUDIT_ACTOR_FIELDS = {
  identityId: 'actorIdentityId',
  name: 'actorName',
  apiSessionId: 'actorApiSessionId',
  method: 'actorMethod',
} as const;
