// Catalogs of what service answers show, read from the store once and dropped through the change
// feed: posture checks by id, config type names, and service entities with their configs and each
// identity's service-config overrides.
import type { Entity, Repository } from '../../store/repository.js';
import type { EntityOf } from '../../resources/index.js';
import { linkListOf } from '../../resources/relations.js';
import type { Store } from '../../store/store.js';
import { BoundedMap } from '../../kernel/bounded-map.js';
import type { Cache } from '../../kernel/caches.js';
import type { Change } from '../../kernel/changes.js';
import { compareText } from './access-views.js';

/** Posture checks kept at most (a check known not to exist counts too). */
const MAX_CACHED_CHECKS = 50_000;

/** A stored posture check: what evaluation needs of it and what answers show. */
export type StoredPostureCheck = EntityOf<'posture-checks'>;

/** Posture checks by id, read once and dropped when they change. */
export class PostureCheckCatalog implements Cache {
  readonly name = 'posture-check-catalog';
  private readonly cache = new BoundedMap<string, StoredPostureCheck | null>({ maxEntries: MAX_CACHED_CHECKS });

  constructor(
    private readonly store: Store,
    private readonly repo: Repository<EntityOf<'posture-checks'>>,
  ) {}

  onChange(c: Change): void {
    if (c.collection === 'posture-checks') this.cache.delete(c.id);
  }

  reset(): void {
    this.cache.clear();
  }

  /** The checks with these ids that exist. */
  async get(ids: Iterable<string>): Promise<Map<string, StoredPostureCheck>> {
    const wanted = [...new Set(ids)];
    const out = new Map<string, StoredPostureCheck>();
    const missing: string[] = [];
    for (const id of wanted) {
      const c = this.cache.get(id);
      if (c === undefined) missing.push(id);
      else if (c) out.set(id, c);
    }
    if (missing.length > 0) {
      const seen = this.cache.drops;
      const rows = await this.store.db.selectFrom(this.repo.table).selectAll().where('id', 'in', missing).execute();
      const found = new Map<string, StoredPostureCheck>();
      for (const row of rows) {
        const e = this.repo.fromRow(row);
        found.set(e.id, e);
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

/** The link table the configs of services are kept in, as the services definition declares it. */
const SERVICE_CONFIGS = linkListOf('services', 'configs');

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
      const e = this.repo.fromRow(row);
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
        .selectFrom(`${SERVICE_CONFIGS.table} as sc`)
        .innerJoin('configs as c', 'c.id', `sc.${SERVICE_CONFIGS.member.column}`)
        .select([`sc.${SERVICE_CONFIGS.owner.column} as service_id`, 'c.id as config_id', 'c.config_type_id as type_id', 'c.data as data', 'c.updated_at as updated_at'])
        .where(`sc.${SERVICE_CONFIGS.owner.column}`, 'in', missing)
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
