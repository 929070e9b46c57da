// End to end: the controller as an operator starts it (`npm start`), over real HTTPS. A client
// bootstraps trust from the EST cacerts endpoint, then talks to the controller trusting only those
// CAs. A restart on the same data directory keeps the PKI, so that trust survives it.
//
// Processes are started in their own process group. `npm start` execs the controller in place of
// npm's shell, so the SIGTERM an operator sends to npm reaches the controller; afterAll kills whole
// groups, so nothing outlives the test.
import 'reflect-metadata';
import { X509Certificates } from '@peculiar/x509';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request, type RequestOptions } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLIENT = '/edge/client/v1';
/** The first start builds the project (prestart) before it listens. */
const START_TIMEOUT_MS = 100_000;
const STOP_TIMEOUT_MS = 10_000;

interface LogRecord {
  pid?: number;
  msg?: string;
  [key: string]: unknown;
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Started {
  child: ChildProcess;
  records: LogRecord[];
  exited: Promise<Exit>;
  /** The first log record matching `match`, waiting for it if need be. */
  waitFor(match: (r: LogRecord) => boolean, timeoutMs: number): Promise<LogRecord>;
  /** Everything written so far, for failure messages. */
  output(): string;
}

const started: Started[] = [];

/** Starts a process in its own process group, collecting its pino log lines from stdout. */
function start(command: string, args: string[]): Started {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('OVERLAY_')) env[key] = value;
  const child = spawn(command, args, {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...env, OVERLAY_LOG_LEVEL: 'info' },
  });
  const records: LogRecord[] = [];
  const waiters = new Set<() => void>();
  let text = '';
  let pending = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      try {
        const record = JSON.parse(line) as unknown;
        if (record !== null && typeof record === 'object') records.push(record as LogRecord);
      } catch {
        // npm's banner and other plain lines
      }
    }
    for (const wake of waiters) wake();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
  });
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let exit: Exit | undefined;
  void exited.then((e) => {
    exit = e;
    for (const wake of waiters) wake();
  });

  const self: Started = {
    child,
    records,
    exited,
    output: () => text,
    waitFor: (match, timeoutMs) =>
      new Promise<LogRecord>((resolve, reject) => {
        const check = (): void => {
          const found = records.find(match);
          if (found) {
            done();
            resolve(found);
          } else if (exit) {
            done();
            reject(new Error(`${command} exited (${exit.signal ?? `code ${exit.code}`}) first; output:\n${text}`));
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`no matching log line within ${timeoutMs} ms; output:\n${text}`));
        }, timeoutMs);
        const done = (): void => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      }),
  };
  started.push(self);
  return self;
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took more than ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address !== 'object') throw new Error('no port');
  return address.port;
}

interface Response {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function get(port: number, path: string, tls: Pick<RequestOptions, 'ca' | 'rejectUnauthorized'>): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET', agent: false, timeout: 10_000, ...tls }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** The CA certificates of the EST cacerts answer, as PEM. */
function caCertificates(res: Response): string[] {
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/pkcs7-mime/);
  // Array.from, not .map: map on the Array subclass would construct another X509Certificates.
  return Array.from(new X509Certificates(Buffer.from(res.body, 'base64')), (cert) => cert.toString('pem'));
}

function derOf(pem: string | Buffer): Buffer {
  return new X509Certificate(pem).raw;
}

const listening = (r: LogRecord): boolean => typeof r.msg === 'string' && r.msg.startsWith('listening on');
const stopped = (r: LogRecord): boolean => r.msg === 'stopped';

describe('controller over real HTTPS', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'overlay-e2e-'));
  const pkiFile = (name: string): Buffer => readFileSync(join(dataDir, 'pki', name));
  let firstStart: { caPems: string[]; rootCa: Buffer; signingCa: Buffer } | undefined;

  afterAll(() => {
    // The whole group, even when its leader has exited: npm can be gone while the controller lives.
    for (const p of started) {
      if (p.child.pid === undefined) continue;
      try {
        process.kill(-p.child.pid, 'SIGKILL');
      } catch {
        // the group is already gone
      }
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(
    'npm start serves the Edge Client API under its own CA and stops cleanly on SIGTERM',
    async () => {
      const port = await freePort();
      const npm = start('npm', ['start', '--', '--data-dir', dataDir, '--listen', `127.0.0.1:${port}`]);
      const ready = await npm.waitFor(listening, START_TIMEOUT_MS);
      expect(ready.msg).toBe(`listening on https://127.0.0.1:${port}`);

      // Bootstrap: the one request that trusts nothing.
      const caPems = caCertificates(await get(port, `${CLIENT}/.well-known/est/cacerts`, { rejectUnauthorized: false }));
      expect(caPems).toHaveLength(2);
      const rootCa = pkiFile('root-ca.cert.pem');
      const signingCa = pkiFile('signing-ca.cert.pem');
      expect(caPems.map(derOf)).toEqual([derOf(rootCa), derOf(signingCa)]);

      // From here on, only the bootstrapped CAs are trusted.
      const res = await get(port, `${CLIENT}/version`, { ca: caPems, rejectUnauthorized: true });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(JSON.parse(res.body)).toMatchObject({
        data: {
          version: expect.stringMatching(/^\d+\.\d+\.\d+/),
          apiVersions: { 'edge-client': { v1: { path: CLIENT, apiBaseUrls: [`https://127.0.0.1:${port}${CLIENT}`] } } },
        },
        meta: { apiVersion: expect.any(String) },
      });

      // Trusting nothing (not even the system roots), the same call fails verification.
      await expect(get(port, `${CLIENT}/version`, { ca: [], rejectUnauthorized: true })).rejects.toMatchObject({
        code: expect.stringMatching(/^(UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|UNABLE_TO_VERIFY_LEAF_SIGNATURE)$/),
      });

      // SIGTERM to npm reaches the controller, which stops cleanly; npm exits with its status.
      expect(ready.pid).toEqual(expect.any(Number));
      npm.child.kill('SIGTERM');
      expect(await within(npm.exited, STOP_TIMEOUT_MS, 'stopping')).toEqual({ code: 0, signal: null });
      expect(npm.records.filter(stopped), npm.output()).toHaveLength(1);
      expect(npm.records.find((r) => r.msg === 'stopping')?.signal).toBe('SIGTERM');

      firstStart = { caPems, rootCa, signingCa };
    },
    120_000,
  );

  it(
    'a restart on the same data directory reuses the PKI, so bootstrapped trust still holds',
    async () => {
      if (!firstStart) throw new Error('needs the PKI of the first start, which failed');
      const port = await freePort();
      // The build from the first start is current; run the controller directly.
      const node = start(process.execPath, [
        'dist/src/cli/main.js',
        'controller',
        'run',
        '--data-dir',
        dataDir,
        '--listen',
        `127.0.0.1:${port}`,
      ]);
      await node.waitFor(listening, 30_000);
      expect(node.records.some((r) => r.msg?.startsWith('PKI: reusing root CA and signing CA'))).toBe(true);

      expect(pkiFile('root-ca.cert.pem').equals(firstStart.rootCa)).toBe(true);
      expect(pkiFile('signing-ca.cert.pem').equals(firstStart.signingCa)).toBe(true);
      const caPems = caCertificates(
        await get(port, `${CLIENT}/.well-known/est/cacerts`, { ca: firstStart.caPems, rejectUnauthorized: true }),
      );
      expect(caPems.map(derOf)).toEqual(firstStart.caPems.map(derOf));
      const res = await get(port, `${CLIENT}/version`, { ca: firstStart.caPems, rejectUnauthorized: true });
      expect(res.status).toBe(200);

      node.child.kill('SIGTERM');
      expect(await within(node.exited, STOP_TIMEOUT_MS, 'stopping')).toEqual({ code: 0, signal: null });
      expect(node.records.filter(stopped), node.output()).toHaveLength(1);
    },
    60_000,
  );
  // A SIGTERM while the controller was still starting (opening and seeding its store) used to end
  // the process by the signal's default action, wherever it was.
  it(
    'stops cleanly on a SIGTERM that comes while it is still starting',
    async () => {
      const fresh = mkdtempSync(join(tmpdir(), 'overlay-e2e-'));
      try {
        const port = await freePort();
        const node = start(process.execPath, ['dist/src/cli/main.js', 'controller', 'run', '--data-dir', fresh, '--listen', `127.0.0.1:${port}`]);
        await node.waitFor((r) => typeof r.msg === 'string' && r.msg.startsWith('PKI: '), 30_000);
        node.child.kill('SIGTERM');
        expect(await within(node.exited, STOP_TIMEOUT_MS, 'stopping'), node.output()).toEqual({ code: 0, signal: null });
        expect(node.records.find((r) => r.msg === 'stopping')?.signal).toBe('SIGTERM');
        expect(node.records.filter(stopped), node.output()).toHaveLength(1);
        expect(node.records.filter(listening)).toEqual([]);
      } finally {
        rmSync(fresh, { recursive: true, force: true });
      }
    },
    60_000,
  );
  // Ctrl-C under `npm start` reaches the controller twice at once (the terminal signals the process
  // group, npm passes its own on): it took the second for a demand to exit at once, exit 1.
  it(
    'stops cleanly when SIGINT comes twice in a moment',
    async () => {
      if (!firstStart) throw new Error('needs the data directory of the first start, which failed');
      const port = await freePort();
      const node = start(process.execPath, ['dist/src/cli/main.js', 'controller', 'run', '--data-dir', dataDir, '--listen', `127.0.0.1:${port}`]);
      await node.waitFor(listening, 30_000);
      node.child.kill('SIGINT');
      await node.waitFor((r) => r.msg === 'stopping', 5_000);
      node.child.kill('SIGINT');
      expect(await within(node.exited, STOP_TIMEOUT_MS, 'stopping'), node.output()).toEqual({ code: 0, signal: null });
      expect(node.records.filter(stopped), node.output()).toHaveLength(1);
    },
    60_000,
  );
  it('names the environment variable, not the flag, of a bad setting it came from', () => {
    if (!firstStart) throw new Error('needs the build of the first start, which failed');
    const env = { ...process.env, OVERLAY_LISTEN: 'nope', OVERLAY_DATA_DIR: dataDir };
    const fromEnv = spawnSync(process.execPath, ['dist/src/cli/main.js', 'controller', 'run'], { cwd: ROOT, env, encoding: 'utf8' });
    expect(fromEnv.status).toBe(2);
    expect(fromEnv.stderr).toBe('overlay: configuration error: OVERLAY_LISTEN: "nope" has no port; expected host:port, e.g. 127.0.0.1:1280\n');
    const fromFlag = spawnSync(process.execPath, ['dist/src/cli/main.js', 'controller', 'run', '--listen', 'nope'], { cwd: ROOT, env, encoding: 'utf8' });
    expect(fromFlag.stderr).toMatch(/^overlay: configuration error: --listen: "nope" has no port/);
  });
  // better-sqlite3 12 aborted on Node 24 while finalising prepared statements at exit, in about half
  // of the restarts on one data directory; every stop here must be a clean exit 0.
  it(
    'restarts again and again on the same data directory, each stop a clean exit',
    async () => {
      if (!firstStart) throw new Error('needs the data directory of the first start, which failed');
      for (let round = 0; round < 5; round++) {
        const port = await freePort();
        const node = start(process.execPath, ['dist/src/cli/main.js', 'controller', 'run', '--data-dir', dataDir, '--listen', `127.0.0.1:${port}`]);
        await node.waitFor(listening, 30_000);
        // a request that reads the store, so prepared statements exist when the process ends
        const res = await get(port, `${CLIENT}/version`, { ca: firstStart.caPems, rejectUnauthorized: true });
        expect(res.status).toBe(200);
        node.child.kill('SIGTERM');
        expect(await within(node.exited, STOP_TIMEOUT_MS, 'stopping'), node.output()).toEqual({ code: 0, signal: null });
        expect(node.output()).not.toMatch(/Assertion failed/);
      }
    },
    120_000,
  );
});
