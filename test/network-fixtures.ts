// Building a network through the Management API and reading it back whole, for tests that check
// what the policies relate against a brute-force evaluation of behaviour.md §4.
import { call, json, MGMT, type TestController } from './helpers.js';

export interface Ent {
  id: string;
  name: string;
  roleAttributes: string[];
  isOnline?: boolean;
}

export interface Pol {
  id: string;
  type?: string;
  semantic: string;
  identityRoles?: string[];
  serviceRoles?: string[];
  edgeRouterRoles?: string[];
  postureCheckRoles?: string[];
}

export interface World {
  identities: Ent[];
  services: Ent[];
  edgeRouters: Ent[];
  postureChecks: Ent[];
  sp: Pol[];
  erp: Pol[];
  serp: Pol[];
}

/** behaviour.md §4, written out independently of the policy engine. */
export function matches(semantic: string, roles: readonly string[] | undefined, e: Ent): boolean {
  const list = roles ?? [];
  if (list.includes(`@${e.id}`) || list.includes('#all')) return true;
  const attrs = list.filter((r) => r.startsWith('#')).map((r) => r.slice(1));
  if (attrs.length === 0) return false;
  return semantic === 'AllOf' ? attrs.every((a) => e.roleAttributes.includes(a)) : attrs.some((a) => e.roleAttributes.includes(a));
}

/** Helpers bound to a controller and an admin token that a test file assigns in beforeAll. */
export function networkFixture(current: () => { t: TestController; admin: string }) {
  /** Creates through the Management API; answers the id. */
  async function create(collection: string, body: Record<string, unknown>): Promise<string> {
    const { t, admin } = current();
    const res = await call(t, 'POST', `${MGMT}/${collection}`, { token: admin, body });
    if (res.statusCode !== 201) throw new Error(`creating ${collection} failed: ${res.statusCode} ${res.body}`);
    return json(res).data.id as string;
  }

  /** Patches through the Management API. */
  async function patch(collection: string, id: string, body: Record<string, unknown>): Promise<void> {
    const { t, admin } = current();
    const res = await call(t, 'PATCH', `${MGMT}/${collection}/${id}`, { token: admin, body });
    if (res.statusCode !== 200) throw new Error(`patching ${collection} ${id} failed: ${res.statusCode} ${res.body}`);
  }

  /** The id of the seeded DOMAIN posture check type. */
  async function domainCheckType(): Promise<string> {
    const { t, admin } = current();
    const res = await call(t, 'GET', `${MGMT}/posture-check-types?filter=${encodeURIComponent('name = "DOMAIN"')}`, { token: admin });
    const id = json(res).data?.[0]?.id;
    if (res.statusCode !== 200 || typeof id !== 'string') throw new Error(`no DOMAIN posture check type: ${res.statusCode} ${res.body}`);
    return id;
  }

  /** Every entity and policy in the store. */
  async function loadWorld(): Promise<World> {
    const { t } = current();
    const r = t.app.core.resources;
    const db = t.app.core.store.db;
    const all = async (c: string) => (await r.get(c).repo.list(db, { sort: [], offset: 0, limit: null })).items as any[];
    const ents = async (c: string) =>
      (await all(c)).map((e) => ({ id: e.id, name: e.name, roleAttributes: e.roleAttributes ?? [], isOnline: e.isOnline }));
    return {
      identities: await ents('identities'),
      services: await ents('services'),
      edgeRouters: await ents('edge-routers'),
      postureChecks: await ents('posture-checks'),
      sp: await all('service-policies'),
      erp: await all('edge-router-policies'),
      serp: await all('service-edge-router-policies'),
    };
  }

  return { create, patch, domainCheckType, loadWorld };
}
