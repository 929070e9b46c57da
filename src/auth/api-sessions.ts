// Legacy API sessions: opaque tokens stored only as hashes, resolved from memory on the hot path,
// with a sliding expiry. Activity is recorded in memory and written in batches; a sweep removes
// expired sessions. The sessions kept in memory are a cache like any other: a change of a session
// drops it (the next request reads it again) unless the write was this process's own and its copy
// already holds what it stored (MFA passed, activity written); activity not yet written is kept
// apart from the cache, so dropping the cache never loses it.
import { iso, type Clock } from '../clock.js';
import { newUuid } from '../ids.js';
import { BoundedMap } from '../kernel/bounded-map.js';
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import type { Kernel, WriteContext } from '../kernel/kernel.js';
import type { Repository } from '../store/repository.js';
import type { EntityOf } from '../resources/index.js';
import type { Store } from '../store/store.js';
import { hashToken, newToken } from './tokens.js';

export interface ApiSession {
  id: string;
  tokenHash: string;
  identityId: string;
  authenticatorId: string | null;
  authMethod: string;
  configTypes: string[];
  ipAddress: string | null;
  createdAt: number;
  lastActivityAt: number;
  /** lastActivityAt as last written to the store. */
  storedActivityAt: number;
  isMfaRequired: boolean;
  isMfaComplete: boolean;
  /** When the secondary factor was last given (ms), or null: what MFA posture checks time out from. */
  mfaPassedAt: number | null;
  isCertExtendable: boolean;
  improperClientCertChain: boolean;
  tags: Record<string, string | boolean | null>;
}

export type NewApiSession = Pick<
  ApiSession,
  'identityId' | 'authenticatorId' | 'authMethod' | 'configTypes' | 'ipAddress' | 'isMfaRequired' | 'isCertExtendable'
> &
  Partial<Pick<ApiSession, 'improperClientCertChain'>>;

/** Sessions kept in memory at most; the least recently used are read from the store again. */
export const MAX_CACHED_API_SESSIONS = 200_000;

export class ApiSessions implements Cache {
  readonly name = 'api-sessions';
  private readonly byId: BoundedMap<string, ApiSession>;
  /** Token hash → session id, for the sessions kept. */
  private readonly byHash = new Map<string, string>();
  /** Activity not yet written to the store: id → the latest request's time (and its identity). */
  private readonly activity = new Map<string, { at: number; identityId: string }>();
  /**
   * Sessions whose kept copy holds what this process's own write stored (MFA passed, activity), until
   * that write delivers its change: that copy is kept again rather than read back.
   */
  private readonly written = new Map<string, ApiSession>();
  /** Sessions something else keeps alive past their idle timeout (an OIDC refresh grant), id → until. */
  private readonly holds = new Map<string, number>();
  // Stryker: clearing something that is not a timer does nothing, so a stray entry here is not seen.
  private timers: NodeJS.Timeout[] = [];
  private readonly store: Store;
  private readonly repo: Repository<EntityOf<'api-sessions'>>;

  constructor(
    private readonly kernel: Kernel,
    private readonly clock: Clock,
    /** Idle time after which a session expires, ms. */
    readonly timeout: number,
    maxCached = MAX_CACHED_API_SESSIONS,
  ) {
    this.store = kernel.store;
    this.repo = kernel.repo('api-sessions');
    this.byId = new BoundedMap<string, ApiSession>({
      maxEntries: maxCached,
      onDrop: (id, s) => {
        // Stryker: a token hash names one session only, so the test is a guard; without it the same entry goes.
        if (this.byHash.get(s.tokenHash) === id) this.byHash.delete(s.tokenHash);
      },
    });
  }

  expiresAt(s: ApiSession): number {
    return this.expiryOf(s.id, s.lastActivityAt);
  }

  /**
   * When the session `id`, last active at `lastActivityAt`, expires: its idle timeout, or later while
   * something holds it. What every answer about a session says, so it ends when they say it does.
   */
  expiryOf(id: string, lastActivityAt: number): number {
    const idle = lastActivityAt + this.timeout;
    const held = this.holds.get(id);
    // Stryker: undefined > idle is false too, and when held equals idle either answer is the same.
    return held !== undefined && held > idle ? held : idle;
  }

  /**
   * Keeps a session alive until `until` whatever its activity: an OIDC session lives as long as its
   * refresh grant, one without a grant until its access token expires. Held in memory only: after a
   * restart the provider holds again the sessions of live grants; one without a grant is not told
   * apart from a legacy session in the store and then expires when idle, as a legacy session does.
   */
  hold(id: string, until: number): void {
    this.holds.set(id, until);
  }

  /**
   * hold, for a session that may have been deleted since the caller last read it: one no longer
   * stored is not held (its hold would never be released). Held first, then looked for: a delete
   * that commits after the look drops the hold itself. Kept in memory means stored (a delete drops
   * it from memory as it drops the hold); only one not kept is looked for in the store.
   */
  async holdIfStored(id: string, until: number): Promise<void> {
    this.holds.set(id, until);
    if (this.byId.peek(id)) return;
    if (!(await this.repo.exists(this.store.db, id))) this.holds.delete(id);
  }

  release(id: string): void {
    this.holds.delete(id);
  }

  /**
   * Creates a session; answers it with the one-time visible token. `guard` runs first in the write
   * that stores it and throws to refuse: what the login checked before, read again where no other
   * write can change it before the session exists.
   */
  async create(values: NewApiSession, guard?: (ctx: WriteContext) => Promise<void>): Promise<{ session: ApiSession; token: string }> {
    // Dated before the write waits its turn: a revocation committing meanwhile still names it.
    const now = this.clock();
    return this.kernel.write(async (ctx) => {
      await guard?.(ctx);
      return this.createIn(ctx, values, now);
    });
  }

  /**
   * create inside a write of the caller's (the code exchange, with its MFA and refresh grant), so
   * all of it commits together or none does.
   */
  async createIn(ctx: WriteContext, values: NewApiSession, now = this.clock()): Promise<{ session: ApiSession; token: string }> {
    const token = newToken(now);
    const session: ApiSession = {
      ...values,
      improperClientCertChain: values.improperClientCertChain === true,
      id: newUuid(now),
      tokenHash: hashToken(token),
      createdAt: now,
      lastActivityAt: now,
      storedActivityAt: now,
      isMfaComplete: false,
      mfaPassedAt: null,
      tags: {},
    };
    const row = {
      id: session.id,
      createdAt: iso(now),
      updatedAt: iso(now),
      tags: {},
      tokenHash: session.tokenHash,
      identityId: session.identityId,
      authenticatorId: session.authenticatorId,
      authMethod: session.authMethod,
      configTypes: session.configTypes,
      ipAddress: session.ipAddress,
      lastActivityAt: iso(now),
      isMfaRequired: session.isMfaRequired,
      isMfaComplete: false,
      isCertExtendable: session.isCertExtendable,
      improperClientCertChain: session.improperClientCertChain,
    };
    await ctx.insert('api-sessions', row);
    ctx.afterCommit(() => this.remember(session));
    return { session, token };
  }

  /** The live session of a token, or undefined when unknown or expired. */
  async resolve(token: string): Promise<ApiSession | undefined> {
    const tokenHash = hashToken(token);
    const id = this.byHash.get(tokenHash);
    // Stryker: the cache holds no undefined key either; the test narrows the type.
    let session = id === undefined ? undefined : this.byId.get(id);
    if (!session) {
      const seen = this.byId.drops;
      const stored = await this.repo.findBy(this.store.db, 'tokenHash', tokenHash);
      if (!stored) return undefined;
      session = this.fromEntity(stored);
      this.remember(session, seen);
    }
    if (this.clock() >= this.expiresAt(session)) {
      await this.delete(session.id);
      return undefined;
    }
    return session;
  }

  /** Counts a request as activity: the expiry slides; the store learns of it in the next batch. */
  touch(session: ApiSession): void {
    session.lastActivityAt = Math.max(session.lastActivityAt, this.clock());
    if (session.lastActivityAt === session.storedActivityAt) return;
    const known = this.activity.get(session.id);
    // Stryker: lastActivityAt only grows with the clock, so no time recorded is later than it; an equal
    // one is set to itself.
    if (!known || known.at < session.lastActivityAt) this.activity.set(session.id, { at: session.lastActivityAt, identityId: session.identityId });
  }

  /**
   * The session's secondary factor was given at `at` (now, unless it was given before the session
   * was made: an OIDC login's code), again when a posture check asks for it anew.
   */
  async setMfaComplete(session: ApiSession, at = this.clock()): Promise<void> {
    await this.kernel.write((ctx) => this.mfaCompleteIn(ctx, session, at));
  }

  /** setMfaComplete inside a write of the caller's (the one taking the code), so both commit together. */
  async mfaCompleteIn(ctx: WriteContext, session: ApiSession, at = this.clock()): Promise<void> {
    await ctx.update('api-sessions', session.id, { isMfaComplete: true, mfaPassedAt: iso(at), updatedAt: ctx.now }, session.identityId);
    ctx.afterCommit(() => {
      session.isMfaComplete = true;
      session.mfaPassedAt = at;
      // A session whose row is gone is no longer kept either, so this keeps nothing for it.
      this.keepOnChange(session.id, session);
    });
  }

  /** The session with this id from memory, else from the store; undefined when there is none. */
  async load(id: string): Promise<ApiSession | undefined> {
    const cached = this.byId.get(id);
    if (cached) return cached;
    const seen = this.byId.drops;
    const stored = await this.repo.get(this.store.db, id);
    if (!stored) return undefined;
    const session = this.fromEntity(stored);
    this.remember(session, seen);
    return session;
  }

  /** Cached state of a session by id (the stored row may be older). */
  cached(id: string): ApiSession | undefined {
    return this.byId.peek(id);
  }

  /** The last activity of a session: what memory knows, else what the store holds (`stored`, ms). */
  lastActivityOf(id: string, stored: number): number {
    return Math.max(stored, this.byId.peek(id)?.lastActivityAt ?? stored, this.activity.get(id)?.at ?? stored);
  }

  async delete(id: string): Promise<boolean> {
    this.forget(id);
    return this.kernel.write(async (ctx) => {
      const row = await ctx.tx.selectFrom(this.repo.table).select('identity_id').where('id', '=', id).executeTakeFirst();
      return row !== undefined && (await ctx.remove('api-sessions', id, String(row.identity_id)));
    });
  }

  /** Forgets sessions the store no longer has (deleted with their identity, or by another path). */
  forget(id: string): void {
    this.byId.delete(id);
    this.holds.delete(id);
    this.activity.delete(id);
  }

  forgetIdentity(identityId: string): void {
    this.byId.deleteWhere((s) => s.identityId === identityId);
    for (const [id, a] of this.activity) if (a.identityId === identityId) this.forget(id);
  }

  onChange(c: Change): void {
    if (c.collection === 'api-sessions') {
      const written = this.written.get(c.id);
      this.written.delete(c.id);
      // A changed session is read again when next used, unless this change is the one its copy took
      // as it was written: then that copy is kept (again; a read under way is not). A deleted one is
      // gone with what memory held of it.
      if (c.kind === 'delete') this.forget(c.id);
      else if (c.kind === 'update') {
        this.byId.delete(c.id);
        if (written) this.remember(written);
      }
    } else if (c.collection === 'identities' && c.kind === 'delete') {
      this.forgetIdentity(c.id);
    }
  }

  /** Drops the sessions kept; activity not yet written and holds are not a copy of the store and stay. */
  reset(): void {
    this.byId.clear();
    this.written.clear();
  }

  /** Writes recorded activity in one transaction. */
  async flush(): Promise<number> {
    const dirty = [...this.activity].map(([id, a]) => ({ id, ...a }));
    // Stryker: an empty write changes nothing; the return spares a transaction.
    if (dirty.length === 0) return 0;
    await this.kernel.write(async (ctx) => {
      for (const d of dirty) {
        await ctx.update('api-sessions', d.id, { lastActivityAt: iso(d.at) }, d.identityId);
        // A kept copy already knows this activity (or later). One whose row is gone is not kept.
        ctx.afterCommit(() => this.keepOnChange(d.id));
      }
    });
    for (const d of dirty) {
      if (this.activity.get(d.id)?.at === d.at) this.activity.delete(d.id);
      const s = this.byId.peek(d.id);
      // Stryker: only this process writes activity, so what a kept session knows as stored is never
      // later than what was just written; an equal one is set to itself.
      if (s && s.storedActivityAt < d.at) s.storedActivityAt = d.at;
    }
    return dirty.length;
  }

  /** Removes expired sessions from memory and the store. */
  async sweep(): Promise<number> {
    await this.flush();
    const now = this.clock();
    const cutoff = iso(now - this.timeout);
    const idle = await this.store.db
      .selectFrom(this.repo.table)
      .select(['id', 'identity_id'])
      .where('last_activity_at', '<=', cutoff)
      .execute();
    // Held sessions and those active since the flush stay.
    const expired = idle.filter(({ id }) => !((this.holds.get(id as string) ?? 0) > now) && !((this.activity.get(id as string)?.at ?? 0) > now - this.timeout));
    // Stryker: with nothing expired the loop below removes nothing; the return says so sooner.
    if (expired.length === 0) return 0;
    let removed = 0;
    // Stryker: batches bound the parameters of one statement; a batch of every id, or an empty one
    // past the end (SQLite takes `in ()`), removes the same sessions, which only thousands would show.
    for (let i = 0; i < expired.length; i += 500) {
      const ids = expired.slice(i, i + 500).map(({ id }) => id as string);
      removed += await this.kernel.write(async (ctx) => {
        const gone = await ctx.tx
          .deleteFrom(this.repo.table)
          .where('id', 'in', ids)
          .where('last_activity_at', '<=', cutoff)
          .returning(['id', 'identity_id'])
          .execute();
        for (const r of gone) ctx.changed({ collection: 'api-sessions', kind: 'delete', id: String(r.id), ownerId: String(r.identity_id) });
        return gone.length;
      });
    }
    return removed;
  }

  /** Starts the periodic flush and sweep; timers never keep the process alive. */
  start(flushEveryMs = 5_000, sweepEveryMs = 60_000): void {
    const run = (fn: () => Promise<number>) => () => void fn().catch(() => undefined);
    this.timers = [setInterval(run(() => this.flush()), flushEveryMs), setInterval(run(() => this.sweep()), sweepEveryMs)];
    for (const t of this.timers) t.unref();
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    // Stryker: as for the field, a stray entry is never a timer that runs.
    this.timers = [];
    await this.flush();
  }

  /**
   * As a write that updated session `id` commits: its kept copy, which holds what the write stored,
   * stays when the write's change arrives. Only that copy (`expected`, when given): one dropped or
   * replaced meanwhile (by an earlier write's change, or a read) is left to the change.
   */
  private keepOnChange(id: string, expected?: ApiSession): void {
    const kept = this.byId.peek(id);
    // Stryker: without `kept &&` an absent copy is noted, and puts nothing back.
    if (kept && (expected === undefined || kept === expected)) this.written.set(id, kept);
  }

  /** Keeps a session; one read from the store is kept only if nothing was dropped since `seen`. */
  private remember(s: ApiSession, seen?: number): void {
    const kept = seen === undefined ? this.byId.set(s.id, s) : this.byId.setIfUnchanged(s.id, s, seen);
    if (kept) this.byHash.set(s.tokenHash, s.id);
  }

  private fromEntity(e: EntityOf<'api-sessions'>): ApiSession {
    const stored = Date.parse(e.lastActivityAt);
    const id = e.id;
    return {
      id,
      tokenHash: e.tokenHash,
      identityId: e.identityId,
      authenticatorId: e.authenticatorId ?? null,
      authMethod: e.authMethod,
      // Stryker: the store keeps config types NOT NULL; the default is for the type checker.
      configTypes: e.configTypes ?? [],
      ipAddress: e.ipAddress ?? null,
      createdAt: Date.parse(e.createdAt),
      // Activity not yet written counts: it is newer than the store's.
      lastActivityAt: Math.max(stored, this.activity.get(id)?.at ?? stored),
      storedActivityAt: stored,
      isMfaRequired: e.isMfaRequired === true,
      isMfaComplete: e.isMfaComplete === true,
      mfaPassedAt: e.mfaPassedAt ? Date.parse(e.mfaPassedAt) : null,
      isCertExtendable: e.isCertExtendable === true,
      improperClientCertChain: e.improperClientCertChain === true,
      tags: e.tags ?? {},
    };
  }
}
