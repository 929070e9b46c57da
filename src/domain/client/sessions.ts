// Sessions (behaviour.md §8): an identity's Dial or Bind of one service inside one API session.
// Creating one checks, in this order: the caller may use the service (else 404), the type is granted
// (400), the posture of at least one granting policy of that type passes (409 INVALID_POSTURE, and
// the refusal is recorded), some edge router serves both (400 NO_EDGE_ROUTERS_AVAILABLE). A repeat
// request of the same API session, service and type answers the existing session. A session lasts
// while `allows` holds (session-enforcer.ts).
//
// The session token is a JWT signed with the controller's current signing key (the OIDC provider's,
// published at /oidc/keys), so a router can check it offline. It is never stored: it is signed when
// first needed and kept in memory.
import { sql, type SqlBool } from 'kysely';
import { Type } from '@sinclair/typebox';
import { ApiError, fieldError, notFound } from '../../errors.js';
import { iso, type Clock } from '../../clock.js';
import { newUuid } from '../../ids.js';
import { entityRef, filterSpec, TagsSchema, type FilterSpec } from '../../resources/kit.js';
import { edgeRouters as edgeRoutersDef } from '../../resources/routers.js';
import { sessions as sessionsDef, type SessionType } from '../../resources/sessions.js';
import { parseCompact, signCompact, verifySignature } from '../../oidc/jws.js';
import type { SigningKeys } from '../../oidc/keys.js';
import type { Issuers } from '../../oidc/issuer.js';
import type { ListQuery, Repository } from '../../store/repository.js';
import type { EntityOf } from '../../resources/index.js';
import type { Store } from '../../store/store.js';
import type { ApiSessions } from '../../auth/api-sessions.js';
import { BoundedMap } from '../../kernel/bounded-map.js';
import type { Cache } from '../../kernel/caches.js';
import type { Change } from '../../kernel/changes.js';
import type { Kernel } from '../../kernel/kernel.js';
import { checkFailureValues, evaluatePolicy, type CheckResult, type PostureCheck, type PostureFacts } from '../../policy/posture.js';
import type { AccessViews } from './access-views.js';
import type { Caller } from './caller.js';
import type { StoredPostureCheck, PostureCheckCatalog } from './catalogs.js';
import { clientEdgeRouter, ClientEdgeRouterSchema, edgeRouterScope, type ClientEdgeRouter } from './edge-routers.js';
import type { PostureFailure, PostureStore } from './posture-store.js';
import { factsOf } from './service-list.js';

/** Edge routers answered with a new session. */
export const SESSION_EDGE_ROUTERS = 25;
/** Sessions kept in memory; beyond it the oldest are read from the store again when asked for. */
const MAX_CACHED_SESSIONS = 200_000;
/** (identity, service) edge router lists kept in memory. */
const MAX_CACHED_ROUTER_LISTS = 100_000;
/** Service names kept for references. */
const MAX_CACHED_SERVICE_NAMES = 50_000;

/** Collections whose changes may alter which edge routers serve an identity and a service. */
const ROUTER_COLLECTIONS: ReadonlySet<string> = new Set(['edge-routers', 'edge-router-policies', 'service-edge-router-policies', 'services']);

/**
 * The edge routers of new sessions, per identity and service, kept until a change that may alter
 * them: any write of an edge router (its online state included), of an edge router or service edge
 * router policy, or of a service; or of the identity (its attributes move its policy links).
 */
class RouterLists {
  private global = 0;
  private readonly identities = new Map<string, number>();
  private readonly cache = new BoundedMap<string, { global: number; identity: number; routers: ClientEdgeRouter[] }>({
    maxEntries: MAX_CACHED_ROUTER_LISTS,
  });

  onChange(c: Change): void {
    if (ROUTER_COLLECTIONS.has(c.collection)) {
      this.global++;
      this.cache.clear();
    } else if (c.collection === 'identities') {
      // A deleted identity's count would stay for good (ids are never reused, so nothing kept
      // under its count is found again).
      if (c.kind === 'delete') this.identities.delete(c.id);
      else this.identities.set(c.id, (this.identities.get(c.id) ?? 0) + 1);
    }
  }

  reset(): void {
    this.global++;
    this.cache.clear();
  }

  /** The kept list, or a reader of it that keeps what it reads (unless a change came meanwhile). */
  async get(identityId: string, serviceId: string, read: () => Promise<ClientEdgeRouter[]>): Promise<ClientEdgeRouter[]> {
    const key = `${identityId}\u0000${serviceId}`;
    const global = this.global;
    const identity = this.identities.get(identityId) ?? 0;
    const hit = this.cache.get(key);
    if (hit && hit.global === global && hit.identity === identity) return hit.routers;
    const routers = await read();
    if (global === this.global && identity === (this.identities.get(identityId) ?? 0)) this.cache.set(key, { global, identity, routers });
    return routers;
  }
}

/** A session as stored. */
export type SessionRecord = EntityOf<'sessions'>;

// ---- sessions ----------------------------------------------------------------------------------------

export const SessionCreateSchema = Type.Object(
  {
    serviceId: Type.String({ minLength: 1, maxLength: 255, description: 'the service to dial or bind' }),
    type: Type.Optional(Type.Union([Type.Literal('Dial'), Type.Literal('Bind'), Type.Literal('Invalid')], { description: 'Dial (default) or Bind' })),
    tags: Type.Optional(Type.Union([TagsSchema, Type.Null()])),
  },
  { additionalProperties: true },
);

export interface SessionCreate {
  serviceId: string;
  type?: 'Dial' | 'Bind' | 'Invalid';
  tags?: Record<string, string | boolean | null> | null;
}

const Ref = Type.Object({
  _links: Type.Record(Type.String(), Type.Object({ href: Type.String() })),
  entity: Type.String(),
  id: Type.String(),
  name: Type.String(),
});

/**
 * A session as answered: with the edge routers its identity may use for its service (the session
 * edge router shape); the token only in the owner's own answers, never in management reads.
 */
export const SessionSchema = Type.Object({
  _links: Type.Record(Type.String(), Type.Object({ href: Type.String() })),
  id: Type.String(),
  createdAt: Type.String(),
  updatedAt: Type.String(),
  tags: Type.Record(Type.String(), Type.Union([Type.String(), Type.Boolean(), Type.Null()])),
  apiSessionId: Type.String(),
  apiSession: Ref,
  identityId: Type.String(),
  identity: Ref,
  serviceId: Type.String(),
  service: Ref,
  type: Type.String(),
  token: Type.Optional(Type.String({ description: 'JWT for the edge routers; only to the session owner' })),
  edgeRouters: Type.Array(ClientEdgeRouterSchema, {
    description: `the edge routers the identity may use for the service now, online first, at most ${SESSION_EDGE_ROUTERS}`,
  }),
});

export const SESSION_FILTER: FilterSpec = filterSpec(sessionsDef);

export interface SessionsDeps {
  store: Store;
  clock: Clock;
  kernel: Kernel;
  repo: Repository<SessionRecord>;
  edgeRouters: Repository<EntityOf<'edge-routers'>>;
  access: AccessViews;
  checks: PostureCheckCatalog;
  posture: PostureStore;
  keys: SigningKeys;
  issuers: Pick<Issuers, 'accepts'>;
  /** The API sessions, whose expiry bounds their sessions' tokens. */
  apiSessions: Pick<ApiSessions, 'load' | 'expiresAt'>;
}

const keyOf = (apiSessionId: string, serviceId: string, type: string) => `${apiSessionId}\u0000${serviceId}\u0000${type}`;

/**
 * Sessions and what their answers need, read through memory: the sessions by id (and by API
 * session, service and type), their signed tokens, service names and edge router lists, each
 * dropped by the changes that move it.
 */
export class Sessions implements Cache {
  readonly name = 'sessions';
  private readonly byId = new BoundedMap<string, SessionRecord>({
    maxEntries: MAX_CACHED_SESSIONS,
    onDrop: (id, s) => {
      this.tokens.delete(id);
      const key = keyOf(s.apiSessionId, s.serviceId, s.type);
      if (this.byKey.get(key) === id) this.byKey.delete(key);
      const ids = this.byApiSession.get(s.apiSessionId);
      ids?.delete(id);
      if (ids?.size === 0) this.byApiSession.delete(s.apiSessionId);
    },
  });
  private readonly byKey = new Map<string, string>();
  /** API session id → ids of its cached sessions (an API session's end drops them without a scan). */
  private readonly byApiSession = new Map<string, Set<string>>();
  /** Session id → its token as last signed, with the `exp` and issuer it was signed for. */
  private readonly tokens = new BoundedMap<string, { token: string; exp: number; issuer: string }>({ maxEntries: MAX_CACHED_SESSIONS });
  /** Service names for references, dropped when a service changes. */
  private readonly serviceNames = new BoundedMap<string, string>({ maxEntries: MAX_CACHED_SERVICE_NAMES });
  private readonly routerLists = new RouterLists();

  constructor(private readonly d: SessionsDeps) {
    // Tokens signed with a key that is rotated out would no longer verify: sign again when asked.
    d.keys.onChange(() => this.tokens.clear());
  }

  onChange(c: Change): void {
    this.routerLists.onChange(c);
    if (c.collection === 'api-sessions' && c.kind === 'delete') {
      for (const id of [...(this.byApiSession.get(c.id) ?? [])]) this.forget(id);
    } else if (c.collection === 'identities' && c.kind === 'delete') this.forgetWhere((s) => s.identityId === c.id);
    else if (c.collection === 'services' && c.kind !== 'create') {
      this.serviceNames.delete(c.id);
      if (c.kind === 'delete') this.forgetWhere((s) => s.serviceId === c.id);
    } else if (c.collection === 'sessions' && c.kind !== 'create') this.forget(c.id);
  }

  reset(): void {
    this.byId.clear();
    this.tokens.clear();
    this.serviceNames.clear();
    this.routerLists.reset();
  }

  // ---- create ------------------------------------------------------------------------------------

  /** Creates (or answers the existing) session of the caller's API session for a service and type. */
  async create(
    caller: Caller,
    input: SessionCreate,
    issuer: string,
  ): Promise<{ session: SessionRecord; token: string }> {
    const { serviceId } = input;
    const type = input.type ?? 'Dial';
    const { grants, checksOf } = await this.d.access.grantsFor(caller.identityId, serviceId);
    if (grants.length === 0) throw notFound('service', serviceId);
    if (type !== 'Dial' && type !== 'Bind') throw fieldError('type', 'must be Dial or Bind', type);
    const granting = grants.filter((g) => g.type === type);
    if (granting.length === 0) throw fieldError('type', `no service policy lets the caller ${type} this service`, type);

    const now = this.d.clock();
    const { evaluated, facts } = await this.posture(caller, granting, checksOf, now);
    if (!evaluated.some((e) => e.isPassing)) await this.refuse(caller, serviceId, type, evaluated, facts);

    if ((await this.edgeRoutersOf(caller.identityId, serviceId)).length === 0) {
      throw new ApiError('NO_EDGE_ROUTERS_AVAILABLE', `no edge router lets the caller reach the service ${serviceId}`);
    }
    const session = await this.findOrInsert(caller, serviceId, type, input.tags ?? {}, now);
    return { session, token: await this.tokenOf(session, issuer) };
  }

  /**
   * Whether the caller may still hold a session of the service and type: a service policy grants
   * that type, and the posture checks of one granting policy pass (what `create` checks, edge
   * routers aside: they are the routers' to find).
   */
  async allows(caller: Caller, serviceId: string, type: string): Promise<boolean> {
    const { grants, checksOf } = await this.d.access.grantsFor(caller.identityId, serviceId);
    const granting = grants.filter((g) => g.type === type);
    if (granting.length === 0) return false;
    const { evaluated } = await this.posture(caller, granting, checksOf, this.d.clock());
    return evaluated.some((e) => e.isPassing);
  }

  /** The posture checks of each granting policy, evaluated with the caller's posture now. */
  private async posture(caller: Caller, granting: readonly { policyId: string }[], checksOf: ReadonlyMap<string, string[]>, now: number) {
    const catalog: ReadonlyMap<string, PostureCheck> = await this.d.checks.get(granting.flatMap((g) => checksOf.get(g.policyId) ?? []));
    const facts = await factsOf(this.d.posture, caller, now);
    const evaluated = granting.map((g) => {
      const checks = (checksOf.get(g.policyId) ?? []).map((id) => catalog.get(id)).filter((c): c is StoredPostureCheck => c !== undefined);
      return { policyId: g.policyId, checks, ...evaluatePolicy(checks, facts) };
    });
    return { evaluated, facts };
  }

  /**
   * Records the refusal, each failing check with what it saw, and throws 409 INVALID_POSTURE with every
   * check of every granting policy.
   */
  private async refuse(
    caller: Caller,
    serviceId: string,
    type: SessionType,
    evaluated: { policyId: string; checks: PostureCheck[]; results: CheckResult[] }[],
    facts: PostureFacts,
  ): Promise<never> {
    const db = this.d.store.db;
    const policyNames = new Map(
      (await db.selectFrom('service_policies').select(['id', 'name']).where('id', 'in', evaluated.map((e) => e.policyId)).execute()).map((r) => [
        String(r.id),
        String(r.name),
      ]),
    );
    const failure: PostureFailure = {
      apiSessionId: caller.apiSessionId,
      serviceId,
      serviceName: await this.serviceName(serviceId),
      sessionType: type,
      when: iso(facts.now),
      policyFailures: evaluated.map((e) => ({
        policyId: e.policyId,
        policyName: policyNames.get(e.policyId) ?? '',
        checks: e.checks
          .filter((_c, i) => !e.results[i]!.isPassing)
          // what each failing check saw, as the facts it was evaluated with
          .map((c) => ({ postureCheckId: c.id, postureCheckName: c.name, postureCheckType: String(c.typeId), ...checkFailureValues(c, facts) })),
      })),
    };
    await this.d.posture.recordFailure(caller.identityId, failure);
    throw new ApiError('INVALID_POSTURE', `the posture checks of every service policy granting ${type} on this service fail`, {
      message: 'posture checks failed',
      data: Object.fromEntries(evaluated.map((e) => [e.policyId, e.results])),
    });
  }

  private async findOrInsert(
    caller: Caller,
    serviceId: string,
    type: SessionType,
    tags: Record<string, string | boolean | null>,
    now: number,
  ): Promise<SessionRecord> {
    const key = keyOf(caller.apiSessionId, serviceId, type);
    const known = this.byId.get(this.byKey.get(key) ?? '');
    if (known) return known;
    const existing = await this.findByKey(caller.apiSessionId, serviceId, type);
    if (existing) return existing;
    const session: SessionRecord = {
      id: newUuid(now),
      createdAt: iso(now),
      updatedAt: iso(now),
      tags,
      apiSessionId: caller.apiSessionId,
      identityId: caller.identityId,
      serviceId,
      type,
    };
    try {
      await this.d.kernel.write(async (ctx) => {
        await ctx.insert('sessions', { ...session });
        ctx.afterCommit(() => this.remember(session));
      });
    } catch (err) {
      const dialect = this.d.store.dialect;
      if (dialect.uniqueViolation(err, this.d.repo.table) !== undefined) {
        // A concurrent request of the same API session made it first.
        const raced = await this.findByKey(caller.apiSessionId, serviceId, type);
        if (raced) return raced;
      }
      // The service was deleted, or the API session ended, meanwhile.
      if (dialect.isForeignKeyViolation(err)) {
        const service = await this.d.store.db.selectFrom('services').select('id').where('id', '=', serviceId).executeTakeFirst();
        if (!service) throw notFound('service', serviceId);
        throw new ApiError('UNAUTHORIZED', 'the API session has ended');
      }
      throw err;
    }
    return session;
  }

  private async findByKey(apiSessionId: string, serviceId: string, type: string): Promise<SessionRecord | undefined> {
    const seen = this.byId.drops;
    const row = await this.d.store.db
      .selectFrom(this.d.repo.table)
      .selectAll()
      .where('api_session_id', '=', apiSessionId)
      .where('service_id', '=', serviceId)
      .where('type', '=', type)
      .executeTakeFirst();
    if (!row) return undefined;
    const s = this.d.repo.fromRow(row);
    this.remember(s, seen);
    return s;
  }

  // ---- tokens ------------------------------------------------------------------------------------

  /**
   * The session's JWT (behaviour.md §8): `sub` service, `jti` session, `ov_asid`, `ov_t: "s"`,
   * `ov_st` Dial or Bind, and `exp` the expiry its API session has now. That expiry slides (last
   * activity plus the session timeout, or longer while an OIDC refresh grant holds the session); it
   * is chosen over a fixed lifetime from the configured timeout so a token never outlives its API
   * session as it stood when the token was handed out, and a client that keeps its API session
   * alive gets a current token with every answer that carries one (a new one whenever `exp` moved).
   */
  async tokenOf(s: SessionRecord, issuer: string): Promise<string> {
    const apiSession = await this.d.apiSessions.load(s.apiSessionId);
    const exp = Math.floor((apiSession ? this.d.apiSessions.expiresAt(apiSession) : this.d.clock()) / 1000);
    const cached = this.tokens.get(s.id);
    if (cached && cached.exp === exp && cached.issuer === issuer) return cached.token;
    const key = this.d.keys.current;
    const token = signCompact(key.alg, key.privateKey, key.headers.jwt, {
      iss: issuer,
      sub: s.serviceId,
      jti: s.id,
      iat: Math.floor(Date.parse(s.createdAt) / 1000),
      exp,
      ov_asid: s.apiSessionId,
      ov_t: 's',
      ov_st: s.type,
    });
    this.tokens.set(s.id, { token, exp, issuer });
    return token;
  }

  /**
   * Whether a session token names a live session of the caller's identity for the service: signed by
   * a current or previous key of the controller, a session token (`ov_t: "s"`) of this issuer, not
   * expired (a token without `exp` is refused: it would be good forever), and the session exists
   * with that service and API session.
   */
  async verifyToken(caller: Caller, serviceId: string, token: string): Promise<boolean> {
    const parsed = parseCompact(token);
    if (!parsed) return false;
    const key = this.d.keys.get(parsed.header.kid);
    if (!key || key.alg !== parsed.header.alg || !verifySignature(parsed, key.publicKey)) return false;
    const c = parsed.payload;
    if (c.ov_t !== 's' || c.sub !== serviceId || typeof c.jti !== 'string' || !this.d.issuers.accepts(c.iss)) return false;
    if (typeof c.exp !== 'number' || c.exp * 1000 <= this.d.clock()) return false;
    const s = await this.load(c.jti);
    return s !== undefined && s.identityId === caller.identityId && s.serviceId === serviceId && s.apiSessionId === c.ov_asid;
  }

  // ---- reads and deletes -------------------------------------------------------------------------

  /** The session by id, from memory or the store. */
  async load(id: string): Promise<SessionRecord | undefined> {
    const cached = this.byId.get(id);
    if (cached) return cached;
    const seen = this.byId.drops;
    const e = await this.d.repo.get(this.d.store.db, id);
    if (!e) return undefined;
    this.remember(e, seen);
    return e;
  }

  /** A session of the caller's identity; 404 for any other. */
  async own(caller: Caller, id: string): Promise<SessionRecord> {
    const s = await this.load(id);
    if (!s || s.identityId !== caller.identityId) throw notFound('session', id);
    return s;
  }

  /** A page of sessions; `identityId` scopes it to one identity's (before the filter). */
  async list(q: Omit<ListQuery, 'scope'>, identityId?: string): Promise<{ items: SessionRecord[]; total: number }> {
    const scope = identityId === undefined ? undefined : sql<SqlBool>`${sql.ref('sessions.identity_id')} = ${identityId}`;
    const { items, total } = await this.d.repo.list(this.d.store.db, scope ? { ...q, scope } : q);
    return { items, total };
  }

  async get(id: string): Promise<SessionRecord> {
    const s = await this.load(id);
    if (!s) throw notFound('session', id);
    return s;
  }

  async delete(s: SessionRecord): Promise<void> {
    await this.d.kernel.write(async (ctx) => {
      await ctx.remove('sessions', s.id, s.identityId);
    });
  }

  // ---- answers -----------------------------------------------------------------------------------

  /**
   * Sessions as answered, each with the edge routers its identity may use for its service now; a
   * token only where `tokenOf` gives one (the owner's own reads). `known` names an identity whose
   * name needs no lookup (the caller).
   */
  async present(
    list: readonly SessionRecord[],
    tokenOf: (s: SessionRecord) => string | undefined = () => undefined,
    known?: { id: string; name: string },
  ): Promise<Record<string, unknown>[]> {
    const db = this.d.store.db;
    const identityNames = new Map<string, string>(known ? [[known.id, known.name]] : []);
    const identityIds = [...new Set(list.map((s) => s.identityId))].filter((id) => !identityNames.has(id));
    if (identityIds.length > 0) {
      for (const r of await db.selectFrom('identities').select(['id', 'name']).where('id', 'in', identityIds).execute()) {
        identityNames.set(String(r.id), String(r.name));
      }
    }
    const serviceNames = new Map<string, string>();
    for (const id of new Set(list.map((s) => s.serviceId))) serviceNames.set(id, await this.serviceName(id));
    // One router list per identity and service of the page.
    const routers = new Map<string, ClientEdgeRouter[]>();
    const pairKey = (s: SessionRecord) => `${s.identityId}\u0000${s.serviceId}`;
    for (const s of list) {
      if (!routers.has(pairKey(s))) routers.set(pairKey(s), await this.edgeRoutersOf(s.identityId, s.serviceId));
    }
    return list.map((s) => {
      const token = tokenOf(s);
      return {
        _links: { self: { href: `./sessions/${s.id}` }, 'route-path': { href: `./sessions/${s.id}/route-path` } },
        id: s.id,
        createdAt: s.createdAt,
        updatedAt: s.updatedAt,
        tags: s.tags,
        apiSessionId: s.apiSessionId,
        // API sessions have no name: the reference names it by its id.
        apiSession: entityRef('api-sessions', s.apiSessionId, s.apiSessionId),
        identityId: s.identityId,
        identity: entityRef('identities', s.identityId, identityNames.get(s.identityId) ?? ''),
        serviceId: s.serviceId,
        service: entityRef('services', s.serviceId, serviceNames.get(s.serviceId) ?? ''),
        type: s.type,
        ...(token !== undefined ? { token } : {}),
        edgeRouters: routers.get(pairKey(s))!,
      };
    });
  }

  /** The edge routers of a session's answer: up to SESSION_EDGE_ROUTERS, kept until a change moves them. */
  edgeRoutersOf(identityId: string, serviceId: string): Promise<ClientEdgeRouter[]> {
    return this.routerLists.get(identityId, serviceId, () => this.edgeRoutersFor(identityId, serviceId, SESSION_EDGE_ROUTERS));
  }

  /** Up to `limit` edge routers the identity may use for the service: online, enabled and cheap first. */
  private async edgeRoutersFor(identityId: string, serviceId: string, limit: number): Promise<ClientEdgeRouter[]> {
    const rows = await this.d.store.db
      .selectFrom(edgeRoutersDef.table)
      .selectAll()
      .where(edgeRouterScope.forService(identityId, serviceId))
      .orderBy('is_online', 'desc')
      .orderBy('disabled', 'asc')
      .orderBy('cost', 'asc')
      .orderBy('name', 'asc')
      .limit(limit)
      .execute();
    return rows.map((r) => clientEdgeRouter(this.d.edgeRouters.fromRow(r)));
  }

  private async serviceName(id: string): Promise<string> {
    const cached = this.serviceNames.get(id);
    if (cached !== undefined) return cached;
    const seen = this.serviceNames.drops;
    const row = await this.d.store.db.selectFrom('services').select('name').where('id', '=', id).executeTakeFirst();
    const name = row ? String(row.name) : '';
    if (row) this.serviceNames.setIfUnchanged(id, name, seen);
    return name;
  }

  /** Keeps a session; one read from the store is kept only if nothing was dropped since `seen`. */
  private remember(s: SessionRecord, seen?: number): void {
    const kept = seen === undefined ? this.byId.set(s.id, s) : this.byId.setIfUnchanged(s.id, s, seen);
    if (!kept) return;
    this.byKey.set(keyOf(s.apiSessionId, s.serviceId, s.type), s.id);
    let ids = this.byApiSession.get(s.apiSessionId);
    if (!ids) this.byApiSession.set(s.apiSessionId, (ids = new Set()));
    ids.add(s.id);
  }

  private forget(id: string): void {
    this.byId.delete(id);
    this.tokens.delete(id);
  }

  private forgetWhere(test: (s: SessionRecord) => boolean): void {
    this.byId.deleteWhere(test);
  }
}
