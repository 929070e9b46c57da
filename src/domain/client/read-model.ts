// The Client API's read model: everything its service lists, sessions and posture share, built once
// by createApp, each cache registered with the controller's cache registry and following the change
// feed. The path of a client `GET /services`: the caller's access views (access-views.ts, under the
// view generations of view-generations.ts), then the service entities, configs, posture checks and
// config type names of the catalogs (catalogs.ts), made into answers by the service list
// (service-list.ts) with the posture evaluated by policy/posture.ts over the posture store
// (posture-store.ts). service-updates.ts marks when that list last changed; sessions.ts creates
// Dial and Bind sessions over the same views; posture-responses.ts stores what clients report and
// answers the services a report changed.
import type { Logger } from 'pino';
import type { ApiSessions } from '../../auth/api-sessions.js';
import type { Clock } from '../../clock.js';
import type { CacheRegistry } from '../../kernel/caches.js';
import type { Issuers } from '../../oidc/issuer.js';
import type { SigningKeys } from '../../oidc/keys.js';
import type { Store } from '../../store/store.js';
import type { Resources } from '../resources.js';
import { AccessViews } from './access-views.js';
import type { Caller } from './caller.js';
import { ConfigTypeCatalog, PostureCheckCatalog, ServiceCatalog } from './catalogs.js';
import { PostureResponses } from './posture-responses.js';
import { PostureStore } from './posture-store.js';
import { ClientServices } from './service-list.js';
import { ServiceUpdateMarkers } from './service-updates.js';
import { SessionEnforcer } from './session-enforcer.js';
import { Sessions } from './sessions.js';
import { ViewGenerations, viewStamp } from './view-generations.js';

export interface ClientReadModelDeps {
  store: Store;
  clock: Clock;
  resources: Resources;
  /** Where the caches of the read model register. */
  caches: CacheRegistry;
  /** The controller's signing keys (the OIDC provider's): session tokens are signed with them. */
  keys: SigningKeys;
  issuers: Pick<Issuers, 'accepts'>;
  /** The API sessions, whose expiry bounds their sessions' tokens. */
  apiSessions: Pick<ApiSessions, 'load' | 'expiresAt'>;
  /** Access views reaching more services than this are read per request, not kept (default 2,000). */
  maxCachedView?: number;
  log?: Pick<Logger, 'error'>;
}

export class ClientReadModel {
  readonly generations: ViewGenerations;
  readonly access: AccessViews;
  readonly catalog: ServiceCatalog;
  readonly checks: PostureCheckCatalog;
  readonly configTypes: ConfigTypeCatalog;
  readonly posture: PostureStore;
  readonly postureResponses: PostureResponses;
  readonly services: ClientServices;
  readonly markers: ServiceUpdateMarkers;
  readonly sessions: Sessions;
  readonly enforcer: SessionEnforcer;

  /** The stamp of what a caller's service answers depend on now. */
  stamp(caller: Caller): string {
    return viewStamp(this.generations, this.posture, caller);
  }

  constructor(d: ClientReadModelDeps) {
    const { store, clock, resources, caches } = d;
    this.generations = caches.register(new ViewGenerations(clock));
    this.access = caches.register(new AccessViews(store, this.generations, d.maxCachedView));
    this.catalog = caches.register(new ServiceCatalog(store, resources.get('services').repo));
    this.checks = caches.register(new PostureCheckCatalog(store, resources.get('posture-checks').repo));
    this.configTypes = caches.register(new ConfigTypeCatalog(store));
    this.posture = caches.register(new PostureStore(resources.kernel, clock));
    this.postureResponses = new PostureResponses({ clock, posture: this.posture, access: this.access, checks: this.checks, catalog: this.catalog });
    this.services = new ClientServices({
      store,
      clock,
      repo: resources.get('services').repo,
      catalog: this.catalog,
      access: this.access,
      checks: this.checks,
      configTypes: this.configTypes,
      posture: this.posture,
    });
    this.markers = caches.register(new ServiceUpdateMarkers(this.services, this.generations, this.posture, clock(), clock));
    this.sessions = caches.register(new Sessions({
      store,
      clock,
      kernel: resources.kernel,
      repo: resources.get('sessions').repo,
      edgeRouters: resources.get('edge-routers').repo,
      access: this.access,
      checks: this.checks,
      posture: this.posture,
      keys: d.keys,
      issuers: d.issuers,
      apiSessions: d.apiSessions,
    }));
    this.enforcer = caches.register(
      new SessionEnforcer({ store, kernel: resources.kernel, repo: resources.get('sessions').repo, sessions: this.sessions, apiSessions: d.apiSessions, log: d.log }),
    );
  }
}
