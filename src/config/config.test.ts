import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, DEFAULT_LISTENER_OPTIONS, loadConfig, type ApiBinding, type Config, type ConfigFlags } from './index.js';

const M = 60_000;
const H = 60 * M;

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'overlay-config-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Writes the YAML (when given) to overlay.yaml in the temp dir and loads it with cwd = temp dir. */
function load(yaml?: string, flags: ConfigFlags = {}, env: NodeJS.ProcessEnv = {}): Config {
  if (yaml !== undefined) {
    writeFileSync(path.join(dir, 'overlay.yaml'), yaml);
    flags = { config: 'overlay.yaml', ...flags };
  }
  return loadConfig(flags, env, dir);
}

function loadError(yaml?: string, flags: ConfigFlags = {}, env: NodeJS.ProcessEnv = {}): ConfigError {
  try {
    load(yaml, flags, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    const error = err as ConfigError;
    expect(error.message.startsWith(`${error.key}: `)).toBe(true);
    return error;
  }
  throw new Error('expected a ConfigError');
}

const bindings = (config: Config): ApiBinding[][] => config.web.map((l) => l.apis.map((a) => a.binding));

const EXAMPLE = `
dataDir: /var/lib/overlay
log: { level: info }
admin: { username: admin, password: "s3cret-pass" }
edge:
  api: { sessionTimeout: 30m, disableOidcAutoBinding: false }
  oidc: { accessTokenDuration: 30m, idTokenDuration: 30m, refreshTokenDuration: 24h }
  enrollment:
    edgeIdentity: { duration: 180m }
    edgeRouter: { duration: 180m }
web:
  - name: client
    bindPoints: [{ interface: 0.0.0.0:1280, address: ctrl.example.com:1280 }]
    apis: [{ binding: edge-client }]
    options:
      readHeaderTimeout: 10s
      readTimeout: 30s
      idleTimeout: 60s
      writeTimeout: 30s
      maxConnections: 1024
      maxConnectionsPerAddress: 16
  - name: admin
    bindPoints: [{ interface: 127.0.0.1:1281, address: 127.0.0.1:1281 }]
    apis:
      - binding: edge-management
      - binding: edge-oidc
        options: { redirectURIs: ["http://127.0.0.1:*/auth/callback"] }
`;

describe('defaults', () => {
  it('needs no file, environment or flags', () => {
    expect(load()).toEqual({
      dataDir: path.join(dir, 'overlay-data'),
      log: { level: 'info', requests: true },
      admin: {},
      edge: {
        api: { sessionTimeout: 30 * M, disableOidcAutoBinding: false },
        oidc: { accessTokenDuration: 30 * M, idTokenDuration: 30 * M, refreshTokenDuration: 24 * H },
        enrollment: { edgeIdentity: { duration: 180 * M }, edgeRouter: { duration: 180 * M } },
        totp: { issuer: 'overlay' },
        externalJwtSigners: { allowHttpLoopback: false, allowPrivateAddresses: false },
      },
      web: [
        {
          name: 'default',
          bindPoints: [{ interface: '127.0.0.1:1280', address: '127.0.0.1:1280' }],
          apis: [
            { binding: 'edge-client', options: {} },
            { binding: 'edge-management', options: {} },
            { binding: 'edge-oidc', options: {} },
          ],
          options: {
            readHeaderTimeout: 10_000,
            readTimeout: 30_000,
            idleTimeout: 60_000,
            writeTimeout: 30_000,
            maxConnections: 1024,
            maxConnectionsPerAddress: 64,
          },
          metrics: true,
        },
      ],
      audit: { enabled: true, maxAge: 90 * 24 * H, maxEvents: 1_000_000 },
      writes: { maxQueued: 1_000 },
      forgetSealedSecrets: false,
      warnings: [],
    } satisfies Config);
  });

  it.each(['', '# only a comment\n', 'edge:\n'])('treats %j as a file configuring nothing', (yaml) => {
    const config = load(yaml);
    expect(config.configFile).toBe(path.join(dir, 'overlay.yaml'));
    expect(config.edge.oidc.refreshTokenDuration).toBe(24 * H);
    expect(config.web[0]?.name).toBe('default');
  });

  it('reads the documented example file', () => {
    const config = load(EXAMPLE);
    expect(config.dataDir).toBe('/var/lib/overlay');
    expect(config.admin).toEqual({ username: 'admin', password: 's3cret-pass' });
    expect(config.web).toEqual([
      {
        name: 'client',
        bindPoints: [{ interface: '0.0.0.0:1280', address: 'ctrl.example.com:1280' }],
        apis: [{ binding: 'edge-client', options: {} }],
        options: { ...DEFAULT_LISTENER_OPTIONS, maxConnectionsPerAddress: 16 },
        metrics: false,
      },
      {
        name: 'admin',
        bindPoints: [{ interface: '127.0.0.1:1281', address: '127.0.0.1:1281' }],
        apis: [
          { binding: 'edge-management', options: {} },
          { binding: 'edge-oidc', options: { redirectURIs: ['http://127.0.0.1:*/auth/callback'] } },
        ],
        options: DEFAULT_LISTENER_OPTIONS,
        metrics: true,
      },
    ]);
    expect(config.warnings).toEqual([]);
  });
});

describe('logs and metrics', () => {
  it('log format: flag > environment > file; absent means "decide by the terminal"', () => {
    expect(load().log.format).toBeUndefined();
    expect(load('log: { format: pretty }\n').log.format).toBe('pretty');
    expect(load('log: { format: pretty }\n', {}, { OVERLAY_LOG_FORMAT: 'json' }).log.format).toBe('json');
    expect(load('log: { format: json }\n', { logFormat: 'pretty' }, { OVERLAY_LOG_FORMAT: 'json' }).log.format).toBe('pretty');
    expect(loadError(undefined, {}, { OVERLAY_LOG_FORMAT: 'xml' }).message).toBe('OVERLAY_LOG_FORMAT: must be one of json, pretty, got "xml"');
    expect(loadError('log: { format: text }\n').key).toBe('log.format');
  });

  it('request logs are on unless the file or OVERLAY_LOG_REQUESTS turns them off', () => {
    expect(load().log.requests).toBe(true);
    expect(load('log: { requests: false }\n').log.requests).toBe(false);
    expect(load('log: { requests: false }\n', {}, { OVERLAY_LOG_REQUESTS: 'true' }).log.requests).toBe(true);
    expect(load(undefined, {}, { OVERLAY_LOG_REQUESTS: 'false' }).log.requests).toBe(false);
    expect(loadError(undefined, {}, { OVERLAY_LOG_REQUESTS: 'no' }).key).toBe('OVERLAY_LOG_REQUESTS');
    expect(loadError('log: { requests: "yes" }\n').key).toBe('log.requests');
  });

  it('forgets sealed secrets only when a flag or OVERLAY_FORGET_SEALED_SECRETS asks, never from the file', () => {
    expect(load().forgetSealedSecrets).toBe(false);
    expect(load(undefined, { forgetSealedSecrets: true }).forgetSealedSecrets).toBe(true);
    expect(load(undefined, {}, { OVERLAY_FORGET_SEALED_SECRETS: 'true' }).forgetSealedSecrets).toBe(true);
    expect(load(undefined, {}, { OVERLAY_FORGET_SEALED_SECRETS: 'false' }).forgetSealedSecrets).toBe(false);
    expect(loadError(undefined, {}, { OVERLAY_FORGET_SEALED_SECRETS: 'yes' }).key).toBe('OVERLAY_FORGET_SEALED_SECRETS');
    expect(loadError('forgetSealedSecrets: true\n').key).toBe('forgetSealedSecrets');
  });

  it('/metrics goes where the metrics binding is listed, and only there', () => {
    const config = load(`
web:
  - name: api
    bindPoints: [{ interface: 127.0.0.1:2000 }]
    apis: [{ binding: edge-client }, { binding: edge-management }]
  - name: scrape
    bindPoints: [{ interface: 127.0.0.1:2001 }]
    apis: [{ binding: metrics }]
`);
    expect(config.web.map((l) => [l.name, l.metrics, l.apis.map((a) => a.binding)])).toEqual([
      ['api', false, ['edge-client', 'edge-management', 'edge-oidc']],
      ['scrape', true, []],
    ]);
  });

  it('without the metrics binding, /metrics is beside the Management API', () => {
    expect(load(EXAMPLE).web.map((l) => l.metrics)).toEqual([false, true]);
  });

  it.each([
    ['    apis: [{ binding: metrics }, { binding: metrics }]\n', 'web[0].apis[1].binding', /listed twice/],
    ['    apis: [{ binding: metrics, options: {} }]\n', 'web[0].apis[0].options', /takes no options/],
  ] as const)('%j → %s', (apis, key, message) => {
    const error = loadError(`web:\n  - name: a\n    bindPoints: [{ interface: "127.0.0.1:2000" }]\n${apis}`);
    expect(error.key).toBe(key);
    expect(error.message).toMatch(message);
  });
});

describe('precedence: flags > environment > file > default', () => {
  const FILE = `
dataDir: from-file
log: { level: warn }
admin: { username: file-admin, password: file-password }
web:
  - name: main
    bindPoints: [{ interface: 127.0.0.1:2000, address: file.example.com:2000 }]
    apis: [{ binding: edge-client }]
`;
  const ENV = {
    OVERLAY_DATA_DIR: 'from-env',
    OVERLAY_LOG_LEVEL: 'debug',
    OVERLAY_LISTEN: '127.0.0.1:3000',
    OVERLAY_ADVERTISE: 'env.example.com:3000',
    OVERLAY_ADMIN_USERNAME: 'env-admin',
    OVERLAY_ADMIN_PASSWORD: 'env-password',
  };
  const FLAGS: ConfigFlags = {
    dataDir: 'from-flag',
    logLevel: 'trace',
    listen: '127.0.0.1:4000',
    advertise: 'flag.example.com:4000',
  };
  const pickSettings = (c: Config) => ({
    dataDir: path.relative(dir, c.dataDir),
    level: c.log.level,
    bindPoint: c.web[0]?.bindPoints[0],
    username: c.admin.username,
    password: c.admin.password,
  });

  it.each([
    ['defaults', undefined, {}, {}, ['overlay-data', 'info', '127.0.0.1:1280', '127.0.0.1:1280', undefined, undefined]],
    ['file', FILE, {}, {}, ['from-file', 'warn', '127.0.0.1:2000', 'file.example.com:2000', 'file-admin', 'file-password']],
    ['env over file', FILE, ENV, {}, ['from-env', 'debug', '127.0.0.1:3000', 'env.example.com:3000', 'env-admin', 'env-password']],
    ['flags over env', FILE, ENV, FLAGS, ['from-flag', 'trace', '127.0.0.1:4000', 'flag.example.com:4000', 'env-admin', 'env-password']],
    ['flags without file', undefined, {}, FLAGS, ['from-flag', 'trace', '127.0.0.1:4000', 'flag.example.com:4000', undefined, undefined]],
  ] as const)('%s', (_name, yaml, env, flags, [dataDir, level, iface, address, username, password]) => {
    expect(pickSettings(load(yaml, flags, env))).toEqual({
      dataDir,
      level,
      bindPoint: { interface: iface, address },
      username,
      password,
    });
  });

  it('takes the config file from the flag before OVERLAY_CONFIG', () => {
    writeFileSync(path.join(dir, 'a.yaml'), 'log: { level: error }\n');
    writeFileSync(path.join(dir, 'b.yaml'), 'log: { level: fatal }\n');
    expect(loadConfig({ config: 'a.yaml' }, { OVERLAY_CONFIG: 'b.yaml' }, dir).log.level).toBe('error');
    expect(loadConfig({}, { OVERLAY_CONFIG: 'b.yaml' }, dir).log.level).toBe('fatal');
    expect(loadConfig({}, { OVERLAY_CONFIG: 'b.yaml' }, dir).configFile).toBe(path.join(dir, 'b.yaml'));
  });

  it('ignores empty environment variables', () => {
    const config = load(undefined, {}, { OVERLAY_LISTEN: '', OVERLAY_DATA_DIR: '', OVERLAY_CONFIG: '' });
    expect(config.web[0]?.bindPoints[0]?.interface).toBe('127.0.0.1:1280');
    expect(config.dataDir).toBe(path.join(dir, 'overlay-data'));
    expect(config.configFile).toBeUndefined();
  });

  it.each([
    ['admin: { username: ab }\n', {}, { OVERLAY_ADMIN_USERNAME: 'valid-admin' }, 'admin.username'],
    ['log: { level: loud }\n', { logLevel: 'info' }, {}, 'log.level'],
    ['dataDir: ""\n', { dataDir: '/srv' }, {}, 'dataDir'],
  ] as const)('still validates file values that are overridden: %j', (yaml, flags, env, key) => {
    expect(loadError(yaml, flags, env).key).toBe(key);
  });
});

describe('data directory', () => {
  it.each([
    ['relative in the file: against the file directory', 'conf/overlay.yaml', 'dataDir: data\n', {}, 'conf/data'],
    ['parent-relative in the file', 'conf/overlay.yaml', 'dataDir: ../state\n', {}, 'state'],
    ['relative flag: against cwd', 'conf/overlay.yaml', 'dataDir: data\n', { dataDir: 'flagdir' }, 'flagdir'],
    ['default: against cwd', 'conf/overlay.yaml', 'log: { level: info }\n', {}, 'overlay-data'],
  ] as const)('%s', (_name, file, yaml, flags, expected) => {
    mkdirSync(path.join(dir, 'conf'), { recursive: true });
    writeFileSync(path.join(dir, file), yaml);
    expect(loadConfig({ config: file, ...flags }, {}, dir).dataDir).toBe(path.join(dir, expected));
  });

  it('keeps absolute paths and resolves OVERLAY_DATA_DIR against cwd', () => {
    expect(load(undefined, { dataDir: '/srv/overlay' }).dataDir).toBe('/srv/overlay');
    expect(load(undefined, {}, { OVERLAY_DATA_DIR: 'x/y' }).dataDir).toBe(path.join(dir, 'x/y'));
  });
});

describe('durations', () => {
  const edge = (section: string, key: string, value: string) => {
    const [outer, inner] = section.split('.');
    return inner
      ? `edge:\n  ${outer}:\n    ${inner}:\n      ${key}: ${value}\n`
      : `edge:\n  ${outer}:\n    ${key}: ${value}\n`;
  };

  it.each([
    ['api', 'sessionTimeout', '1m', (c: Config) => c.edge.api.sessionTimeout, M],
    ['api', 'sessionTimeout', '2h', (c: Config) => c.edge.api.sessionTimeout, 2 * H],
    ['oidc', 'accessTokenDuration', '1m', (c: Config) => c.edge.oidc.accessTokenDuration, M],
    ['oidc', 'idTokenDuration', '90s', (c: Config) => c.edge.oidc.idTokenDuration, 90_000],
    ['oidc', 'refreshTokenDuration', '720h', (c: Config) => c.edge.oidc.refreshTokenDuration, 720 * H],
    ['enrollment.edgeIdentity', 'duration', '5m', (c: Config) => c.edge.enrollment.edgeIdentity.duration, 5 * M],
    ['enrollment.edgeRouter', 'duration', '1h30m', (c: Config) => c.edge.enrollment.edgeRouter.duration, 90 * M],
  ])('edge.%s.%s: %s', (section, key, value, get, expected) => {
    const config = load(edge(section, key, value));
    expect(get(config)).toBe(expected);
    expect(config.warnings).toEqual([]);
  });

  it.each([
    ['api', 'sessionTimeout', '59s', 'must be at least 1m, got "59s"'],
    ['oidc', 'accessTokenDuration', '30s', 'must be at least 1m, got "30s"'],
    ['oidc', 'idTokenDuration', '59999ms', 'must be at least 1m, got "59999ms"'],
    ['oidc', 'refreshTokenDuration', '30s', 'must be at least 1m, got "30s"'],
    ['enrollment.edgeIdentity', 'duration', '4m59s', 'must be at least 5m, got "4m59s"'],
    ['enrollment.edgeRouter', 'duration', '1m', 'must be at least 5m, got "1m"'],
    ['api', 'sessionTimeout', '87601h', 'must be at most 87600h (10 years), got "87601h"'],
    ['oidc', 'accessTokenDuration', '1800', 'a unit is required (ms, s, m or h), e.g. "1800s", got 1800'],
    ['oidc', 'idTokenDuration', '"1800"', 'invalid duration "1800": a unit is required'],
    ['oidc', 'idTokenDuration', '30 m', 'invalid duration "30 m": a unit is required after 30'],
    ['oidc', 'idTokenDuration', '1d', 'invalid duration "1d": days are not a unit; use hours, e.g. "24h"'],
    ['oidc', 'idTokenDuration', 'true', 'must be a duration such as "30m", got true'],
    ['oidc', 'idTokenDuration', '', 'has no value'],
  ])('edge.%s.%s: %s is refused', (section, key, value, message) => {
    const error = loadError(edge(section, key, value));
    expect(error.key).toBe(`edge.${section}.${key}`);
    expect(error.message).toContain(`edge.${section}.${key}: ${message}`);
  });

  it.each([
    ['default refresh shorter than a long access', '{ accessTokenDuration: 48h }', 48 * H + M, '24h', '48h'],
    ['refresh equal to access', '{ accessTokenDuration: 30m, refreshTokenDuration: 30m }', 31 * M, '30m', '30m'],
    ['refresh 59s longer than access', '{ accessTokenDuration: 10m, refreshTokenDuration: 10m59s }', 11 * M, '10m59s', '10m'],
  ])('adjusts refreshTokenDuration with a warning: %s', (_name, oidc, expected, refresh, access) => {
    const config = load(`edge:\n  oidc: ${oidc}\n`);
    expect(config.edge.oidc.refreshTokenDuration).toBe(expected);
    expect(config.warnings).toHaveLength(1);
    expect(config.warnings[0]).toMatch(/^edge\.oidc\.refreshTokenDuration: /);
    expect(config.warnings[0]).toContain(`${refresh} is not at least 1m longer than edge.oidc.accessTokenDuration (${access})`);
  });

  it('accepts a refresh exactly 1m longer than access without a warning', () => {
    const config = load('edge:\n  oidc: { accessTokenDuration: 10m, refreshTokenDuration: 11m }\n');
    expect(config.edge.oidc.refreshTokenDuration).toBe(11 * M);
    expect(config.warnings).toEqual([]);
  });
});

describe('listen and advertise', () => {
  it.each([
    ['loopback', { listen: '127.0.0.1:9000' }, '127.0.0.1:9000', '127.0.0.1:9000', 0],
    ['DNS name', { listen: 'ctrl.local:9000' }, 'ctrl.local:9000', 'ctrl.local:9000', 0],
    ['IPv6 loopback', { listen: '[::1]:9000' }, '[::1]:9000', '[::1]:9000', 0],
    ['IPv4 wildcard → localhost', { listen: '0.0.0.0:9000' }, '0.0.0.0:9000', 'localhost:9000', 1],
    ['IPv6 wildcard → localhost', { listen: '[::]:9000' }, '[::]:9000', 'localhost:9000', 1],
    ['wildcard with advertise', { listen: '0.0.0.0:9000', advertise: 'ctrl.example.com:443' }, '0.0.0.0:9000', 'ctrl.example.com:443', 0],
    ['any free port', { listen: '127.0.0.1:0' }, '127.0.0.1:0', '127.0.0.1:0', 0],
    ['advertise IPv6', { advertise: '[2001:db8::1]:1280' }, '127.0.0.1:1280', '[2001:db8::1]:1280', 0],
  ] as const)('%s', (_name, flags, iface, address, warnings) => {
    const config = load(undefined, flags);
    expect(config.web[0]?.bindPoints).toEqual([{ interface: iface, address }]);
    expect(config.warnings).toHaveLength(warnings);
    if (warnings) expect(config.warnings[0]).toMatch(/^--listen: .* listens on all interfaces; advertising localhost:9000/);
  });

  it.each([
    [{ listen: '::1:1280' }, {}, '--listen', /in brackets/],
    [{ listen: '127.0.0.1:70000' }, {}, '--listen', /port must be a number from 0 to 65535/],
    [{ listen: '' }, {}, '--listen', /must not be empty/],
    [{}, { OVERLAY_LISTEN: 'nope' }, 'OVERLAY_LISTEN', /has no port/],
    [{ advertise: '127.0.0.1:0' }, {}, '--advertise', /port must be a number from 1 to 65535/],
    [{ advertise: '0.0.0.0:1280' }, {}, '--advertise', /wildcard address/],
    [{}, { OVERLAY_ADVERTISE: '[::]:1280' }, 'OVERLAY_ADVERTISE', /wildcard address/],
  ] as const)('%j %j → %s', (flags, env, key, message) => {
    const error = loadError(undefined, flags, env);
    expect(error.key).toBe(key);
    expect(error.message).toMatch(message);
  });

  const WEB = `
web:
  - name: first
    bindPoints:
      - { interface: "127.0.0.1:2000", address: "file.example.com:2000" }
      - { interface: "127.0.0.1:2001" }
    apis: [{ binding: edge-client }]
  - name: second
    bindPoints: [{ interface: "0.0.0.0:2002" }]
    apis: [{ binding: edge-management }]
`;

  it.each([
    ['no override', {}, { interface: '127.0.0.1:2000', address: 'file.example.com:2000' }],
    ['listen keeps the file address', { listen: '127.0.0.1:3000' }, { interface: '127.0.0.1:3000', address: 'file.example.com:2000' }],
    ['advertise replaces the address', { advertise: 'x.example.com:1' }, { interface: '127.0.0.1:2000', address: 'x.example.com:1' }],
    ['both', { listen: '[::1]:3000', advertise: 'x.example.com:1' }, { interface: '[::1]:3000', address: 'x.example.com:1' }],
  ] as const)('with web in the file, overrides only the first bind point of the first listener: %s', (_name, flags, first) => {
    const config = load(WEB, flags);
    expect(config.web[0]?.bindPoints).toEqual([first, { interface: '127.0.0.1:2001', address: '127.0.0.1:2001' }]);
    expect(config.web[1]?.bindPoints).toEqual([{ interface: '0.0.0.0:2002', address: 'localhost:2002' }]);
    expect(config.warnings).toEqual([
      expect.stringMatching(/^web\[1\]\.bindPoints\[0\]\.interface: 0\.0\.0\.0:2002 listens on all interfaces; advertising localhost:2002/),
    ]);
  });

  it('derives the address from an overriding listen when the file has none', () => {
    const yaml = 'web:\n  - name: a\n    bindPoints: [{ interface: "127.0.0.1:2000" }]\n    apis: [{ binding: edge-client }]\n';
    expect(load(yaml, {}, { OVERLAY_LISTEN: '[::]:5000' }).web[0]?.bindPoints).toEqual([
      { interface: '[::]:5000', address: 'localhost:5000' },
    ]);
  });

  it('reports a listen override that collides with another bind point under its own name', () => {
    const error = loadError(WEB, { listen: '127.0.0.1:2001' });
    expect(error.key).toBe('web[0].bindPoints[1].interface');
    expect(error.message).toContain('is already used by --listen');
  });
});

describe('audit log and write queue', () => {
  it('reads retention, the switch and the queue bound from the file', () => {
    const config = load('audit: { enabled: false, maxAge: 720h, maxEvents: 5000 }\nwrites: { maxQueued: 64 }\n');
    expect(config.audit).toEqual({ enabled: false, maxAge: 720 * H, maxEvents: 5000 });
    expect(config.writes).toEqual({ maxQueued: 64 });
  });
});

describe('validation errors name the key', () => {
  const listener = (body: string) => `web:\n  - name: a\n${body}`;
  const BP = '    bindPoints: [{ interface: "127.0.0.1:2000" }]\n';
  const APIS = '    apis: [{ binding: edge-client }]\n';

  it.each([
    // unknown keys
    ['dataDirr: /x\n', 'dataDirr', /unknown key \(allowed here: dataDir, log, admin, edge, web, audit, writes\)/],
    ['edge:\n  oidc: { accesTokenDuration: 30m }\n', 'edge.oidc.accesTokenDuration', /unknown key/],
    ['edge:\n  apis: {}\n', 'edge.apis', /unknown key/],
    ['log: { level: info, colour: true }\n', 'log.colour', /unknown key/],
    [listener(`    bindPoints: [{ interface: "127.0.0.1:2000", adress: "x:1" }]\n${APIS}`), 'web[0].bindPoints[0].adress', /unknown key/],
    [listener(`${BP}    apis: [{ binding: edge-oidc, options: { redirectUris: [] } }]\n`), 'web[0].apis[0].options.redirectUris', /unknown key/],
    ['"my key": 1\n', '["my key"]', /unknown key/],
    // shapes and scalars
    ['log: info\n', 'log', /must be a mapping with keys level, format, requests, got "info"/],
    ['log: { level: verbose }\n', 'log.level', /must be one of fatal, error, warn, info, debug, trace, silent, got "verbose"/],
    ['dataDir: ""\n', 'dataDir', /must not be empty/],
    ['dataDir: [a]\n', 'dataDir', /must be a string, got a list/],
    ['admin: { username: abc }\n', 'admin.username', /at least 4 characters/],
    [`admin: { username: ${'u'.repeat(101)} }\n`, 'admin.username', /at most 100 characters/],
    ['admin: { password: abcd }\n', 'admin.password', /at least 5 characters/],
    ['admin: { username: "bad\\nname" }\n', 'admin.username', /control characters/],
    ['edge:\n  api: { disableOidcAutoBinding: yes }\n', 'edge.api.disableOidcAutoBinding', /must be true or false, got "yes"/],
    ['edge:\n  totp: { issuer: "" }\n', 'edge.totp.issuer', /must not be empty/],
    ['edge: []\n', 'edge', /must be a mapping/],
    ['audit: { enabled: yes }\n', 'audit.enabled', /must be true or false, got "yes"/],
    ['audit: { maxAge: 30m }\n', 'audit.maxAge', /must be at least 1h/],
    ['audit: { maxAge: 90 }\n', 'audit.maxAge', /a unit is required/],
    ['audit: { maxEvents: 10 }\n', 'audit.maxEvents', /between 1000 and/],
    ['audit: { maxRows: 10 }\n', 'audit.maxRows', /unknown key \(allowed here: enabled, maxAge, maxEvents\)/],
    ['writes: { maxQueued: 0 }\n', 'writes.maxQueued', /between 1 and/],
    ['writes: { maxQueued: 1.5 }\n', 'writes.maxQueued', /whole number/],
    // web
    ['web: []\n', 'web', /at least 1 entry/],
    ['web: {}\n', 'web', /must be a list, got a mapping/],
    [listener(`${APIS}`), 'web[0].bindPoints', /is required/],
    [listener(`    bindPoints: []\n${APIS}`), 'web[0].bindPoints', /at least 1 entry/],
    [listener(`${BP}`), 'web[0].apis', /is required/],
    [listener(`${BP}    apis: []\n`), 'web[0].apis', /at least 1 entry/],
    [`web:\n  - bindPoints: [{ interface: "127.0.0.1:2000" }]\n${APIS}`, 'web[0].name', /is required/],
    [`web:\n  - name: "bad name"\n${BP}${APIS}`, 'web[0].name', /letters, digits/],
    [listener(`    bindPoints: [{ address: "x:1" }]\n${APIS}`), 'web[0].bindPoints[0].interface', /is required/],
    [listener(`    bindPoints: [{ interface: [::1]:1280 }]\n${APIS}`), null, /not valid YAML/],
    [listener(`    bindPoints:\n      - interface: [::1]\n${APIS}`), 'web[0].bindPoints[0].interface', /quote bracketed IPv6/],
    [listener(`    bindPoints: [{ interface: 1280 }]\n${APIS}`), 'web[0].bindPoints[0].interface', /must be a string in the form host:port, got 1280/],
    [listener(`    bindPoints: [{ interface: "127.0.0.1:2000", address: "127.0.0.1:0" }]\n${APIS}`), 'web[0].bindPoints[0].address', /port must be a number from 1/],
    [listener(`    bindPoints: [{ interface: "127.0.0.1:2000", address: "[::]:2000" }]\n${APIS}`), 'web[0].bindPoints[0].address', /wildcard/],
    [listener(`${BP}    apis: [{ binding: edge-client }, { binding: edge-admin }]\n`), 'web[0].apis[1].binding', /must be one of edge-client, edge-management, edge-oidc, metrics, got "edge-admin"/],
    [listener(`${BP}    apis: [{ binding: edge-client }, { binding: edge-client }]\n`), 'web[0].apis[1].binding', /listed twice/],
    [listener(`${BP}    apis: [{ options: {} }]\n`), 'web[0].apis[0].binding', /is required/],
  ] as const)('%j → %s', (yaml, key, message) => {
    const error = loadError(yaml);
    expect(error.key).toBe(key ?? 'config');
    expect(error.message).toMatch(message);
  });

  it('names keys deep in the second listener', () => {
    const yaml = `${EXAMPLE.replace('binding: edge-management', 'binding: edge-managment')}`;
    const error = loadError(yaml);
    expect(error.key).toBe('web[1].apis[0].binding');
    expect(error.message).toMatch(/^web\[1\]\.apis\[0\]\.binding: must be one of/);
  });

  it('names the environment variable for bad environment values', () => {
    expect(loadError(undefined, {}, { OVERLAY_ADMIN_USERNAME: 'ab' }).key).toBe('OVERLAY_ADMIN_USERNAME');
    expect(loadError(undefined, {}, { OVERLAY_LOG_LEVEL: 'loud' }).key).toBe('OVERLAY_LOG_LEVEL');
    expect(loadError(undefined, { logLevel: 'loud' }).key).toBe('--log-level');
    expect(loadError(undefined, { dataDir: '' }).key).toBe('--data-dir');
  });

  it('never shows a password in an error', () => {
    const error = loadError('admin: { password: 123456789 }\n');
    expect(error.key).toBe('admin.password');
    expect(error.message).toBe('admin.password: must be a string (quote it in YAML), got a number');
    expect(loadError(undefined, {}, { OVERLAY_ADMIN_PASSWORD: 'abc' }).message).not.toContain('abc');
  });

  it.each([
    [
      'duplicate listener names',
      `web:\n  - name: a\n    bindPoints: [{ interface: "127.0.0.1:1" }]\n${APIS}  - name: a\n    bindPoints: [{ interface: "127.0.0.1:2" }]\n${APIS}`,
      'web[1].name',
      /listener name "a" is already used by web\[0\]\.name/,
    ],
    [
      'duplicate interfaces across listeners',
      `web:\n  - name: a\n    bindPoints: [{ interface: "127.0.0.1:1" }]\n${APIS}  - name: b\n    bindPoints: [{ interface: "127.0.0.1:1" }]\n${APIS}`,
      'web[1].bindPoints[0].interface',
      /127\.0\.0\.1:1 is already used by web\[0\]\.bindPoints\[0\]\.interface/,
    ],
    [
      'duplicate interfaces spelled differently',
      `web:\n  - name: a\n    bindPoints: [{ interface: "[::1]:1" }, { interface: "[0:0::1]:1" }]\n${APIS}`,
      'web[0].bindPoints[1].interface',
      /already used by web\[0\]\.bindPoints\[0\]\.interface/,
    ],
  ])('%s', (_name, yaml, key, message) => {
    const error = loadError(yaml);
    expect(error.key).toBe(key);
    expect(error.message).toMatch(message);
  });

  it('allows several bind points on port 0', () => {
    const yaml = `web:\n  - name: a\n    bindPoints: [{ interface: "127.0.0.1:0" }, { interface: "127.0.0.1:0" }]\n${APIS}`;
    expect(load(yaml).web[0]?.bindPoints).toHaveLength(2);
  });
});

describe('the file itself', () => {
  it.each([
    ['invalid YAML', 'edge: { api: [\n', /overlay\.yaml is not valid YAML: /],
    ['duplicate keys', 'log: { level: info }\nlog: { level: warn }\n', /not valid YAML: .*unique/i],
    ['several documents', 'log: {}\n---\nlog: {}\n', /not valid YAML/],
    ['a list', '- a\n- b\n', /must hold a YAML mapping at the top level, got a list/],
    ['a scalar', 'hello\n', /must hold a YAML mapping at the top level, got "hello"/],
  ])('%s', (_name, yaml, message) => {
    const error = loadError(yaml);
    expect(error.key).toBe('config');
    expect(error.message).toMatch(message);
  });

  it.each([
    ['a missing file', () => loadConfig({ config: 'missing.yaml' }, {}, dir), /cannot read .*missing\.yaml: no such file/],
    ['a directory', () => loadConfig({ config: '.' }, {}, dir), /is not a regular file/],
    [
      'a file over 1 MiB',
      () => {
        writeFileSync(path.join(dir, 'big.yaml'), `# ${'x'.repeat(1024 * 1024)}\n`);
        return loadConfig({ config: 'big.yaml' }, {}, dir);
      },
      /larger than 1 MiB/,
    ],
    ['an empty --config', () => loadConfig({ config: '' }, {}, dir), /^--config: /],
  ])('refuses %s', (_name, run, message) => {
    expect(run).toThrow(ConfigError);
    expect(run).toThrow(message);
  });

  it.skipIf(process.getuid?.() === 0)('refuses an unreadable file', () => {
    const file = path.join(dir, 'locked.yaml');
    writeFileSync(file, 'log: {}\n');
    chmodSync(file, 0o000);
    expect(() => loadConfig({ config: file }, {}, dir)).toThrow(/cannot read .*: permission denied/);
  });
});

describe('OIDC auto-binding', () => {
  const web = (...listeners: string[][]) =>
    'web:\n' +
    listeners
      .map(
        (apis, i) =>
          `  - name: l${i}\n    bindPoints: [{ interface: "127.0.0.1:${2000 + i}" }]\n` +
          `    apis: [${apis.map((b) => `{ binding: ${b} }`).join(', ')}]\n`,
      )
      .join('');
  const disabled = 'edge:\n  api: { disableOidcAutoBinding: true }\n';

  it.each([
    ['added to every listener hosting edge-client', web(['edge-client'], ['edge-management'], ['edge-client', 'edge-management']), [['edge-client', 'edge-oidc'], ['edge-management'], ['edge-client', 'edge-management', 'edge-oidc']], 0],
    ['suppressed when one listener lists edge-oidc', web(['edge-client'], ['edge-management', 'edge-oidc']), [['edge-client'], ['edge-management', 'edge-oidc']], 0],
    ['OIDC on its own listener', web(['edge-client', 'edge-management'], ['edge-oidc']), [['edge-client', 'edge-management'], ['edge-oidc']], 0],
    ['not added without edge-client', web(['edge-management']), [['edge-management']], 1],
    ['disabled: only where listed', disabled + web(['edge-client'], ['edge-oidc']), [['edge-client'], ['edge-oidc']], 0],
    ['disabled and nowhere listed', disabled + web(['edge-client'], ['edge-management']), [['edge-client'], ['edge-management']], 1],
  ])('%s', (_name, yaml, expected, warnings) => {
    const config = load(yaml);
    expect(bindings(config)).toEqual(expected);
    expect(config.warnings).toHaveLength(warnings);
    if (warnings) expect(config.warnings[0]).toMatch(/no listener serves edge-oidc/);
  });

  it('gives an auto-bound edge-oidc empty options (default redirect URIs)', () => {
    expect(load(web(['edge-client'])).web[0]?.apis[1]).toEqual({ binding: 'edge-oidc', options: {} });
  });

  it('keeps all three APIs on the default listener when auto-binding is disabled', () => {
    expect(bindings(load(disabled))).toEqual([['edge-client', 'edge-management', 'edge-oidc']]);
  });
});

describe('redirectURIs', () => {
  const oidc = (options: string, binding = 'edge-oidc') =>
    `web:\n  - name: a\n    bindPoints: [{ interface: "127.0.0.1:2000" }]\n    apis:\n      - binding: ${binding}\n        options: ${options}\n`;
  const KEY = 'web[0].apis[0].options.redirectURIs';

  it.each([
    ['{ redirectURIs: ["http://127.0.0.1:*/auth/callback", "https://app.example.com/cb"] }', ['http://127.0.0.1:*/auth/callback', 'https://app.example.com/cb']],
    ['{ redirectURIs: [] }', []],
    ['{}', undefined],
  ])('accepts %s', (options, expected) => {
    const api = load(oidc(options)).web[0]?.apis[0];
    expect(api?.options.redirectURIs).toEqual(expected);
  });

  it('accepts 100 patterns', () => {
    const uris = Array.from({ length: 100 }, (_, i) => `"http://127.0.0.1:*/cb${i}"`).join(', ');
    expect(load(oidc(`{ redirectURIs: [${uris}] }`)).web[0]?.apis[0]?.options.redirectURIs).toHaveLength(100);
  });

  it.each([
    ['{ redirectURIs: ["http://127.0.0.1:*/cb"] }', 'edge-client', KEY, /only allowed on binding edge-oidc, not edge-client/],
    ['{ redirectURIs: ["http://127.0.0.1:*/cb"] }', 'edge-management', KEY, /only allowed on binding edge-oidc/],
    ['{ redirectURIs: "http://127.0.0.1:*/cb" }', 'edge-oidc', KEY, /must be a list/],
    [`{ redirectURIs: [${Array.from({ length: 101 }, () => '"http://a/"').join(', ')}] }`, 'edge-oidc', KEY, /at most 100 entries, got 101/],
    ['{ redirectURIs: ["http://a/cb", "ftp://b/cb"] }', 'edge-oidc', `${KEY}[1]`, /scheme must be http or https/],
    ['{ redirectURIs: ["http://*:80/cb"] }', 'edge-oidc', `${KEY}[0]`, /only allowed as the port/],
    ['{ redirectURIs: ["/cb"] }', 'edge-oidc', `${KEY}[0]`, /not an absolute URL/],
    ['{ redirectURIs: [42] }', 'edge-oidc', `${KEY}[0]`, /must be a string/],
    ['{ redirectURIs: ["http://a/cb#x"] }', 'edge-oidc', `${KEY}[0]`, /fragment/],
  ])('%s on %s → %s', (options, binding, key, message) => {
    const error = loadError(oidc(options, binding));
    expect(error.key).toBe(key);
    expect(error.message).toMatch(message);
  });
});

describe('listener options (timeouts and connection caps)', () => {
  const listener = (options: string) => `
web:
  - name: api
    bindPoints: [{ interface: "127.0.0.1:0" }]
    apis: [{ binding: edge-client }]
    options: ${options}
`;

  it('reads every option; the ones not given keep their defaults', () => {
    const config = load(listener('{ readHeaderTimeout: 2s, readTimeout: 1m, idleTimeout: 500ms, maxConnectionsPerAddress: 8 }'));
    expect(config.web[0]!.options).toEqual({
      readHeaderTimeout: 2_000,
      readTimeout: 60_000,
      idleTimeout: 500,
      writeTimeout: 30_000,
      maxConnections: 1024,
      maxConnectionsPerAddress: 8,
    });
    expect(load(listener('{}')).web[0]!.options).toEqual(DEFAULT_LISTENER_OPTIONS);
  });

  it('shortens the default header deadline to a shorter request deadline', () => {
    expect(load(listener('{ readTimeout: 4s }')).web[0]!.options).toMatchObject({ readHeaderTimeout: 4_000, readTimeout: 4_000 });
  });

  it.each([
    ['{ readTimout: 5s }', 'web[0].options.readTimout', /unknown key/],
    ['{ readTimeout: 5 }', 'web[0].options.readTimeout', /a unit is required/],
    ['{ idleTimeout: 50ms }', 'web[0].options.idleTimeout', /at least 100ms/],
    ['{ writeTimeout: 2h }', 'web[0].options.writeTimeout', /at most 1h/],
    ['{ readHeaderTimeout: 20s, readTimeout: 10s }', 'web[0].options.readHeaderTimeout', /not be longer than web\[0\]\.options\.readTimeout/],
    ['{ maxConnections: 0 }', 'web[0].options.maxConnections', /between 1 and 1000000/],
    ['{ maxConnectionsPerAddress: 2.5 }', 'web[0].options.maxConnectionsPerAddress', /whole number/],
    ['{ maxConnections: "10" }', 'web[0].options.maxConnections', /whole number/],
    ['[]', 'web[0].options', /must be a mapping/],
  ])('refuses %s, naming %s', (options, key, message) => {
    const error = loadError(listener(options));
    expect(error.key).toBe(key);
    expect(error.message).toMatch(message);
  });
});

describe('ConfigError', () => {
  it('starts its message with the key exactly once', () => {
    expect(new ConfigError('a.b', 'is wrong').message).toBe('a.b: is wrong');
    expect(new ConfigError('a.b', 'a.b: is wrong').message).toBe('a.b: is wrong');
    expect(new ConfigError('a.b', 'x').name).toBe('ConfigError');
  });
});
