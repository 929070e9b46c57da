// Access views: which services an identity may dial or bind, and through which service policies
// (with their posture checks), from the policy links — an indexed join per identity, kept in memory
// while the view generations hold.
import { sql, type Expression, type SqlBool } from 'kysely';
import { policySpecOf, roleListOf } from '../../resources/relations.js';
import type { Store } from '../../store/store.js';
import { BoundedMap } from '../../kernel/bounded-map.js';
import type { Cache } from '../../kernel/caches.js';
import type { Change } from '../../kernel/changes.js';
import { relationOf, type PolicyType } from '../related.js';
import type { ViewGenerations } from './view-generations.js';

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

/** The link tables of service policies, which decide what a caller may dial or bind. */
const SERVICE_POLICY_LINKS = {
  policies: policySpecOf('service-policies'),
  identities: roleListOf('service-policies', 'identities'),
  services: roleListOf('service-policies', 'services'),
  postureChecks: roleListOf('service-policies', 'posture-checks'),
};

const servicesOfIdentity = relationOf('identities', 'services');

/** Code-unit order: the same in every locale. */
export function compareText(a: string, b: string): number {
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
    return servicesOfIdentity.scope(identityId);
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
    const { identities: i, services: s, policies: p } = SERVICE_POLICY_LINKS;
    const restricted =
      serviceIds && serviceIds.length <= MAX_RESTRICTED_LOAD ? sql` and ${sql.ref(`s.${s.linkColumn}`)} in (${sql.join([...serviceIds])})` : sql``;
    const { rows } = await sql<{ policy_id: string; type: string; service_id: string }>`
      select ${sql.ref('i.policy_id')} as policy_id, ${sql.ref('p.type')} as type, ${sql.ref(`s.${s.linkColumn}`)} as service_id
      from ${sql.table(i.linkTable)} as i
      join ${sql.table(p.table)} as p on ${sql.ref('p.id')} = ${sql.ref('i.policy_id')}
      join ${sql.table(s.linkTable)} as s on ${sql.ref('s.policy_id')} = ${sql.ref('i.policy_id')}${restricted}
      where ${sql.ref(`i.${i.linkColumn}`)} = ${identityId}`.execute(db);
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
      const checks = SERVICE_POLICY_LINKS.postureChecks;
      const links = await db
        .selectFrom(checks.linkTable)
        .select(['policy_id', `${checks.linkColumn} as check_id`])
        .where('policy_id', 'in', [...policies])
        .execute();
      for (const l of links) {
        const list = checksOf.get(String(l.policy_id)) ?? [];
        list.push(String(l.check_id));
        checksOf.set(String(l.policy_id), list);
      }
      for (const list of checksOf.values()) list.sort();
    }
    return { services, checksOf };
  }
}
