// The relations derived from the resource definitions: the controller's own (role kinds are stored
// in the attribute index, so they never change), and declarations that do not fit together refused
// when the relations are derived, at start.
import { describe, expect, it } from 'vitest';
import { field, type ResourceDef } from '../src/resources/kit.js';
import { deriveRelations, LINK_TABLES, POLICY_SPECS, RELATED_LISTS, ROLE_KINDS } from '../src/resources/relations.js';

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

  it('serve each related list once, with an operation id of its own', () => {
    const routes = RELATED_LISTS.map((r) => `${r.parent}/${r.child}`);
    expect(new Set(routes).size).toBe(routes.length);
    expect(new Set(RELATED_LISTS.map((r) => r.operationId)).size).toBe(routes.length);
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
