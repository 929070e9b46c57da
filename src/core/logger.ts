// The controller's logger: pino, JSON lines by default, readable lines through pino-pretty for a
// person (asked for, or when standard output is a terminal). Times are ISO 8601 in UTC either way.
// Secrets are removed by path before a line is written, whatever the format: credentials travel in
// headers and in bodies under a handful of names, and no code logs a body or a header set whole.
// Every line written while a request is handled carries its request id, also the lines of code that
// logs through the controller's logger rather than the request's: the request scope follows the
// request through its asynchronous work (AsyncLocalStorage) and the logger adds the id from it.
import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, stdTimeFunctions, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { Config, LogFormat } from '../config/index.js';

/** The names under which a secret may sit at the top of something logged. */
const SECRET_KEYS = [
  'password',
  'newPassword',
  'currentPassword',
  'token',
  'code',
  'secret',
  'authorization',
  'overlay-session',
  'refresh_token',
  'access_token',
  'id_token',
  'code_verifier',
  'jwt',
  'certPem',
  'privateKey',
];

/**
 * One level down, only the commonest names: each wildcard path makes pino's redaction walk every
 * line (with one for each name above, a request line took several times as long to write), while a
 * top-level path costs next to nothing.
 */
const NESTED_SECRET_KEYS = ['password', 'token', 'code'];

export const REDACTED_PATHS = [
  // A `code` at the top of a line is an error code of the catalogue, not a one-time code.
  ...SECRET_KEYS.filter((key) => key !== 'code').map((key) => `["${key}"]`),
  ...NESTED_SECRET_KEYS.map((key) => `*.${key}`),
  'req.headers.authorization',
  'req.headers["overlay-session"]',
  'req.headers.cookie',
];

/** The request a piece of work is done for, as far as its asynchronous continuations reach. */
export class RequestScope {
  private readonly storage = new AsyncLocalStorage<string>();

  /** Runs fn, and what it starts, on behalf of the request `requestId`. */
  run<T>(requestId: string, fn: () => T): T {
    return this.storage.run(requestId, fn);
  }

  /** The id of the request being handled, if any. */
  current(): string | undefined {
    return this.storage.getStore();
  }
}

/** Marks a request's own logger, which carries the request id among its bindings already. */
const CARRIES_REQUEST_ID = Symbol('carries request id');

/** A request's logger (Fastify's childLoggerFactory): the scope adds nothing to its lines. */
export function requestLogger<L extends object>(logger: L): L {
  (logger as Record<symbol, boolean>)[CARRIES_REQUEST_ID] = true;
  return logger;
}

export interface LoggerOptions {
  /** Replaces standard output (tests read it). */
  destination?: DestinationStream;
  /** Where the id of the request being handled comes from. */
  scope?: RequestScope;
}

/** The format a configuration asks for, or, without one, the one suited to where stdout goes. */
export function logFormatOf(config: Config['log'], stdoutIsTerminal = process.stdout.isTTY === true): LogFormat {
  return config.format ?? (stdoutIsTerminal ? 'pretty' : 'json');
}

/**
 * A logger as configured. Pretty lines are written to the destination too, so what a person reads
 * is redacted exactly like the JSON.
 */
export function createLogger(config: Config['log'], { destination, scope }: LoggerOptions = {}): Logger {
  const options = {
    level: config.level,
    timestamp: stdTimeFunctions.isoTime,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    ...(scope
      ? {
          mixin(_line: object, _level: number, logger: Logger): object {
            if ((logger as unknown as Record<symbol, boolean>)[CARRIES_REQUEST_ID]) return {};
            const requestId = scope.current();
            return requestId === undefined ? {} : { requestId };
          },
        }
      : {}),
  };
  if (logFormatOf(config) === 'json') return destination ? pino(options, destination) : pino(options);
  const stream = pretty({
    destination: destination ?? 1,
    colorize: destination === undefined && process.stdout.isTTY === true,
    singleLine: true,
    translateTime: "UTC:yyyy-mm-dd'T'HH:MM:ss.l'Z'",
    ignore: 'pid,hostname',
    sync: true,
  });
  return pino(options, stream);
}
