// What `npm run bench` measures. Each scenario is one request, repeated over keep-alive connections
// and compared with the baseline route served by the same TLS listener. To add an endpoint, add a
// scenario; a `setup` runs once before the warm-up and may log in and set headers on the scenario.

export interface Response {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface BenchContext {
  /** https://host:port of the controller under test. */
  url: string;
  /** The default admin's credentials (the controller is started with them). */
  admin: { username: string; password: string };
  /** One request over TLS verified against the controller's CAs. */
  request(method: string, path: string, options?: { headers?: Record<string, string>; body?: string }): Promise<Response>;
}

export interface Scenario {
  name: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string;
  setup?(ctx: BenchContext, scenario: Scenario): Promise<void>;
  /** Lowest acceptable ratio of the scenario's requests/s to the baseline's. */
  target: number;
}

/** A constant answer registered at the root of the listener by bench/server.ts. */
export const BASELINE_PATH = '/bench/baseline';

export const baseline: Scenario = { name: 'baseline', method: 'GET', path: BASELINE_PATH, target: 1 };

export const scenarios: Scenario[] = [
  { name: 'client version', method: 'GET', path: '/edge/client/v1/version', target: 0.8 },
];
