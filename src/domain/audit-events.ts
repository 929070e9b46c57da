// Reading the audit log: lists with the filter language and single events, shaped as answers (the
// actor as one object). The rows are written by the kernel (kernel/audit.ts); nothing here writes.
import { Type, type Static } from '@sinclair/typebox';
import { notFound } from '../errors.js';
import { AUDIT_ACTOR_FIELDS, AuditChangesSchema, auditEvents } from '../resources/audit-events.js';
import { DateTimeSchema, filterSpec, LinksSchema, type FilterSpec } from '../resources/kit.js';
import { Repository, type Entity, type ListQuery } from '../store/repository.js';
import type { Store } from '../store/store.js';

const Text = Type.Union([Type.String(), Type.Null()]);

export const AuditActorSchema = Type.Object(
  { identityId: Type.String(), name: Text, apiSessionId: Text, method: Text },
  { title: 'auditActor' },
);

export const AuditEventSchema = Type.Object(
  {
    id: Type.String(),
    createdAt: DateTimeSchema,
    actor: Type.Union([AuditActorSchema, Type.Null()], { description: 'who made the change; null for an unknown caller (a failed login)' }),
    action: Type.String({ description: 'create, update, delete, login, logout or login-failed' }),
    entityType: Type.String({ description: 'the collection of the entity, e.g. service-policies' }),
    entityId: Text,
    entityName: Text,
    changes: AuditChangesSchema,
    requestId: Text,
    ipAddress: Text,
    _links: LinksSchema,
  },
  { title: 'auditEventDetail' },
);

export type AuditEvent = Static<typeof AuditEventSchema>;

/** The filter symbols: the stored fields, with the actor's parts named `actor.<part>`. */
function auditFilterSpec(): FilterSpec {
  const base = filterSpec(auditEvents);
  const renamed = new Map<string, string>(Object.entries(AUDIT_ACTOR_FIELDS).map(([part, f]) => [f, `actor.${part}`]));
  const hidden = new Set(['updatedAt', 'tags']);
  const entries = [...base.symbols.values()].filter((e) => !hidden.has(e.name)).map((e) => ({ ...e, name: renamed.get(e.name) ?? e.name }));
  return {
    symbols: new Map(entries.map((e) => [e.name, e])),
    sortable: new Set([...base.sortable].filter((n) => !hidden.has(n)).map((n) => renamed.get(n) ?? n)),
    fields: entries.map((e) => e.name),
  };
}

/** A symbol of the filter → the field of the entity (`actor.name` → `actorName`). */
const FIELD_OF_SYMBOL = new Map<string, string>(Object.entries(AUDIT_ACTOR_FIELDS).map(([part, f]) => [`actor.${part}`, f]));

export class AuditLog {
  readonly filter: FilterSpec = auditFilterSpec();
  private readonly repo: Repository;

  constructor(private readonly store: Store) {
    this.repo = new Repository(auditEvents, store.dialect);
  }

  /** A page of events; newest first unless the query sorts otherwise. */
  async list(query: ListQuery): Promise<{ items: AuditEvent[]; total: number }> {
    const asked = query.sort.map((s) => ({ ...s, field: FIELD_OF_SYMBOL.get(s.field) ?? s.field }));
    const sort = asked.length > 0 ? asked : [{ field: 'createdAt', direction: 'desc' as const }];
    // Ids follow the order of writing: events of one millisecond keep it, in the direction asked.
    if (!sort.some((s) => s.field === 'id')) sort.push({ field: 'id', direction: sort.at(-1)!.direction });
    const { items, total } = await this.repo.list(this.store.db, { ...query, sort });
    return { items: items.map(answerOf), total };
  }

  async get(id: string): Promise<AuditEvent> {
    const entity = await this.repo.get(this.store.db, id);
    if (!entity) throw notFound(auditEvents.label, id);
    return answerOf(entity);
  }
}

function answerOf(e: Entity): AuditEvent {
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  return {
    id: e.id,
    createdAt: e.createdAt,
    actor:
      typeof e.actorIdentityId === 'string'
        ? { identityId: e.actorIdentityId, name: text(e.actorName), apiSessionId: text(e.actorApiSessionId), method: text(e.actorMethod) }
        : null,
    action: String(e.action),
    entityType: String(e.entityType),
    entityId: text(e.entityId),
    entityName: text(e.entityName),
    changes: (e.changes ?? {}) as AuditEvent['changes'],
    requestId: text(e.requestId),
    ipAddress: text(e.ipAddress),
    _links: { self: { href: `./audit-events/${e.id}` } },
  };
}
