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

export class IdentityDirectory {
  private readonly cache = new Map<string, IdentityState>();

  constructor(
    private readonly store: Store,
    private readonly repo: Repository,
    private readonly clock: Clock,
  ) {}

  async get(id: string): Promise<IdentityState | undefined> {
    const cached = this.cache.get(id);
    if (cached) return cached;
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
    this.cache.set(id, state);
    return state;
  }

  /** Disabled now: disabled without an end, or before its end. */
  isDisabled(s: Pick<IdentityState, 'disabled' | 'disabledUntil'>): boolean {
    return s.disabled && (s.disabledUntil === null || this.clock() < s.disabledUntil);
  }

  invalidate(id: string): void {
    this.cache.delete(id);
  }
}
