// The resource kit: one declarative definition per entity, from which the table shape, the TypeBox
// schemas (create, full update, patch, read), the filter symbols, the links and the permission group
// all derive; its relations derive in relations.ts. Nothing here knows HTTP or the store driver.
import { Type, type Static, type TSchema, type TObject } from '@sinclair/typebox';
import type { FieldType, FilterField, FilterSymbols } from '../query/ast.js';

export type FieldKind =
  | 'string'
  | 'integer'
  | 'number'
  | 'boolean'
  | 'datetime'
  | 'enum'
  | 'json'
  | 'set'
  | 'ref';

/** Where a field must be present on writes: on create, on full update, or both. */
export type Required = 'always' | 'create' | 'update' | 'never';

export interface FieldDef {
  kind: FieldKind;
  description: string;
  /** Column name; snake_case of the field name by default. */
  column?: string;
  required?: Required;
  /** Writes accept null; the column is nullable. */
  nullable?: boolean;
  /** Set by the server only; absent from every write schema. */
  readOnly?: boolean;
  /** Accepted on writes, never returned (passwords, secrets). */
  writeOnly?: boolean;
  /** Accepted on create only; fixed afterwards (an update or patch asking for another value is refused). */
  createOnly?: boolean;
  /** Accepted on writes and handed to the domain, but never stored as such (a password to hash). */
  virtual?: boolean;
  /** For json objects: the patch schema (partial); a patch merges into the stored value, and its null changes nothing unless the field is nullable. */
  patchSchema?: TSchema;
  /** May be named in filters (default: every public stored field that is not json). */
  filterable?: boolean;
  /** May be sorted on (default: every filterable scalar). */
  sortable?: boolean;
  unique?: boolean;
  /** Stored when a write leaves the field out (create, full update). */
  default?: unknown;
  /** The JSON schema of a value (json kind) or of one element (set kind); string limits otherwise. */
  schema?: TSchema;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  pattern?: string;
  values?: readonly string[];
  maxItems?: number;
  /** For sets: a value named twice is refused rather than kept once (where a repeat means a mistake). */
  uniqueItems?: boolean;
  /** For ref fields: the referenced collection and the name of the read reference object. */
  ref?: { collection: string; as?: string; onDelete?: 'cascade' | 'restrict' | 'set null' };
}

export type Operation = 'list' | 'get' | 'create' | 'update' | 'patch' | 'delete';
export const ALL_OPERATIONS: readonly Operation[] = ['list', 'get', 'create', 'update', 'patch', 'delete'];

export interface ResourceDef<Name extends string = string> {
  /** The collection: URL segment and the `entity` of references, e.g. `service-policies`. */
  name: Name;
  /** What one of it is called in messages, e.g. `service policy`. */
  label: string;
  table: string;
  /**
   * A view the reads come from, when the collection lists records of other tables too (every router,
   * edge routers included). Its columns are the definition's; writes go to `table`, and a record read
   * from another table is written through the resource that owns it.
   */
  readFrom?: string;
  /** Permission group of the interface document, or null for records only admins reach. */
  permission: string | null;
  /** The group whose holders may write, where it is not `permission`'s: null, admins only. */
  writePermission?: string | null;
  fields: Readonly<Record<string, FieldDef>>;
  /** Records the controller creates itself carry isSystem and refuse update and delete. */
  system?: boolean;
  /** Related sub-collections linked from each entity (`./<name>/<id>/<sub>`). */
  links?: readonly string[];
  /**
   * Links to the entity a reference field names, by link name (`./<collection>/<id>`): an identity
   * links `auth-policies` to its own policy, as the established controller does.
   */
  refLinks?: Readonly<Record<string, string>>;
  /** The field used as `name` in entity references. */
  nameField?: string;
  operations?: readonly Operation[];
  /** A create-body field whose value becomes the entity id (revocations name their own id). */
  idFrom?: string;
  /** operationIds of endpoints.md that do not follow `<verb><Label>` / `list<Name>`. */
  operationIds?: Partial<Record<Operation, string>>;
  /** The field naming the identity a record belongs to: the changes of a record carry it as ownerId. */
  owner?: string;
  /**
   * A policy kind's role lists: each list field and the collection whose entities it selects
   * (`#attribute`, `@id`, `#all`). Each list is materialised in a link table of its own, named and
   * shaped after the two (see relations.ts); the entities selected carry `roleAttributes`.
   */
  roleLists?: Readonly<Record<string, string>>;
  /**
   * Set fields kept in a link table of their own rather than in a column (so declared `virtual`): each
   * field and the collection whose ids it holds. The table and its columns are named like the policy
   * link tables (see relations.ts); related lists between the two collections go through it, both ways.
   */
  linkLists?: Readonly<Record<string, string>>;
  /** Related lists served at `/<name>/{id}/<collection>`, each the listed collection's own list narrowed. */
  related?: readonly RelatedListDef[];
  /**
   * Fields holding the id of a record of another collection (each field and that collection) whose
   * name a filter may name as `<field>.name`: a terminator's `service.name`.
   */
  filterNames?: Readonly<Record<string, string>>;
  /** Records of several kinds in one table: the field naming the kind, and the fields each kind owns. */
  kinds?: KindsDef;
}

/**
 * A related list: the entities of `collection` related to one entity, by one of
 * - a reference field of the listed entities naming it (`by`);
 * - a link list of either side (`linkLists`), when one relates the two collections;
 * - the policy link tables: the role list of a policy on either side, or `through` a policy kind.
 */
export interface RelatedListDef {
  /** The listed collection; also the last path segment. */
  collection: string;
  operationId: string;
  /** The reference field of the listed entities that names the entity the list is of. */
  by?: string;
  /**
   * Between two entity collections: the policy kind whose role lists select both. Between a policy
   * and an entity collection the policy's own role list relates them, and `through` is absent.
   */
  through?: string;
  /** Takes `policyType=dial|bind`: only policies of that `type` relate them. */
  policyType?: boolean;
}

/**
 * A definition keeping its name and its fields' declarations as literal types, so the names of all of
 * them form a union and the type of an entity is inferred from its fields (`EntityOfDef`).
 */
export function defineResource<const D extends ResourceDef>(def: D): D {
  return def;
}

// ---- entity types, inferred from the fields ---------------------------------------------------

/** What a field constructor returns: its preset options overridden by the caller's, kept literal. */
type Declared<Preset, O> = Omit<Preset, keyof NoInfer<O>> & NoInfer<O>;

/** The stored value of a field of this declaration, null aside. */
type ValueOf<F> = F extends { kind: 'string' | 'datetime' | 'ref' }
  ? string
  : F extends { kind: 'integer' | 'number' }
    ? number
    : F extends { kind: 'boolean' }
      ? boolean
      : F extends { kind: 'enum'; values: readonly (infer V)[] }
        ? V
        : F extends { kind: 'set' }
          ? string[]
          : F extends { kind: 'json'; schema: infer S extends TSchema }
            ? Static<S>
            : unknown;

/** The type-level twin of isNullableColumn: a default keeps the column filled, else `required`. */
type NullUnlessPresent<F> = F extends { nullable: true }
  ? null
  : F extends { required: 'always' }
    ? never
    : F extends { required: 'create'; createOnly: true }
      ? never
      : null;
type NullOf<F> = F extends { default: infer D } ? ([D] extends [undefined | null] ? NullUnlessPresent<F> : never) : NullUnlessPresent<F>;

/** The fields every entity has, whatever its definition (a type, not an interface, so it is a record too). */
export type BaseEntity = {
  id: string;
  createdAt: string;
  updatedAt: string;
  tags: Record<string, string | boolean | null>;
};

type StoredFields<Fields> = {
  -readonly [K in keyof Fields as Fields[K] extends { virtual: true } ? never : K]: ValueOf<Fields[K]> | NullOf<Fields[K]>;
};

/** An entity as the store holds it, inferred from its definition (virtual fields are never stored). */
export type EntityOfDef<D extends ResourceDef> = BaseEntity &
  (D extends { system: true } ? { isSystem: boolean } : unknown) &
  StoredFields<D['fields']>;

/** The virtual fields of a definition, each present only when the write gave it. */
type VirtualFields<Fields> = {
  -readonly [K in keyof Fields as Fields[K] extends { virtual: true } ? K : never]?: ValueOf<Fields[K]> | NullOf<Fields[K]>;
};

/**
 * An entity as a write hands it to the domain: the stored fields and, where the write gave them,
 * the virtual ones (a password to hash, the ids of a service's configs).
 */
export type WriteOfDef<D extends ResourceDef> = EntityOfDef<D> & VirtualFields<D['fields']>;

export interface KindsDef {
  /** The field whose value is the kind. */
  field: string;
  /** Per kind, the fields it owns: null on records of other kinds, and absent from their answers. */
  fields: Readonly<Record<string, readonly string[]>>;
}

/** The fields of `def` that only some kinds own. */
export function kindFields(def: ResourceDef): ReadonlySet<string> {
  return new Set(Object.values(def.kinds?.fields ?? {}).flat());
}

/** The fields a record of `kind` owns (none for a kind the definition does not name). */
export function fieldsOfKind(def: ResourceDef, kind: unknown): readonly string[] {
  const fields = def.kinds?.fields;
  return fields && typeof kind === 'string' && Object.hasOwn(fields, kind) ? fields[kind]! : [];
}

export const MAX_STRING = 1024;
export const MAX_NAME = 255;
export const MAX_LIST = 1000;
/** Levels an open object (appData, config data, a config type's schema, ...) may nest. */
export const MAX_NESTING = 32;
/** Characters of an object key, in any open object (tags, appData, ...). */
export const MAX_KEY = 256;

export function snake(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

export function columnOf(name: string, f: FieldDef): string {
  return f.column ?? snake(name);
}

/** Field constructors, so definitions read as declarations; each keeps what decides its type literal. */
export const field = {
  string: <const O extends Partial<FieldDef> = object>(description: string, o: O = {} as O) =>
    ({ kind: 'string', description, ...o }) as Declared<{ kind: 'string'; description: string }, O>,
  name: <const O extends Partial<FieldDef> = object>(description = 'unique name', o: O = {} as O) =>
    ({
      kind: 'string',
      description,
      required: 'always',
      unique: true,
      minLength: 1,
      maxLength: MAX_NAME,
      ...o,
    }) as Declared<{ kind: 'string'; description: string; required: 'always'; unique: true; minLength: number; maxLength: number }, O>,
  integer: <const O extends Partial<FieldDef> = object>(description: string, o: O = {} as O) =>
    ({ kind: 'integer', description, ...o }) as Declared<{ kind: 'integer'; description: string }, O>,
  number: <const O extends Partial<FieldDef> = object>(description: string, o: O = {} as O) =>
    ({ kind: 'number', description, ...o }) as Declared<{ kind: 'number'; description: string }, O>,
  boolean: <const O extends Partial<FieldDef> = object>(description: string, o: O = {} as O) =>
    ({ kind: 'boolean', description, ...o }) as Declared<{ kind: 'boolean'; description: string }, O>,
  datetime: <const O extends Partial<FieldDef> = object>(description: string, o: O = {} as O) =>
    ({ kind: 'datetime', description, ...o }) as Declared<{ kind: 'datetime'; description: string }, O>,
  enum: <const V extends readonly string[], const O extends Partial<FieldDef> = object>(values: V, description: string, o: O = {} as O) =>
    ({
      kind: 'enum',
      values,
      description,
      ...o,
    }) as Declared<{ kind: 'enum'; values: V; description: string }, O>,
  json: <S extends TSchema, const O extends Partial<FieldDef> = object>(schema: S, description: string, o: O = {} as O) =>
    ({
      kind: 'json',
      schema,
      description,
      ...o,
    }) as Declared<{ kind: 'json'; schema: S; description: string }, O>,
  /** A set of strings (role attributes, role lists): stored as a JSON array, filtered with anyOf/allOf. */
  set: <const O extends Partial<FieldDef> = object>(description: string, o: O = {} as O) =>
    ({
      // sets are never null in storage
      kind: 'set',
      description,
      default: [],
      maxItems: MAX_LIST,
      ...o,
    }) as Declared<{ kind: 'set'; description: string; default: string[]; maxItems: number }, O>,
  /** Attributes policies select an entity by; never starting with `#` or `@` (those are role syntax). */
  roleAttributes: <const O extends Partial<FieldDef> = object>(o: O = {} as O) =>
    ({
      kind: 'set',
      description: 'attributes policies select this entity by',
      default: [],
      nullable: true,
      maxItems: MAX_LIST,
      schema: Type.String({ minLength: 1, maxLength: MAX_NAME, pattern: '^[^#@]' }),
      ...o,
    }) as Declared<{ kind: 'set'; description: string; default: string[]; nullable: true; maxItems: number; schema: TSchema }, O>,
  /** A policy role list: `#attribute`, `@id` or `#all` entries. */
  roles: <const O extends Partial<FieldDef> = object>(description: string, o: O = {} as O) =>
    ({
      kind: 'set',
      description,
      default: [],
      nullable: true,
      maxItems: MAX_LIST,
      schema: Type.String({ minLength: 2, maxLength: MAX_NAME, pattern: '^[#@]' }),
      ...o,
    }) as Declared<{ kind: 'set'; description: string; default: string[]; nullable: true; maxItems: number; schema: TSchema }, O>,
  ref: <const O extends Partial<FieldDef> = object>(collection: string, description: string, o: O = {} as O) =>
    ({
      kind: 'ref',
      description,
      maxLength: MAX_NAME,
      ...o,
      ref: { collection, ...o.ref },
    }) as Declared<{ kind: 'ref'; description: string; maxLength: number }, Omit<NoInfer<O>, 'ref'>> & { ref: NonNullable<FieldDef['ref']> },
};

// ---- schemas -------------------------------------------------------------------------------

export const TagsSchema = Type.Record(
  Type.String({ minLength: 1, maxLength: MAX_KEY }),
  Type.Union([Type.String({ maxLength: 4096 }), Type.Boolean(), Type.Null()]),
  { maxProperties: 100, description: 'user-defined fields; values are null, string or boolean', title: 'tags' },
);

export const LinkSchema = Type.Object({ href: Type.String() }, { title: 'link' });
export const LinksSchema = Type.Record(Type.String(), LinkSchema, { title: 'links' });
export const EntityRefSchema = Type.Object(
  {
    _links: LinksSchema,
    entity: Type.String(),
    id: Type.String(),
    name: Type.String(),
  },
  { title: 'entityRef' },
);
export const DateTimeSchema = Type.String({ format: 'date-time' });

function valueSchema(f: FieldDef): TSchema {
  const opts = { description: f.description };
  switch (f.kind) {
    case 'string':
      return Type.String({
        ...opts,
        maxLength: f.maxLength ?? MAX_STRING,
        ...(f.minLength !== undefined && { minLength: f.minLength }),
        ...(f.pattern !== undefined && { pattern: f.pattern }),
      });
    case 'ref':
      return Type.String({ ...opts, minLength: 1, maxLength: f.maxLength ?? MAX_NAME });
    case 'integer':
      return Type.Integer({
        ...opts,
        ...(f.minimum !== undefined && { minimum: f.minimum }),
        ...(f.maximum !== undefined && { maximum: f.maximum }),
      });
    case 'number':
      return Type.Number({
        ...opts,
        ...(f.minimum !== undefined && { minimum: f.minimum }),
        ...(f.maximum !== undefined && { maximum: f.maximum }),
      });
    case 'boolean':
      return Type.Boolean(opts);
    case 'datetime':
      return Type.String({ ...opts, format: 'date-time', maxLength: 64 });
    case 'enum':
      return Type.Union(
        (f.values ?? []).map((v) => Type.Literal(v)),
        opts,
      );
    case 'json':
      return { ...(f.schema ?? Type.Record(Type.String(), Type.Unknown())), description: f.description };
    case 'set':
      return Type.Array(f.schema ?? Type.String({ minLength: 1, maxLength: MAX_NAME }), {
        ...opts,
        maxItems: f.maxItems ?? MAX_LIST,
        ...(f.uniqueItems === true && { uniqueItems: true }),
      });
  }
}

function maybeNull(schema: TSchema, nullable: boolean | undefined): TSchema {
  return nullable ? Type.Union([schema, Type.Null()], { description: schema.description }) : schema;
}

type Mode = 'create' | 'update' | 'patch';

function writeSchema(def: ResourceDef, mode: Mode): TObject {
  const props: Record<string, TSchema> = {};
  const required: string[] = [];
  for (const [name, f] of Object.entries(def.fields)) {
    if (f.readOnly) continue;
    if (f.createOnly && mode !== 'create') continue;
    const schema = mode === 'patch' && f.patchSchema ? f.patchSchema : valueSchema(f);
    props[name] = maybeNull(schema, f.nullable || (mode === 'patch' && f.patchSchema !== undefined));
    const req = f.required ?? 'never';
    if (mode !== 'patch' && (req === 'always' || req === mode)) required.push(name);
  }
  props.tags = Type.Union([TagsSchema, Type.Null()]);
  return Type.Object(
    Object.fromEntries(
      Object.entries(props).map(([k, s]) => [k, required.includes(k) ? s : Type.Optional(s)]),
    ),
    { additionalProperties: true, title: schemaNames(def)[mode] },
  );
}

export function createSchema(def: ResourceDef): TObject {
  return writeSchema(def, 'create');
}
export function updateSchema(def: ResourceDef): TObject {
  return writeSchema(def, 'update');
}
export function patchSchema(def: ResourceDef): TObject {
  return writeSchema(def, 'patch');
}

// ---- schema names ----------------------------------------------------------------------------

function words(text: string): string[] {
  return text.split(/[-\s]+/).filter((w) => w !== '');
}

function capitalised(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1).toLowerCase();
}

/** `edge-routers` → `EdgeRouters`, `API session` → `ApiSession`. */
export function pascalCase(text: string): string {
  return words(text).map(capitalised).join('');
}

/** `API session` → `apiSession`. */
export function camelCase(text: string): string {
  const pascal = pascalCase(text);
  return pascal.charAt(0).toLowerCase() + pascal.slice(1);
}

export interface SchemaNames {
  create: string;
  update: string;
  patch: string;
  detail: string;
  list: string;
  listEnvelope: string;
  detailEnvelope: string;
}

/**
 * The names of a resource's schemas in the OpenAPI documents (each a named component there, so a
 * generated client has one type per shape): those of the established documents, e.g. identityCreate,
 * identityDetail, listIdentitiesEnvelope, detailIdentityEnvelope. Carried as the schemas' `title`.
 */
export function schemaNames(def: ResourceDef): SchemaNames {
  const one = camelCase(def.label);
  return {
    create: `${one}Create`,
    update: `${one}Update`,
    patch: `${one}Patch`,
    detail: `${one}Detail`,
    list: `${one}List`,
    listEnvelope: `list${pascalCase(def.name)}Envelope`,
    detailEnvelope: `detail${pascalCase(def.label)}Envelope`,
  };
}

/**
 * A column holds null unless the field is always required or has a default. A null written to a
 * field with a default stores the default (an empty set, the default policy, ...).
 */
export function isNullableColumn(f: FieldDef): boolean {
  if (f.default !== undefined && f.default !== null) return false;
  const req = f.required ?? 'never';
  const alwaysPresent = req === 'always' || (req === 'create' && f.createOnly === true);
  return f.nullable === true || !alwaysPresent;
}

export function refAs(name: string, f: FieldDef): string {
  return f.ref?.as ?? name.replace(/Id$/, '');
}

/**
 * The read shape: base fields, every public field (optional when only some kinds own it),
 * references for ref fields, then the computed fields (`extra`) code fills in.
 */
export function readSchema(def: ResourceDef, extra: Record<string, TSchema> = {}): TObject {
  const props: Record<string, TSchema> = {
    _links: LinksSchema,
    id: Type.String(),
    createdAt: DateTimeSchema,
    updatedAt: DateTimeSchema,
    tags: TagsSchema,
  };
  if (def.system) props.isSystem = Type.Boolean();
  const ofSomeKinds = kindFields(def);
  for (const [name, f] of Object.entries(def.fields)) {
    if (f.writeOnly || f.virtual) continue;
    const schema = maybeNull(valueSchema(f), isNullableColumn(f));
    props[name] = ofSomeKinds.has(name) ? Type.Optional(schema) : schema;
    if (f.kind === 'ref') props[refAs(name, f)] = Type.Union([EntityRefSchema, Type.Null()]);
  }
  Object.assign(props, extra);
  return Type.Object(props, { title: schemaNames(def).detail });
}

// ---- filters ---------------------------------------------------------------------------------

const FILTER_TYPE: Partial<Record<FieldKind, FieldType>> = {
  string: 'string',
  enum: 'string',
  ref: 'string',
  integer: 'integer',
  number: 'number',
  boolean: 'boolean',
  datetime: 'datetime',
  set: 'set',
};

export interface FilterSpec {
  symbols: FilterSymbols;
  sortable: ReadonlySet<string>;
  /** What `meta.filterableFields` lists. */
  fields: string[];
}

/** `extra`: fields read elsewhere than the record's own columns (relations.ts); never sorted on. */
export function filterSpec(def: ResourceDef, extra: readonly FilterField[] = []): FilterSpec {
  const entries: FilterField[] = [
    { name: 'id', type: 'string', column: 'id' },
    { name: 'createdAt', type: 'datetime', column: 'created_at' },
    { name: 'updatedAt', type: 'datetime', column: 'updated_at' },
    { name: 'tags', type: 'tags', column: 'tags' },
  ];
  if (def.system) entries.push({ name: 'isSystem', type: 'boolean', column: 'is_system' });
  for (const [name, f] of Object.entries(def.fields)) {
    const type = FILTER_TYPE[f.kind];
    if (f.writeOnly || f.virtual || !type || f.filterable === false) continue;
    entries.push({ name, type, column: columnOf(name, f) });
  }
  const sortable = new Set(
    entries
      .filter((e) => e.type !== 'set' && e.type !== 'tags')
      .filter((e) => def.fields[e.name]?.sortable !== false)
      .map((e) => e.name),
  );
  entries.push(...extra);
  return {
    symbols: new Map(entries.map((e) => [e.name, e])),
    sortable,
    fields: entries.map((e) => e.name),
  };
}

// ---- links -----------------------------------------------------------------------------------

export type Links = Record<string, { href: string }>;

export function entityLinks(def: ResourceDef, entity: { readonly id: string; readonly [field: string]: unknown }): Links {
  const self = `./${def.name}/${entity.id}`;
  const links: Links = { self: { href: self } };
  for (const sub of def.links ?? []) links[sub] = { href: `${self}/${sub}` };
  for (const [link, name] of Object.entries(def.refLinks ?? {})) {
    const ref = def.fields[name]?.ref;
    const id = entity[name];
    if (ref && typeof id === 'string') links[link] = { href: `./${ref.collection}/${id}` };
  }
  return links;
}

/** A reference to an entity in an answer: its collection, id, name and link. */
export type EntityRef = Static<typeof EntityRefSchema>;

export function entityRef(collection: string, id: string, name: string): EntityRef {
  return { _links: { self: { href: `./${collection}/${id}` } }, entity: collection, id, name };
}

// ---- table shape (checked against the migrations by a test) ---------------------------------

export type ColumnType = 'text' | 'integer' | 'real' | 'boolean' | 'json';

export interface ColumnSpec {
  name: string;
  type: ColumnType;
  nullable: boolean;
}

export interface TableSpec {
  table: string;
  columns: ColumnSpec[];
  unique: string[];
  references: { column: string; table: string }[];
}

export const COLUMN_TYPE: Record<FieldKind, ColumnType> = {
  string: 'text',
  enum: 'text',
  ref: 'text',
  datetime: 'text',
  integer: 'integer',
  number: 'real',
  boolean: 'boolean',
  json: 'json',
  set: 'json',
};

export function tableSpec(def: ResourceDef, tableOf: (collection: string) => string): TableSpec {
  const columns: ColumnSpec[] = [
    { name: 'id', type: 'text', nullable: false },
    { name: 'created_at', type: 'text', nullable: false },
    { name: 'updated_at', type: 'text', nullable: false },
    { name: 'tags', type: 'json', nullable: false },
  ];
  if (def.system) columns.push({ name: 'is_system', type: 'boolean', nullable: false });
  const unique: string[] = [];
  const references: TableSpec['references'] = [];
  for (const [name, f] of Object.entries(def.fields)) {
    if (f.virtual) continue;
    const column = columnOf(name, f);
    columns.push({ name: column, type: COLUMN_TYPE[f.kind], nullable: isNullableColumn(f) });
    if (f.unique) unique.push(column);
    if (f.ref) references.push({ column, table: tableOf(f.ref.collection) });
  }
  return { table: def.table, columns, unique, references };
}

/** The permission group a route doing `action` to the definition's records asks for (null: admins only). */
export function permissionFor(def: Pick<ResourceDef, 'permission' | 'writePermission'>, action: 'read' | 'create' | 'update' | 'delete'): string | null {
  return action === 'read' || def.writePermission === undefined ? def.permission : def.writePermission;
}
