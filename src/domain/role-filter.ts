// roleFilter / roleSemantic on the management lists of identities, services, edge routers and
// posture checks (behaviour.md §3): entities whose role attributes match the `#attr` entries under
// the semantic, united with the entities named by `@id` entries. `#all` is the literal attribute
// `all` here. Applied before the filter.
import { Type } from '@sinclair/typebox';
import { sql, type Expression, type SqlBool } from 'kysely';
import { fieldError } from '../errors.js';
import type { SqlFlavor } from '../query/flavor.js';

export const RoleFilterQuery = {
  roleFilter: Type.Optional(
    Type.Union([Type.String({ maxLength: 256 }), Type.Array(Type.String({ maxLength: 256 }), { maxItems: 100 })], {
      description: 'repeatable: #attribute or @id',
    }),
  ),
  roleSemantic: Type.Optional(Type.String({ description: 'AllOf (default) or AnyOf' })),
};

export function roleFilterScope(
  table: string,
  flavor: SqlFlavor,
): (query: Record<string, unknown>) => Promise<Expression<SqlBool> | undefined> {
  return async (query) => {
    const raw = query.roleFilter;
    if (raw === undefined) return undefined;
    const roles = (Array.isArray(raw) ? raw : [raw]).map(String);
    const semantic = query.roleSemantic === undefined ? 'AllOf' : String(query.roleSemantic);
    if (semantic !== 'AllOf' && semantic !== 'AnyOf') throw fieldError('roleSemantic', 'must be AllOf or AnyOf', semantic);
    const attrs: string[] = [];
    const ids: string[] = [];
    for (const role of roles) {
      if (role.startsWith('#') && role.length > 1) attrs.push(role.slice(1));
      else if (role.startsWith('@') && role.length > 1) ids.push(role.slice(1));
      else throw fieldError('roleFilter', 'entries start with # or @', role);
    }
    const column = sql.ref(`${table}.role_attributes`);
    const has = (attr: string) => flavor.arraySome(column, (element) => sql<SqlBool>`${element} = ${attr}`);
    const parts: Expression<SqlBool>[] = [];
    if (attrs.length > 0) {
      const tests = attrs.map(has);
      parts.push(sql<SqlBool>`(${sql.join(tests, sql` ${sql.raw(semantic === 'AllOf' ? 'and' : 'or')} `)})`);
    }
    if (ids.length > 0) parts.push(sql<SqlBool>`${sql.ref(`${table}.id`)} in (${sql.join(ids)})`);
    return sql<SqlBool>`(${sql.join(parts, sql` or `)})`;
  };
}
