// The one bounded map of every cache: least recently used entries go first once it holds more
// than `maxEntries`, or, when entries are weighed, more than `maxBytes` in all (a 64th of the bound
// more at once: see evict). Caches need two more things of it: to hear of each entry that leaves
// (their side indexes follow), and to know whether anything was dropped while they read the store
// (a read that began before a drop must not fill the map with what the drop removed).

export interface BoundedMapOptions<K, V> {
  /** Entries kept at most. */
  maxEntries: number;
  /** Approximate bytes kept at most, as `sizeOf` weighs entries. */
  maxBytes?: number;
  /** The approximate bytes of an entry (required with maxBytes). */
  sizeOf?: (value: V, key: K) => number;
  /** Told of every entry that leaves: evicted, replaced, deleted or cleared. */
  onDrop?: (key: K, value: V) => void;
}

interface Slot<V> {
  value: V;
  bytes: number;
}

export class BoundedMap<K, V> {
  private readonly map = new Map<K, Slot<V>>();
  private heldBytes = 0;
  private dropCount = 0;
  private hitCount = 0;
  private missCount = 0;

  constructor(private readonly opts: BoundedMapOptions<K, V>) {
    if (!(opts.maxEntries >= 1)) throw new Error('a bounded map keeps at least one entry');
    if (opts.maxBytes !== undefined && !opts.sizeOf) throw new Error('maxBytes needs sizeOf');
  }

  get size(): number {
    return this.map.size;
  }

  get bytes(): number {
    return this.heldBytes;
  }

  /**
   * Moves on every delete (whether or not the key was there), deleteWhere and clear — not on
   * eviction by the bounds: take it before reading the store, and keep what was read only if it has
   * not moved (`setIfUnchanged`).
   */
  get drops(): number {
    return this.dropCount;
  }

  /** Lookups through `get` that found their key, and that did not (the cache hit ratio). */
  get lookups(): { hits: number; misses: number } {
    return { hits: this.hitCount, misses: this.missCount };
  }

  /** The value, now the most recently used. */
  get(key: K): V | undefined {
    const slot = this.map.get(key);
    if (!slot) {
      this.missCount++;
      return undefined;
    }
    this.hitCount++;
    this.map.delete(key);
    this.map.set(key, slot);
    return slot.value;
  }

  /** The value, leaving its place in the order alone. */
  peek(key: K): V | undefined {
    return this.map.get(key)?.value;
  }

  has(key: K): boolean {
    return this.map.has(key);
  }

  /** Keeps a value as the most recently used; answers false when it alone is over the byte bound. */
  set(key: K, value: V): boolean {
    const bytes = this.opts.sizeOf ? this.opts.sizeOf(value, key) : 0;
    const old = this.map.get(key);
    if (old) {
      this.map.delete(key);
      this.heldBytes -= old.bytes;
      if (old.value !== value) this.opts.onDrop?.(key, old.value);
    }
    if (this.opts.maxBytes !== undefined && bytes > this.opts.maxBytes) return false;
    this.map.set(key, { value, bytes });
    this.heldBytes += bytes;
    this.evict();
    return true;
  }

  /** Keeps a value read from the store, unless something was dropped since `drops` was `seen`. */
  setIfUnchanged(key: K, value: V, seen: number): boolean {
    return seen === this.dropCount && this.set(key, value);
  }

  delete(key: K): boolean {
    this.dropCount++;
    const slot = this.map.get(key);
    if (!slot) return false;
    this.map.delete(key);
    this.heldBytes -= slot.bytes;
    this.opts.onDrop?.(key, slot.value);
    return true;
  }

  /** Deletes every entry `test` picks. */
  deleteWhere(test: (value: V, key: K) => boolean): void {
    this.dropCount++;
    for (const [key, slot] of [...this.map]) if (test(slot.value, key)) this.delete(key);
  }

  clear(): void {
    this.dropCount++;
    const slots = [...this.map];
    this.map.clear();
    this.heldBytes = 0;
    if (this.opts.onDrop) for (const [key, slot] of slots) this.opts.onDrop(key, slot.value);
  }

  *entries(): IterableIterator<[K, V]> {
    for (const [key, slot] of this.map) yield [key, slot.value];
  }

  keys(): IterableIterator<K> {
    return this.map.keys();
  }

  *values(): IterableIterator<V> {
    for (const slot of this.map.values()) yield slot.value;
  }

  /**
   * Once a bound is passed, drops the least recently used entries down to `belowBound` of each
   * (never the entry just set), with one iterator for them all. A new iterator starts at the map's
   * first slot and steps over every slot that deleted entries left there until V8 rehashes the map:
   * in a full map of 200,000 entries that took 25–95 µs for each entry evicted one at a time.
   */
  private evict(): void {
    const maxBytes = this.opts.maxBytes ?? Infinity;
    if (this.map.size <= this.opts.maxEntries && this.heldBytes <= maxBytes) return;
    const entries = belowBound(this.opts.maxEntries);
    const bytes = belowBound(maxBytes);
    const oldest = this.map.entries();
    while (this.map.size > 1 && (this.map.size > entries || this.heldBytes > bytes)) {
      const [key, slot] = oldest.next().value as [K, Slot<V>];
      this.map.delete(key);
      this.heldBytes -= slot.bytes;
      this.opts.onDrop?.(key, slot.value);
    }
  }
}

/** What a map over a bound drops entries down to: the bound less its 64th (bounds under 64 exactly). */
function belowBound(bound: number): number {
  return Number.isFinite(bound) ? bound - Math.floor(bound / 64) : bound;
}
