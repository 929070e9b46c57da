// What the credential pipeline needs of an identity on every request, from memory. Writes to an
// identity invalidate its entry after they commit (it follows the change feed as a cache).
import type { Clock } from '../clock.js';
import { BoundedMap } from '../kernel/bounded-map.js';
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import type { EntityOf } from '../resources/index.js';
import type { Repository } from '../store/repository.js';
import type { Store } from '../store/store.js';

export interface IdentityState {
  id: string;
  name: string;
  isAdmin: boolean;
  isDefaultAdmin: boolean;
  permissions: string[];
  authPolicyId: string;
  disabled: boolean;
  disabledUntil: number | null;
  /** The id in an external system, when it has one: what an external JWT may name it by. */
  externalId?: string;
}

/** Disabled at `now`: disabled without an end, or before its end. */
export function isDisabledAt(s: Pick<IdentityState, 'disabled' | 'disabledUntil'>, now: number): boolean {
  return s.disabled && (s.disabledUntil === null || now < s.disabledUntil);
}

/** Identities kept in memory at most; the least recently used are read again when asked for. */
export const MAX_CACHED_IDENTITIES = 200_000;

export class IdentityDirectory implements Cache {
  readonly name = 'identity-directory';
  private readonly cache: BoundedMap<string, IdentityState>;

  constructor(
    private readonly store: Store,
    private readonly repo: Repository<EntityOf<'identities'>>,
    private readonly clock: Clock,
    maxCached = MAX_CACHED_IDENTITIES,
  ) {
    this.cache = new BoundedMap({ maxEntries: maxCached });
  }

  async get(id: string): Promise<IdentityState | undefined> {
    const cached = this.cache.get(id);
    if (cached) return cached;
    // Any invalidation meanwhile (a lockout, say) means this read may not show it: not kept then.
    const seen = this.cache.drops;
    const e = await this.repo.get(this.store.db, id);
    if (!e) return undefined;
    const state: IdentityState = {
      id: e.id,
      name: e.name,
      isAdmin: e.isAdmin === true,
      isDefaultAdmin: e.isDefaultAdmin === true,
      permissions: e.permissions ?? [],
      authPolicyId: e.authPolicyId,
      disabled: e.disabled === true,
      disabledUntil: typeof e.disabledUntil === 'string' ? Date.parse(e.disabledUntil) : null,
      ...(typeof e.externalId === 'string' && e.externalId !== '' ? { externalId: e.externalId } : {}),
    };
    this.cache.setIfUnchanged(id, state, seen);
    return state;
  }

  /** Disabled now: disabled without an end, or before its end. */
  isDisabled(s: Pick<IdentityState, 'disabled' | 'disabledUntil'>): boolean {
    return isDisabledAt(s, this.clock());
  }

  invalidate(id: string): void {
    this.cache.delete(id);
  }

  onChange(c: Change): void {
    if (c.collection === 'identities') this.invalidate(c.id);
  }

  reset(): void {
    this.cache.clear();
  }
}
