// Start-up that does no harm: one controller per data directory (a lock file with the holder's pid,
// a stale one taken over), nothing in the data directory created or changed before every interface is
// bound, data-directory errors that name the path and what to do, the generated admin password file
// removed once that password is changed, and admin credentials given to an existing store reported
// as ignored; a store refused beside another secrets key than the one that sealed it, and the
// operator's way out of a lost one.
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join, relative } from 'node:path';
import { Writable } from 'node:stream';
import Database from 'better-sqlite3';
import { pino, type Logger } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp } from '../src/app/app.js';
import { LOCK_FILE } from '../src/app/data-dir-lock.js';
import { DataDirError } from '../src/app/data-dir.js';
import { loadConfig } from '../src/config/index.js';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
  authenticate,
  authenticatorApp,
  call,
  CLIENT,
  createIdentityWithPassword,
  json,
  login,
  MGMT,
  overTls,
  startTestController,
  tempDir,
} from './helpers.js';

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function scratch(): string {
  const dir = tempDir('overlay-start-');
  cleanups.push(dir.remove);
  return dir.path;
}

/** Every entry under `dir` with its mode, size, modification time and content digest. */
/** The listing of a directory once it stays the same for 400 ms (polled every 100 ms, 10 s at most). */
async function settled(dir: string): Promise<string[]> {
  let last = listing(dir);
  for (let same = 0, polls = 0; same < 4 && polls < 100; polls++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = listing(dir);
    same = JSON.stringify(now) === JSON.stringify(last) ? same + 1 : 0;
    last = now;
  }
  return last;
}

function listing(dir: string): string[] {
  if (!existsSync(dir)) return ['(absent)'];
  const entries: string[] = [];
  const walk = (path: string): void => {
    const stat = lstatSync(path);
    const digest = stat.isFile() ? createHash('sha256').update(readFileSync(path)).digest('hex').slice(0, 16) : '';
    entries.push(`${relative(dir, path) || '.'} ${(stat.mode & 0o7777).toString(8)} ${stat.size} ${stat.mtimeMs} ${digest}`);
    if (stat.isDirectory()) for (const name of readdirSync(path).sort()) walk(join(path, name));
  };
  walk(dir);
  return entries;
}

/** A logger whose JSON lines are kept. */
function capturingLog(): { log: Logger; lines: { level: number; msg: string; [key: string]: unknown }[] } {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { log: pino({ level: 'info' }, stream), lines };
}

/** Occupies a free port on 127.0.0.1 until the test ends. */
async function occupiedPort(): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as { port: number }).port;
}

/** A data directory a first controller started on and stopped cleanly. */
async function usedDataDir(): Promise<string> {
  const dataDir = join(scratch(), 'data');
  const first = await startTestController({ env: ADMIN_ENV, dataDir, memoryStore: false });
  await first.app.close();
  return dataDir;
}

function start(dataDir: string, listen = '127.0.0.1:0', log: Logger = pino({ level: 'silent' }), env: NodeJS.ProcessEnv = ADMIN_ENV) {
  return createApp(loadConfig({ dataDir, listen }, env), { log, announce: () => undefined });
}

/** The pid of a process that has exited (and been reaped): no process has it now, barring reuse. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

describe('one controller per data directory', () => {
  it('refuses a second controller on the same data directory, naming the holder\'s pid and the lock file', async () => {
    const dataDir = join(scratch(), 'data');
    const first = await start(dataDir);
    cleanups.push(() => first.close());
    expect(readFileSync(join(dataDir, LOCK_FILE), 'utf8')).toBe(`${process.pid}\n`);
    expect(lstatSync(join(dataDir, LOCK_FILE)).mode & 0o777).toBe(0o600);

    // The first controller checkpoints its WAL on a worker thread after its writes: what it writes
    // itself settles first (a listing unchanged over more than the checkpoint interval).
    const before = await settled(dataDir);
    const second = start(dataDir);
    await expect(second).rejects.toBeInstanceOf(DataDirError);
    await expect(second).rejects.toThrow(
      `the data directory ${dataDir} is in use by another controller (pid ${process.pid}, lock file ${join(dataDir, LOCK_FILE)})`,
    );
    expect(listing(dataDir)).toEqual(before);
  });

  it('refuses while another running process holds the lock', async () => {
    const dataDir = await usedDataDir();
    // The parent of this test process runs for as long as the test does.
    writeFileSync(join(dataDir, LOCK_FILE), `${process.ppid}\n`, { mode: 0o600 });
    await expect(start(dataDir)).rejects.toThrow(`in use by another controller (pid ${process.ppid}`);
    expect(readFileSync(join(dataDir, LOCK_FILE), 'utf8')).toBe(`${process.ppid}\n`);
  });

  it('takes over a lock left by a process that no longer runs, with a warning', async () => {
    const dataDir = await usedDataDir();
    const gone = deadPid();
    writeFileSync(join(dataDir, LOCK_FILE), `${gone}\n`, { mode: 0o600 });
    const { log, lines } = capturingLog();
    const app = await start(dataDir, '127.0.0.1:0', log);
    cleanups.push(() => app.close());
    expect(readFileSync(join(dataDir, LOCK_FILE), 'utf8')).toBe(`${process.pid}\n`);
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 40, path: join(dataDir, LOCK_FILE), msg: expect.stringContaining(`left by pid ${gone}, which no longer runs`) }),
    );
  });

  it('a lock naming this process that it does not hold is stale (a restarted container has the same pid)', async () => {
    const dataDir = await usedDataDir();
    writeFileSync(join(dataDir, LOCK_FILE), `${process.pid}\n`, { mode: 0o600 });
    const app = await start(dataDir);
    cleanups.push(() => app.close());
    expect(readFileSync(join(dataDir, LOCK_FILE), 'utf8')).toBe(`${process.pid}\n`);
  });

  it('removes the lock when it stops, so the next start takes it', async () => {
    const dataDir = join(scratch(), 'data');
    const first = await start(dataDir);
    await first.listen();
    await first.close();
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false);
    const second = await start(dataDir);
    await second.close();
  });
});

describe('nothing is created or changed before every interface is bound', () => {
  it('a busy port leaves an absent data directory absent', async () => {
    const dataDir = join(scratch(), 'data');
    const port = await occupiedPort();
    await expect(start(dataDir, `127.0.0.1:${port}`)).rejects.toThrow(
      `cannot listen on 127.0.0.1:${port}: the port is in use (another controller, or another program)`,
    );
    expect(existsSync(dataDir)).toBe(false);
  });

  it('a busy port leaves an existing data directory exactly as it was', async () => {
    const dataDir = await usedDataDir();
    const before = listing(dataDir);
    const port = await occupiedPort();
    await expect(start(dataDir, `127.0.0.1:${port}`)).rejects.toThrow('the port is in use');
    expect(listing(dataDir)).toEqual(before);
  });

  it('an address this host does not have leaves the data directory as it was', async () => {
    const dataDir = await usedDataDir();
    const before = listing(dataDir);
    // TEST-NET-1 (RFC 5737): no host has it.
    await expect(start(dataDir, '192.0.2.1:0')).rejects.toThrow('cannot listen on 192.0.2.1:0: this host has no such address');
    expect(listing(dataDir)).toEqual(before);
  });

  it('a refused start releases the ports it had bound', async () => {
    const dataDir = await usedDataDir();
    const port = await occupiedPort();
    const config = loadConfig({ dataDir, listen: '127.0.0.1:0' }, ADMIN_ENV);
    // A second bind point on the busy port: the first, bound already, must be let go.
    const free = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const p = (probe.address() as { port: number }).port;
        probe.close(() => resolve(p));
      });
    });
    const listener = config.web[0]!;
    listener.bindPoints = [
      { interface: `127.0.0.1:${free}`, address: `127.0.0.1:${free}` },
      { interface: `127.0.0.1:${port}`, address: `127.0.0.1:${port}` },
    ];
    await expect(createApp(config, { log: pino({ level: 'silent' }) })).rejects.toThrow(`cannot listen on 127.0.0.1:${port}`);
    const again = createServer();
    await new Promise<void>((resolve, reject) => {
      again.once('error', reject);
      again.listen(free, '127.0.0.1', resolve);
    });
    await new Promise<void>((resolve) => again.close(() => resolve()));
  });

  it('serves on the interface it bound first, answering a client that connected during the start', async () => {
    const t = await startTestController({ env: ADMIN_ENV });
    cleanups.push(() => t.close());
    const port = Number(t.config.web[0]!.bindPoints[0]!.interface.split(':')[1]);
    expect(port).toBeGreaterThan(0);
    // A client that connects while the controller is still starting is answered once it serves.
    const early = overTls(t, port, 'GET', '/edge/client/v1/version');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const [url] = await t.app.listen();
    expect(url).toBe(`https://127.0.0.1:${port}`);
    expect((await early).statusCode).toBe(200);
    const res = await overTls(t, port, 'GET', '/edge/client/v1/version');
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body).data.apiVersions['edge-client'].v1.apiBaseUrls).toEqual([`https://127.0.0.1:${port}/edge/client/v1`]);
  });
});

describe('data-directory errors name the path and what to do', () => {
  it('a file where the data directory belongs', async () => {
    const file = join(scratch(), 'data');
    writeFileSync(file, 'not a directory\n');
    const started = start(file);
    await expect(started).rejects.toBeInstanceOf(DataDirError);
    await expect(started).rejects.toThrow(`cannot create the data directory ${file}`);
    await expect(started).rejects.toThrow('a file stands where a directory belongs: move it aside, or start with another --data-dir');
  });

  it('a store that is not a SQLite database', async () => {
    const dataDir = join(scratch(), 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    writeFileSync(join(dataDir, 'overlay.db'), 'x'.repeat(4096), { mode: 0o600 });
    const started = start(dataDir);
    await expect(started).rejects.toThrow(`cannot open the store ${join(dataDir, 'overlay.db')}: file is not a database (SQLITE_NOTADB)`);
    await expect(started).rejects.toThrow('restore it from a backup or snapshot, or move it aside to start with an empty store');
    // The refused start let go of the lock.
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false);
  });

  it('a folder where the store belongs', async () => {
    const dataDir = join(scratch(), 'data');
    mkdirSync(join(dataDir, 'overlay.db'), { recursive: true, mode: 0o700 });
    await expect(start(dataDir)).rejects.toThrow(new RegExp(`^cannot open the store ${join(dataDir, 'overlay.db')}: .+; `));
  });
});

describe('the generated admin password', () => {
  it('its file is removed once the admin changes that password, and stays away at the next start', async () => {
    const dataDir = join(scratch(), 'data');
    const file = join(dataDir, 'admin-password');
    const { log, lines } = capturingLog();
    const t = await startTestController({ dataDir, memoryStore: false, log, announce: () => undefined });
    cleanups.push(() => t.app.close());
    const generated = readFileSync(file, 'utf8').trim();
    const token = await login(t, 'admin', generated);

    // Another write on authenticators leaves it: the password still works.
    const other = await call(t, 'POST', `${MGMT}/identities`, { token, body: { name: 'bystander', type: 'User', isAdmin: false } });
    await call(t, 'POST', `${MGMT}/authenticators`, {
      token,
      body: { method: 'updb', identityId: json(other).data.id, username: 'bystander', password: 'bystander-pass-1' },
    });
    expect(readFileSync(file, 'utf8').trim()).toBe(generated);

    const mine = json(await call(t, 'GET', `${MGMT}/current-identity/authenticators`, { token })).data[0];
    const changed = await call(t, 'PATCH', `${MGMT}/current-identity/authenticators/${mine.id}`, {
      token,
      body: { currentPassword: generated, password: 'a-password-of-my-own-1' },
    });
    expect(changed.statusCode).toBe(200);
    expect(existsSync(file)).toBe(false);
    expect(lines).toContainEqual(expect.objectContaining({ path: file, msg: `the default admin no longer has the generated password; removed ${file}` }));
    expect((await authenticate(t, 'admin', 'a-password-of-my-own-1')).statusCode).toBe(200);
    await t.app.close();

    const again = await startTestController({ dataDir, memoryStore: false, announce: () => undefined });
    cleanups.push(() => again.app.close());
    expect(existsSync(file)).toBe(false);
  });

  it('a start finds a file whose password no longer works and removes it', async () => {
    const dataDir = join(scratch(), 'data');
    const file = join(dataDir, 'admin-password');
    const first = await startTestController({ dataDir, memoryStore: false, announce: () => undefined });
    await first.app.close();
    writeFileSync(file, 'a password the admin does not have\n', { mode: 0o600 });
    const again = await startTestController({ dataDir, memoryStore: false, announce: () => undefined });
    cleanups.push(() => again.app.close());
    expect(existsSync(file)).toBe(false);
  });

  it('admin credentials given to a start on an existing store are reported as ignored, without their values', async () => {
    const dataDir = await usedDataDir();
    const { log, lines } = capturingLog();
    const t = await startTestController({
      dataDir,
      memoryStore: false,
      log,
      env: { OVERLAY_ADMIN_USERNAME: 'someone-else', OVERLAY_ADMIN_PASSWORD: 'another-password-1' },
    });
    cleanups.push(() => t.app.close());
    const warning = lines.find((l) => l.msg.startsWith('the store already has its default admin'));
    expect(warning).toMatchObject({ level: 40, ignored: ['admin.username / OVERLAY_ADMIN_USERNAME', 'admin.password / OVERLAY_ADMIN_PASSWORD'] });
    expect(JSON.stringify(lines)).not.toContain('another-password-1');
    expect(JSON.stringify(lines)).not.toContain('someone-else');
    // The admin of the first start is unchanged.
    expect((await authenticate(t, 'admin', ADMIN_PASSWORD)).statusCode).toBe(200);
  });

  it('says it created the admin with the credentials given, naming the user and never the password', async () => {
    const { log, lines } = capturingLog();
    const t = await startTestController({ env: ADMIN_ENV, log });
    cleanups.push(() => t.close());
    expect(lines.some((l) => l.msg.startsWith('the store already has its default admin'))).toBe(false);
    expect(lines.find((l) => l.msg === 'created the default admin with the password given')).toMatchObject({ level: 30, username: ADMIN_ENV.OVERLAY_ADMIN_USERNAME });
    expect(JSON.stringify(lines)).not.toContain(ADMIN_ENV.OVERLAY_ADMIN_PASSWORD);
  });
});

describe('the secrets key belongs to its store', () => {
  const MFA = `${CLIENT}/current-identity/mfa`;
  // Later starts give no admin credentials: the store has its admin, and would warn that they were ignored.
  const FORGET_ENV = { OVERLAY_FORGET_SEALED_SECRETS: 'true' };
  /** What a start must leave as it was: every entry but the folder itself (whose times the lock moves). */
  const untouched = (dataDir: string) => listing(dataDir).filter((entry) => !entry.startsWith('. '));

  /**
   * A data directory whose store holds something sealed under its key: alice's confirmed TOTP
   * enrollment, bob's pending enrollment, and the outstanding enrollments of an edge and a transit router.
   */
  async function sealedStore(): Promise<{ dataDir: string; aliceId: string; edgeRouterId: string; transitRouterId: string }> {
    const dataDir = join(scratch(), 'data');
    const t = await startTestController({ env: ADMIN_ENV, dataDir, memoryStore: false });
    try {
      const admin = await login(t, ADMIN_ENV.OVERLAY_ADMIN_USERNAME!, ADMIN_PASSWORD);
      const { id: aliceId } = await createIdentityWithPassword(t, admin, { name: 'alice', username: 'alice', password: 'alice-password-1' });
      const alice = await login(t, 'alice', 'alice-password-1', CLIENT);
      const started = await call(t, 'POST', MFA, { token: alice, body: {} });
      const codeAt = authenticatorApp(json(started).data.provisioningUrl);
      expect((await call(t, 'POST', `${MFA}/verify`, { token: alice, body: { code: codeAt(t.clock()) } })).statusCode).toBe(200);
      const bob = await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: 'bob', type: 'User', isAdmin: false, enrollment: { ott: true } } });
      expect(bob.statusCode, bob.body).toBe(201);
      const edgeRouter = await call(t, 'POST', `${MGMT}/edge-routers`, { token: admin, body: { name: 'edge-1' } });
      const transitRouter = await call(t, 'POST', `${MGMT}/transit-routers`, { token: admin, body: { name: 'transit-1' } });
      expect([edgeRouter.statusCode, transitRouter.statusCode]).toEqual([201, 201]);
      return { dataDir, aliceId, edgeRouterId: json(edgeRouter).data.id, transitRouterId: json(transitRouter).data.id };
    } finally {
      await t.app.close();
    }
  }

  it('a start beside another secrets.key, or none, is refused with the directory as it was; with the kept key it starts', async () => {
    const { dataDir, aliceId } = await sealedStore();
    const keyFile = join(dataDir, 'secrets.key');
    const kept = readFileSync(keyFile);

    // The store restored without its key, beside a key made for another store.
    writeFileSync(keyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    const before = untouched(dataDir);
    const refused = start(dataDir);
    await expect(refused).rejects.toBeInstanceOf(DataDirError);
    await expect(refused).rejects.toThrow(
      `${keyFile} is not the key the store ${join(dataDir, 'overlay.db')} was sealed with (the TOTP secrets of its MFA enrollments, the JWTs of its pending enrollments): ` +
        'restore the secrets.key kept with this store; if it is lost, start once with --forget-sealed-secrets (OVERLAY_FORGET_SEALED_SECRETS=true), ' +
        'which removes every MFA enrollment and pending enrollment (identities then enroll again)',
    );
    expect(untouched(dataDir)).toEqual(before);
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false);

    // No key at all: refused without making one, so that restoring the kept key is all it takes.
    rmSync(keyFile);
    await expect(start(dataDir)).rejects.toThrow(`${keyFile} is missing: it holds the key the store ${join(dataDir, 'overlay.db')} was sealed with`);
    expect(existsSync(keyFile)).toBe(false);

    // The kept key back: everything is there; the option, with the right key, changes nothing.
    writeFileSync(keyFile, kept, { mode: 0o600 });
    const { log, lines } = capturingLog();
    const t = await startTestController({ env: FORGET_ENV, dataDir, memoryStore: false, log });
    cleanups.push(() => t.app.close());
    expect(lines).toContainEqual(expect.objectContaining({ level: 30, msg: "secrets.key opens the store's secrets: --forget-sealed-secrets changed nothing" }));
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    const admin = await login(t, ADMIN_ENV.OVERLAY_ADMIN_USERNAME!, ADMIN_PASSWORD);
    const identities = await call(t, 'GET', `${MGMT}/identities`, { token: admin });
    expect(identities.statusCode, identities.body).toBe(200);
    expect(json(identities).data.find((i: { id: string }) => i.id === aliceId).isMfaEnabled).toBe(true);
    expect(json(await call(t, 'GET', `${MGMT}/enrollments`, { token: admin })).data).toHaveLength(1);
  });

  it('--forget-sealed-secrets starts beside another key, removing what the lost key sealed, and the new key is the store\'s from then on', async () => {
    const { dataDir, aliceId, edgeRouterId, transitRouterId } = await sealedStore();
    const keyFile = join(dataDir, 'secrets.key');
    writeFileSync(keyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });

    const { log, lines } = capturingLog();
    const t = await startTestController({ env: FORGET_ENV, dataDir, memoryStore: false, log });
    const warned = lines.find((l) => l.msg.startsWith('the store was sealed under another secrets.key'));
    expect(warned).toMatchObject({ level: 40, path: keyFile, mfaEnrollments: 1, identityEnrollments: 1, edgeRouterEnrollments: 1, transitRouterEnrollments: 1 });
    try {
      const admin = await login(t, ADMIN_ENV.OVERLAY_ADMIN_USERNAME!, ADMIN_PASSWORD);
      const identities = await call(t, 'GET', `${MGMT}/identities`, { token: admin });
      expect(identities.statusCode, identities.body).toBe(200);
      expect(json(identities).data.find((i: { id: string }) => i.id === aliceId).isMfaEnabled).toBe(false);
      // Alice logs in with her password alone, and may enroll her MFA again.
      const session = await authenticate(t, 'alice', 'alice-password-1', { api: CLIENT });
      expect(session.statusCode, session.body).toBe(200);
      expect(json(session).data).toMatchObject({ isMfaRequired: false, authQueries: [] });
      expect((await call(t, 'POST', MFA, { token: json(session).data.token, body: {} })).statusCode).toBe(201);
      expect(json(await call(t, 'GET', `${MGMT}/enrollments`, { token: admin })).data).toEqual([]);
      for (const url of [`${MGMT}/edge-routers/${edgeRouterId}`, `${MGMT}/transit-routers/${transitRouterId}`]) {
        const router = await call(t, 'GET', url, { token: admin });
        expect(router.statusCode, router.body).toBe(200);
        expect(json(router).data).toMatchObject({ isVerified: false, enrollmentJwt: null, enrollmentToken: null });
      }
      // The edge router gets a new enrollment, sealed under the present key.
      expect((await call(t, 'POST', `${MGMT}/edge-routers/${edgeRouterId}/re-enroll`, { token: admin })).statusCode).toBe(200);
      expect(json(await call(t, 'GET', `${MGMT}/edge-routers/${edgeRouterId}`, { token: admin })).data.enrollmentJwt).toEqual(expect.any(String));
    } finally {
      await t.app.close();
    }

    // A normal start with the key now kept: no refusal, nothing removed.
    const next = capturingLog();
    const again = await startTestController({ env: {}, dataDir, memoryStore: false, log: next.log });
    cleanups.push(() => again.app.close());
    expect(next.lines.filter((l) => l.level >= 40)).toEqual([]);
    const admin = await login(again, ADMIN_ENV.OVERLAY_ADMIN_USERNAME!, ADMIN_PASSWORD);
    expect(json(await call(again, 'GET', `${MGMT}/edge-routers/${edgeRouterId}`, { token: admin })).data.enrollmentJwt).toEqual(expect.any(String));
  });

  it('a store from before the check adopts the key that opens its secrets, and refuses one that does not', async () => {
    const { dataDir } = await sealedStore();
    const keyFile = join(dataDir, 'secrets.key');
    const kept = readFileSync(keyFile);
    const forgetCheck = () => {
      const db = new Database(join(dataDir, 'overlay.db'));
      try {
        return db.prepare("DELETE FROM controller_state WHERE key = 'secrets-key-check'").run().changes;
      } finally {
        db.close();
      }
    };
    expect(forgetCheck()).toBe(1);
    writeFileSync(keyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    await expect(start(dataDir)).rejects.toThrow(`${keyFile} is not the key the store`);

    writeFileSync(keyFile, kept, { mode: 0o600 });
    const t = await startTestController({ env: {}, dataDir, memoryStore: false });
    await t.app.close();
    // Adopted: the check is recorded, and another key is refused from now on.
    writeFileSync(keyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    await expect(start(dataDir)).rejects.toThrow(`${keyFile} is not the key the store`);
    expect(forgetCheck()).toBe(1);
  });

  it('a store that holds nothing sealed takes the key it finds, none or another, without the option', async () => {
    const dataDir = join(scratch(), 'data');
    await (await startTestController({ env: ADMIN_ENV, dataDir, memoryStore: false })).app.close();
    const keyFile = join(dataDir, 'secrets.key');
    rmSync(keyFile);
    await (await startTestController({ env: {}, dataDir, memoryStore: false })).app.close();
    expect(readFileSync(keyFile, 'utf8').trim()).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    writeFileSync(keyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    const t = await startTestController({ env: {}, dataDir, memoryStore: false });
    try {
      const admin = await login(t, ADMIN_ENV.OVERLAY_ADMIN_USERNAME!, ADMIN_PASSWORD);
      expect((await call(t, 'GET', `${MGMT}/identities`, { token: admin })).statusCode).toBe(200);
    } finally {
      await t.app.close();
    }
  });
});
