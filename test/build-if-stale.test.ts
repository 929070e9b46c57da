// `npm start` builds only when dist/ is older than what it is built from (scripts/build-if-stale.mjs),
// tried on a checkout of its own whose build only records that it ran, with file times set by hand.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tempDir } from './helpers.js';

const SCRIPT = resolve(import.meta.dirname, '..', 'scripts', 'build-if-stale.mjs');
const T0 = new Date('2026-01-01T00:00:00Z');
const later = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

describe('build-if-stale', () => {
  let dir: { path: string; remove(): void };
  const at = (...parts: string[]) => join(dir.path, ...parts);
  /** What ran: "build" for the whole build, "revision" for the revision alone. */
  const ran = (): string[] => {
    try {
      return readFileSync(at('ran.log'), 'utf8').split('\n').filter(Boolean);
    } catch {
      return [];
    }
  };
  const run = () => execFileSync(process.execPath, [join(dir.path, 'scripts', 'build-if-stale.mjs')], { cwd: dir.path, stdio: 'pipe' });
  const stamp = (revision: string, time: Date) => {
    writeFileSync(at('dist', 'build-info.json'), JSON.stringify({ revision }) + '\n');
    utimesSync(at('dist', 'build-info.json'), time, time);
  };

  beforeEach(() => {
    dir = tempDir('overlay-build-');
    for (const folder of ['src', 'bench', 'scripts', 'dist']) mkdirSync(at(folder));
    copyFileSync(SCRIPT, at('scripts', 'build-if-stale.mjs'));
    // Outside a git checkout the revision is "unknown".
    const record = (what: string) =>
      `import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';\n` +
      `appendFileSync('ran.log', '${what}\\n');\n` +
      `mkdirSync('dist', { recursive: true });\n` +
      `writeFileSync('dist/build-info.json', JSON.stringify({ revision: 'unknown' }) + '\\n');\n`;
    writeFileSync(at('scripts', 'build-info.mjs'), record('revision'));
    writeFileSync(at('build.mjs'), record('build'));
    writeFileSync(at('package.json'), JSON.stringify({ name: 'fixture', private: true, scripts: { build: 'node build.mjs' } }));
    writeFileSync(at('tsconfig.json'), '{}');
    writeFileSync(at('tsconfig.build.json'), '{}');
    writeFileSync(at('src', 'main.ts'), 'export {};\n');
    for (const path of ['src/main.ts', 'src', 'bench', 'package.json', 'tsconfig.json', 'tsconfig.build.json', 'scripts/build-info.mjs', 'scripts']) {
      utimesSync(at(path), T0, T0);
    }
  });
  afterEach(() => dir.remove());

  it('builds when there is no build', () => {
    rmSync(at('dist'), { recursive: true });
    run();
    expect(ran()).toEqual(['build']);
  });

  it('does nothing when the build is newer than every source and setting', () => {
    stamp('unknown', later(10));
    run();
    expect(ran()).toEqual([]);
  });

  it('builds when a source changed after the build', () => {
    stamp('unknown', later(10));
    utimesSync(at('src', 'main.ts'), later(20), later(20));
    run();
    expect(ran()).toEqual(['build']);
  });

  it('builds when a source was added or removed (its folder changed)', () => {
    stamp('unknown', later(10));
    utimesSync(at('src'), later(20), later(20));
    run();
    expect(ran()).toEqual(['build']);
  });

  it('builds when a build setting changed', () => {
    stamp('unknown', later(10));
    utimesSync(at('tsconfig.build.json'), later(20), later(20));
    run();
    expect(ran()).toEqual(['build']);
  });

  it('only records the revision when that alone differs', () => {
    stamp('0123456789ab', later(10));
    run();
    expect(ran()).toEqual(['revision']);
  });
});
