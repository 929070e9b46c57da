// Every cache of the controller registers here and follows the change feed through this one
// interface. A cache keeps only what it can read again from the store: `reset` drops all of it and
// the next read reloads, so a cache that missed a change (or whose listener failed) is never wrong
// for longer than until it is reset. The registry is built once by the composition root.
import type { Logger } from 'pino';
import { BoundedMap } from './bounded-map.js';
import type { Change, ChangeFeed } from './changes.js';

export interface Cache {
  /** Names the cache in logs and in the list of registered caches. */
  readonly name: string;
  /** Told of each committed change before the write that made it resolves; may re-read (async). */
  onChange(change: Change): void | Promise<void>;
  /** Drops everything kept; what is read next comes from the store. */
  reset(): void | Promise<void>;
}

export class CacheRegistry {
  private readonly caches: Cache[] = [];

  constructor(
    feed: ChangeFeed,
    private readonly log?: Pick<Logger, 'error'>,
  ) {
    feed.subscribe((change) => this.deliver(change));
  }

  /** Follows the feed from now on; answers the cache. */
  register<C extends Cache>(cache: C): C {
    if (this.caches.includes(cache)) throw new Error(`cache ${cache.name} registered twice`);
    this.caches.push(cache);
    return cache;
  }

  unregister(cache: Cache): void {
    const i = this.caches.indexOf(cache);
    if (i >= 0) this.caches.splice(i, 1);
  }

  /** The names of the registered caches, in order of registration. */
  names(): string[] {
    return this.caches.map((c) => c.name);
  }

  /**
   * Lookups of each registered cache since start: the sum over the bounded maps it holds as its own
   * fields (every cache keeps its entries in those). Caches without one are left out.
   */
  lookups(): { cache: string; hits: number; misses: number }[] {
    const counts: { cache: string; hits: number; misses: number }[] = [];
    for (const cache of this.caches) {
      const maps = Object.values(cache).filter((value): value is BoundedMap<unknown, unknown> => value instanceof BoundedMap);
      if (maps.length === 0) continue;
      let hits = 0;
      let misses = 0;
      for (const map of maps) {
        hits += map.lookups.hits;
        misses += map.lookups.misses;
      }
      counts.push({ cache: cache.name, hits, misses });
    }
    return counts;
  }

  /** Resets every cache. */
  async resetAll(): Promise<void> {
    for (const cache of [...this.caches]) await this.resetOne(cache);
  }

  /** Tells every cache of one change, in order of registration; a cache whose listener fails is reset. */
  private async deliver(change: Change): Promise<void> {
    for (const cache of [...this.caches]) {
      try {
        const pending = cache.onChange(change);
        if (pending) await pending;
      } catch (err) {
        this.log?.error({ err, cache: cache.name, change }, 'a cache could not follow a change; it is reset');
        await this.resetOne(cache);
      }
    }
  }

  private async resetOne(cache: Cache): Promise<void> {
    try {
      await cache.reset();
    } catch (err) {
      this.log?.error({ err, cache: cache.name }, 'a cache could not be reset');
    }
  }
}
