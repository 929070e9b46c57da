// Policy link maintenance against a brute-force oracle: after every write, each link table must hold
// exactly the (policy, entity) pairs the pure matcher selects over all policies and all entities, and
// role_attribute_index exactly the entities' role attributes.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Resources } from '../src/domain/resources.js';
import type { PolicyLinks } from '../src/policy/links.js';
import { matches } from '../src/policy/roles.js';
import type { Entity } from '../src/store/repository.js';
import type { Db } from '../src/store/dialect.js';
import { startTestController, type TestController } from './helpers.js';

type Kind = 'identity' | 'service' | 'edge-router' | 'posture-check';
type PolicyKind = 'service-policies' | 'edge-router-policies' | 'service-edge-router-policies';
type RoleField = 'identityRoles' | 'serviceRoles' | 'edgeRouterRoles' | 'postureCheckRoles';

// The mapping of behaviour.md §4 and the migration, written out independently of the engine's.
const ENTITY: Record<Kind, { collection: string; table: string; body: Record<string, unknown> }> = {
  identity: { collection: 'identities', table: 'identities', body: { type: 'User', isAdmin: false } },
  service: { collection: 'services', table: 'services', body: {} },
  'edge-router': { collection: 'edge-routers', table: 'edge_routers', body: {} },
  'posture-check': { collection: 'posture-checks', table: 'posture_checks', body: { typeId: 'MFA' } },
};
const FIELD_KIND: Record<RoleField, Kind> = {
  identityRoles: 'identity',
  serviceRoles: 'service',
  edgeRouterRoles: 'edge-router',
  postureCheckRoles: 'posture-check',
};
const LINKS: { policy: PolicyKind; policyTable: string; field: RoleField; rolesColumn: string; table: string; column: string }[] = [
  { policy: 'service-policies', policyTable: 'service_policies', field: 'identityRoles', rolesColumn: 'identity_roles', table: 'service_policy_identities', column: 'identity_id' },
  { policy: 'service-policies', policyTable: 'service_policies', field: 'serviceRoles', rolesColumn: 'service_roles', table: 'service_policy_services', column: 'service_id' },
  { policy: 'service-policies', policyTable: 'service_policies', field: 'postureCheckRoles', rolesColumn: 'posture_check_roles', table: 'service_policy_posture_checks', column: 'posture_check_id' },
  { policy: 'edge-router-policies', policyTable: 'edge_router_policies', field: 'identityRoles', rolesColumn: 'identity_roles', table: 'edge_router_policy_identities', column: 'identity_id' },
  { policy: 'edge-router-policies', policyTable: 'edge_router_policies', field: 'edgeRouterRoles', rolesColumn: 'edge_router_roles', table: 'edge_router_policy_edge_routers', column: 'edge_router_id' },
  { policy: 'service-edge-router-policies', policyTable: 'service_edge_router_policies', field: 'serviceRoles', rolesColumn: 'service_roles', table: 'service_edge_router_policy_services', column: 'service_id' },
  { policy: 'service-edge-router-policies', policyTable: 'service_edge_router_policies', field: 'edgeRouterRoles', rolesColumn: 'edge_router_roles', table: 'service_edge_router_policy_edge_routers', column: 'edge_router_id' },
];
const POLICY_FIELDS: Record<PolicyKind, RoleField[]> = {
  'service-policies': ['identityRoles', 'serviceRoles', 'postureCheckRoles'],
  'edge-router-policies': ['identityRoles', 'edgeRouterRoles'],
  'service-edge-router-policies': ['serviceRoles', 'edgeRouterRoles'],
};

const parse = (v: unknown): string[] => (typeof v === 'string' ? JSON.parse(v) : ((v as string[] | null) ?? []));

/** Every link table and the attribute index, as they are and as the oracle says they should be. */
async function snapshot(db: Db): Promise<{ actual: Record<string, string[]>; expected: Record<string, string[]> }> {
  const actual: Record<string, string[]> = {};
  const expected: Record<string, string[]> = {};
  const entities = new Map<Kind, { id: string; roleAttributes: string[] }[]>();
  for (const kind of Object.keys(ENTITY) as Kind[]) {
    const rows = await db.selectFrom(ENTITY[kind].table).select(['id', 'role_attributes']).execute();
    entities.set(kind, rows.map((r) => ({ id: String(r.id), roleAttributes: parse(r.role_attributes) })));
  }
  for (const l of LINKS) {
    const policies = await db.selectFrom(l.policyTable).select(['id', 'semantic', l.rolesColumn]).execute();
    const want: string[] = [];
    for (const p of policies) {
      const policy = { semantic: String(p.semantic), roles: parse(p[l.rolesColumn]) };
      for (const e of entities.get(FIELD_KIND[l.field])!) if (matches(policy, e)) want.push(`${String(p.id)} ${e.id}`);
    }
    const rows = await db.selectFrom(l.table).select(['policy_id', l.column]).execute();
    actual[l.table] = rows.map((r) => `${String(r.policy_id)} ${String(r[l.column])}`).sort();
    expected[l.table] = want.sort();
  }
  const index = await db.selectFrom('role_attribute_index').select(['kind', 'attribute', 'entity_id']).execute();
  actual.role_attribute_index = index.map((r) => `${String(r.kind)} ${String(r.attribute)} ${String(r.entity_id)}`).sort();
  expected.role_attribute_index = [...entities]
    .flatMap(([kind, list]) => list.flatMap((e) => [...new Set(e.roleAttributes)].map((a) => `${kind} ${a} ${e.id}`)))
    .sort();
  return { actual, expected };
}

async function expectExact(db: Db, context: string): Promise<void> {
  const { actual, expected } = await snapshot(db);
  expect(actual, context).toEqual(expected);
}

/** The posture check type the tests' checks use, whether or not the controller seeds it. */
async function ensureMfaType(resources: Resources): Promise<void> {
  const types = resources.get('posture-check-types');
  await resources.write(async (ctx) => {
    if (await types.repo.exists(ctx.tx, 'MFA')) return;
    await types.repo.insert(ctx.tx, { id: 'MFA', name: 'MFA', createdAt: ctx.now, updatedAt: ctx.now, tags: {}, operatingSystems: [] });
  });
}

// ---- a small language for scenarios -------------------------------------------------------------

type Roles = Partial<Record<RoleField, string[]>>;
type Step =
  | { op: 'entity'; kind: Kind; name: string; attrs?: string[]; extra?: Record<string, unknown> }
  | { op: 'set'; kind: Kind; name: string; values: Record<string, unknown> }
  | { op: 'attrs'; kind: Kind; name: string; attrs: string[] | null }
  | { op: 'rename'; kind: Kind; name: string; to: string }
  | { op: 'delete'; kind: Kind; name: string }
  | { op: 'policy'; kind: PolicyKind; name: string; semantic: 'AllOf' | 'AnyOf'; roles: Roles; type?: 'Dial' | 'Bind' }
  | { op: 'patch-policy'; kind: PolicyKind; name: string; semantic?: 'AllOf' | 'AnyOf'; roles?: Roles; rename?: string }
  | { op: 'update-policy'; kind: PolicyKind; name: string; semantic: 'AllOf' | 'AnyOf'; roles: Roles }
  | { op: 'delete-policy'; kind: PolicyKind; name: string }
  /** What one role list selects, by entity name: a check independent of the oracle. */
  | { op: 'expect'; kind: PolicyKind; name: string; field: RoleField; names: string[] };

class World {
  readonly ids = new Map<string, string>();
  constructor(
    readonly resources: Resources,
    readonly prefix: string,
  ) {}

  private key(kind: string, name: string): string {
    return `${kind}:${name}`;
  }

  id(kind: string, name: string): string {
    const id = this.ids.get(this.key(kind, name));
    if (id === undefined) throw new Error(`no ${kind} ${name} in this scenario`);
    return id;
  }

  /** `@name` → `@<id>` of the entity of the list's kind; other roles unchanged. */
  private roles(roles: Roles): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (const [field, list] of Object.entries(roles) as [RoleField, string[]][]) {
      out[field] = list.map((r) => (r.startsWith('@') ? `@${this.id(FIELD_KIND[field], r.slice(1))}` : r));
    }
    return out;
  }

  async run(step: Step): Promise<void> {
    const r = this.resources;
    switch (step.op) {
      case 'entity': {
        const kind = ENTITY[step.kind];
        const e = await r
          .get(kind.collection)
          .create({ ...kind.body, ...step.extra, name: `${this.prefix}${step.name}`, roleAttributes: step.attrs ?? [] });
        this.ids.set(this.key(step.kind, step.name), e.id);
        return;
      }
      case 'set':
        await r.get(ENTITY[step.kind].collection).patch(this.id(step.kind, step.name), step.values);
        return;
      case 'attrs':
        await r.get(ENTITY[step.kind].collection).patch(this.id(step.kind, step.name), { roleAttributes: step.attrs });
        return;
      case 'rename':
        await r.get(ENTITY[step.kind].collection).patch(this.id(step.kind, step.name), { name: `${this.prefix}${step.to}` });
        return;
      case 'delete':
        await r.get(ENTITY[step.kind].collection).delete(this.id(step.kind, step.name));
        return;
      case 'policy': {
        const body = {
          name: `${this.prefix}${step.name}`,
          semantic: step.semantic,
          ...(step.kind === 'service-policies' && { type: step.type ?? 'Dial' }),
          ...this.roles(step.roles),
        };
        const p = await r.get(step.kind).create(body);
        this.ids.set(this.key(step.kind, step.name), p.id);
        return;
      }
      case 'patch-policy':
        await r.get(step.kind).patch(this.id(step.kind, step.name), {
          ...(step.semantic && { semantic: step.semantic }),
          ...(step.rename && { name: `${this.prefix}${step.rename}` }),
          ...this.roles(step.roles ?? {}),
        });
        return;
      case 'update-policy': {
        const prev = await r.get(step.kind).get(this.id(step.kind, step.name));
        await r.get(step.kind).update(this.id(step.kind, step.name), {
          name: prev.name,
          semantic: step.semantic,
          ...(step.kind === 'service-policies' && { type: prev.type }),
          ...this.roles(step.roles),
        });
        return;
      }
      case 'delete-policy':
        await r.get(step.kind).delete(this.id(step.kind, step.name));
        return;
      case 'expect': {
        const l = LINKS.find((x) => x.policy === step.kind && x.field === step.field)!;
        const rows = await r.store.db
          .selectFrom(l.table)
          .select(l.column)
          .where('policy_id', '=', this.id(step.kind, step.name))
          .execute();
        const want = step.names.map((n) => this.id(FIELD_KIND[step.field], n)).sort();
        expect(rows.map((row) => String(row[l.column])).sort(), `${step.name}.${step.field}`).toEqual(want);
        return;
      }
    }
  }
}

const SP = 'service-policies' as const;
const ERP = 'edge-router-policies' as const;
const SERP = 'service-edge-router-policies' as const;

const scenarios: [string, Step[]][] = [
  [
    'AllOf selects entities carrying every attribute',
    [
      { op: 'entity', kind: 'identity', name: 'ab', attrs: ['a', 'b'] },
      { op: 'entity', kind: 'identity', name: 'a', attrs: ['a'] },
      { op: 'entity', kind: 'identity', name: 'abc', attrs: ['a', 'b', 'c'] },
      { op: 'entity', kind: 'service', name: 's', attrs: ['web'] },
      { op: 'policy', kind: SP, name: 'p', semantic: 'AllOf', roles: { identityRoles: ['#a', '#b'], serviceRoles: ['#web'] } },
      { op: 'expect', kind: SP, name: 'p', field: 'identityRoles', names: ['ab', 'abc'] },
      { op: 'expect', kind: SP, name: 'p', field: 'serviceRoles', names: ['s'] },
    ],
  ],
  [
    'AnyOf selects entities carrying one attribute',
    [
      { op: 'entity', kind: 'edge-router', name: 'r1', attrs: ['eu'] },
      { op: 'entity', kind: 'edge-router', name: 'r2', attrs: ['us'] },
      { op: 'entity', kind: 'edge-router', name: 'r3', attrs: ['apac'] },
      { op: 'entity', kind: 'identity', name: 'i', attrs: ['staff'] },
      { op: 'policy', kind: ERP, name: 'p', semantic: 'AnyOf', roles: { edgeRouterRoles: ['#eu', '#us'], identityRoles: ['#staff'] } },
      { op: 'expect', kind: ERP, name: 'p', field: 'edgeRouterRoles', names: ['r1', 'r2'] },
      { op: 'expect', kind: ERP, name: 'p', field: 'identityRoles', names: ['i'] },
    ],
  ],
  [
    '#all selects every entity, including later ones',
    [
      { op: 'entity', kind: 'service', name: 's1' },
      { op: 'entity', kind: 'edge-router', name: 'r1', attrs: ['x'] },
      { op: 'policy', kind: SERP, name: 'p', semantic: 'AllOf', roles: { serviceRoles: ['#all'], edgeRouterRoles: ['#all'] } },
      { op: 'entity', kind: 'service', name: 's2', attrs: ['y'] },
      { op: 'entity', kind: 'edge-router', name: 'r2' },
      { op: 'delete', kind: 'service', name: 's1' },
    ],
  ],
  [
    '@id selects the named entity only, under either semantic',
    [
      { op: 'entity', kind: 'identity', name: 'i1', attrs: ['a'] },
      { op: 'entity', kind: 'identity', name: 'i2', attrs: ['a'] },
      { op: 'entity', kind: 'posture-check', name: 'pc', attrs: ['strict'] },
      { op: 'policy', kind: SP, name: 'p', semantic: 'AllOf', roles: { identityRoles: ['@i1'], postureCheckRoles: ['@pc'] } },
      { op: 'expect', kind: SP, name: 'p', field: 'identityRoles', names: ['i1'] },
      { op: 'attrs', kind: 'identity', name: 'i1', attrs: [] },
      { op: 'expect', kind: SP, name: 'p', field: 'identityRoles', names: ['i1'] },
      { op: 'patch-policy', kind: SP, name: 'p', semantic: 'AnyOf' },
      { op: 'expect', kind: SP, name: 'p', field: 'postureCheckRoles', names: ['pc'] },
    ],
  ],
  [
    'an attribute added and removed moves the entity in and out',
    [
      { op: 'entity', kind: 'identity', name: 'i' },
      { op: 'policy', kind: SP, name: 'all-of', semantic: 'AllOf', roles: { identityRoles: ['#a', '#b'] } },
      { op: 'policy', kind: ERP, name: 'any-of', semantic: 'AnyOf', roles: { identityRoles: ['#a', '#z'] } },
      { op: 'attrs', kind: 'identity', name: 'i', attrs: ['a'] },
      { op: 'expect', kind: SP, name: 'all-of', field: 'identityRoles', names: [] },
      { op: 'expect', kind: ERP, name: 'any-of', field: 'identityRoles', names: ['i'] },
      { op: 'attrs', kind: 'identity', name: 'i', attrs: ['a', 'b'] },
      { op: 'expect', kind: SP, name: 'all-of', field: 'identityRoles', names: ['i'] },
      { op: 'attrs', kind: 'identity', name: 'i', attrs: ['b'] },
      { op: 'expect', kind: SP, name: 'all-of', field: 'identityRoles', names: [] },
      { op: 'expect', kind: ERP, name: 'any-of', field: 'identityRoles', names: [] },
      { op: 'attrs', kind: 'identity', name: 'i', attrs: null },
    ],
  ],
  [
    'a policy edited (patch and full update) and deleted',
    [
      { op: 'entity', kind: 'service', name: 's1', attrs: ['a'] },
      { op: 'entity', kind: 'service', name: 's2', attrs: ['b'] },
      { op: 'entity', kind: 'edge-router', name: 'r', attrs: ['a'] },
      { op: 'policy', kind: SERP, name: 'p', semantic: 'AllOf', roles: { serviceRoles: ['#a'], edgeRouterRoles: ['#a'] } },
      { op: 'expect', kind: SERP, name: 'p', field: 'serviceRoles', names: ['s1'] },
      { op: 'patch-policy', kind: SERP, name: 'p', roles: { serviceRoles: ['#b'] } },
      { op: 'expect', kind: SERP, name: 'p', field: 'serviceRoles', names: ['s2'] },
      { op: 'expect', kind: SERP, name: 'p', field: 'edgeRouterRoles', names: ['r'] },
      { op: 'update-policy', kind: SERP, name: 'p', semantic: 'AnyOf', roles: { serviceRoles: ['#a', '#b'] } },
      { op: 'expect', kind: SERP, name: 'p', field: 'serviceRoles', names: ['s1', 's2'] },
      // A full update without edgeRouterRoles empties that list.
      { op: 'expect', kind: SERP, name: 'p', field: 'edgeRouterRoles', names: [] },
      { op: 'patch-policy', kind: SERP, name: 'p', rename: 'renamed' },
      { op: 'delete-policy', kind: SERP, name: 'p' },
      // A later change of a formerly selected entity must not bring the deleted policy back.
      { op: 'attrs', kind: 'service', name: 's1', attrs: ['a', 'b'] },
    ],
  ],
  [
    'an entity deleted takes its links and index rows with it',
    [
      { op: 'entity', kind: 'posture-check', name: 'pc1', attrs: ['x'] },
      { op: 'entity', kind: 'posture-check', name: 'pc2', attrs: ['x', 'y'] },
      { op: 'policy', kind: SP, name: 'p', semantic: 'AnyOf', roles: { postureCheckRoles: ['#x', '@pc2'] } },
      { op: 'delete', kind: 'posture-check', name: 'pc2' },
      { op: 'expect', kind: SP, name: 'p', field: 'postureCheckRoles', names: ['pc1'] },
      // The stale @id stays in the policy and does not block edits.
      { op: 'patch-policy', kind: SP, name: 'p', semantic: 'AllOf' },
      { op: 'expect', kind: SP, name: 'p', field: 'postureCheckRoles', names: ['pc1'] },
    ],
  ],
  [
    'an entity renamed keeps its links',
    [
      { op: 'entity', kind: 'edge-router', name: 'r', attrs: ['a'] },
      { op: 'entity', kind: 'identity', name: 'i', attrs: ['a'] },
      { op: 'policy', kind: ERP, name: 'p', semantic: 'AllOf', roles: { edgeRouterRoles: ['#a', '@r'], identityRoles: ['@i'] } },
      { op: 'rename', kind: 'edge-router', name: 'r', to: 'r-renamed' },
      { op: 'rename', kind: 'identity', name: 'i', to: 'i-renamed' },
      { op: 'expect', kind: ERP, name: 'p', field: 'edgeRouterRoles', names: ['r'] },
      { op: 'expect', kind: ERP, name: 'p', field: 'identityRoles', names: ['i'] },
    ],
  ],
  [
    // The system identity and edge router policy of a tunneler come and go with the flag.
    'a tunneler-enabled edge router',
    [
      { op: 'policy', kind: ERP, name: 'everyone', semantic: 'AnyOf', roles: { identityRoles: ['#all'], edgeRouterRoles: ['#edge'] } },
      { op: 'entity', kind: 'edge-router', name: 'tunneler', attrs: ['edge'], extra: { isTunnelerEnabled: true } },
      { op: 'set', kind: 'edge-router', name: 'tunneler', values: { isTunnelerEnabled: false } },
      { op: 'set', kind: 'edge-router', name: 'tunneler', values: { isTunnelerEnabled: true, roleAttributes: [] } },
      { op: 'set', kind: 'edge-router', name: 'tunneler', values: { name: 'tunneler-renamed', roleAttributes: ['edge'] } },
      { op: 'delete', kind: 'edge-router', name: 'tunneler' },
    ],
  ],
  [
    'mixed: several policies of every kind over shared entities',
    [
      { op: 'entity', kind: 'identity', name: 'i1', attrs: ['sales', 'eu'] },
      { op: 'entity', kind: 'identity', name: 'i2', attrs: ['eng'] },
      { op: 'entity', kind: 'service', name: 's1', attrs: ['crm'] },
      { op: 'entity', kind: 'service', name: 's2', attrs: ['git', 'crm'] },
      { op: 'entity', kind: 'edge-router', name: 'r1', attrs: ['eu'] },
      { op: 'entity', kind: 'posture-check', name: 'pc', attrs: ['mfa'] },
      { op: 'policy', kind: SP, name: 'dial', semantic: 'AnyOf', roles: { identityRoles: ['#sales', '@i2'], serviceRoles: ['#crm'], postureCheckRoles: ['#mfa'] } },
      { op: 'policy', kind: SP, name: 'bind', semantic: 'AllOf', type: 'Bind', roles: { identityRoles: ['#eng'], serviceRoles: ['#git', '#crm'] } },
      { op: 'policy', kind: ERP, name: 'erp', semantic: 'AllOf', roles: { identityRoles: ['#all'], edgeRouterRoles: ['#eu'] } },
      { op: 'policy', kind: SERP, name: 'serp', semantic: 'AnyOf', roles: { serviceRoles: ['#crm'], edgeRouterRoles: ['@r1'] } },
      { op: 'expect', kind: SP, name: 'dial', field: 'identityRoles', names: ['i1', 'i2'] },
      { op: 'expect', kind: SP, name: 'bind', field: 'serviceRoles', names: ['s2'] },
      { op: 'attrs', kind: 'identity', name: 'i1', attrs: ['eng'] },
      { op: 'attrs', kind: 'service', name: 's2', attrs: ['git'] },
      { op: 'expect', kind: SP, name: 'bind', field: 'identityRoles', names: ['i1', 'i2'] },
      { op: 'expect', kind: SP, name: 'bind', field: 'serviceRoles', names: [] },
      { op: 'delete', kind: 'edge-router', name: 'r1' },
      { op: 'entity', kind: 'edge-router', name: 'r2', attrs: ['eu'] },
      { op: 'expect', kind: ERP, name: 'erp', field: 'edgeRouterRoles', names: ['r2'] },
      { op: 'delete-policy', kind: SP, name: 'dial' },
      { op: 'delete', kind: 'identity', name: 'i2' },
    ],
  ],
];

describe('link maintenance scenarios', () => {
  // A fresh store per scenario, so that each one's expectations see only its own entities.
  let t: TestController | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it.each(scenarios)('%s', async (_name, steps) => {
    t = await startTestController();
    const resources = t.app.core.resources;
    await ensureMfaType(resources);
    const world = new World(resources, '');
    for (const [n, step] of steps.entries()) {
      await world.run(step);
      if (step.op !== 'expect') await expectExact(resources.store.db, `step ${n} ${JSON.stringify(step)}`);
    }
  });
});

describe('transactions', () => {
  let t: TestController;
  let resources: Resources;
  let links: PolicyLinks;
  beforeAll(async () => {
    t = await startTestController();
    resources = t.app.core.resources;
    links = t.app.core.links;
  });
  afterAll(async () => {
    await t.close();
  });

  const newPolicy = (ctx: { now: string }, id: string, roles: Record<string, string[]>): Entity => ({
    id,
    createdAt: ctx.now,
    updatedAt: ctx.now,
    tags: {},
    isSystem: false,
    name: id,
    semantic: 'AnyOf',
    identityRoles: [],
    edgeRouterRoles: [],
    ...roles,
  });

  it('a policy and then an entity it selects, written in one transaction, are linked', async () => {
    const policies = resources.get('edge-router-policies');
    const identities = resources.get('identities');
    const member = await identities.create({ name: 'same-tx-member', type: 'User', isAdmin: false });
    await resources.write(async (ctx) => {
      const policy = newPolicy(ctx, 'tx-same', { identityRoles: ['#same-tx'] });
      await policies.repo.insert(ctx.tx, policy);
      await links.refreshPolicyLinks(ctx, 'edge-router-policies', policy);
      await identities.repo.update(ctx.tx, member.id, { roleAttributes: ['same-tx'] });
      await links.refreshEntityLinks(ctx, 'identity', { ...member, roleAttributes: ['same-tx'] });
    });
    const rows = await resources.store.db.selectFrom('edge_router_policy_identities').select('identity_id').where('policy_id', '=', 'tx-same').execute();
    expect(rows.map((r) => r.identity_id)).toEqual([member.id]);
    await expectExact(resources.store.db, 'after the combined write');
  });

  it('a rolled-back policy is not selected by later entity writes', async () => {
    const policies = resources.get('edge-router-policies');
    await expect(
      resources.write(async (ctx) => {
        const policy = newPolicy(ctx, 'tx-rolled-back', { identityRoles: ['#rollback'] });
        await policies.repo.insert(ctx.tx, policy);
        await links.refreshPolicyLinks(ctx, 'edge-router-policies', policy);
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(await policies.repo.exists(resources.store.db, 'tx-rolled-back')).toBe(false);
    await resources.get('identities').create({ name: 'after-rollback', type: 'User', isAdmin: false, roleAttributes: ['rollback'] });
    await expectExact(resources.store.db, 'after the rollback');
  });

  it('a rolled-back policy delete leaves the policy selecting entities', async () => {
    const policies = resources.get('edge-router-policies');
    const kept = await policies.create({ name: 'kept', semantic: 'AnyOf', identityRoles: ['#kept'] });
    await expect(
      resources.write(async (ctx) => {
        await policies.repo.delete(ctx.tx, kept.id);
        await links.forgetPolicy(ctx, 'edge-router-policies', kept.id);
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    const i = await resources.get('identities').create({ name: 'kept-member', type: 'User', isAdmin: false, roleAttributes: ['kept'] });
    const rows = await resources.store.db.selectFrom('edge_router_policy_identities').select('identity_id').where('policy_id', '=', kept.id).execute();
    expect(rows.map((r) => r.identity_id)).toEqual([i.id]);
    await expectExact(resources.store.db, 'after the rolled-back delete');
  });

  it('stays exact under concurrent writes, some of them rolled back', async () => {
    const identities = resources.get('identities');
    const policies = resources.get('service-policies');
    const members = await Promise.all(
      Array.from({ length: 10 }, (_, i) => identities.create({ name: `concurrent-${i}`, type: 'User', isAdmin: false })),
    );
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 30; i++) {
      const attr = `c${i % 4}`;
      if (i % 3 === 0) {
        writes.push(policies.create({ name: `concurrent-policy-${i}`, type: 'Dial', semantic: 'AnyOf', identityRoles: [`#${attr}`] }));
      } else if (i % 3 === 1) {
        writes.push(identities.patch(members[i % 10]!.id, { roleAttributes: [attr, `c${(i + 1) % 4}`] }));
      } else {
        writes.push(
          resources
            .write(async (ctx) => {
              const policy: Entity = {
                id: `concurrent-rolled-back-${i}`,
                createdAt: ctx.now,
                updatedAt: ctx.now,
                tags: {},
                name: `concurrent-rolled-back-${i}`,
                type: 'Dial',
                semantic: 'AnyOf',
                identityRoles: [`#${attr}`],
                serviceRoles: [],
                postureCheckRoles: [],
              };
              await policies.repo.insert(ctx.tx, policy);
              await links.refreshPolicyLinks(ctx, 'service-policies', policy);
              throw new Error('abort');
            })
            .catch(() => undefined),
        );
      }
    }
    await Promise.all(writes);
    await expectExact(resources.store.db, 'after the concurrent writes');
    // And later single writes still see exactly the committed policies.
    for (const m of members) await identities.patch(m.id, { roleAttributes: ['c0', 'c1', 'c2', 'c3'] });
    await expectExact(resources.store.db, 'after the follow-up writes');
    const linked = await resources.store.db
      .selectFrom('service_policy_identities')
      .select('policy_id')
      .where('identity_id', '=', members[0]!.id)
      .execute();
    expect(linked).toHaveLength(10);
  });

  it('a policy row removed without forgetPolicy is neither linked nor fatal', async () => {
    const policies = resources.get('edge-router-policies');
    const gone = await policies.create({ name: 'removed-directly', semantic: 'AnyOf', identityRoles: ['#direct'] });
    await resources.write(async (ctx) => {
      await policies.repo.delete(ctx.tx, gone.id);
    });
    await resources.get('identities').create({ name: 'direct-member', type: 'User', isAdmin: false, roleAttributes: ['direct'] });
    await expectExact(resources.store.db, 'after the direct removal');
  });
});

// ---- randomized ---------------------------------------------------------------------------------

/** mulberry32: a small deterministic PRNG. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

describe('randomized operations', () => {
  let t: TestController;
  let resources: Resources;
  beforeAll(async () => {
    t = await startTestController();
    resources = t.app.core.resources;
    await ensureMfaType(resources);
  });
  afterAll(async () => {
    await t.close();
  });

  it('keeps every link table equal to the brute force after each of 200 operations', async () => {
    const random = prng(20260102);
    const int = (n: number) => Math.floor(random() * n);
    const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
    const ATTRS = ['a', 'b', 'c', 'd', 'e', 'f'];
    const attrs = () => ATTRS.filter(() => random() < 0.3);
    const kinds: Kind[] = ['identity', 'service', 'edge-router', 'posture-check'];
    const live = new Map<Kind, string[]>(kinds.map((k) => [k, []]));
    const policies = new Map<PolicyKind, string[]>([
      [SP, []],
      [ERP, []],
      [SERP, []],
    ]);
    let serial = 0;

    const createEntity = async (kind: Kind) => {
      const e = await resources.get(ENTITY[kind].collection).create({ ...ENTITY[kind].body, name: `${kind}-${serial++}`, roleAttributes: attrs() });
      live.get(kind)!.push(e.id);
    };
    const roleList = (kind: Kind): string[] => {
      const r = random();
      if (r < 0.08) return ['#all'];
      if (r < 0.15) return [];
      const list = attrs().map((a) => `#${a}`);
      const ids = live.get(kind)!;
      for (let n = int(3); n > 0 && ids.length > 0; n--) list.push(`@${pick(ids)}`);
      return list.length > 0 ? list : [`#${pick(ATTRS)}`];
    };
    const policyBody = (kind: PolicyKind) => {
      const body: Record<string, unknown> = { semantic: pick(['AllOf', 'AnyOf']) };
      for (const f of POLICY_FIELDS[kind]) body[f] = roleList(FIELD_KIND[f]);
      return body;
    };
    const createPolicy = async (kind: PolicyKind) => {
      const body = { ...policyBody(kind), name: `${kind}-${serial++}`, ...(kind === SP && { type: pick(['Dial', 'Bind']) }) };
      const p = await resources.get(kind).create(body);
      policies.get(kind)!.push(p.id);
    };

    for (const [kind, n] of [['identity', 30], ['service', 20], ['edge-router', 8], ['posture-check', 6]] as const) {
      for (let i = 0; i < n; i++) await createEntity(kind);
    }
    for (let i = 0; i < 15; i++) await createPolicy(([SP, ERP, SERP] as const)[i % 3]!);
    await expectExact(resources.store.db, 'initial universe');

    const counts: Record<string, number> = {};
    for (let step = 0; step < 200; step++) {
      const r = random();
      const kind = pick(kinds);
      const pkind = pick([SP, ERP, SERP] as const);
      const ids = live.get(kind)!;
      const pids = policies.get(pkind)!;
      let op: string;
      if (r < 0.35 && ids.length > 0) {
        op = 'entity attributes';
        await resources.get(ENTITY[kind].collection).patch(pick(ids), { roleAttributes: attrs() });
      } else if (r < 0.42) {
        op = 'entity create';
        await createEntity(kind);
      } else if (r < 0.5 && ids.length > 2) {
        op = 'entity delete';
        const id = ids.splice(int(ids.length), 1)[0]!;
        await resources.get(ENTITY[kind].collection).delete(id);
      } else if (r < 0.55 && ids.length > 0) {
        op = 'entity rename';
        await resources.get(ENTITY[kind].collection).patch(pick(ids), { name: `${kind}-${serial++}` });
      } else if (r < 0.7 && pids.length > 0) {
        op = 'policy patch';
        const body = policyBody(pkind);
        // Patch a random subset of the fields.
        for (const k of Object.keys(body)) if (random() < 0.4) delete body[k];
        await resources.get(pkind).patch(pick(pids), body);
      } else if (r < 0.8 && pids.length > 0) {
        op = 'policy update';
        const id = pick(pids);
        const prev = await resources.get(pkind).get(id);
        await resources.get(pkind).update(id, { ...policyBody(pkind), name: prev.name, ...(pkind === SP && { type: prev.type }) });
      } else if (r < 0.9 || pids.length === 0) {
        op = 'policy create';
        await createPolicy(pkind);
      } else {
        op = 'policy delete';
        const id = pids.splice(int(pids.length), 1)[0]!;
        await resources.get(pkind).delete(id);
      }
      counts[op] = (counts[op] ?? 0) + 1;
      await expectExact(resources.store.db, `step ${step}: ${op}`);
    }
    // The run exercised every kind of operation, not just a few.
    expect(Object.keys(counts).sort()).toEqual(
      ['entity attributes', 'entity create', 'entity delete', 'entity rename', 'policy create', 'policy delete', 'policy patch', 'policy update'].sort(),
    );
    // And the links are not trivially empty.
    const { actual } = await snapshot(resources.store.db);
    for (const l of LINKS) expect(actual[l.table]!.length, l.table).toBeGreaterThan(0);
  });
});
