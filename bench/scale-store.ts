// The scale store of `npm run bench` (docs: DESIGN.md, Performance): 100,000 identities, 10,000
// services, 100 edge routers and 2,000 policies of mixed semantics with their links. Generated on
// demand under bench/data/ (never committed) and cached:
//
//   npm run build && node dist/bench/scale-store.js [--dir <dir>] [--force] [--identities <n>]
//
// ensureScaleStore(dir) reuses <dir> when <dir>/scale.json records this generator's version, the
// same sizes and seed, and the controller's current migrations; otherwise it rebuilds it in four steps:
//   1. createApp on an empty data directory: the controller's migrations, its seed (the default admin,
//      with a generated password recorded in scale.json) and its PKI;
//   2. the mass data, in one better-sqlite3 transaction (multi-row inserts, secondary indexes made
//      again afterwards from their own SQL): entities as their resource definitions and
//      Repository.toRow make them, role_attribute_index, and every policy's link rows, selected in
//      memory the way the engine's entitiesMatching selects them (`#all`, `@id`s that exist, `#attr`
//      by AnyOf or AllOf);
//   3. createApp again, and through ResourceService as the API would: an identity with a updb
//      authenticator (the client of the Client API scenarios), about 20 services it may dial, and the
//      service, edge router and service edge router policies that give it them and shared routers;
//   4. checks: foreign keys; for a sample of policies, the stored links equal entitiesMatching; for a
//      sample of entities, the stored links equal the policies the pure matcher (`matches`, roles.ts)
//      says select them, over every policy; their role_attribute_index rows equal their attributes.
// The PRNG is seeded: the same sizes and seed give the same entities, ids, attributes, policies and
// links, except what steps 1 and 3 make (the admin, the client, the client's policies).
//
// Writers of scenarios use the store through scale.json (ScaleInfo): credentials of the admin and of
// the client, identities with about 20 services, an identity whose role attribute change moves its
// links, and role lists of service policies that select 10,000 identities. A run that writes works
// on a copy (copyScaleStore), so the cached store stays as generated.
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { sql } from 'kysely';
import { pino } from 'pino';
import { createApp, type App } from '../src/app/app.js';
import { loadConfig } from '../src/config/index.js';
import type { ResourceService } from '../src/domain/resources.js';
import { entitiesMatching } from '../src/policy/links.js';
import { POLICY_COLLECTIONS, policySpecOf, roleKindOf, type PolicyCollection, type RoleField, type RoleKind } from '../src/resources/relations.js';
import { matches, parseRoles, type ParsedRoles } from '../src/policy/roles.js';
import { migrations } from '../src/store/migrations/index.js';
import type { Entity } from '../src/store/repository.js';

/** Bump when the generated data changes: cached stores of another version are rebuilt. */
export const SCALE_VERSION = 1;
export const SCALE_SEED = 20_240_601;
/** Where `npm run bench` keeps the store (bench/data/ is not committed); scale-store.js lives in dist/bench/. */
export const SCALE_DIR = fileURLToPath(new URL('../../bench/data/scale', import.meta.url));

export interface ScaleSizes {
  identities: number;
  services: number;
  edgeRouters: number;
  /** Policies of each kind, the client's own included (one of each). */
  servicePolicies: number;
  edgeRouterPolicies: number;
  serviceEdgeRouterPolicies: number;
}

export const SCALE_SIZES: Readonly<ScaleSizes> = {
  identities: 100_000,
  services: 10_000,
  edgeRouters: 100,
  servicePolicies: 1_200,
  edgeRouterPolicies: 400,
  serviceEdgeRouterPolicies: 400,
};

/** What a scale store holds beyond its sizes: written to <dir>/scale.json. */
export interface ScaleInfo {
  version: number;
  seed: number;
  sizes: ScaleSizes;
  /** The controller's migrations the store was made with. */
  migrations: string[];
  generatedAt: string;
  generationSeconds: number;
  /** The default admin (start the controller with these too: they are not used once it exists). */
  admin: { username: string; password: string };
  /**
   * An identity of the Client API scenarios: a updb authenticator, `serviceIds` are every service it
   * may dial (about 20), and each shares at least one of `edgeRouterIds` with it (sessions can be made).
   */
  client: {
    identityId: string;
    name: string;
    username: string;
    password: string;
    serviceIds: string[];
    edgeRouterIds: string[];
  };
  /** Identities reaching `servicesPerIdentity.min..max` services (any policy type), for related-list reads. */
  identitiesWith20Services: string[];
  servicesPerIdentity: { min: number; max: number; p10: number; p50: number; p90: number; highest: number };
  /**
   * An identity whose role attributes alternate between the two sets; each change moves its service
   * policy and edge router policy links.
   */
  attributeChange: { identityId: string; roleAttributes: [string[], string[]] };
  /** Role lists of service policies that select `identities` identities each (one per cohort). */
  largePolicies: { identityRoles: string[]; serviceRoles: string[]; identities: number }[];
  /** Rows per table of interest. */
  rows: Record<string, number>;
}

export interface ScaleOptions {
  sizes?: Partial<ScaleSizes>;
  seed?: number;
  /** Rebuild even when the cached store matches. */
  force?: boolean;
  /** Progress lines. */
  log?: (message: string) => void;
}

export interface ScaleStore {
  dir: string;
  info: ScaleInfo;
  /** The store was generated by this call (not reused). */
  generated: boolean;
}

const INFO_FILE = 'scale.json';
const DB_FILE = 'overlay.db';
/** A fixed write time, so the data does not depend on the day it was generated. */
const NOW = '2024-06-01T00:00:00.000Z';
/** Services of the `#common` attribute, which every identity may dial. */
const COMMON_SERVICES = 3;
/** Services the client may dial, the common ones included. */
const CLIENT_SERVICES = 20;
const CLIENT_ROUTERS = 3;
const PROBE_IDENTITIES = 200;
const COHORTS = 10;

// ---- the cache ----------------------------------------------------------------------------------

function currentMigrations(): string[] {
  return migrations.map((m) => m.name);
}

function readInfo(dir: string): ScaleInfo | undefined {
  try {
    return JSON.parse(readFileSync(join(dir, INFO_FILE), 'utf8')) as ScaleInfo;
  } catch {
    return undefined;
  }
}

function reusable(dir: string, info: ScaleInfo | undefined, sizes: ScaleSizes, seed: number): info is ScaleInfo {
  return (
    info !== undefined &&
    info.version === SCALE_VERSION &&
    info.seed === seed &&
    JSON.stringify(info.sizes) === JSON.stringify(sizes) &&
    JSON.stringify(info.migrations) === JSON.stringify(currentMigrations()) &&
    existsSync(join(dir, DB_FILE))
  );
}

/** The scale store in `dir`: reused when it matches, generated otherwise. */
export async function ensureScaleStore(dir: string, opts: ScaleOptions = {}): Promise<ScaleStore> {
  const sizes: ScaleSizes = { ...SCALE_SIZES, ...opts.sizes };
  const seed = opts.seed ?? SCALE_SEED;
  const existing = readInfo(dir);
  if (!opts.force && reusable(dir, existing, sizes, seed)) return { dir, info: existing, generated: false };
  // Built beside, then swapped in: an interrupted build never looks like a usable store.
  const building = `${dir}.building`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(building, { recursive: true });
  try {
    const info = await generate(building, sizes, seed, opts.log ?? (() => undefined));
    rmSync(dir, { recursive: true, force: true });
    renameSync(building, dir);
    return { dir, info, generated: true };
  } catch (err) {
    rmSync(building, { recursive: true, force: true });
    throw err;
  }
}

/** Copies a scale store (database, PKI, scale.json) to `to`, which must not exist yet. */
export function copyScaleStore(from: string, to: string): void {
  cpSync(from, to, { recursive: true, errorOnExist: true, force: false });
}

// ---- seeded randomness --------------------------------------------------------------------------

/** mulberry32: small, fast, and good enough to shape test data. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

class Random {
  private readonly next: () => number;
  private readonly ids = new Set<string>();

  constructor(seed: number) {
    this.next = prng(seed);
  }

  float(): number {
    return this.next();
  }

  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** 1..max distinct picks of `make(int(n))`. */
  some<T>(max: number, n: number, make: (i: number) => T): T[] {
    return [...new Set(Array.from({ length: 1 + this.int(max) }, () => make(this.int(n))))];
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  /** An entity id shaped like newId()'s (11 characters of base64url), unique within this generator. */
  id(): string {
    for (;;) {
      const bytes = Buffer.alloc(8);
      bytes.writeUInt32BE(Math.floor(this.next() * 2 ** 32));
      bytes.writeUInt32BE(Math.floor(this.next() * 2 ** 32), 4);
      const id = bytes.toString('base64url');
      if (!this.ids.has(id)) {
        this.ids.add(id);
        return id;
      }
    }
  }
}

// ---- the data, in memory ------------------------------------------------------------------------

interface Thing {
  id: string;
  name: string;
  attributes: string[];
  values: Record<string, unknown>;
}

interface Policy {
  collection: PolicyCollection;
  id: string;
  name: string;
  semantic: 'AnyOf' | 'AllOf';
  type?: 'Dial' | 'Bind';
  roles: Partial<Record<RoleField, string[]>>;
}

/** The entities of one kind, inverted like role_attribute_index. */
interface KindIndex {
  all: string[];
  ids: Set<string>;
  byAttribute: Map<string, string[]>;
}

/** The attribute index of each kind of entity the data set has. */
type KindIndexes = Record<'identity' | 'service' | 'edge-router' | 'posture-check', KindIndex>;

function kindIndex(things: readonly Thing[]): KindIndex {
  const byAttribute = new Map<string, string[]>();
  for (const t of things) {
    for (const a of t.attributes) {
      let list = byAttribute.get(a);
      if (!list) byAttribute.set(a, (list = []));
      list.push(t.id);
    }
  }
  return { all: things.map((t) => t.id), ids: new Set(things.map((t) => t.id)), byAttribute };
}

/** What entitiesMatching answers, from memory. */
function selectEntities(index: KindIndex, semantic: string, roles: ParsedRoles): string[] {
  if (roles.all) return index.all;
  const out = new Set(roles.ids.filter((id) => index.ids.has(id)));
  const attributes = roles.attributes;
  if (attributes.length === 0) return [...out];
  if (semantic === 'AnyOf' || attributes.length === 1) {
    for (const a of attributes) for (const id of index.byAttribute.get(a) ?? []) out.add(id);
    return [...out];
  }
  const counts = new Map<string, number>();
  for (const a of attributes) for (const id of index.byAttribute.get(a) ?? []) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const [id, n] of counts) if (n === attributes.length) out.add(id);
  return [...out];
}

interface Pools {
  teams: number;
  depts: number;
  locs: number;
  apps: number;
  groups: number;
  regions: number;
}

function poolsOf(sizes: ScaleSizes): Pools {
  return {
    teams: Math.max(1, Math.round(sizes.identities / 100)),
    depts: 50,
    locs: 20,
    apps: Math.max(1, Math.ceil(sizes.services / 5)),
    groups: Math.max(1, Math.round(sizes.services / 50)),
    regions: Math.max(1, Math.round(sizes.edgeRouters / 10)),
  };
}

const ENVS = ['prod', 'staging', 'dev'] as const;

function makeEntities(random: Random, sizes: ScaleSizes, pools: Pools): { identities: Thing[]; services: Thing[]; routers: Thing[] } {
  const identities: Thing[] = [];
  for (let i = 0; i < sizes.identities; i++) {
    const team = random.int(pools.teams);
    const attributes = [`team-${team}`, `dept-${team % pools.depts}`, `loc-${random.int(pools.locs)}`, `cohort-${i % COHORTS}`];
    if (random.float() < 0.1) attributes.push('contractor');
    identities.push({
      id: random.id(),
      name: `identity-${i}`,
      attributes,
      values: { type: random.float() < 0.7 ? 'Device' : 'User', isAdmin: false },
    });
  }
  const services: Thing[] = [];
  for (let i = 0; i < sizes.services; i++) {
    const r = random.float();
    const attributes = [`app-${Math.floor(i / 5)}`, `group-${random.int(pools.groups)}`, `env-${r < 0.5 ? 'prod' : r < 0.75 ? 'staging' : 'dev'}`];
    if (i < COMMON_SERVICES) attributes.push('common');
    services.push({ id: random.id(), name: `service-${i}`, attributes, values: {} });
  }
  const routers: Thing[] = [];
  for (let i = 0; i < sizes.edgeRouters; i++) {
    const attributes = [`region-${i % pools.regions}`];
    if (i % 5 === 0) attributes.push('public');
    routers.push({
      id: random.id(),
      name: `edge-router-${i}`,
      attributes,
      values: { supportedProtocols: { tls: `tls:edge-router-${i}.scale.example:3022` } },
    });
  }
  return { identities, services, routers };
}

/**
 * The mass policies (the client's three come later, through the API). Each kind starts with the
 * broad policies real networks have (`#all` identities or services to a few services or the public
 * routers), then mixes team and department policies (AnyOf), department-and-location ones (AllOf of
 * two attributes on both sides), `@id` lists mixed with attributes, and a few wide ones.
 */
function makePolicies(random: Random, sizes: ScaleSizes, pools: Pools, things: ReturnType<typeof makeEntities>): Policy[] {
  const policies: Policy[] = [];
  const team = () => `#team-${random.int(pools.teams)}`;
  const dept = () => `#dept-${random.int(pools.depts)}`;
  const loc = () => `#loc-${random.int(pools.locs)}`;
  const app = () => `#app-${random.int(pools.apps)}`;
  const group = () => `#group-${random.int(pools.groups)}`;
  const region = () => `#region-${random.int(pools.regions)}`;
  const at = (list: readonly Thing[]) => (i: number) => `@${list[i]!.id}`;
  const anyOf = () => (random.float() < 0.5 ? 'AnyOf' : 'AllOf');
  const add = (collection: PolicyCollection, prefix: string, p: Omit<Policy, 'collection' | 'id' | 'name'>) =>
    policies.push({ collection, id: random.id(), name: `${prefix}-${policies.filter((x) => x.collection === collection).length}`, ...p });

  // service policies
  for (let k = 0; k < sizes.servicePolicies - 1; k++) {
    const sp = (p: Omit<Policy, 'collection' | 'id' | 'name'>) => add('service-policies', 'service-policy', { ...p, roles: { postureCheckRoles: [], ...p.roles } });
    const dialOrBind = (): 'Dial' | 'Bind' => (random.float() < 0.85 ? 'Dial' : 'Bind');
    if (k === 0) {
      sp({ semantic: 'AnyOf', type: 'Dial', roles: { identityRoles: ['#all'], serviceRoles: ['#common'] } });
      continue;
    }
    if (k === 1) {
      sp({ semantic: 'AllOf', type: 'Bind', roles: { identityRoles: random.some(2, sizes.identities, at(things.identities)), serviceRoles: ['#all'] } });
      continue;
    }
    const r = random.float();
    if (r < 0.55) {
      sp({ semantic: 'AnyOf', type: dialOrBind(), roles: { identityRoles: random.some(2, 1, team), serviceRoles: random.some(2, 1, app) } });
    } else if (r < 0.75) {
      sp({ semantic: 'AllOf', type: 'Dial', roles: { identityRoles: [dept(), loc()], serviceRoles: [group(), '#env-prod'] } });
    } else if (r < 0.85) {
      const identityRoles = random.some(5, sizes.identities, at(things.identities));
      if (random.float() < 0.5) identityRoles.push(team());
      const serviceRoles = random.some(3, sizes.services, at(things.services));
      if (random.float() < 0.5) serviceRoles.push(app());
      sp({ semantic: anyOf(), type: dialOrBind(), roles: { identityRoles, serviceRoles } });
    } else if (r < 0.87) {
      sp({ semantic: 'AnyOf', type: 'Dial', roles: { identityRoles: [loc()], serviceRoles: [app()] } });
    } else if (r < 0.97) {
      sp({ semantic: 'AllOf', type: dialOrBind(), roles: { identityRoles: [team(), '#contractor'], serviceRoles: [group(), `#env-${random.pick(ENVS)}`] } });
    } else {
      sp({ semantic: 'AnyOf', type: dialOrBind(), roles: { identityRoles: [dept()], serviceRoles: [app()] } });
    }
  }

  // edge router policies
  for (let k = 0; k < sizes.edgeRouterPolicies - 1; k++) {
    const erp = (p: Omit<Policy, 'collection' | 'id' | 'name'>) => add('edge-router-policies', 'edge-router-policy', p);
    if (k === 0) {
      erp({ semantic: 'AnyOf', roles: { identityRoles: ['#all'], edgeRouterRoles: ['#public'] } });
      continue;
    }
    const r = random.float();
    if (r < 0.7) erp({ semantic: 'AnyOf', roles: { identityRoles: random.some(2, 1, team), edgeRouterRoles: [region()] } });
    else if (r < 0.85) erp({ semantic: 'AllOf', roles: { identityRoles: [dept(), loc()], edgeRouterRoles: [region(), '#public'] } });
    else if (r < 0.95) {
      erp({
        semantic: anyOf(),
        roles: { identityRoles: random.some(5, sizes.identities, at(things.identities)), edgeRouterRoles: random.some(3, sizes.edgeRouters, at(things.routers)) },
      });
    } else erp({ semantic: 'AnyOf', roles: { identityRoles: [loc()], edgeRouterRoles: [region()] } });
  }

  // service edge router policies
  for (let k = 0; k < sizes.serviceEdgeRouterPolicies - 1; k++) {
    const serp = (p: Omit<Policy, 'collection' | 'id' | 'name'>) => add('service-edge-router-policies', 'service-edge-router-policy', p);
    if (k === 0) {
      serp({ semantic: 'AnyOf', roles: { serviceRoles: ['#all'], edgeRouterRoles: ['#public'] } });
      continue;
    }
    const r = random.float();
    if (r < 0.6) serp({ semantic: 'AnyOf', roles: { serviceRoles: [group()], edgeRouterRoles: [region()] } });
    else if (r < 0.8) serp({ semantic: 'AllOf', roles: { serviceRoles: [group(), '#env-prod'], edgeRouterRoles: [region(), '#public'] } });
    else if (r < 0.95) {
      serp({
        semantic: 'AnyOf',
        roles: { serviceRoles: [...random.some(3, sizes.services, at(things.services)), app()], edgeRouterRoles: random.some(2, sizes.edgeRouters, at(things.routers)) },
      });
    } else serp({ semantic: 'AnyOf', roles: { serviceRoles: ['#env-dev'], edgeRouterRoles: [region()] } });
  }
  return policies;
}

// ---- writing ------------------------------------------------------------------------------------

/** A full row of a resource from its definition's defaults, plus the given values (as create stores it). */
function entityOf(service: ResourceService, id: string, values: Record<string, unknown>): Entity {
  const e: Record<string, unknown> = { id, createdAt: NOW, updatedAt: NOW, tags: {} };
  if (service.def.system) e.isSystem = false;
  for (const [name, f] of Object.entries(service.def.fields)) {
    if (f.virtual) continue;
    const d = f.default;
    e[name] = d === undefined ? null : typeof d === 'object' && d !== null ? structuredClone(d) : d;
  }
  return Object.assign(e, values) as Entity;
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Multi-row inserts of one table: far fewer calls into SQLite than one statement per row. */
class BulkInsert {
  private readonly full: Database.Statement;
  private readonly batch: number;
  private values: unknown[] = [];
  private pending = 0;
  count = 0;

  constructor(
    private readonly db: Database.Database,
    private readonly table: string,
    private readonly columns: readonly string[],
  ) {
    this.batch = Math.max(1, Math.min(500, Math.floor(30_000 / columns.length)));
    this.full = db.prepare(this.sql(this.batch));
  }

  private sql(rows: number): string {
    const row = `(${this.columns.map(() => '?').join(', ')})`;
    return `insert into ${quote(this.table)} (${this.columns.map(quote).join(', ')}) values ${Array.from({ length: rows }, () => row).join(', ')}`;
  }

  add(...row: unknown[]): void {
    for (const v of row) this.values.push(v);
    this.count++;
    if (++this.pending === this.batch) {
      this.full.run(this.values);
      this.values = [];
      this.pending = 0;
    }
  }

  flush(): void {
    if (this.pending > 0) this.db.prepare(this.sql(this.pending)).run(this.values);
    this.values = [];
    this.pending = 0;
  }
}

function byId<T extends { id: string }>(items: readonly T[]): T[] {
  return [...items].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

function insertEntities(db: Database.Database, service: ResourceService, things: readonly Thing[]): void {
  const columns = service.repo.columns.map((c) => c.column);
  const insert = new BulkInsert(db, service.def.table, columns);
  // The defaults' row once; each entity's own values mapped on top of it.
  const template = service.repo.toRow(entityOf(service, '', {}));
  for (const t of byId(things)) {
    const row = { ...template, ...service.repo.toRow({ id: t.id, name: t.name, roleAttributes: t.attributes, ...t.values }) };
    insert.add(...columns.map((c) => row[c] ?? null));
  }
  insert.flush();
}

function insertAttributeIndex(db: Database.Database, kind: RoleKind, index: KindIndex): number {
  const insert = new BulkInsert(db, 'role_attribute_index', ['kind', 'attribute', 'entity_id']);
  for (const attribute of [...index.byAttribute.keys()].sort()) {
    for (const id of [...index.byAttribute.get(attribute)!].sort()) insert.add(kind, attribute, id);
  }
  insert.flush();
  return insert.count;
}

/** Inserts every policy row and link row; answers link rows per link table. */
function insertPolicies(
  db: Database.Database,
  app: App,
  policies: readonly Policy[],
  indexes: Record<RoleKind, KindIndex>,
): Record<string, number> {
  const rows: Record<string, number> = {};
  for (const collection of POLICY_COLLECTIONS) {
    const spec = policySpecOf(collection);
    const service = app.core.resources.get(collection);
    const columns = service.repo.columns.map((c) => c.column);
    const insert = new BulkInsert(db, spec.table, columns);
    const links = new Map(spec.lists.map((l) => [l, new BulkInsert(db, l.linkTable, ['policy_id', l.linkColumn])]));
    for (const p of byId(policies.filter((x) => x.collection === collection))) {
      const values: Record<string, unknown> = { name: p.name, semantic: p.semantic, ...p.roles };
      if (p.type) values.type = p.type;
      const row = service.repo.toRow(entityOf(service, p.id, values));
      insert.add(...columns.map((c) => row[c] ?? null));
      for (const l of spec.lists) {
        const selected = selectEntities(indexes[l.kind]!, p.semantic, parseRoles(p.roles[l.field] ?? []));
        for (const id of [...selected].sort()) links.get(l)!.add(p.id, id);
      }
    }
    insert.flush();
    for (const [l, link] of links) {
      link.flush();
      rows[l.linkTable] = link.count;
    }
  }
  return rows;
}

// ---- choosing what the scenarios use ------------------------------------------------------------

function percentileOf(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0;
}

/** Services each identity reaches through service policies of either type, as the related list counts them. */
function servicesPerIdentity(policies: readonly Policy[], indexes: KindIndexes): Map<string, Set<string>> {
  const reach = new Map<string, Set<string>>();
  for (const p of policies) {
    if (p.collection !== 'service-policies') continue;
    const services = selectEntities(indexes.service, p.semantic, parseRoles(p.roles.serviceRoles ?? []));
    if (services.length === 0) continue;
    for (const identity of selectEntities(indexes.identity, p.semantic, parseRoles(p.roles.identityRoles ?? []))) {
      let set = reach.get(identity);
      if (!set) reach.set(identity, (set = new Set()));
      for (const s of services) set.add(s);
    }
  }
  return reach;
}

function matchingPolicies(policies: readonly Policy[], field: RoleField, collection: PolicyCollection, t: Thing): Set<string> {
  const out = new Set<string>();
  for (const p of policies) {
    if (p.collection === collection && matches({ semantic: p.semantic, roles: p.roles[field] ?? [] }, { id: t.id, roleAttributes: t.attributes })) {
      out.add(p.id);
    }
  }
  return out;
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}

/** An identity and a second team for it such that moving it changes both its service and edge router policies. */
function chooseAttributeChange(
  random: Random,
  pools: Pools,
  identities: readonly Thing[],
  policies: readonly Policy[],
  avoid: ReadonlySet<string>,
): ScaleInfo['attributeChange'] {
  for (let tries = 0; tries < 1000; tries++) {
    const t = identities[random.int(identities.length)]!;
    if (avoid.has(t.id)) continue;
    const team = t.attributes.find((a) => a.startsWith('team-'))!;
    const other = `team-${random.int(pools.teams)}`;
    if (other === team) continue;
    const moved: Thing = { ...t, attributes: t.attributes.map((a) => (a === team ? other : a)) };
    const changes = (collection: PolicyCollection) =>
      !sameSet(matchingPolicies(policies, 'identityRoles', collection, t), matchingPolicies(policies, 'identityRoles', collection, moved));
    if (changes('service-policies') && changes('edge-router-policies')) {
      return { identityId: t.id, roleAttributes: [t.attributes, moved.attributes] };
    }
  }
  throw new Error('no identity whose team change moves its links');
}

// ---- the steps ----------------------------------------------------------------------------------

async function openApp(dir: string, admin: ScaleInfo['admin']): Promise<App> {
  const config = loadConfig({ dataDir: dir, listen: '127.0.0.1:0' }, { OVERLAY_ADMIN_USERNAME: admin.username, OVERLAY_ADMIN_PASSWORD: admin.password });
  return createApp(config, { log: pino({ level: 'silent' }), announce: () => undefined });
}

async function generate(dir: string, sizes: ScaleSizes, seed: number, log: (message: string) => void): Promise<ScaleInfo> {
  if (sizes.identities < 100 || sizes.services < CLIENT_SERVICES * 2 || sizes.edgeRouters < CLIENT_ROUTERS * 2) {
    throw new Error('the scale store needs at least 100 identities, 40 services and 6 edge routers');
  }
  const started = performance.now();
  let t0 = started;
  const lap = (what: string) => {
    const now = performance.now();
    log(`${what} (${((now - t0) / 1000).toFixed(1)} s)`);
    t0 = now;
  };
  const random = new Random(seed);
  const pools = poolsOf(sizes);
  const admin = { username: 'admin', password: randomBytes(18).toString('base64url') };

  // 1. the controller's own migrations, seed and PKI
  let app = await openApp(dir, admin);
  const resourceOf = {
    identity: app.core.resources.get('identities'),
    service: app.core.resources.get('services'),
    'edge-router': app.core.resources.get('edge-routers'),
  };
  await app.close();
  lap('migrations, seed and PKI by createApp');

  // 2. the mass data
  const things = makeEntities(random, sizes, pools);
  const policies = makePolicies(random, sizes, pools, things);
  lap(`${things.identities.length} identities, ${things.services.length} services, ${things.routers.length} edge routers, ${policies.length} policies made`);
  const rows: Record<string, number> = {};
  let indexes: KindIndexes;
  const db = new Database(join(dir, DB_FILE));
  try {
    // Entities the seed made (the default admin) are selected by `#all` and their attributes too.
    const seeded = (table: string): Thing[] =>
      (db.prepare(`select id, role_attributes from ${quote(table)}`).all() as { id: string; role_attributes: string }[]).map((r) => ({
        id: r.id,
        name: '',
        attributes: JSON.parse(r.role_attributes) as string[],
        values: {},
      }));
    indexes = {
      identity: kindIndex([...seeded('identities'), ...things.identities]),
      service: kindIndex([...seeded('services'), ...things.services]),
      'edge-router': kindIndex([...seeded('edge_routers'), ...things.routers]),
      'posture-check': kindIndex(seeded('posture_checks')),
    };
    // One writer, no readers, and a store thrown away if this fails: no journal, no sync, and the
    // foreign keys checked once at the end.
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('foreign_keys = OFF');
    db.pragma('cache_size = -524288');
    db.pragma('temp_store = MEMORY');
    // Secondary indexes of the bulk-filled tables are dropped and made again from their own SQL
    // afterwards: building one from sorted rows is cheaper than inserting into it at random.
    const bulkTables = ['identities', 'services', 'edge_routers', 'role_attribute_index', ...POLICY_COLLECTIONS.flatMap((c) => [policySpecOf(c).table, ...policySpecOf(c).lists.map((l) => l.linkTable)])];
    const secondary = db
      .prepare(`select name, sql from sqlite_master where type = 'index' and sql is not null and tbl_name in (${bulkTables.map(() => '?').join(', ')})`)
      .all(...bulkTables) as { name: string; sql: string }[];
    db.transaction(() => {
      for (const index of secondary) db.exec(`drop index ${quote(index.name)}`);
      insertEntities(db, resourceOf.identity, things.identities);
      insertEntities(db, resourceOf.service, things.services);
      insertEntities(db, resourceOf['edge-router'], things.routers);
      lap('  entity rows');
      let indexRows = 0;
      const made = { identity: things.identities, service: things.services, 'edge-router': things.routers };
      for (const kind of ['identity', 'service', 'edge-router'] as const) indexRows += insertAttributeIndex(db, kind, kindIndex(made[kind]));
      rows.role_attribute_index = indexRows;
      lap(`  ${indexRows} role_attribute_index rows`);
      Object.assign(rows, insertPolicies(db, app, policies, indexes));
      lap('  policy and link rows');
      for (const index of secondary) db.exec(index.sql);
      lap(`  ${secondary.length} secondary indexes`);
    })();
    lap('  commit');
    const broken = db.pragma('foreign_key_check') as unknown[];
    if (broken.length > 0) throw new Error(`the scale store breaks ${broken.length} foreign keys, e.g. ${JSON.stringify(broken[0])}`);
    db.pragma('journal_mode = WAL');
    lap('  foreign key check');
  } finally {
    db.close();
  }
  lap(`mass data written: ${Object.values(rows).reduce((a, b) => a + b, 0)} index and link rows`);

  // What the scenarios use, from the mass data.
  const reach = servicesPerIdentity(policies, indexes);
  const counts = things.identities.map((t) => reach.get(t.id)?.size ?? 0).sort((a, b) => a - b);
  let min = CLIENT_SERVICES;
  let max = CLIENT_SERVICES;
  const probe = () => things.identities.filter((t) => {
    const n = reach.get(t.id)?.size ?? 0;
    return n >= min && n <= max;
  });
  while (probe().length < PROBE_IDENTITIES && max - min < 4) {
    min--;
    max++;
  }
  const identitiesWith20Services = probe().slice(0, PROBE_IDENTITIES).map((t) => t.id);
  if (identitiesWith20Services.length === 0) {
    throw new Error(`no identity reaches about ${CLIENT_SERVICES} services (p10 ${percentileOf(counts, 10)}, p50 ${percentileOf(counts, 50)}, p90 ${percentileOf(counts, 90)})`);
  }
  const attributeChange = chooseAttributeChange(random, pools, things.identities, policies, new Set(identitiesWith20Services));
  const largePolicies = Array.from({ length: COHORTS }, (_, c) => ({
    identityRoles: [`#cohort-${c}`],
    serviceRoles: [`#app-${random.int(pools.apps)}`],
    identities: indexes.identity.byAttribute.get(`cohort-${c}`)?.length ?? 0,
  }));

  // 3. the client and its policies, through the API's code paths
  app = await openApp(dir, admin);
  let client: ScaleInfo['client'];
  try {
    const resources = app.core.resources;
    const password = randomBytes(18).toString('base64url');
    const identity = await resources.get('identities').create({ name: 'scale-client', type: 'User', isAdmin: false, roleAttributes: ['scale-client'] });
    await resources.get('authenticators').create({ method: 'updb', identityId: identity.id, username: 'scale-client', password });
    // Services that are not common, spread over the list, join the client's attribute.
    const step = Math.floor(things.services.length / (CLIENT_SERVICES - COMMON_SERVICES));
    for (let k = 0; k < CLIENT_SERVICES - COMMON_SERVICES; k++) {
      const s = things.services[things.services.length - 1 - k * step]!;
      await resources.get('services').patch(s.id, { roleAttributes: [...s.attributes, 'scale-client'] });
    }
    const routers = Array.from({ length: CLIENT_ROUTERS }, (_, k) => things.routers[1 + k * 3]!.id);
    await resources.get('service-policies').create({
      name: 'scale-client-dial',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: ['#scale-client'],
      serviceRoles: ['#scale-client'],
      postureCheckRoles: [],
    });
    await resources.get('edge-router-policies').create({
      name: 'scale-client-routers',
      semantic: 'AnyOf',
      identityRoles: ['#scale-client'],
      edgeRouterRoles: routers.map((id) => `@${id}`),
    });
    await resources.get('service-edge-router-policies').create({
      name: 'scale-client-services',
      semantic: 'AnyOf',
      serviceRoles: ['#scale-client'],
      edgeRouterRoles: routers.map((id) => `@${id}`),
    });
    const db = app.core.store.db;
    const dial = await db
      .selectFrom('service_policy_identities as a')
      .innerJoin('service_policies as p', (j) => j.onRef('p.id', '=', 'a.policy_id').on('p.type', '=', 'Dial'))
      .innerJoin('service_policy_services as b', 'b.policy_id', 'a.policy_id')
      .select('b.service_id')
      .distinct()
      .where('a.identity_id', '=', identity.id)
      .execute();
    const serviceIds = dial.map((r) => String(r.service_id)).sort();
    if (Math.abs(serviceIds.length - CLIENT_SERVICES) > 2) throw new Error(`the client may dial ${serviceIds.length} services, not about ${CLIENT_SERVICES}`);
    // Every one of them shares an edge router with the client.
    for (const serviceId of serviceIds) {
      const shared = await db
        .selectFrom('edge_router_policy_identities as a')
        .innerJoin('edge_router_policy_edge_routers as b', 'b.policy_id', 'a.policy_id')
        .innerJoin('service_edge_router_policy_edge_routers as c', 'c.edge_router_id', 'b.edge_router_id')
        .innerJoin('service_edge_router_policy_services as d', 'd.policy_id', 'c.policy_id')
        .select('b.edge_router_id')
        .where('a.identity_id', '=', identity.id)
        .where('d.service_id', '=', serviceId)
        .executeTakeFirst();
      if (!shared) throw new Error(`the client shares no edge router with the service ${serviceId}`);
    }
    client = { identityId: identity.id, name: 'scale-client', username: 'scale-client', password, serviceIds, edgeRouterIds: routers };
    lap(`client identity, authenticator, ${CLIENT_SERVICES - COMMON_SERVICES} service changes and 3 policies through ResourceService`);

    // 4. checks on samples
    await verify(app, random, things, policies);
    lap('links checked on samples against entitiesMatching and matches');

    for (const table of ['identities', 'services', 'edge_routers', 'service_policies', 'edge_router_policies', 'service_edge_router_policies', 'role_attribute_index', ...POLICY_COLLECTIONS.flatMap((c) => policySpecOf(c).lists.map((l) => l.linkTable))]) {
      const row = await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      rows[table] = Number(row.n);
    }
  } finally {
    await app.close();
  }

  // One file to copy: the write-ahead log folded into the database.
  const done = new Database(join(dir, DB_FILE));
  try {
    done.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    done.close();
  }

  const info: ScaleInfo = {
    version: SCALE_VERSION,
    seed,
    sizes,
    migrations: currentMigrations(),
    generatedAt: new Date().toISOString(),
    generationSeconds: Math.round((performance.now() - started) / 100) / 10,
    admin,
    client,
    identitiesWith20Services,
    servicesPerIdentity: {
      min,
      max,
      p10: percentileOf(counts, 10),
      p50: percentileOf(counts, 50),
      p90: percentileOf(counts, 90),
      highest: counts[counts.length - 1] ?? 0,
    },
    attributeChange,
    largePolicies,
    rows,
  };
  writeFileSync(join(dir, INFO_FILE), JSON.stringify(info, null, 2) + '\n', { mode: 0o600 });
  log(`generated in ${info.generationSeconds} s`);
  return info;
}

// ---- checks -------------------------------------------------------------------------------------

const SAMPLE_POLICIES = 40;
const SAMPLE_ENTITIES: Record<'identity' | 'service' | 'edge-router', number> = { identity: 300, service: 100, 'edge-router': 20 };

function sample<T>(random: Random, items: readonly T[], n: number): T[] {
  if (items.length <= n) return [...items];
  const picked = new Set<number>();
  while (picked.size < n) picked.add(random.int(items.length));
  return [...picked].map((i) => items[i]!);
}

/**
 * Stored links against the engine (entitiesMatching, for sampled policies of each kind, the broad
 * first ones and the client's included) and against the pure matcher (every policy, for sampled
 * entities of each kind); role_attribute_index rows against the sampled entities' attributes.
 */
async function verify(app: App, random: Random, things: ReturnType<typeof makeEntities>, mass: readonly Policy[]): Promise<void> {
  const db = app.core.store.db;
  const dialect = app.core.store.dialect;
  const fail = (what: string) => {
    throw new Error(`scale store check failed: ${what}`);
  };
  const setOf = async (table: string, select: string, where: string, value: string) =>
    new Set((await db.selectFrom(table).select(select).where(where, '=', value).execute()).map((r) => String((r as Record<string, unknown>)[select])));

  // Every policy as stored (the client's too).
  const policies: Policy[] = [];
  for (const collection of POLICY_COLLECTIONS) {
    const spec = policySpecOf(collection);
    const rows = await db.selectFrom(spec.table).selectAll().execute();
    for (const row of rows as Record<string, unknown>[]) {
      const roles: Partial<Record<RoleField, string[]>> = {};
      for (const l of spec.lists) roles[l.field] = (dialect.fromDb('json', row[l.column]) as string[] | null) ?? [];
      policies.push({ collection, id: String(row.id), name: String(row.name), semantic: row.semantic as Policy['semantic'], roles });
    }
  }
  if (policies.length !== mass.length + 3) fail(`${policies.length} policies stored, ${mass.length + 3} made`);

  for (const collection of POLICY_COLLECTIONS) {
    const spec = policySpecOf(collection);
    const ofKind = policies.filter((p) => p.collection === collection);
    const chosen = new Set([...ofKind.filter((p) => p.name.endsWith('-0') || p.name.startsWith('scale-client')), ...sample(random, ofKind, SAMPLE_POLICIES)]);
    for (const p of chosen) {
      for (const l of spec.lists) {
        const want = await entitiesMatching(db, l.kind, p.semantic, parseRoles(p.roles[l.field] ?? []));
        const have = await setOf(l.linkTable, l.linkColumn, 'policy_id', p.id);
        if (!sameSet(want, have)) fail(`${collection} ${p.name}: ${have.size} ${l.linkTable} rows, entitiesMatching selects ${want.size}`);
      }
    }
  }

  const kinds = [
    ['identity', 'identities'],
    ['service', 'services'],
    ['edge-router', 'routers'],
  ] as const;
  for (const [kind, key] of kinds) {
    const table = roleKindOf(kind).table;
    const chosen = sample(random, things[key], SAMPLE_ENTITIES[kind]).map((t) => t.id);
    if (kind === 'identity') chosen.push(...(await db.selectFrom(table).select('id').where('name', '=', 'scale-client').execute()).map((r) => String(r.id)));
    for (const id of chosen) {
      const row = await db.selectFrom(table).select(['id', 'role_attributes']).where('id', '=', id).executeTakeFirstOrThrow();
      const attributes = (dialect.fromDb('json', row.role_attributes) as string[] | null) ?? [];
      const entity: Thing = { id, name: '', attributes, values: {} };
      // Named index: without statistics SQLite would walk the kind's rows through the primary key.
      const indexed = new Set(
        (
          await sql<{ attribute: string }>`select attribute from role_attribute_index indexed by role_attribute_index_entity
            where kind = ${kind} and entity_id = ${id}`.execute(db)
        ).rows.map((r) => r.attribute),
      );
      if (!sameSet(indexed, new Set(attributes))) fail(`${kind} ${id}: role_attribute_index holds ${[...indexed].join(',')}`);
      for (const collection of POLICY_COLLECTIONS) {
        for (const l of policySpecOf(collection).lists) {
          if (l.kind !== kind) continue;
          const want = matchingPolicies(policies, l.field, collection, entity);
          const have = await setOf(l.linkTable, 'policy_id', l.linkColumn, id);
          if (!sameSet(want, have)) fail(`${kind} ${id}: ${have.size} ${l.linkTable} rows, matches selects ${want.size}`);
        }
      }
    }
  }
}

// ---- by hand ------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string', default: SCALE_DIR },
      force: { type: 'boolean', default: false },
      identities: { type: 'string' },
      services: { type: 'string' },
    },
  });
  const sizes: Partial<ScaleSizes> = {};
  if (values.identities) sizes.identities = Number(values.identities);
  if (values.services) sizes.services = Number(values.services);
  const dir = resolve(values.dir);
  const store = await ensureScaleStore(dir, { sizes, force: values.force, log: (m) => process.stdout.write(`scale store: ${m}\n`) });
  const { info } = store;
  process.stdout.write(
    `${store.generated ? 'generated' : 'reused'} ${dir} (generator v${info.version}, made in ${info.generationSeconds} s): ` +
      `${JSON.stringify(info.sizes)}\nrows: ${JSON.stringify(info.rows)}\nservices per identity: ${JSON.stringify(info.servicesPerIdentity)}, ` +
      `${info.identitiesWith20Services.length} probe identities\n`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`scale store: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
