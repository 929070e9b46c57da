// Generic behaviour of every resource: list, read, create, full update, patch, delete, each write
// through the kernel (one transaction, its change announced). What a resource needs beyond CRUD
// hooks in through ResourceBehaviour, never through special cases here or in the routes. Its read
// schema is the definition's plus the computed fields its behaviour declares. Where answers are
// checked (tests), one carrying anything else is refused, so a field the serializer would silently
// drop never goes unnoticed; a controller in service does not pay for the check nor fail a read on it.
import type { TObject, TSchema } from '@sinclair/typebox';
import { ApiError, fieldError, notFound } from '../errors.js';
import { newId } from '../ids.js';
import {
  entityLinks,
  entityRef,
  filterSpec,
  fieldsOfKind,
  isNullableColumn,
  kindFields,
  readSchema,
  refAs,
  type EntityOfDef,
  type FieldDef,
  type FilterSpec,
  type ResourceDef,
  type WriteOfDef,
} from '../resources/kit.js';
import type { Entity, ListQuery, Repository } from '../store/repository.js';
import type { EntityOf, ResourceName } from '../resources/index.js';
import { relationFilterFields, type RelationFilterField } from '../resources/relations.js';
import type { Executor, Store, Tx } from '../store/store.js';
import { ownerOf, withOwner, type Actor, type Kernel, type WriteContext as KernelWriteContext } from '../kernel/kernel.js';
import { allows, type Permitted } from '../auth/permissions.js';
import type { Collection } from '../kernel/changes.js';
import type { SqlFlavor } from '../query/flavor.js';
import type { Caller } from './client/caller.js';

export type { Actor } from '../kernel/kernel.js';

/** A kernel write context with the resource services, for the hooks of resources. */
export interface WriteContext extends KernelWriteContext {
  resources: Resources;
}

/**
 * What a resource does beyond CRUD. `D` is its definition: the hooks see its entities (`next` with
 * the virtual fields the write gave); a behaviour for no definition in particular sees any entity.
 * Resources.register takes every behaviour as the latter, the one place the definitions meet their
 * behaviours (app/resources.ts) pairing each with its own definition.
 */
export interface ResourceBehaviour<D extends ResourceDef = ResourceDef> {
  /** Checks and completes an entity about to be stored (create, full update, patch). */
  validate?(ctx: WriteContext, next: WriteOfDef<D>, prev: EntityOfDef<D> | undefined): Promise<void>;
  /** Runs after the row is written, in the same transaction. */
  afterWrite?(ctx: WriteContext, next: WriteOfDef<D>, prev: EntityOfDef<D> | undefined): Promise<void>;
  beforeDelete?(ctx: WriteContext, prev: EntityOfDef<D>): Promise<void>;
  afterDelete?(ctx: WriteContext, prev: EntityOfDef<D>): Promise<void>;
  /** Read fields filled by code, each declaration beside the code that fills it; filled in order. */
  computed?: readonly ComputedFields<D>[];
}

export type Answer = Record<string, unknown>;

/** What a read asked for beyond filter, sort and paging, and who asked. */
export interface ReadOptions {
  /** The request's query (`configTypes`, ...). */
  query?: Readonly<Record<string, unknown>>;
  /** The caller, for read fields that answer what it may do (a service's `permissions`, ...). */
  caller?: Caller;
  /** What the caller may do, for read fields only some callers may see (enrollment tokens); none: it may see none of them. */
  reader?: Permitted & { id?: string };
}

/**
 * Read fields filled by code rather than read from the row: their schemas (what the serializer
 * keeps; `Type.Optional` for one only some answers carry) and the code that fills them.
 */
export interface ComputedFields<D extends ResourceDef = ResourceDef> {
  fields: Readonly<Record<string, TSchema>>;
  /** Sets the fields on a page of answers; answers[i] is the answer of entities[i]. */
  fill(ex: Executor, entities: readonly EntityOfDef<D>[], answers: Answer[], read: ReadOptions): Promise<void>;
}

/** Declares computed read fields together with their filler, which reads entities of `D`. */
export function computed<D extends ResourceDef = ResourceDef>(
  fields: ComputedFields<D>['fields'],
  fill: ComputedFields<D>['fill'],
): ComputedFields<D> {
  return { fields, fill };
}

/** Runs the hooks of several behaviours in order (decorations one after another). */
export function composeBehaviours<D extends ResourceDef>(...parts: ResourceBehaviour<D>[]): ResourceBehaviour<D> {
  return {
    async validate(ctx, next, prev) {
      for (const p of parts) await p.validate?.(ctx, next, prev);
    },
    async afterWrite(ctx, next, prev) {
      for (const p of parts) await p.afterWrite?.(ctx, next, prev);
    },
    async beforeDelete(ctx, prev) {
      for (const p of parts) await p.beforeDelete?.(ctx, prev);
    },
    async afterDelete(ctx, prev) {
      for (const p of parts) await p.afterDelete?.(ctx, prev);
    },
    computed: parts.flatMap((p) => p.computed ?? []),
  };
}

const BASE_FIELDS = new Set(['id', 'createdAt', 'updatedAt', 'tags', 'isSystem']);

/** One resource's reads and writes; `E` is its entity type where the caller names the resource. */
export class ResourceService<E extends Entity = Entity> {
  readonly repo: Repository<E>;
  /** Every field a filter may name; on the Management API a caller's list takes `filterFor`. */
  readonly filter: FilterSpec;
  private readonly relationFields: readonly RelationFilterField[];
  /** The filters of callers by the relation fields they may name (few distinct sets). */
  private readonly filters = new Map<string, FilterSpec>();
  /** The schema of an answer: the definition's read fields and the computed ones. */
  readonly read: TObject;
  private readonly readFields: ReadonlySet<string>;
  private readonly requiredFields: readonly string[];
  private readonly kindFields: ReadonlySet<string>;

  constructor(
    readonly def: ResourceDef,
    readonly store: Store,
    private readonly resources: Resources,
    private readonly behaviour: ResourceBehaviour = {},
  ) {
    this.repo = resources.kernel.repoFor(def) as Repository<E>;
    this.relationFields = relationFilterFields(def);
    this.filter = filterSpec(def, this.relationFields.map((r) => r.field));
    this.read = readSchema(def, computedSchemas(def, behaviour.computed ?? []));
    this.readFields = new Set(Object.keys(this.read.properties));
    this.requiredFields = this.read.required ?? [];
    this.kindFields = kindFields(def);
    for (const name of this.kindFields) {
      if (!def.fields[name]) throw new Error(`resource ${def.name}: kind field ${name} is not a field`);
    }
  }

  /** The filter of a caller's list: fields read through a relation only where it may read what they reach. */
  filterFor(caller: Permitted): FilterSpec {
    const named = this.relationFields.filter((r) => allows(caller, r.permission, 'read'));
    if (named.length === this.relationFields.length) return this.filter;
    const key = named.map((r) => r.field.name).join(',');
    let spec = this.filters.get(key);
    if (!spec) this.filters.set(key, (spec = filterSpec(this.def, named.map((r) => r.field))));
    return spec;
  }

  async list(q: ListQuery, ex: Executor = this.store.db, read: ReadOptions = {}): Promise<{ items: Answer[]; total: number }> {
    const { items, total } = await this.repo.list(ex, q);
    return { items: await this.present(ex, items, read), total };
  }

  /** Entities rather than answers, for views that show them in another shape. */
  async listEntities(q: ListQuery, ex: Executor = this.store.db): Promise<{ items: E[]; total: number }> {
    return this.repo.list(ex, q);
  }

  /** Throws NOT_FOUND unless a record with this id exists (the parent of a related list, say). */
  async ensureExists(id: string, ex: Executor = this.store.db): Promise<void> {
    if (!(await this.repo.exists(ex, id))) throw notFound(this.def.label, id);
  }

  async get(id: string, ex: Executor = this.store.db, read: ReadOptions = {}): Promise<Answer> {
    const entity = await this.repo.get(ex, id);
    if (!entity) throw notFound(this.def.label, id);
    const [answer] = await this.present(ex, [entity], read);
    return answer!;
  }

  /** Entity → answer: public fields (of its kind), links, entity references, computed fields. */
  async present(ex: Executor, entities: readonly Entity[], read: ReadOptions = {}): Promise<Answer[]> {
    const answers = entities.map((e) => {
      const answer: Answer = { _links: entityLinks(this.def, e) };
      for (const [key, value] of Object.entries(e)) {
        const f = BASE_FIELDS.has(key) ? undefined : this.def.fields[key];
        if (!f?.writeOnly && !f?.virtual) answer[key] = value;
      }
      return answer;
    });
    for (const [name, f] of Object.entries(this.def.fields)) {
      if (!f.ref || f.writeOnly) continue;
      const target = this.resources.get(f.ref.collection);
      const ids = entities.map((e) => e[name]).filter((v): v is string => typeof v === 'string');
      const names = await target.repo.names(ex, ids);
      for (const [i, e] of entities.entries()) {
        const id = e[name];
        const refName = typeof id === 'string' ? names.get(id) : undefined;
        answers[i]![refAs(name, f)] =
          typeof id === 'string' && refName !== undefined ? entityRef(f.ref.collection, id, refName) : null;
      }
    }
    if (this.kindFields.size > 0) {
      for (const [i, e] of entities.entries()) {
        const own = fieldsOfKind(this.def, e[this.def.kinds!.field]);
        for (const name of this.kindFields) if (!own.includes(name)) delete answers[i]![name];
      }
    }
    for (const c of this.behaviour.computed ?? []) await c.fill(ex, entities, answers, read);
    if (this.resources.options.checkAnswers) for (const answer of answers) this.checkAnswer(answer);
    return answers;
  }

  /** An answer carries exactly the read schema: nothing it would drop, nothing it requires missing. */
  private checkAnswer(answer: Answer): void {
    for (const key in answer) {
      if (!this.readFields.has(key)) {
        throw new Error(`${this.def.name}: answer field ${key} is in no read schema; declare it as a computed field`);
      }
    }
    for (const key of this.requiredFields) {
      if (!(key in answer)) throw new Error(`${this.def.name}: answer lacks ${key}; its computed field was not filled`);
    }
  }

  async create(body: Record<string, unknown>, actor?: Actor): Promise<E> {
    return this.write(actor, (ctx) => this.createIn(ctx, body));
  }

  /**
   * A create inside a write already under way (an identity created with its enrollments, an
   * enrollment exchanged for an authenticator). `server` sets read-only fields the controller decides
   * (an authenticator's isIssuedByNetwork), which a body never can, and the id when the controller
   * chose it beforehand (an identity named after its own id).
   */
  async createIn(ctx: WriteContext, body: Record<string, unknown>, server: Record<string, unknown> = {}): Promise<E> {
    const given = this.def.idFrom ? body[this.def.idFrom] : server.id;
    const entity: Record<string, unknown> = {
      id: typeof given === 'string' ? given : newId(),
      createdAt: ctx.now,
      updatedAt: ctx.now,
      tags: body.tags ?? {},
    };
    if (this.def.system) entity.isSystem = false;
    for (const [name, f] of Object.entries(this.def.fields)) {
      const value = f.readOnly ? server[name] : body[name];
      entity[name] = value !== undefined ? value : defaultOf(f.default);
    }
    if (typeof given === 'string' && (await this.repo.exists(ctx.tx, given))) {
      throw fieldError(this.def.idFrom ?? 'id', `another ${this.def.label} already has this id`, given);
    }
    return this.store_(ctx, normalise(this.def, entity as Entity), undefined);
  }

  /** Full update: required fields present (the schema saw to it), absent optional ones reset. */
  async update(id: string, body: Record<string, unknown>, actor?: Actor): Promise<E> {
    return this.write(actor, (ctx) => this.updateIn(ctx, id, body));
  }

  /** A full update inside a write already under way (one that checks something first in it). */
  async updateIn(ctx: WriteContext, id: string, body: Record<string, unknown>): Promise<E> {
    const prev = await this.existing(ctx.tx, id, 'update', body);
    const next: Record<string, unknown> = { ...prev, updatedAt: ctx.now, tags: body.tags ?? {} };
    for (const [name, f] of Object.entries(this.def.fields)) {
      if (f.readOnly || f.createOnly) continue;
      const given = body[name];
      if (given !== undefined) next[name] = given;
      else if (f.default !== undefined) next[name] = defaultOf(f.default);
      else if (isNullableColumn(f)) next[name] = null;
    }
    return this.store_(ctx, normalise(this.def, next as Entity), prev);
  }

  /**
   * Patch: only the supplied fields change. Null clears a field that reads null; on any other field
   * the schema lets take null (a partial object such as an auth policy's `secondary`, a field of one
   * kind of record) it changes nothing, as the established controller drops the nulls of a patch.
   * Resetting such a field to its default instead would silently loosen what the record enforces.
   */
  async patch(id: string, body: Record<string, unknown>, actor?: Actor): Promise<E> {
    return this.write(actor, (ctx) => this.patchIn(ctx, id, body));
  }

  /** A patch inside a write already under way (one that checks something first in it). */
  async patchIn(ctx: WriteContext, id: string, body: Record<string, unknown>): Promise<E> {
    const prev = await this.existing(ctx.tx, id, 'update', body);
    const next: Record<string, unknown> = { ...prev, updatedAt: ctx.now };
    if (body.tags !== undefined) next.tags = body.tags ?? {};
    for (const [name, f] of Object.entries(this.def.fields)) {
      const given = body[name];
      if (f.readOnly || f.createOnly || given === undefined) continue;
      if (given === null) {
        if (this.readsNull(name, f)) next[name] = null;
      } else next[name] = f.patchSchema ? merge(prev[name], given) : given;
    }
    return this.store_(ctx, normalise(this.def, next as Entity), prev);
  }

  /**
   * Whether a field may read null, so that a patch's null clears it. The fields of one kind of record
   * are nullable only because the other kinds leave them null; on their own kind they never are.
   */
  private readsNull(name: string, f: FieldDef): boolean {
    return f.nullable === true && !this.kindFields.has(name);
  }

  async delete(id: string, actor?: Actor): Promise<E> {
    return this.write(actor, (ctx) => this.deleteIn(ctx, id));
  }

  /** A delete inside a write already under way (another resource's hook deleting this one's record). */
  async deleteIn(ctx: WriteContext, id: string): Promise<E> {
    const prev = await this.existing(ctx.tx, id, 'delete');
    await this.behaviour.beforeDelete?.(ctx, prev);
    let deleted: boolean;
    try {
      deleted = await this.repo.delete(ctx.tx, id);
    } catch (err) {
      if (this.store.dialect.isForeignKeyViolation(err)) {
        throw new ApiError('CAN_NOT_DELETE_REFERENCED_ENTITY', `the ${this.def.label} ${id} is referenced by other records`);
      }
      throw err;
    }
    await this.behaviour.afterDelete?.(ctx, prev);
    // A record of another table read through this collection's view (an edge router deleted at
    // /routers) was deleted by its own collection's hook, which the audit log records once.
    ctx.changed(this.change('delete', prev), { before: prev, audited: deleted });
    return prev;
  }

  /** Runs fn in a transaction with a write context. */
  write<T>(actor: Actor | undefined, fn: (ctx: WriteContext) => Promise<T>): Promise<T> {
    return this.resources.write(fn, actor);
  }

  private async existing(tx: Tx, id: string, action: 'update' | 'delete', body?: Record<string, unknown>): Promise<E> {
    const prev = await this.repo.get(tx, id);
    if (!prev) throw notFound(this.def.label, id);
    if (body) this.assertCreateOnlyUnchanged(prev, body);
    if (prev.isSystem === true) {
      throw new ApiError(
        action === 'update' ? 'ENTITY_CAN_NOT_BE_UPDATED' : 'ENTITY_CAN_NOT_BE_DELETED',
        `the ${this.def.label} ${id} is a system record and cannot be ${action}d`,
      );
    }
    return prev;
  }

  /**
   * Create-only fields (a service's encryptionRequired, a config's configTypeId, an authenticator's
   * method, ...) are fixed once the record exists. A full update or patch that repeats the stored
   * value is fine (clients send back what they read); one that asks for another value is refused
   * rather than silently ignored. Fields never stored as such (virtual, write-only) have no stored
   * value to compare with and are left to the update's own rules. The field the id is taken from
   * (idFrom) is the id: the path names the record, and a copy in the body is ignored as `id` is.
   */
  private assertCreateOnlyUnchanged(prev: Entity, body: Record<string, unknown>): void {
    for (const [name, f] of Object.entries(this.def.fields)) {
      if (!f.createOnly || f.virtual || f.writeOnly || name === this.def.idFrom || body[name] === undefined) continue;
      if (JSON.stringify(body[name] ?? null) !== JSON.stringify(prev[name] ?? null)) {
        throw fieldError(name, `is fixed when the ${this.def.label} is created`, body[name]);
      }
    }
  }

  private async store_(ctx: WriteContext, next: Entity, prev: Entity | undefined): Promise<E> {
    await this.behaviour.validate?.(ctx, next, prev);
    await this.checkReferences(ctx.tx, next, prev);
    try {
      if (prev) await this.repo.update(ctx.tx, next.id, changed(next, prev));
      else await this.repo.insert(ctx.tx, next);
    } catch (err) {
      const column = this.store.dialect.uniqueViolation(err, this.def.table);
      if (column === undefined) throw err;
      const name = this.repo.columns.find((c) => c.column === column)?.field ?? column;
      throw fieldError(name, `another ${this.def.label} already has this ${name}`, next[name]);
    }
    await this.behaviour.afterWrite?.(ctx, next, prev);
    ctx.changed(this.change(prev ? 'update' : 'create', next), prev ? { before: prev, after: next } : { after: next });
    // the stored row of this definition, whose fields E describes
    return next as E;
  }

  /** The change of a write of one of this resource's records. */
  private change(kind: 'create' | 'update' | 'delete', entity: Entity) {
    // Every collection served is a resource of the controller (or, in tests, a fixture's).
    return withOwner({ collection: this.def.name as Collection, kind, id: entity.id }, ownerOf(this.def, entity));
  }

  private async checkReferences(tx: Tx, next: Entity, prev: Entity | undefined): Promise<void> {
    for (const [name, f] of Object.entries(this.def.fields)) {
      const id = next[name];
      if (!f.ref || typeof id !== 'string' || prev?.[name] === id) continue;
      if (!(await this.resources.get(f.ref.collection).repo.exists(tx, id))) {
        throw new ApiError('REFERENCED_ENTITY_NOT_FOUND', `${name}: no ${f.ref.collection} with id ${id}`, {
          field: name,
          reason: `no ${f.ref.collection} with this id`,
          value: id,
        });
      }
    }
  }
}

/** Deep merge of a partial object into a stored one (objects merge, everything else replaces). */
function merge(base: unknown, patch: unknown): unknown {
  if (!isPlainObject(base) || !isPlainObject(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(patch)) if (v !== undefined) out[k] = merge(base[k], v);
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function defaultOf(value: unknown): unknown {
  if (value === undefined) return null;
  return typeof value === 'object' && value !== null ? structuredClone(value) : value;
}

/** Null stores a field's default; sets keep the first occurrence of each value. */
function normalise(def: ResourceDef, entity: Entity): Entity {
  for (const [name, f] of Object.entries(def.fields)) {
    if (entity[name] === null && f.default !== undefined) entity[name] = defaultOf(f.default);
    if (f.kind === 'set' && Array.isArray(entity[name])) entity[name] = [...new Set(entity[name] as unknown[])];
  }
  return entity;
}

/**
 * The schemas of the computed fields, each declared once. One may replace how a stored field reads
 * (a terminator's `router` id read as a reference).
 */
function computedSchemas(def: ResourceDef, computed: readonly ComputedFields[]): Record<string, TSchema> {
  const out: Record<string, TSchema> = {};
  for (const c of computed) {
    for (const [name, schema] of Object.entries(c.fields)) {
      if (name in out) throw new Error(`resource ${def.name}: computed field ${name} declared twice`);
      out[name] = schema;
    }
  }
  return out;
}

function changed(next: Entity, prev: Entity): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(next)) {
    if (JSON.stringify(v) !== JSON.stringify(prev[k])) out[k] = v;
  }
  return out;
}

export interface ResourcesOptions {
  /**
   * Refuse an answer whose fields are not exactly its read schema's (one no schema declares, or a
   * required one missing). Tests turn it on so a drift fails loudly there; off, the serializer keeps
   * the declared fields and a read never fails for it.
   */
  checkAnswers?: boolean;
}

/** Every resource service of the controller, by collection. */
export class Resources {
  private readonly services = new Map<string, ResourceService>();

  constructor(
    readonly kernel: Kernel,
    readonly options: ResourcesOptions = {},
  ) {}

  get store(): Store {
    return this.kernel.store;
  }

  /** The SQL flavour list filters compile to (the store's dialect). */
  get flavor(): SqlFlavor {
    return this.store.dialect.flavor;
  }

  /** A kernel write whose context also carries the resource services. */
  write<T>(fn: (ctx: WriteContext) => Promise<T>, actor?: Actor): Promise<T> {
    return this.kernel.write((ctx) => fn(Object.assign(ctx, { resources: this })), actor);
  }

  register(def: ResourceDef, behaviour?: ResourceBehaviour): ResourceService {
    if (this.services.has(def.name)) throw new Error(`resource ${def.name} registered twice`);
    const service = new ResourceService(def, this.store, this, behaviour);
    this.services.set(def.name, service);
    return service;
  }

  get<N extends ResourceName>(name: N): ResourceService<EntityOf<N>>;
  get(name: string): ResourceService;
  get(name: string): ResourceService {
    const s = this.services.get(name);
    if (!s) throw new Error(`no resource ${name}`);
    return s;
  }

  /** Whether a collection is a resource of the controller. */
  has(name: string): boolean {
    return this.services.has(name);
  }

  all(): ResourceService[] {
    return [...this.services.values()];
  }
}
