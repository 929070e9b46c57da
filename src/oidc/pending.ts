// What callers may leave waiting in memory: pending authorization requests are made by anyone who
// can reach GET /oidc/authorization, so they are bounded per client address, in total (count and
// estimated bytes) and in time; authorization codes likewise, charged to the identity that logged in
// (the "address" of this store is whoever an entry is charged to). Reaching the total never locks
// out a newcomer: room is made at the expense of the holder of the most, and that holder's own new
// entries are the ones refused.
import type { Clock } from '../clock.js';
import { OAuthError } from './errors.js';

export interface PendingLimits {
  /** Entries one holder (a client address, an IPv6 /64; or an identity) may hold at once; beyond it, 429. */
  perAddress: number;
  /** Requests held at once, all addresses together. */
  total: number;
  /** Estimated bytes held at once, all addresses together. */
  totalBytes: number;
}

/**
 * Defaults. 100 per address is far above what one user or a NAT'd office leaves waiting in ten
 * minutes (a finished login ends its request). 20,000 requests or 32 MiB in total: a request that
 * spends every parameter bound (redirect_uri and state 2,048 characters, nonce 512, 100 config
 * types of 100) is estimated at about 30 KB, a usual one at about 1 KB.
 */
export const PENDING_LIMITS: Readonly<PendingLimits> = { perAddress: 100, total: 20_000, totalBytes: 32 * 1024 * 1024 };

/** A request could not be kept; the caller may try again after `retryAfterSeconds`. */
export class PendingRefused extends Error {
  constructor(
    /** `address`: the caller's address is at its bound; `total`: the store is full and the caller holds the most. */
    readonly reason: 'address' | 'total',
    readonly retryAfterSeconds: number,
  ) {
    super(reason === 'address' ? 'too many pending requests from this address' : 'too many pending requests');
    this.name = 'PendingRefused';
  }
}

/** What a refusal is told as, for each reason: the OAuth description and status. */
export type RefusalAnswers = Record<PendingRefused['reason'], { description: string; status: number }>;

/**
 * Adds to `store` as PendingStore.add does, a refusal answered as an OAuth `temporarily_unavailable`
 * with Retry-After, in the words and status given for its reason.
 */
export function addOrRefuse<T>(store: PendingStore<T>, answers: RefusalAnswers, ...entry: Parameters<PendingStore<T>['add']>): void {
  try {
    store.add(...entry);
  } catch (err) {
    // Stryker: the store throws nothing else; a guard only.
    if (!(err instanceof PendingRefused)) throw err;
    const { description, status } = answers[err.reason];
    throw new OAuthError('temporarily_unavailable', description, status, { 'retry-after': String(err.retryAfterSeconds) });
  }
}

interface Entry<T> {
  id: string;
  value: T;
  address: string;
  bytes: number;
  expiresAt: number;
}

/**
 * Pending values by id, each charged to a client address. Entries are kept in the order they were
 * added; all share one lifetime, so that is also the order they expire in and the expired ones are
 * dropped from the front on every add (a full `sweep` covers a clock that stepped back).
 */
export class PendingStore<T> {
  private readonly entries = new Map<string, Entry<T>>();
  /** Address → its entries, oldest first. */
  private readonly byAddress = new Map<string, Map<string, Entry<T>>>();
  /** holders[n]: the addresses holding exactly n entries (n ≥ 1); finds the one holding the most in O(1). */
  private readonly holders: Set<string>[];
  private most = 0;
  private heldBytes = 0;

  constructor(
    private readonly clock: Clock,
    readonly limits: Readonly<PendingLimits> = PENDING_LIMITS,
  ) {
    this.holders = Array.from({ length: limits.perAddress + 1 }, () => new Set<string>());
  }

  get size(): number {
    return this.entries.size;
  }

  get bytes(): number {
    return this.heldBytes;
  }

  /** How many entries `address` holds. */
  heldBy(address: string): number {
    return this.byAddress.get(address)?.size ?? 0;
  }

  /**
   * Keeps `value` until `expiresAt`, charged to `address`. Throws PendingRefused when the address is
   * at its bound, or when the store is full and the address holds at least as many as any other;
   * otherwise the oldest entries of the address holding the most make room.
   */
  add(id: string, address: string, value: T, bytes: number, expiresAt: number): void {
    this.dropExpired();
    const own = this.byAddress.get(address);
    if ((own?.size ?? 0) >= this.limits.perAddress) throw new PendingRefused('address', this.retryAfter(own));
    if (!this.makeRoom(address, 1, bytes)) throw new PendingRefused('total', this.retryAfter(own));
    const entry: Entry<T> = { id, value, address, bytes, expiresAt };
    this.entries.set(id, entry);
    const mine = own ?? new Map<string, Entry<T>>();
    // Stryker: when `own` exists it is `mine`, and setting it again changes nothing.
    if (!own) this.byAddress.set(address, mine);
    mine.set(id, entry);
    this.heldBytes += bytes;
    this.moveHolder(address, mine.size - 1, mine.size);
  }

  /** The live value with this id (an expired one is dropped). */
  get(id: string): T | undefined {
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    if (this.clock() >= entry.expiresAt) {
      this.remove(entry);
      return undefined;
    }
    return entry.value;
  }

  /**
   * The value with this id now takes `bytes`. Growth beyond the total makes room like an add does,
   * from the oldest entries of the address holding the most (the grower's own others when that is
   * the grower); the entry itself stays.
   */
  resize(id: string, bytes: number): void {
    const entry = this.entries.get(id);
    if (!entry) return;
    this.heldBytes += bytes - entry.bytes;
    entry.bytes = bytes;
    this.makeRoom(entry.address, 0, 0, entry);
  }

  delete(id: string): void {
    const entry = this.entries.get(id);
    if (entry) this.remove(entry);
  }

  /** Drops every expired entry. */
  sweep(): void {
    const now = this.clock();
    for (const entry of this.entries.values()) if (now >= entry.expiresAt) this.remove(entry);
  }

  /** Drops expired entries from the front (the oldest), up to the first live one. */
  private dropExpired(): void {
    const now = this.clock();
    for (const entry of this.entries.values()) {
      if (now < entry.expiresAt) break;
      this.remove(entry);
    }
  }

  /**
   * Evicts until `extraCount` more entries of `extraBytes` fit. Answers false, evicting nothing
   * more, when `address` would have to give way to itself: it holds at least as many as any other
   * (for a resize, `keep` is its one entry that stays; its other entries go first).
   */
  private makeRoom(address: string, extraCount: number, extraBytes: number, keep?: Entry<T>): boolean {
    while (this.entries.size + extraCount > this.limits.total || this.heldBytes + extraBytes > this.limits.totalBytes) {
      const held = this.heldBy(address);
      let victim: Entry<T> | undefined;
      if (held < this.most) {
        const [heaviest] = this.holders[this.most]!;
        victim = this.byAddress.get(heaviest!)!.values().next().value;
      } else if (keep) {
        for (const entry of this.byAddress.get(address)!.values()) if (entry !== keep) { victim = entry; break; }
      }
      if (!victim) return false;
      this.remove(victim);
    }
    return true;
  }

  private remove(entry: Entry<T>): void {
    if (!this.entries.delete(entry.id)) return;
    this.heldBytes -= entry.bytes;
    const mine = this.byAddress.get(entry.address)!;
    mine.delete(entry.id);
    if (mine.size === 0) this.byAddress.delete(entry.address);
    this.moveHolder(entry.address, mine.size + 1, mine.size);
  }

  private moveHolder(address: string, from: number, to: number): void {
    // Stryker: holders[0] is never read (`most` is above 0 whenever it is used), so touching it for
    // n = 0 changes nothing; neither does setting `most` to its own value, nor letting it fall to -1
    // on an empty store (nothing held is below either, and the next add sets it).
    if (from > 0) this.holders[from]!.delete(address);
    if (to > 0) this.holders[to]!.add(address);
    if (to > this.most) this.most = to;
    while (this.most > 0 && this.holders[this.most]!.size === 0) this.most--;
  }

  /** Seconds until the oldest entry of an address expires (and with it, room for one more). */
  private retryAfter(own: Map<string, Entry<T>> | undefined): number {
    const oldest = own?.values().next().value;
    if (!oldest) return 1;
    return Math.max(1, Math.ceil((oldest.expiresAt - this.clock()) / 1000));
  }
}
