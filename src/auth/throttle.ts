// Refuses a client address or an account after too many failed password checks in a short window
// (behaviour.md §9): more than `limit` failures within `windowMs` → 429 until the window passes.
// A check takes its place before it runs (admit) and gives it back when it succeeds, so checks
// running at the same time cannot overshoot the budget: with every check failing, at most
// `limit` + 1 run per key and window. A check that finds the budget held by checks still running
// waits for them instead of being refused, so many right passwords at once all get through.
import type { Clock } from '../clock.js';

/** One admitted check: settle it exactly once (later calls do nothing). */
export interface Attempt {
  /** The credentials were wrong: the check counts as a failure under every key. */
  fail(): void;
  /** The check succeeded, or ended without judging the credentials: its place is given back. */
  release(): void;
}

export type Admission = { attempt: Attempt; retryAfter?: undefined } | { attempt?: undefined; retryAfter: number };

interface Waiter {
  keys: readonly string[];
  resolve(admission: Admission): void;
}

interface KeyState {
  /** Times of failures, oldest first; those older than the window are dropped when next read. */
  failures: number[];
  /** Admitted checks not settled yet. */
  running: number;
  /** Checks waiting for a running one to settle, first come first served. */
  waiters: Waiter[];
}

/**
 * Keys held before stale ones are dropped. A soft bound: keys with failures in the window or checks
 * running are always kept, since dropping one would lift its refusal.
 */
export const DEFAULT_MAX_KEYS = 100_000;

export class FailureThrottle {
  private readonly keys = new Map<string, KeyState>();
  private pruneAt: number;

  constructor(
    private readonly clock: Clock,
    private readonly limit = 20,
    private readonly windowMs = 10_000,
    private readonly maxKeys = DEFAULT_MAX_KEYS,
  ) {
    this.pruneAt = maxKeys;
  }

  /**
   * Takes a place for one check under every key, or answers the seconds until the keys may try
   * again; waits while the places are held by checks still running.
   */
  admit(keys: readonly string[]): Promise<Admission> {
    return new Promise((resolve) => {
      const waiter = { keys: [...new Set(keys)], resolve };
      const held = this.offer(waiter);
      if (held !== undefined) this.state(held).waiters.push(waiter);
    });
  }

  /** Seconds until `key` may try again because of its failures, or 0. */
  retryAfter(key: string): number {
    const failures = this.recent(key);
    if (failures.length <= this.limit) return 0;
    // Once this failure leaves the window, `limit` remain: the key may try again.
    const freeing = failures[failures.length - this.limit - 1]!;
    return Math.ceil((freeing + this.windowMs - this.clock()) / 1000);
  }

  /** Keys held in memory (for tests of the memory bound). */
  get size(): number {
    return this.keys.size;
  }

  /** Admits or refuses a check; answers the key whose running checks hold it back instead. */
  private offer(waiter: Waiter): string | undefined {
    const retryAfter = Math.max(0, ...waiter.keys.map((k) => this.retryAfter(k)));
    if (retryAfter > 0) {
      waiter.resolve({ retryAfter });
      return undefined;
    }
    const held = waiter.keys.find((k) => this.recent(k).length + (this.keys.get(k)?.running ?? 0) > this.limit);
    if (held !== undefined) return held;
    for (const k of waiter.keys) this.state(k).running++;
    let settled = false;
    const settle = (failed: boolean) => {
      if (settled) return;
      settled = true;
      const now = this.clock();
      for (const k of waiter.keys) {
        const s = this.keys.get(k)!;
        s.running--;
        if (failed) s.failures.push(now);
      }
      for (const k of waiter.keys) this.wake(k);
    };
    waiter.resolve({ attempt: { fail: () => settle(true), release: () => settle(false) } });
    return undefined;
  }

  /** Offers the waiting checks of `key` a place again, first come first served. */
  private wake(key: string): void {
    const s = this.keys.get(key);
    if (!s) return;
    while (s.waiters.length > 0) {
      const held = this.offer(s.waiters[0]!);
      if (held === key) break;
      const waiter = s.waiters.shift()!;
      // Free here but held by another of its keys: it waits there now.
      if (held !== undefined) this.state(held).waiters.push(waiter);
    }
    this.forgetIfIdle(key);
  }

  /** Failures of `key` inside the window; stores the trimmed list. */
  private recent(key: string): number[] {
    const s = this.keys.get(key);
    if (!s) return [];
    const since = this.clock() - this.windowMs;
    s.failures = s.failures.filter((t) => t > since);
    return s.failures;
  }

  private state(key: string): KeyState {
    let s = this.keys.get(key);
    if (!s) {
      if (this.keys.size >= this.pruneAt) this.prune();
      s = { failures: [], running: 0, waiters: [] };
      this.keys.set(key, s);
    }
    return s;
  }

  private forgetIfIdle(key: string): void {
    const s = this.keys.get(key);
    if (s && s.running === 0 && s.waiters.length === 0 && this.recent(key).length === 0) this.keys.delete(key);
  }

  /**
   * Drops keys with nothing in the window and nothing running; a key that still counts is never
   * dropped (that would clear its refusal). When most keys still count, the next prune waits
   * until the map has doubled, so pruning stays linear overall.
   */
  private prune(): void {
    for (const key of this.keys.keys()) this.forgetIfIdle(key);
    this.pruneAt = Math.max(this.maxKeys, 2 * this.keys.size);
  }
}
