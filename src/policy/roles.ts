// Role lists of policies (behaviour.md §4), pure: parsing, validation, matching and display. No I/O,
// so the link maintenance, the brute-force checks of the tests and access decisions share one truth.

export type Semantic = 'AllOf' | 'AnyOf';

/** The role that selects every entity of a kind. */
export const ALL_ROLE = '#all';

/** A role list split by entry kind, without the `#` / `@` prefixes. */
export interface ParsedRoles {
  /** `#all` is present. */
  all: boolean;
  /** `#attr` entries (other than `#all`), without `#`, distinct. */
  attributes: string[];
  /** `@id` entries, without `@`, distinct. */
  ids: string[];
}

export interface RoleProblem {
  /** The offending entry. */
  entry: string;
  reason: string;
}

export interface RolePolicy {
  semantic: Semantic | string;
  roles: readonly string[] | null | undefined;
}

export interface RoleEntity {
  id: string;
  roleAttributes: readonly string[] | null | undefined;
}

/** Splits a role list; entries that are not roles (see validateRoles) are ignored. */
export function parseRoles(roles: readonly string[] | null | undefined): ParsedRoles {
  const attributes = new Set<string>();
  const ids = new Set<string>();
  let all = false;
  // Stryker: a placeholder entry for a null list has no prefix, so it is ignored like any non-role.
  for (const role of roles ?? []) {
    if (role === ALL_ROLE) all = true;
    else if (role.length > 1 && role.startsWith('#')) attributes.add(role.slice(1));
    else if (role.length > 1 && role.startsWith('@')) ids.add(role.slice(1));
  }
  return { all, attributes: [...attributes], ids: [...ids] };
}

/** The first problem of a role list, or undefined when it is valid. */
export function validateRoles(roles: readonly string[] | null | undefined): RoleProblem | undefined {
  const list = roles ?? [];
  for (const entry of list) {
    if (!entry.startsWith('#') && !entry.startsWith('@')) {
      return { entry, reason: 'role entries start with # (attribute) or @ (id)' };
    }
    if (entry.length < 2) return { entry, reason: 'a role names an attribute or an id after its prefix' };
  }
  if (list.includes(ALL_ROLE) && list.some((entry) => entry !== ALL_ROLE)) {
    return { entry: ALL_ROLE, reason: '#all stands alone in a role list' };
  }
  return undefined;
}

/**
 * Whether a policy with this semantic and these (parsed) roles selects the entity. `attributes` may be
 * a set, for callers that test one entity against many policies.
 */
export function matchesParsed(
  semantic: Semantic | string,
  roles: ParsedRoles,
  id: string,
  attributes: ReadonlySet<string>,
): boolean {
  if (roles.all || roles.ids.includes(id)) return true;
  if (roles.attributes.length === 0) return false;
  return semantic === 'AnyOf'
    ? roles.attributes.some((a) => attributes.has(a))
    : roles.attributes.every((a) => attributes.has(a));
}

/**
 * behaviour.md §4: the entity id is among the `@id`s; or `#all` is present; or AllOf with at least one
 * `#attr` and the entity carries all of them; or AnyOf and the entity carries at least one.
 */
export function matches(policy: RolePolicy, entity: RoleEntity): boolean {
  // Stryker: a placeholder attribute for a null list is told apart only by a role naming that text.
  return matchesParsed(policy.semantic, parseRoles(policy.roles), entity.id, new Set(entity.roleAttributes ?? []));
}

export interface RoleDisplay {
  role: string;
  name: string;
}

/** `@id` shows `@<entity name>` (the role itself when the entity is gone), `#attr` shows itself. */
export function rolesDisplay(
  roles: readonly string[] | null | undefined,
  namesById: ReadonlyMap<string, string>,
): RoleDisplay[] {
  return (roles ?? []).map((role) => {
    // Stryker: without the length test a lone "@" looks up the empty id, which no entity has.
    if (role.length > 1 && role.startsWith('@')) {
      const name = namesById.get(role.slice(1));
      return { role, name: name === undefined ? role : `@${name}` };
    }
    return { role, name: role };
  });
}
