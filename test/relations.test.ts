// The relations derived from the resource definitions: the controller's own (role kinds are stored
// in the attribute index, so they never change), and declarations that do not fit together refused
// when the relations are derived, at start. Related lists go through policy link tables, link lists
// or references.
import { describe, expect, it } from 'vitest';
import { field, type ResourceDef } from '../src/resources/kit.js';
import {
  deriveRelations,
  LINK_LISTS,
  LINK_TABLES,
  linkListOf,
  POLICY_COLLECTIONS,
  POLICY_SPECS,
  RELATED_LISTS,
  ROLE_KINDS,
  roleListOf,
  type PolicyCollection,
  type RoleField,
  type RoleKind,
} from '../src/resources/relations.js';

const entity = (name: string, label: string, withAttributes = true): ResourceDef => ({
  name,
  label,
  table: name.replace(/-/g, '_'),
  permission: 'service',
  fields: { name: field.name(), ...(withAttributes ? { roleAttributes: field.roleAttributes() } : {}) },
});

const policy = (over: Partial<ResourceDef> = {}): ResourceDef => ({
  name: 'grant-policies',
  label: 'grant policy',
  table: 'grant_policies',
  permission: 'service',
  fields: {
    name: field.name(),
    type: field.enum(['Dial', 'Bind'], 'what it grants'),
    semantic: field.enum(['AllOf', 'AnyOf'], 'semantic'),
    userRoles: field.roles('users'),
    deviceRoles: field.roles('devices'),
  },
  roleLists: { userRoles: 'users', deviceRoles: 'devices' },
  ...over,
});

const users = entity('users', 'user');
const devices = entity('devices', 'device');

describe("the controller's relations", () => {
  it('select four kinds of entity, named as the attribute index stores them', () => {
    expect(Object.values(ROLE_KINDS).map((k) => [k.kind, k.collection, k.table])).toEqual([
      ['identity', 'identities', 'identities'],
      ['service', 'services', 'services'],
      ['edge-router', 'edge-routers', 'edge_routers'],
      ['posture-check', 'posture-checks', 'posture_checks'],
    ]);
  });

  it('keep each role list in a link table of its own', () => {
    const lists = Object.values(POLICY_SPECS).flatMap((p) => p.lists);
    expect(lists.length).toBe(7);
    expect(new Set(LINK_TABLES.map((l) => l.table)).size).toBe(lists.length);
    expect(LINK_TABLES.map((l) => l.table)).toEqual(lists.map((l) => l.linkTable));
  });

  it('are named as their types spell them, so a misspelt name does not compile', () => {
    // Each record must name every member of its union and nothing else, or it does not compile.
    const policies: Record<PolicyCollection, true> = { 'service-policies': true, 'edge-router-policies': true, 'service-edge-router-policies': true };
    const kinds: Record<RoleKind, true> = { identity: true, service: true, 'edge-router': true, 'posture-check': true };
    const fields: Record<RoleField, true> = { identityRoles: true, serviceRoles: true, postureCheckRoles: true, edgeRouterRoles: true };
    expect([...POLICY_COLLECTIONS].sort()).toEqual(Object.keys(policies).sort());
    expect(Object.keys(ROLE_KINDS).sort()).toEqual(Object.keys(kinds).sort());
    const derivedFields = new Set(Object.values(POLICY_SPECS).flatMap((p) => p.lists.map((l) => l.field)));
    expect([...derivedFields].sort()).toEqual(Object.keys(fields).sort());

    // @ts-expect-error no such policy collection
    expect(() => roleListOf('service-polices', 'identities')).toThrow(/service-polices has no role lists/);
    // @ts-expect-error edge router policies select no services
    expect(() => roleListOf('edge-router-policies', 'services')).toThrow(/edge-router-policies has 0 role lists selecting services/);
  });

  it('serve each related list once, with an operation id of its own', () => {
    const routes = RELATED_LISTS.map((r) => `${r.parent}/${r.child}`);
    expect(new Set(routes).size).toBe(routes.length);
    expect(new Set(RELATED_LISTS.map((r) => r.operationId)).size).toBe(routes.length);
  });

  it('keep the configs of services in service_configs, the one link list', () => {
    expect(LINK_LISTS).toEqual([
      {
        collection: 'services',
        field: 'configs',
        holds: 'configs',
        table: 'service_configs',
        owner: { column: 'service_id', table: 'services' },
        member: { column: 'config_id', table: 'configs' },
      },
    ]);
    expect(linkListOf('services', 'configs')).toBe(LINK_LISTS[0]);
    expect(() => linkListOf('services', 'roleAttributes')).toThrow(/services\.roleAttributes is not a link list/);
  });

  it('relate configs, services, terminators and authenticators by link list and reference, with the permission of each', () => {
    const of = (route: string) => {
      const r = RELATED_LISTS.find((x) => `${x.parent}/${x.child}` === route)!;
      return {
        operationId: r.operationId,
        permission: r.permission,
        via: r.via,
        ...(r.via === 'reference' ? { column: r.column } : {}),
        ...(r.via === 'link' ? { table: r.link.table, parentColumn: r.parentColumn, childColumn: r.childColumn } : {}),
      };
    };
    expect(of('services/configs')).toEqual({
      operationId: 'listServiceConfig',
      permission: 'config',
      via: 'link',
      table: 'service_configs',
      parentColumn: 'service_id',
      childColumn: 'config_id',
    });
    expect(of('configs/services')).toEqual({
      operationId: 'listConfigServices',
      permission: 'service',
      via: 'link',
      table: 'service_configs',
      parentColumn: 'config_id',
      childColumn: 'service_id',
    });
    expect(of('config-types/configs')).toEqual({ operationId: 'listConfigsForConfigType', permission: 'config', via: 'reference', column: 'config_type_id' });
    expect(of('services/terminators')).toEqual({ operationId: 'listServiceTerminators', permission: 'terminator', via: 'reference', column: 'service_id' });
    // Authenticators are for admins: an identity's list is no path around that.
    expect(of('identities/authenticators')).toEqual({
      operationId: 'getIdentityAuthenticators',
      permission: null,
      via: 'reference',
      column: 'identity_id',
    });
  });
});

describe('derived from declarations', () => {
  it('name link tables and columns after the policy and the entity', () => {
    const r = deriveRelations([users, devices, policy()]);
    expect(r.linkTables).toEqual([
      { table: 'grant_policy_users', policy: { column: 'policy_id', table: 'grant_policies' }, entity: { column: 'user_id', table: 'users' } },
      { table: 'grant_policy_devices', policy: { column: 'policy_id', table: 'grant_policies' }, entity: { column: 'device_id', table: 'devices' } },
    ]);
    expect(r.kinds.map((k) => k.kind)).toEqual(['user', 'device']);
    expect(r.listsOfKind.user!.map((l) => l.field)).toEqual(['userRoles']);
  });

  it('relate both sides of a policy and, through it, the entities it links', () => {
    const r = deriveRelations([
      { ...users, related: [{ collection: 'devices', through: 'grant-policies', policyType: true, operationId: 'listUserDevices' }] },
      devices,
      policy({ related: [{ collection: 'users', operationId: 'listGrantPolicyUsers' }] }),
    ]);
    expect(r.related.map((x) => [x.parent, x.child, x.via, x.policyType])).toEqual([
      ['users', 'devices', 'policy', true],
      ['grant-policies', 'users', 'members', false],
    ]);
  });

  it('refuse a role list selecting entities without role attributes', () => {
    expect(() => deriveRelations([users, entity('devices', 'device', false), policy()])).toThrow(/devices .* no roleAttributes/);
  });

  it('refuse a role list that is not a set field', () => {
    const p = policy({ roleLists: { name: 'users' } });
    expect(() => deriveRelations([users, devices, p])).toThrow(/grant-policies\.name is not a set field/);
  });

  it('refuse a related list between entities that names no policy to go through', () => {
    const u = { ...users, related: [{ collection: 'devices', operationId: 'listUserDevices' }] };
    expect(() => deriveRelations([u, devices, policy()])).toThrow(/users\/devices: neither side is a policy/);
  });

  it('refuse policyType through a policy kind without a Dial / Bind type', () => {
    const untyped = policy();
    const { type: _type, ...fields } = untyped.fields;
    const u = { ...users, related: [{ collection: 'devices', through: 'grant-policies', policyType: true, operationId: 'x' }] };
    expect(() => deriveRelations([u, devices, { ...untyped, fields }])).toThrow(/policyType needs a policy kind with a Dial \/ Bind type/);
  });

  it('refuse a related list over a policy whose lists do not select the entity', () => {
    const u = { ...users, related: [{ collection: 'devices', through: 'grant-policies', operationId: 'x' }] };
    const p = policy({ roleLists: { userRoles: 'users' } });
    expect(() => deriveRelations([u, devices, p])).toThrow(/grant-policies has 0 role lists selecting devices/);
  });

  it('refuse a role list naming no resource', () => {
    expect(() => deriveRelations([users, policy()])).toThrow(/no resource devices/);
  });
});

// ---- link lists and references ---------------------------------------------------------------------

/** Users keep the ids of their groups in a link table; a badge refers to its user. */
const linkedUsers = (over: Partial<ResourceDef> = {}): ResourceDef => ({
  ...entity('users', 'user'),
  fields: { name: field.name(), groups: field.set('ids of groups', { virtual: true }) },
  linkLists: { groups: 'groups' },
  ...over,
});
const groups = (over: Partial<ResourceDef> = {}): ResourceDef => ({ ...entity('groups', 'group'), permission: 'group', ...over });
const badges = (fields: ResourceDef['fields'] = { user: field.ref('users', 'its user', { column: 'user_id' }) }): ResourceDef => ({
  ...entity('badges', 'badge'),
  permission: 'badge',
  fields: { name: field.name(), ...fields },
});

describe('link lists, derived from declarations', () => {
  it('name the link table and its columns after the owner and the member, like the policy link tables', () => {
    const r = deriveRelations([linkedUsers(), groups()]);
    expect(r.linkLists).toEqual([
      {
        collection: 'users',
        field: 'groups',
        holds: 'groups',
        table: 'user_groups',
        owner: { column: 'user_id', table: 'users' },
        member: { column: 'group_id', table: 'groups' },
      },
    ]);
    expect(r.linkTables).toEqual([]);
  });

  it('relate both sides through the one table, each list reading the other column', () => {
    const r = deriveRelations([
      linkedUsers({ related: [{ collection: 'groups', operationId: 'listUserGroups' }] }),
      groups({ related: [{ collection: 'users', operationId: 'listGroupUsers' }] }),
    ]);
    expect(
      r.related.map((x) => [x.parent, x.child, x.via, x.permission, x.via === 'link' ? [x.link.table, x.parentColumn, x.childColumn] : null]),
    ).toEqual([
      ['users', 'groups', 'link', 'group', ['user_groups', 'user_id', 'group_id']],
      ['groups', 'users', 'link', 'service', ['user_groups', 'group_id', 'user_id']],
    ]);
  });

  it('refuse a link list that is not a set field', () => {
    const u = linkedUsers({ linkLists: { name: 'groups' } });
    expect(() => deriveRelations([u, groups()])).toThrow(/link list users\.name is not a set field/);
  });

  it('refuse a link list stored in a column too', () => {
    const u = linkedUsers({ fields: { name: field.name(), groups: field.set('ids of groups') } });
    expect(() => deriveRelations([u, groups()])).toThrow(/users\.groups is kept in its link table, so it must be virtual/);
  });

  it('refuse a link list naming no resource', () => {
    expect(() => deriveRelations([linkedUsers()])).toThrow(/no resource groups/);
  });

  it('refuse a link list holding ids of its own collection', () => {
    const u = linkedUsers({ linkLists: { groups: 'users' } });
    expect(() => deriveRelations([u])).toThrow(/users\.groups holds ids of its own collection/);
  });

  it('refuse a field that is both a role list and a link list', () => {
    const p = policy({
      fields: { ...policy().fields, userRoles: field.roles('users', { virtual: true }) },
      linkLists: { userRoles: 'users' },
    });
    expect(() => deriveRelations([users, devices, p])).toThrow(/grant-policies\.userRoles is both a role list and a link list/);
  });

  it('refuse two link lists kept in one table', () => {
    const u = linkedUsers({
      fields: { name: field.name(), groups: field.set('ids', { virtual: true }), teams: field.set('ids', { virtual: true }) },
      linkLists: { groups: 'groups', teams: 'groups' },
    });
    expect(() => deriveRelations([u, groups()])).toThrow(/users\.teams: the link table user_groups is declared twice/);
  });

  it('refuse a link list kept in the link table of a role list', () => {
    const p = policy({
      fields: { ...policy().fields, members: field.set('ids', { virtual: true }) },
      linkLists: { members: 'users' },
    });
    expect(() => deriveRelations([users, devices, p])).toThrow(/the link table grant_policy_users is declared twice/);
  });

  it('refuse a related list that two link lists could go through', () => {
    const u = linkedUsers({ related: [{ collection: 'groups', operationId: 'x' }] });
    const g = groups({ fields: { name: field.name(), users: field.set('ids', { virtual: true }) }, linkLists: { users: 'users' } });
    expect(() => deriveRelations([u, g])).toThrow(/users\/groups: 2 link lists relate them/);
  });

  it('refuse a related list that a link list and a policy both relate', () => {
    const d = { ...devices, fields: { ...devices.fields, policies: field.set('ids', { virtual: true }) }, linkLists: { policies: 'grant-policies' } };
    const p = policy({ related: [{ collection: 'devices', operationId: 'x' }] });
    expect(() => deriveRelations([users, d, p])).toThrow(/grant-policies\/devices: both a link list and a policy relate them/);
  });

  it('refuse policyType on a related list through a link list', () => {
    const u = linkedUsers({ related: [{ collection: 'groups', policyType: true, operationId: 'x' }] });
    expect(() => deriveRelations([u, groups()])).toThrow(/users\/groups: policyType needs a policy kind/);
  });
});

describe('related lists by reference, derived from declarations', () => {
  it("read the child's reference column, and take the child's permission", () => {
    const r = deriveRelations([
      {
        ...users,
        related: [
          { collection: 'badges', by: 'user', operationId: 'listUserBadges' },
          { collection: 'devices', by: 'owner', operationId: 'listUserDevices' },
        ],
      },
      { ...badges(), permission: 'badge' },
      { ...devices, permission: 'device', fields: { ...devices.fields, owner: field.ref('users', 'its owner') } },
    ]);
    expect(r.related.map((x) => [x.parent, x.child, x.via, x.permission, x.via === 'reference' ? [x.field, x.column] : null])).toEqual([
      ['users', 'badges', 'reference', 'badge', ['user', 'user_id']],
      ['users', 'devices', 'reference', 'device', ['owner', 'owner']],
    ]);
  });

  it('refuse a reference field that does not exist, is no reference, or names another collection', () => {
    const u = (by: string) => ({ ...users, related: [{ collection: 'badges', by, operationId: 'x' }] });
    const b = badges({ user: field.ref('users', 'its user'), label: field.string('label'), device: field.ref('devices', 'its device') });
    for (const by of ['nope', 'label', 'device']) {
      expect(() => deriveRelations([u(by), b, devices])).toThrow(new RegExp(`users/badges: badges\\.${by} is not a stored reference to users`));
    }
  });

  it('refuse a virtual reference field', () => {
    const u = { ...users, related: [{ collection: 'badges', by: 'user', operationId: 'x' }] };
    const b = badges({ user: field.ref('users', 'its user', { virtual: true }) });
    expect(() => deriveRelations([u, b])).toThrow(/badges\.user is not a stored reference to users/);
  });

  it('refuse a reference and a policy kind named together', () => {
    const u = { ...users, related: [{ collection: 'devices', by: 'owner', through: 'grant-policies', operationId: 'x' }] };
    const d = { ...devices, fields: { ...devices.fields, owner: field.ref('users', 'its owner') } };
    expect(() => deriveRelations([u, d, policy()])).toThrow(/users\/devices: a reference \(by\) and a policy kind \(through\) both named/);
  });

  it('refuse policyType on a related list by reference', () => {
    const u = { ...users, related: [{ collection: 'badges', by: 'user', policyType: true, operationId: 'x' }] };
    expect(() => deriveRelations([u, badges()])).toThrow(/users\/badges: policyType needs a policy kind/);
  });

  it('refuse a related list naming no resource', () => {
    const u = { ...users, related: [{ collection: 'badges', by: 'user', operationId: 'x' }] };
    expect(() => deriveRelations([u])).toThrow(/no resource badges/);
  });
});
