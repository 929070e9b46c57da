// Revocations in memory, for the bearer-token check on the hot path: one map lookup per check,
// never a query. Loaded from the store at start, kept right by the change feed after each commit
// (a changed revocation is read again); expired revocations stop applying at once and are dropped
// from memory now and then.
import { iso, type Clock } from '../clock.js';
import type { Cache, CacheRegistry } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import type { Kernel } from '../kernel/kernel.js';
import type { Executor } from '../store/store.js';

export type RevocationKind = 'JTI' | 'IDENTITY' | 'API_SESSION';

export const REVOCATION_KINDS: readonly RevocationKind[] = ['JTI', 'IDENTITY', 'API_SESSION'];

/**
 * A revocation as stored: what it revokes, when it took effect (its last write: updatedAt, else
 * createdAt) and until when it matters (null: always).
 */
export interface RevocationRecord {
  id: string;
  type: string;
  createdAt: string;
  updatedAt?: string;
  expiresAt: string | null;
}

interface Entry {
  revokedAtMs: number;
  expiresAtMs: number;
}

/** Reads one revocation as stored; undefined when there is none. */
export type RevocationReader = (id: string) => Promise<RevocationRecord | undefined>;

const COLUMNS = ['id', 'type', 'created_at', 'updated_at', 'expires_at'] as const;

function recordOf(row: Record<string, unknown>): RevocationRecord {
  return {
    id: String(row.id),
    type: String(row.type),
    createdAt: String(row.created_at),
    updatedAt: String(row.updated_at),
    expiresAt: row.expires_at === null ? null : String(row.expires_at),
  };
}

/** The reader of the revocations table. */
export function storedRevocation(ex: Executor): RevocationReader {
  return async (id) => {
    const row = await ex.selectFrom('revocations').select([...COLUMNS]).where('id', '=', id).executeTakeFirst();
    return row ? recordOf(row) : undefined;
  };
}

/** How often at most expired entries are dropped from memory. */
export const PRUNE_INTERVAL_MS = 60_000;
export const SWEEP_INTERVAL_MS = 10 * 60_000;

/**
 * Not a bounded cache: every revocation that still matters is held (one missing would let a revoked
 * token through), and a reset reads them all again before it replaces what is held.
 */
export class Revocations implements Cache {
  readonly name = 'revocations';
  private byKind = new Map<RevocationKind, Map<string, Entry>>(REVOCATION_KINDS.map((k) => [k, new Map()]));
  private nextPruneAt: number;
  private caches: CacheRegistry | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private kernel: Kernel | undefined;
  /** Per id, the latest change being followed: an older read that ends later is not applied. */
  private readonly following = new Map<string, number>();
  private changeCount = 0;
  /** While a reset reads the store: the ids of the changes followed meanwhile. */
  private touched: Set<string> | undefined;

  /** `read` reads a revocation again when it changes (the store's table once started). */
  constructor(
    private readonly clock: Clock,
    private read?: RevocationReader,
  ) {
    this.nextPruneAt = clock() + PRUNE_INTERVAL_MS;
  }

  /**
   * Follows the change feed, then loads the revocations that still matter. Following first means a
   * revocation committed while loading is never missed.
   */
  async start(deps: { kernel: Kernel; caches: CacheRegistry }): Promise<void> {
    this.stop();
    this.kernel = deps.kernel;
    this.read = storedRevocation(deps.kernel.store.db);
    deps.caches.register(this);
    this.caches = deps.caches;
    this.sweeper = setInterval(() => void this.sweep().catch(() => undefined), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
    await this.reset();
  }

  stop(): void {
    this.caches?.unregister(this);
    this.caches = undefined;
    // Stryker: clearInterval(undefined) does nothing, so the test only says what is meant.
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  onChange(change: Change): Promise<void> {
    return this.apply(change);
  }

  /**
   * Reads every revocation that still matters again, then replaces what is held (checks go on
   * against the held set meanwhile). A change followed during the read is already in the held set,
   * and may be newer than what the read saw: it is carried over.
   */
  async reset(): Promise<void> {
    if (!this.kernel) return;
    const touched = new Set<string>();
    this.touched = touched;
    let next: Map<RevocationKind, Map<string, Entry>>;
    try {
      next = await this.load();
    } finally {
      // Stryker: a set left behind is never read again (the next reset makes its own), so emptying
      // this block changes no answer.
      this.touched = undefined;
    }
    for (const id of touched) {
      for (const kind of REVOCATION_KINDS) {
        const held = this.byKind.get(kind)!.get(id);
        if (held) next.get(kind)!.set(id, held);
        else next.get(kind)!.delete(id);
      }
    }
    this.byKind = next;
  }

  /** Every revocation that still matters, from the store. */
  private async load(): Promise<Map<RevocationKind, Map<string, Entry>>> {
    const rows = await this.kernel!.store.db
      .selectFrom('revocations')
      .select([...COLUMNS])
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', iso(this.clock()))]))
      .execute();
    const byKind = new Map<RevocationKind, Map<string, Entry>>(REVOCATION_KINDS.map((k) => [k, new Map()]));
    for (const row of rows) this.add(recordOf(row), byKind);
    return byKind;
  }

  /**
   * Deletes the revocations that no longer matter from the store (no token they could revoke is
   * still valid); answers how many. Runs every SWEEP_INTERVAL_MS while started.
   */
  async sweep(): Promise<number> {
    if (!this.kernel) return 0;
    const now = iso(this.clock());
    const removed = await this.kernel.write(async (ctx) => {
      const rows = await ctx.tx
        .deleteFrom('revocations')
        .where('expires_at', 'is not', null)
        .where('expires_at', '<=', now)
        .returning('id')
        .execute();
      for (const r of rows) ctx.changed({ collection: 'revocations', kind: 'delete', id: String(r.id) });
      return rows.length;
    });
    this.prune();
    return removed;
  }

  /** Takes in a change of the feed: a revocation written is read again; anything else is ignored. */
  async apply(change: Change): Promise<void> {
    if (change.collection !== 'revocations') return;
    this.touched?.add(change.id);
    // Stryker: counting down gives distinct numbers too, which is all the comparison below needs.
    const n = ++this.changeCount;
    this.following.set(change.id, n);
    try {
      const record = change.kind === 'delete' || !this.read ? undefined : await this.read(change.id);
      if (this.following.get(change.id) !== n) return;
      this.forget(change.id);
      if (record) this.add(record);
    } finally {
      // Stryker: only frees the entry; a later change of the id sets its own number, so keeping it
      // (no block, no delete, or `false`) changes no answer.
      if (this.following.get(change.id) === n) this.following.delete(change.id);
    }
  }

  add(record: RevocationRecord, into = this.byKind): void {
    const map = into.get(record.type as RevocationKind);
    if (!map) return;
    const revokedAtMs = Date.parse(record.updatedAt ?? record.createdAt);
    const expiresAtMs = record.expiresAt === null ? Infinity : Date.parse(record.expiresAt);
    if (Number.isNaN(revokedAtMs) || Number.isNaN(expiresAtMs) || expiresAtMs <= this.clock()) return;
    map.set(record.id, { revokedAtMs, expiresAtMs });
  }

  forget(id: string): void {
    for (const map of this.byKind.values()) map.delete(id);
  }

  /**
   * Whether a token is revoked. JTI: the token with that id, whenever issued. IDENTITY and
   * API_SESSION: tokens of that identity or API session issued no later than the revocation took
   * effect (its last write). A token issued in the same millisecond counts as issued before it;
   * without `issuedAtMs` the token is revoked. (A JWT `iat` has whole seconds: pass the time its
   * login was made instead.)
   */
  isRevoked(kind: RevocationKind, id: string, issuedAtMs?: number): boolean {
    const now = this.clock();
    if (now >= this.nextPruneAt) this.prune(now);
    const entry = this.byKind.get(kind)?.get(id);
    if (!entry || entry.expiresAtMs <= now) return false;
    if (kind === 'JTI') return true;
    return issuedAtMs === undefined || issuedAtMs <= entry.revokedAtMs;
  }

  /** Drops the entries that no longer matter; answers how many. */
  prune(now: number = this.clock()): number {
    let dropped = 0;
    for (const map of this.byKind.values()) {
      for (const [id, entry] of map) {
        if (entry.expiresAtMs <= now) {
          map.delete(id);
          dropped++;
        }
      }
    }
    this.nextPruneAt = now + PRUNE_INTERVAL_MS;
    return dropped;
  }

  /** How many revocations are held in memory. */
  get size(): number {
    let n = 0;
    for (const map of this.byKind.values()) n += map.size;
    return n;
  }
}
