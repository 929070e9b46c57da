// Related lists of the Management API (`/<collection>/{id}/<related>`): each answers exactly the
// entities the policies relate (checked against a brute-force evaluation of behaviour.md §4 over
// every entity and policy in the store), with the related resource's own filter, sort and paging,
// which narrow the relation and never widen it.
import { CompiledQuery } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RELATIONS } from '../src/domain/related.js';
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
import { matches, networkFixture, type Ent, type Pol, type World } from './network-fixtures.js';

let t: TestController;
let admin: string;

const { create, patch, domainCheckType, loadWorld } = networkFixture(() => ({ t, admin }));

// ---- the fixture -------------------------------------------------------------------------------

const ids: Record<string, string> = {};
let world: World;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  const identities: [string, string[]][] = [
    ['alice', ['eng', 'vpn']],
    ['bob', ['eng']],
    ['carol', ['sales']],
    ['dave', []],
    ['erin', ['eng', 'sales']],
  ];
  for (const [name, roleAttributes] of identities) ids[name] = await create('identities', { name, type: 'User', isAdmin: false, roleAttributes });
  for (const [name, roleAttributes] of [
    ['web', ['web', 'public']],
    ['db', ['db']],
    ['ssh', ['ops']],
    ['wiki', ['web']],
    ['billing', []],
  ] as [string, string[]][]) {
    ids[name] = await create('services', { name, roleAttributes });
  }
  for (const [name, roleAttributes] of [
    ['er-east', ['east', 'public']],
    ['er-west', ['west', 'public']],
    ['er-core', ['core']],
    ['er-idle', []],
  ] as [string, string[]][]) {
    ids[name] = await create('edge-routers', { name, roleAttributes });
  }
  const typeId = await domainCheckType();
  for (const [name, roleAttributes] of [
    ['pc-corp', ['corp']],
    ['pc-strict', ['corp', 'strict']],
    ['pc-none', []],
  ] as [string, string[]][]) {
    ids[name] = await create('posture-checks', { name, typeId, roleAttributes, domains: ['corp.example'] });
  }
  const sp = (name: string, type: string, semantic: string, identityRoles: string[], serviceRoles: string[], postureCheckRoles: string[] = []) =>
    create('service-policies', { name, type, semantic, identityRoles, serviceRoles, postureCheckRoles }).then((id) => (ids[name] = id));
  await sp('sp-eng-web', 'Dial', 'AnyOf', ['#eng'], ['#web'], ['#corp']);
  await sp('sp-eng-sales-db', 'Dial', 'AllOf', ['#eng', '#sales'], ['#db', `@${ids.billing}`], ['#corp', '#strict']);
  await sp('sp-bob-ops', 'Bind', 'AnyOf', [`@${ids.bob}`], ['#ops', '#web']);
  await sp('sp-all-wiki', 'Dial', 'AnyOf', ['#all'], [`@${ids.wiki}`], [`@${ids['pc-none']}`]);
  await sp('sp-nobody', 'Bind', 'AnyOf', ['#nobody'], ['#all']);
  const erp = (name: string, semantic: string, identityRoles: string[], edgeRouterRoles: string[]) =>
    create('edge-router-policies', { name, semantic, identityRoles, edgeRouterRoles }).then((id) => (ids[name] = id));
  await erp('erp-eng', 'AnyOf', ['#eng'], ['#public']);
  await erp('erp-carol', 'AllOf', [`@${ids.carol}`], ['#core']);
  await erp('erp-all', 'AnyOf', ['#all'], [`@${ids['er-east']}`]);
  const serp = (name: string, semantic: string, serviceRoles: string[], edgeRouterRoles: string[]) =>
    create('service-edge-router-policies', { name, semantic, serviceRoles, edgeRouterRoles }).then((id) => (ids[name] = id));
  await serp('serp-web', 'AnyOf', ['#web'], ['#east', '#core']);
  await serp('serp-all', 'AnyOf', ['#all'], [`@${ids['er-west']}`]);
  await serp('serp-db', 'AllOf', ['#db'], ['#nothing']);
  world = await loadWorld();
});
afterAll(async () => {
  await t.close();
});

// ---- expectations, by brute force ---------------------------------------------------------------

type Expect = (w: World, parentId: string, type?: string) => string[];

const byId = (list: Ent[], keep: (e: Ent) => boolean) => list.filter(keep).map((e) => e.id).sort();
const polsMatching = (pols: Pol[], field: keyof Pol, e: Ent) =>
  pols.filter((p) => matches(p.semantic, p[field] as string[], e)).map((p) => p.id).sort();
const find = (list: Ent[], id: string) => list.find((e) => e.id === id)!;
const pol = (list: Pol[], id: string) => list.find((p) => p.id === id)!;

/** Entities of `to` linked to entity `from` through some policy of `pols` (of `type`, if given). */
function through(pols: Pol[], fromField: keyof Pol, from: Ent, toField: keyof Pol, to: Ent[], type?: string): string[] {
  return byId(to, (e) =>
    pols.some((p) => (type === undefined || p.type === type) && matches(p.semantic, p[fromField] as string[], from) && matches(p.semantic, p[toField] as string[], e)),
  );
}

const EXPECT: Record<string, Expect> = {
  'identities/edge-router-policies': (w, id) => polsMatching(w.erp, 'identityRoles', find(w.identities, id)),
  'identities/edge-routers': (w, id) => through(w.erp, 'identityRoles', find(w.identities, id), 'edgeRouterRoles', w.edgeRouters),
  'identities/service-policies': (w, id) => polsMatching(w.sp, 'identityRoles', find(w.identities, id)),
  'identities/services': (w, id, type) => through(w.sp, 'identityRoles', find(w.identities, id), 'serviceRoles', w.services, type),
  'services/edge-routers': (w, id) => through(w.serp, 'serviceRoles', find(w.services, id), 'edgeRouterRoles', w.edgeRouters),
  'services/identities': (w, id, type) => through(w.sp, 'serviceRoles', find(w.services, id), 'identityRoles', w.identities, type),
  'services/service-edge-router-policies': (w, id) => polsMatching(w.serp, 'serviceRoles', find(w.services, id)),
  'services/service-policies': (w, id) => polsMatching(w.sp, 'serviceRoles', find(w.services, id)),
  'edge-routers/edge-router-policies': (w, id) => polsMatching(w.erp, 'edgeRouterRoles', find(w.edgeRouters, id)),
  'edge-routers/identities': (w, id) => through(w.erp, 'edgeRouterRoles', find(w.edgeRouters, id), 'identityRoles', w.identities),
  'edge-routers/service-edge-router-policies': (w, id) => polsMatching(w.serp, 'edgeRouterRoles', find(w.edgeRouters, id)),
  'edge-routers/services': (w, id) => through(w.serp, 'edgeRouterRoles', find(w.edgeRouters, id), 'serviceRoles', w.services),
  'edge-router-policies/edge-routers': (w, id) => byId(w.edgeRouters, (e) => matches(pol(w.erp, id).semantic, pol(w.erp, id).edgeRouterRoles, e)),
  'edge-router-policies/identities': (w, id) => byId(w.identities, (e) => matches(pol(w.erp, id).semantic, pol(w.erp, id).identityRoles, e)),
  'service-edge-router-policies/edge-routers': (w, id) =>
    byId(w.edgeRouters, (e) => matches(pol(w.serp, id).semantic, pol(w.serp, id).edgeRouterRoles, e)),
  'service-edge-router-policies/services': (w, id) => byId(w.services, (e) => matches(pol(w.serp, id).semantic, pol(w.serp, id).serviceRoles, e)),
  'service-policies/identities': (w, id) => byId(w.identities, (e) => matches(pol(w.sp, id).semantic, pol(w.sp, id).identityRoles, e)),
  'service-policies/posture-checks': (w, id) =>
    byId(w.postureChecks, (e) => matches(pol(w.sp, id).semantic, pol(w.sp, id).postureCheckRoles, e)),
  'service-policies/services': (w, id) => byId(w.services, (e) => matches(pol(w.sp, id).semantic, pol(w.sp, id).serviceRoles, e)),
};

const PARENTS: Record<string, (w: World) => string[]> = {
  identities: (w) => w.identities.map((e) => e.id),
  services: (w) => w.services.map((e) => e.id),
  'edge-routers': (w) => w.edgeRouters.map((e) => e.id),
  'edge-router-policies': (w) => w.erp.map((p) => p.id),
  'service-edge-router-policies': (w) => w.serp.map((p) => p.id),
  'service-policies': (w) => w.sp.map((p) => p.id),
};

const OPERATIONS: Record<string, string> = {
  'identities/edge-router-policies': 'listIdentitysEdgeRouterPolicies',
  'identities/edge-routers': 'listIdentityEdgeRouters',
  'identities/service-policies': 'listIdentityServicePolicies',
  'identities/services': 'listIdentityServices',
  'services/edge-routers': 'listServiceEdgeRouters',
  'services/identities': 'listServiceIdentities',
  'services/service-edge-router-policies': 'listServiceServiceEdgeRouterPolicies',
  'services/service-policies': 'listServiceServicePolicies',
  'edge-routers/edge-router-policies': 'listEdgeRouterEdgeRouterPolicies',
  'edge-routers/identities': 'listEdgeRouterIdentities',
  'edge-routers/service-edge-router-policies': 'listEdgeRouterServiceEdgeRouterPolicies',
  'edge-routers/services': 'listEdgeRouterServices',
  'edge-router-policies/edge-routers': 'listEdgeRouterPolicyEdgeRouters',
  'edge-router-policies/identities': 'listEdgeRouterPolicyIdentities',
  'service-edge-router-policies/edge-routers': 'listServiceEdgeRouterPolicyEdgeRouters',
  'service-edge-router-policies/services': 'listServiceEdgeRouterPolicyServices',
  'service-policies/identities': 'listServicePolicyIdentities',
  'service-policies/posture-checks': 'listServicePolicyPostureChecks',
  'service-policies/services': 'listServicePolicyServices',
};

const ROUTES = Object.keys(EXPECT);

/** The related lists over references and the services' config links, each tested with its resources. */
const OTHER_OPERATIONS: Record<string, string> = {
  'config-types/configs': 'listConfigsForConfigType',
  'configs/services': 'listConfigServices',
  'services/configs': 'listServiceConfig',
  'services/terminators': 'listServiceTerminators',
  'identities/authenticators': 'getIdentityAuthenticators',
  'identities/enrollments': 'getIdentityEnrollments',
};
/** The permission group whose read each related list needs (that of the listed resource). */
const GROUP: Record<string, string> = {
  identities: 'identity',
  services: 'service',
  'edge-routers': 'router',
  'posture-checks': 'posture-check',
  'edge-router-policies': 'edge-router-policy',
  'service-edge-router-policies': 'service-edge-router-policy',
  'service-policies': 'service-policy',
};
const childOf = (route: string) => route.split('/')[1]!;
const url = (route: string, id: string, query = '') => `${MGMT}/${route.split('/')[0]}/${id}/${childOf(route)}${query ? `?${query}` : ''}`;

async function listIds(u: string, token = admin): Promise<{ ids: string[]; body: any }> {
  const res = await call(t, 'GET', u, { token });
  if (res.statusCode !== 200) throw new Error(`${u}: ${res.statusCode} ${res.body}`);
  const body = json(res);
  return { ids: (body.data as { id: string }[]).map((e) => e.id), body };
}

// ---- tests -----------------------------------------------------------------------------------

describe('the routes', () => {
  it('serve every related list of the task, with the operation ids of endpoints.md', async () => {
    const all = { ...OPERATIONS, ...OTHER_OPERATIONS };
    expect(RELATIONS.map((r) => `${r.parent}/${r.sub}`).sort()).toEqual(Object.keys(all).sort());
    for (const r of RELATIONS) expect(r.operationId).toBe(all[`${r.parent}/${r.sub}`]);
    const doc = json(await t.inject({ method: 'GET', url: `${MGMT}/specs/edge-management/spec` }));
    for (const route of Object.keys(all)) {
      const [parent, sub] = route.split('/');
      expect(doc.paths[`${MGMT}/${parent}/{id}/${sub}`]?.get?.operationId, route).toBe(all[route]);
    }
  });

  it('has a fixture where the relations are neither empty nor everything', () => {
    const sizes = ROUTES.flatMap((route) => PARENTS[route.split('/')[0]!]!(world).map((id) => EXPECT[route]!(world, id).length));
    expect(sizes.some((n) => n === 0)).toBe(true);
    expect(sizes.filter((n) => n > 1).length).toBeGreaterThan(10);
    // the hand-checked corners of the fixture
    expect(EXPECT['identities/services']!(world, ids.alice!).sort()).toEqual([ids.web, ids.wiki].sort());
    expect(EXPECT['identities/services']!(world, ids.bob!, 'Bind').sort()).toEqual([ids.ssh, ids.web, ids.wiki].sort());
    expect(EXPECT['identities/services']!(world, ids.erin!, 'Dial').sort()).toEqual([ids.billing, ids.db, ids.web, ids.wiki].sort());
    expect(EXPECT['service-policies/posture-checks']!(world, ids['sp-eng-sales-db']!)).toEqual([ids['pc-strict']]);
  });
});

describe.each(ROUTES)('GET /%s', (route) => {
  it('answers exactly the related entities of every parent', async () => {
    const [parent] = route.split('/');
    for (const id of PARENTS[parent!]!(world)) {
      const expected = EXPECT[route]!(world, id);
      const { ids: got, body } = await listIds(url(route, id, 'limit=500'));
      expect(got, `${route} of ${id}`).toEqual(expected);
      expect(body.meta.pagination).toEqual({ limit: 500, offset: 0, totalCount: expected.length });
      expect(body.meta.filterableFields).toContain('id');
    }
  });

  it('pages and sorts within the relation', async () => {
    const [parent] = route.split('/');
    const id = PARENTS[parent!]!(world).reduce((best, p) => (EXPECT[route]!(world, p).length > EXPECT[route]!(world, best).length ? p : best));
    const expected = EXPECT[route]!(world, id);
    const all = (await listIds(url(route, id, 'limit=500&sort=name desc'))).body.data as { id: string; name: string }[];
    expect(all.map((e) => e.id).sort()).toEqual(expected);
    const names = all.map((e) => e.name);
    expect(names).toEqual([...names].sort().reverse());
    const page = await listIds(url(route, id, 'limit=1&offset=1&sort=name desc'));
    expect(page.ids).toEqual(all.slice(1, 2).map((e) => e.id));
    expect(page.body.meta.pagination).toEqual({ limit: 1, offset: 1, totalCount: expected.length });
  });

  it('narrows with a filter and never widens beyond the relation', async () => {
    const [parent] = route.split('/');
    const everything = (world as any)[
      { identities: 'identities', services: 'services', 'edge-routers': 'edgeRouters', 'posture-checks': 'postureChecks', 'edge-router-policies': 'erp', 'service-edge-router-policies': 'serp', 'service-policies': 'sp' }[childOf(route)]!
    ] as { id: string; name: string }[];
    const allIds = JSON.stringify(everything.map((e) => e.id));
    for (const id of PARENTS[parent!]!(world)) {
      const expected = EXPECT[route]!(world, id);
      // a filter every entity passes, or that names every id, answers the relation only
      for (const filter of [`name != "no such name"`, `id in ${allIds}`, `name = "x" or id != "x"`]) {
        const got = await listIds(url(route, id, `limit=500&filter=${encodeURIComponent(filter)}`));
        expect(got.ids, `${route} of ${id} with ${filter}`).toEqual(expected);
      }
      if (expected.length === 0) continue;
      // naming one related entity narrows to it; naming an unrelated one gives nothing
      const one = expected[0]!;
      expect((await listIds(url(route, id, `filter=${encodeURIComponent(`id = "${one}"`)}`))).ids).toEqual([one]);
      const outside = everything.find((e) => !expected.includes(e.id));
      if (outside) {
        const got = await listIds(url(route, id, `filter=${encodeURIComponent(`id = "${outside.id}"`)}`));
        expect(got.ids).toEqual([]);
        expect(got.body.meta.pagination.totalCount).toBe(0);
      }
    }
  });

  it('refuses a bad filter and a bad sort with 400', async () => {
    const [parent] = route.split('/');
    const id = PARENTS[parent!]!(world)[0]!;
    expectError(await call(t, 'GET', url(route, id, 'filter=' + encodeURIComponent('name = ')), { token: admin }), 400, 'INVALID_FILTER', 'filter');
    expectError(await call(t, 'GET', url(route, id, 'filter=' + encodeURIComponent('noSuchField = "x"')), { token: admin }), 400, 'INVALID_FILTER', 'filter');
    expectError(await call(t, 'GET', url(route, id, 'sort=noSuchField'), { token: admin }), 400, 'INVALID_SORT_IDENTIFIER');
    expectError(await call(t, 'GET', url(route, id, 'limit=many'), { token: admin }), 400, 'INVALID_PAGINATION', 'limit');
  });

  it('answers 404 for an unknown parent', async () => {
    const res = await call(t, 'GET', url(route, 'no-such-id'), { token: admin });
    const body = expectError(res, 404, 'NOT_FOUND');
    expect(body.error.message).toContain('no-such-id');
  });

  it('answers 401 without a credential', async () => {
    const [parent] = route.split('/');
    const res = await call(t, 'GET', url(route, PARENTS[parent!]!(world)[0]!));
    expectMissingCredential(res);
  });
});

describe('permissions', () => {
  const tokens: Record<string, string> = {};
  beforeAll(async () => {
    for (const [name, permissions] of [
      ['nobody', []],
      ...Object.values(GROUP).map((g) => [g, [`${g}.read`]]),
      ['readonly', ['admin_readonly']],
    ] as [string, string[]][]) {
      await createIdentityWithPassword(t, admin, { name: `perm-${name}`, username: `perm-${name}`, password: 'perm-password-1', permissions });
      tokens[name] = await login(t, `perm-${name}`, 'perm-password-1');
    }
    admin = await asAdmin(t);
    world = await loadWorld();
  });

  it.each(ROUTES)('%s needs read of the listed resource: 401 otherwise', async (route) => {
    const [parent] = route.split('/');
    const id = PARENTS[parent!]!(world)[0]!;
    const needed = GROUP[childOf(route)]!;
    expectError(await call(t, 'GET', url(route, id), { token: tokens.nobody }), 401, 'UNAUTHORIZED');
    for (const group of Object.values(GROUP)) {
      const res = await call(t, 'GET', url(route, id), { token: tokens[group] });
      expect(res.statusCode, `${route} with ${group}.read`).toBe(group === needed ? 200 : 401);
    }
    expect((await call(t, 'GET', url(route, id), { token: tokens.readonly })).statusCode).toBe(200);
  });
});

describe('policyType', () => {
  it('restricts identities/services and services/identities to dial or bind policies', async () => {
    for (const route of ['identities/services', 'services/identities']) {
      const [parent] = route.split('/');
      for (const id of PARENTS[parent!]!(world)) {
        for (const [q, type] of [
          ['dial', 'Dial'],
          ['bind', 'Bind'],
          ['DIAL', 'Dial'],
          ['Bind', 'Bind'],
        ] as const) {
          const got = await listIds(url(route, id, `limit=500&policyType=${q}`));
          expect(got.ids, `${route} of ${id} (${q})`).toEqual(EXPECT[route]!(world, id, type));
        }
        const either = [...new Set([...EXPECT[route]!(world, id, 'Dial'), ...EXPECT[route]!(world, id, 'Bind')])].sort();
        expect((await listIds(url(route, id, 'limit=500'))).ids).toEqual(either);
      }
    }
  });

  it('makes a difference in the fixture', () => {
    expect(EXPECT['identities/services']!(world, ids.bob!, 'Dial')).not.toEqual(EXPECT['identities/services']!(world, ids.bob!, 'Bind'));
    expect(EXPECT['services/identities']!(world, ids.web!, 'Bind')).toEqual([ids.bob]);
  });

  it('refuses anything but dial or bind with 400 naming policyType', async () => {
    for (const route of ['identities/services', 'services/identities']) {
      const id = route.startsWith('identities') ? ids.bob! : ids.web!;
      for (const q of ['policyType=both', 'policyType=', 'policyType=Invalid']) {
        const body = expectError(await call(t, 'GET', url(route, id, q), { token: admin }), 400, 'COULD_NOT_VALIDATE', 'policyType');
        expect(body.error.cause.reason).toMatch(/dial or bind/);
      }
      expectError(await call(t, 'GET', url(route, id, 'policyType=dial&policyType=bind'), { token: admin }), 400, 'COULD_NOT_VALIDATE', 'policyType');
    }
  });

  it('checks the input before looking the parent up, and still answers 404 for an unknown parent', async () => {
    expectError(await call(t, 'GET', url('identities/services', 'nope', 'policyType=dial'), { token: admin }), 404, 'NOT_FOUND');
    expectError(await call(t, 'GET', url('identities/services', 'nope', 'policyType=x'), { token: admin }), 400, 'COULD_NOT_VALIDATE', 'policyType');
  });
});

describe('answers', () => {
  it('identities in related lists carry the computed fields of the identity list', async () => {
    const { body } = await listIds(url('services/identities', ids.wiki!, 'limit=500'));
    const fromList = json(await call(t, 'GET', `${MGMT}/identities?limit=500`, { token: admin })).data as any[];
    expect(body.data.length).toBeGreaterThan(1);
    for (const item of body.data) {
      const same = fromList.find((e) => e.id === item.id);
      expect(item).toEqual(same);
      expect(item).toHaveProperty('typeId');
      expect(item).toHaveProperty('authenticators');
      expect(item).toHaveProperty('hasApiSession');
    }
  });

  it('other related entities are answered as their own detail answers them', async () => {
    for (const [route, parent] of [
      ['identities/services', ids.erin!],
      ['identities/edge-routers', ids.alice!],
      ['services/service-policies', ids.web!],
      ['edge-routers/edge-router-policies', ids['er-east']!],
      ['edge-routers/service-edge-router-policies', ids['er-west']!],
      ['service-policies/posture-checks', ids['sp-eng-web']!],
    ] as const) {
      const { body } = await listIds(url(route, parent, 'limit=500'));
      expect(body.data.length, route).toBeGreaterThan(0);
      for (const item of body.data) {
        const detailUrl = `${MGMT}/${childOf(route)}/${item.id}`;
        expect(item, detailUrl).toEqual(json(await call(t, 'GET', detailUrl, { token: admin })).data);
      }
    }
  });

  it('follow the entities and the policies when they change', async () => {
    const relist = async () => {
      world = await loadWorld();
      return (await listIds(url('identities/services', ids.dave!, 'limit=500'))).ids;
    };
    expect(EXPECT['identities/services']!(world, ids.dave!)).toEqual([ids.wiki]);
    await patch('identities', ids.dave!, { roleAttributes: ['eng'] });
    expect(await relist()).toEqual([ids.web, ids.wiki].sort());
    expect(EXPECT['identities/services']!(world, ids.dave!)).toEqual([ids.web, ids.wiki].sort());
    await patch('identities', ids.dave!, { roleAttributes: [] });
    expect(await relist()).toEqual([ids.wiki]);
    // a policy now naming dave grants bind on every service
    await patch('service-policies', ids['sp-nobody']!, { identityRoles: [`@${ids.dave}`] });
    const all = world.services.map((e) => e.id).sort();
    expect(await relist()).toEqual(all);
    expect((await listIds(url('identities/services', ids.dave!, 'limit=500&policyType=bind'))).ids).toEqual(all);
    expect((await listIds(url('identities/services', ids.dave!, 'limit=500&policyType=dial'))).ids).toEqual([ids.wiki]);
    await patch('service-policies', ids['sp-nobody']!, { identityRoles: ['#nobody'] });
    expect(await relist()).toEqual([ids.wiki]);
  });
});

describe('the query behind identities/services', () => {
  async function plan(type?: 'Dial' | 'Bind'): Promise<string[]> {
    const db = t.app.core.store.db;
    const rel = RELATIONS.find((r) => r.parent === 'identities' && r.sub === 'services')!;
    const compiled = db
      .selectFrom('services')
      .where(rel.scope(ids.alice!, type))
      .selectAll()
      .orderBy('id')
      .limit(10)
      .compile();
    const result = await db.executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${compiled.sql}`, [...compiled.parameters]));
    return result.rows.map((r) => r.detail);
  }

  it('is an indexed join: link tables, policies and services are searched by key, never scanned', async () => {
    for (const type of [undefined, 'Dial', 'Bind'] as const) {
      const steps = await plan(type);
      const text = steps.join('\n');
      expect(text, text).not.toMatch(/\bSCAN (services|service_policies|service_policy_identities|service_policy_services)\b/);
      expect(text).toMatch(/SEARCH a USING COVERING INDEX service_policy_identities_reverse \(identity_id=\?\)/);
      expect(text).toMatch(/SEARCH b USING COVERING INDEX sqlite_autoindex_service_policy_services_1 \(policy_id=\?\)/);
      if (type) expect(text).toMatch(/SEARCH p USING INDEX sqlite_autoindex_service_policies_1 \(id=\?\)/);
    }
  });
});
