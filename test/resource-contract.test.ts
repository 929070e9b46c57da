// The contract every resource keeps, generated from its definition for each resource the controller
// registers, on the Management API and on the Client API where the resource is served there: the
// generic routes served are those the definition enables; without a credential every route (and each
// related list the definition links) answers 401 with both challenges and changes nothing; an unknown
// id is 404 with the error envelope; a create with a bad value for a field (derived from its kind)
// answers 400 naming that field; each permission of the resource's group admits exactly its action
// and nothing else does; `meta.filterableFields` is what the definition makes filterable, a filter on
// each of them is accepted (and finds the entity it names), a filter on an unknown field is 400.
// Resource tests keep what is particular to each resource.
import { Value } from '@sinclair/typebox/value';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_OPERATIONS, MAX_NAME, MAX_STRING, permissionFor, type FieldDef, type Operation, type ResourceDef } from '../src/resources/kit.js';
import { PERMISSIONS } from '../src/resources/permissions.js';
import { relationFilterFields } from '../src/resources/relations.js';
import { client, Network } from './fixtures/network.js';
import {
  ADMIN_ENV,
  asAdmin,
  authPolicyBody,
  call,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  expectMissingCredential,
  json,
  login,
  MGMT,
  startTestController,
  testCa,
  type TestController,
} from './helpers.js';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type Body = Record<string, unknown>;

/** How each generic operation is served: method, and whether it is on `/<name>/{id}`. */
const ROUTE: Record<Operation, { method: Method; item: boolean }> = {
  list: { method: 'GET', item: false },
  create: { method: 'POST', item: false },
  get: { method: 'GET', item: true },
  update: { method: 'PUT', item: true },
  patch: { method: 'PATCH', item: true },
  delete: { method: 'DELETE', item: true },
};
const ACTION_OF: Record<Operation, 'read' | 'create' | 'update' | 'delete'> = {
  list: 'read',
  get: 'read',
  create: 'create',
  update: 'update',
  patch: 'update',
  delete: 'delete',
};
const SUCCESS: Record<Operation, number> = { list: 200, get: 200, create: 201, update: 200, patch: 200, delete: 200 };
const UNKNOWN_ID = 'contract-no-such-id';
const NOT_PERMITTED = 'overlay-session realm="overlay-session" error="invalid" error_description="not permitted"';

// The resources are enumerated from the controller itself, so a resource registered tomorrow is held
// to the contract without anyone adding it here.
const t: TestController = await startTestController({ env: ADMIN_ENV });
const definitions: readonly ResourceDef[] = t.app.core.resources.all().map((service) => service.def);

/** The OpenAPI document an API serves, from its `/specs`. */
interface OpenApiDocument {
  paths: Record<string, Record<string, unknown>>;
}
async function servedDocument(api: string): Promise<OpenApiDocument> {
  const specs = json(await call(t, 'GET', `${api}/specs`));
  return json(await call(t, 'GET', `${api}/specs/${specs.data[0].id}/spec`));
}
const documents: Record<string, OpenApiDocument> = { [MGMT]: await servedDocument(MGMT), [CLIENT]: await servedDocument(CLIENT) };

function enabled(def: ResourceDef): Operation[] {
  return ALL_OPERATIONS.filter((op) => (def.operations ?? ALL_OPERATIONS).includes(op));
}

/** The generic operations of `def` that `api` serves, read from its OpenAPI document. */
function served(api: string, def: ResourceDef): Operation[] {
  const paths = documents[api]!.paths;
  return ALL_OPERATIONS.filter((op) => {
    const path = `${api}/${def.name}${ROUTE[op].item ? '/{id}' : ''}`;
    return paths[path]?.[ROUTE[op].method.toLowerCase()] !== undefined;
  });
}

/** The related lists (`GET /<name>/{id}/<sub>`) the definition links and the API serves. */
function servedLinks(api: string, def: ResourceDef): string[] {
  return (def.links ?? []).filter((sub) => documents[api]!.paths[`${api}/${def.name}/{id}/${sub}`]?.get !== undefined);
}

/** Client lists that show clients fewer fields than the resource has, and filter on those only. */
const CLIENT_FILTERABLE: Record<string, readonly string[]> = {
  'external-jwt-signers': ['id', 'createdAt', 'updatedAt', 'tags', 'name'],
};

const clientDefinitions = definitions.filter((def) => enabled(def).some((op) => served(CLIENT, def).includes(op)));

let admin: string;
let counter = 0;
const unique = (prefix: string) => `contract-${prefix}-${++counter}`;

function url(api: string, def: ResourceDef, op: Operation, id: string): string {
  return `${api}/${def.name}${ROUTE[op].item ? `/${id}` : ''}`;
}

async function asAdminCall(method: Method, path: string, body?: unknown): Promise<LightMyRequestResponse> {
  return call(t, method, path, { token: admin, ...(body !== undefined ? { body } : {}) });
}

function expectStatus(res: LightMyRequestResponse, status: number, what: string): any {
  expect(res.statusCode, `${what}: ${res.body}`).toBe(status);
  return json(res);
}

// ---- valid bodies, generated from the definition -----------------------------------------------

type Mode = 'create' | 'update' | 'patch';

/**
 * What a definition cannot say about a valid body, per resource: rules the domain applies beyond
 * the schema. Everything else is generated from the fields.
 */
const BODY_EXTRAS: Record<string, (mode: Mode) => Promise<Body>> = {
  // A updb authenticator needs its username and password on create; the definition marks them
  // required on full update only, as a cert authenticator has neither.
  authenticators: async (mode) => (mode === 'create' ? { method: 'updb', username: unique('user'), password: 'contract-password-1' } : {}),
  // `router` is a plain string (it may name an edge or a transit router); the domain checks it exists.
  terminators: async (mode) => (mode === 'patch' ? {} : { router: await createEntity(definition('routers')) }),
  // A CA's certPem must be a CA certificate of its own (fingerprints are unique).
  cas: async (mode) => (mode === 'create' ? { certPem: (await testCa(unique('ca'))).certPem } : {}),
  // Each kind of check names its own fields, and full updates and patches name the (fixed) kind; an
  // MFA check needs no other field.
  'posture-checks': async () => ({ typeId: 'MFA' }),
  // A signer verifies with a certificate or a JWKS endpoint (one of them); enabled, clients list it.
  'external-jwt-signers': async (mode) => (mode === 'patch' ? {} : { jwksEndpoint: `https://idp.example.com/${unique('jwks')}`, enabled: true }),
  // An enrollment lasts until a time still to come.
  enrollments: async (mode) => (mode === 'create' ? { method: 'ott', expiresAt: new Date(t.clock() + 3_600_000).toISOString() } : {}),
};

function definition(name: string): ResourceDef {
  const def = definitions.find((d) => d.name === name);
  if (!def) throw new Error(`no resource ${name}`);
  return def;
}

function validText(f: FieldDef, prefix: string): string {
  const text = unique(prefix);
  const min = f.minLength ?? 0;
  return (text.length < min ? text.padEnd(min, 'x') : text).slice(0, f.maxLength ?? MAX_STRING);
}

/** A value of the field's kind that the schema accepts; a reference names an entity made for it. */
async function validValue(name: string, f: FieldDef): Promise<unknown> {
  switch (f.kind) {
    case 'string':
      return validText(f, name);
    case 'ref':
      return referenceTarget(f.ref!.collection);
    case 'enum':
      return f.values![0];
    case 'boolean':
      return false;
    case 'integer':
    case 'number':
      return f.minimum ?? 0;
    case 'datetime':
      return new Date(t.clock()).toISOString();
    case 'set':
      return [];
    case 'json':
      return f.default ?? (f.schema ? Value.Create(f.schema) : {});
  }
}

/** A valid write body: every field the mode requires, tagged so filters can find what it made. */
async function validBody(def: ResourceDef, mode: Mode): Promise<Body> {
  const body: Body = { tags: { contract: def.name } };
  if (mode !== 'patch') {
    for (const [name, f] of Object.entries(def.fields)) {
      if (f.readOnly || (f.createOnly && mode !== 'create')) continue;
      const required = f.required ?? 'never';
      if (required === 'always' || required === mode) body[name] = await validValue(name, f);
    }
  }
  return { ...body, ...(await BODY_EXTRAS[def.name]?.(mode)) };
}

/** `body` plus a valid value for every create-only field: what a write of a fixed field sends. */
async function withCreateOnly(def: ResourceDef, body: Body): Promise<Body> {
  const out = { ...body };
  for (const [name, f] of Object.entries(def.fields)) {
    if (f.createOnly && !f.readOnly && !(name in out)) out[name] = await validValue(name, f);
  }
  return out;
}

/** The body sent without a credential: a valid one, naming the create-only fields on updates too. */
async function unauthenticatedBody(def: ResourceDef, op: Operation): Promise<Body | undefined> {
  if (op === 'create') return validBody(def, op);
  if (op === 'update' || op === 'patch') return withCreateOnly(def, await validBody(def, op));
  return undefined;
}

/** Creates an entity of `def` as the admin; answers its id. */
async function createEntity(def: ResourceDef): Promise<string> {
  const res = await asAdminCall('POST', `${MGMT}/${def.name}`, await validBody(def, 'create'));
  return expectStatus(res, 201, `creating ${def.name}`).data.id as string;
}

/** An entity a reference may name: a fresh one where the collection takes creates, else an existing one. */
async function referenceTarget(collection: string): Promise<string> {
  const def = definition(collection);
  if (served(MGMT, def).includes('create')) return createEntity(def);
  const first = json(await asAdminCall('GET', `${MGMT}/${collection}?limit=1`)).data[0];
  if (!first) throw new Error(`nothing in ${collection} to refer to`);
  return first.id as string;
}

/** An entity of `def` to read and write: made for the test where possible, else the first listed. */
const targets = new Map<string, string | undefined>();
async function targetOf(def: ResourceDef): Promise<string | undefined> {
  if (!targets.has(def.name)) {
    if (served(MGMT, def).includes('create')) targets.set(def.name, await createEntity(def));
    else targets.set(def.name, json(await asAdminCall('GET', `${MGMT}/${def.name}?limit=1`)).data[0]?.id);
  }
  return targets.get(def.name);
}

/** The entity as the admin reads it, or the status when it cannot be read. */
async function snapshot(def: ResourceDef, id: string | undefined): Promise<unknown> {
  if (id === undefined || !served(MGMT, def).includes('get')) return undefined;
  const res = await asAdminCall('GET', `${MGMT}/${def.name}/${id}`);
  return res.statusCode === 200 ? json(res).data : res.statusCode;
}

async function totalOf(def: ResourceDef): Promise<number | undefined> {
  if (!served(MGMT, def).includes('list')) return undefined;
  return json(await asAdminCall('GET', `${MGMT}/${def.name}?limit=1`)).meta.pagination.totalCount as number;
}

// ---- setup ------------------------------------------------------------------------------------

/** A non-admin whose permissions each check sets (they apply from the next request on). */
let caller: { id: string; token: string };

async function grant(permissions: readonly string[]): Promise<void> {
  expectStatus(await asAdminCall('PATCH', `${MGMT}/identities/${caller.id}`, { permissions }), 200, 'setting permissions');
}

beforeAll(async () => {
  admin = await asAdmin(t);
  const name = unique('caller');
  const created = await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-password` });
  caller = { id: created.id, token: await login(t, name, `${name}-password`) };
  // The admin logs in with its password alone: a signer it would log in with is only an admin's to
  // write (external-jwt-signers.ts), and the permission checks below are of the group alone.
  const passwords = expectStatus(await asAdminCall('POST', `${MGMT}/auth-policies`, authPolicyBody(unique('admins'), { primary: { updb: { allowed: true } } })), 201, 'a policy')
    .data.id as string;
  const me = expectStatus(await asAdminCall('GET', `${MGMT}/current-identity`), 200, 'the admin').data.id as string;
  expectStatus(await asAdminCall('PATCH', `${MGMT}/identities/${me}`, { authPolicyId: passwords }), 200, 'moving the admin');

  // Sessions are made by clients dialling a service, never by the generic routes: one is seeded
  // through the network fixture so reads and filters have a session to find.
  const net = new Network(t, admin);
  const person = await net.person(unique('dialer'), ['contract-dialer']);
  await net.edgeRouter(unique('er'), ['contract-public']);
  await net.openRouters(['#contract-dialer']);
  const service = await net.service(unique('svc'), ['contract-dialed']);
  await net.servicePolicy('Dial', ['#contract-dialer'], ['#contract-dialed']);
  expectStatus(await client(t, 'POST', '/sessions', await net.login(person), { serviceId: service }), 201, 'seeding a session');
});
afterAll(async () => {
  await t.close();
});

it('every resource is served with exactly the generic routes its definition enables', () => {
  expect(definitions.length).toBeGreaterThan(0);
  for (const def of definitions) expect(served(MGMT, def), def.name).toEqual(enabled(def));
});

// ---- Management API -----------------------------------------------------------------------------

describe.each(definitions.filter((def) => enabled(def).length > 0).map((def) => [def.name, def] as const))('%s on the Management API', (_name, def) => {
  const ops = enabled(def);

  it('answers 401 with both challenges without a credential on every route, and changes nothing', async () => {
    const id = (await targetOf(def)) ?? UNKNOWN_ID;
    const before = await snapshot(def, id);
    const total = await totalOf(def);
    for (const op of ops) {
      const body = await unauthenticatedBody(def, op);
      const res = await call(t, ROUTE[op].method, url(MGMT, def, op, id), body ? { body } : {});
      expectMissingCredential(res);
    }
    for (const sub of servedLinks(MGMT, def)) expectMissingCredential(await call(t, 'GET', `${MGMT}/${def.name}/${id}/${sub}`));
    expect(await snapshot(def, id)).toEqual(before);
    expect(await totalOf(def)).toBe(total);
  });

  it('answers 404 with the error envelope for an unknown id on every id route', async () => {
    const requests: [Method, string, Body | undefined][] = [];
    for (const op of ops.filter((o) => ROUTE[o].item)) {
      if (op !== 'update' && op !== 'patch') {
        requests.push([ROUTE[op].method, url(MGMT, def, op, UNKNOWN_ID), undefined]);
        continue;
      }
      // Also when the body names a create-only field: the id is looked up before the fields are judged.
      const body = await validBody(def, op);
      requests.push([ROUTE[op].method, url(MGMT, def, op, UNKNOWN_ID), body]);
      requests.push([ROUTE[op].method, url(MGMT, def, op, UNKNOWN_ID), await withCreateOnly(def, body)]);
    }
    for (const sub of servedLinks(MGMT, def)) requests.push(['GET', `${MGMT}/${def.name}/${UNKNOWN_ID}/${sub}`, undefined]);
    for (const [method, path, body] of requests) {
      const res = await asAdminCall(method, path, body);
      const answer = expectError(res, 404, 'NOT_FOUND');
      expect(answer.error.message, `${method} ${path}`).toEqual(expect.any(String));
      expect(answer.meta, `${method} ${path}`).toMatchObject({ apiVersion: expect.any(String) });
      expect(answer.data, `${method} ${path}`).toBeUndefined();
    }
  });

  it.runIf(ops.includes('create'))('refuses a create with a bad value for a field with 400 naming the field', async () => {
    const valid = await validBody(def, 'create');
    const total = await totalOf(def);
    let checked = 0;
    for (const [name, f] of Object.entries(def.fields)) {
      if (f.readOnly) continue;
      for (const [bad, field] of badValues(name, f)) {
        const res = await asAdminCall('POST', `${MGMT}/${def.name}`, { ...valid, [name]: bad });
        expect(() => expectError(res, 400, 'COULD_NOT_VALIDATE', field), `${name} = ${JSON.stringify(bad).slice(0, 40)}`).not.toThrow();
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(0);
    // None of them was written, so the valid body (with the same unique values) still creates.
    expect(await totalOf(def)).toBe(total);
    expectStatus(await asAdminCall('POST', `${MGMT}/${def.name}`, valid), 201, 'the valid body');
  });

  it('admits exactly the holders of the permission of each action of its group', async () => {
    for (const holder of holdersFor(def)) {
      await grant(holder.permissions);
      for (const op of ops) {
        const allowed = holder.allows.has(ACTION_OF[op]);
        await attempt(def, op, allowed, holder.label);
      }
    }
    await grant([]);
  });

  it.runIf(ops.includes('list'))('lists the filterable fields of the definition, filters on each, and refuses an unknown one', async () => {
    const expected = filterableFields(def);
    const res = await asAdminCall('GET', `${MGMT}/${def.name}`);
    expect(expectStatus(res, 200, 'list').meta.filterableFields).toEqual(expected.map((f) => f.name));
    await expectFilters(MGMT, def, expected, await targetOf(def));
    const unknown = await asAdminCall('GET', `${MGMT}/${def.name}?filter=${encodeURIComponent('contractNoSuchField = "x"')}`);
    expectError(unknown, 400, 'INVALID_FILTER', 'filter');
  });
});

// ---- Client API -----------------------------------------------------------------------------------

describe.each(clientDefinitions.map((def) => [def.name, def] as const))('%s on the Client API', (_name, def) => {
  const ops = enabled(def).filter((op) => served(CLIENT, def).includes(op));

  it('answers 401 with both challenges without a credential on every route', async () => {
    const id = (await targetOf(def)) ?? UNKNOWN_ID;
    const before = await snapshot(def, id);
    for (const op of ops) {
      const body = await unauthenticatedBody(def, op);
      expectMissingCredential(await call(t, ROUTE[op].method, url(CLIENT, def, op, id), body ? { body } : {}));
    }
    for (const sub of servedLinks(CLIENT, def)) expectMissingCredential(await call(t, 'GET', `${CLIENT}/${def.name}/${id}/${sub}`));
    expect(await snapshot(def, id)).toEqual(before);
  });

  it.runIf(ops.some((op) => ROUTE[op].item))('answers 404 with the error envelope for an unknown id on every id route', async () => {
    for (const op of ops.filter((o) => ROUTE[o].item)) {
      const body = op === 'update' || op === 'patch' ? await validBody(def, op) : undefined;
      const res = await call(t, ROUTE[op].method, url(CLIENT, def, op, UNKNOWN_ID), { token: admin, ...(body ? { body } : {}) });
      expect(() => expectError(res, 404, 'NOT_FOUND'), `${ROUTE[op].method} ${def.name}/{id}`).not.toThrow();
    }
  });
});

describe.each(clientDefinitions.filter((def) => served(CLIENT, def).includes('list')).map((def) => [def.name, def] as const))(
  '%s list on the Client API',
  (_name, def) => {
    it('lists the filterable fields of the definition, filters on each, and refuses an unknown one', async () => {
      const narrowed = CLIENT_FILTERABLE[def.name];
      const expected = filterableFields(def).filter((f) => narrowed === undefined || narrowed.includes(f.name));
      const res = await asAdminCall('GET', `${CLIENT}/${def.name}`);
      expect(expectStatus(res, 200, 'list').meta.filterableFields).toEqual(expected.map((f) => f.name));
      await expectFilters(CLIENT, def, expected, await targetOf(def));
      const unknown = await asAdminCall('GET', `${CLIENT}/${def.name}?filter=${encodeURIComponent('contractNoSuchField = "x"')}`);
      expectError(unknown, 400, 'INVALID_FILTER', 'filter');
    });
  },
);

// ---- bad values -------------------------------------------------------------------------------------

/** Values of the wrong kind or out of the field's bounds, each with the field the answer must name. */
function badValues(name: string, f: FieldDef): [unknown, string][] {
  const out: [unknown, string][] = [];
  switch (f.kind) {
    case 'string':
    case 'ref':
      out.push([12345, name], ['x'.repeat((f.maxLength ?? (f.kind === 'ref' ? MAX_NAME : MAX_STRING)) + 1), name]);
      break;
    case 'integer':
      out.push(['12', name], [1.5, name]);
      if (f.maximum !== undefined) out.push([f.maximum + 1, name]);
      if (f.minimum !== undefined) out.push([f.minimum - 1, name]);
      break;
    case 'number':
      out.push(['12', name]);
      break;
    case 'boolean':
      out.push(['true', name]);
      break;
    case 'datetime':
      out.push(['not-a-date', name]);
      break;
    case 'enum':
      out.push(['ContractNoSuchValue', name]);
      break;
    case 'set':
      out.push(['not-a-list', name], [[12345], `${name}[0]`]);
      break;
    case 'json':
      out.push(['not-an-object', name]);
      break;
  }
  return out;
}

// ---- permissions ------------------------------------------------------------------------------------

interface Holder {
  label: string;
  permissions: string[];
  allows: ReadonlySet<'read' | 'create' | 'update' | 'delete'>;
}

const groupOf = (permission: string) => permission.split('.')[0]!;

/**
 * The permission sets tried on a resource: none; every permission of every other group; each
 * permission of its group (`<group>.<action>` where the interface defines it, and `<group>`); and
 * admin_readonly. A resource without a group is the admins' (admin_readonly reads it).
 */
function holdersFor(def: ResourceDef): Holder[] {
  const group = def.permission;
  const read = new Set(['read'] as const);
  const holders: Holder[] = [
    { label: 'no permission', permissions: [], allows: new Set() },
    {
      label: 'every permission of other groups',
      permissions: PERMISSIONS.filter((p) => p !== 'admin_readonly' && groupOf(p) !== group),
      allows: new Set(),
    },
    { label: 'admin_readonly', permissions: ['admin_readonly'], allows: read },
  ];
  if (group !== null) {
    // The group's own actions, less the writes a definition keeps for admins (writePermission null).
    const granted = (['read', 'create', 'update', 'delete'] as const).filter((action) => permissionFor(def, action) === group);
    for (const action of ['read', 'create', 'update', 'delete'] as const) {
      if (PERMISSIONS.includes(`${group}.${action}`)) {
        holders.push({ label: `${group}.${action}`, permissions: [`${group}.${action}`], allows: new Set(granted.includes(action) ? [action] : []) });
      }
    }
    holders.push({ label: group, permissions: [group], allows: new Set(granted) });
  }
  return holders;
}

/** One operation as the caller: admitted, it succeeds; refused, it is 401 "not permitted" and writes nothing. */
async function attempt(def: ResourceDef, op: Operation, allowed: boolean, label: string): Promise<void> {
  const what = `${label}: ${op} ${def.name}`;
  const target = await targetOf(def);
  // A delete that may succeed takes an entity of its own; of a resource only clients make (API
  // sessions), an unknown one: its 404 shows the caller was admitted, and the shared one stays.
  const disposable = op === 'delete' && allowed;
  const id = disposable ? (served(MGMT, def).includes('create') ? await createEntity(def) : UNKNOWN_ID) : (target ?? UNKNOWN_ID);
  const body = op === 'create' || op === 'update' || op === 'patch' ? await validBody(def, op) : undefined;
  const send = () => call(t, ROUTE[op].method, url(MGMT, def, op, id), { token: caller.token, ...(body ? { body } : {}) });
  if (allowed) {
    // Admitted to an entity that does not exist (nothing of a resource only clients make): not found.
    expectStatus(await send(), ROUTE[op].item && id === UNKNOWN_ID ? 404 : SUCCESS[op], what);
    return;
  }
  const before = await snapshot(def, id);
  const total = await totalOf(def);
  const res = await send();
  expect(() => expectError(res, 401, 'UNAUTHORIZED'), what).not.toThrow();
  expect(res.headers['www-authenticate'], what).toBe(NOT_PERMITTED);
  expect(await snapshot(def, id), what).toEqual(before);
  expect(await totalOf(def), what).toBe(total);
}

// ---- filters ----------------------------------------------------------------------------------------

type FilterType = 'string' | 'integer' | 'number' | 'boolean' | 'datetime' | 'set' | 'tags';

const FILTER_TYPE: Partial<Record<FieldDef['kind'], FilterType>> = {
  string: 'string',
  enum: 'string',
  ref: 'string',
  integer: 'integer',
  number: 'number',
  boolean: 'boolean',
  datetime: 'datetime',
  set: 'set',
};

/**
 * What the definition makes filterable, in order: id, createdAt, updatedAt, tags, isSystem of system
 * records, then every stored public field that is not a JSON document, unless marked unfilterable.
 */
function filterableFields(def: ResourceDef): { name: string; type: FilterType; related?: true }[] {
  const out: { name: string; type: FilterType; related?: true }[] = [
    { name: 'id', type: 'string' },
    { name: 'createdAt', type: 'datetime' },
    { name: 'updatedAt', type: 'datetime' },
    { name: 'tags', type: 'tags' },
  ];
  if (def.system) out.push({ name: 'isSystem', type: 'boolean' });
  for (const [name, f] of Object.entries(def.fields)) {
    const type = FILTER_TYPE[f.kind];
    if (type && !f.writeOnly && !f.virtual && f.filterable !== false) out.push({ name, type });
  }
  // Those read through relations (link tables, referenced names) follow; the answer shows no value of them.
  for (const { field } of relationFilterFields(def)) out.push({ name: field.name, type: field.type as FilterType, related: true });
  return out;
}

/** A predicate true of `value` (the field as read), or undefined when none can be written for it. */
function predicateFor(name: string, type: FilterType, value: unknown): string | undefined {
  const scalar = value !== null && typeof value === 'object' && 'id' in value ? (value as { id: unknown }).id : value;
  switch (type) {
    case 'tags': {
      const [key, tag] = Object.entries((value ?? {}) as Record<string, unknown>).find(([, v]) => typeof v === 'string') ?? [];
      return key === undefined ? undefined : `tags.${key} = ${JSON.stringify(tag)}`;
    }
    case 'set': {
      const list = (value ?? []) as unknown[];
      return list.length === 0 ? `isEmpty(${name})` : `anyOf(${name}) = ${JSON.stringify(list[0])}`;
    }
    default:
      if (scalar === undefined) return undefined;
      return `${name} = ${scalar === null ? 'null' : JSON.stringify(scalar)}`;
  }
}

/** A predicate of the field's type that any list accepts. */
function anyPredicate(name: string, type: FilterType): string {
  switch (type) {
    case 'string':
      return `${name} = "contract"`;
    case 'integer':
    case 'number':
      return `${name} = 1`;
    case 'boolean':
      return `${name} = true`;
    case 'datetime':
      return `${name} < "2030-01-01T00:00:00Z"`;
    case 'set':
      return `anyOf(${name}) = "contract"`;
    case 'tags':
      return 'tags.contract = "contract"';
  }
}

/** The entity as the list answers it (a resource may serve no detail route). */
async function listed(api: string, def: ResourceDef, id: string): Promise<Body | undefined> {
  const res = await asAdminCall('GET', `${api}/${def.name}?limit=500`);
  return (expectStatus(res, 200, `${def.name} list`).data as Body[]).find((e) => e.id === id);
}

/**
 * Every filterable field is accepted; where the list has an entity to find, a filter on each field
 * set to the entity's value (and its id) finds exactly it, so each field filters its own column.
 */
async function expectFilters(api: string, def: ResourceDef, fields: { name: string; type: FilterType; related?: true }[], id: string | undefined): Promise<void> {
  const entity = id !== undefined ? await listed(api, def, id) : undefined;
  for (const { name, type, related } of fields) {
    const own = entity && !related ? predicateFor(name, type, entity[name]) : undefined;
    const filter = own !== undefined ? `${own} and id = ${JSON.stringify(id)}` : anyPredicate(name, type);
    const res = await asAdminCall('GET', `${api}/${def.name}?filter=${encodeURIComponent(filter)}`);
    const body = expectStatus(res, 200, `${def.name}: ${filter}`);
    if (own !== undefined) expect(body.data.map((e: { id: string }) => e.id), `${def.name}: ${filter}`).toEqual([id]);
  }
}
