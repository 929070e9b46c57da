// Records the revision and date of a build in dist/build-info.json, read by the version record.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';

let revision = 'unknown';
try {
  revision = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { stdio: ['ignore', 'pipe', 'ignore'] })
    .toString()
    .trim();
} catch {
  // not a git checkout
}
mkdirSync('dist', { recursive: true });
writeFileSync('dist/build-info.json', JSON.stringify({ revision, buildDate: new Date().toISOString() }) + '\n');
