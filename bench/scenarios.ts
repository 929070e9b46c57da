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
  /**
   * What the ratio is taken against: the constant route (default), or the raw Argon2id verify rate
   * measured in the same run (for password logins, where the hash should be the whole cost).
   */
  baseline?: 'route' | 'argon2';
}

/** A constant answer registered at the root of the listener by bench/server.ts. */
export const BASELINE_PATH = '/bench/baseline';

export const baseline: Scenario = { name: 'baseline', method: 'GET', path: BASELINE_PATH, target: 1 };

async function login(ctx: BenchContext): Promise<string> {
  const res = await ctx.request('POST', '/edge/client/v1/authenticate?method=password', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(ctx.admin),
  });
  const token = res.headers['overlay-session'];
  if (res.status !== 200 || typeof token !== 'string') throw new Error(`login failed: ${res.status} ${res.body}`);
  return token;
}

export const scenarios: Scenario[] = [
  { name: 'client version', method: 'GET', path: '/edge/client/v1/version', target: 0.8 },
  {
    name: 'current identity',
    method: 'GET',
    path: '/edge/client/v1/current-identity',
    target: 0.6,
    async setup(ctx, scenario) {
      scenario.headers = { 'overlay-session': await login(ctx) };
    },
  },
  {
    name: 'authenticate',
    method: 'POST',
    path: '/edge/client/v1/authenticate?method=password',
    target: 0.8,
    baseline: 'argon2',
    async setup(ctx, scenario) {
      scenario.headers = { 'content-type': 'application/json' };
      scenario.body = JSON.stringify(ctx.admin);
    },
  },
];
