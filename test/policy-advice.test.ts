// Policy advice (`/identities/{id}/policy-advice/{serviceId}`, behaviour.md §4): whether service
// policies let the identity dial or bind the service, how many edge routers each side may use, and
// the routers both may use with their online state; checked case by case and, for every identity and
// service pair, against a brute-force evaluation of the stored policies.
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
import { matches, networkFixture, type Ent, type Pol, type World } from './network-fixtures.js';

let t: TestController;
let admin: string;

const { create, domainCheckType, loadWorld } = networkFixture(() => ({ t, admin }));

// ---- the fixture -------------------------------------------------------------------------------

const ids: Record<string, string> = {};
let world: World;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  for (const [name, roleAttributes] of [
    ['i-dial', ['d']],
    ['i-bind', ['b']],
    ['i-both', ['d', 'b']],
    ['i-none', []],
  ] as [string, string[]][]) {
    ids[name] = await create('identities', { name, type: 'User', isAdmin: false, roleAttributes });
  }
  ids.svc = await create('services', { name: 'svc', roleAttributes: ['s'] });
  ids['svc-other'] = await create('services', { name: 'svc-other', roleAttributes: [] });
  for (const [name, roleAttributes] of [
    ['r1', ['x']],
    ['r2', ['x', 'y']],
    ['r3', ['y']],
    ['r4', []],
  ] as [string, string[]][]) {
    ids[name] = await create('edge-routers', { name, roleAttributes });
  }
  await create('service-policies', { name: 'dial-s', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#d'], serviceRoles: ['#s'] });
  await create('service-policies', { name: 'bind-s', type: 'Bind', semantic: 'AnyOf', identityRoles: ['#b'], serviceRoles: ['#s'] });
  // posture checks play no part in the advice
  const typeId = await domainCheckType();
  const check = await create('posture-checks', { name: 'pc', typeId, roleAttributes: ['p'], domains: ['corp.example'] });
  await create('service-policies', {
    name: 'dial-other-with-posture',
    type: 'Dial',
    semantic: 'AllOf',
    identityRoles: ['#d', '#b'],
    serviceRoles: [`@${ids['svc-other']}`],
    postureCheckRoles: [`@${check}`],
  });
  await create('edge-router-policies', { name: 'erp-x', semantic: 'AnyOf', identityRoles: ['#d', '#b'], edgeRouterRoles: ['#x'] });
  await create('edge-router-policies', { name: 'erp-none', semantic: 'AnyOf', identityRoles: [`@${ids['i-none']}`], edgeRouterRoles: ['#y'] });
  await create('service-edge-router-policies', { name: 'serp-s', semantic: 'AnyOf', serviceRoles: ['#s'], edgeRouterRoles: ['#y'] });
  // online state is the controller's own record of router connections
  await t.app.core.store.db.updateTable('edge_routers').set({ is_online: t.app.core.store.dialect.toDb('boolean', true) }).where('id', 'in', [ids.r2!, ids.r1!]).execute();
  world = await loadWorld();
});
afterAll(async () => {
  await t.close();
});

const advice = async (identityId: string, serviceId: string, token = admin) =>
  call(t, 'GET', `${MGMT}/identities/${identityId}/policy-advice/${serviceId}`, { token });

async function adviceOf(identityId: string, serviceId: string): Promise<any> {
  const res = await advice(identityId, serviceId);
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
}

const ref = (entity: string, id: string, name: string) => ({ _links: { self: { href: `./${entity}/${id}` } }, entity, id, name });
const router = (name: string, isOnline: boolean) => ({ ...ref('edge-routers', ids[name]!, name), isOnline });

// ---- tests -----------------------------------------------------------------------------------

describe('policy advice', () => {
  it('dial only, with the routers both sides may use', async () => {
    expect(await adviceOf(ids['i-dial']!, ids.svc!)).toEqual({
      identityId: ids['i-dial'],
      identity: ref('identities', ids['i-dial']!, 'i-dial'),
      serviceId: ids.svc,
      service: ref('services', ids.svc!, 'svc'),
      isDialAllowed: true,
      isBindAllowed: false,
      identityRouterCount: 2,
      serviceRouterCount: 2,
      commonRouters: [router('r2', true)],
    });
  });

  it('bind only', async () => {
    const a = await adviceOf(ids['i-bind']!, ids.svc!);
    expect(a).toMatchObject({ isDialAllowed: false, isBindAllowed: true, identityRouterCount: 2, serviceRouterCount: 2 });
    expect(a.commonRouters).toEqual([router('r2', true)]);
  });

  it('dial and bind', async () => {
    expect(await adviceOf(ids['i-both']!, ids.svc!)).toMatchObject({ isDialAllowed: true, isBindAllowed: true });
  });

  it('no access, yet common routers (ordered by name, offline ones included)', async () => {
    const a = await adviceOf(ids['i-none']!, ids.svc!);
    expect(a).toMatchObject({ isDialAllowed: false, isBindAllowed: false, identityRouterCount: 2, serviceRouterCount: 2 });
    expect(a.commonRouters).toEqual([router('r2', true), router('r3', false)]);
  });

  it('access ignoring posture, and no router for a service no service edge router policy names', async () => {
    const a = await adviceOf(ids['i-both']!, ids['svc-other']!);
    expect(a).toMatchObject({ isDialAllowed: true, isBindAllowed: false, identityRouterCount: 2, serviceRouterCount: 0, commonRouters: [] });
  });

  it('nothing at all', async () => {
    const a = await adviceOf(ids['i-none']!, ids['svc-other']!);
    expect(a).toMatchObject({ isDialAllowed: false, isBindAllowed: false, identityRouterCount: 2, serviceRouterCount: 0, commonRouters: [] });
    expect(a.identity.name).toBe('i-none');
    expect(a.service.name).toBe('svc-other');
  });

  it('agrees with a brute-force evaluation for every identity and service', async () => {
    const routersOf = (pols: Pol[], field: keyof Pol, e: Ent) =>
      world.edgeRouters.filter((r) => pols.some((p) => matches(p.semantic, p[field] as string[], e) && matches(p.semantic, p.edgeRouterRoles, r)));
    for (const i of world.identities) {
      for (const s of world.services) {
        const allowed = (type: string) =>
          world.sp.some((p) => p.type === type && matches(p.semantic, p.identityRoles, i) && matches(p.semantic, p.serviceRoles, s));
        const mine = routersOf(world.erp, 'identityRoles', i);
        const its = routersOf(world.serp, 'serviceRoles', s);
        const common = mine
          .filter((r) => its.some((x) => x.id === r.id))
          .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
          .map((r) => ({ ...ref('edge-routers', r.id, r.name), isOnline: r.isOnline === true }));
        expect(await adviceOf(i.id, s.id), `${i.name} → ${s.name}`).toEqual({
          identityId: i.id,
          identity: ref('identities', i.id, i.name),
          serviceId: s.id,
          service: ref('services', s.id, s.name),
          isDialAllowed: allowed('Dial'),
          isBindAllowed: allowed('Bind'),
          identityRouterCount: mine.length,
          serviceRouterCount: its.length,
          commonRouters: common,
        });
      }
    }
  });

  it('answers 404 for an unknown identity or service', async () => {
    expect(expectError(await advice('no-such-identity', ids.svc!), 404, 'NOT_FOUND').error.message).toMatch(/identity.*no-such-identity/);
    expect(expectError(await advice(ids['i-dial']!, 'no-such-service'), 404, 'NOT_FOUND').error.message).toMatch(/service.*no-such-service/);
  });

  it('answers 401 without a credential', async () => {
    const res = await call(t, 'GET', `${MGMT}/identities/${ids['i-dial']}/policy-advice/${ids.svc}`);
    expectMissingCredential(res);
  });

  it('needs read of identities, services and routers', async () => {
    const cases: [string, string[], number][] = [
      ['adv-nobody', [], 401],
      ['adv-identity', ['identity.read'], 401],
      ['adv-identity-service', ['identity.read', 'service.read'], 401],
      ['adv-service-router', ['service.read', 'router.read'], 401],
      ['adv-all-three', ['identity.read', 'service.read', 'router.read'], 200],
      ['adv-groups', ['identity', 'service', 'router'], 200],
      ['adv-readonly', ['admin_readonly'], 200],
    ];
    for (const [name, permissions, status] of cases) {
      await createIdentityWithPassword(t, admin, { name, username: name, password: 'advice-password-1', permissions });
      const token = await login(t, name, 'advice-password-1');
      const res = await advice(ids['i-dial']!, ids.svc!, token);
      expect(res.statusCode, `${name}: ${res.body}`).toBe(status);
      if (status === 401) expectError(res, 401, 'UNAUTHORIZED');
    }
  });
});
