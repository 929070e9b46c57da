// Policies beyond CRUD (their role lists checked, links kept, `<list>Display` read fields), and the
// link maintenance every entity that role lists select needs; which resource gets which follows
// from the relations the definitions declare.
import { Type } from '@sinclair/typebox';
import { fieldError } from '../errors.js';
import { existingIds, type PolicyLinks } from '../policy/links.js';
import { parseRoles, rolesDisplay, validateRoles } from '../policy/roles.js';
import type { ResourceDefOf } from '../resources/index.js';
import { policySpecOf, roleKindOf, roleKindOfCollection, type PolicyCollection, type RoleKind } from '../resources/relations.js';
import type { Entity } from '../store/repository.js';
import type { Executor } from '../store/store.js';
import { computed, composeBehaviours, type ResourceBehaviour, type WriteContext } from './resources.js';

export const RoleDisplaySchema = Type.Array(
  Type.Object({ role: Type.String(), name: Type.String() }),
  { description: 'each role with the name it stands for: @<entity name> for @id, the role itself otherwise' },
);

const SEMANTICS = new Set(['AllOf', 'AnyOf']);
/** Ids per name lookup statement. */
const NAME_CHUNK = 2000;

function roleList(entity: Entity, field: string): string[] {
  const value = entity[field];
  return Array.isArray(value) ? value.map(String) : [];
}

async function namesOf(ex: Executor, table: string, ids: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (let i = 0; i < ids.length; i += NAME_CHUNK) {
    const rows = await ex
      .selectFrom(table)
      .select(['id', 'name'])
      .where('id', 'in', ids.slice(i, i + NAME_CHUNK))
      .execute();
    for (const r of rows) out.set(String(r.id), String(r.name));
  }
  return out;
}

/** `<list>Display` for each role list: the roles with the names of the entities `@id` names. */
function rolesDisplayFields(collection: PolicyCollection) {
  const spec = policySpecOf(collection);
  const fields = Object.fromEntries(spec.lists.map((l) => [`${l.field}Display`, RoleDisplaySchema]));
  return computed(fields, async (ex, entities, answers) => {
    // One name lookup per entity kind for the whole page.
    const idsByKind = new Map<RoleKind, Set<string>>();
    for (const e of entities) {
      for (const l of spec.lists) {
        const ids = parseRoles(roleList(e, l.field)).ids;
        if (ids.length === 0) continue;
        let set = idsByKind.get(l.kind);
        if (!set) idsByKind.set(l.kind, (set = new Set()));
        for (const id of ids) set.add(id);
      }
    }
    const names = new Map<RoleKind, Map<string, string>>();
    for (const [kind, ids] of idsByKind) names.set(kind, await namesOf(ex, roleKindOf(kind).table, [...ids]));
    for (const [i, e] of entities.entries()) {
      for (const l of spec.lists) {
        answers[i]![`${l.field}Display`] = rolesDisplay(roleList(e, l.field), names.get(l.kind) ?? new Map());
      }
    }
  });
}

function policyBehaviour(collection: PolicyCollection, links: PolicyLinks): ResourceBehaviour {
  const spec = policySpecOf(collection);
  return {
    async validate(ctx, next, prev) {
      if (!SEMANTICS.has(String(next.semantic))) throw fieldError('semantic', 'must be AllOf or AnyOf', next.semantic);
      for (const l of spec.lists) {
        const roles = roleList(next, l.field);
        const problem = validateRoles(roles);
        if (problem) throw fieldError(l.field, problem.reason, problem.entry);
        // Only ids new to the list must exist: a delete takes its `@id` out (dropIdRoles), and one
        // stored before that was done must not make every later edit of the policy fail.
        const known = new Set(prev ? parseRoles(roleList(prev, l.field)).ids : []);
        const added = parseRoles(roles).ids.filter((id) => !known.has(id));
        if (added.length === 0) continue;
        const kind = roleKindOf(l.kind);
        const present = await existingIds(ctx.tx, kind.table, added);
        const missing = added.find((id) => !present.has(id));
        if (missing !== undefined) throw fieldError(l.field, `no ${kind.label} with id ${missing}`, `@${missing}`);
      }
    },
    async afterWrite(ctx, next, prev) {
      const same =
        prev !== undefined &&
        prev.semantic === next.semantic &&
        spec.lists.every((l) => JSON.stringify(roleList(prev, l.field)) === JSON.stringify(roleList(next, l.field)));
      if (!same) await links.refreshPolicyLinks(ctx, collection, next);
    },
    async afterDelete(ctx, prev) {
      await links.forgetPolicy(ctx, collection, prev.id);
    },
    computed: [rolesDisplayFields(collection)],
  };
}

function sameAttributes(a: unknown, b: unknown): boolean {
  const x = new Set(Array.isArray(a) ? a : []);
  const y = new Set(Array.isArray(b) ? b : []);
  return x.size === y.size && [...x].every((v) => y.has(v));
}

/** Keeps policy links and the role attribute index exact when an entity of `kind` is written. */
export function roleLinkBehaviour(kind: RoleKind, links: PolicyLinks): ResourceBehaviour {
  return {
    async afterWrite(ctx, next, prev) {
      // A new entity may be selected by `@id` or `#all` even without attributes.
      if (prev && sameAttributes(prev.roleAttributes, next.roleAttributes)) return;
      await links.refreshEntityLinks(ctx, kind, next);
    },
    async afterDelete(ctx, prev) {
      await links.forgetEntity(ctx, kind, prev.id);
      await dropIdRoles(ctx, links, kind, prev.id);
    },
  };
}

/**
 * Takes `@id` of a deleted entity out of every role list naming it, as the established controller
 * does: an entity made again with that id (a router's tunneler identity) is not selected again by
 * policies written for the one that is gone.
 */
export async function dropIdRoles(ctx: WriteContext, links: PolicyLinks, kind: RoleKind, entityId: string): Promise<void> {
  for (const { list, policyId } of await links.naming(ctx, kind, entityId)) {
    const policy = await ctx.resources.get(list.collection).repo.get(ctx.tx, policyId);
    if (!policy) continue;
    const roles = roleList(policy, list.field).filter((r) => r !== `@${entityId}`);
    await ctx.update(list.collection, policyId, { [list.field]: roles, updatedAt: ctx.now });
    await links.refreshPolicyLinks(ctx, list.collection, { ...policy, [list.field]: roles });
  }
}

/**
 * What the relations add to a resource: a policy kind checks its role lists and keeps its links;
 * an entity that role lists select keeps its attribute index rows and links. Undefined for others.
 */
export function relationBehaviour(def: ResourceDefOf, links: PolicyLinks): ResourceBehaviour | undefined {
  const parts: ResourceBehaviour[] = [];
  if ('roleLists' in def) parts.push(policyBehaviour(def.name, links));
  const kind = roleKindOfCollection(def.name);
  if (kind) parts.push(roleLinkBehaviour(kind.kind, links));
  return parts.length === 0 ? undefined : composeBehaviours(...parts);
}
