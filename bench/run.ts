// `npm run bench`: starts bench/server.js on a fresh data directory, drives each scenario and the
// baseline with autocannon over HTTPS keep-alive, and reports requests/s, p50/p99 latency, the
// server's CPU time per request (its main thread in the table, which bounds its rate; all its threads
// too in the results file; Linux only) and the ratio to the baseline (docs: DESIGN.md, Performance).
//
//   npm run bench [-- --quick]      measured 10 s per endpoint (3 s with --quick)
//   npm run bench -- --no-scale     without the scale section (--scale-only: just it)
//   BENCH_DURATION=<seconds>        measured seconds per endpoint, overrides both
//   BENCH_CONNECTIONS=<n>           concurrent connections (default 20)
//   BENCH_ONLY=<text>               only the scenarios whose name contains it (beside the baseline)
//
// The server runs on a temporary data directory, removed afterwards, with a generated default admin
// password that scenario setups can log in with. OVERLAY_* variables of the caller are not passed on.
//
// autocannon never verifies the server certificate (it sets rejectUnauthorized: false whatever the
// options say), so before measuring, one request per endpoint goes over TLS verified against the
// controller's root and signing CAs read from the data directory.
//
// Every endpoint is warmed up first (not recorded). The measured time of each endpoint is split into
// two halves run in mirrored order (baseline, A, B, ... then ..., B, A, baseline), so a steady drift
// of the machine (JIT, caches, a neighbour's load) weighs the same on every endpoint.
//
// The refresh grant is also measured on a peer provider, oidc-provider with its in-memory adapter,
// started as its own process (bench/peer-server.js) on the same machine with the controller's server
// certificate; `baseline: 'peer'` scenarios report their ratio to it. Refresh tokens rotate, so those
// scenarios follow token chains (each answer gives the next request's token) and get fresh chains
// before every run.
//
// The scale section (bench/scale-store.ts) runs a second controller on a copy of the scale store
// (100,000 identities, 10,000 services, 100 edge routers, 2,000 policies), generated under
// bench/data/scale/ when missing or out of date and reused otherwise; the copy takes the writes and
// is removed afterwards. It reports: the time from spawning the controller to its ready line
// (target ≤ 5 s); its resident memory (VmRSS of /proc/<pid>/status) after the warm-up and its peak
// (VmHWM) at the end (≤ 1 GiB); the scale scenarios beside that controller's baseline route, measured
// like the others (identities/{id}/services rotating over identities with about 20 services, under
// the run's connections and one request at a time, p99 ≤ 20 ms); the client's service list, its
// service updates, and its service list right after an admin changed one of its services (a change
// before every request, untimed, one request at a time); the time of PATCHing one identity's
// role attributes so that its links move, over keep-alive (max of 20 changes, 10 with --quick,
// ≤ 50 ms; the first one loads the policy index); and the time of POSTing service policies that
// select 10,000 identities each (max of 3, 1 with --quick, ≤ 2 s).
//
// The targets are reported, not enforced: the exit status is 0 whatever the figures, and non-zero
// when a request failed (connection error, timeout or a status other than 2xx), because then the
// figures measure the failure. Results are also written to bench/data/latest.json.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { verify } from '@node-rs/argon2';
import { X509Certificate } from 'node:crypto';
import { hashPassword } from '../src/auth/passwords.js';
import { checkCsrPem } from '../src/pki/csr.js';
import { createClientCertificate, importSigningKey } from '../src/pki/issue.js';
import { copyScaleStore, ensureScaleStore, SCALE_DIR, type ScaleInfo } from './scale-store.js';
import { baseline, benchCsr, scaleScenarios, scenarios, type BenchContext, type Response, type Scenario } from './scenarios.js';

const SERVER_SCRIPT = fileURLToPath(new URL('./server.js', import.meta.url));
const PEER_SCRIPT = fileURLToPath(new URL('./peer-server.js', import.meta.url));
/** run.js lives in dist/bench/. */
const RESULTS_FILE = fileURLToPath(new URL('../../bench/data/latest.json', import.meta.url));
const WARMUP_SECONDS = 2;
const PIPELINING = 1;
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;

interface Settings {
  /** Measured seconds per endpoint. */
  duration: number;
  connections: number;
  quick: boolean;
  /** Only the scenarios whose name contains this. */
  only?: string;
  /** Run the usual section, the scale section. */
  main: boolean;
  scale: boolean;
}

function settings(argv: string[], env: NodeJS.ProcessEnv): Settings {
  const positive = (name: string, value: string | undefined): number | undefined => {
    if (value === undefined || value === '') return undefined;
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(value)}`);
    return n;
  };
  const known = new Set(['--quick', '--no-scale', '--scale-only']);
  const unknown = argv.find((a) => !known.has(a));
  if (unknown !== undefined) throw new Error(`unknown option ${unknown} (known: ${[...known].join(', ')})`);
  const quick = argv.includes('--quick');
  const scaleOnly = argv.includes('--scale-only');
  return {
    duration: positive('BENCH_DURATION', env.BENCH_DURATION) ?? (quick ? 3 : 10),
    connections: Math.round(positive('BENCH_CONNECTIONS', env.BENCH_CONNECTIONS) ?? 20),
    quick,
    ...(env.BENCH_ONLY ? { only: env.BENCH_ONLY } : {}),
    main: !scaleOnly,
    scale: scaleOnly || !argv.includes('--no-scale'),
  };
}

// ---------------------------------------------------------------------------------------------------
// the server under test

async function startServer(dataDir: string, admin: BenchContext['admin']): Promise<{ child: ChildProcess; url: string }> {
  return startProcess(SERVER_SCRIPT, ['--data-dir', dataDir], { OVERLAY_ADMIN_USERNAME: admin.username, OVERLAY_ADMIN_PASSWORD: admin.password });
}

/** The peer provider, serving with the controller's server certificate. */
function startPeer(dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  return startProcess(PEER_SCRIPT, ['--pki-dir', join(dataDir, 'pki')], {});
}

/** Starts a server script; answers once it printed {"ready":true,"url":...}. */
async function startProcess(script: string, args: string[], extraEnv: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string }> {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('OVERLAY_')) env[key] = value;
  const child = spawn(process.execPath, [script, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...env, ...extraEnv },
  });
  const lines = createInterface({ input: child.stdout! });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the server did not start within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`the server exited before it was ready (${signal ?? `code ${code}`})`));
      });
      lines.on('line', (line) => {
        let message: { ready?: unknown; url?: unknown } | undefined;
        try {
          message = JSON.parse(line) as typeof message;
        } catch {
          // not ours
        }
        if (message?.ready === true && typeof message.url === 'string') {
          clearTimeout(timer);
          resolve(message.url);
        } else {
          process.stderr.write(`${line}\n`);
        }
      });
    });
    return { child, url };
  } catch (err) {
    await stopServer(child);
    throw err;
  }
}

async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/** One request over TLS verified against the given CAs; the benchmark client itself does not verify. */
function verifiedRequest(base: URL, ca: string[]): BenchContext['request'] {
  return (method, path, options = {}) =>
    new Promise<Response>((resolve, reject) => {
      const req = httpsRequest(
        {
          host: base.hostname,
          port: base.port,
          method,
          path,
          headers: options.headers,
          ca,
          ...(options.tls ? { cert: options.tls.cert, key: options.tls.key } : {}),
          rejectUnauthorized: true,
          agent: false,
          timeout: 10_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
          );
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
      req.on('error', reject);
      req.end(options.body);
    });
}

// ---------------------------------------------------------------------------------------------------
// measuring

interface Segment {
  requests: number;
  seconds: number;
  /** Nanoseconds the server spent on a CPU meanwhile (its main thread, all its threads); absent off Linux or in process. */
  serverCpuNs?: { main: number; all: number };
  /** Milliseconds, one per response; empty for a warm-up. */
  latencies: number[];
  failures: number;
  statusCodes: Record<string, number>;
}

/** The path of a scenario's first request. */
const firstPath = (s: Scenario): string => s.paths?.[0] ?? s.path;

async function drive(url: string, scenario: Scenario, seconds: number, connections: number, record: boolean): Promise<Segment> {
  const dynamic = scenario.dynamic;
  const paths = scenario.paths;
  let turn = 0;
  const instance = autocannon({
    url: url + firstPath(scenario),
    method: scenario.method,
    ...(scenario.headers ? { headers: scenario.headers } : {}),
    ...(scenario.body !== undefined ? { body: scenario.body } : {}),
    ...(dynamic || paths
      ? {
          requests: [
            {
              method: scenario.method,
              path: firstPath(scenario),
              ...(scenario.headers ? { headers: scenario.headers } : {}),
              ...(scenario.body !== undefined ? { body: scenario.body } : {}),
              setupRequest: (req: Record<string, unknown>) => ({
                ...req,
                ...(paths ? { path: paths[turn++ % paths.length] } : {}),
                ...(dynamic?.headers ? { headers: { ...scenario.headers, ...dynamic.headers() } } : {}),
                ...(dynamic ? { body: dynamic.body() } : {}),
              }),
              ...(dynamic ? { onResponse: (status: number, body: string) => dynamic.answered(status, body) } : {}),
            },
          ],
        }
      : {}),
    ...(scenario.tls ? { tlsOptions: { cert: scenario.tls.cert, key: scenario.tls.key } } : {}),
    connections,
    pipelining: PIPELINING,
    duration: seconds,
    sampleInt: 250,
    timeout: 10,
  });
  const latencies: number[] = [];
  if (record) instance.on('response', (_client, _status, _bytes, ms) => latencies.push(ms));
  const result = await instance;
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count;
  return {
    requests: result.requests.total,
    seconds: result.duration,
    latencies,
    failures: result.errors + result.timeouts + result.non2xx,
    statusCodes,
  };
}

/**
 * One request at a time, each after the scenario's change (not timed): requests/s and latencies are
 * those of the requests alone.
 */
async function afterChanges(ctx: BenchContext, scenario: Scenario, seconds: number): Promise<Segment> {
  const end = performance.now() + seconds * 1000;
  const latencies: number[] = [];
  const statusCodes: Record<string, number> = {};
  let failures = 0;
  while (performance.now() < end) {
    await scenario.changeBefore!(ctx);
    const t = performance.now();
    const res = await ctx.request(scenario.method, scenario.path, {
      ...(scenario.headers ? { headers: scenario.headers } : {}),
      ...(scenario.body !== undefined ? { body: scenario.body } : {}),
    });
    latencies.push(performance.now() - t);
    statusCodes[res.status] = (statusCodes[res.status] ?? 0) + 1;
    if (res.status < 200 || res.status > 299) failures++;
  }
  const busy = latencies.reduce((a, b) => a + b, 0) / 1000;
  return { requests: latencies.length, seconds: busy, latencies, failures, statusCodes };
}

/**
 * The raw Argon2id verify rate on this machine: as many verifications in flight as the benchmark
 * has connections, for `seconds`, with the controller's parameters.
 */
async function argon2Rate(seconds: number, concurrency: number): Promise<Segment> {
  const password = randomBytes(18).toString('base64url');
  const hashed = await hashPassword(password);
  return inProcessRate(seconds, concurrency, async () => {
    if (!(await verify(hashed, password))) throw new Error('argon2 verify failed');
  });
}

/**
 * The raw rate of signing a client certificate from a CSR, as enrollment does (the CSR read and
 * checked, the certificate made and signed), with the controller's own signing CA read from its data
 * directory, in this process.
 */
async function csrSigningRate(dataDir: string, seconds: number, concurrency: number): Promise<Segment> {
  const issuer = {
    cert: new X509Certificate(readFileSync(join(dataDir, 'pki', 'signing-ca.cert.pem'))),
    key: await importSigningKey(readFileSync(join(dataDir, 'pki', 'signing-ca.key.pem'), 'utf8')),
  };
  const csr = await benchCsr();
  return inProcessRate(seconds, concurrency, async () => {
    const checked = await checkCsrPem(csr);
    await createClientCertificate(checked.publicKey, 'bench', randomBytes(8).toString('hex'), issuer, new Date());
  });
}

/** `concurrency` loops of `op` for `seconds`: its rate and latencies. */
async function inProcessRate(seconds: number, concurrency: number, op: () => Promise<void>): Promise<Segment> {
  const end = performance.now() + seconds * 1000;
  const started = performance.now();
  const latencies: number[] = [];
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await op();
        latencies.push(performance.now() - t);
        done++;
      }
    }),
  );
  return { requests: done, seconds: (performance.now() - started) / 1000, latencies, failures: 0, statusCodes: {} };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

interface EndpointResult {
  name: string;
  method: string;
  path: string;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /**
   * Server CPU per request, in µs: its main thread (which bounds its rate: JavaScript runs there) and
   * all its threads (the WAL flush, the garbage collector's helpers). Null where not measured.
   */
  cpuUsPerRequest: { main: number; all: number } | null;
  ratio: number;
  /** What the ratio is taken against. */
  against: string;
  target: number | null;
  /** Highest acceptable p99, in milliseconds. */
  p99TargetMs: number | null;
  pass: boolean | null;
  segmentsRequestsPerSecond: number[];
  failures: number;
  statusCodes: Record<string, number>;
}

type Summary = Omit<EndpointResult, 'ratio' | 'against' | 'target' | 'p99TargetMs' | 'pass'>;

function summarise(scenario: Scenario, segments: Segment[], warmup: Segment): Summary {
  const requests = segments.reduce((n, s) => n + s.requests, 0);
  const seconds = segments.reduce((n, s) => n + s.seconds, 0);
  const latencies = segments.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const statusCodes: Record<string, number> = {};
  for (const s of [warmup, ...segments]) {
    for (const [code, count] of Object.entries(s.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  }
  return {
    name: scenario.name,
    method: scenario.method,
    path: scenario.path,
    requestsPerSecond: requests / seconds,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    cpuUsPerRequest: segments.every((s) => s.serverCpuNs)
      ? {
          main: segments.reduce((n, s) => n + s.serverCpuNs!.main, 0) / 1000 / requests,
          all: segments.reduce((n, s) => n + s.serverCpuNs!.all, 0) / 1000 / requests,
        }
      : null,
    segmentsRequestsPerSecond: segments.map((s) => Math.round(s.requests / s.seconds)),
    failures: [warmup, ...segments].reduce((n, s) => n + s.failures, 0),
    statusCodes,
  };
}

/** Columns padded to their widest cell, the first one left-aligned. */
function layout(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

const verdict = (pass: boolean | null): string => (pass === null ? '-' : pass ? 'PASS' : 'BELOW');

function table(results: EndpointResult[]): string {
  const head = ['endpoint', 'req/s', 'p50 ms', 'p99 ms', 'main µs', 'ratio', 'vs', 'target', 'result'];
  const rows = results.map((r) => {
    const targets = [
      ...(r.target !== null && r.target > 0 ? [`>= ${r.target}`] : []),
      ...(r.p99TargetMs !== null ? [`p99 <= ${r.p99TargetMs} ms`] : []),
    ];
    return [
      `${r.name}: ${r.method} ${r.path}`,
      r.requestsPerSecond.toFixed(0),
      r.p50Ms.toFixed(2),
      r.p99Ms.toFixed(2),
      r.cpuUsPerRequest ? r.cpuUsPerRequest.main.toFixed(0) : '-',
      Number.isNaN(r.ratio) ? '-' : r.ratio.toFixed(2),
      r.against,
      targets.length === 0 ? '-' : targets.join(', '),
      verdict(r.pass),
    ];
  });
  return layout(head, rows);
}

/** A figure of the scale section that is not a request rate: a time or a size, and its upper bound. */
interface Measure {
  name: string;
  value: number;
  unit: 'ms' | 'MiB';
  /** Highest acceptable value. */
  target: number;
  pass: boolean;
  /** How it was taken (shown beside it). */
  detail: string;
  samples?: number[];
}

function measureTable(measures: Measure[]): string {
  const head = ['measure', 'value', 'target', 'result', 'detail'];
  const rows = measures.map((m) => [
    m.name,
    `${m.value.toFixed(m.unit === 'MiB' ? 0 : 1)} ${m.unit}`,
    `<= ${m.target} ${m.unit}`,
    verdict(m.pass),
    m.detail,
  ]);
  return layout(head, rows);
}

// ---------------------------------------------------------------------------------------------------
// a section: endpoints of one controller, measured against its baseline route

/** A rate measured in this process, the baseline of the scenarios that name its kind. */
interface InProcessBaseline {
  kind: 'argon2' | 'csr-sign';
  name: string;
  rate(seconds: number, concurrency: number): Promise<Segment>;
}

interface Section {
  ctx: BenchContext;
  /** The baseline first. */
  endpoints: Scenario[];
  duration: number;
  connections: number;
  /** In-process rates measured beside the endpoints, for the scenarios whose baseline they are. */
  inProcess: InProcessBaseline[];
  /** Runs once every endpoint is warmed up, before the measured runs. */
  afterWarmup?: () => void;
  /** The controller's process, whose CPU time is measured beside its requests. */
  serverPid: number;
}

/** Sets every endpoint up and checks it answers 2xx over verified TLS. */
async function prepare(ctx: BenchContext, endpoints: Scenario[]): Promise<void> {
  for (const scenario of endpoints) await scenario.setup?.(ctx, scenario);
  for (const s of endpoints) {
    await s.dynamic?.prepare(ctx, 1, 0);
    const headers = s.dynamic?.headers ? { ...s.headers, ...s.dynamic.headers() } : s.headers;
    const body = s.dynamic ? s.dynamic.body() : s.body;
    const requestOf = s.server === 'peer' ? ctx.peer.request : ctx.request;
    const res = await requestOf(s.method, firstPath(s), {
      ...(s.tls ? { tls: s.tls } : {}),
      ...(headers ? { headers } : {}),
      ...(body !== undefined ? { body } : {}),
    });
    s.dynamic?.answered(res.status, res.body);
    if (res.status < 200 || res.status > 299) {
      const url = s.server === 'peer' ? ctx.peer.url : ctx.url;
      throw new Error(`${s.method} ${url}${firstPath(s)} answered ${res.status} before the run: ${res.body.slice(0, 500)}`);
    }
  }
}

/**
 * Warm-up, then the measured time of each endpoint in two halves run in mirrored order; answers one
 * result per endpoint (and the Argon2id rate when asked), with ratios to the baseline.
 */
async function measureSection(section: Section): Promise<EndpointResult[]> {
  const { ctx, endpoints, duration, connections } = section;
  const urlOf = (s: Scenario): string => (s.server === 'peer' ? ctx.peer.url : ctx.url);
  const run = async (s: Scenario, seconds: number, record: boolean): Promise<Segment> => {
    if (s.changeBefore) return afterChanges(ctx, s, seconds);
    await s.dynamic?.prepare(ctx, s.connections ?? connections, seconds);
    const before = s.server === 'peer' ? undefined : cpuTimeOf(section.serverPid);
    const segment = await drive(urlOf(s), s, seconds, s.connections ?? connections, record);
    const after = before && cpuTimeOf(section.serverPid);
    return after ? { ...segment, serverCpuNs: { main: after.main - before.main, all: after.all - before.all } } : segment;
  };
  const warmups = new Map<Scenario, Segment>();
  for (const s of endpoints) warmups.set(s, await run(s, WARMUP_SECONDS, false));

  const inProcess = new Map(section.inProcess.map((b) => [{ name: b.name, method: 'POST', path: '(in process, no HTTP)', target: 1 } as Scenario, b]));
  const measure = (s: Scenario, seconds: number, record: boolean) => {
    const own = inProcess.get(s);
    return own ? own.rate(seconds, connections) : run(s, seconds, record);
  };
  const measured = [...endpoints, ...inProcess.keys()];
  for (const [s, b] of inProcess) warmups.set(s, await b.rate(1, connections));
  section.afterWarmup?.();

  const segments = new Map<Scenario, Segment[]>(measured.map((s) => [s, []]));
  for (const round of [measured, [...measured].reverse()]) {
    for (const s of round) segments.get(s)!.push(await measure(s, duration / 2, true));
  }

  const peerScenario = measured.find((s) => s.isPeer);
  const bases = new Map<Scenario, Summary>(measured.map((b) => [b, summarise(b, segments.get(b)!, warmups.get(b)!)]));
  const baseOf = (s: Scenario): Scenario => {
    if (s.baseline === 'peer' && peerScenario) return peerScenario;
    if (s.baseline === 'argon2' || s.baseline === 'csr-sign') return [...inProcess].find(([, b]) => b.kind === s.baseline)![0];
    if (s.versus !== undefined) return measured.find((m) => m.name === s.versus) ?? baseline;
    return baseline;
  };
  return measured.map((s): EndpointResult => {
    const r = summarise(s, segments.get(s)!, warmups.get(s)!);
    const none = { target: null, p99TargetMs: null, pass: null };
    if (s === baseline || inProcess.has(s)) return { ...r, ratio: 1, against: '-', ...none };
    const base = baseOf(s);
    // Under another load than the baseline's, a ratio to it means nothing.
    const own = s.connections !== undefined && s.connections !== connections;
    const ratio = own ? NaN : r.requestsPerSecond / bases.get(base)!.requestsPerSecond;
    // The peer is reported beside the baseline route, with no target of its own.
    if (s.isPeer) return { ...r, ratio, against: base.name, ...none };
    const p99TargetMs = s.p99TargetMs ?? null;
    const checks = [...(s.target > 0 && !own ? [ratio >= s.target] : []), ...(p99TargetMs !== null ? [r.p99Ms <= p99TargetMs] : [])];
    return {
      ...r,
      ratio,
      against: own ? `(${s.connections} conn.)` : base.name,
      target: s.target,
      p99TargetMs,
      pass: checks.length === 0 ? null : checks.every(Boolean),
    };
  });
}

// ---------------------------------------------------------------------------------------------------
// the usual section: a fresh controller

/** Child processes and directories to clean up, also on SIGINT/SIGTERM. */
interface Running {
  children: Set<ChildProcess>;
  dirs: Set<string>;
}

async function mainSection(s: Settings, running: Running): Promise<EndpointResult[]> {
  const dataDir = mkdtempSync(join(tmpdir(), 'overlay-bench-'));
  running.dirs.add(dataDir);
  let child: ChildProcess | undefined;
  let peer: ChildProcess | undefined;
  try {
    const admin = { username: 'admin', password: randomBytes(18).toString('base64url') };
    const server = await startServer(dataDir, admin);
    child = server.child;
    running.children.add(child);
    const ca = ['root-ca.cert.pem', 'signing-ca.cert.pem'].map((f) => readFileSync(join(dataDir, 'pki', f), 'utf8'));
    const chosen = scenarios.filter((x) => s.only === undefined || x.name.includes(s.only));
    const peerServer = chosen.some((x) => x.server === 'peer') ? await startPeer(dataDir) : undefined;
    peer = peerServer?.child;
    if (peer) running.children.add(peer);
    const ctx: BenchContext = {
      url: server.url,
      admin,
      request: verifiedRequest(new URL(server.url), ca),
      peer: {
        url: peerServer?.url ?? '',
        request: peerServer ? verifiedRequest(new URL(peerServer.url), ca) : () => Promise.reject(new Error('no peer server')),
      },
    };
    // Set up, then one request per endpoint over verified TLS: the listener presents a chain to the
    // controller's CA, and every endpoint answers 2xx before it is measured.
    const endpoints = [baseline, ...chosen];
    await prepare(ctx, endpoints);

    process.stdout.write(
      `overlay bench: ${server.url}${peerServer ? ` (peer oidc-provider: ${peerServer.url})` : ''}, node ${process.version}, ` +
        `${cpus().length} CPUs, ${s.connections} connections, pipelining ${PIPELINING}, warm-up ${WARMUP_SECONDS} s, ` +
        `measured ${s.duration} s per endpoint\n`,
    );
    const results = await measureSection({
      ctx,
      endpoints,
      duration: s.duration,
      connections: s.connections,
      serverPid: child.pid!,
      inProcess: [
        ...(chosen.some((x) => x.baseline === 'argon2') ? [{ kind: 'argon2', name: 'argon2id verify', rate: argon2Rate } as const] : []),
        ...(chosen.some((x) => x.baseline === 'csr-sign')
          ? [{ kind: 'csr-sign', name: 'CSR signing', rate: (sec: number, conc: number) => csrSigningRate(dataDir, sec, conc) } as const]
          : []),
      ],
    });
    process.stdout.write(`\n${table(results)}\n\n`);
    return results;
  } finally {
    for (const c of [peer, child]) {
      if (!c) continue;
      await stopServer(c);
      running.children.delete(c);
    }
    rmSync(dataDir, { recursive: true, force: true });
    running.dirs.delete(dataDir);
  }
}

// ---------------------------------------------------------------------------------------------------
// the scale section: a controller on a copy of the scale store

const MIB = 1024 * 1024;
const SCALE_TARGETS = { startMs: 5000, memoryMiB: 1024, attributeChangeMs: 50, policyCreateMs: 2000 } as const;

/**
 * Nanoseconds a process has run on a CPU so far, its main thread and all its threads (Linux:
 * /proc/<pid>/task/<tid>/schedstat); undefined elsewhere.
 */
function cpuTimeOf(pid: number): { main: number; all: number } | undefined {
  const ran = (tid: string): number => Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
  try {
    // A thread that ends between the listing and its read no longer counts.
    const all = readdirSync(`/proc/${pid}/task`).reduce((n, tid) => {
      try {
        return n + ran(tid);
      } catch {
        return n;
      }
    }, 0);
    return { main: ran(String(pid)), all };
  } catch {
    return undefined;
  }
}

/** A field of /proc/<pid>/status in MiB (VmRSS: resident now, VmHWM: peak resident). */
function procMemory(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return NaN; // not Linux: reported as not met
  }
  const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(status);
  return m ? (Number(m[1]) * 1024) / MIB : NaN;
}

/** Requests over one verified keep-alive connection, each timed from sending to the end of its answer. */
function timedClient(base: URL, ca: string[]): {
  send(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Response & { ms: number }>;
  close(): void;
} {
  const agent = new Agent({ keepAlive: true, maxSockets: 1, ca, rejectUnauthorized: true });
  return {
    send: (method, path, headers, body) =>
      new Promise((resolve, reject) => {
        const payload = body === undefined ? undefined : JSON.stringify(body);
        const started = performance.now();
        const req = httpsRequest(
          {
            host: base.hostname,
            port: base.port,
            method,
            path,
            agent,
            timeout: 30_000,
            headers: { ...headers, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                headers: res.headers,
                body: Buffer.concat(chunks).toString('utf8'),
                ms: performance.now() - started,
              }),
            );
            res.on('error', reject);
          },
        );
        req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
        req.on('error', reject);
        req.end(payload);
      }),
    close: () => agent.destroy(),
  };
}

function median(values: number[]): number {
  return percentile([...values].sort((a, b) => a - b), 50);
}

interface ScaleResults {
  store: {
    dir: string;
    generated: boolean;
    generationSeconds: number;
    generatedAt: string;
    sizes: ScaleInfo['sizes'];
    rows: ScaleInfo['rows'];
    servicesPerIdentity: ScaleInfo['servicesPerIdentity'];
    copySeconds: number;
  };
  endpoints: EndpointResult[];
  measures: Measure[];
  /** Write requests of the section that did not answer as expected. */
  failures: string[];
}

async function scaleSection(s: Settings, running: Running): Promise<ScaleResults> {
  const t0 = performance.now();
  const store = await ensureScaleStore(SCALE_DIR, { log: (m) => process.stdout.write(`scale store: ${m}\n`) });
  const { info } = store;
  process.stdout.write(
    store.generated
      ? `scale store generated in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${SCALE_DIR}\n`
      : `scale store reused: ${SCALE_DIR} (generated ${info.generatedAt} in ${info.generationSeconds} s)\n`,
  );
  const runDir = join(SCALE_DIR, '..', `scale-run-${process.pid}`);
  rmSync(runDir, { recursive: true, force: true });
  running.dirs.add(runDir);
  let child: ChildProcess | undefined;
  const failures: string[] = [];
  try {
    const copyStarted = performance.now();
    copyScaleStore(SCALE_DIR, runDir);
    const copySeconds = (performance.now() - copyStarted) / 1000;

    const spawned = performance.now();
    const server = await startServer(runDir, info.admin);
    const startMs = performance.now() - spawned;
    child = server.child;
    running.children.add(child);
    const pid = child.pid!;
    const ca = ['root-ca.cert.pem', 'signing-ca.cert.pem'].map((f) => readFileSync(join(runDir, 'pki', f), 'utf8'));
    const ctx: BenchContext = {
      url: server.url,
      admin: info.admin,
      request: verifiedRequest(new URL(server.url), ca),
      peer: { url: '', request: () => Promise.reject(new Error('no peer server in the scale section')) },
      scale: info,
    };
    const endpoints = [baseline, ...scaleScenarios];
    await prepare(ctx, endpoints);
    const sz = info.sizes;
    process.stdout.write(
      `overlay bench, scale: ${server.url} on a copy of the scale store (${sz.identities} identities, ${sz.services} services, ` +
        `${sz.edgeRouters} edge routers, ${sz.servicePolicies + sz.edgeRouterPolicies + sz.serviceEdgeRouterPolicies} policies; ` +
        `copied in ${copySeconds.toFixed(1)} s), ${s.connections} connections, measured ${s.duration} s per endpoint\n`,
    );

    let rssAfterWarmup = NaN;
    const endpointResults = await measureSection({
      ctx,
      endpoints,
      duration: s.duration,
      connections: s.connections,
      serverPid: pid,
      inProcess: [],
      afterWarmup: () => {
        rssAfterWarmup = procMemory(pid, 'VmRSS');
      },
    });

    // Writes, one at a time over one keep-alive connection, as the admin.
    const client = timedClient(new URL(server.url), ca);
    const measures: Measure[] = [];
    try {
      const login = await client.send('POST', '/edge/client/v1/authenticate?method=password', {}, info.admin);
      const token = login.headers['overlay-session'];
      if (login.status !== 200 || typeof token !== 'string') throw new Error(`scale admin login failed: ${login.status} ${login.body}`);
      const auth = { 'overlay-session': token };
      const api = '/edge/management/v1';
      const expect = (res: Response, status: number, what: string): boolean => {
        if (res.status === status) return true;
        failures.push(`${what}: ${res.status} ${res.body.slice(0, 300)}`);
        return false;
      };
      const policyIdsOf = async (identityId: string): Promise<string> => {
        const res = await client.send('GET', `${api}/identities/${identityId}/service-policies?limit=500`, auth);
        expect(res, 200, 'list the service policies of the changed identity');
        return JSON.stringify(((JSON.parse(res.body) as { data?: { id: string }[] }).data ?? []).map((p) => p.id).sort());
      };

      // Role attribute changes that move the identity's links; the first one loads the policy index.
      const change = info.attributeChange;
      const before = await policyIdsOf(change.identityId);
      const changes: number[] = [];
      const count = s.quick ? 10 : 20;
      for (let i = 0; i < count; i++) {
        const res = await client.send('PATCH', `${api}/identities/${change.identityId}`, auth, { roleAttributes: change.roleAttributes[(i + 1) % 2] });
        if (!expect(res, 200, `PATCH identity ${change.identityId}`)) break;
        changes.push(res.ms);
        if (i === 0 && (await policyIdsOf(change.identityId)) === before) failures.push('the role attribute change did not move the identity\'s service policies');
      }
      if (changes.length > 0) {
        const worst = Math.max(...changes);
        measures.push({
          name: 'identity role attribute change: PATCH /identities/{id}',
          value: worst,
          unit: 'ms',
          target: SCALE_TARGETS.attributeChangeMs,
          pass: worst <= SCALE_TARGETS.attributeChangeMs,
          detail: `max of ${changes.length}; median ${median(changes).toFixed(1)} ms, first ${changes[0]!.toFixed(1)} ms (loads the policy index)`,
          samples: changes.map((ms) => Math.round(ms * 10) / 10),
        });
      }

      // Service policies selecting about 10,000 identities each.
      const creates: number[] = [];
      let selected = 0;
      const policies = info.largePolicies.slice(0, s.quick ? 1 : 3);
      for (const [i, p] of policies.entries()) {
        const res = await client.send('POST', `${api}/service-policies`, auth, {
          name: `scale-bench-${process.pid}-${i}`,
          type: 'Dial',
          semantic: 'AnyOf',
          identityRoles: p.identityRoles,
          serviceRoles: p.serviceRoles,
          postureCheckRoles: [],
        });
        if (!expect(res, 201, 'POST a service policy')) break;
        creates.push(res.ms);
        const id = (JSON.parse(res.body) as { data: { id: string } }).data.id;
        const members = await client.send('GET', `${api}/service-policies/${id}/identities?limit=1`, auth);
        expect(members, 200, 'list the identities of the new policy');
        selected = (JSON.parse(members.body) as { meta?: { pagination?: { totalCount?: number } } }).meta?.pagination?.totalCount ?? -1;
        if (selected !== p.identities) failures.push(`the new policy selects ${selected} identities, not ${p.identities}`);
      }
      if (creates.length > 0) {
        const worst = Math.max(...creates);
        measures.push({
          name: `service policy create: POST /service-policies`,
          value: worst,
          unit: 'ms',
          target: SCALE_TARGETS.policyCreateMs,
          pass: worst <= SCALE_TARGETS.policyCreateMs,
          detail: `max of ${creates.length}, each selecting ${selected} identities; median ${median(creates).toFixed(1)} ms`,
          samples: creates.map((ms) => Math.round(ms * 10) / 10),
        });
      }
    } finally {
      client.close();
    }

    const peak = procMemory(pid, 'VmHWM');
    measures.unshift(
      {
        name: 'controller start (spawn to ready)',
        value: startMs,
        unit: 'ms',
        target: SCALE_TARGETS.startMs,
        pass: startMs <= SCALE_TARGETS.startMs,
        detail: 'node bench/server.js on the copied store',
      },
      {
        name: 'resident memory after warm-up (VmRSS)',
        value: rssAfterWarmup,
        unit: 'MiB',
        target: SCALE_TARGETS.memoryMiB,
        pass: rssAfterWarmup <= SCALE_TARGETS.memoryMiB,
        detail: 'after the warm-up of every endpoint',
      },
      {
        name: 'peak resident memory (VmHWM)',
        value: peak,
        unit: 'MiB',
        target: SCALE_TARGETS.memoryMiB,
        pass: peak <= SCALE_TARGETS.memoryMiB,
        detail: 'over the whole section, writes included',
      },
    );
    process.stdout.write(`\n${table(endpointResults)}\n\n${measureTable(measures)}\n\n`);
    return {
      store: {
        dir: SCALE_DIR,
        generated: store.generated,
        generationSeconds: info.generationSeconds,
        generatedAt: info.generatedAt,
        sizes: info.sizes,
        rows: info.rows,
        servicesPerIdentity: info.servicesPerIdentity,
        copySeconds,
      },
      endpoints: endpointResults,
      measures,
      failures,
    };
  } finally {
    if (child) {
      await stopServer(child);
      running.children.delete(child);
    }
    rmSync(runDir, { recursive: true, force: true });
    running.dirs.delete(runDir);
  }
}

// ---------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const s = settings(process.argv.slice(2), process.env);
  const running: Running = { children: new Set(), dirs: new Set() };
  const onSignal = (): void => {
    for (const child of running.children) child.kill('SIGTERM');
    for (const dir of running.dirs) rmSync(dir, { recursive: true, force: true });
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    const results = s.main ? await mainSection(s, running) : [];
    let scale: ScaleResults | undefined;
    let scaleError: string | undefined;
    if (s.scale) {
      try {
        scale = await scaleSection(s, running);
      } catch (err) {
        scaleError = err instanceof Error ? err.message : String(err);
      }
    }

    const failed = [...results, ...(scale?.endpoints ?? [])].filter((r) => r.failures > 0);
    const ok = failed.length === 0 && scaleError === undefined && (scale?.failures.length ?? 0) === 0;
    mkdirSync(join(RESULTS_FILE, '..'), { recursive: true });
    writeFileSync(
      RESULTS_FILE,
      JSON.stringify(
        {
          date: new Date().toISOString(),
          node: process.version,
          cpus: cpus().length,
          connections: s.connections,
          pipelining: PIPELINING,
          warmupSeconds: WARMUP_SECONDS,
          measuredSeconds: s.duration,
          ok,
          endpoints: results,
          scale: scale ?? (scaleError !== undefined ? { error: scaleError } : null),
        },
        null,
        2,
      ) + '\n',
    );
    process.stdout.write(`results written to ${RESULTS_FILE}\n`);

    for (const r of failed) {
      process.stderr.write(
        `bench: ${r.method} ${r.path}: ${r.failures} failed requests (status codes: ${JSON.stringify(r.statusCodes)})\n`,
      );
    }
    for (const f of scale?.failures ?? []) process.stderr.write(`bench: scale: ${f}\n`);
    if (scaleError !== undefined) process.stderr.write(`bench: scale section: ${scaleError}\n`);
    return ok ? 0 : 1;
  } finally {
    for (const child of running.children) await stopServer(child);
    for (const dir of running.dirs) rmSync(dir, { recursive: true, force: true });
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
