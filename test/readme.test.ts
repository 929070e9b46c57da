// The README's shell snippets work as written: every ```sh / ```bash block of README.md runs, in
// order and in one bash session (so a variable set by one block is there for the next, as in a
// reader's terminal), against a controller started here with its data in ./overlay-data, the default.
// The only change made to a block is the port: 127.0.0.1:1280 becomes the free port listened on.
// A block that cannot run here says why on the line before it:
//   <!-- readme-test: skip: <why> -->             not run (installs packages, starts its own controller, ...)
//   <!-- readme-test: error expected: <why> -->   run; may answer an error envelope (a placeholder code)
// Every other block must exit 0 and print no error envelope.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../src/app/app.js';
import { loadConfig } from '../src/config/index.js';
import { tempDir } from './helpers.js';

const ROOT = resolve(import.meta.dirname, '..');
const README_PORT = '127.0.0.1:1280';
/** The programs the README's blocks call, beyond bash's own commands. */
const TOOLS = ['bash', 'curl', 'openssl', 'jq', 'node', 'npx', 'awk', 'base64'];

interface ReadmeBlock {
  /** 1-based line of the opening fence. */
  line: number;
  code: string;
  skip?: string;
  errorExpected?: string;
}

/** The shell blocks of a Markdown text, with the marker on the line before each, if any. */
function shellBlocks(markdown: string): ReadmeBlock[] {
  const lines = markdown.split('\n');
  const blocks: ReadmeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!fence) continue;
    const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l));
    if (end < 0) throw new Error(`README.md:${i + 1}: a code block that never ends`);
    if (['sh', 'bash', 'shell'].includes(fence[1]!)) {
      const block: ReadmeBlock = { line: i + 1, code: lines.slice(i + 1, end).join('\n') };
      const marker = /^<!-- readme-test: (skip|error expected): (.+?) -->$/.exec(lines[i - 1]?.trim() ?? '');
      if (marker?.[1] === 'skip') block.skip = marker[2]!;
      if (marker?.[1] === 'error expected') block.errorExpected = marker[2]!;
      blocks.push(block);
    }
    i = end;
  }
  return blocks;
}

/** Runs a bash script in `cwd`; kills it after 3 minutes. */
function runBash(script: string, cwd: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [script], {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      // npx finds its tools in ./node_modules and downloads nothing.
      env: { ...process.env, npm_config_yes: 'false', npm_config_offline: 'true' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

function has(tool: string): boolean {
  return spawnSync('bash', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;
}

const missing = TOOLS.filter((tool) => !has(tool));
const blocks = shellBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8'));

describe('the README markers', () => {
  it('finds the shell blocks, and every skipped one says why', () => {
    expect(blocks.length).toBeGreaterThan(5);
    for (const block of blocks.filter((b) => b.skip !== undefined)) expect(block.skip!.length, `README.md:${block.line}`).toBeGreaterThan(10);
    expect(shellBlocks('<!-- readme-test: skip: starts a controller of its own -->\n```sh\nnpm start\n```\n```js\nx\n```\n```bash\nB=1\n```')).toEqual([
      { line: 2, code: 'npm start', skip: 'starts a controller of its own' },
      { line: 8, code: 'B=1' },
    ]);
  });
});

// Without one of the tools the blocks use, none can run as written: say which is missing.
describe.skipIf(missing.length > 0)(`the README's shell blocks, run as written${missing.length > 0 ? ` (skipped: ${missing.join(', ')} not installed)` : ''}`, () => {
  const dir = tempDir('overlay-readme-');
  let app: App;
  let port = 0;

  beforeAll(async () => {
    // The reader's checkout: ./overlay-data is the default data directory, node_modules holds npx's tools.
    symlinkSync(join(ROOT, 'node_modules'), join(dir.path, 'node_modules'));
    const config = loadConfig({ dataDir: join(dir.path, 'overlay-data'), listen: '127.0.0.1:0' }, {});
    app = await createApp(config, { log: pino({ level: 'silent' }), announce: () => undefined });
    const [url] = await app.listen();
    port = Number(new URL(url!).port);
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    dir.remove();
  });

  it('every block exits 0, and only those marked answer an error', async () => {
    const runnable = blocks.filter((b) => b.skip === undefined);
    expect(runnable.length).toBeGreaterThan(5);
    const script = [
      'set -eo pipefail',
      'trap \'echo "::failed with status $? at line $LINENO of README block $README_BLOCK" >&2\' ERR',
      ...runnable.flatMap((b) => [`README_BLOCK=${b.line}`, `printf '\\n::block ${b.line}\\n'`, b.code.replaceAll(README_PORT, `127.0.0.1:${port}`)]),
    ].join('\n');
    mkdirSync(join(dir.path, '.readme'), { recursive: true });
    writeFileSync(join(dir.path, '.readme', 'blocks.sh'), script);
    // Asynchronously: the controller answering the blocks runs in this process.
    const run = await runBash(join(dir.path, '.readme', 'blocks.sh'), dir.path);
    const output = `${run.stdout}\n${run.stderr}`;
    expect(run.status, output).toBe(0);

    // Each block's output: a JSON error envelope shows a call that failed though curl exited 0.
    const outputs = new Map<number, string>();
    let current = 0;
    for (const line of run.stdout.split('\n')) {
      const mark = /^::block (\d+)$/.exec(line);
      if (mark) current = Number(mark[1]);
      else outputs.set(current, `${outputs.get(current) ?? ''}${line}\n`);
    }
    for (const block of runnable) {
      if (block.errorExpected !== undefined) continue;
      expect(outputs.get(block.line) ?? '', `README.md:${block.line}`).not.toMatch(/"error"\s*:\s*\{/);
    }
    // What the walk-through built is there: the identity and service, linked by the policy.
    expect(run.stdout).toMatch(/"name":"wiki"/);
    expect(readFileSync(join(dir.path, 'device.pem'), 'utf8')).toMatch(/^-----BEGIN CERTIFICATE-----/);
  }, 200_000);
});
