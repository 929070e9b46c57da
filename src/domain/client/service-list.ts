// What the Client API shows a caller of the services it may use (behaviour.md §8): access from the
// policy links (an indexed join per identity, cached in memory and dropped through the change feed),
// each service with its permissions, its configs (identity overrides applied) and one posture query
// entry per policy granting access; and the service-list change marker.
import { createHash } from 'node:crypto';
import { sql, type Expression, type SqlBool } from 'kysely';
import { iso, type Clock } from '../../clock.js';
import { notFound } from '../../errors.js';
import { entityLinks, type ResourceDef } from '../../resources/kit.js';
import { services as servicesDef } from '../../resources/services.js';
import type { Entity, ListQuery, Repository } from '../../store/repository.js';
import type { Store } from '../../store/store.js';
import { BoundedMap } from '../../kernel/bounded-map.js';
import type { Cache } from '../../kernel/caches.js';
import type { Change } from '../../kernel/changes.js';
import { evaluatePolicy, postureQuery, type PostureCheck, type PostureFacts, type PostureQuery, type PostureStore } from './posture-store.js';
import { idIn, RELATIONS, type PolicyType } from '../related.js';

/** Who asks: the identity and the API session of the credential. */
export interface Caller {
  identityId: string;
  apiSessionId: string;
  /** Config type ids the API session asked for at login. */
  configTypes: readonly string[];
  isMfaComplete: boolean;
  /** ms */
  sessionCreatedAt: number;
  /** For the entity references of answers. */
  identityName: string;
}

// ---- generations: what the change feed has moved ------------------------------------------------------

/**
 * Collections whose changes can alter any identity's service list: access (services, policies and
 * posture checks move links), what a service shows, its configs and their type names.
 */
export const VIEW_COLLECTIONS: ReadonlySet<string> = new Set(['services', 'service-policies', 'posture-checks', 'configs', 'config-types']);

interface Stamp {
  generation: number;
  /** ms of the last bump */
  at: number;
}

/**
 * Counts changes that may alter service lists: a global count for VIEW_COLLECTIONS and one per
 * identity (its attributes, hence its policy links, and its service-config overrides). A cached
 * answer is good while the counts it was made under are unchanged. The counts are not a copy of
 * the store; a reset moves the global one, so that nothing kept under the old counts is used again.
 */
export class ViewGenerations implements Cache {
  readonly name = 'view-generations';
  global: Stamp = { generation: 0, at: 0 };
  private readonly identities = new Map<string, Stamp>();

  constructor(private readonly clock: Clock) {}

  onChange(c: Change): void {
    if (VIEW_COLLECTIONS.has(c.collection)) {
      this.global = { generation: this.global.generation + 1, at: this.clock() };
    } else if (c.collection === 'identities') {
      if (c.kind === 'delete') this.identities.delete(c.id);
      else this.identities.set(c.id, { generation: (this.identities.get(c.id)?.generation ?? 0) + 1, at: this.clock() });
    }
  }

  /** Moves the global count, keeping its time: nothing changed, but nothing kept before is trusted. */
  reset(): void {
    this.global = { generation: this.global.generation + 1, at: this.global.at };
  }

  identity(identityId: string): Stamp {
    return this.identities.get(identityId) ?? { generation: 0, at: 0 };
  }
}

// ---- access -------------------------------------------------------------------------------------------

/** A service policy granting the identity access to a service. */
export interface Grant {
  policyId: string;
  type: PolicyType;
}

/** Access of one identity: the policies granting each service, and the posture checks of each policy. */
export interface Access {
  services: Map<string, Grant[]>;
  checksOf: Map<string, string[]>;
}

/** A whole view, kept: its service ids also in the store's order. */
export interface View extends Access {
  /** Service ids in ascending order (as the store sorts them when every id is ASCII). */
  sortedIds: string[];
  asciiIds: boolean;
}

function asView(access: Access): View {
  const sortedIds = [...access.services.keys()].sort(compareText);
  // eslint-disable-next-line no-control-regex
  return { ...access, sortedIds, asciiIds: sortedIds.every((id) => /^[\x00-\x7f]*$/.test(id)) };
}

/** Views larger than this (services reachable) are not kept; requests then read only what they need. */
export const MAX_CACHED_VIEW = 2_000;
/** Services named in a restricted read of a view; more read the whole view. */
const MAX_RESTRICTED_LOAD = 1_000;
/** Cached grants across identities; the least recently used views go first. */
export const MAX_CACHED_GRANTS = 500_000;
/** Identities whose views are kept at most. */
const MAX_CACHED_VIEWS = 100_000;
/** Approximate bytes of one grant of a kept view (its entry, its service id, its sorted id). */
const GRANT_BYTES = 96;

interface CachedAccess {
  global: number;
  identity: number;
  /** undefined: too large to keep; read per request. */
  access: View | undefined;
  size: number;
}

const servicesOfIdentity = RELATIONS.find((r) => r.parent === 'identities' && r.sub === 'services')!;

/** Code-unit order: the same in every locale. */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function asPolicyType(value: unknown): PolicyType | undefined {
  return value === 'Dial' || value === 'Bind' ? value : undefined;
}

/** Access per identity from the policy links: one indexed join, cached while the generations hold. */
export class AccessViews implements Cache {
  readonly name = 'access-views';
  private readonly cache = new BoundedMap<string, CachedAccess>({
    maxEntries: MAX_CACHED_VIEWS,
    maxBytes: MAX_CACHED_GRANTS * GRANT_BYTES,
    sizeOf: (e) => e.size * GRANT_BYTES,
  });

  constructor(
    private readonly store: Store,
    private readonly generations: ViewGenerations,
    /** Views reaching more services are not kept. */
    private readonly maxView = MAX_CACHED_VIEW,
  ) {}

  onChange(c: Change): void {
    if (c.collection === 'identities' && c.kind === 'delete') this.cache.delete(c.id);
  }

  reset(): void {
    this.cache.clear();
  }

  /** The ids of the services an identity may dial or bind, as a subquery (the list scope). */
  static scope(identityId: string): Expression<SqlBool> {
    return idIn(servicesDef.table, servicesOfIdentity.ids(identityId));
  }

  /**
   * Access of an identity, to at least `serviceIds` (to all of its services when omitted). A view
   * small enough is kept until a generation it was read under moves; a larger one is read again,
   * restricted to `serviceIds`, for each request.
   */
  async of(identityId: string, serviceIds?: readonly string[]): Promise<Access> {
    const global = this.generations.global.generation;
    const identity = this.generations.identity(identityId).generation;
    const hit = this.cache.get(identityId);
    if (hit && hit.global === global && hit.identity === identity) return hit.access ?? this.load(identityId, serviceIds);
    const access = await this.load(identityId, undefined);
    let size = 0;
    for (const grants of access.services.values()) size += grants.length;
    const small = access.services.size <= this.maxView;
    // Kept under the generations read before the load: a change landing meanwhile makes it stale.
    const view = small ? asView(access) : undefined;
    this.cache.set(identityId, { global, identity, access: view, size: small ? size : 0 });
    return view ?? access;
  }

  /** The whole view of an identity when it is small enough to keep (read if need be); else undefined. */
  async view(identityId: string): Promise<View | undefined> {
    await this.of(identityId, []);
    return this.cache.peek(identityId)?.access;
  }

  /** Whether the identity may use the service at all (the 404 rule of the Client API). */
  async grantsFor(identityId: string, serviceId: string): Promise<{ grants: Grant[]; checksOf: Map<string, string[]> }> {
    const access = await this.of(identityId, [serviceId]);
    return { grants: access.services.get(serviceId) ?? [], checksOf: access.checksOf };
  }

  /** One join over the link tables (restricted to `serviceIds` when given), then the posture links. */
  private async load(identityId: string, serviceIds: readonly string[] | undefined): Promise<Access> {
    const db = this.store.db;
    const services = new Map<string, Grant[]>();
    if (serviceIds && serviceIds.length === 0) return { services, checksOf: new Map() };
    // A long list is no better than the whole view (and would strain the bound parameters).
    const restricted =
      serviceIds && serviceIds.length <= MAX_RESTRICTED_LOAD ? sql` and ${sql.ref('s.service_id')} in (${sql.join([...serviceIds])})` : sql``;
    const { rows } = await sql<{ policy_id: string; type: string; service_id: string }>`
      select ${sql.ref('i.policy_id')} as policy_id, ${sql.ref('p.type')} as type, ${sql.ref('s.service_id')} as service_id
      from ${sql.table('service_policy_identities')} as i
      join ${sql.table('service_policies')} as p on ${sql.ref('p.id')} = ${sql.ref('i.policy_id')}
      join ${sql.table('service_policy_services')} as s on ${sql.ref('s.policy_id')} = ${sql.ref('i.policy_id')}${restricted}
      where ${sql.ref('i.identity_id')} = ${identityId}`.execute(db);
    const policies = new Set<string>();
    for (const r of rows) {
      const type = asPolicyType(r.type);
      if (!type) continue;
      let list = services.get(r.service_id);
      if (!list) services.set(r.service_id, (list = []));
      list.push({ policyId: r.policy_id, type });
      policies.add(r.policy_id);
    }
    for (const list of services.values()) list.sort((a, b) => compareText(a.type, b.type) || compareText(a.policyId, b.policyId));
    const checksOf = new Map<string, string[]>();
    if (policies.size > 0) {
      const links = await db
        .selectFrom('service_policy_posture_checks')
        .select(['policy_id', 'posture_check_id'])
        .where('policy_id', 'in', [...policies])
        .execute();
      for (const l of links) {
        const list = checksOf.get(String(l.policy_id)) ?? [];
        list.push(String(l.posture_check_id));
        checksOf.set(String(l.policy_id), list);
      }
      for (const list of checksOf.values()) list.sort();
    }
    return { services, checksOf };
  }
}

// ---- catalogs: posture checks and config types, from memory ------------------------------------------------

/** Posture checks kept at most (a check known not to exist counts too). */
const MAX_CACHED_CHECKS = 50_000;

/** Posture checks by id, read once and dropped when they change. */
export class PostureCheckCatalog implements Cache {
  readonly name = 'posture-check-catalog';
  private readonly cache = new BoundedMap<string, PostureCheck | null>({ maxEntries: MAX_CACHED_CHECKS });

  constructor(
    private readonly store: Store,
    private readonly repo: Repository,
  ) {}

  onChange(c: Change): void {
    if (c.collection === 'posture-checks') this.cache.delete(c.id);
  }

  reset(): void {
    this.cache.clear();
  }

  /** The checks with these ids that exist. */
  async get(ids: Iterable<string>): Promise<Map<string, PostureCheck>> {
    const wanted = [...new Set(ids)];
    const out = new Map<string, PostureCheck>();
    const missing: string[] = [];
    for (const id of wanted) {
      const c = this.cache.get(id);
      if (c === undefined) missing.push(id);
      else if (c) out.set(id, c);
    }
    if (missing.length > 0) {
      const seen = this.cache.drops;
      const rows = await this.store.db.selectFrom(this.repo.table).selectAll().where('id', 'in', missing).execute();
      const found = new Map<string, PostureCheck>();
      for (const row of rows) {
        const e = this.repo.fromRow(row as Record<string, unknown>);
        found.set(e.id, e as unknown as PostureCheck);
      }
      for (const id of missing) {
        const c = found.get(id);
        this.cache.setIfUnchanged(id, c ?? null, seen);
        if (c) out.set(id, c);
      }
    }
    // In the order asked for.
    return new Map(wanted.filter((id) => out.has(id)).map((id) => [id, out.get(id)!]));
  }
}

/** Config type ids and names, read once and again after any config type changes. */
export class ConfigTypeCatalog implements Cache {
  readonly name = 'config-type-catalog';
  private byId: Map<string, string> | undefined;
  /** Moves on every drop: a read that began before one is not kept. */
  private drops = 0;

  constructor(private readonly store: Store) {}

  onChange(c: Change): void {
    if (c.collection === 'config-types') this.reset();
  }

  reset(): void {
    this.drops++;
    this.byId = undefined;
  }

  async names(): Promise<Map<string, string>> {
    if (this.byId) return this.byId;
    const seen = this.drops;
    const rows = await this.store.db.selectFrom('config_types').select(['id', 'name']).execute();
    const byId = new Map(rows.map((r) => [String(r.id), String(r.name)]));
    if (seen === this.drops) this.byId = byId;
    return byId;
  }

  /** Config types named by id or name (`all`: every type) → ids; unknown ones are left out. */
  async resolve(wanted: readonly string[]): Promise<Set<string> | 'all'> {
    if (wanted.includes('all')) return 'all';
    const byId = await this.names();
    const out = new Set<string>();
    for (const w of wanted) {
      if (byId.has(w)) out.add(w);
      else for (const [id, name] of byId) if (name === w) out.add(id);
    }
    return out;
  }
}

// ---- answers --------------------------------------------------------------------------------------

export interface PolicyPostureQueries {
  policyId: string;
  policyType: PolicyType;
  isPassing: boolean;
  postureQueries: PostureQuery[];
}

/** Posture facts of a caller now. */
export async function factsOf(posture: PostureStore, caller: Caller, now: number): Promise<PostureFacts> {
  return {
    posture: await posture.of(caller.apiSessionId, caller.identityId),
    mfa: { isMfaComplete: caller.isMfaComplete, passedAt: caller.sessionCreatedAt },
    now,
  };
}

/** One entry per policy granting access: whether all of its checks pass, and each check. */
export function policyPostureQueries(
  grants: readonly Grant[],
  checksOf: ReadonlyMap<string, readonly string[]>,
  catalog: ReadonlyMap<string, PostureCheck>,
  facts: PostureFacts,
): PolicyPostureQueries[] {
  return grants.map((g) => {
    const checks = (checksOf.get(g.policyId) ?? []).map((id) => catalog.get(id)).filter((c): c is PostureCheck => c !== undefined);
    const queries = checks.map((c) => postureQuery(c, facts));
    return { policyId: g.policyId, policyType: g.type, isPassing: evaluatePolicy(checks, facts).isPassing, postureQueries: queries };
  });
}

/** A config as a service list shows it. */
interface ConfigEntry {
  configId: string;
  typeId: string;
  data: unknown;
  updatedAt: string;
}

export interface ServiceConfigs {
  /** Ids of the service's own configs. */
  ids: string[];
  /** Config type id → data, overrides applied. */
  byType: Map<string, unknown>;
  /** `<config id>@<updatedAt>` of every config read, own and overrides. */
  versions: string[];
}

/** Service entities, their own configs and identities' overrides kept in memory. */
export const MAX_CACHED_SERVICES = 50_000;
const MAX_CACHED_OVERRIDES = 20_000;

function byConfigId(a: ConfigEntry, b: ConfigEntry): number {
  return compareText(a.configId, b.configId);
}

/**
 * Service entities, each service's own configs and each identity's service-config overrides, read
 * from the store once and dropped through the change feed: a service write drops that service, a
 * config or config type write drops every config entry, an identity write drops its overrides. A
 * read that started before a drop is not kept (the epoch moved meanwhile).
 */
export class ServiceCatalog implements Cache {
  readonly name = 'service-catalog';
  private readonly entities = new BoundedMap<string, Entity>({ maxEntries: MAX_CACHED_SERVICES });
  private readonly own = new BoundedMap<string, ConfigEntry[]>({ maxEntries: MAX_CACHED_SERVICES });
  private readonly overrides = new BoundedMap<string, Map<string, ConfigEntry[]>>({ maxEntries: MAX_CACHED_OVERRIDES });
  private epoch = 0;

  constructor(
    private readonly store: Store,
    private readonly repo: Repository,
  ) {}

  onChange(c: Change): void {
    if (c.collection === 'services') {
      this.epoch++;
      this.entities.delete(c.id);
      this.own.delete(c.id);
      if (c.kind === 'delete') this.overrides.clear();
    } else if (c.collection === 'configs' || c.collection === 'config-types') {
      this.epoch++;
      this.own.clear();
      this.overrides.clear();
    } else if (c.collection === 'identities') {
      this.epoch++;
      this.overrides.delete(c.id);
    }
  }

  reset(): void {
    this.epoch++;
    this.entities.clear();
    this.own.clear();
    this.overrides.clear();
  }

  /** The services with these ids that exist. */
  async services(ids: readonly string[]): Promise<Map<string, Entity>> {
    const out = new Map<string, Entity>();
    const missing: string[] = [];
    for (const id of ids) {
      const e = this.entities.get(id);
      if (e) out.set(id, e);
      else missing.push(id);
    }
    if (missing.length === 0) return out;
    const epoch = this.epoch;
    const rows = await this.store.db.selectFrom(this.repo.table).selectAll().where('id', 'in', missing).execute();
    for (const row of rows) {
      const e = this.repo.fromRow(row as Record<string, unknown>);
      out.set(e.id, e);
      if (epoch === this.epoch) this.entities.set(e.id, e);
    }
    return out;
  }

  /** Keeps an entity read elsewhere (a list page) when nothing was dropped since `epoch`. */
  remember(entities: readonly Entity[], epoch: number): void {
    if (epoch !== this.epoch) return;
    for (const e of entities) this.entities.set(e.id, e);
  }

  get currentEpoch(): number {
    return this.epoch;
  }

  /** The configs of services for one identity, overrides applied. */
  async configsFor(identityId: string, serviceIds: readonly string[]): Promise<Map<string, ServiceConfigs>> {
    const epoch = this.epoch;
    // What is kept is taken now: keeping what is read below may evict some of it.
    const kept = new Map<string, ConfigEntry[]>();
    const missing: string[] = [];
    for (const id of serviceIds) {
      const list = this.own.get(id);
      if (list) kept.set(id, list);
      else missing.push(id);
    }
    const own = new Map<string, ConfigEntry[]>();
    if (missing.length > 0) {
      for (const id of missing) own.set(id, []);
      const rows = await this.store.db
        .selectFrom('service_configs as sc')
        .innerJoin('configs as c', 'c.id', 'sc.config_id')
        .select(['sc.service_id as service_id', 'c.id as config_id', 'c.config_type_id as type_id', 'c.data as data', 'c.updated_at as updated_at'])
        .where('sc.service_id', 'in', missing)
        .execute();
      for (const r of rows) own.get(String(r.service_id))!.push(this.entry(r));
      for (const [id, list] of own) {
        list.sort(byConfigId);
        if (epoch === this.epoch) this.own.set(id, list);
      }
    }
    let overrides = this.overrides.get(identityId);
    if (!overrides) {
      overrides = new Map();
      const rows = await this.store.db
        .selectFrom('identity_service_configs as isc')
        .innerJoin('configs as c', 'c.id', 'isc.config_id')
        .select(['isc.service_id as service_id', 'c.id as config_id', 'c.config_type_id as type_id', 'c.data as data', 'c.updated_at as updated_at'])
        .where('isc.identity_id', '=', identityId)
        .execute();
      for (const r of rows) {
        const list = overrides.get(String(r.service_id)) ?? [];
        list.push(this.entry(r));
        overrides.set(String(r.service_id), list);
      }
      if (epoch === this.epoch) this.overrides.set(identityId, overrides);
    }
    const out = new Map<string, ServiceConfigs>();
    for (const id of serviceIds) {
      const entry: ServiceConfigs = { ids: [], byType: new Map(), versions: [] };
      // Own configs first, then the identity's overrides replace those of the same type.
      for (const c of own.get(id) ?? kept.get(id) ?? []) {
        entry.ids.push(c.configId);
        entry.byType.set(c.typeId, c.data);
        entry.versions.push(`${c.configId}@${c.updatedAt}`);
      }
      for (const c of overrides.get(id) ?? []) {
        entry.byType.set(c.typeId, c.data);
        entry.versions.push(`${c.configId}@${c.updatedAt}`);
      }
      out.set(id, entry);
    }
    return out;
  }

  private entry(r: { config_id: unknown; type_id: unknown; data: unknown; updated_at: unknown }): ConfigEntry {
    return {
      configId: String(r.config_id),
      typeId: String(r.type_id),
      data: this.store.dialect.fromDb('json', r.data),
      updatedAt: String(r.updated_at),
    };
  }
}

/** The public fields of an entity with its links (what ResourceService.present writes). */
function publicFields(def: ResourceDef, e: Entity): Record<string, unknown> {
  const answer: Record<string, unknown> = { _links: entityLinks(def, e.id) };
  for (const [key, value] of Object.entries(e)) {
    const f = def.fields[key];
    if (!f?.writeOnly && !f?.virtual) answer[key] = value;
  }
  return answer;
}

export interface ClientServiceDeps {
  store: Store;
  clock: Clock;
  repo: Repository;
  catalog: ServiceCatalog;
  access: AccessViews;
  checks: PostureCheckCatalog;
  configTypes: ConfigTypeCatalog;
  posture: PostureStore;
}

/** Which config types an answer carries: those asked for, else those of the API session. */
export type ConfigTypeChoice = { given: readonly string[] } | 'session' | 'all';

export interface PresentOptions {
  /** Receives the versions of what the answers were made of beyond their fields (see present). */
  versions?: string[];
  /** The caller's whole view, when at hand. */
  view?: Access;
  /** Told whether the answers change with time alone (an MFA check with a timeout). */
  report?: { timeDependent: boolean };
}

export class ClientServices {
  /**
   * The caller-independent part of each service answer, made once per entity object (the catalog
   * keeps one object per service until it changes; a changed service is a new object).
   */
  private readonly bases = new WeakMap<Entity, Record<string, unknown>>();

  constructor(private readonly d: ClientServiceDeps) {}

  private base(e: Entity): Record<string, unknown> {
    let base = this.bases.get(e);
    if (!base) this.bases.set(e, (base = publicFields(servicesDef, e)));
    return base;
  }

  /**
   * A page of the caller's services. Scoping comes first (the services some policy lets the caller
   * dial or bind, as an indexed subquery), then `extraScope` (roleFilter), the filter, sort and paging.
   */
  async list(
    caller: Caller,
    q: Omit<ListQuery, 'scope'>,
    configTypes: ConfigTypeChoice,
    extraScope?: Expression<SqlBool>,
    opts: PresentOptions = {},
  ): Promise<{ items: Record<string, unknown>[]; total: number }> {
    const view = await this.d.access.view(caller.identityId);
    // Without a filter or roleFilter, sorted by id (the default): the page comes from the kept view.
    const byId = q.sort.length === 0 || (q.sort.length === 1 && q.sort[0]!.field === 'id');
    if (view && view.asciiIds && q.where === undefined && !extraScope && byId) {
      const ids = q.sort[0]?.direction === 'desc' ? [...view.sortedIds].reverse() : view.sortedIds;
      const page = ids.slice(q.offset, q.limit === null ? undefined : q.offset + q.limit);
      const entities = await this.d.catalog.services(page);
      // A service deleted a moment ago (its drop not yet seen): the store decides.
      if (entities.size === page.length) {
        const items = await this.present(caller, page.map((id) => entities.get(id)!), configTypes, { ...opts, view });
        return { items, total: ids.length };
      }
    }
    if (view?.services.size === 0) return { items: [], total: 0 };
    let scope = AccessViews.scope(caller.identityId);
    if (extraScope) scope = sql<SqlBool>`(${scope} and ${extraScope})`;
    const epoch = this.d.catalog.currentEpoch;
    const { items, total } = await this.d.repo.list(this.d.store.db, { ...q, scope });
    this.d.catalog.remember(items, epoch);
    return { items: await this.present(caller, items, configTypes, opts), total };
  }

  /** Throws 404 unless the caller may dial or bind the service. */
  async assertVisible(caller: Caller, id: string): Promise<void> {
    const { grants } = await this.d.access.grantsFor(caller.identityId, id);
    if (grants.length === 0) throw notFound('service', id);
  }

  /** One service of the caller; 404 when the caller may not use it (or it does not exist). */
  async get(caller: Caller, id: string, configTypes: ConfigTypeChoice): Promise<Record<string, unknown>> {
    const { grants } = await this.d.access.grantsFor(caller.identityId, id);
    const entity = grants.length > 0 ? (await this.d.catalog.services([id])).get(id) : undefined;
    if (!entity) throw notFound('service', id);
    const [answer] = await this.present(caller, [entity], configTypes);
    return answer!;
  }

  /**
   * Service entities → client answers: permissions, configs, posture queries. `versions`, when given,
   * receives the versions of what the answers were made of beyond their fields (every config and
   * posture check read, with its updatedAt).
   */
  async present(caller: Caller, entities: readonly Entity[], choice: ConfigTypeChoice, opts: PresentOptions = {}): Promise<Record<string, unknown>[]> {
    if (entities.length === 0) return [];
    const { versions } = opts;
    const ids = entities.map((e) => e.id);
    const access = opts.view ?? (await this.d.access.of(caller.identityId, ids));
    const policyIds = new Set<string>();
    for (const id of ids) for (const g of access.services.get(id) ?? []) policyIds.add(g.policyId);
    const checkIds = new Set<string>();
    for (const p of policyIds) for (const c of access.checksOf.get(p) ?? []) checkIds.add(c);
    const catalog = await this.d.checks.get(checkIds);
    if (opts.report) {
      for (const c of catalog.values()) if (c.typeId === 'MFA' && (c.timeoutSeconds ?? -1) >= 0) opts.report.timeDependent = true;
    }
    const facts = await factsOf(this.d.posture, caller, this.d.clock());
    const configs = await this.d.catalog.configsFor(caller.identityId, ids);
    const wanted = choice === 'all' ? 'all' : await this.d.configTypes.resolve(choice === 'session' ? caller.configTypes : choice.given);
    const typeNames = await this.d.configTypes.names();
    if (versions) {
      for (const c of configs.values()) versions.push(...c.versions);
      for (const c of catalog.values()) versions.push(`${c.id}@${String((c as unknown as Entity).updatedAt)}`);
    }
    return entities.map((e) => {
      const grants = access.services.get(e.id) ?? [];
      const own = configs.get(e.id)!;
      const config: Record<string, unknown> = {};
      for (const [typeId, data] of own.byType) {
        if (wanted !== 'all' && !wanted.has(typeId)) continue;
        const name = typeNames.get(typeId);
        if (name !== undefined) config[name] = data;
      }
      return {
        ...this.base(e),
        configs: own.ids,
        permissions: [...new Set(grants.map((g) => g.type))].sort(),
        config,
        postureQueries: policyPostureQueries(grants, access.checksOf, catalog, facts),
      };
    });
  }
}

// ---- the service-list change marker ----------------------------------------------------------------------

/**
 * What a caller's service answers depend on, as one string: the generations of the changes that may
 * alter them (global, the identity's, the API session's posture) and the API session's own state.
 * Equal stamps: equal answers (save those that change with time alone, see PresentOptions.report).
 */
export function viewStamp(generations: ViewGenerations, posture: PostureStore, caller: Caller): string {
  return `${generations.global.generation}:${generations.identity(caller.identityId).generation}:${posture.generation(caller.apiSessionId).generation}:${caller.isMfaComplete}:${caller.configTypes.join(',')}`;
}

/**
 * Serialized answers of a caller's repeated reads (the same request of the same API session), good
 * while the stamp they were made under holds. Bounded in bytes and per API session; an API
 * session's entries go with it.
 */
export class AnswerCache implements Cache {
  readonly name = 'service-answers';
  private readonly entries: BoundedMap<string, { apiSessionId: string; stamp: string; body: string }>;
  private readonly bySession = new Map<string, Set<string>>();

  constructor(
    maxBytes = 64 * 1024 * 1024,
    private readonly maxBody = 256 * 1024,
    private readonly perSession = 8,
  ) {
    this.entries = new BoundedMap({
      // Bytes bind first; the count only bounds the bookkeeping of many tiny answers.
      maxEntries: 1_000_000,
      maxBytes,
      sizeOf: (e) => e.body.length,
      onDrop: (key, e) => {
        const keys = this.bySession.get(e.apiSessionId);
        keys?.delete(key);
        if (keys?.size === 0) this.bySession.delete(e.apiSessionId);
      },
    });
  }

  onChange(c: Change): void {
    if (c.collection === 'api-sessions' && c.kind === 'delete') for (const key of [...(this.bySession.get(c.id) ?? [])]) this.entries.delete(key);
  }

  reset(): void {
    this.entries.clear();
  }

  get(apiSessionId: string, request: string, stamp: string): string | undefined {
    const key = `${apiSessionId}\u0000${request}`;
    const hit = this.entries.peek(key);
    if (!hit) return undefined;
    if (hit.stamp !== stamp) {
      this.entries.delete(key);
      return undefined;
    }
    return hit.body;
  }

  put(apiSessionId: string, request: string, stamp: string, body: string): void {
    if (body.length > this.maxBody) return;
    const key = `${apiSessionId}\u0000${request}`;
    this.entries.delete(key);
    const keys = this.bySession.get(apiSessionId);
    if (keys && keys.size >= this.perSession) this.entries.delete(keys.values().next().value!);
    if (!this.entries.set(key, { apiSessionId, stamp, body })) return;
    let mine = this.bySession.get(apiSessionId);
    if (!mine) this.bySession.set(apiSessionId, (mine = new Set()));
    mine.add(key);
  }
}

interface MarkerState {
  /** The generations the fingerprint was taken under. */
  key: string;
  fingerprint: string;
  /** ms */
  at: number;
}

/**
 * `lastChangeAt` of `/current-api-session/service-updates`, per API session. It is the time of the
 * last change of what the caller's full service list would show (every service it may use with its
 * permissions, configs of every type, overrides and posture queries with isPassing) or of a config
 * or posture check behind it (any write of one counts, even one that leaves the list as it was),
 * found by comparing a fingerprint of that list. The fingerprint is taken again only after a change that may
 * alter it: a change in VIEW_COLLECTIONS, of the caller's identity, of the API session's posture
 * data or MFA state. So an unrelated change (another identity's attributes, an edge router) never
 * moves it and costs nothing; a change elsewhere in the network costs one fingerprint per polling
 * API session, and moves only the markers of callers whose list it changed. Posture checks that
 * pass or fail with time alone (an MFA timeout) move it when it is next taken, not at that moment.
 *
 * A marker's time is history the store does not hold, so a reset keeps it (and the fingerprint it
 * belongs to) and only makes every marker take its fingerprint again; an API session's marker goes
 * with the session.
 */
export class ServiceUpdateMarkers implements Cache {
  readonly name = 'service-update-markers';
  private readonly state = new Map<string, MarkerState>();

  constructor(
    private readonly services: ClientServices,
    private readonly generations: ViewGenerations,
    private readonly posture: PostureStore,
    /** ms; no marker is older than this (the controller start): nothing before it is known. */
    private readonly since: number,
  ) {}

  onChange(c: Change): void {
    if (c.collection === 'api-sessions' && c.kind === 'delete') this.state.delete(c.id);
  }

  reset(): void {
    for (const s of this.state.values()) s.key = '';
  }

  async lastChangeAt(caller: Caller): Promise<string> {
    const identity = this.generations.identity(caller.identityId);
    const posture = this.posture.generation(caller.apiSessionId);
    const global = this.generations.global;
    const key = viewStamp(this.generations, this.posture, caller);
    const prev = this.state.get(caller.apiSessionId);
    if (prev && prev.key === key) return iso(prev.at);
    const fingerprint = await this.fingerprint(caller);
    let at: number;
    if (!prev) at = Math.max(caller.sessionCreatedAt, this.since);
    else if (prev.fingerprint === fingerprint) at = prev.at;
    else at = Math.max(prev.at + 1, global.at, identity.at, posture.at);
    // A change that lands while the fingerprint is taken is seen at the next call (the key is older).
    this.state.set(caller.apiSessionId, { key, fingerprint, at });
    return iso(at);
  }

  private async fingerprint(caller: Caller): Promise<string> {
    const versions: string[] = [];
    const { items } = await this.services.list(caller, { sort: [], offset: 0, limit: null }, 'all', undefined, { versions });
    return createHash('sha256').update(JSON.stringify(items)).update(JSON.stringify(versions.sort())).digest('base64url');
  }
}
