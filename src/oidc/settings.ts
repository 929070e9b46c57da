// The OIDC part of the controller settings (global, then this controller's own) that the provider
// consults on every authorization and logout: extra redirect and post-logout URI patterns. Read
// from the store when a setting changes, never per request; a cache that follows the change feed.
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import type { Kernel } from '../kernel/kernel.js';
import { GLOBAL_SETTING_ID } from '../resources/operations.js';
import { controllerIdOf } from '../store/controller-state.js';

export interface OidcSettingPatterns {
  redirectUris: readonly string[];
  postLogoutUris: readonly string[];
}

const NONE: OidcSettingPatterns = { redirectUris: [], postLogoutUris: [] };

export class OidcSettingsView implements Cache {
  readonly name = 'oidc-settings';
  private current: OidcSettingPatterns = NONE;
  private controllerId: string | undefined;
  /** Loads may overlap; only the latest one started may set the patterns. */
  private generation = 0;
  private started = false;

  constructor(private readonly kernel: Kernel) {}

  /** Learns this controller's id and loads the patterns (register the view to follow changes). */
  async start(): Promise<void> {
    this.started = true;
    this.controllerId = await controllerIdOf(this.kernel.store.db, this.kernel.store.dialect);
    await this.load();
  }

  stop(): void {
    this.started = false;
  }

  /** Patterns of the global setting and of this controller's own, together. */
  get patterns(): OidcSettingPatterns {
    return this.current;
  }

  onChange(c: Change): Promise<void> | void {
    if (this.started && c.collection === 'controller-settings') return this.load();
  }

  /** Reads the patterns again (the ones held stay in use until then). */
  reset(): Promise<void> | void {
    if (this.started) return this.load();
  }

  async load(): Promise<void> {
    const generation = ++this.generation;
    const repo = this.kernel.repo('controller-settings');
    const ids = [GLOBAL_SETTING_ID, ...(this.controllerId ? [this.controllerId] : [])];
    const redirectUris: string[] = [];
    const postLogoutUris: string[] = [];
    for (const id of ids) {
      const oidc = (await repo.get(this.kernel.store.db, id))?.oidc;
      redirectUris.push(...(oidc?.redirectUris ?? []));
      postLogoutUris.push(...(oidc?.postLogoutUris ?? []));
    }
    if (generation === this.generation) this.current = { redirectUris, postLogoutUris };
  }
}
