// Refuses a client address or an account after too many failed logins in a short window
// (behaviour.md §9): more than `limit` failures within `windowMs` → 429 until the window passes.
import type { Clock } from '../clock.js';

export class FailureThrottle {
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly clock: Clock,
    private readonly limit = 20,
    private readonly windowMs = 10_000,
  ) {}

  /** Seconds until `key` may try again, or 0. */
  retryAfter(key: string): number {
    const recent = this.recent(key);
    if (recent.length <= this.limit) return 0;
    return Math.max(1, Math.ceil((recent[recent.length - this.limit - 1]! + this.windowMs - this.clock()) / 1000));
  }

  fail(key: string): void {
    const recent = this.recent(key);
    recent.push(this.clock());
    this.failures.set(key, recent);
    if (this.failures.size > 100_000) this.prune();
  }

  private recent(key: string): number[] {
    const since = this.clock() - this.windowMs;
    return (this.failures.get(key) ?? []).filter((t) => t > since);
  }

  private prune(): void {
    const since = this.clock() - this.windowMs;
    for (const [key, times] of this.failures) if (!times.some((t) => t > since)) this.failures.delete(key);
  }
}
