// Link maintenance over an in-memory store, table-driven: what each role list of a policy selects,
// so which identity may dial or bind which service and reach which edge router, and which service
// is served by which router; the links and the role attribute index kept exact as policies and
// entities change; the in-memory policy index across writes and transactions (writes sharing one
// transaction, one of them rolled back to its savepoint; a whole transaction rolled back; another
// transaction's reload; the change feed; a reset); statements over more values than one chunk.
import type { CompiledQuery } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Kernel, type WriteContext } from '../kernel/kernel.js';
import { DEFAULT_AUTH_POLICY_ID, DEFAULT_PRIMARY, DEFAULT_SECONDARY } from '../resources/auth-policies.js';
import type { ResourceName } from '../resources/index.js';
import type { PolicyCollection, RoleKind } from '../resources/relations.js';
import { migrations } from '../store/migrations/index.js';
import { openSqlite } from '../store/sqlite.js';
import type { Entity } from '../store/repository.js';
import { Store, type Tx } from '../store/store.js';
import { entitiesMatching, existingIds, PolicyLinks, type LinkContext } from './links.js';
import { parseRoles } from './roles.js';

const NOW = '2026-03-04T05:06:07.000Z';
const BASE = { createdAt: NOW, updatedAt: NOW, tags: {} };

// The names the migrations give, written out here rather than taken from the relations under test.
const ENTITY: Record<RoleKind, { collection: ResourceName; table: string; body: Record<string, unknown> }> = {
  identity: {
    collection: 'identities',
    table: 'identities',
    body: { type: 'User', isAdmin: false, isDefaultAdmin: false, authPolicyId: DEFAULT_AUTH_POLICY_ID },
  },
  service: { collection: 'services', table: 'services', body: {} },
  'edge-router': { collection: 'edge-routers', table: 'edge_routers', body: {} },
  'posture-check': { collection: 'posture-checks', table: 'posture_checks', body: { typeId: 'MFA' } },
};
const SP = 'service-policies' as const;
const ERP = 'edge-router-policies' as const;
const SERP = 'service-edge-router-policies' as const;
type RoleField = 'identityRoles' | 'serviceRoles' | 'edgeRouterRoles' | 'postureCheckRoles';
type Roles = Partial<Record<RoleField, string[]>>;
/** Each policy kind's role lists and their link tables. */
const LISTS: Record<PolicyCollection, Partial<Record<RoleField, { table: string; column: string }>>> = {
  [SP]: {
    identityRoles: { table: 'service_policy_identities', column: 'identity_id' },
    serviceRoles: { table: 'service_policy_services', column: 'service_id' },
    postureCheckRoles: { table: 'service_policy_posture_checks', column: 'posture_check_id' },
  },
  [ERP]: {
    identityRoles: { table: 'edge_router_policy_identities', column: 'identity_id' },
    edgeRouterRoles: { table: 'edge_router_policy_edge_routers', column: 'edge_router_id' },
  },
  [SERP]: {
    serviceRoles: { table: 'service_edge_router_policy_services', column: 'service_id' },
    edgeRouterRoles: { table: 'service_edge_router_policy_edge_routers', column: 'edge_router_id' },
  },
};
const POLICY_TABLE: Record<PolicyCollection, string> = {
  [SP]: 'service_policies',
  [ERP]: 'edge_router_policies',
  [SERP]: 'service_edge_router_policies',
};

let store: Store;
let kernel: Kernel;
let links: PolicyLinks;
/** What the links told `observe`, in order. */
let observed: { trigger: string; seconds: number }[];

beforeEach(async () => {
  store = new Store(openSqlite(':memory:'));
  await store.migrate(migrations);
  kernel = new Kernel({ store, clock: () => Date.parse(NOW) });
  observed = [];
  // Not told of the change feed (as the controller's cache registry would have it): the tests below
  // tell it what they mean it to know.
  links = new PolicyLinks(store.dialect, (trigger, seconds) => observed.push({ trigger, seconds }));
  await kernel.write(async (ctx) => {
    await ctx.insert('auth-policies', { ...BASE, id: DEFAULT_AUTH_POLICY_ID, name: 'Default', isSystem: true, primary: DEFAULT_PRIMARY, secondary: DEFAULT_SECONDARY });
    await ctx.insert('posture-check-types', { ...BASE, id: 'MFA', name: 'MFA', operatingSystems: [] });
  });
});
afterEach(async () => {
  await store.close();
});

// ---- writes as the domain makes them: the row, then its links ---------------------------------------

const write = (fn: (ctx: WriteContext) => Promise<void>): Promise<void> => kernel.write(fn);

function entity(kind: RoleKind, id: string, attributes: string[]): Entity {
  return { ...BASE, ...ENTITY[kind].body, id, name: id, roleAttributes: attributes };
}

async function addEntity(ctx: WriteContext, kind: RoleKind, id: string, attributes: string[] = []): Promise<void> {
  const e = entity(kind, id, attributes);
  await ctx.insert(ENTITY[kind].collection, e);
  await links.refreshEntityLinks(ctx, kind, e);
}

async function setAttributes(ctx: WriteContext, kind: RoleKind, id: string, attributes: string[]): Promise<void> {
  await ctx.update(ENTITY[kind].collection, id, { roleAttributes: attributes });
  await links.refreshEntityLinks(ctx, kind, entity(kind, id, attributes));
}

async function removeEntity(ctx: WriteContext, kind: RoleKind, id: string): Promise<void> {
  await ctx.remove(ENTITY[kind].collection, id);
  await links.forgetEntity(ctx, kind, id);
}

function policy(collection: PolicyCollection, id: string, semantic: string, roles: Roles, type = 'Dial'): Entity {
  const lists = Object.fromEntries(Object.keys(LISTS[collection]).map((f) => [f, roles[f as RoleField] ?? []]));
  return { ...BASE, id, name: id, semantic, ...(collection === SP && { type }), ...lists };
}

/** Creates the policy, or replaces its semantic and role lists. */
async function putPolicy(ctx: WriteContext, collection: PolicyCollection, id: string, semantic: string, roles: Roles, type = 'Dial'): Promise<void> {
  const p = policy(collection, id, semantic, roles, type);
  const exists = await ctx.tx.selectFrom(POLICY_TABLE[collection]).select('id').where('id', '=', id).executeTakeFirst();
  if (exists) await ctx.update(collection, id, p);
  else await ctx.insert(collection, p);
  await links.refreshPolicyLinks(ctx, collection, p);
}

async function removePolicy(ctx: WriteContext, collection: PolicyCollection, id: string): Promise<void> {
  await ctx.remove(collection, id);
  await links.forgetPolicy(ctx, collection, id);
}

/** Changes a policy's role lists in the store only, as another process would. */
async function setRolesBehindTheBack(collection: PolicyCollection, id: string, roles: Roles): Promise<void> {
  await kernel.repo(collection).update(store.db, id, roles);
}

// ---- what the links say -------------------------------------------------------------------------------

/** The entities a policy's role list is linked to. */
async function linked(collection: PolicyCollection, policyId: string, field: RoleField): Promise<string[]> {
  const l = LISTS[collection][field]!;
  const rows = await store.db.selectFrom(l.table).select(l.column).where('policy_id', '=', policyId).execute();
  return rows.map((r) => String(r[l.column])).sort();
}

/** What `from` reaches through the links of one policy kind: the `to` entities of policies linking `from`. */
async function reach(collection: PolicyCollection, fromField: RoleField, from: string, toField: RoleField, type?: string): Promise<string[]> {
  const f = LISTS[collection][fromField]!;
  const t = LISTS[collection][toField]!;
  let q = store.db
    .selectFrom(`${f.table} as f`)
    .innerJoin(`${t.table} as t`, 't.policy_id', 'f.policy_id')
    .innerJoin(`${POLICY_TABLE[collection]} as p`, 'p.id', 'f.policy_id')
    .select(`t.${t.column} as to`)
    .where(`f.${f.column}`, '=', from);
  if (type !== undefined) q = q.where('p.type', '=', type);
  const rows = await q.execute();
  return [...new Set(rows.map((r) => String(r.to)))].sort();
}

const dial = (identity: string) => reach(SP, 'identityRoles', identity, 'serviceRoles', 'Dial');
const bind = (identity: string) => reach(SP, 'identityRoles', identity, 'serviceRoles', 'Bind');
const routersOf = (identity: string) => reach(ERP, 'identityRoles', identity, 'edgeRouterRoles');
const routersServing = (service: string) => reach(SERP, 'serviceRoles', service, 'edgeRouterRoles');
const checksFor = (identity: string) => reach(SP, 'identityRoles', identity, 'postureCheckRoles');

/** The role attribute index as `kind attribute entity` lines. */
async function attributeIndex(): Promise<string[]> {
  const rows = await store.db.selectFrom('role_attribute_index').select(['kind', 'attribute', 'entity_id']).execute();
  return rows.map((r) => `${String(r.kind)} ${String(r.attribute)} ${String(r.entity_id)}`).sort();
}

// ---- which entities a role list selects -------------------------------------------------------------

describe('entitiesMatching', () => {
  beforeEach(async () => {
    await write(async (ctx) => {
      await addEntity(ctx, 'identity', 'alice', ['sales', 'eu']);
      await addEntity(ctx, 'identity', 'bob', ['eng']);
      await addEntity(ctx, 'identity', 'carol', ['sales', 'eng']);
      await addEntity(ctx, 'identity', 'dave');
      // Services carry the same attribute names: a role list selects entities of its own kind only.
      await addEntity(ctx, 'service', 'crm', ['crm', 'sales']);
      await addEntity(ctx, 'service', 'git', ['git', 'eng']);
      await addEntity(ctx, 'edge-router', 'r-eu', ['eu']);
      await addEntity(ctx, 'edge-router', 'r-us', ['us']);
    });
  });

  it.each<[RoleKind, string, string[], string[]]>([
    ['identity', 'AnyOf', ['#sales'], ['alice', 'carol']],
    ['identity', 'AllOf', ['#sales'], ['alice', 'carol']],
    ['identity', 'AnyOf', ['#sales', '#eng'], ['alice', 'bob', 'carol']],
    ['identity', 'AllOf', ['#sales', '#eng'], ['carol']],
    ['identity', 'AllOf', ['#eng', '#sales'], ['carol']],
    ['identity', 'AllOf', ['#sales', '#eng', '#eu'], []],
    ['identity', 'AllOf', ['#sales', '#nobody'], []],
    ['identity', 'AnyOf', ['#nobody'], []],
    ['identity', 'AnyOf', ['#eu'], ['alice']],
    // An @id selects its entity under either semantic, beside what the attributes select.
    ['identity', 'AllOf', ['@dave'], ['dave']],
    ['identity', 'AnyOf', ['@dave', '@ghost', '@crm'], ['dave']],
    ['identity', 'AllOf', ['@dave', '#sales', '#eng'], ['carol', 'dave']],
    ['identity', 'AnyOf', ['@bob', '#eng'], ['bob', 'carol']],
    ['identity', 'AnyOf', ['#all'], ['alice', 'bob', 'carol', 'dave']],
    ['identity', 'AllOf', ['#all'], ['alice', 'bob', 'carol', 'dave']],
    ['identity', 'AllOf', [], []],
    ['identity', 'AnyOf', [], []],
    ['service', 'AnyOf', ['#sales'], ['crm']],
    ['service', 'AllOf', ['#eng', '#git'], ['git']],
    ['service', 'AllOf', ['#eng', '#sales'], []],
    ['service', 'AnyOf', ['#all'], ['crm', 'git']],
    ['edge-router', 'AnyOf', ['#eu', '#us'], ['r-eu', 'r-us']],
    ['posture-check', 'AnyOf', ['#all'], []],
  ])('%s %s %j selects %j', async (kind, semantic, roles, expected) => {
    const selected = await entitiesMatching(store.db, kind, semantic, parseRoles(roles));
    expect([...selected].sort()).toEqual(expected);
  });
});

describe('existingIds', () => {
  it('answers the given ids that exist, once each', async () => {
    await write(async (ctx) => {
      for (const id of ['a', 'b', 'c']) await addEntity(ctx, 'service', id);
    });
    expect([...(await existingIds(store.db, 'services', ['c', 'x', 'a', 'c', 'a']))].sort()).toEqual(['a', 'c']);
    expect((await existingIds(store.db, 'services', [])).size).toBe(0);
  });
});

// ---- reach, as the links make it --------------------------------------------------------------------

type Step = (ctx: WriteContext) => Promise<void>;
const add = (kind: RoleKind, id: string, attributes: string[] = []): Step => (ctx) => addEntity(ctx, kind, id, attributes);
const attrs = (kind: RoleKind, id: string, attributes: string[]): Step => (ctx) => setAttributes(ctx, kind, id, attributes);
const drop = (kind: RoleKind, id: string): Step => (ctx) => removeEntity(ctx, kind, id);
const put = (collection: PolicyCollection, id: string, semantic: string, roles: Roles, type = 'Dial'): Step => (ctx) =>
  putPolicy(ctx, collection, id, semantic, roles, type);
const dropPolicy = (collection: PolicyCollection, id: string): Step => (ctx) => removePolicy(ctx, collection, id);

/** What the identities, services and routers of a scenario reach once its steps are written. */
interface Reach {
  dial?: Record<string, string[]>;
  bind?: Record<string, string[]>;
  routers?: Record<string, string[]>;
  serving?: Record<string, string[]>;
  checks?: Record<string, string[]>;
  index?: string[];
}

async function actualReach(expected: Reach): Promise<Reach> {
  const out: Reach = {};
  const each = async (names: Record<string, string[]> | undefined, of: (id: string) => Promise<string[]>) =>
    names && Object.fromEntries(await Promise.all(Object.keys(names).map(async (id) => [id, await of(id)] as const)));
  if (expected.dial) out.dial = await each(expected.dial, dial);
  if (expected.bind) out.bind = await each(expected.bind, bind);
  if (expected.routers) out.routers = await each(expected.routers, routersOf);
  if (expected.serving) out.serving = await each(expected.serving, routersServing);
  if (expected.checks) out.checks = await each(expected.checks, checksFor);
  if (expected.index) out.index = await attributeIndex();
  return out;
}

const people: Step[] = [
  add('identity', 'alice', ['sales', 'eu']),
  add('identity', 'bob', ['eng']),
  add('identity', 'carol', ['sales', 'eng']),
  add('service', 'crm', ['crm']),
  add('service', 'git', ['git']),
  add('service', 'wiki', ['crm', 'git']),
];

const scenarios: [string, Step[], Reach][] = [
  [
    'a Dial policy lets whom it selects dial what it selects; a Bind policy lets them bind it',
    [
      ...people,
      put(SP, 'dial-crm', 'AnyOf', { identityRoles: ['#sales'], serviceRoles: ['#crm'] }, 'Dial'),
      put(SP, 'bind-git', 'AnyOf', { identityRoles: ['#eng'], serviceRoles: ['#git'] }, 'Bind'),
    ],
    {
      dial: { alice: ['crm', 'wiki'], bob: [], carol: ['crm', 'wiki'] },
      bind: { alice: [], bob: ['git', 'wiki'], carol: ['git', 'wiki'] },
    },
  ],
  [
    'AllOf needs every attribute, on the identity and on the service',
    [...people, put(SP, 'p', 'AllOf', { identityRoles: ['#sales', '#eng'], serviceRoles: ['#crm', '#git'] })],
    { dial: { alice: [], bob: [], carol: ['wiki'] } },
  ],
  [
    'policies written before their entities select them as they come',
    [
      put(SP, 'p', 'AnyOf', { identityRoles: ['#sales'], serviceRoles: ['#crm'] }),
      put(SP, 'q', 'AllOf', { identityRoles: ['#sales', '#eng'], serviceRoles: ['#git'] }),
      put(SP, 'everyone', 'AnyOf', { identityRoles: ['#all'], serviceRoles: ['#nothing'] }),
      ...people,
    ],
    { dial: { alice: ['crm', 'wiki'], bob: [], carol: ['crm', 'git', 'wiki'] } },
  ],
  [
    'an @id policy selects its entities whatever their attributes',
    [...people, put(SP, 'p', 'AllOf', { identityRoles: ['@bob'], serviceRoles: ['@crm', '#git'] }), attrs('identity', 'bob', [])],
    { dial: { alice: [], bob: ['crm', 'git', 'wiki'] } },
  ],
  [
    'an attribute added gives the reach, removed takes it away',
    [
      ...people,
      put(SP, 'p', 'AnyOf', { identityRoles: ['#ops'], serviceRoles: ['#git'] }),
      attrs('identity', 'alice', ['ops']),
      attrs('identity', 'bob', ['ops', 'eng']),
      attrs('identity', 'bob', ['eng']),
      attrs('service', 'wiki', ['crm']),
    ],
    {
      dial: { alice: ['git'], bob: [], carol: [] },
      index: [
        'identity eng bob',
        'identity eng carol',
        'identity ops alice',
        'identity sales carol',
        'service crm crm',
        'service crm wiki',
        'service git git',
      ],
    },
  ],
  [
    'a policy changed moves the reach, and leaves other policies of the same entities alone',
    [
      ...people,
      put(SP, 'p', 'AnyOf', { identityRoles: ['#sales'], serviceRoles: ['#crm'] }),
      put(SP, 'q', 'AnyOf', { identityRoles: ['#sales'], serviceRoles: ['#git'] }),
      put(SP, 'p', 'AnyOf', { identityRoles: ['#eng'], serviceRoles: ['@crm'] }),
    ],
    { dial: { alice: ['git', 'wiki'], bob: ['crm'], carol: ['crm', 'git', 'wiki'] } },
  ],
  [
    'a policy deleted is not brought back by a later write of its former members',
    [
      ...people,
      put(SP, 'p', 'AnyOf', { identityRoles: ['#sales'], serviceRoles: ['#crm'] }),
      dropPolicy(SP, 'p'),
      attrs('identity', 'alice', ['sales', 'eng']),
      attrs('service', 'crm', ['crm', 'new']),
    ],
    { dial: { alice: [], carol: [] } },
  ],
  [
    'an entity deleted loses its links and index rows; an entity of another kind with its id keeps its own',
    [
      ...people,
      add('edge-router', 'alice', ['eu']),
      put(ERP, 'p', 'AnyOf', { identityRoles: ['#eu'], edgeRouterRoles: ['#eu'] }),
      drop('identity', 'alice'),
    ],
    {
      routers: { alice: [], bob: [] },
      index: [
        'edge-router eu alice',
        'identity eng bob',
        'identity eng carol',
        'identity sales carol',
        'service crm crm',
        'service crm wiki',
        'service git git',
        'service git wiki',
      ],
    },
  ],
  [
    'an entity of another kind with the same id keeps its index rows when one is rewritten',
    [add('identity', 'x', ['a', 'b']), add('service', 'x', ['a', 'c']), attrs('identity', 'x', ['d'])],
    { index: ['identity d x', 'service a x', 'service c x'] },
  ],
  [
    'edge router policies give identities routers; service edge router policies give services routers',
    [
      ...people,
      add('edge-router', 'r-eu', ['eu']),
      add('edge-router', 'r-us', ['us']),
      put(ERP, 'eu', 'AnyOf', { identityRoles: ['#eu'], edgeRouterRoles: ['#eu'] }),
      put(ERP, 'all', 'AllOf', { identityRoles: ['#eng'], edgeRouterRoles: ['#all'] }),
      put(SERP, 'git-us', 'AnyOf', { serviceRoles: ['#git'], edgeRouterRoles: ['@r-us'] }),
      add('edge-router', 'r-new', []),
    ],
    {
      routers: { alice: ['r-eu'], bob: ['r-eu', 'r-new', 'r-us'], carol: ['r-eu', 'r-new', 'r-us'] },
      serving: { crm: [], git: ['r-us'], wiki: ['r-us'] },
    },
  ],
  [
    'a service policy selects the posture checks its identities must pass',
    [
      ...people,
      add('posture-check', 'mfa', ['strict']),
      add('posture-check', 'os', ['lax']),
      put(SP, 'p', 'AnyOf', { identityRoles: ['#sales'], serviceRoles: ['#crm'], postureCheckRoles: ['#strict'] }),
    ],
    { checks: { alice: ['mfa'], bob: [] } },
  ],
];

describe('reach through the links', () => {
  it.each(scenarios)('%s', async (_name, steps, expected) => {
    for (const step of steps) await write(step);
    expect(await actualReach(expected)).toEqual(expected);
  });

  it('a policy and an entity it selects, written in one write, are linked', async () => {
    await write(async (ctx) => {
      await addEntity(ctx, 'service', 's', ['web']);
      await putPolicy(ctx, SP, 'p', 'AnyOf', { identityRoles: ['#staff'], serviceRoles: ['#web'] });
      await addEntity(ctx, 'identity', 'i', ['staff']);
    });
    expect(await dial('i')).toEqual(['s']);
  });

  it('a policy row removed without being forgotten is not linked, and the write goes through', async () => {
    await write(put(ERP, 'gone', 'AnyOf', { identityRoles: ['#direct'] }));
    await store.db.deleteFrom('edge_router_policies').where('id', '=', 'gone').execute();
    await write(add('identity', 'i', ['direct']));
    await write(add('identity', 'j', ['direct']));
    expect(await store.db.selectFrom('edge_router_policy_identities').selectAll().execute()).toEqual([]);
  });

  it('an entity with more role attributes than one statement takes has them all indexed', async () => {
    const many = Array.from({ length: 1500 }, (_, i) => `a${i}`);
    await write(put(SP, 'p', 'AllOf', { identityRoles: ['#a0', '#a1499'] }));
    await write(add('identity', 'i', many));
    expect((await attributeIndex()).length).toBe(1500);
    expect(await linked(SP, 'p', 'identityRoles')).toEqual(['i']);
  });

  it('tells how long each recomputation took, by what triggered it', async () => {
    await write(put(SP, 'p', 'AnyOf', { identityRoles: ['#a'] }));
    await write(add('identity', 'i', ['a']));
    expect(observed.map((o) => o.trigger)).toEqual(['policy', 'entity']);
    for (const { seconds } of observed) {
      expect(seconds).toBeGreaterThanOrEqual(0);
      expect(seconds).toBeLessThan(10);
    }
  });
});

// ---- more values than one statement takes ---------------------------------------------------------

describe('many entities', () => {
  const N = 4500;
  const ids = Array.from({ length: N }, (_, i) => `s${String(i).padStart(5, '0')}`);
  beforeEach(async () => {
    const repo = kernel.repo('services');
    await store.transaction(async (tx) => {
      for (let i = 0; i < N; i += 500) {
        const rows = ids.slice(i, i + 500).map((id) => repo.toRow(entity('service', id, i % 1000 === 0 ? ['x'] : [])));
        await tx.insertInto('services').values(rows).execute();
      }
    });
  });

  it('existingIds answers every one of them', async () => {
    const asked = [...ids].reverse().concat(['ghost', ids[0]!, ids[N - 1]!]);
    const found = await existingIds(store.db, 'services', asked);
    expect(found.size).toBe(N);
    expect(found.has('ghost')).toBe(false);
  });

  it('a policy selecting them all links them all, and unlinks them all', async () => {
    await write(put(SERP, 'p', 'AnyOf', { serviceRoles: ['#all'], edgeRouterRoles: [] }));
    expect(await linked(SERP, 'p', 'serviceRoles')).toEqual(ids);
    await write(put(SERP, 'p', 'AnyOf', { serviceRoles: [...ids.slice(0, 10).map((id) => `@${id}`), '#nothing'] }));
    expect(await linked(SERP, 'p', 'serviceRoles')).toEqual(ids.slice(0, 10));
    await write(put(SERP, 'p', 'AnyOf', { serviceRoles: ids.map((id) => `@${id}`) }));
    expect(await linked(SERP, 'p', 'serviceRoles')).toEqual(ids);
  });

  it('more policies reported changed than one statement takes are all read again', async () => {
    await write(put(SP, 'p', 'AnyOf', { identityRoles: ['#a'] }));
    await setRolesBehindTheBack(SP, 'p', { identityRoles: ['#b'] });
    // Most of them gone (read again, they leave the index); the one changed comes last.
    for (let i = 0; i < 4100; i++) links.onChange({ collection: SP, kind: 'delete', id: `gone-${i}` });
    links.onChange({ collection: SP, kind: 'update', id: 'p' });
    await write(add('identity', 'i', ['b']));
    expect(await linked(SP, 'p', 'identityRoles')).toEqual(['i']);
  });
});

// ---- the policy index across writes and transactions ------------------------------------------------

describe('the policy index', () => {
  beforeEach(async () => {
    await write(async (ctx) => {
      await addEntity(ctx, 'identity', 'i');
      await addEntity(ctx, 'service', 's', ['web']);
      await putPolicy(ctx, SP, 'p', 'AnyOf', { identityRoles: ['#a'], serviceRoles: ['#web'] });
    });
    // A write that changes no policy, after which the index has nothing to read again of its own.
    await write(add('identity', 'bystander'));
  });

  it('follows a policy changed elsewhere once the change feed reports it', async () => {
    await setRolesBehindTheBack(SP, 'p', { identityRoles: ['#b'] });
    links.onChange({ collection: SP, kind: 'update', id: 'p' });
    // A change of anything but a policy is not the index's concern.
    links.onChange({ collection: 'identities', kind: 'update', id: 'i' });
    await write(attrs('identity', 'i', ['b']));
    expect(await dial('i')).toEqual(['s']);
  });

  it('forgets a policy deleted elsewhere once the change feed reports it', async () => {
    await store.db.deleteFrom('service_policies').where('id', '=', 'p').execute();
    links.onChange({ collection: SP, kind: 'delete', id: 'p' });
    await write(attrs('identity', 'i', ['a']));
    expect(await store.db.selectFrom('service_policy_identities').selectAll().execute()).toEqual([]);
  });

  it('is read again after a reset', async () => {
    await setRolesBehindTheBack(SP, 'p', { identityRoles: ['#b'] });
    links.reset();
    await write(attrs('identity', 'i', ['b']));
    expect(await dial('i')).toEqual(['s']);
  });

  it('a policy of a transaction rolled back is not selected by later writes', async () => {
    await expect(
      write(async (ctx) => {
        await putPolicy(ctx, SP, 'q', 'AnyOf', { identityRoles: ['#b'], serviceRoles: ['#web'] });
        await putPolicy(ctx, SP, 'p', 'AnyOf', { identityRoles: ['#b'], serviceRoles: ['#web'] });
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    await write(attrs('identity', 'i', ['b']));
    expect(await dial('i')).toEqual([]);
  });

  // The kernel runs writes that queue together in one transaction, each in a savepoint, and rolls a
  // failing one back alone: what it did to the index must not outlive it. Each case: what a write
  // that then fails does, and what later writes (in the same transaction and after) must see.
  it.each<[string, Step, string[], string[]]>([
    ['changes the roles of a policy', put(SP, 'p', 'AnyOf', { identityRoles: ['#b'], serviceRoles: ['#web'] }), ['b'], []],
    ['deletes a policy', dropPolicy(SP, 'p'), ['a'], ['s']],
    ['creates a policy', put(SP, 'q', 'AnyOf', { identityRoles: ['#b'], serviceRoles: ['#web'] }), ['b'], []],
  ])('a write that %s and is rolled back to its savepoint leaves the index as committed', async (_what, failing, later, reached) => {
    const txs: Tx[] = [];
    const first = write(async (ctx) => {
      txs.push(ctx.tx);
      await putPolicy(ctx, SP, 'other', 'AnyOf', { identityRoles: ['#other'] });
    });
    const rolledBack = write(async (ctx) => {
      txs.push(ctx.tx);
      await failing(ctx);
      throw new Error('refused');
    });
    const next = write(async (ctx) => {
      txs.push(ctx.tx);
      await setAttributes(ctx, 'identity', 'i', later);
    });
    await expect(rolledBack).rejects.toThrow('refused');
    await Promise.all([first, next]);
    // All three shared one transaction.
    expect(new Set(txs).size).toBe(1);
    expect(await dial('i')).toEqual(reached);
    // And a write of a later transaction sees the committed policies too.
    await write(add('identity', 'j', later));
    expect(await dial('j')).toEqual(reached);
  });

  it('a write rolled back to its savepoint last in its transaction leaves nothing in the index for the next', async () => {
    const first = write(put(SP, 'other', 'AnyOf', { identityRoles: ['#other'] }));
    const rolledBack = write(async (ctx) => {
      await putPolicy(ctx, SP, 'p', 'AnyOf', { identityRoles: ['#b'], serviceRoles: ['#web'] });
      throw new Error('refused');
    });
    await expect(rolledBack).rejects.toThrow('refused');
    await first;
    await write(attrs('identity', 'i', ['b']));
    expect(await dial('i')).toEqual([]);
  });

  it('a write kept in a shared transaction is seen by the next one', async () => {
    const first = write(put(SP, 'p', 'AnyOf', { identityRoles: ['#b'], serviceRoles: ['#web'] }));
    const second = write(attrs('identity', 'i', ['b']));
    await Promise.all([first, second]);
    expect(await dial('i')).toEqual(['s']);
  });

  it('after a transaction that reloaded it while another was committing, the next writer reloads it', async () => {
    // Transactions with their after-commit work held back, to run it in the order under test.
    const held: (() => void)[][] = [];
    const run = async (fn: (ctx: LinkContext) => Promise<void>) => {
      const after: (() => void)[] = [];
      await store.transaction((tx) => fn({ tx, afterCommit: (f) => after.push(f) }));
      held.push(after);
    };
    const q = policy(SP, 'q', 'AnyOf', { identityRoles: ['#q'], serviceRoles: ['#web'] });
    await run(async (ctx) => {
      await kernel.repo(SP).insert(ctx.tx, q);
      await links.refreshPolicyLinks(ctx, SP, q);
    });
    // Another transaction finds the index claimed by the first, and reloads it.
    await run(async (ctx) => {
      await links.refreshEntityLinks(ctx, 'identity', entity('identity', 'i', []));
    });
    for (const after of held) for (const f of after) f();
    // A change the index is not told of: only a reload shows it.
    await setRolesBehindTheBack(SP, 'p', { identityRoles: ['#b'] });
    await write(attrs('identity', 'i', ['b']));
    expect(await dial('i')).toEqual(['s']);
  });
});

// ---- what the index reads, and what is written ------------------------------------------------------

const POLICY_TABLES = new Set(Object.values(POLICY_TABLE));
const VERBS = new Map([
  ['selectFrom', 'select'],
  ['insertInto', 'insert'],
  ['deleteFrom', 'delete'],
  ['updateTable', 'update'],
]);

/**
 * Runs fn in a transaction of its own, with the after-commit work run once it commits (or dropped
 * when it throws), and answers its statements as `verb table`.
 */
async function statements(fn: (ctx: LinkContext) => Promise<void>): Promise<string[]> {
  const log: string[] = [];
  const after: (() => void)[] = [];
  await store.transaction(async (tx) => {
    const watched = new Proxy(tx, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        // A query compiled once (the repository's) is told by its SQL.
        if (prop === 'executeQuery') {
          return (query: CompiledQuery) => {
            const m = /^(insert into|update|delete from) "(\w+)"/.exec(query.sql) ?? /^(select)\b.*? from "(\w+)"/.exec(query.sql);
            if (m) log.push(`${m[1]!.split(' ')[0]} ${m[2]}`);
            return value.call(target, query);
          };
        }
        const verb = typeof prop === 'string' ? VERBS.get(prop) : undefined;
        if (verb === undefined) return value.bind(target);
        return (table: string) => {
          log.push(`${verb} ${table.split(' ')[0]}`);
          return value.call(target, table);
        };
      },
    });
    await fn({ tx: watched, afterCommit: (f) => after.push(f) });
  });
  for (const f of after) f();
  return log;
}

/** The policy tables a transaction read, sorted. */
async function policyReads(fn: (ctx: LinkContext) => Promise<void>): Promise<string[]> {
  const log = await statements(fn);
  return log.filter((s) => s.startsWith('select ') && POLICY_TABLES.has(s.slice('select '.length))).sort();
}

const LOAD = ['select edge_router_policies', 'select service_edge_router_policies', 'select service_policies'];

describe('what the policy index reads', () => {
  let fresh: PolicyLinks;
  /** A write of an identity's role attributes. */
  const identity = (id: string, attributes: string[] | null) => async (ctx: LinkContext) => {
    await kernel.repo('identities').update(ctx.tx, id, { roleAttributes: attributes ?? [] });
    await fresh.refreshEntityLinks(ctx, 'identity', { ...entity('identity', id, []), roleAttributes: attributes });
  };
  /** A write of a policy, as the domain makes it. */
  const changePolicy = (collection: PolicyCollection, id: string, roles: Roles) => async (ctx: LinkContext) => {
    const p = policy(collection, id, 'AnyOf', roles);
    await kernel.repo(collection).update(ctx.tx, id, p);
    await fresh.refreshPolicyLinks(ctx, collection, p);
  };

  beforeEach(async () => {
    await write(async (ctx) => {
      for (const id of ['i', 'j']) await addEntity(ctx, 'identity', id);
      await addEntity(ctx, 'service', 's', ['web']);
      await putPolicy(ctx, SP, 'p', 'AnyOf', { identityRoles: ['#a', '#b'], serviceRoles: ['#web'] });
      await putPolicy(ctx, SP, 'p2', 'AnyOf', { identityRoles: ['#c'], serviceRoles: ['#web'] });
      await putPolicy(ctx, ERP, 'q', 'AnyOf', { identityRoles: ['#q'] });
    });
    // As a controller starting over this store has it: not loaded yet, and told of no metrics.
    fresh = new PolicyLinks(store.dialect);
  });

  it('is the cache named policy-index', () => {
    expect(fresh.name).toBe('policy-index');
  });

  it('loads every policy at the first write, then reads only to check policies newly linked', async () => {
    // The first write loads the index; i newly joins p, whose row is checked.
    expect(await policyReads(identity('i', ['a']))).toEqual([...LOAD, 'select service_policies'].sort());
    // An AnyOf policy as loaded from the store: one of its attributes is enough.
    expect(await dial('i')).toEqual(['s']);
    expect(await policyReads(identity('j', ['b']))).toEqual(['select service_policies']);
    expect(await dial('j')).toEqual(['s']);
    // Still linked to p, to nothing new: nothing read.
    expect(await policyReads(identity('i', ['a', 'x']))).toEqual([]);
  });

  it('writes only the differences', async () => {
    await statements(identity('i', ['a']));
    expect(await statements(identity('i', ['a', 'x']))).toEqual([
      'update identities',
      'delete role_attribute_index',
      'insert role_attribute_index',
      'select service_policy_identities',
      'select edge_router_policy_identities',
    ]);
    const unchanged = await statements(async (ctx) => {
      await fresh.refreshPolicyLinks(ctx, SP, policy(SP, 'p', 'AnyOf', { identityRoles: ['#a', '#b'], serviceRoles: ['#web'] }));
    });
    // Each list's selection and links read; a list without attributes needs no index read.
    expect(unchanged).toEqual([
      'select role_attribute_index',
      'select service_policy_identities',
      'select role_attribute_index',
      'select service_policy_services',
      'select service_policy_posture_checks',
    ]);
  });

  it('an entity written without role attributes has none indexed', async () => {
    await statements(identity('i', null));
    expect((await attributeIndex()).filter((line) => line.endsWith(' i'))).toEqual([]);
  });

  it('reads again, by id and once, the policies the change feed reports', async () => {
    await statements(identity('i', []));
    await setRolesBehindTheBack(SP, 'p', { identityRoles: ['#x'] });
    await setRolesBehindTheBack(SP, 'p2', { identityRoles: ['#y'] });
    fresh.onChange({ collection: SP, kind: 'update', id: 'p' });
    fresh.onChange({ collection: SP, kind: 'update', id: 'p2' });
    // Not a policy: nothing to read again.
    fresh.onChange({ collection: 'identities', kind: 'update', id: 'i' });
    // One read of both, and one to check the two policies newly linked.
    expect(await policyReads(identity('i', ['x', 'y']))).toEqual(['select service_policies', 'select service_policies']);
    expect([await linked(SP, 'p', 'identityRoles'), await linked(SP, 'p2', 'identityRoles')]).toEqual([['i'], ['i']]);
    expect(await policyReads(identity('j', []))).toEqual([]);
  });

  it('is loaded again, once, after a reset, without what was pending before', async () => {
    await statements(changePolicy(SP, 'p', { identityRoles: ['#a'], serviceRoles: ['#web'] }));
    fresh.onChange({ collection: SP, kind: 'update', id: 'p2' });
    fresh.reset();
    expect(await policyReads(identity('i', []))).toEqual(LOAD);
    expect(await policyReads(changePolicy(ERP, 'q', { identityRoles: ['#r'] }))).toEqual([]);
    // What the write before read again: q alone.
    expect(await policyReads(identity('j', []))).toEqual(['select edge_router_policies']);
    expect(await policyReads(identity('j', []))).toEqual([]);
  });

  it('a reload forgets a policy gone from the store', async () => {
    await statements(identity('i', []));
    await store.db.deleteFrom('service_policies').where('id', '=', 'p').execute();
    fresh.reset();
    expect(await policyReads(identity('i', ['a']))).toEqual(LOAD);
  });

  it("a write's own changes: nothing more to read in its transaction; the next reads again what it changed, once", async () => {
    await statements(identity('i', []));
    expect(
      await policyReads(async (ctx) => {
        await changePolicy(SP, 'p', { identityRoles: ['#d'], serviceRoles: ['#web'] })(ctx);
        await changePolicy(ERP, 'q', { identityRoles: ['#d'] })(ctx);
        await identity('i', ['d'])(ctx);
      }),
    ).toEqual(['select edge_router_policies', 'select service_policies']);
    expect(await dial('i')).toEqual(['s']);
    expect(await policyReads(identity('j', []))).toEqual(['select edge_router_policies', 'select service_policies']);
    expect(await policyReads(identity('j', []))).toEqual([]);
  });

  it('what is read again is what the last write changed', async () => {
    await statements(identity('i', []));
    await statements(changePolicy(SP, 'p', { identityRoles: ['#a'], serviceRoles: ['#web'] }));
    expect(await policyReads(changePolicy(ERP, 'q', { identityRoles: ['#r'] }))).toEqual(['select service_policies']);
    expect(await policyReads(identity('j', []))).toEqual(['select edge_router_policies']);
  });

  it('a transaction rolled back makes the next one load the index again', async () => {
    await statements(identity('i', []));
    await expect(
      statements(async (ctx) => {
        await changePolicy(SP, 'p', { identityRoles: ['#x'], serviceRoles: ['#web'] })(ctx);
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    expect(await policyReads(identity('i', ['x']))).toEqual(LOAD);
    expect(await dial('i')).toEqual([]);
  });

  it('a transaction rolled back that changed no policy costs the next one nothing', async () => {
    await statements(identity('i', []));
    await expect(
      statements(async (ctx) => {
        await identity('i', ['a'])(ctx);
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    expect(await policyReads(identity('j', []))).toEqual([]);
  });

  it('forgets a deleted policy at once: the same write reads nothing to leave it out', async () => {
    await write(async (ctx) => {
      await putPolicy(ctx, ERP, 'everyone', 'AnyOf', { identityRoles: ['#all'] });
      await putPolicy(ctx, ERP, 'just-j', 'AnyOf', { identityRoles: ['@j'] });
    });
    await statements(identity('i', []));
    expect(
      await policyReads(async (ctx) => {
        for (const [collection, id] of [[SP, 'p'], [ERP, 'everyone'], [ERP, 'just-j']] as const) {
          await kernel.repo(collection).delete(ctx.tx, id);
          await fresh.forgetPolicy(ctx, collection, id);
        }
        await identity('i', ['a'])(ctx);
        await identity('j', ['b'])(ctx);
      }),
    ).toEqual([]);
    expect([await dial('i'), await routersOf('j')]).toEqual([[], []]);
  });

  it('a policy row removed without being forgotten is found gone once, then left out of the index', async () => {
    await statements(identity('i', []));
    await store.db.deleteFrom('service_policies').where('id', '=', 'p').execute();
    expect(await policyReads(identity('i', ['a']))).toEqual(['select service_policies']);
    // The next write reads again what that one changed in the index (it may have been rolled back).
    expect(await policyReads(identity('j', ['a']))).toEqual(['select service_policies']);
    expect(await policyReads(identity('j', ['b']))).toEqual([]);
    expect(await store.db.selectFrom('service_policy_identities').selectAll().execute()).toEqual([]);
  });
});
