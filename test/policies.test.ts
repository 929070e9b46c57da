// The three policy kinds on the Management API: CRUD, authorization, validation of role lists,
// `*RolesDisplay`, filters, and the links a write leaves behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resources } from '../src/domain/resources.js';
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
} from './helpers.js';

type Field = 'identityRoles' | 'serviceRoles' | 'edgeRouterRoles' | 'postureCheckRoles';

interface KindCase {
  collection: string;
  permission: string;
  /** Required fields besides name and semantic. */
  base: Record<string, unknown>;
  lists: Field[];
  links: string[];
  /** Link table and entity column of the first list. */
  firstLink: { table: string; column: string };
  system: boolean;
}

const KINDS: KindCase[] = [
  {
    collection: 'service-policies',
    permission: 'service-policy',
    base: { type: 'Dial' },
    lists: ['identityRoles', 'serviceRoles', 'postureCheckRoles'],
    links: ['services', 'identities', 'posture-checks'],
    firstLink: { table: 'service_policy_identities', column: 'identity_id' },
    system: false,
  },
  {
    collection: 'edge-router-policies',
    permission: 'edge-router-policy',
    base: {},
    lists: ['identityRoles', 'edgeRouterRoles'],
    links: ['edge-routers', 'identities'],
    firstLink: { table: 'edge_router_policy_identities', column: 'identity_id' },
    system: true,
  },
  {
    collection: 'service-edge-router-policies',
    permission: 'service-edge-router-policy',
    base: {},
    lists: ['serviceRoles', 'edgeRouterRoles'],
    links: ['edge-routers', 'services'],
    firstLink: { table: 'service_edge_router_policy_services', column: 'service_id' },
    system: false,
  },
];

let t: TestController;
let admin: string;
let resources: Resources;
/** One entity of each kind, named `<kind>-one` and carrying the attribute `a`; and a second one without. */
const fixture: Record<Field, { one: string; two: string; oneName: string }> = {} as never;

const COLLECTION: Record<Field, { collection: string; body: Record<string, unknown>; name: string }> = {
  identityRoles: { collection: 'identities', body: { type: 'User', isAdmin: false }, name: 'identity' },
  serviceRoles: { collection: 'services', body: {}, name: 'service' },
  edgeRouterRoles: { collection: 'edge-routers', body: {}, name: 'edge-router' },
  postureCheckRoles: { collection: 'posture-checks', body: { typeId: 'MFA' }, name: 'posture-check' },
};

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  resources = t.app.core.resources;
  await resources.write(async (ctx) => {
    const types = resources.get('posture-check-types').repo;
    if (!(await types.exists(ctx.tx, 'MFA'))) {
      await types.insert(ctx.tx, { id: 'MFA', name: 'MFA', createdAt: ctx.now, updatedAt: ctx.now, tags: {}, operatingSystems: [] });
    }
  });
  for (const [field, c] of Object.entries(COLLECTION) as [Field, (typeof COLLECTION)[Field]][]) {
    const service = resources.get(c.collection);
    const one = await service.create({ ...c.body, name: `${c.name}-one`, roleAttributes: ['a', 'shared'] });
    const two = await service.create({ ...c.body, name: `${c.name}-two`, roleAttributes: ['b', 'shared'] });
    fixture[field] = { one: one.id, two: two.id, oneName: `${c.name}-one` };
  }
});
afterAll(async () => {
  await t.close();
});

describe.each(KINDS)('$collection', (k) => {
  const url = `${MGMT}/${k.collection}`;
  const body = (extra: Record<string, unknown> = {}) => ({ ...k.base, semantic: 'AllOf', ...extra });
  const create = async (extra: Record<string, unknown>) => {
    const res = await call(t, 'POST', url, { token: admin, body: body(extra) });
    expect(res.statusCode, res.body).toBe(201);
    return json(res).data.id as string;
  };
  const detail = async (id: string) => {
    const res = await call(t, 'GET', `${url}/${id}`, { token: admin });
    expect(res.statusCode, res.body).toBe(200);
    return json(res).data;
  };
  const [first, second] = k.lists as [Field, Field];

  it('creates, reads, lists, updates, patches and deletes', async () => {
    const created = await call(t, 'POST', url, {
      token: admin,
      body: body({ name: `${k.collection}-crud`, [first]: ['#a'], [second]: [`@${fixture[second].one}`], tags: { team: 'net' } }),
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = json(created).data.id as string;
    expect(json(created).data).toEqual({ id, _links: { self: { href: `./${k.collection}/${id}` } } });

    const e = await detail(id);
    const at = new Date(t.clock()).toISOString();
    expect(e).toMatchObject({
      id,
      name: `${k.collection}-crud`,
      semantic: 'AllOf',
      [first]: ['#a'],
      [second]: [`@${fixture[second].one}`],
      tags: { team: 'net' },
      createdAt: at,
      updatedAt: at,
      ...k.base,
    });
    if (k.system) expect(e.isSystem).toBe(false);
    for (const sub of k.links) expect(e._links[sub]).toEqual({ href: `./${k.collection}/${id}/${sub}` });
    // Lists absent on create are empty.
    for (const f of k.lists.slice(2)) expect(e[f]).toEqual([]);

    const list = await call(t, 'GET', `${url}?filter=${encodeURIComponent(`name = "${k.collection}-crud"`)}`, { token: admin });
    expect(list.statusCode).toBe(200);
    expect(json(list).data.map((x: { id: string }) => x.id)).toEqual([id]);
    expect(json(list).meta.pagination).toEqual({ limit: 10, offset: 0, totalCount: 1 });
    expect(json(list).meta.filterableFields).toEqual(expect.arrayContaining(['name', 'semantic', ...k.lists]));

    t.clock.advance(1000);
    const put = await call(t, 'PUT', `${url}/${id}`, {
      token: admin,
      body: body({ name: `${k.collection}-crud-2`, semantic: 'AnyOf', [first]: ['#b'] }),
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(json(put).data).toEqual({});
    let after = await detail(id);
    expect(after).toMatchObject({ name: `${k.collection}-crud-2`, semantic: 'AnyOf', [first]: ['#b'], [second]: [], tags: {} });
    expect(after.updatedAt).toBe(new Date(t.clock()).toISOString());
    expect(after.createdAt).toBe(e.createdAt);

    const patch = await call(t, 'PATCH', `${url}/${id}`, { token: admin, body: { [second]: ['#shared'] } });
    expect(patch.statusCode, patch.body).toBe(200);
    after = await detail(id);
    expect(after).toMatchObject({ name: `${k.collection}-crud-2`, semantic: 'AnyOf', [first]: ['#b'], [second]: ['#shared'] });

    const del = await call(t, 'DELETE', `${url}/${id}`, { token: admin });
    expect(del.statusCode).toBe(200);
    expect(json(del).data).toEqual({});
    expectError(await call(t, 'GET', `${url}/${id}`, { token: admin }), 404, 'NOT_FOUND');
  });

  it('keeps the links of its role lists', async () => {
    const id = await create({ name: `${k.collection}-links`, [first]: ['#a'] });
    const rows = async () =>
      (await resources.store.db.selectFrom(k.firstLink.table).select(k.firstLink.column).where('policy_id', '=', id).execute())
        .map((r) => r[k.firstLink.column])
        .sort();
    expect(await rows()).toEqual([fixture[first].one]);
    await call(t, 'PATCH', `${url}/${id}`, { token: admin, body: { [first]: ['#shared'] } });
    expect(await rows()).toEqual([fixture[first].one, fixture[first].two].sort());
    await call(t, 'PATCH', `${url}/${id}`, { token: admin, body: { [first]: ['#all'] } });
    const all = await resources.store.db.selectFrom(resources.get(COLLECTION[first].collection).def.table).select('id').execute();
    expect(await rows()).toEqual(all.map((r) => r.id).sort());
    await call(t, 'DELETE', `${url}/${id}`, { token: admin });
    expect(await rows()).toEqual([]);
  });

  it('shows each role with what it stands for', async () => {
    const id = await create({ name: `${k.collection}-display`, [first]: ['#a', `@${fixture[first].one}`], [second]: ['#all'] });
    const e = await detail(id);
    expect(e[`${first}Display`]).toEqual([
      { role: '#a', name: '#a' },
      { role: `@${fixture[first].one}`, name: `@${fixture[first].oneName}` },
    ]);
    expect(e[`${second}Display`]).toEqual([{ role: '#all', name: '#all' }]);
    for (const f of k.lists.slice(2)) expect(e[`${f}Display`]).toEqual([]);
    // Lists carry the same fields.
    const list = await call(t, 'GET', `${url}?filter=${encodeURIComponent(`id = "${id}"`)}`, { token: admin });
    expect(json(list).data[0][`${first}Display`]).toEqual(e[`${first}Display`]);
  });

  // A deleted entity's `@id` stayed in the lists, and an entity made again with that id was selected.
  it.each(k.lists)('a deleted entity leaves %s, and its links with it', async (field) => {
    const c = COLLECTION[field];
    const gone = (await resources.get(c.collection).create({ ...c.body, name: `${k.collection}-${field}-gone` })).id;
    const id = await create({ name: `${k.collection}-${field}-naming`, [field]: ['#a', `@${gone}`] });
    const before = await detail(id);
    expect((await call(t, 'DELETE', `${MGMT}/${c.collection}/${gone}`, { token: admin })).statusCode).toBe(200);
    const after = await detail(id);
    expect(after[field]).toEqual(['#a']);
    expect(after[`${field}Display`]).toEqual([{ role: '#a', name: '#a' }]);
    expect(after.updatedAt >= before.updatedAt).toBe(true);
    // The policy still selects what its other roles select, and is edited as before.
    const selected = json(await call(t, 'GET', `${url}/${id}/${c.collection}`, { token: admin })).data.map((e: { id: string }) => e.id);
    expect(selected).toContain(fixture[field].one);
    expect(selected).not.toContain(gone);
    expect((await call(t, 'PATCH', `${url}/${id}`, { token: admin, body: { tags: { edited: true } } })).statusCode).toBe(200);
  });

  it('filters on role lists and scalar fields', async () => {
    const p1 = await create({ name: `${k.collection}-f1`, [first]: ['#fa', '#fb'] });
    const p2 = await create({ name: `${k.collection}-f2`, semantic: 'AnyOf', [first]: ['#fb'] });
    const ids = async (filter: string) => {
      const res = await call(t, 'GET', `${url}?filter=${encodeURIComponent(filter)}`, { token: admin });
      expect(res.statusCode, res.body).toBe(200);
      return json(res).data.map((x: { id: string }) => x.id).sort();
    };
    expect(await ids(`anyOf(${first}) = "#fa"`)).toEqual([p1]);
    expect(await ids(`anyOf(${first}) = "#fb"`)).toEqual([p1, p2].sort());
    expect(await ids(`anyOf(${first}) = "#fb" and semantic = "AnyOf"`)).toEqual([p2]);
    expect(await ids(`count(${first}) = 2 and name contains "-f"`)).toEqual([p1]);
    expectError(await call(t, 'GET', `${url}?filter=${encodeURIComponent('nope = 1')}`, { token: admin }), 400, 'INVALID_FILTER');
  });

  describe('rejects bad input, naming the field', () => {
    const cases: [string, () => Record<string, unknown>, string][] = [
      ['missing name', () => body(), 'name'],
      ['empty name', () => body({ name: '' }), 'name'],
      ['missing semantic', () => ({ ...k.base, name: 'v' }), 'semantic'],
      ['unknown semantic', () => body({ name: 'v', semantic: 'OneOf' }), 'semantic'],
      ['a role without prefix', () => body({ name: 'v', [first]: ['#a', 'b'] }), `${first}[1]`],
      ['a bare prefix', () => body({ name: 'v', [second]: ['#'] }), `${second}[0]`],
      ['a role list that is not a list', () => body({ name: 'v', [first]: '#a' }), first],
      ['#all with other roles', () => body({ name: 'v', [first]: ['#all', '#a'] }), first],
      ['an unknown @id', () => body({ name: 'v', [second]: ['@no-such-entity'] }), second],
      ['an @id of another kind', () => body({ name: 'v', [first]: [`@${fixture[second].one}`] }), first],
      ['a tag that is a number', () => body({ name: 'v', tags: { n: 1 } }), 'tags.n'],
      ...(k.collection === 'service-policies'
        ? ([
            ['missing type', () => ({ semantic: 'AllOf', name: 'v' }), 'type'],
            ['unknown type', () => body({ name: 'v', type: 'Host' }), 'type'],
          ] as [string, () => Record<string, unknown>, string][])
        : []),
    ];
    it.each(cases)('%s', async (_name, make, field) => {
      expectError(await call(t, 'POST', url, { token: admin, body: make() }), 400, 'COULD_NOT_VALIDATE', field);
    });

    it('on update and patch too', async () => {
      const id = await create({ name: `${k.collection}-invalid-edit` });
      expectError(
        await call(t, 'PATCH', `${url}/${id}`, { token: admin, body: { [first]: ['@missing'] } }),
        400,
        'COULD_NOT_VALIDATE',
        first,
      );
      expectError(await call(t, 'PUT', `${url}/${id}`, { token: admin, body: { ...k.base, name: 'x' } }), 400, 'COULD_NOT_VALIDATE', 'semantic');
      expectError(
        await call(t, 'PUT', `${url}/${id}`, { token: admin, body: body({ name: 'x', [second]: ['#all', `@${fixture[second].one}`] }) }),
        400,
        'COULD_NOT_VALIDATE',
        second,
      );
      expect((await detail(id))[first]).toEqual([]);
    });

    it('a duplicate name', async () => {
      await create({ name: `${k.collection}-dup` });
      expectError(await call(t, 'POST', url, { token: admin, body: body({ name: `${k.collection}-dup` }) }), 400, 'COULD_NOT_VALIDATE', 'name');
    });
  });

  it('needs admin or its permission group', async () => {
    const password = 'policy-user-1';
    await createIdentityWithPassword(t, admin, { name: `${k.collection}-stranger`, username: `${k.collection}-stranger`, password, permissions: ['identity'] });
    const other = await login(t, `${k.collection}-stranger`, password);
    expectError(await call(t, 'GET', url, { token: other }), 401, 'UNAUTHORIZED');
    expectError(await call(t, 'POST', url, { token: other, body: body({ name: `${k.collection}-by-stranger` }) }), 401, 'UNAUTHORIZED');

    await createIdentityWithPassword(t, admin, { name: `${k.collection}-reader`, username: `${k.collection}-reader`, password, permissions: [`${k.permission}.read`] });
    const reader = await login(t, `${k.collection}-reader`, password);
    expect((await call(t, 'GET', url, { token: reader })).statusCode).toBe(200);
    expectError(await call(t, 'POST', url, { token: reader, body: body({ name: `${k.collection}-by-reader` }) }), 401, 'UNAUTHORIZED');

    await createIdentityWithPassword(t, admin, { name: `${k.collection}-owner`, username: `${k.collection}-owner`, password, permissions: [k.permission] });
    const owner = await login(t, `${k.collection}-owner`, password);
    const res = await call(t, 'POST', url, { token: owner, body: body({ name: `${k.collection}-by-owner`, [first]: ['#a'] }) });
    expect(res.statusCode, res.body).toBe(201);
    const id = json(res).data.id as string;
    expect((await call(t, 'GET', `${url}/${id}`, { token: owner })).statusCode).toBe(200);
    expect((await call(t, 'PATCH', `${url}/${id}`, { token: owner, body: { semantic: 'AnyOf' } })).statusCode).toBe(200);
    expect((await call(t, 'DELETE', `${url}/${id}`, { token: owner })).statusCode).toBe(200);
  });
});

describe('service policies', () => {
  it('filter on type', async () => {
    const url = `${MGMT}/service-policies`;
    const dial = json(await call(t, 'POST', url, { token: admin, body: { name: 'type-dial', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#typed'] } })).data.id;
    const bind = json(await call(t, 'POST', url, { token: admin, body: { name: 'type-bind', type: 'Bind', semantic: 'AnyOf', identityRoles: ['#typed'] } })).data.id;
    const ids = async (filter: string) =>
      json(await call(t, 'GET', `${url}?filter=${encodeURIComponent(filter)}`, { token: admin })).data.map((x: { id: string }) => x.id);
    expect(await ids('type = "Dial" and anyOf(identityRoles) = "#typed"')).toEqual([dial]);
    expect(await ids('type = "Bind" and anyOf(identityRoles) = "#typed"')).toEqual([bind]);
  });
});

describe('system edge router policies', () => {
  it('refuse update and delete', async () => {
    const id = 'system-erp';
    await resources.write(async (ctx) => {
      await resources.get('edge-router-policies').repo.insert(ctx.tx, {
        id,
        createdAt: ctx.now,
        updatedAt: ctx.now,
        tags: {},
        isSystem: true,
        name: 'a-system-policy',
        semantic: 'AnyOf',
        identityRoles: [],
        edgeRouterRoles: [],
      });
    });
    const url = `${MGMT}/edge-router-policies/${id}`;
    expect(json(await call(t, 'GET', url, { token: admin })).data.isSystem).toBe(true);
    expectError(await call(t, 'PATCH', url, { token: admin, body: { semantic: 'AllOf' } }), 400, 'ENTITY_CAN_NOT_BE_UPDATED');
    expectError(await call(t, 'PUT', url, { token: admin, body: { name: 'x', semantic: 'AllOf' } }), 400, 'ENTITY_CAN_NOT_BE_UPDATED');
    expectError(await call(t, 'DELETE', url, { token: admin }), 400, 'ENTITY_CAN_NOT_BE_DELETED');
  });
});

describe('domain validation without the HTTP schema', () => {
  // Other writers (the CLI, the controller itself) reach the behaviour without request schemas.
  it.each<[string, Record<string, unknown>, string, unknown]>([
    ['a role without prefix', { identityRoles: ['bad'] }, 'identityRoles', 'bad'],
    ['#all with others', { serviceRoles: ['#all', '#x'] }, 'serviceRoles', '#all'],
    ['an unknown @id', { postureCheckRoles: ['@nope'] }, 'postureCheckRoles', '@nope'],
    ['an unknown semantic', { semantic: 'Some' }, 'semantic', 'Some'],
  ])('%s', async (_name, extra, field, value) => {
    const err = await resources
      .get('service-policies')
      .create({ name: `domain-${field}`, type: 'Dial', semantic: 'AllOf', ...extra })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'COULD_NOT_VALIDATE', status: 400, cause: { field, value } });
  });
});
