// Role attribute lists (`/<kind>-role-attributes`) and their usage (`/<kind>-role-attribute-usage`,
// behaviour.md §3): the distinct attributes entities of a kind carry, with the filter symbol `id`,
// sort and paging; and per attribute, which entities carry it and which policies name `#<attribute>`,
// over every attribute an entity carries or a policy names (as the established controller answers).
// Expectations are computed by brute force from the stored entities and policies.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  startTestController,
  type TestController,
  expectMissingCredential,
} from './helpers.js';
import { networkFixture, type Ent, type Pol, type World } from './network-fixtures.js';

let t: TestController;
let admin: string;

const { create, patch, domainCheckType, loadWorld } = networkFixture(() => ({ t, admin }));

// ---- the fixture -------------------------------------------------------------------------------

const ids: Record<string, string> = {};
let world: World;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  const make = async (collection: string, name: string, body: Record<string, unknown>) => (ids[name] = await create(collection, { name, ...body }));
  await make('identities', 'i1', { type: 'User', isAdmin: false, roleAttributes: ['red', 'blue'] });
  await make('identities', 'i2', { type: 'User', isAdmin: false, roleAttributes: ['red'] });
  await make('identities', 'i3', { type: 'Device', isAdmin: false, roleAttributes: ['green', 'all'] });
  await make('identities', 'i4', { type: 'User', isAdmin: false, roleAttributes: [] });
  await make('services', 's1', { roleAttributes: ['red', 'web'] });
  await make('services', 's2', { roleAttributes: ['web'] });
  await make('edge-routers', 'e1', { roleAttributes: ['east', 'red'] });
  await make('edge-routers', 'e2', { roleAttributes: ['west'] });
  const typeId = await domainCheckType();
  await make('posture-checks', 'pc1', { typeId, roleAttributes: ['corp'], domains: ['corp.example'] });
  await make('posture-checks', 'pc2', { typeId, roleAttributes: ['corp', 'red'], domains: ['corp.example'] });
  await make('service-policies', 'sp1', {
    type: 'Dial',
    semantic: 'AnyOf',
    identityRoles: ['#red', '#green'],
    serviceRoles: ['#web'],
    postureCheckRoles: ['#corp'],
  });
  await make('service-policies', 'sp2', {
    type: 'Bind',
    semantic: 'AllOf',
    identityRoles: ['#all'],
    serviceRoles: ['#red', `@${ids.s2}`],
    postureCheckRoles: ['#red'],
  });
  await make('edge-router-policies', 'erp1', { semantic: 'AnyOf', identityRoles: ['#red'], edgeRouterRoles: ['#east', '#west'] });
  await make('edge-router-policies', 'erp2', { semantic: 'AnyOf', identityRoles: ['#blue', '#nobody'], edgeRouterRoles: ['#all'] });
  await make('service-edge-router-policies', 'serp1', { semantic: 'AllOf', serviceRoles: ['#web'], edgeRouterRoles: ['#east', '#red'] });
  // attributes no entity carries, named only by policies
  await make('service-policies', 'sp3', {
    type: 'Dial',
    semantic: 'AnyOf',
    identityRoles: ['#red', '#sp-only'],
    serviceRoles: ['#svc-only'],
    postureCheckRoles: ['#pc-only'],
  });
  await make('service-edge-router-policies', 'serp2', { semantic: 'AnyOf', serviceRoles: ['#svc-only'], edgeRouterRoles: ['#er-only'] });
  world = await loadWorld();
});
afterAll(async () => {
  await t.close();
});

// ---- expectations, by brute force ---------------------------------------------------------------

interface KindCase {
  prefix: string;
  name: string;
  group: string;
  entities: keyof World;
  /** The usage key of the entities. */
  source: string;
  policies: [string, keyof World, keyof Pol][];
}

const CASES: KindCase[] = [
  {
    prefix: 'identity',
    name: 'Identity',
    group: 'identity',
    entities: 'identities',
    source: 'identities',
    policies: [
      ['servicePolicies', 'sp', 'identityRoles'],
      ['edgeRouterPolicies', 'erp', 'identityRoles'],
    ],
  },
  {
    prefix: 'service',
    name: 'Service',
    group: 'service',
    entities: 'services',
    source: 'services',
    policies: [
      ['servicePolicies', 'sp', 'serviceRoles'],
      ['serviceEdgeRouterPolicies', 'serp', 'serviceRoles'],
    ],
  },
  {
    prefix: 'edge-router',
    name: 'EdgeRouter',
    group: 'router',
    entities: 'edgeRouters',
    source: 'edgeRouters',
    policies: [
      ['edgeRouterPolicies', 'erp', 'edgeRouterRoles'],
      ['serviceEdgeRouterPolicies', 'serp', 'edgeRouterRoles'],
    ],
  },
  {
    prefix: 'posture-check',
    name: 'PostureCheck',
    group: 'posture-check',
    entities: 'postureChecks',
    source: 'postureChecks',
    policies: [['servicePolicies', 'sp', 'postureCheckRoles']],
  },
];

const attributesOf = (c: KindCase) => [...new Set((world[c.entities] as Ent[]).flatMap((e) => e.roleAttributes))].sort();

/** The attributes of the usage list: those entities carry and those policies name (`#all` names none). */
const usedAttributesOf = (c: KindCase) => {
  const named = c.policies.flatMap(([, key, field]) =>
    (world[key] as Pol[]).flatMap((p) =>
      ((p[field] as string[]) ?? []).filter((r) => r.startsWith('#') && r !== '#all').map((r) => r.slice(1)),
    ),
  );
  return [...new Set([...attributesOf(c), ...named])].sort();
};

function usageOf(c: KindCase, attribute: string, withIds: boolean): Record<string, { count: number; ids?: string[] }> {
  const out: Record<string, { count: number; ids?: string[] }> = {};
  const add = (source: string, found: string[]) => {
    if (found.length > 0) out[source] = withIds ? { count: found.length, ids: [...found].sort() } : { count: found.length };
  };
  add(c.source, (world[c.entities] as Ent[]).filter((e) => e.roleAttributes.includes(attribute)).map((e) => e.id));
  // `#all` selects everything; it names no attribute
  for (const [source, key, field] of c.policies) {
    add(source, (world[key] as Pol[]).filter((p) => attribute !== 'all' && ((p[field] as string[]) ?? []).includes(`#${attribute}`)).map((p) => p.id));
  }
  return out;
}

const listUrl = (c: KindCase, query = '') => `${MGMT}/${c.prefix}-role-attributes${query ? `?${query}` : ''}`;
const usageUrl = (c: KindCase, query = '') => `${MGMT}/${c.prefix}-role-attribute-usage${query ? `?${query}` : ''}`;
const filter = (text: string) => `filter=${encodeURIComponent(text)}`;

async function get(u: string, token = admin): Promise<any> {
  const res = await call(t, 'GET', u, { token });
  if (res.statusCode !== 200) throw new Error(`${u}: ${res.statusCode} ${res.body}`);
  return json(res);
}

/** Ids in a usage answer are compared as sets. */
function sortedUsage(items: any[]): any[] {
  return items.map((item) => ({
    roleAttribute: item.roleAttribute,
    usage: Object.fromEntries(
      Object.entries(item.usage as Record<string, { count: number; ids?: string[] }>).map(([k, v]) => [k, v.ids ? { ...v, ids: [...v.ids].sort() } : v]),
    ),
  }));
}

// ---- tests -----------------------------------------------------------------------------------

describe('the fixture', () => {
  it('has the hand-checked attributes and uses', () => {
    expect(attributesOf(CASES[0]!)).toEqual(['all', 'blue', 'green', 'red']);
    expect(usageOf(CASES[0]!, 'red', true)).toEqual({
      identities: { count: 2, ids: [ids.i1, ids.i2].sort() },
      servicePolicies: { count: 2, ids: [ids.sp1, ids.sp3].sort() },
      edgeRouterPolicies: { count: 1, ids: [ids.erp1] },
    });
    expect(usageOf(CASES[0]!, 'all', false)).toEqual({ identities: { count: 1 } });
    expect(attributesOf(CASES[3]!)).toEqual(['corp', 'red']);
    expect(usedAttributesOf(CASES[0]!)).toEqual(['all', 'blue', 'green', 'nobody', 'red', 'sp-only']);
    expect(usedAttributesOf(CASES[1]!)).toEqual(['red', 'svc-only', 'web']);
    expect(usedAttributesOf(CASES[2]!)).toEqual(['east', 'er-only', 'red', 'west']);
    expect(usedAttributesOf(CASES[3]!)).toEqual(['corp', 'pc-only', 'red']);
    expect(usageOf(CASES[2]!, 'er-only', false)).toEqual({ serviceEdgeRouterPolicies: { count: 1 } });
  });

  it('serves the operations of endpoints.md', async () => {
    const doc = json(await t.inject({ method: 'GET', url: `${MGMT}/specs/edge-management/spec` }));
    for (const c of CASES) {
      expect(doc.paths[`${MGMT}/${c.prefix}-role-attributes`]?.get?.operationId).toBe(`list${c.name}RoleAttributes`);
      expect(doc.paths[`${MGMT}/${c.prefix}-role-attribute-usage`]?.get?.operationId).toBe(`list${c.name}RoleAttributeUsage`);
    }
  });
});

describe.each(CASES.map((c) => [c.prefix, c] as const))('%s role attributes', (_prefix, c) => {
  it('lists the distinct attributes in use, sorted, with pagination meta', async () => {
    const expected = attributesOf(c);
    expect(expected.length).toBeGreaterThan(1);
    const body = await get(listUrl(c));
    expect(body.data).toEqual(expected);
    expect(body.meta.pagination).toEqual({ limit: 10, offset: 0, totalCount: expected.length });
    expect(body.meta.filterableFields).toEqual(['id']);
  });

  it('filters on id: =, !=, contains, icontains, in, not in', async () => {
    const all = attributesOf(c);
    const [first, second] = all as [string, string];
    const cases: [string, string[]][] = [
      [`id = "${first}"`, [first]],
      [`id != "${first}"`, all.filter((a) => a !== first)],
      ['id contains "e"', all.filter((a) => a.includes('e'))],
      ['id icontains "E"', all.filter((a) => a.toLowerCase().includes('e'))],
      [`id in ["${second}", "no-such-attribute"]`, [second]],
      [`id not in ["${first}"]`, all.filter((a) => a !== first)],
      ['id = "no-such-attribute"', []],
      [`id >= "${second}"`, all.filter((a) => a >= second)],
    ];
    for (const [text, expected] of cases) {
      const body = await get(listUrl(c, filter(text)));
      expect(body.data, text).toEqual(expected);
      expect(body.meta.pagination.totalCount, text).toBe(expected.length);
    }
  });

  it('sorts by id and pages', async () => {
    const all = attributesOf(c);
    expect((await get(listUrl(c, 'sort=id desc'))).data).toEqual([...all].reverse());
    expect((await get(listUrl(c, filter('sort by id desc limit 1')))).data).toEqual([all[all.length - 1]]);
    const page = await get(listUrl(c, 'limit=1&offset=1'));
    expect(page.data).toEqual([all[1]]);
    expect(page.meta.pagination).toEqual({ limit: 1, offset: 1, totalCount: all.length });
    expect((await get(listUrl(c, `offset=${all.length}`))).data).toEqual([]);
  });

  it('refuses bad input with 400', async () => {
    for (const u of [listUrl(c, filter('name = "x"')), listUrl(c, filter('id = ')), usageUrl(c, filter('roleAttribute = "x"'))]) {
      expectError(await call(t, 'GET', u, { token: admin }), 400, 'INVALID_FILTER', 'filter');
    }
    expectError(await call(t, 'GET', listUrl(c, 'sort=name'), { token: admin }), 400, 'INVALID_SORT_IDENTIFIER');
    expectError(await call(t, 'GET', listUrl(c, 'limit=x'), { token: admin }), 400, 'INVALID_PAGINATION', 'limit');
    expectError(await call(t, 'GET', usageUrl(c, 'withIds=maybe'), { token: admin }), 400, 'COULD_NOT_VALIDATE', 'withIds');
  });

  it('answers the usage of each attribute, without ids by default', async () => {
    const all = usedAttributesOf(c);
    for (const q of ['', 'withIds=false']) {
      const body = await get(usageUrl(c, `limit=500${q ? `&${q}` : ''}`));
      expect(body.data).toEqual(all.map((a) => ({ roleAttribute: a, usage: usageOf(c, a, false) })));
      expect(body.meta.pagination).toEqual({ limit: 500, offset: 0, totalCount: all.length });
      for (const item of body.data) for (const u of Object.values(item.usage)) expect(u).not.toHaveProperty('ids');
    }
  });

  it('answers the ids of each use with withIds=true', async () => {
    const all = usedAttributesOf(c);
    const body = await get(usageUrl(c, 'limit=500&withIds=true'));
    expect(sortedUsage(body.data)).toEqual(all.map((a) => ({ roleAttribute: a, usage: usageOf(c, a, true) })));
    expect(body.data.some((item: any) => Object.keys(item.usage).length > 1)).toBe(true);
  });

  it('filters, sorts and pages the usage list like the attribute list', async () => {
    const all = usedAttributesOf(c);
    expect(all.length).toBeGreaterThan(attributesOf(c).length);
    for (const attribute of [all[0]!, all.find((a) => !attributesOf(c).includes(a))!]) {
      const one = await get(usageUrl(c, `withIds=true&${filter(`id = "${attribute}"`)}`));
      expect(sortedUsage(one.data)).toEqual([{ roleAttribute: attribute, usage: usageOf(c, attribute, true) }]);
      expect(one.meta.pagination.totalCount).toBe(1);
    }
    const some = await get(usageUrl(c, filter('id contains "o"')));
    expect(some.data.map((i: any) => i.roleAttribute)).toEqual(all.filter((a) => a.includes('o')));
    expect(some.meta.pagination.totalCount).toBe(all.filter((a) => a.includes('o')).length);
    const page = await get(usageUrl(c, 'sort=id desc&limit=1&offset=1'));
    expect(page.data.map((i: any) => i.roleAttribute)).toEqual([[...all].reverse()[1]]);
    expect(page.meta.pagination).toEqual({ limit: 1, offset: 1, totalCount: all.length });
  });

  it('answers 401 without a credential', async () => {
    for (const u of [listUrl(c), usageUrl(c)]) {
      const res = await call(t, 'GET', u);
      expectMissingCredential(res);
    }
  });
});

describe('permissions', () => {
  it('each list needs read of its kind: 401 otherwise', async () => {
    const groups = CASES.map((c) => c.group);
    const tokens: Record<string, string> = {};
    for (const group of [...groups, 'nobody']) {
      const name = `ra-${group}`;
      await createIdentityWithPassword(t, admin, { name, username: name, password: 'attr-password-1', permissions: group === 'nobody' ? [] : [`${group}.read`] });
      tokens[group] = await login(t, name, 'attr-password-1');
    }
    for (const c of CASES) {
      for (const u of [listUrl(c), usageUrl(c, 'withIds=true')]) {
        for (const group of [...groups, 'nobody']) {
          const res = await call(t, 'GET', u, { token: tokens[group] });
          expect(res.statusCode, `${u} with ${group}`).toBe(group === c.group ? 200 : 401);
        }
      }
    }
  });
});

describe('changes', () => {
  it('the lists follow the entities', async () => {
    const c = CASES[0]!;
    await patch('identities', ids.i3!, { roleAttributes: ['purple'] });
    world = await loadWorld();
    expect(attributesOf(c)).toEqual(['blue', 'purple', 'red']);
    expect((await get(listUrl(c))).data).toEqual(['blue', 'purple', 'red']);
    const usage = await get(usageUrl(c, `withIds=true&${filter('id = "purple"')}`));
    expect(usage.data).toEqual([{ roleAttribute: 'purple', usage: { identities: { count: 1, ids: [ids.i3] } } }]);
  });
});

describe('attributes only policies name', () => {
  it('are in the usage list, with the policies naming them, but not in the attribute list', async () => {
    const c = CASES[0]!;
    expect((await get(listUrl(c, filter('id = "nobody"')))).data).toEqual([]);
    expect((await get(usageUrl(c, `withIds=true&${filter('id = "nobody"')}`))).data).toEqual([
      { roleAttribute: 'nobody', usage: { edgeRouterPolicies: { count: 1, ids: [ids.erp2] } } },
    ]);
  });

  it('as in the report: an identity attribute only a service policy names', async () => {
    await create('identities', { name: 'usage-id', type: 'User', isAdmin: false, roleAttributes: ['u-both', 'u-idonly'] });
    const policy = await create('service-policies', {
      name: 'usage-sp',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: ['#u-both', '#u-sponly'],
      serviceRoles: [],
    });
    const body = await get(usageUrl(CASES[0]!, `withIds=true&${filter('id contains "u-"')}`));
    expect(body.data.map((i: any) => i.roleAttribute)).toEqual(['u-both', 'u-idonly', 'u-sponly']);
    expect(body.data[2]).toEqual({ roleAttribute: 'u-sponly', usage: { servicePolicies: { count: 1, ids: [policy] } } });
    expect(body.meta.pagination.totalCount).toBe(3);
  });

  it('page and count over the union: hundreds of attributes only policies name', async () => {
    const names = Array.from({ length: 400 }, (_, n) => `bulk-${String(n).padStart(3, '0')}`);
    // two policies share the middle 200, so the union counts each once
    const roles = (some: string[]) => some.map((n) => `#${n}`);
    const a = await create('edge-router-policies', { name: 'bulk-a', semantic: 'AnyOf', identityRoles: [], edgeRouterRoles: roles(names.slice(0, 300)) });
    const b = await create('service-edge-router-policies', { name: 'bulk-b', semantic: 'AnyOf', serviceRoles: [], edgeRouterRoles: roles(names.slice(100)) });
    const c = CASES[2]!;
    const bulk = filter('id contains "bulk-"');
    const page = await get(usageUrl(c, `${bulk}&limit=50&offset=275`));
    expect(page.data.map((i: any) => i.roleAttribute)).toEqual(names.slice(275, 325));
    expect(page.meta.pagination).toEqual({ limit: 50, offset: 275, totalCount: 400 });
    expect(page.data[0].usage).toEqual({ edgeRouterPolicies: { count: 1 }, serviceEdgeRouterPolicies: { count: 1 } });
    expect(page.data[49].usage).toEqual({ serviceEdgeRouterPolicies: { count: 1 } });
    const last = await get(usageUrl(c, `${bulk}&sort=id desc&limit=3&withIds=true`));
    const onlyB = { serviceEdgeRouterPolicies: { count: 1, ids: [b] } };
    expect(last.data).toEqual(names.slice(-3).reverse().map((n) => ({ roleAttribute: n, usage: onlyB })));
    const first = await get(usageUrl(c, `${bulk}&limit=1&withIds=true`));
    expect(first.data).toEqual([{ roleAttribute: names[0], usage: { edgeRouterPolicies: { count: 1, ids: [a] } } }]);
    expect((await get(usageUrl(c, 'limit=1'))).meta.pagination.totalCount).toBe(usedAttributesOf(c).length + 400);
    expect((await get(listUrl(c, bulk))).meta.pagination.totalCount).toBe(0);
  });
});
