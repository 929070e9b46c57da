// The OIDC part of the controller settings (global, then this controller's own) that the provider
// consults on every authorization and logout: extra redirect and post-logout URI patterns. Read
// from the store when a setting changes, never per request.
import { controllerIdOf, GLOBAL_SETTING_ID } from '../domain/operations.js';
import type { Resources } from '../domain/resources.js';

export interface OidcSettingPatterns {
  redirectUris: readonly string[];
  postLogoutUris: readonly string[];
}

const NONE: OidcSettingPatterns = { redirectUris: [], postLogoutUris: [] };

export class OidcSettingsView {
  private current: OidcSettingPatterns = NONE;
  private unsubscribe: (() => void) | undefined;
  private controllerId: string | undefined;
  /** Loads may overlap; only the latest one started may set the patterns. */
  private generation = 0;

  constructor(private readonly resources: Resources) {}

  async start(): Promise<void> {
    this.stop();
    this.unsubscribe = this.resources.kernel.changes.subscribe((c) => {
      if (c.collection === 'controller-settings') void this.load().catch(() => undefined);
    });
    this.controllerId = await controllerIdOf(this.resources.store.db, this.resources);
    await this.load();
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /** Patterns of the global setting and of this controller's own, together. */
  get patterns(): OidcSettingPatterns {
    return this.current;
  }

  async load(): Promise<void> {
    const generation = ++this.generation;
    const repo = this.resources.get('controller-settings').repo;
    const ids = [GLOBAL_SETTING_ID, ...(this.controllerId ? [this.controllerId] : [])];
    const redirectUris: string[] = [];
    const postLogoutUris: string[] = [];
    for (const id of ids) {
      const oidc = (await repo.get(this.resources.store.db, id))?.oidc as Partial<OidcSettingPatterns> | null | undefined;
      redirectUris.push(...(oidc?.redirectUris ?? []));
      postLogoutUris.push(...(oidc?.postLogoutUris ?? []));
    }
    if (generation === this.generation) this.current = { redirectUris, postLogoutUris };
  }
}
