// Builds dist/ only when it is older than what it is built from, so `npm start` on an unchanged
// checkout starts the controller at once instead of spending seconds in the TypeScript compiler
// (which, even incremental, reads every source and type declaration to find that nothing changed).
// dist/build-info.json is written last by every build: a tree whose newest source, folder (a file
// added or removed) or build setting is older than it is current. A new commit without source
// changes only rewrites the build's revision.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const STAMP = 'dist/build-info.json';
const SOURCES = ['src', 'bench'];
const SETTINGS = ['tsconfig.json', 'tsconfig.build.json', 'package.json', 'scripts/build-info.mjs'];

/** The newest modification time under `path`, folders included. */
function newest(path) {
  const info = statSync(path);
  let latest = info.mtimeMs;
  if (info.isDirectory()) {
    for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  }
  return latest;
}

function revision() {
  try {
    return execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  } catch {
    return 'unknown';
  }
}

function run(command, args) {
  execFileSync(command, args, { stdio: 'inherit' });
}

let built;
try {
  built = { time: statSync(STAMP).mtimeMs, revision: JSON.parse(readFileSync(STAMP, 'utf8')).revision };
} catch {
  built = undefined; // never built, or the stamp is unreadable
}

const sourcesTime = Math.max(...SOURCES.map(newest), ...SETTINGS.map((file) => statSync(file).mtimeMs));
if (built === undefined || sourcesTime >= built.time) {
  run('npm', ['run', '--silent', 'build']);
} else if (built.revision !== revision()) {
  run(process.execPath, ['scripts/build-info.mjs']);
}
