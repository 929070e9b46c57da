// Controller configuration: defaults < YAML file < environment < command-line flags, validated once at
// start. Every problem is a ConfigError whose message starts with the offending key, written the way
// the operator wrote it: a dotted path into the file (`web[1].apis[0].binding`), an environment
// variable (`OVERLAY_LISTEN`) or a flag (`--listen`). Unknown keys in the file are errors, so a typo
// never passes silently. The file is validated completely even where the environment or a flag
// overrides a value, so a broken file does not wait for the day the override is removed.

import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseDocument } from 'yaml';
import {
  canonicalHost,
  checkRedirectUriPattern,
  formatHostPort,
  isWildcardHost,
  parseHostPort,
  type HostPort,
} from './address.js';
import { formatDuration, parseDuration } from './duration.js';

export { formatDuration, parseDuration } from './duration.js';
export { formatHostPort, parseHostPort, type HostPort } from './address.js';

export type ApiBinding = 'edge-client' | 'edge-management' | 'edge-oidc';
export interface ApiConfig {
  binding: ApiBinding;
  options: { redirectURIs?: string[] };
}
/**
 * interface: host:port to listen on; port 0 means "any free port".
 * address: host:port clients use (advertised in token issuers, enrollment JWTs, links); never a
 * wildcard address. Its port is 0 only when it was derived from an interface with port 0: the
 * listener then advertises the port it was actually bound to. A configured address never has port 0.
 */
export interface BindPoint {
  interface: string;
  address: string;
}
/**
 * How long a client may take and how many connections it may hold, per bind point. Durations in
 * milliseconds. A client that is slow or silent holds a socket and memory; these bound both.
 */
export interface ListenerOptions {
  /** TLS handshake, then request line and headers, must arrive within this. */
  readHeaderTimeout: number;
  /** The whole request, body included, must arrive within this (never shorter than readHeaderTimeout). */
  readTimeout: number;
  /** A kept-alive connection with no request under way is closed after this. */
  idleTimeout: number;
  /** A complete answer must be taken by the client within this, else the connection is closed. */
  writeTimeout: number;
  /** Open connections at most; more are closed as they arrive. */
  maxConnections: number;
  /** Open connections at most from one client address (IPv4 address, IPv6 /64). */
  maxConnectionsPerAddress: number;
}
/** apis is final: the edge-oidc auto-binding rule has been applied. */
export interface ListenerConfig {
  name: string;
  bindPoints: BindPoint[];
  apis: ApiConfig[];
  options: ListenerOptions;
  /**
   * Serves GET /metrics: the listeners that list the `metrics` binding, or, when none does, every
   * listener hosting edge-management. Set by the loader.
   */
  metrics?: boolean;
}
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
export type LogFormat = 'json' | 'pretty';
export interface Config {
  /** Absolute path. */
  dataDir: string;
  /** Absolute path when a file was given. */
  configFile?: string;
  log: {
    level: LogLevel;
    /** JSON lines, or readable lines for people; absent: readable when standard output is a terminal. */
    format?: LogFormat;
    /** One info line per request (method, route, status, duration, identity, address, request id). */
    requests: boolean;
  };
  /** Default administrator created at first start. */
  admin: { username?: string; password?: string };
  edge: {
    /** Durations in milliseconds. */
    api: { sessionTimeout: number; disableOidcAutoBinding: boolean };
    oidc: { accessTokenDuration: number; idTokenDuration: number; refreshTokenDuration: number };
    enrollment: { edgeIdentity: { duration: number }; edgeRouter: { duration: number } };
    totp: { issuer: string };
    /**
     * Fetches of external JWT signers' JWKS: http to a loopback address, and targets on loopback,
     * private and link-local addresses, are refused unless allowed here (tests, closed networks).
     */
    externalJwtSigners: { allowHttpLoopback: boolean; allowPrivateAddresses: boolean };
  };
  web: ListenerConfig[];
  /** The audit log: recorded or not, and how long and how many rows are kept (maxAge in ms). */
  audit: { enabled: boolean; maxAge: number; maxEvents: number };
  /** Writes of requests waiting at most; beyond, a write is refused with 429 and Retry-After. */
  writes: { maxQueued: number };
  /**
   * Start even though secrets.key is not the key the store was sealed with, removing what that key
   * sealed (--forget-sealed-secrets / OVERLAY_FORGET_SEALED_SECRETS): the way out of a lost key.
   */
  forgetSealedSecrets: boolean;
  /** Adjustments the loader made, for the caller to log. */
  warnings: string[];
}
export interface ConfigFlags {
  dataDir?: string;
  listen?: string;
  advertise?: string;
  config?: string;
  logLevel?: string;
  logFormat?: string;
  forgetSealedSecrets?: boolean;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(message.startsWith(`${key}: `) ? message : `${key}: ${message}`);
  }
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** Upper bound of every duration, so that adding durations to timestamps stays exact. */
const MAX_DURATION = 10 * 365 * 24 * HOUR;
const DEFAULT_LISTEN = '127.0.0.1:1280';
const DEFAULT_DATA_DIR = 'overlay-data';
const DEFAULT_TOTP_ISSUER = 'overlay';
const MAX_FILE_BYTES = 1024 * 1024;
const MAX_PATH_LENGTH = 4096;
const MAX_LISTENERS = 32;
const MAX_BIND_POINTS = 32;
const MAX_APIS = 16;
const MAX_REDIRECT_URIS = 100;
const SECOND = 1000;

/** Listener limits when the file sets none: generous for API clients, short for a stalled socket. */
export const DEFAULT_LISTENER_OPTIONS: Readonly<ListenerOptions> = Object.freeze({
  readHeaderTimeout: 10 * SECOND,
  readTimeout: 30 * SECOND,
  idleTimeout: 60 * SECOND,
  writeTimeout: 30 * SECOND,
  maxConnections: 1024,
  maxConnectionsPerAddress: 64,
});
/** Timeouts beyond Node's timer range (about 24.8 days) would fire at once; an hour is plenty. */
const LISTENER_TIMEOUT_RULE = { min: 100, max: HOUR };
const MAX_CONNECTIONS = 1_000_000;

const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const BINDINGS: readonly ApiBinding[] = ['edge-client', 'edge-management', 'edge-oidc'];
const LOG_FORMATS: readonly LogFormat[] = ['json', 'pretty'];
/** Not an API: a listener listing it serves GET /metrics (and the management listeners then do not). */
const METRICS_BINDING = 'metrics';

/**
 * Loads the configuration. Precedence per setting: flag > environment > file > default.
 *
 * Listeners: without `web` in the file there is one listener `default` with one bind point
 * (interface = --listen / OVERLAY_LISTEN, default 127.0.0.1:1280; address = --advertise /
 * OVERLAY_ADVERTISE) serving edge-client, edge-management and edge-oidc. With `web` in the file,
 * --listen / OVERLAY_LISTEN replaces the interface and --advertise / OVERLAY_ADVERTISE the address of
 * the first bind point of the first listener; everything else comes from the file.
 *
 * A bind point without an address advertises its interface, except that a wildcard interface
 * (0.0.0.0 or [::]) advertises localhost on the same port, with a warning: clients cannot connect to
 * a wildcard address, the host's own name may not resolve, and localhost is always in the server
 * certificate, so local clients work out of the box and the warning says to set the real name.
 */
export function loadConfig(flags: ConfigFlags, env: NodeJS.ProcessEnv, cwd: string = process.cwd()): Config {
  const warnings: string[] = [];

  const configOption = pick(flags.config, '--config', env.OVERLAY_CONFIG, 'OVERLAY_CONFIG');
  let configFile: string | undefined;
  let file: Mapping = {};
  if (configOption) {
    configFile = path.resolve(cwd, pathText(configOption.value, configOption.key));
    file = readConfigFile(configFile);
  }
  const top = mapping(file, '', ['dataDir', 'log', 'admin', 'edge', 'web', 'audit', 'writes']);

  // Data directory: relative paths in the file are relative to the file, elsewhere to cwd.
  const fileDataDir = present(top.dataDir, 'dataDir') ? pathText(top.dataDir, 'dataDir') : undefined;
  const dataDirOption = pick(flags.dataDir, '--data-dir', env.OVERLAY_DATA_DIR, 'OVERLAY_DATA_DIR');
  const dataDir = dataDirOption
    ? path.resolve(cwd, pathText(dataDirOption.value, dataDirOption.key))
    : fileDataDir !== undefined && configFile !== undefined
      ? path.resolve(path.dirname(configFile), fileDataDir)
      : path.resolve(cwd, DEFAULT_DATA_DIR);

  const log = mapping(top.log, 'log', ['level', 'format', 'requests']);
  const fileLogLevel = present(log.level, 'log.level') ? oneOf(log.level, 'log.level', LOG_LEVELS) : undefined;
  const logLevelOption = pick(flags.logLevel, '--log-level', env.OVERLAY_LOG_LEVEL, 'OVERLAY_LOG_LEVEL');
  const logLevel = logLevelOption ? oneOf(logLevelOption.value, logLevelOption.key, LOG_LEVELS) : (fileLogLevel ?? 'info');
  const fileLogFormat = present(log.format, 'log.format') ? oneOf(log.format, 'log.format', LOG_FORMATS) : undefined;
  const logFormatOption = pick(flags.logFormat, '--log-format', env.OVERLAY_LOG_FORMAT, 'OVERLAY_LOG_FORMAT');
  const logFormat = logFormatOption ? oneOf(logFormatOption.value, logFormatOption.key, LOG_FORMATS) : fileLogFormat;
  const fileLogRequests = present(log.requests, 'log.requests') ? bool(log.requests, 'log.requests') : true;
  const logRequests =
    env.OVERLAY_LOG_REQUESTS !== undefined && env.OVERLAY_LOG_REQUESTS !== ''
      ? oneOf(env.OVERLAY_LOG_REQUESTS, 'OVERLAY_LOG_REQUESTS', ['true', 'false']) === 'true'
      : fileLogRequests;

  // A flag or variable of one start, never a key of the file: a standing setting would remove the MFA
  // enrollments again, unasked, the next time the key does not match.
  const forgetSealedSecrets =
    flags.forgetSealedSecrets === true ||
    (env.OVERLAY_FORGET_SEALED_SECRETS !== undefined &&
      env.OVERLAY_FORGET_SEALED_SECRETS !== '' &&
      oneOf(env.OVERLAY_FORGET_SEALED_SECRETS, 'OVERLAY_FORGET_SEALED_SECRETS', ['true', 'false']) === 'true');

  const admin = mapping(top.admin, 'admin', ['username', 'password']);
  const adminText = (name: 'username' | 'password', envName: string, limits: TextLimits): string | undefined => {
    const fileKey = `admin.${name}`;
    const fromFile = present(admin[name], fileKey) ? text(admin[name], fileKey, limits) : undefined;
    const fromEnv = env[envName];
    return fromEnv !== undefined && fromEnv !== '' ? text(fromEnv, envName, limits) : fromFile;
  };
  const username = adminText('username', 'OVERLAY_ADMIN_USERNAME', { min: 4, max: 100 });
  const password = adminText('password', 'OVERLAY_ADMIN_PASSWORD', { min: 5, max: 100, secret: true });

  const edge = readEdge(top.edge, warnings);
  const web = readListeners(top.web, flags, env, edge.api.disableOidcAutoBinding, warnings);

  return {
    dataDir,
    ...(configFile !== undefined ? { configFile } : {}),
    log: { level: logLevel, ...(logFormat !== undefined ? { format: logFormat } : {}), requests: logRequests },
    admin: {
      ...(username !== undefined ? { username } : {}),
      ...(password !== undefined ? { password } : {}),
    },
    edge,
    web,
    audit: readAudit(top.audit),
    writes: readWrites(top.writes),
    forgetSealedSecrets,
    warnings,
  };
}

// ---------------------------------------------------------------------------------------------------
// audit log and write queue

const DAY = 24 * HOUR;

function readAudit(value: unknown): Config['audit'] {
  const audit = mapping(value, 'audit', ['enabled', 'maxAge', 'maxEvents']);
  return {
    enabled: present(audit.enabled, 'audit.enabled') ? bool(audit.enabled, 'audit.enabled') : true,
    maxAge: duration(audit.maxAge, 'audit.maxAge', { fallback: 90 * DAY, min: HOUR }),
    maxEvents: integer(audit.maxEvents, 'audit.maxEvents', { fallback: 1_000_000, min: 1_000, max: 1_000_000_000 }),
  };
}

function readWrites(value: unknown): Config['writes'] {
  const writes = mapping(value, 'writes', ['maxQueued']);
  return { maxQueued: integer(writes.maxQueued, 'writes.maxQueued', { fallback: 1_000, min: 1, max: 1_000_000 }) };
}

// ---------------------------------------------------------------------------------------------------
// edge

function readEdge(value: unknown, warnings: string[]): Config['edge'] {
  const edge = mapping(value, 'edge', ['api', 'oidc', 'enrollment', 'totp', 'externalJwtSigners']);

  const api = mapping(edge.api, 'edge.api', ['sessionTimeout', 'disableOidcAutoBinding']);
  const sessionTimeout = duration(api.sessionTimeout, 'edge.api.sessionTimeout', { fallback: 30 * MINUTE, min: MINUTE });
  const disableOidcAutoBinding = present(api.disableOidcAutoBinding, 'edge.api.disableOidcAutoBinding')
    ? bool(api.disableOidcAutoBinding, 'edge.api.disableOidcAutoBinding')
    : false;

  const oidc = mapping(edge.oidc, 'edge.oidc', ['accessTokenDuration', 'idTokenDuration', 'refreshTokenDuration']);
  const access = duration(oidc.accessTokenDuration, 'edge.oidc.accessTokenDuration', { fallback: 30 * MINUTE, min: MINUTE });
  const id = duration(oidc.idTokenDuration, 'edge.oidc.idTokenDuration', { fallback: 30 * MINUTE, min: MINUTE });
  let refresh = duration(oidc.refreshTokenDuration, 'edge.oidc.refreshTokenDuration', { fallback: 24 * HOUR, min: MINUTE });
  // Interface rule: refresh outlives access by at least a minute; a violating value is adjusted.
  if (refresh < access + MINUTE) {
    warnings.push(
      `edge.oidc.refreshTokenDuration: ${formatDuration(refresh)} is not at least 1m longer than ` +
        `edge.oidc.accessTokenDuration (${formatDuration(access)}); using ${formatDuration(access + MINUTE)}`,
    );
    refresh = access + MINUTE;
  }

  const enrollment = mapping(edge.enrollment, 'edge.enrollment', ['edgeIdentity', 'edgeRouter']);
  const enrollmentDuration = (key: 'edgeIdentity' | 'edgeRouter'): { duration: number } => {
    const section = mapping(enrollment[key], `edge.enrollment.${key}`, ['duration']);
    return {
      duration: duration(section.duration, `edge.enrollment.${key}.duration`, { fallback: 180 * MINUTE, min: 5 * MINUTE }),
    };
  };

  const totp = mapping(edge.totp, 'edge.totp', ['issuer']);
  const issuer = present(totp.issuer, 'edge.totp.issuer')
    ? text(totp.issuer, 'edge.totp.issuer', { min: 1, max: 64 })
    : DEFAULT_TOTP_ISSUER;

  return {
    api: { sessionTimeout, disableOidcAutoBinding },
    oidc: { accessTokenDuration: access, idTokenDuration: id, refreshTokenDuration: refresh },
    enrollment: { edgeIdentity: enrollmentDuration('edgeIdentity'), edgeRouter: enrollmentDuration('edgeRouter') },
    totp: { issuer },
    externalJwtSigners: readExternalJwtSigners(edge.externalJwtSigners),
  };
}

function readExternalJwtSigners(value: unknown): Config['edge']['externalJwtSigners'] {
  const section = mapping(value, 'edge.externalJwtSigners', ['allowHttpLoopback', 'allowPrivateAddresses']);
  const flag = (name: 'allowHttpLoopback' | 'allowPrivateAddresses') => {
    const key = `edge.externalJwtSigners.${name}`;
    return present(section[name], key) ? bool(section[name], key) : false;
  };
  return { allowHttpLoopback: flag('allowHttpLoopback'), allowPrivateAddresses: flag('allowPrivateAddresses') };
}

// ---------------------------------------------------------------------------------------------------
// web listeners

interface DraftBindPoint {
  interface: string;
  interfaceKey: string;
  address?: string;
  addressKey?: string;
}
interface DraftListener {
  name: string;
  bindPoints: DraftBindPoint[];
  apis: ApiConfig[];
  options: ListenerOptions;
  /** Lists the metrics binding. */
  metrics?: boolean;
}

function readListeners(
  value: unknown,
  flags: ConfigFlags,
  env: NodeJS.ProcessEnv,
  disableOidcAutoBinding: boolean,
  warnings: string[],
): ListenerConfig[] {
  const listen = pick(flags.listen, '--listen', env.OVERLAY_LISTEN, 'OVERLAY_LISTEN');
  const advertise = pick(flags.advertise, '--advertise', env.OVERLAY_ADVERTISE, 'OVERLAY_ADVERTISE');
  if (listen) interfaceAddress(listen.value, listen.key);
  if (advertise) advertisedAddress(advertise.value, advertise.key);

  let drafts: DraftListener[];
  if (value === undefined) {
    drafts = [
      {
        name: 'default',
        bindPoints: [
          {
            interface: listen?.value ?? DEFAULT_LISTEN,
            interfaceKey: listen?.key ?? 'listen',
            ...(advertise ? { address: advertise.value, addressKey: advertise.key } : {}),
          },
        ],
        apis: BINDINGS.map((binding) => ({ binding, options: {} })),
        options: { ...DEFAULT_LISTENER_OPTIONS },
      },
    ];
  } else {
    drafts = readWeb(value);
    const first = drafts[0]?.bindPoints[0];
    if (first && listen) Object.assign(first, { interface: listen.value, interfaceKey: listen.key });
    if (first && advertise) Object.assign(first, { address: advertise.value, addressKey: advertise.key });
  }

  // Two bind points on the same interface cannot both listen. Port 0 picks a fresh port each time.
  const seen = new Map<string, string>();
  for (const draft of drafts) {
    for (const bindPoint of draft.bindPoints) {
      const { host, port } = parseHostPort(bindPoint.interface, { allowPortZero: true });
      if (port === 0) continue;
      const id = `${canonicalHost(host)}:${port}`;
      const earlier = seen.get(id);
      if (earlier !== undefined) {
        throw new ConfigError(bindPoint.interfaceKey, `${bindPoint.interface} is already used by ${earlier}`);
      }
      seen.set(id, bindPoint.interfaceKey);
    }
  }

  const listeners: ListenerConfig[] = drafts.map((draft) => ({
    name: draft.name,
    bindPoints: draft.bindPoints.map((bindPoint) => ({
      interface: bindPoint.interface,
      address: bindPoint.address ?? defaultAddress(bindPoint, warnings),
    })),
    apis: draft.apis,
    options: draft.options,
  }));
  applyOidcAutoBinding(listeners, disableOidcAutoBinding, warnings);
  // Metrics on the listeners that ask for them, else beside the Management API.
  const metricsListed = drafts.some((draft) => draft.metrics === true);
  listeners.forEach((listener, i) => {
    listener.metrics = metricsListed ? drafts[i]!.metrics === true : listener.apis.some((api) => api.binding === 'edge-management');
  });
  return listeners;
}

function readWeb(value: unknown): DraftListener[] {
  const entries = list(value, 'web', { min: 1, max: MAX_LISTENERS });
  const names = new Map<string, string>();
  return entries.map((entry, i) => {
    const key = `web[${i}]`;
    const listener = mapping(entry, key, ['name', 'bindPoints', 'apis', 'options']);
    required(listener.name, `${key}.name`);
    const name = text(listener.name, `${key}.name`, { min: 1, max: 64 });
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) {
      throw new ConfigError(`${key}.name`, `must start with a letter or digit and contain only letters, digits, ".", "_" and "-", got ${JSON.stringify(name)}`);
    }
    const earlier = names.get(name);
    if (earlier !== undefined) throw new ConfigError(`${key}.name`, `listener name "${name}" is already used by ${earlier}`);
    names.set(name, `${key}.name`);

    const bindPoints = list(listener.bindPoints, `${key}.bindPoints`, { min: 1, max: MAX_BIND_POINTS }).map(
      (raw, j): DraftBindPoint => {
        const bpKey = `${key}.bindPoints[${j}]`;
        const bindPoint = mapping(raw, bpKey, ['interface', 'address']);
        required(bindPoint.interface, `${bpKey}.interface`);
        const draft: DraftBindPoint = {
          interface: interfaceAddress(bindPoint.interface, `${bpKey}.interface`),
          interfaceKey: `${bpKey}.interface`,
        };
        if (present(bindPoint.address, `${bpKey}.address`)) {
          draft.address = advertisedAddress(bindPoint.address, `${bpKey}.address`);
          draft.addressKey = `${bpKey}.address`;
        }
        return draft;
      },
    );

    const seenBindings = new Set<ApiBinding>();
    let metrics = false;
    const apis = list(listener.apis, `${key}.apis`, { min: 1, max: MAX_APIS }).flatMap((raw, j): ApiConfig[] => {
      const apiKey = `${key}.apis[${j}]`;
      const api = mapping(raw, apiKey, ['binding', 'options']);
      required(api.binding, `${apiKey}.binding`);
      if (api.binding === METRICS_BINDING) {
        if (metrics) throw new ConfigError(`${apiKey}.binding`, `${METRICS_BINDING} is listed twice on this listener`);
        if (present(api.options, `${apiKey}.options`)) throw new ConfigError(`${apiKey}.options`, `${METRICS_BINDING} takes no options`);
        metrics = true;
        return [];
      }
      // Named among the allowed values of the message; answered above.
      const binding = oneOf(api.binding, `${apiKey}.binding`, [...BINDINGS, METRICS_BINDING]) as ApiBinding;
      if (seenBindings.has(binding)) throw new ConfigError(`${apiKey}.binding`, `${binding} is listed twice on this listener`);
      seenBindings.add(binding);
      const options = mapping(api.options, `${apiKey}.options`, ['redirectURIs']);
      const urisKey = `${apiKey}.options.redirectURIs`;
      if (!present(options.redirectURIs, urisKey)) return [{ binding, options: {} }];
      if (binding !== 'edge-oidc') throw new ConfigError(urisKey, `only allowed on binding edge-oidc, not ${binding}`);
      const redirectURIs = list(options.redirectURIs, urisKey, { min: 0, max: MAX_REDIRECT_URIS }).map((uri, k) => {
        try {
          checkRedirectUriPattern(uri as string);
        } catch (err) {
          throw new ConfigError(`${urisKey}[${k}]`, (err as Error).message);
        }
        return uri as string;
      });
      return [{ binding, options: { redirectURIs } }];
    });

    return { name, bindPoints, apis, options: readListenerOptions(listener.options, `${key}.options`), ...(metrics ? { metrics } : {}) };
  });
}

function readListenerOptions(value: unknown, key: string): ListenerOptions {
  const options = mapping(value, key, Object.keys(DEFAULT_LISTENER_OPTIONS));
  const timeout = (name: 'readTimeout' | 'readHeaderTimeout' | 'idleTimeout' | 'writeTimeout', fallback: number): number =>
    // Whole milliseconds: Node's server timeouts take integers only.
    Math.round(duration(options[name], `${key}.${name}`, { fallback, ...LISTENER_TIMEOUT_RULE }));
  const readTimeout = timeout('readTimeout', DEFAULT_LISTENER_OPTIONS.readTimeout);
  // The headers are part of the request: their deadline cannot be later than the request's.
  const readHeaderTimeout = timeout('readHeaderTimeout', Math.min(DEFAULT_LISTENER_OPTIONS.readHeaderTimeout, readTimeout));
  if (readHeaderTimeout > readTimeout) {
    throw new ConfigError(
      `${key}.readHeaderTimeout`,
      `must not be longer than ${key}.readTimeout (${formatDuration(readTimeout)}), got ${formatDuration(readHeaderTimeout)}`,
    );
  }
  const count = (name: 'maxConnections' | 'maxConnectionsPerAddress'): number =>
    integer(options[name], `${key}.${name}`, { fallback: DEFAULT_LISTENER_OPTIONS[name], min: 1, max: MAX_CONNECTIONS });
  return {
    readHeaderTimeout,
    readTimeout,
    idleTimeout: timeout('idleTimeout', DEFAULT_LISTENER_OPTIONS.idleTimeout),
    writeTimeout: timeout('writeTimeout', DEFAULT_LISTENER_OPTIONS.writeTimeout),
    maxConnections: count('maxConnections'),
    maxConnectionsPerAddress: count('maxConnectionsPerAddress'),
  };
}

/**
 * Interface rule: edge-oidc is added to every listener hosting edge-client, unless some listener lists
 * edge-oidc explicitly or auto-binding is disabled; then OIDC is served only where it is listed.
 */
function applyOidcAutoBinding(listeners: ListenerConfig[], disabled: boolean, warnings: string[]): void {
  const hosts = (listener: ListenerConfig, binding: ApiBinding): boolean =>
    listener.apis.some((api) => api.binding === binding);
  const explicit = listeners.some((listener) => hosts(listener, 'edge-oidc'));
  if (!disabled && !explicit) {
    for (const listener of listeners) {
      if (hosts(listener, 'edge-client')) listener.apis.push({ binding: 'edge-oidc', options: {} });
    }
  }
  if (!listeners.some((listener) => hosts(listener, 'edge-oidc'))) {
    warnings.push('web: no listener serves edge-oidc, so OIDC login is unavailable');
  }
}

function defaultAddress(bindPoint: DraftBindPoint, warnings: string[]): string {
  const { host, port } = parseHostPort(bindPoint.interface, { allowPortZero: true });
  if (!isWildcardHost(host)) return bindPoint.interface;
  const address = formatHostPort('localhost', port);
  warnings.push(
    `${bindPoint.interfaceKey}: ${bindPoint.interface} listens on all interfaces; advertising ${address}. ` +
      'Set the address clients use with --advertise / OVERLAY_ADVERTISE or the bind point address.',
  );
  return address;
}

function interfaceAddress(value: unknown, key: string): string {
  hostPort(value, key, true);
  return value as string;
}

function advertisedAddress(value: unknown, key: string): string {
  const { host } = hostPort(value, key, false);
  if (isWildcardHost(host)) {
    throw new ConfigError(key, `${JSON.stringify(value)} is a wildcard address; give the host name or address clients connect to`);
  }
  return value as string;
}

function hostPort(value: unknown, key: string, allowPortZero: boolean): HostPort {
  if (Array.isArray(value)) {
    // `interface: [::1]:1280` unquoted is a YAML flow sequence.
    throw new ConfigError(key, 'must be a string in the form host:port; quote bracketed IPv6 addresses in YAML, e.g. "[::1]:1280"');
  }
  if (typeof value !== 'string') throw new ConfigError(key, `must be a string in the form host:port, got ${describe(value)}`);
  try {
    return parseHostPort(value, { allowPortZero });
  } catch (err) {
    throw new ConfigError(key, (err as Error).message);
  }
}

// ---------------------------------------------------------------------------------------------------
// the file

type Mapping = Record<string, unknown>;

function readConfigFile(file: string): Mapping {
  let source: string;
  try {
    const stat = statSync(file);
    if (!stat.isFile()) throw new ConfigError('config', `${file} is not a regular file`);
    if (stat.size > MAX_FILE_BYTES) throw new ConfigError('config', `${file} is larger than 1 MiB`);
    source = readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (err as Error).message;
    throw new ConfigError('config', `cannot read ${file}: ${reason}`);
  }
  const doc = parseDocument(source, { prettyErrors: true, uniqueKeys: true });
  const [error] = doc.errors;
  if (error) throw new ConfigError('config', `${file} is not valid YAML: ${error.message}`);
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw new ConfigError('config', `${file} is not valid YAML: ${(err as Error).message}`);
  }
  // A file holding only comments configures nothing.
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new ConfigError('config', `${file} must hold a YAML mapping at the top level, got ${describe(value)}`);
  }
  return value as Mapping;
}

// ---------------------------------------------------------------------------------------------------
// value checks; each throws a ConfigError naming the key

interface Option {
  value: string;
  key: string;
}

/** The flag if given, else the environment variable if set and not empty. */
function pick(flag: string | undefined, flagName: string, envValue: string | undefined, envName: string): Option | undefined {
  if (flag !== undefined) return { value: flag, key: flagName };
  if (envValue !== undefined && envValue !== '') return { value: envValue, key: envName };
  return undefined;
}

function joinKey(parent: string, key: string): string {
  const part = key.length > 64 ? `${key.slice(0, 64)}…` : key;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(part)) return `${parent}[${JSON.stringify(part)}]`;
  return parent === '' ? part : `${parent}.${part}`;
}

/** false when absent; a key written without a value (YAML null) is an error for scalars. */
function present(value: unknown, key: string): boolean {
  if (value === undefined) return false;
  if (value === null) throw new ConfigError(key, 'has no value');
  return true;
}

function required(value: unknown, key: string): void {
  if (value === undefined) throw new ConfigError(key, 'is required');
  present(value, key);
}

/** A section; absent or empty (YAML null) counts as an empty mapping. */
function mapping(value: unknown, key: string, allowed: readonly string[]): Mapping {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new ConfigError(key, `must be a mapping with keys ${allowed.join(', ')}, got ${describe(value)}`);
  }
  for (const name of Object.keys(value)) {
    if (!allowed.includes(name)) throw new ConfigError(joinKey(key, name), `unknown key (allowed here: ${allowed.join(', ')})`);
  }
  return value as Mapping;
}

function list(value: unknown, key: string, limits: { min: number; max: number }): unknown[] {
  if (value === undefined) throw new ConfigError(key, 'is required');
  if (!Array.isArray(value)) throw new ConfigError(key, `must be a list, got ${describe(value)}`);
  if (value.length < limits.min) throw new ConfigError(key, `must list at least ${limits.min} entr${limits.min === 1 ? 'y' : 'ies'}`);
  if (value.length > limits.max) throw new ConfigError(key, `must list at most ${limits.max} entries, got ${value.length}`);
  return value;
}

interface TextLimits {
  min: number;
  max: number;
  /** The value never appears in a message. */
  secret?: boolean;
}

/** A bounded single-line string. */
function text(value: unknown, key: string, limits: TextLimits): string {
  if (typeof value !== 'string') {
    const hint = typeof value === 'number' || typeof value === 'boolean' ? ' (quote it in YAML)' : '';
    throw new ConfigError(key, `must be a string${hint}, got ${limits.secret ? `a ${kind(value)}` : describe(value)}`);
  }
  const length = [...value].length;
  if (length < limits.min) throw new ConfigError(key, limits.min === 1 ? 'must not be empty' : `must be at least ${limits.min} characters long`);
  if (length > limits.max) throw new ConfigError(key, `must be at most ${limits.max} characters long`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) throw new ConfigError(key, 'must not contain control characters');
  return value;
}

function pathText(value: unknown, key: string): string {
  return text(value, key, { min: 1, max: MAX_PATH_LENGTH });
}

function bool(value: unknown, key: string): boolean {
  if (typeof value !== 'boolean') throw new ConfigError(key, `must be true or false, got ${describe(value)}`);
  return value;
}

function oneOf<T extends string>(value: unknown, key: string, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw new ConfigError(key, `must be one of ${allowed.join(', ')}, got ${describe(value)}`);
  }
  return value as T;
}

function integer(value: unknown, key: string, rule: { fallback: number; min: number; max: number }): number {
  if (!present(value, key)) return rule.fallback;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new ConfigError(key, `must be a whole number, got ${describe(value)}`);
  if (value < rule.min || value > rule.max) throw new ConfigError(key, `must be between ${rule.min} and ${rule.max}, got ${value}`);
  return value;
}

function duration(value: unknown, key: string, rule: { fallback: number; min: number; max?: number }): number {
  if (!present(value, key)) return rule.fallback;
  if (typeof value === 'number') {
    throw new ConfigError(key, `a unit is required (ms, s, m or h), e.g. "${value}s", got ${value}`);
  }
  if (typeof value !== 'string') throw new ConfigError(key, `must be a duration such as "30m", got ${describe(value)}`);
  let ms: number;
  try {
    ms = parseDuration(value);
  } catch (err) {
    throw new ConfigError(key, (err as Error).message);
  }
  if (ms < rule.min) throw new ConfigError(key, `must be at least ${formatDuration(rule.min)}, got ${JSON.stringify(value)}`);
  if (rule.max !== undefined && ms > rule.max) {
    throw new ConfigError(key, `must be at most ${formatDuration(rule.max)}, got ${JSON.stringify(value)}`);
  }
  if (ms > MAX_DURATION) {
    throw new ConfigError(key, `must be at most ${formatDuration(MAX_DURATION)} (10 years), got ${JSON.stringify(value)}`);
  }
  return ms;
}

function kind(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'list';
  return typeof value === 'object' ? 'mapping' : typeof value;
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
  return String(value);
}
