// What `npm run bench` measures. Each scenario is one request, repeated over keep-alive connections
// and compared with the baseline route served by the same TLS listener. To add an endpoint, add a
// scenario; a `setup` runs once before the warm-up and may log in and set headers on the scenario.
// A scenario whose request changes with every answer (a refresh token chain) sets `dynamic`.
import { createHash, randomBytes } from 'node:crypto';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import { SignJWT } from 'jose';
import type { ScaleInfo } from './scale-store.js';

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
  /** One request over TLS verified against the controller's CAs (presenting a client certificate when given one). */
  request(method: string, path: string, options?: { headers?: Record<string, string>; body?: string; tls?: ClientTls }): Promise<Response>;
  /** The peer provider (oidc-provider) the refresh grant is compared with, on the same machine. */
  peer: { url: string; request: BenchContext['request'] };
  /** In the scale section only: what the scale store holds (bench/scale-store.ts); `admin` is its admin. */
  scale?: ScaleInfo;
}

/** A request whose body comes from the previous answer (each connection follows a token chain). */
export interface DynamicRequests {
  /**
   * Runs before every autocannon run of `seconds` (0: the one check request): requests in flight
   * when a run stops are lost with their chain.
   */
  prepare(ctx: BenchContext, connections: number, seconds: number): Promise<void>;
  /** The body of the next request. */
  body(): string;
  /** Headers of the next request beside the scenario's, when they change too. */
  headers?(): Record<string, string>;
  /** An answer arrived. */
  answered(status: number, body: string): void;
}

/** A client certificate and its key (PEM), presented in the TLS handshake. */
export interface ClientTls {
  cert: string;
  key: string;
}

export interface Scenario {
  name: string;
  /** The client certificate the scenario's connections present. */
  tls?: ClientTls;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string;
  setup?(ctx: BenchContext, scenario: Scenario): Promise<void>;
  /** Requests go to these paths in turn (each connection rotates through them) instead of `path`. */
  paths?: readonly string[];
  /** Lowest acceptable ratio of the scenario's requests/s to the baseline's; 0: none. */
  target: number;
  /** Highest acceptable p99 latency, in milliseconds, beside the ratio target. */
  p99TargetMs?: number;
  /** Concurrent connections of this scenario instead of the run's (then no ratio is taken). */
  connections?: number;
  /**
   * What the ratio is taken against: the constant route (default), the raw Argon2id verify rate
   * measured in the same run (for password logins, where the hash should be the whole cost), or the
   * peer scenario (the same operation on another implementation, measured in the same run).
   */
  baseline?: 'route' | 'argon2' | 'csr-sign' | 'peer';
  /** Instead of a baseline: the name of another scenario of the run, whose rate the ratio is taken to. */
  versus?: string;
  /** Which server answers: the controller (default) or the peer provider. */
  server?: 'controller' | 'peer';
  /** The peer measurement `baseline: 'peer'` scenarios are compared with (one per run). */
  isPeer?: boolean;
  dynamic?: DynamicRequests;
  /**
   * A write made before every request of the scenario, outside its timing: the requests then go one
   * at a time on one connection, and the figures are those of the requests alone.
   */
  changeBefore?(ctx: BenchContext): Promise<void>;
}

/** A constant answer registered at the root of the listener by bench/server.ts. */
export const BASELINE_PATH = '/bench/baseline';

export const baseline: Scenario = { name: 'baseline', method: 'GET', path: BASELINE_PATH, target: 1 };

/** Constant routes of bench/server.ts that give the metrics scenario its route series. */
export const SERIES_PATH = '/bench/series';
export const SERIES_ROUTES = 1000;

/** Password login (the admin by default); answers the API session token. */
async function login(ctx: BenchContext, credentials: { username: string; password: string } = ctx.admin): Promise<string> {
  const res = await ctx.request('POST', '/edge/client/v1/authenticate?method=password', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: credentials.username, password: credentials.password }),
  });
  const token = res.headers['overlay-session'];
  if (res.status !== 200 || typeof token !== 'string') throw new Error(`login failed: ${res.status} ${res.body}`);
  return token;
}

// ---- OIDC -------------------------------------------------------------------------------------

const REDIRECT_URI = 'http://127.0.0.1:9/callback';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

function refreshBody(token: string): string {
  return new URLSearchParams({ grant_type: 'refresh_token', refresh_token: token, client_id: 'overlay' }).toString();
}

/** The code flow with PKCE as the admin, over verified TLS; answers the token response. */
async function oidcLogin(ctx: BenchContext, scope: string): Promise<{ access_token: string; refresh_token?: string }> {
  const verifier = randomBytes(32).toString('base64url');
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: 'overlay',
    redirect_uri: REDIRECT_URI,
    scope,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    state: 'bench',
  });
  const started = await ctx.request('GET', `/oidc/authorization?${query}`);
  const id = new URL(String(started.headers.location), ctx.url).searchParams.get('authRequestID');
  if (started.status !== 302 || !id) throw new Error(`authorization failed: ${started.status} ${started.body}`);
  const login = await ctx.request('POST', '/oidc/login/password', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ authRequestId: id, ...ctx.admin }),
  });
  const code = login.status === 302 ? new URL(String(login.headers.location)).searchParams.get('code') : null;
  if (!code) throw new Error(`OIDC login failed: ${login.status} ${login.body}`);
  const token = await ctx.request('POST', '/oidc/token', {
    headers: FORM,
    body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: 'overlay', code_verifier: verifier }).toString(),
  });
  if (token.status !== 200) throw new Error(`token exchange failed: ${token.status} ${token.body}`);
  return JSON.parse(token.body) as { access_token: string; refresh_token?: string };
}

/**
 * Refresh-token chains: each request takes the current token of a chain, each answer puts its
 * successor back. Rotation makes every token single use, so before each run fresh chains replace
 * whatever a stopped run left in flight.
 */
function refreshChains(mint: (ctx: BenchContext, n: number) => Promise<string[]>): DynamicRequests {
  let pool: string[] = [];
  return {
    async prepare(ctx, connections) {
      pool = await mint(ctx, connections);
    },
    // An empty pool means a chain broke (a failed answer): the request that follows fails visibly.
    body: () => refreshBody(pool.pop() ?? 'no-chain-left'),
    answered(status, body) {
      if (status !== 200) return;
      const next = (JSON.parse(body) as { refresh_token?: string }).refresh_token;
      if (next) pool.push(next);
    },
  };
}

/**
 * Single-use requests (tokens, codes), made by the admin outside the timing before each run: as
 * many as the run would spend at the highest rate a run of this scenario was asked for them so far,
 * twice over, and never fewer than `floor`. (This machine's speed doubles from one run to the next;
 * a run that found none left would be refused and counted as failures, and each refusal, answered
 * fast, would make the rate look higher than it is.)
 */
class SingleUsePool<T> {
  private readonly items: T[] = [];
  /** Items asked for since the last fill (also those asked for when none was left). */
  private asked = 0;
  private lastSeconds = 0;
  /** The highest rate a run asked for items, per second. */
  private peakRate = 0;

  constructor(
    private readonly floor: number,
    /** Makes a few more items (several at once, as many as it likes) with an admin session. */
    private readonly make: (ctx: BenchContext, admin: Record<string, string>) => Promise<T[]>,
  ) {}

  async fill(ctx: BenchContext, seconds: number): Promise<void> {
    if (this.lastSeconds > 0) this.peakRate = Math.max(this.peakRate, this.asked / this.lastSeconds);
    const needed = Math.max(this.floor, Math.ceil(this.peakRate * seconds * 2));
    if (this.items.length < needed) {
      const admin = { 'overlay-session': await login(ctx), 'content-type': 'application/json' };
      while (this.items.length < needed) this.items.push(...(await this.make(ctx, admin)));
    }
    this.asked = 0;
    this.lastSeconds = seconds;
  }

  take(): T | undefined {
    this.asked++;
    return this.items.pop();
  }
}

// ---- enrollment and certificates ----------------------------------------------------------------

const P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** A new key and a CSR of it (PEM), as a device makes them. */
export async function benchCsr(): Promise<string> {
  return (await benchKeyAndCsr()).csr;
}

async function benchKeyAndCsr(): Promise<{ csr: string; key: string }> {
  const keys = (await webcrypto.subtle.generateKey(P256, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name: 'CN=bench-device', keys, signingAlgorithm: P256 }, webcrypto);
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)).toString('base64');
  return { csr: csr.toString('pem'), key: `-----BEGIN PRIVATE KEY-----\n${pkcs8.match(/.{1,64}/g)!.join('\n')}\n-----END PRIVATE KEY-----\n` };
}

/** An identity made with an outstanding ott enrollment; answers its one-time token. */
async function ottToken(ctx: BenchContext, admin: Record<string, string>): Promise<string> {
  const name = `bench-device-${randomBytes(6).toString('hex')}`;
  const created = await ctx.request('POST', '/edge/management/v1/identities', {
    headers: admin,
    body: JSON.stringify({ name, type: 'Device', isAdmin: false, enrollment: { ott: true } }),
  });
  if (created.status !== 201) throw new Error(`creating ${name} failed: ${created.status} ${created.body}`);
  const id = (JSON.parse(created.body) as { data: { id: string } }).data.id;
  const read = await ctx.request('GET', `/edge/management/v1/identities/${id}`, { headers: admin });
  const token = (JSON.parse(read.body) as { data: { enrollment: { ott?: { token: string } } } }).data.enrollment.ott?.token;
  if (!token) throw new Error(`${name} has no ott enrollment: ${read.body}`);
  return token;
}

/** Tokens kept ready before each run of the enrollment scenario, at least. */
const OTT_TOKENS_READY = 6_000;

/** One-time enrollments, each spent by one request with the same CSR (its signing is the cost). */
function ottEnrollments(): DynamicRequests {
  let csr = '';
  const tokens = new SingleUsePool(OTT_TOKENS_READY, (ctx, admin) => Promise.all(Array.from({ length: 16 }, () => ottToken(ctx, admin))));
  return {
    async prepare(ctx, _connections, seconds) {
      if (csr === '') csr = await benchCsr();
      await tokens.fill(ctx, seconds);
    },
    body: () => JSON.stringify({ token: tokens.take() ?? 'no-token-left', clientCsr: csr }),
    answered() {},
  };
}

/** An identity enrolled by ott with a key of ours: its certificate and key, to log in with. */
async function enrolledDevice(ctx: BenchContext): Promise<{ cert: string; key: string }> {
  const admin = { 'overlay-session': await login(ctx), 'content-type': 'application/json' };
  const token = await ottToken(ctx, admin);
  const { csr, key } = await benchKeyAndCsr();
  const res = await ctx.request('POST', '/edge/client/v1/enroll/ott', { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token, clientCsr: csr }) });
  if (res.status !== 200) throw new Error(`enrolling a device failed: ${res.status} ${res.body}`);
  return { cert: (JSON.parse(res.body) as { data: { cert: string } }).data.cert, key };
}

// ---- MFA ---------------------------------------------------------------------------------------

/** Recovery codes kept ready before each run, at least (20 an identity). */
const MFA_CODES_READY = 16_000;

/**
 * Second factors given by logged-in identities: each request is an API session with a code of its
 * identity that was never used (a code passes once, so each is spent). Identities with confirmed
 * TOTP are made before each run, outside its timing, until enough unused recovery codes are ready;
 * a recovery code is checked and spent like a TOTP code, in one conditional write with the session.
 */
function mfaCodes(): DynamicRequests {
  let made = 0;
  let next: { token: string; code: string } | undefined;
  const enrolled = async (ctx: BenchContext, admin: Record<string, string>): Promise<{ token: string; code: string }[]> => {
    const name = `bench-mfa-${++made}-${randomBytes(4).toString('hex')}`;
    const password = randomBytes(12).toString('base64url');
    const created = await ctx.request('POST', '/edge/management/v1/identities', { headers: admin, body: JSON.stringify({ name, type: 'User', isAdmin: false }) });
    if (created.status !== 201) throw new Error(`creating ${name} failed: ${created.status} ${created.body}`);
    const identityId = (JSON.parse(created.body) as { data: { id: string } }).data.id;
    const auth = await ctx.request('POST', '/edge/management/v1/authenticators', {
      headers: admin,
      body: JSON.stringify({ method: 'updb', identityId, username: name, password }),
    });
    if (auth.status !== 201) throw new Error(`creating the authenticator of ${name} failed: ${auth.status} ${auth.body}`);
    const token = await login(ctx, { username: name, password });
    const session = { 'overlay-session': token, 'content-type': 'application/json' };
    const started = await ctx.request('POST', '/edge/client/v1/current-identity/mfa', { headers: session, body: '{}' });
    if (started.status !== 201) throw new Error(`enrolling ${name} failed: ${started.status} ${started.body}`);
    const { provisioningUrl, recoveryCodes } = (JSON.parse(started.body) as { data: { provisioningUrl: string; recoveryCodes: string[] } }).data;
    const secret = Secret.fromBase32(new URL(provisioningUrl).searchParams.get('secret')!);
    const code = new TOTP({ secret, algorithm: 'SHA1', digits: 6, period: 30 }).generate();
    const verified = await ctx.request('POST', '/edge/client/v1/current-identity/mfa/verify', { headers: session, body: JSON.stringify({ code }) });
    if (verified.status !== 200) throw new Error(`confirming the TOTP of ${name} failed: ${verified.status} ${verified.body}`);
    return recoveryCodes.map((c) => ({ token, code: c }));
  };
  // A few at a time: the logins are Argon2id checks. Their codes are dealt in turn, so requests at the
  // same time are of different sessions, as the logins of different people are: one session's checks
  // beyond the attempt limit's budget wait for those running (mfa.ts), which would measure the wait.
  const codes = new SingleUsePool(MFA_CODES_READY, async (ctx, admin) => dealt(await Promise.all(Array.from({ length: 8 }, () => enrolled(ctx, admin)))));
  return {
    async prepare(ctx, _connections, seconds) {
      await codes.fill(ctx, seconds);
    },
    // The headers are asked for first: they and the body are of the same pair.
    headers() {
      next = codes.take();
      return { 'overlay-session': next?.token ?? 'no-code-left', 'content-type': 'application/json' };
    },
    body: () => JSON.stringify({ code: next?.code ?? '000000' }),
    answered() {},
  };
}

/** The first item of each list, then the second of each, and so on. */
function dealt<T>(lists: readonly T[][]): T[] {
  const longest = Math.max(0, ...lists.map((l) => l.length));
  return Array.from({ length: longest }, (_, i) => lists.flatMap((l) => (i < l.length ? [l[i]!] : []))).flat();
}

async function mintOurs(ctx: BenchContext, n: number): Promise<string[]> {
  const tokens = await Promise.all(Array.from({ length: n }, () => oidcLogin(ctx, 'openid offline_access')));
  return tokens.map((t) => t.refresh_token!);
}

async function mintPeer(ctx: BenchContext, n: number): Promise<string[]> {
  const res = await ctx.peer.request('POST', `/bench/mint?n=${n}`);
  if (res.status !== 200) throw new Error(`the peer could not mint refresh tokens: ${res.status} ${res.body}`);
  return (JSON.parse(res.body) as { tokens: string[] }).tokens;
}

// ---- external JWT signers -------------------------------------------------------------------------

/**
 * An external JWT signer with a certificate (its key is read once and kept), an identity it maps to,
 * and a JWT of that signer for the identity: the bearer of an ext-jwt login.
 */
async function extJwtLogin(ctx: BenchContext): Promise<string> {
  const admin = { 'overlay-session': await login(ctx), 'content-type': 'application/json' };
  const keys = (await webcrypto.subtle.generateKey(P256, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    { serialNumber: '01', name: 'CN=bench-idp', notBefore: new Date(now - 3_600_000), notAfter: new Date(now + 86_400_000), keys, signingAlgorithm: P256 },
    webcrypto,
  );
  const suffix = randomBytes(6).toString('hex');
  const issuer = `https://bench-idp-${suffix}.example.com`;
  const signer = await ctx.request('POST', '/edge/management/v1/external-jwt-signers', {
    headers: admin,
    body: JSON.stringify({ name: `bench-idp-${suffix}`, issuer, audience: 'overlay', enabled: true, certPem: cert.toString('pem') }),
  });
  if (signer.status !== 201) throw new Error(`creating the signer failed: ${signer.status} ${signer.body}`);
  const created = await ctx.request('POST', '/edge/management/v1/identities', {
    headers: admin,
    body: JSON.stringify({ name: `bench-sso-${suffix}`, type: 'User', isAdmin: false }),
  });
  if (created.status !== 201) throw new Error(`creating the identity failed: ${created.status} ${created.body}`);
  const sub = (JSON.parse(created.body) as { data: { id: string } }).data.id;
  return new SignJWT({ iss: issuer, aud: 'overlay', sub })
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(keys.privateKey);
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
    name: 'current identity (OIDC bearer)',
    method: 'GET',
    path: '/edge/client/v1/current-identity',
    target: 0.6,
    async setup(ctx, scenario) {
      scenario.headers = { authorization: `Bearer ${(await oidcLogin(ctx, 'openid')).access_token}` };
    },
  },
  {
    name: 'refresh grant (overlay)',
    method: 'POST',
    path: '/oidc/token',
    headers: FORM,
    target: 1,
    baseline: 'peer',
    dynamic: refreshChains(mintOurs),
  },
  {
    name: 'refresh grant (oidc-provider)',
    method: 'POST',
    path: '/token',
    headers: FORM,
    target: 0,
    server: 'peer',
    isPeer: true,
    dynamic: refreshChains(mintPeer),
  },
  {
    // A device's enrollment: a CSR signed per request; beside signing alone in this process.
    name: 'enroll ott',
    method: 'POST',
    path: '/edge/client/v1/enroll/ott',
    headers: { 'content-type': 'application/json' },
    target: 0.7,
    baseline: 'csr-sign',
    dynamic: ottEnrollments(),
  },
  {
    // A certificate login: no password hash on this path, so many times the password login's rate.
    name: 'authenticate cert',
    method: 'POST',
    path: '/edge/client/v1/authenticate?method=cert',
    target: 5,
    versus: 'authenticate',
    async setup(ctx, scenario) {
      scenario.tls = await enrolledDevice(ctx);
    },
  },
  {
    // The second factor of a login: the answer must cost no more than a session read.
    name: 'complete MFA login',
    method: 'POST',
    path: '/edge/client/v1/authenticate/mfa',
    target: 0.5,
    dynamic: mfaCodes(),
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
  {
    // Single sign-on: an identity provider's JWT (signer keys kept) opens an API session.
    name: 'authenticate ext-jwt',
    method: 'POST',
    path: '/edge/client/v1/authenticate?method=ext-jwt',
    target: 0.3,
    async setup(ctx, scenario) {
      scenario.headers = { authorization: `Bearer ${await extJwtLogin(ctx)}` };
    },
  },
  {
    // A Prometheus scrape with 1,000 route series of the request metrics (each a counter and a
    // histogram): the constant routes of bench/server.ts, each asked for once in the setup. One
    // connection, as a Prometheus server scrapes: the latency is that of a scrape alone.
    name: 'metrics scrape (1,000 route series)',
    method: 'GET',
    path: '/metrics',
    target: 0,
    p99TargetMs: 100,
    connections: 1,
    async setup(ctx) {
      for (let i = 0; i < SERIES_ROUTES; i++) {
        const res = await ctx.request('GET', `${SERIES_PATH}/${i}`);
        if (res.status !== 200) throw new Error(`${SERIES_PATH}/${i} answered ${res.status}`);
      }
      const res = await ctx.request('GET', '/metrics');
      const series = res.body.split('\n').filter((line) => line.startsWith('overlay_http_requests_total{')).length;
      if (res.status !== 200 || series < SERIES_ROUTES) throw new Error(`/metrics answered ${res.status} with ${series} request series`);
    },
  },
  ...auditedWrites(),
];

// ---- the scale store ------------------------------------------------------------------------------

function scaleOf(ctx: BenchContext): ScaleInfo {
  if (!ctx.scale) throw new Error('a scale scenario runs in the scale section only');
  return ctx.scale;
}

/** `/identities/{id}/services` as the admin, rotating over identities with about 20 services. */
function identityServices(connections?: number): Scenario {
  return {
    name: connections === undefined ? 'identity services (scale)' : `identity services (scale, ${connections} connection)`,
    method: 'GET',
    path: '/edge/management/v1/identities/{id}/services',
    target: 0,
    p99TargetMs: 20,
    ...(connections !== undefined ? { connections } : {}),
    async setup(ctx, scenario) {
      const scale = scaleOf(ctx);
      scenario.headers = { 'overlay-session': await login(ctx) };
      scenario.paths = scale.identitiesWith20Services.map((id) => `/edge/management/v1/identities/${id}/services`);
      // The route counts what the generator counted.
      const res = await ctx.request('GET', scenario.paths[0]!, { headers: scenario.headers });
      const total = (JSON.parse(res.body) as { meta?: { pagination?: { totalCount?: number } } }).meta?.pagination?.totalCount;
      const { min, max } = scale.servicesPerIdentity;
      if (res.status !== 200 || total === undefined || total < min || total > max) {
        throw new Error(`${scenario.paths[0]} answered ${res.status} with ${total} services, not ${min}..${max}`);
      }
    },
  };
}

/**
 * Measured in the scale section, on a controller started on (a copy of) the scale store, beside the
 * baseline route of that controller. `ctx.admin` is the store's admin; `ctx.scale.client` an identity
 * with a password (`login(ctx, ctx.scale.client)`), about 20 services it may dial (`serviceIds`) and
 * edge routers it shares with them.
 */
export const scaleScenarios: Scenario[] = [
  // Under the run's load: requests/s beside the baseline; the latency includes queueing behind the
  // other connections.
  identityServices(),
  // One request at a time: the latency of the request itself.
  identityServices(1),
  ...clientScenarios(),
];

/**
 * The Client API as the scale client (about 20 services): its service list (every service, as SDKs
 * ask for it), the same list with every answer made anew (64 query strings in turn, more than an API
 * session's kept answers), and a Dial session (the same request again answers the existing session).
 */
function clientScenarios(): Scenario[] {
  const asClient = async (ctx: BenchContext, scenario: Scenario, extra: Record<string, string> = {}) => {
    scenario.headers = { 'overlay-session': await login(ctx, scaleOf(ctx).client), ...extra };
  };
  const services = '/edge/client/v1/services?limit=500';
  return [
    {
      name: 'client services (scale)',
      method: 'GET',
      path: services,
      target: 0.3,
      async setup(ctx, scenario) {
        await asClient(ctx, scenario);
        const res = await ctx.request('GET', services, { headers: scenario.headers });
        const total = (JSON.parse(res.body) as { meta?: { pagination?: { totalCount?: number } } }).meta?.pagination?.totalCount;
        if (res.status !== 200 || total !== scaleOf(ctx).client.serviceIds.length) {
          throw new Error(`${services} answered ${res.status} with ${total} services, not ${scaleOf(ctx).client.serviceIds.length}`);
        }
      },
    },
    {
      name: 'client services, answers not kept (scale)',
      method: 'GET',
      path: services,
      target: 0,
      async setup(ctx, scenario) {
        await asClient(ctx, scenario);
        scenario.paths = Array.from({ length: 64 }, (_, i) => `${services}&n=${i}`);
      },
    },
    {
      // What every SDK polls: one small answer, from memory.
      name: 'client service updates (scale)',
      method: 'GET',
      path: '/edge/client/v1/current-api-session/service-updates',
      target: 0,
      async setup(ctx, scenario) {
        await asClient(ctx, scenario);
      },
    },
    {
      // The list right after an admin changed one of the client's services: nothing kept can answer.
      name: 'client services after a change (scale)',
      method: 'GET',
      path: services,
      target: 0,
      connections: 1,
      async setup(ctx, scenario) {
        await asClient(ctx, scenario);
        const admin = { 'overlay-session': await login(ctx), 'content-type': 'application/json' };
        const serviceId = scaleOf(ctx).client.serviceIds[0]!;
        let round = 0;
        scenario.changeBefore = async (c) => {
          const res = await c.request('PATCH', `/edge/management/v1/services/${serviceId}`, {
            headers: admin,
            body: JSON.stringify({ tags: { benchRound: String(++round) } }),
          });
          if (res.status !== 200) throw new Error(`changing service ${serviceId} failed: ${res.status} ${res.body}`);
        };
        // The change shows in the very next list, so it did invalidate what was kept.
        await scenario.changeBefore(ctx);
        const res = await ctx.request('GET', services, { headers: scenario.headers });
        if (!res.body.includes(`"benchRound":"${round}"`)) throw new Error('the service list did not show the change');
      },
    },
    {
      name: 'create session (scale)',
      method: 'POST',
      path: '/edge/client/v1/sessions',
      target: 0.2,
      async setup(ctx, scenario) {
        await asClient(ctx, scenario, { 'content-type': 'application/json' });
        scenario.body = JSON.stringify({ serviceId: scaleOf(ctx).client.serviceIds[0], type: 'Dial' });
        const res = await ctx.request('POST', scenario.path, { headers: scenario.headers, body: scenario.body });
        if (res.status !== 201) throw new Error(`creating a session failed: ${res.status} ${res.body}`);
      },
    },
  ];
}

// ---- writes with and without the audit log -----------------------------------------------------------

/** Turns the audit log of the controller under test on or off (a bench route of bench/server.ts). */
export const BENCH_AUDIT_PATH = '/bench/audit';

async function setAudit(ctx: BenchContext, enabled: boolean): Promise<void> {
  const res = await ctx.request('PUT', `${BENCH_AUDIT_PATH}?enabled=${enabled}`);
  if (res.status !== 200) throw new Error(`turning the audit log ${enabled ? 'on' : 'off'} failed: ${res.status} ${res.body}`);
}

/** Identities the patch scenarios rotate over. */
const PATCHED_IDENTITIES = 200;

/**
 * Identity creates and patches as the admin, each once with the audit log on and once off: what
 * recording costs is the ratio of the two rates, measured in the same run on the same controller
 * (the audit log is switched before every run of a scenario). Target: at most 15 % fewer writes/s.
 */
function auditedWrites(): Scenario[] {
  const adminHeaders = async (ctx: BenchContext) => ({ 'overlay-session': await login(ctx), 'content-type': 'application/json' });
  const creates = (audit: boolean): DynamicRequests => {
    const run = randomBytes(4).toString('hex');
    let n = 0;
    return {
      prepare: (ctx) => setAudit(ctx, audit),
      body: () => JSON.stringify({ name: `bench-${audit ? 'a' : 'n'}-${run}-${n++}`, type: 'User', isAdmin: false }),
      answered() {},
    };
  };
  const patches = (audit: boolean): DynamicRequests => {
    let n = 0;
    return {
      prepare: (ctx) => setAudit(ctx, audit),
      body: () => JSON.stringify({ tags: { bench: `${audit ? 'a' : 'n'}-${n++}` } }),
      answered() {},
    };
  };
  let patched: string[] | undefined;
  const patchSetup = async (ctx: BenchContext, scenario: Scenario) => {
    scenario.headers = await adminHeaders(ctx);
    if (!patched) {
      patched = [];
      for (let i = 0; i < PATCHED_IDENTITIES; i++) {
        const res = await ctx.request('POST', '/edge/management/v1/identities', {
          headers: scenario.headers,
          body: JSON.stringify({ name: `bench-patched-${randomBytes(4).toString('hex')}-${i}`, type: 'User', isAdmin: false }),
        });
        if (res.status !== 201) throw new Error(`creating an identity to patch failed: ${res.status} ${res.body}`);
        patched.push((JSON.parse(res.body) as { data: { id: string } }).data.id);
      }
    }
    scenario.paths = patched.map((id) => `/edge/management/v1/identities/${id}`);
  };
  return [
    {
      name: 'writes: identity create, audit off',
      method: 'POST',
      path: '/edge/management/v1/identities',
      target: 0,
      dynamic: creates(false),
      async setup(ctx, scenario) {
        scenario.headers = await adminHeaders(ctx);
      },
    },
    {
      name: 'writes: identity create, audited',
      method: 'POST',
      path: '/edge/management/v1/identities',
      target: 0.85,
      versus: 'writes: identity create, audit off',
      dynamic: creates(true),
      async setup(ctx, scenario) {
        scenario.headers = await adminHeaders(ctx);
      },
    },
    {
      name: 'writes: identity patch, audit off',
      method: 'PATCH',
      path: '/edge/management/v1/identities',
      target: 0,
      dynamic: patches(false),
      setup: patchSetup,
    },
    {
      name: 'writes: identity patch, audited',
      method: 'PATCH',
      path: '/edge/management/v1/identities',
      target: 0.85,
      versus: 'writes: identity patch, audit off',
      dynamic: patches(true),
      setup: patchSetup,
    },
  ];
}
