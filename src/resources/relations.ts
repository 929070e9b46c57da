// The relations between resources, derived from the definitions' `roleLists`, `linkLists` and
// `related`: each policy kind's role lists and the link tables they are kept in, the kinds of entity
// role lists select (with the role attribute lists of each), the set fields kept in link tables of
// their own, and the related lists served. Everything that reads or writes a link table takes its
// names from here; the schema test checks the migrations create exactly these tables. Pure: no
// store, no HTTP.
//
// Names follow the labels: a role kind is the entity's label in kebab case (`edge-router`, stored in
// role_attribute_index), a link table `<policy label>_<entity table>` with the entity column
// `<entity label>_id`; a link list's table likewise `<owner label>_<member table>`, with the columns
// `<owner label>_id` and `<member label>_id`. A label is so part of the stored shape; the schema and
// relations tests pin it.
import type { FilterField } from '../query/ast.js';
import { columnOf, type ResourceDef } from './kit.js';
import { resourceDefs, type ResourceDefOf } from './index.js';

/** The controller's policy definitions: those that declare role lists. */
type PolicyDef = Extract<ResourceDefOf, { roleLists: object }>;
/** A policy collection of the controller: one whose definition declares role lists. */
export type PolicyCollection = PolicyDef['name'];
/** The field of a role list in its policy definition, e.g. `identityRoles`. */
export type RoleField = PolicyDef extends infer P ? (P extends { roleLists: infer L } ? keyof L & string : never) : never;
/** The collections the role lists of `P` select. */
export type SelectedBy<P extends PolicyCollection> =
  Extract<PolicyDef, { name: P }> extends infer D ? (D extends { roleLists: infer L } ? L[keyof L] : never) : never;
/** `edge router` → `edge-router`, as kindSpec spells a label. */
type Kebab<S extends string> = S extends `${infer A} ${infer B}` ? `${A}-${Kebab<B>}` : S;
/** What the role attribute index calls entities of one collection, e.g. `edge-router`: its label in kebab case. */
export type RoleKind = Lowercase<Kebab<Extract<ResourceDefOf, { name: SelectedBy<PolicyCollection> }>['label']>>;

/**
 * How a set of definitions names its policy collections, role list fields and role kinds: any
 * strings for definitions in general (deriveRelations), the literal unions above for the controller's.
 */
export interface RelationNames {
  policy: string;
  field: string;
  kind: string;
}

/** The names of the controller's relations. */
export interface ControllerNames extends RelationNames {
  policy: PolicyCollection;
  field: RoleField;
  kind: RoleKind;
}

/** The kind of entity policies select: an entity collection some role list names. */
export interface KindSpec<N extends RelationNames = ControllerNames> {
  kind: N['kind'];
  /** The entity collection; every entity has `role_attributes` and a `name`. */
  collection: string;
  table: string;
  label: string;
  /** Its permission group: reading its role attributes takes its read permission. */
  permission: string;
}

/** One role list of a policy kind and the link table it is materialised in. */
export interface RoleListSpec<N extends RelationNames = ControllerNames> {
  /** The policy collection. */
  collection: N['policy'];
  field: N['field'];
  /** Column of the list in the policy table. */
  column: string;
  /** The kind of entity it selects. */
  kind: N['kind'];
  /** The entity collection it selects. */
  selects: string;
  linkTable: string;
  /** Entity column of the link table (the other one is policy_id). */
  linkColumn: string;
}

export interface PolicySpec<N extends RelationNames = ControllerNames> {
  collection: N['policy'];
  table: string;
  /** Whether the policy has a Dial / Bind `type` (service policies). */
  typed: boolean;
  lists: readonly RoleListSpec<N>[];
}

/** A link table: (policy_id, entity) primary key, a reverse index, both sides cascading. */
export interface LinkTableSpec {
  table: string;
  policy: { column: 'policy_id'; table: string };
  entity: { column: string; table: string };
}

/** One side of a link table: the column and the table its id refers to. */
export interface LinkSide {
  column: string;
  table: string;
}

/**
 * A set field kept in a link table of its own: one row per (owner, member), the pair its primary key,
 * a reverse index, both sides cascading.
 */
export interface LinkListSpec {
  /** The collection declaring the field. */
  collection: string;
  field: string;
  /** The collection whose ids the field holds. */
  holds: string;
  table: string;
  owner: LinkSide;
  member: LinkSide;
}

/** One related list and where its entities come from. */
export type RelatedSpec<N extends RelationNames = ControllerNames> = {
  parent: string;
  child: string;
  operationId: string;
  policyType: boolean;
  /** The permission group whose read it takes; null: administrators only. */
  permission: string | null;
} & (
  /** The child entities whose reference `column` holds the parent's id. */
  | { via: 'reference'; field: string; column: string }
  /** Through a link list: the child ids in `childColumn` of the rows whose `parentColumn` is the parent. */
  | { via: 'link'; link: LinkListSpec; parentColumn: string; childColumn: string }
  /** An entity's policies: those whose `list` selects it. */
  | { via: 'policies'; list: RoleListSpec<N> }
  /** A policy's members: the entities its `list` selects. */
  | { via: 'members'; list: RoleListSpec<N> }
  /** Entities reached through one policy kind: selected by `to` in a policy whose `from` selects the parent. */
  | { via: 'policy'; from: RoleListSpec<N>; to: RoleListSpec<N> }
);

/** `edge router` → `edge_router`: a singular table-name part. */
const snakeLabel = (def: ResourceDef) => def.label.toLowerCase().replace(/ /g, '_');

/** Everything the relations of a set of definitions imply. */
export interface Relations<N extends RelationNames = ControllerNames> {
  policyCollections: readonly N['policy'][];
  policies: Readonly<Record<N['policy'], PolicySpec<N>>>;
  /** Every kind of entity a role list selects, in the order of the definitions. */
  kinds: readonly KindSpec<N>[];
  /** The role lists that select entities of each kind, in policy order. */
  listsOfKind: Readonly<Record<N['kind'], readonly RoleListSpec<N>[]>>;
  linkTables: readonly LinkTableSpec[];
  /** The set fields kept in link tables of their own, in the order of the definitions. */
  linkLists: readonly LinkListSpec[];
  /** Every related list declared, in the order of the definitions. */
  related: readonly RelatedSpec<N>[];
}

/** Derives the relations of any definitions, named by strings; throws where the declarations do not fit together. */
export function deriveRelations(defs: readonly ResourceDef[]): Relations<RelationNames> {
  const defOf = (collection: string): ResourceDef => {
    const def = defs.find((d) => d.name === collection);
    if (!def) throw new Error(`relations: no resource ${collection}`);
    return def;
  };
  const kindSpec = (def: ResourceDef): KindSpec<RelationNames> => {
    if (def.fields.roleAttributes?.kind !== 'set') throw new Error(`relations: ${def.name} is selected by role lists but has no roleAttributes`);
    if (def.permission === null) throw new Error(`relations: ${def.name} is selected by role lists but has no permission group`);
    return { kind: def.label.toLowerCase().replace(/ /g, '-'), collection: def.name, table: def.table, label: def.label, permission: def.permission };
  };

  const policyDefs = defs.filter((d) => d.roleLists !== undefined);
  const kinds = defs.filter((d) => policyDefs.some((p) => Object.values(p.roleLists!).includes(d.name))).map(kindSpec);

  const policies: Record<string, PolicySpec<RelationNames>> = {};
  for (const def of policyDefs) {
    const lists = Object.entries(def.roleLists!).map(([field, selects]): RoleListSpec<RelationNames> => {
      const f = def.fields[field];
      if (f?.kind !== 'set') throw new Error(`relations: role list ${def.name}.${field} is not a set field`);
      const entity = defOf(selects);
      return {
        collection: def.name,
        field,
        column: columnOf(field, f),
        kind: kindSpec(entity).kind,
        selects,
        linkTable: `${snakeLabel(def)}_${entity.table}`,
        linkColumn: `${snakeLabel(entity)}_id`,
      };
    });
    const type = def.fields.type;
    const typed = type?.kind === 'enum' && ['Dial', 'Bind'].every((t) => type.values?.includes(t));
    policies[def.name] = { collection: def.name, table: def.table, typed, lists };
  }

  const policyOf = (collection: string): PolicySpec<RelationNames> => {
    const spec = policies[collection];
    if (!spec) throw new Error(`relations: ${collection} has no role lists`);
    return spec;
  };
  const listOf = (policy: string, collection: string): RoleListSpec<RelationNames> => {
    const found = policyOf(policy).lists.filter((l) => l.selects === collection);
    if (found.length !== 1) throw new Error(`relations: ${policy} has ${found.length} role lists selecting ${collection}`);
    return found[0]!;
  };

  const linkLists = defs.flatMap((def) =>
    Object.entries(def.linkLists ?? {}).map(([field, holds]): LinkListSpec => {
      const f = def.fields[field];
      if (f?.kind !== 'set') throw new Error(`relations: link list ${def.name}.${field} is not a set field`);
      if (f.virtual !== true) throw new Error(`relations: link list ${def.name}.${field} is kept in its link table, so it must be virtual`);
      if (def.roleLists && Object.hasOwn(def.roleLists, field)) throw new Error(`relations: ${def.name}.${field} is both a role list and a link list`);
      const member = defOf(holds);
      // Both columns would be named after the one label.
      if (member.name === def.name) throw new Error(`relations: link list ${def.name}.${field} holds ids of its own collection`);
      return {
        collection: def.name,
        field,
        holds,
        table: `${snakeLabel(def)}_${member.table}`,
        owner: { column: `${snakeLabel(def)}_id`, table: def.table },
        member: { column: `${snakeLabel(member)}_id`, table: member.table },
      };
    }),
  );
  const policyLinkTables = Object.values(policies).flatMap((p) => p.lists.map((l) => l.linkTable));
  for (const [i, l] of linkLists.entries()) {
    if (policyLinkTables.includes(l.table) || linkLists.findIndex((o) => o.table === l.table) !== i) {
      throw new Error(`relations: link list ${l.collection}.${l.field}: the link table ${l.table} is declared twice`);
    }
  }

  /** Reference form: `by` must be a stored reference field of the child naming the parent's collection. */
  const referenceOf = (parent: ResourceDef, child: ResourceDef, by: string) => {
    const f = child.fields[by];
    if (f?.kind !== 'ref' || f.virtual === true || f.ref?.collection !== parent.name) {
      throw new Error(`relations: ${parent.name}/${child.name}: ${child.name}.${by} is not a stored reference to ${parent.name}`);
    }
    return { field: by, column: columnOf(by, f) };
  };

  const related = defs.flatMap((parent) =>
    (parent.related ?? []).map((rel): RelatedSpec<RelationNames> => {
      const child = defOf(rel.collection);
      const base = {
        parent: parent.name,
        child: rel.collection,
        operationId: rel.operationId,
        policyType: rel.policyType === true,
        // Reading a related list takes the read permission of what it lists.
        permission: child.permission,
      };
      const links = linkLists.filter(
        (l) => (l.collection === parent.name && l.holds === child.name) || (l.collection === child.name && l.holds === parent.name),
      );
      const between = `${parent.name}/${rel.collection}`;
      if (links.length > 1) throw new Error(`relations: ${between}: ${links.length} link lists relate them`);
      const link = links[0];
      if (link && rel.by === undefined && (rel.through !== undefined || policies[child.name] || policies[parent.name])) {
        throw new Error(`relations: ${between}: both a link list and a policy relate them`);
      }
      let spec: RelatedSpec<RelationNames>;
      if (rel.by !== undefined) {
        if (rel.through !== undefined) throw new Error(`relations: ${between}: a reference (by) and a policy kind (through) both named`);
        spec = { ...base, via: 'reference', ...referenceOf(parent, child, rel.by) };
      } else if (link) {
        const [parentSide, childSide] = link.collection === parent.name ? [link.owner, link.member] : [link.member, link.owner];
        spec = { ...base, via: 'link', link, parentColumn: parentSide.column, childColumn: childSide.column };
      } else if (rel.through !== undefined) {
        spec = { ...base, via: 'policy', from: listOf(rel.through, parent.name), to: listOf(rel.through, rel.collection) };
      } else if (policies[rel.collection]) {
        spec = { ...base, via: 'policies', list: listOf(rel.collection, parent.name) };
      } else if (policies[parent.name]) {
        spec = { ...base, via: 'members', list: listOf(parent.name, rel.collection) };
      } else {
        throw new Error(
          `relations: ${between}: neither side is a policy, no link list relates them, no reference (by) and no policy kind to go through is named`,
        );
      }
      if (spec.policyType && !(spec.via === 'policy' && policyOf(rel.through!).typed)) {
        throw new Error(`relations: ${parent.name}/${rel.collection}: policyType needs a policy kind with a Dial / Bind type to go through`);
      }
      return spec;
    }),
  );

  const tableOfKind = new Map(kinds.map((k) => [k.kind, k.table]));
  return {
    policyCollections: policyDefs.map((d) => d.name),
    policies,
    kinds,
    listsOfKind: Object.fromEntries(kinds.map((k) => [k.kind, Object.values(policies).flatMap((p) => p.lists.filter((l) => l.kind === k.kind))])),
    linkTables: Object.values(policies).flatMap((p) =>
      p.lists.map((l) => ({
        table: l.linkTable,
        policy: { column: 'policy_id' as const, table: p.table },
        entity: { column: l.linkColumn, table: tableOfKind.get(l.kind)! },
      })),
    ),
    linkLists,
    related,
  };
}

// ---- the controller's relations -------------------------------------------------------------------

/**
 * Derived from the controller's definitions like any others, and named as the types above spell the
 * same definitions (test/relations.test.ts checks that both agree).
 */
const relations = deriveRelations(resourceDefs) as Relations<ControllerNames>;

export const POLICY_COLLECTIONS: readonly PolicyCollection[] = relations.policyCollections;
export const POLICY_SPECS: Readonly<Record<PolicyCollection, PolicySpec>> = relations.policies;
// Every kind is in relations.kinds, so the object has every key of RoleKind.
export const ROLE_KINDS = Object.fromEntries(relations.kinds.map((k) => [k.kind, k])) as Readonly<Record<RoleKind, KindSpec>>;
export const LISTS_OF_KIND: Readonly<Record<RoleKind, readonly RoleListSpec[]>> = relations.listsOfKind;
/** Every policy link table, as the migrations must create it. */
export const LINK_TABLES: readonly LinkTableSpec[] = relations.linkTables;
/** Every set field kept in a link table of its own, as the migrations must create the tables. */
export const LINK_LISTS: readonly LinkListSpec[] = relations.linkLists;
/** Every related list the definitions declare. */
export const RELATED_LISTS: readonly RelatedSpec[] = relations.related;

/** Whether a collection is one of the controller's policy collections. */
export function isPolicyCollection(collection: string): collection is PolicyCollection {
  return POLICY_COLLECTIONS.some((c) => c === collection);
}

/** The spec of a policy collection; throws for any other collection. */
export function policySpecOf(collection: PolicyCollection): PolicySpec {
  const spec = POLICY_SPECS[collection];
  if (!spec) throw new Error(`relations: ${collection} has no role lists`);
  return spec;
}

/** The kind of entity; throws for a kind no role list selects. */
export function roleKindOf(kind: RoleKind): KindSpec {
  const spec = ROLE_KINDS[kind];
  if (!spec) throw new Error(`relations: no role kind ${kind}`);
  return spec;
}

/** The kind of the entities of a collection, if role lists select them. */
export function roleKindOfCollection(collection: string): KindSpec | undefined {
  return relations.kinds.find((k) => k.collection === collection);
}

/** The role list of `policy` that selects `collection`: exactly one, or the declarations are wrong. */
export function roleListOf<P extends PolicyCollection>(policy: P, collection: SelectedBy<P>): RoleListSpec {
  const found = policySpecOf(policy).lists.filter((l) => l.selects === collection);
  if (found.length !== 1) throw new Error(`relations: ${policy} has ${found.length} role lists selecting ${collection}`);
  return found[0]!;
}

/** The link list `field` of `collection`; throws for a field declared otherwise. */
export function linkListOf(collection: string, field: string): LinkListSpec {
  const spec = LINK_LISTS.find((l) => l.collection === collection && l.field === field);
  if (!spec) throw new Error(`relations: ${collection}.${field} is not a link list`);
  return spec;
}

/** `edge-routers` → `edgeRouters`: how a filter names a set of records of a collection. */
const camel = (collection: string) => collection.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/** A filter field read through a relation, and the permission group whose read naming it takes. */
export interface RelationFilterField {
  field: FilterField;
  /** The group of the records it reaches (null: administrators only): a filter must not tell of records its caller may not read. */
  permission: string | null;
}

/**
 * The fields a filter may name on a definition's records that are read through its relations, as the
 * established controller lets filters name them: a link list's ids (`anyOf(configs)` on services),
 * the records a policy selects now (`anyOf(identities)` on service policies: its link tables, not its
 * role lists), and the name of a record another field holds the id of (`service.name` on terminators).
 */
export function relationFilterFields(def: ResourceDef): RelationFilterField[] {
  const own = `${def.readFrom ?? def.table}.id`;
  const defOf = (collection: string): ResourceDef => {
    const found: ResourceDef | undefined = resourceDefs.find((d) => d.name === collection);
    if (!found) throw new Error(`relations: ${def.name}: no collection ${collection}`);
    return found;
  };
  const links = LINK_LISTS.filter((l) => l.collection === def.name).map(
    (l): RelationFilterField => ({
      field: { name: l.field, type: 'set', column: l.member.column, source: { kind: 'link', table: l.table, owner: l.owner.column, id: own } },
      permission: defOf(l.holds).permission,
    }),
  );
  const others: RelationFilterField[] = [
    ...(isPolicyCollection(def.name) ? POLICY_SPECS[def.name].lists : []).map(
      (l): RelationFilterField => ({
        field: { name: camel(l.selects), type: 'set', column: l.linkColumn, source: { kind: 'link', table: l.linkTable, owner: 'policy_id', id: own } },
        permission: defOf(l.selects).permission,
      }),
    ),
    ...Object.entries(def.filterNames ?? {}).map(([field, collection]): RelationFilterField => {
      const f = def.fields[field];
      if (!f || f.virtual) throw new Error(`relations: ${def.name}.filterNames: ${field} is no stored field`);
      const target = defOf(collection);
      const nameField = target.nameField ?? 'name';
      return {
        field: {
          name: `${field}.${nameField}`,
          type: 'string',
          column: columnOf(nameField, target.fields[nameField]!),
          source: { kind: 'reference', table: target.readFrom ?? target.table, key: `${def.readFrom ?? def.table}.${columnOf(field, f)}` },
        },
        permission: target.permission,
      };
    }),
  ];
  for (const { field } of others) if (def.fields[field.name]) throw new Error(`relations: ${def.name}.${field.name} is a field and a relation's filter field`);
  return [...links, ...others];
}
