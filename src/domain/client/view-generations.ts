// View generations: what the change feed has moved that may alter service lists, counted globally
// and per identity, and the stamp of what a caller's service answers depend on. Cached views and
// answers are good while the stamp they were made under holds.
import type { Clock } from '../../clock.js';
import type { Cache } from '../../kernel/caches.js';
import type { Change } from '../../kernel/changes.js';
import type { Caller } from './caller.js';
import type { PostureStore } from './posture-store.js';

/**
 * Collections whose changes can alter any identity's service list: access (services, policies and
 * posture checks move links), what a service shows, its configs and their type names.
 */
export const VIEW_COLLECTIONS: ReadonlySet<string> = new Set(['services', 'service-policies', 'posture-checks', 'configs', 'config-types']);

interface Stamp {
  generation: number;
  /** ms of the last bump */
  at: number;
}

/**
 * Counts changes that may alter service lists: a global count for VIEW_COLLECTIONS and one per
 * identity (its attributes, hence its policy links, and its service-config overrides). A cached
 * answer is good while the counts it was made under are unchanged. The counts are not a copy of
 * the store; a reset moves the global one, so that nothing kept under the old counts is used again.
 */
export class ViewGenerations implements Cache {
  readonly name = 'view-generations';
  global: Stamp = { generation: 0, at: 0 };
  private readonly identities = new Map<string, Stamp>();

  constructor(private readonly clock: Clock) {}

  onChange(c: Change): void {
    if (VIEW_COLLECTIONS.has(c.collection)) {
      this.global = { generation: this.global.generation + 1, at: this.clock() };
    } else if (c.collection === 'identities') {
      if (c.kind === 'delete') this.identities.delete(c.id);
      else this.identities.set(c.id, { generation: (this.identities.get(c.id)?.generation ?? 0) + 1, at: this.clock() });
    }
  }

  /** Moves the global count, keeping its time: nothing changed, but nothing kept before is trusted. */
  reset(): void {
    this.global = { generation: this.global.generation + 1, at: this.global.at };
  }

  identity(identityId: string): Stamp {
    return this.identities.get(identityId) ?? { generation: 0, at: 0 };
  }
}

/**
 * What a caller's service answers depend on, as one string: the generations of the changes that may
 * alter them (global, the identity's, the API session's posture) and the API session's own state.
 * Equal stamps: equal answers (save those that change with time alone, see PresentOptions.report).
 */
export function viewStamp(generations: ViewGenerations, posture: PostureStore, caller: Caller): string {
  return `${generations.global.generation}:${generations.identity(caller.identityId).generation}:${posture.generation(caller.apiSessionId).generation}:${caller.isMfaComplete}:${caller.mfaPassedAt ?? ''}:${caller.configTypes.join(',')}`;
}
