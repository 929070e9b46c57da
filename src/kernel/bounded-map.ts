// The one bounded map of every cache: least recently used entries go first once it holds more
// than `maxEntries`, or, when entries are weighed, more than `maxBytes` in all. Caches need two
// more things of it: to hear of each entry that leaves (their side indexes follow), and to know
// whether anything was dropped while they read the store (a read that began before a drop must not
// fill the map with what the drop removed).
//
// The order of use is a list through the entries, not the Map's own order: moving a key to the end
// of a Map (delete, then set) leaves its old slot in V8's hash chain until the table is rebuilt, and
// every later set of that key walks all of them. A session used again and again in a map of 40,000
// took 25–110 µs a lookup that way. Here a lookup changes two links and the Map not at all.

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

interface Slot<K, V> {
  key: K;
  value: V;
  bytes: number;
  /** The entry used just before this one, and just after it (the list runs oldest to newest). */
  older: Slot<K, V> | undefined;
  newer: Slot<K, V> | undefined;
}

export class BoundedMap<K, V> {
  private readonly map = new Map<K, Slot<K, V>>();
  private oldest: Slot<K, V> | undefined;
  private newest: Slot<K, V> | undefined;
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
    this.touch(slot);
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
    if (this.opts.maxBytes !== undefined && bytes > this.opts.maxBytes) {
      if (old) this.remove(old);
      return false;
    }
    if (old) {
      const was = old.value;
      this.heldBytes += bytes - old.bytes;
      old.value = value;
      old.bytes = bytes;
      this.touch(old);
      if (was !== value) this.opts.onDrop?.(key, was);
    } else {
      const slot: Slot<K, V> = { key, value, bytes, older: this.newest, newer: undefined };
      if (this.newest) this.newest.newer = slot;
      else this.oldest = slot;
      this.newest = slot;
      this.map.set(key, slot);
      this.heldBytes += bytes;
    }
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
    this.remove(slot);
    return true;
  }

  /** Deletes every entry `test` picks. */
  deleteWhere(test: (value: V, key: K) => boolean): void {
    this.dropCount++;
    for (const slot of this.slots()) if (test(slot.value, slot.key)) this.remove(slot);
  }

  clear(): void {
    this.dropCount++;
    const slots = [...this.slots()];
    this.map.clear();
    this.oldest = this.newest = undefined;
    this.heldBytes = 0;
    if (this.opts.onDrop) for (const slot of slots) this.opts.onDrop(slot.key, slot.value);
  }

  /** The entries, least recently used first. */
  *entries(): IterableIterator<[K, V]> {
    for (const slot of this.slots()) yield [slot.key, slot.value];
  }

  *keys(): IterableIterator<K> {
    for (const slot of this.slots()) yield slot.key;
  }

  *values(): IterableIterator<V> {
    for (const slot of this.slots()) yield slot.value;
  }

  private *slots(): IterableIterator<Slot<K, V>> {
    // The next one is taken first, as the caller may delete the entry it was given; one deleted
    // meanwhile is passed over (a deleted entry keeps its links, so the walk goes on from it).
    for (let slot = this.oldest; slot; ) {
      const next: Slot<K, V> | undefined = slot.newer;
      if (this.map.get(slot.key) === slot) yield slot;
      slot = next;
    }
  }

  /** Makes an entry the most recently used. */
  private touch(slot: Slot<K, V>): void {
    if (slot === this.newest) return;
    this.unlink(slot);
    slot.older = this.newest;
    slot.newer = undefined;
    this.newest!.newer = slot;
    this.newest = slot;
  }

  private unlink(slot: Slot<K, V>): void {
    if (slot.older) slot.older.newer = slot.newer;
    else this.oldest = slot.newer;
    if (slot.newer) slot.newer.older = slot.older;
    else this.newest = slot.older;
  }

  private remove(slot: Slot<K, V>): void {
    this.map.delete(slot.key);
    this.unlink(slot);
    this.heldBytes -= slot.bytes;
    this.opts.onDrop?.(slot.key, slot.value);
  }

  private evict(): void {
    const maxBytes = this.opts.maxBytes ?? Infinity;
    while (this.map.size > this.opts.maxEntries || this.heldBytes > maxBytes) this.remove(this.oldest!);
  }
}
