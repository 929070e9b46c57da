// What the credential pipeline needs of an identity on every request, from memory. Writes to an
// identity invalidate its entry after they commit.
import type { Clock } from '../clock.js';
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
}

/** Disabled at `now`: disabled without an end, or before its end. */
export function isDisabledAt(s: Pick<IdentityState, 'disabled' | 'disabledUntil'>, now: number): boolean {
  return s.disabled && (s.disabledUntil === null || now < s.disabledUntil);
}

export class IdentityDirectory {
  private readonly cache = new Map<string, IdentityState>();
  /** Moves on every invalidation: a read that began before one must not fill the cache. */
  private generation = 0;

  constructor(
    private readonly store: Store,
    private readonly repo: Repository,
    private readonly clock: Clock,
  ) {}

  async get(id: string): Promise<IdentityState | undefined> {
    const cached = this.cache.get(id);
    if (cached) return cached;
    const generation = this.generation;
    const e = await this.repo.get(this.store.db, id);
    if (!e) return undefined;
    const state: IdentityState = {
      id: e.id,
      name: e.name as string,
      isAdmin: e.isAdmin === true,
      isDefaultAdmin: e.isDefaultAdmin === true,
      permissions: (e.permissions as string[]) ?? [],
      authPolicyId: e.authPolicyId as string,
      disabled: e.disabled === true,
      disabledUntil: typeof e.disabledUntil === 'string' ? Date.parse(e.disabledUntil) : null,
    };
    // A write that committed while this read was under way (a lockout, say) may not show in it.
    if (generation === this.generation) this.cache.set(id, state);
    return state;
  }

  /** Disabled now: disabled without an end, or before its end. */
  isDisabled(s: Pick<IdentityState, 'disabled' | 'disabledUntil'>): boolean {
    return isDisabledAt(s, this.clock());
  }

  invalidate(id: string): void {
    this.generation++;
    this.cache.delete(id);
  }
}
