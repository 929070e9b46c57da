// Serialized answers of the Client API's repeated reads, per API session: a caller polling the same
// list gets the same bytes while nothing its answer depends on (the view stamp) has moved.
import { BoundedMap } from '../kernel/bounded-map.js';
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';

/**
 * Serialized answers of a caller's repeated reads (the same request of the same API session), good
 * while the stamp they were made under holds. Bounded in bytes and per API session; an API
 * session's entries go with it.
 */
export class AnswerCache implements Cache {
  readonly name = 'service-answers';
  private readonly entries: BoundedMap<string, { apiSessionId: string; stamp: string; body: string }>;
  private readonly bySession = new Map<string, Set<string>>();

  constructor(
    maxBytes = 64 * 1024 * 1024,
    private readonly maxBody = 256 * 1024,
    private readonly perSession = 8,
  ) {
    this.entries = new BoundedMap({
      // Bytes bind first; the count only bounds the bookkeeping of many tiny answers.
      maxEntries: 1_000_000,
      maxBytes,
      sizeOf: (e) => e.body.length,
      onDrop: (key, e) => {
        const keys = this.bySession.get(e.apiSessionId);
        keys?.delete(key);
        if (keys?.size === 0) this.bySession.delete(e.apiSessionId);
      },
    });
  }

  onChange(c: Change): void {
    if (c.collection === 'api-sessions' && c.kind === 'delete') for (const key of [...(this.bySession.get(c.id) ?? [])]) this.entries.delete(key);
  }

  reset(): void {
    this.entries.clear();
  }

  get(apiSessionId: string, request: string, stamp: string): string | undefined {
    const key = `${apiSessionId}\u0000${request}`;
    const hit = this.entries.peek(key);
    if (!hit) return undefined;
    if (hit.stamp !== stamp) {
      this.entries.delete(key);
      return undefined;
    }
    return hit.body;
  }

  put(apiSessionId: string, request: string, stamp: string, body: string): void {
    if (body.length > this.maxBody) return;
    const key = `${apiSessionId}\u0000${request}`;
    this.entries.delete(key);
    const keys = this.bySession.get(apiSessionId);
    if (keys && keys.size >= this.perSession) this.entries.delete(keys.values().next().value!);
    if (!this.entries.set(key, { apiSessionId, stamp, body })) return;
    let mine = this.bySession.get(apiSessionId);
    if (!mine) this.bySession.set(apiSessionId, (mine = new Set()));
    mine.add(key);
  }
}
