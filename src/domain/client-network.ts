// Everything the Client API's service lists, sessions and posture share: one set per controller,
// each cache following the change feed.
import type { ApiSessions } from '../auth/api-sessions.js';
import type { Clock } from '../clock.js';
import type { Issuers } from '../oidc/issuer.js';
import type { SigningKeys } from '../oidc/keys.js';
import type { Store } from '../store/store.js';
import {
  AccessViews,
  AnswerCache,
  ClientServices,
  ConfigTypeCatalog,
  PostureCheckCatalog,
  ServiceCatalog,
  ServiceUpdateMarkers,
  ViewGenerations,
  viewStamp,
  type Caller,
} from './client-services.js';
import { PostureStore } from './posture.js';
import type { Resources } from './resources.js';
import { Sessions } from './sessions.js';

export interface ClientNetworkDeps {
  store: Store;
  clock: Clock;
  resources: Resources;
  /** The controller's signing keys (the OIDC provider's): session tokens are signed with them. */
  keys: SigningKeys;
  issuers: Pick<Issuers, 'accepts'>;
  /** The API sessions, whose expiry bounds their sessions' tokens. */
  apiSessions: Pick<ApiSessions, 'load' | 'expiresAt'>;
  /** Access views reaching more services than this are read per request, not kept (default 2,000). */
  maxCachedView?: number;
}

export class ClientNetwork {
  readonly generations: ViewGenerations;
  readonly access: AccessViews;
  readonly catalog: ServiceCatalog;
  readonly checks: PostureCheckCatalog;
  readonly configTypes: ConfigTypeCatalog;
  readonly posture: PostureStore;
  readonly services: ClientServices;
  readonly markers: ServiceUpdateMarkers;
  readonly answers: AnswerCache;
  readonly sessions: Sessions;

  /** The stamp of what a caller's service answers depend on now. */
  stamp(caller: Caller): string {
    return viewStamp(this.generations, this.posture, caller);
  }

  constructor(d: ClientNetworkDeps) {
    const { store, clock, resources } = d;
    const changes = resources.kernel.changes;
    this.generations = new ViewGenerations(changes, clock);
    this.access = new AccessViews(store, this.generations, d.maxCachedView);
    this.catalog = new ServiceCatalog(store, resources.get('services').repo, changes);
    this.checks = new PostureCheckCatalog(store, resources.get('posture-checks').repo, changes);
    this.configTypes = new ConfigTypeCatalog(store, changes);
    this.posture = new PostureStore(resources.kernel, clock, changes);
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
    this.answers = new AnswerCache(changes);
    this.markers = new ServiceUpdateMarkers(this.services, this.generations, this.posture, changes, clock());
    this.sessions = new Sessions({
      store,
      clock,
      kernel: resources.kernel,
      changes,
      repo: resources.get('sessions').repo,
      edgeRouters: resources.get('edge-routers').repo,
      access: this.access,
      checks: this.checks,
      posture: this.posture,
      keys: d.keys,
      issuers: d.issuers,
      apiSessions: d.apiSessions,
    });
  }
}
