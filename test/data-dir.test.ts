// The data directory holds password hashes, identity data and key material: every file in it is
// 0600 and every folder 0700 from the first start on (the store's -wal and -shm included), and a
// start repairs looser modes it finds, with a warning naming each path.
import { chmodSync, existsSync, lstatSync, readdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_ENV, asAdmin, call, MGMT, startTestController, tempDir } from './helpers.js';
import { createDataDirectory } from '../src/app/data-dir.js';

/** Every entry under `dir` (itself included) as "relative path: mode", and those not 0600 / 0700. */
function modes(dir: string): { all: string[]; wrong: string[] } {
  const all: string[] = [];
  const wrong: string[] = [];
  const walk = (path: string): void => {
    const stat = lstatSync(path);
    const mode = stat.mode & 0o777;
    const entry = `${relative(dir, path) || '.'}: ${mode.toString(8).padStart(4, '0')}`;
    all.push(entry);
    if (mode !== (stat.isDirectory() ? 0o700 : 0o600)) wrong.push(entry);
    if (stat.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(dir);
  return { all, wrong };
}

/** A logger whose JSON lines are kept. */
function capturingLog(): { log: Logger; lines: { level: number; msg: string; path?: string }[] } {
  const lines: { level: number; msg: string; path?: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { log: pino({ level: 'info' }, stream), lines };
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe('data directory modes', () => {
  it('a fresh start leaves every file 0600 and every folder 0700, -wal and -shm included, whatever the umask', async () => {
    const dir = tempDir();
    cleanups.push(dir.remove);
    // No umask to hide a mode the code leaves open: every mode must be set explicitly.
    const umask = process.umask(0);
    cleanups.push(() => process.umask(umask));
    const t = await startTestController({ env: ADMIN_ENV, dataDir: join(dir.path, 'data'), memoryStore: false });
    try {
      // A write through the API, so the store's WAL and shared-memory files exist.
      const token = await asAdmin(t);
      const res = await call(t, 'POST', `${MGMT}/identities`, { token, body: { name: 'mode-check', type: 'User', isAdmin: false } });
      expect(res.statusCode).toBe(201);

      const { all, wrong } = modes(t.dataDir);
      expect(all).toEqual(
        expect.arrayContaining([
          '.: 0700',
          'overlay.db: 0600',
          'overlay.db-wal: 0600',
          'overlay.db-shm: 0600',
          'pki: 0700',
          'pki/server.key.pem: 0600',
          'pki/root-ca.cert.pem: 0600',
          'oidc: 0700',
          'oidc/signing-keys.json: 0600',
        ]),
      );
      expect(wrong).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('the generated admin password file is 0600 too', async () => {
    const dir = tempDir();
    cleanups.push(dir.remove);
    const t = await startTestController({ dataDir: dir.path, memoryStore: false, announce: () => undefined });
    try {
      const { all, wrong } = modes(dir.path);
      expect(all).toContain('admin-password: 0600');
      expect(wrong).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('a start repairs files left 0644 and folders left 0755, warning about each path', async () => {
    const dir = tempDir();
    cleanups.push(dir.remove);
    const first = await startTestController({ env: ADMIN_ENV, dataDir: dir.path, memoryStore: false });
    await first.close();

    // What an older version or a careless copy leaves behind.
    const loosened = ['.', 'pki', 'oidc'].map((p) => join(dir.path, p));
    for (const path of loosened) chmodSync(path, 0o755);
    const files = ['overlay.db', 'pki/server.key.pem', 'pki/root-ca.key.pem', 'pki/root-ca.cert.pem', 'oidc/signing-keys.json'].map((p) =>
      join(dir.path, p),
    );
    for (const path of files) chmodSync(path, 0o644);

    const { log, lines } = capturingLog();
    const second = await startTestController({ env: ADMIN_ENV, dataDir: dir.path, memoryStore: false, log });
    try {
      expect(modes(dir.path).wrong).toEqual([]);
      const warned = lines.filter((l) => l.level === 40 && l.msg.includes('mode')).map((l) => l.path);
      expect(warned.sort()).toEqual([...loosened, ...files].sort());
      for (const line of lines.filter((l) => l.level === 40 && l.msg.includes('mode'))) {
        expect(line.msg).toContain(line.path);
      }
    } finally {
      await second.close();
    }
  });

  it('a start removes the temp files of an interrupted write, which hold a password or a private key, and nothing else', async () => {
    const dir = tempDir();
    cleanups.push(dir.remove);
    const first = await startTestController({ env: ADMIN_ENV, dataDir: dir.path, memoryStore: false });
    await first.close();

    // What writeFileAtomic leaves when the process dies between creating its temp file and the rename.
    const stale = ['.admin-password.0123456789ab.tmp', 'oidc/.signing-keys.json.abcdef012345.tmp', 'pki/.server.key.pem.00ff00ff00ff.tmp'];
    // Names of the operator's that only look alike.
    const kept = ['notes.tmp', '.admin-password.tmp', 'oidc/.signing-keys.json.xyz.tmp'];
    for (const name of [...stale, ...kept]) writeFileSync(join(dir.path, name), 'secret\n', { mode: 0o600 });

    const { log, lines } = capturingLog();
    const second = await startTestController({ env: ADMIN_ENV, dataDir: dir.path, memoryStore: false, log });
    try {
      expect(stale.filter((name) => existsSync(join(dir.path, name)))).toEqual([]);
      expect(kept.filter((name) => existsSync(join(dir.path, name)))).toEqual(kept);
      const warned = lines.find((l) => l.level === 40 && l.msg.includes('temp files')) as { files?: string[] } | undefined;
      expect(warned?.files).toEqual(['.admin-password.0123456789ab.tmp']);
    } finally {
      await second.close();
    }
  });
});

describe('creating the data directory', () => {
  it('makes every missing folder 0700, whatever the umask', async () => {
    const dir = tempDir();
    cleanups.push(dir.remove);
    const umask = process.umask(0);
    cleanups.push(() => process.umask(umask));
    const deep = join(dir.path, 'a', 'b', 'c');
    await createDataDirectory(deep);
    for (const path of [join(dir.path, 'a'), join(dir.path, 'a', 'b'), deep]) expect(lstatSync(path).mode & 0o777, path).toBe(0o700);
    // Again: it exists, nothing changes.
    await createDataDirectory(deep);
  });

  // Node's recursive mkdir retried for ever (at full CPU) on a path under /proc.
  it.runIf(existsSync('/proc/self'))('refuses a path that can never be made, at once', async () => {
    await expect(createDataDirectory('/proc/overlay-data-x/y')).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses a file where the directory belongs', async () => {
    const dir = tempDir();
    cleanups.push(dir.remove);
    writeFileSync(join(dir.path, 'file'), '');
    await expect(createDataDirectory(join(dir.path, 'file'))).rejects.toMatchObject({ code: 'EEXIST' });
    await expect(createDataDirectory(join(dir.path, 'file', 'below'))).rejects.toMatchObject({ code: 'ENOTDIR' });
  });
});
