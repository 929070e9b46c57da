// Revocations in memory, for the bearer-token check on the hot path: one map lookup per check,
// never a query. Loaded from the store at start, kept right by the change feed after each commit;
// expired revocations stop applying at once and are dropped from memory now and then.
import { iso, type Clock } from '../clock.js';
import type { Change } from '../domain/changes.js';
import type { Resources } from '../domain/resources.js';

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

/** How often at most expired entries are dropped from memory. */
export const PRUNE_INTERVAL_MS = 60_000;
export const SWEEP_INTERVAL_MS = 10 * 60_000;

export class Revocations {
  private readonly byKind = new Map<RevocationKind, Map<string, Entry>>(REVOCATION_KINDS.map((k) => [k, new Map()]));
  private nextPruneAt: number;
  private unsubscribe: (() => void) | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private resources: Resources | undefined;

  constructor(private readonly clock: Clock) {
    this.nextPruneAt = clock() + PRUNE_INTERVAL_MS;
  }

  /**
   * Follows the change feed, then loads the revocations that still matter. Following first means a
   * revocation committed while loading is never missed.
   */
  async start(resources: Resources): Promise<void> {
    this.stop();
    this.resources = resources;
    this.unsubscribe = resources.changes.subscribe((change) => this.apply(change));
    this.sweeper = setInterval(() => void this.sweep().catch(() => undefined), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
    const rows = await resources.store.db
      .selectFrom('revocations')
      .select(['id', 'type', 'created_at', 'updated_at', 'expires_at'])
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', iso(this.clock()))]))
      .execute();
    for (const row of rows) {
      this.add({
        id: String(row.id),
        type: String(row.type),
        createdAt: String(row.created_at),
        updatedAt: String(row.updated_at),
        expiresAt: row.expires_at === null ? null : String(row.expires_at),
      });
    }
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /**
   * Deletes the revocations that no longer matter from the store (no token they could revoke is
   * still valid); answers how many. Runs every SWEEP_INTERVAL_MS while started.
   */
  async sweep(): Promise<number> {
    if (!this.resources) return 0;
    const result = await this.resources.store.db
      .deleteFrom('revocations')
      .where('expires_at', 'is not', null)
      .where('expires_at', '<=', iso(this.clock()))
      .executeTakeFirst();
    this.prune();
    return Number(result.numDeletedRows);
  }

  /** Takes in a change of the feed; anything but a revocation is ignored. */
  apply(change: Change): void {
    if (change.collection !== 'revocations') return;
    if (change.kind === 'delete') {
      this.forget(change.id);
      return;
    }
    const e = change.entity as Partial<RevocationRecord> | undefined;
    if (!e || typeof e.type !== 'string' || typeof e.createdAt !== 'string') return;
    this.forget(change.id);
    this.add({
      id: change.id,
      type: e.type,
      createdAt: e.createdAt,
      ...(typeof e.updatedAt === 'string' ? { updatedAt: e.updatedAt } : {}),
      expiresAt: e.expiresAt ?? null,
    });
  }

  add(record: RevocationRecord): void {
    const map = this.byKind.get(record.type as RevocationKind);
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
   * effect (its last write). A token issued in the same millisecond counts as issued before it (a
   * JWT `iat` has whole seconds, so pass `iat * 1000` and the doubt goes against the token);
   * without `issuedAtMs` the token is revoked.
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
