// `npm run bench`: starts bench/server.js on a fresh data directory, drives each scenario and the
// baseline with autocannon over HTTPS keep-alive, and reports requests/s, p50/p99 latency and the
// ratio to the baseline (docs: DESIGN.md, Performance).
//
//   npm run bench [-- --quick]      measured 10 s per endpoint (3 s with --quick)
//   BENCH_DURATION=<seconds>        measured seconds per endpoint, overrides both
//   BENCH_CONNECTIONS=<n>           concurrent connections (default 20)
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
// The ratio is reported, not enforced: the exit status is 0 whatever the ratios, and non-zero when a
// request failed (connection error, timeout or a status other than 2xx), because then the figures
// measure the failure. Results are also written to bench/data/latest.json.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { verify } from '@node-rs/argon2';
import { hashPassword } from '../src/auth/passwords.js';
import { baseline, scenarios, type BenchContext, type Response, type Scenario } from './scenarios.js';

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
}

function settings(argv: string[], env: NodeJS.ProcessEnv): Settings {
  const positive = (name: string, value: string | undefined): number | undefined => {
    if (value === undefined || value === '') return undefined;
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(value)}`);
    return n;
  };
  return {
    duration: positive('BENCH_DURATION', env.BENCH_DURATION) ?? (argv.includes('--quick') ? 3 : 10),
    connections: Math.round(positive('BENCH_CONNECTIONS', env.BENCH_CONNECTIONS) ?? 20),
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
  /** Milliseconds, one per response; empty for a warm-up. */
  latencies: number[];
  failures: number;
  statusCodes: Record<string, number>;
}

async function drive(url: string, scenario: Scenario, seconds: number, connections: number, record: boolean): Promise<Segment> {
  const dynamic = scenario.dynamic;
  const instance = autocannon({
    url: url + scenario.path,
    method: scenario.method,
    ...(scenario.headers ? { headers: scenario.headers } : {}),
    ...(scenario.body !== undefined ? { body: scenario.body } : {}),
    ...(dynamic
      ? {
          requests: [
            {
              method: scenario.method,
              path: scenario.path,
              ...(scenario.headers ? { headers: scenario.headers } : {}),
              setupRequest: (req: Record<string, unknown>) => ({ ...req, body: dynamic.body() }),
              onResponse: (status: number, body: string) => dynamic.answered(status, body),
            },
          ],
        }
      : {}),
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
 * The raw Argon2id verify rate on this machine: as many verifications in flight as the benchmark
 * has connections, for `seconds`, with the controller's parameters.
 */
async function argon2Rate(seconds: number, concurrency: number): Promise<Segment> {
  const password = randomBytes(18).toString('base64url');
  const hashed = await hashPassword(password);
  const end = performance.now() + seconds * 1000;
  const started = performance.now();
  const latencies: number[] = [];
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        if (!(await verify(hashed, password))) throw new Error('argon2 verify failed');
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
  ratio: number;
  /** What the ratio is taken against. */
  against: string;
  target: number | null;
  pass: boolean | null;
  segmentsRequestsPerSecond: number[];
  failures: number;
  statusCodes: Record<string, number>;
}

function summarise(scenario: Scenario, segments: Segment[], warmup: Segment): Omit<EndpointResult, 'ratio' | 'against' | 'target' | 'pass'> {
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
    segmentsRequestsPerSecond: segments.map((s) => Math.round(s.requests / s.seconds)),
    failures: [warmup, ...segments].reduce((n, s) => n + s.failures, 0),
    statusCodes,
  };
}

function table(results: EndpointResult[]): string {
  const head = ['endpoint', 'req/s', 'p50 ms', 'p99 ms', 'ratio', 'vs', 'target', 'result'];
  const rows = results.map((r) => [
    `${r.name}: ${r.method} ${r.path}`,
    r.requestsPerSecond.toFixed(0),
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    r.ratio.toFixed(2),
    r.against,
    r.target === null ? '-' : `>= ${r.target}`,
    r.pass === null ? '-' : r.pass ? 'PASS' : 'BELOW',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

// ---------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const { duration, connections } = settings(process.argv.slice(2), process.env);
  const dataDir = mkdtempSync(join(tmpdir(), 'overlay-bench-'));
  let child: ChildProcess | undefined;
  let peer: ChildProcess | undefined;
  const onSignal = (): void => {
    if (child) child.kill('SIGTERM');
    if (peer) peer.kill('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    const admin = { username: 'admin', password: randomBytes(18).toString('base64url') };
    const server = await startServer(dataDir, admin);
    child = server.child;
    const ca = ['root-ca.cert.pem', 'signing-ca.cert.pem'].map((f) => readFileSync(join(dataDir, 'pki', f), 'utf8'));
    const peerServer = scenarios.some((s) => s.server === 'peer') ? await startPeer(dataDir) : undefined;
    peer = peerServer?.child;
    const ctx: BenchContext = {
      url: server.url,
      admin,
      request: verifiedRequest(new URL(server.url), ca),
      peer: {
        url: peerServer?.url ?? '',
        request: peerServer ? verifiedRequest(new URL(peerServer.url), ca) : () => Promise.reject(new Error('no peer server')),
      },
    };
    const endpoints = [baseline, ...scenarios];
    const urlOf = (s: Scenario): string => (s.server === 'peer' ? ctx.peer.url : server.url);
    const requestOf = (s: Scenario): BenchContext['request'] => (s.server === 'peer' ? ctx.peer.request : ctx.request);

    // Set up, then one request per endpoint over verified TLS: the listener presents a chain to the
    // controller's CA, and every endpoint answers 2xx before it is measured.
    for (const scenario of endpoints) await scenario.setup?.(ctx, scenario);
    for (const s of endpoints) {
      await s.dynamic?.prepare(ctx, 1);
      const body = s.dynamic ? s.dynamic.body() : s.body;
      const res = await requestOf(s)(s.method, s.path, {
        ...(s.headers ? { headers: s.headers } : {}),
        ...(body !== undefined ? { body } : {}),
      });
      s.dynamic?.answered(res.status, res.body);
      if (res.status < 200 || res.status > 299) {
        throw new Error(`${s.method} ${urlOf(s)}${s.path} answered ${res.status} before the run: ${res.body.slice(0, 500)}`);
      }
    }

    process.stdout.write(
      `overlay bench: ${server.url}${peerServer ? ` (peer oidc-provider: ${peerServer.url})` : ''}, node ${process.version}, ` +
        `${cpus().length} CPUs, ${connections} connections, pipelining ${PIPELINING}, warm-up ${WARMUP_SECONDS} s, ` +
        `measured ${duration} s per endpoint\n`,
    );

    const run = async (s: Scenario, seconds: number, record: boolean): Promise<Segment> => {
      await s.dynamic?.prepare(ctx, connections);
      return drive(urlOf(s), s, seconds, connections, record);
    };
    const warmups = new Map<Scenario, Segment>();
    for (const s of endpoints) warmups.set(s, await run(s, WARMUP_SECONDS, false));

    const argon2: Scenario = { name: 'argon2id verify', method: 'POST', path: '(in process, no HTTP)', target: 1 };
    const measure = (s: Scenario, seconds: number, record: boolean) =>
      s === argon2 ? argon2Rate(seconds, connections) : run(s, seconds, record);
    const measured = scenarios.some((s) => s.baseline === 'argon2') ? [...endpoints, argon2] : endpoints;
    warmups.set(argon2, await argon2Rate(1, connections));

    const segments = new Map<Scenario, Segment[]>(measured.map((s) => [s, []]));
    for (const round of [measured, [...measured].reverse()]) {
      for (const s of round) segments.get(s)!.push(await measure(s, duration / 2, true));
    }

    const peerScenario = measured.find((s) => s.isPeer);
    const bases = new Map<Scenario, ReturnType<typeof summarise>>(
      [baseline, argon2, ...(peerScenario ? [peerScenario] : [])]
        .filter((b) => segments.has(b))
        .map((b) => [b, summarise(b, segments.get(b)!, warmups.get(b)!)]),
    );
    const baseOf = (s: Scenario): Scenario => (s.baseline === 'argon2' ? argon2 : s.baseline === 'peer' && peerScenario ? peerScenario : baseline);
    const results: EndpointResult[] = measured.map((s) => {
      const r = summarise(s, segments.get(s)!, warmups.get(s)!);
      if (s === baseline || s === argon2) return { ...r, ratio: 1, against: '-', target: null, pass: null };
      const base = baseOf(s);
      const ratio = r.requestsPerSecond / bases.get(base)!.requestsPerSecond;
      // The peer is reported beside the baseline route, with no target of its own.
      if (s.isPeer) return { ...r, ratio, against: base.name, target: null, pass: null };
      return { ...r, ratio, against: base.name, target: s.target, pass: ratio >= s.target };
    });

    process.stdout.write(`\n${table(results)}\n\n`);

    const failed = results.filter((r) => r.failures > 0);
    mkdirSync(join(RESULTS_FILE, '..'), { recursive: true });
    writeFileSync(
      RESULTS_FILE,
      JSON.stringify(
        {
          date: new Date().toISOString(),
          node: process.version,
          cpus: cpus().length,
          connections,
          pipelining: PIPELINING,
          warmupSeconds: WARMUP_SECONDS,
          measuredSeconds: duration,
          ok: failed.length === 0,
          endpoints: results,
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
    return failed.length === 0 ? 0 : 1;
  } finally {
    if (peer) await stopServer(peer);
    if (child) await stopServer(child);
    rmSync(dataDir, { recursive: true, force: true });
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
