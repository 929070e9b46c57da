// The controller's metrics in the Prometheus text format, through prom-client. Each app owns its
// registry (several apps share a test process); the parts of the controller that measure something
// see only a narrow recording function or interface, not this object. Gauges that describe the
// store or the caches are computed when scraped, so nothing is kept up to date between scrapes.
// Every name starts with `overlay_` and is listed in the README; labels take bounded values only (a
// route template, never a raw URL).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { LoginOutcome } from '../auth/login.js';

/** What the gauges read at scrape time; set once the parts they read exist. */
export interface MetricSources {
  /** API sessions in the store (expired ones are swept). */
  apiSessions(): Promise<number>;
  /** Sessions (service dial and bind sessions) in the store. */
  sessions(): Promise<number>;
  /** Lookups of every registered cache since start. */
  cacheLookups(): { cache: string; hits: number; misses: number }[];
}

/**
 * Request latency buckets, seconds: a fast read is a millisecond or two, a password hash about 50 ms.
 * Few of them: each is a line per series in every scrape, and prom-client's cost grows with lines
 * (1,000 route series with 13 buckets took about twice as long to scrape as with 9).
 */
const REQUEST_BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];
/** Store transaction and policy link buckets, seconds. */
const STORE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

export class Metrics {
  readonly registry = new Registry();
  private sources: MetricSources | undefined;

  private readonly requests = new Counter({
    name: 'overlay_http_requests_total',
    help: 'HTTP requests answered, by API, method, route template and status.',
    labelNames: ['api', 'method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  private readonly requestDuration = new Histogram({
    name: 'overlay_http_request_duration_seconds',
    help: 'Time from receiving a request to sending its answer, by API, method, route template and status.',
    labelNames: ['api', 'method', 'route', 'status'] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  private readonly logins = new Counter({
    name: 'overlay_logins_total',
    help: 'Primary logins (Edge API authenticate and OIDC login) by method and outcome.',
    labelNames: ['method', 'result'] as const,
    registers: [this.registry],
  });
  private readonly transactions = new Histogram({
    name: 'overlay_store_transaction_duration_seconds',
    help: 'Store write transactions (one batch of writes each) from begin to commit or rollback.',
    labelNames: ['result'] as const,
    buckets: STORE_BUCKETS,
    registers: [this.registry],
  });
  private readonly linkRecomputes = new Histogram({
    name: 'overlay_policy_link_recompute_duration_seconds',
    help: 'Recomputation of policy links after a policy (trigger="policy") or an entity (trigger="entity") was written.',
    labelNames: ['trigger'] as const,
    buckets: STORE_BUCKETS,
    registers: [this.registry],
  });

  constructor() {
    const sourced = <T>(read: (sources: MetricSources) => T): T | undefined => (this.sources ? read(this.sources) : undefined);
    new Gauge({
      name: 'overlay_api_sessions',
      help: 'API sessions in the store (legacy and OIDC).',
      registers: [this.registry],
      async collect() {
        const count = await sourced((s) => s.apiSessions());
        if (count !== undefined) this.set(count);
      },
    });
    new Gauge({
      name: 'overlay_sessions',
      help: 'Sessions (dial and bind) in the store.',
      registers: [this.registry],
      async collect() {
        const count = await sourced((s) => s.sessions());
        if (count !== undefined) this.set(count);
      },
    });
    new Counter({
      name: 'overlay_cache_lookups_total',
      help: 'Lookups in the memory caches by cache and result (hit or miss).',
      labelNames: ['cache', 'result'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { cache, hits, misses } of sourced((s) => s.cacheLookups()) ?? []) {
          this.inc({ cache, result: 'hit' }, hits);
          this.inc({ cache, result: 'miss' }, misses);
        }
      },
    });
    new Gauge({
      name: 'overlay_cache_hit_ratio',
      help: 'Hits among all lookups of a memory cache since start (absent until its first lookup).',
      labelNames: ['cache'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { cache, hits, misses } of sourced((s) => s.cacheLookups()) ?? []) {
          if (hits + misses > 0) this.set({ cache }, hits / (hits + misses));
        }
      },
    });
  }

  /** Gives the gauges what they read. */
  setSources(sources: MetricSources): void {
    this.sources = sources;
  }

  /** One answered request; `route` is the route template, or `unmatched`. */
  request(api: string, method: string, route: string, status: number, seconds: number): void {
    const labels = { api, method, route, status: String(status) };
    this.requests.inc(labels);
    this.requestDuration.observe(labels, seconds);
  }

  login(method: string, result: LoginOutcome): void {
    this.logins.inc({ method, result });
  }

  transaction(seconds: number, committed: boolean): void {
    this.transactions.observe({ result: committed ? 'commit' : 'rollback' }, seconds);
  }

  linkRecompute(trigger: 'policy' | 'entity', seconds: number): void {
    this.linkRecomputes.observe({ trigger }, seconds);
  }

  readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE;

  /** The scrape answer: this controller's metrics, then the process's. */
  async text(): Promise<string> {
    const [own, proc] = await Promise.all([this.registry.metrics(), processRegistry().metrics()]);
    return `${own}\n${proc}`;
  }
}

// The process metrics (CPU, memory, event loop lag, GC, handles) describe the process, not an app,
// and prom-client's collectors start timers and observers that are never stopped: one registry per
// process, made on first scrape, is the one shared thing here.
let processMetrics: Registry | undefined;

function processRegistry(): Registry {
  if (!processMetrics) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics, prefix: 'overlay_' });
  }
  return processMetrics;
}
