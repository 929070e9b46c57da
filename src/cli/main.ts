#!/usr/bin/env node
// The `overlay` command.
import './node-version.js'; // first: refuses an unsupported Node.js before anything else loads
import { Command, Option } from 'commander';
import { ConfigError, loadConfig, type ConfigFlags } from '../config/index.js';
import { createApp, type App } from '../app/app.js';
import { loadBuildInfo } from '../build-info.js';

/** A second stop signal within this many ms of the first is the same request to stop. */
const REPEATED_SIGNAL_MS = 1_000;

async function runController(flags: ConfigFlags): Promise<void> {
  let config;
  try {
    config = loadConfig(flags, process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`overlay: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  // Whatever the controller creates from here on is its user's alone; createApp also sets the
  // mode of every file it writes, so this covers files written by libraries (SQLite's own).
  process.umask(0o077);
  // Signals are taken from the start: one that comes while the controller starts (opening and
  // seeding the store) stops it once it has started, with its store closed, instead of ending the
  // process wherever it is.
  const started: { app?: App } = {};
  let stopping: string | undefined;
  let stoppingAt = 0;
  const stop = (signal: string) => {
    if (stopping) {
      // Ctrl-C under `npm start` sends SIGINT twice at once (the terminal's to the process group,
      // and npm's own): only a signal that comes later asks to exit at once.
      if (Date.now() - stoppingAt < REPEATED_SIGNAL_MS) return;
      if (started.app) started.app.core.log.warn({ signal }, 'second signal while stopping; exiting now');
      else process.stderr.write('overlay: second signal while starting; exiting now\n');
      process.exit(1);
    }
    stopping = signal;
    stoppingAt = Date.now();
    if (started.app) close(started.app, signal);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  const app = (started.app = await createApp(config));
  if (stopping) return close(app, stopping);
  await app.listen();
}

function close(app: App, signal: string): void {
  app.core.log.info({ signal }, 'stopping');
  app
    .close()
    .then(() => {
      app.core.log.info('stopped');
      process.exit(0);
    })
    .catch((err: unknown) => {
      app.core.log.error({ err }, 'error while stopping');
      process.exit(1);
    });
}

/** The options given as flags, without those commander took from the environment. */
function givenOnCommandLine(opts: ConfigFlags, command: Command): ConfigFlags {
  return Object.fromEntries(Object.entries(opts).filter(([key]) => command.getOptionValueSource(key) !== 'env')) as ConfigFlags;
}

export function program(): Command {
  const root = new Command('overlay').description('controller of a zero-trust overlay network');
  root.version(loadBuildInfo().version);
  const controller = root.command('controller').description('the controller service');
  controller
    .command('run')
    .description('run the controller (HTTPS Edge Client, Edge Management and OIDC APIs)')
    .addOption(new Option('--data-dir <dir>', 'data directory (store, PKI) (default: ./overlay-data)').env('OVERLAY_DATA_DIR'))
    .addOption(new Option('--listen <host:port>', 'address to listen on, port 0 for a free one (default: 127.0.0.1:1280)').env('OVERLAY_LISTEN'))
    .addOption(new Option('--advertise <host:port>', 'address clients use (default: the listen address)').env('OVERLAY_ADVERTISE'))
    .addOption(new Option('--config <file>', 'YAML configuration file').env('OVERLAY_CONFIG'))
    .addOption(
      new Option('--log-level <level>', 'log level (default: info)')
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
        .env('OVERLAY_LOG_LEVEL'),
    )
    .addOption(
      new Option('--log-format <format>', 'log lines: json, or pretty for people (default: pretty on a terminal, else json)')
        .choices(['json', 'pretty'])
        .env('OVERLAY_LOG_FORMAT'),
    )
    .addOption(
      new Option(
        '--forget-sealed-secrets',
        'when secrets.key is not the key the store was sealed with (lost): start anyway, removing every MFA enrollment and pending enrollment sealed under the old key',
      ).env('OVERLAY_FORGET_SEALED_SECRETS'),
    )
    // The configuration reads the environment itself, and names the variable in its errors.
    .action(async (opts: ConfigFlags, command: Command) => runController(givenOnCommandLine(opts, command)));
  return root;
}

program()
  .parseAsync(process.argv)
  .catch((err: unknown) => {
    process.stderr.write(`overlay: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
