// The service list: what the Client API shows a caller of the services it may use (behaviour.md
// §8) — each service with its permissions, its configs (identity overrides applied) and one posture
// query entry per policy granting access — made from the access views and the catalogs. A page
// without filter or sort other than by id comes from the caller's kept view; any other from the store,
// scoped to the caller's services before the filter.
import { Type } from '@sinclair/typebox';
import { sql, type Expression, type SqlBool } from 'kysely';
import type { Clock } from '../../clock.js';
import { notFound } from '../../errors.js';
import { DateTimeSchema, entityLinks, LinksSchema, TagsSchema, type Links, type ResourceDef } from '../../resources/kit.js';
import { postureChecks as postureChecksDef } from '../../resources/posture-checks.js';
import { services as servicesDef } from '../../resources/services.js';
import type { Entity, ListQuery, Repository } from '../../store/repository.js';
import type { Store } from '../../store/store.js';
import { evaluatePolicy, nextChangeAt, postureQuery, type PostureFacts, type PostureQuery } from '../../policy/posture.js';
import { splitList } from '../../oidc/flow.js';
import type { PolicyType } from '../related.js';
import { AccessViews, type Access, type Grant } from './access-views.js';
import type { Caller } from './caller.js';
import type { ConfigTypeCatalog, PostureCheckCatalog, ServiceCatalog, StoredPostureCheck } from './catalogs.js';
import type { PostureStore } from './posture-store.js';

// ---- answers --------------------------------------------------------------------------------------

/** A posture query as a client service answer carries it: the check (its base fields) and its state. */
export const PostureQuerySchema = Type.Object({
  _links: LinksSchema,
  id: Type.String(),
  createdAt: DateTimeSchema,
  updatedAt: DateTimeSchema,
  tags: TagsSchema,
  typeId: Type.String(),
  queryType: Type.String(),
  isPassing: Type.Boolean(),
  timeout: Type.Integer(),
  timeoutRemaining: Type.Integer(),
  promptOnWake: Type.Optional(Type.Boolean()),
  promptOnUnlock: Type.Optional(Type.Boolean()),
  process: Type.Optional(Type.Object({ osType: Type.String(), path: Type.String() })),
  processes: Type.Optional(Type.Array(Type.Object({ osType: Type.String(), path: Type.String() }))),
});

/** A posture query with the base fields of its check. */
export type CheckPostureQuery = PostureQuery & Pick<StoredPostureCheck, 'createdAt' | 'updatedAt' | 'tags'> & { _links: Links };

export interface PolicyPostureQueries {
  policyId: string;
  policyType: PolicyType;
  isPassing: boolean;
  postureQueries: CheckPostureQuery[];
}

/** Posture facts of a caller now. */
export async function factsOf(posture: Pick<PostureStore, 'of'>, caller: Caller, now: number): Promise<PostureFacts> {
  return {
    posture: await posture.of(caller.apiSessionId, caller.identityId),
    // MFA counts from when it was given; a session whose identity's MFA was removed has no such time.
    mfa: { isMfaComplete: caller.isMfaComplete && caller.mfaPassedAt !== null, passedAt: caller.mfaPassedAt ?? 0 },
    now,
  };
}

/**
 * One entry per policy granting access: whether all of its checks pass, and each check. An entry
 * depends only on its policy and the facts, so one list's services share it through `made` (one
 * object per policy and type): a policy granting every service is evaluated once, not per service.
 */
export function policyPostureQueries(
  grants: readonly Grant[],
  checksOf: ReadonlyMap<string, readonly string[]>,
  catalog: ReadonlyMap<string, StoredPostureCheck>,
  facts: PostureFacts,
  made: Map<string, PolicyPostureQueries> = new Map(),
): PolicyPostureQueries[] {
  return grants.map((g) => {
    const key = `${g.type} ${g.policyId}`;
    let entry = made.get(key);
    if (entry) return entry;
    const checks = (checksOf.get(g.policyId) ?? []).map((id) => catalog.get(id)).filter((c): c is StoredPostureCheck => c !== undefined);
    const queries = checks.map((c): CheckPostureQuery => ({
      _links: entityLinks(postureChecksDef, c),
      createdAt: c.createdAt,
      updatedAt: c.updatedAt,
      tags: c.tags,
      ...postureQuery(c, facts),
    }));
    entry = { policyId: g.policyId, policyType: g.type, isPassing: evaluatePolicy(checks, facts).isPassing, postureQueries: queries };
    made.set(key, entry);
    return entry;
  });
}

/** The public fields of an entity with its links (what ResourceService.present writes). */
function publicFields(def: ResourceDef, e: Entity): Record<string, unknown> {
  const answer: Record<string, unknown> = { _links: entityLinks(def, e) };
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

/** The choice a request's `configTypes` makes (repeated, or comma-separated); absent: the API session's. */
export function configTypeChoice(query: Readonly<Record<string, unknown>> | undefined): ConfigTypeChoice {
  const raw = query?.configTypes as string | string[] | undefined;
  return raw === undefined ? 'session' : { given: splitList(raw) };
}

/** What a service answer carries for its caller (ClientServiceFields), and the ids of its own configs. */
export interface CallerServiceFields {
  configs: string[];
  permissions: string[];
  config: Record<string, unknown>;
  postureQueries: PolicyPostureQueries[];
}

export interface PresentOptions {
  /** Receives the versions of what the answers were made of beyond their fields (see present). */
  versions?: string[];
  /** The caller's whole view, when at hand. */
  view?: Access;
  /**
   * Told the next moment (ms) at which whether a check of the answers passes may change with time
   * alone (a passed MFA's timeout or a prompt's grace running out); left undefined when none can.
   */
  report?: { changesAt: number | undefined };
}

/** What a client's service answer carries beyond the service's read fields; ClientServices.present fills them. */
export const ClientServiceFields = {
  permissions: Type.Array(Type.String(), { description: 'Bind and/or Dial: what the caller may do' }),
  config: Type.Record(Type.String(), Type.Unknown(), {
    description: 'config type name → config data, for the config types asked for; the identity’s overrides applied',
  }),
  postureQueries: Type.Array(
    Type.Object({
      policyId: Type.String(),
      policyType: Type.String(),
      isPassing: Type.Boolean(),
      postureQueries: Type.Array(PostureQuerySchema),
    }),
    { description: 'one entry per service policy granting the caller access' },
  ),
};

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

  /** The id and name of a service the caller may dial or bind; 404 for any other (or none). */
  async visible(caller: Caller, id: string): Promise<{ id: string; name: string }> {
    const { grants } = await this.d.access.grantsFor(caller.identityId, id);
    const entity = grants.length > 0 ? (await this.d.catalog.services([id])).get(id) : undefined;
    if (!entity) throw notFound('service', id);
    return { id, name: String(entity.name) };
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
   * Service entities → client answers (ClientServiceFields beside the service's own read fields and
   * `configs`): permissions, configs, posture queries. `versions`, when given, receives the versions
   * of what the answers were made of beyond their fields (every config and posture check read, with
   * its updatedAt).
   */
  async present(caller: Caller, entities: readonly Entity[], choice: ConfigTypeChoice, opts: PresentOptions = {}): Promise<Record<string, unknown>[]> {
    const fields = await this.callerFields(caller, entities, choice, opts);
    return entities.map((e, i) => ({ ...this.base(e), ...fields[i]! }));
  }

  /**
   * What each service answer carries for this caller beyond the service's own fields: the ids of its
   * configs, what the caller may do with it, its configs of the chosen types (the caller's overrides
   * applied) and one posture query entry per policy granting the caller access. A service the caller
   * may not use has no permissions and no posture queries (the Management API shows every service).
   */
  async callerFields(caller: Caller, entities: readonly Entity[], choice: ConfigTypeChoice, opts: PresentOptions = {}): Promise<CallerServiceFields[]> {
    if (entities.length === 0) return [];
    const { versions } = opts;
    const ids = entities.map((e) => e.id);
    const access = opts.view ?? (await this.d.access.of(caller.identityId, ids));
    const policyIds = new Set<string>();
    for (const id of ids) for (const g of access.services.get(id) ?? []) policyIds.add(g.policyId);
    const checkIds = new Set<string>();
    for (const p of policyIds) for (const c of access.checksOf.get(p) ?? []) checkIds.add(c);
    const catalog = await this.d.checks.get(checkIds);
    const facts = await factsOf(this.d.posture, caller, this.d.clock());
    if (opts.report) {
      for (const c of catalog.values()) {
        const at = nextChangeAt(c, facts);
        if (at !== undefined && at < (opts.report.changesAt ?? Infinity)) opts.report.changesAt = at;
      }
    }
    const configs = await this.d.catalog.configsFor(caller.identityId, ids);
    const wanted = choice === 'all' ? 'all' : await this.d.configTypes.resolve(choice === 'session' ? caller.configTypes : choice.given);
    const typeNames = await this.d.configTypes.names();
    if (versions) {
      for (const c of configs.values()) versions.push(...c.versions);
      for (const c of catalog.values()) versions.push(`${c.id}@${c.updatedAt}`);
    }
    const made = new Map<string, PolicyPostureQueries>();
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
        configs: own.ids,
        permissions: [...new Set(grants.map((g) => g.type))].sort(),
        config,
        postureQueries: policyPostureQueries(grants, access.checksOf, catalog, facts, made),
      };
    });
  }
}
