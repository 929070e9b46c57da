// Composition root: createApp(config) opens the store, migrates it, loads or creates the PKI,
// registers the resources and builds one TLS server per bind point. Nothing is a module singleton.
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import type { Server as TlsServer } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import type { DestinationStream, Logger } from 'pino';
import { iso, systemClock, type Clock } from '../clock.js';
import { parseHostPort, formatHostPort, type BindPoint, type Config, type ListenerConfig } from '../config/index.js';
import { ensurePki, renewServerCertificate as renewPkiServerCertificate } from '../pki/index.js';
import { removeStaleTempFiles } from '../pki/files.js';
import { openSqlite } from '../store/sqlite.js';
import { Store, type StoreMigration } from '../store/store.js';
import { migrations as appMigrations } from '../store/migrations/index.js';
import { Resources } from '../domain/resources.js';
import { Kernel } from '../kernel/kernel.js';
import { CacheRegistry } from '../kernel/caches.js';
import { AuditRetention, AuditTrail } from '../kernel/audit.js';
import { AuditLog } from '../domain/audit-events.js';
import { PolicyLinks } from '../policy/links.js';
import { loadBuildInfo } from '../build-info.js';
import { SERVED_BINDINGS } from '../http/info.js';
import { ApiSessions } from '../auth/api-sessions.js';
import { IdentityDirectory } from '../auth/identity-directory.js';
import { CertificateTrust } from '../auth/cert-trust.js';
import { FailureThrottle } from '../auth/throttle.js';
import { Revocations } from '../auth/revocations.js';
import { OidcProvider } from '../oidc/provider.js';
import { OidcSettingsView } from '../oidc/settings.js';
import { seed } from '../domain/seed.js';
import { apiAddressesOf, markControllerOffline, registerController } from '../domain/operations.js';
import { IdentityAnswers } from '../domain/identities.js';
import { Enrollments, EnrollmentTokens } from '../domain/enrollments.js';
import { RouterEnrollments } from '../domain/router-enrollment.js';
import { CertificateExtension } from '../domain/certificate-extension.js';
import { ApiSessionCertificates } from '../domain/api-session-certificates.js';
import { ClientCertificateSigner } from '../domain/client-certificates.js';
import { ConfigValidators } from '../domain/services.js';
import { ClientReadModel } from '../domain/client/read-model.js';
import { AnswerCache } from '../core/answer-cache.js';
import { ExternalJwtSigners } from '../auth/ext-jwt.js';
import { AuthPolicyRulesCache } from '../auth/ext-jwt-factor.js';
import { fetchJwks } from '../auth/jwks-fetch.js';
import type { Core } from '../core/core.js';
import { registerResources } from './resources.js';
import { createDataDirectory, inDataDir, secureDataDirectory } from './data-dir.js';
import { acquireDataDirLock, checkDataDirLock, LOCK_FILE, type DataDirLock } from './data-dir-lock.js';
import { ADMIN_PASSWORD_FILE, followAdminPasswordFile } from './admin-password-file.js';
import { Mfa } from '../auth/mfa.js';
import { openSecretsKey } from './secrets-key.js';
import { createLogger, RequestScope } from '../core/logger.js';
import { Metrics } from '../core/metrics.js';
import { Readiness } from '../core/readiness.js';
import { Snapshots } from '../domain/snapshots.js';
import { DataIntegrity } from '../domain/integrity.js';
import { IdentityTraces } from '../domain/tracing.js';
import { bindInterface, boundPort, buildServer, closeBound, serveOn, type BoundInterface, type ServerOptions } from './listeners.js';

export interface AppOptions {
  clock?: Clock;
  log?: Logger;
  /** Where the configured logger writes instead of standard output (without `log`; tests read it). */
  logDestination?: DestinationStream;
  /** Keep the store in memory (tests); the PKI still lives in the data directory. */
  memoryStore?: boolean;
  /** Extra migrations after the controller's own (test fixtures). */
  extraMigrations?: readonly StoreMigration[];
  server?: ServerOptions;
  /** Where a generated admin password is shown once (standard error by default). */
  announce?: (message: string) => void;
  /**
   * Refuse answers that drift from their schemas (tests): a resource answer from its read schema (see
   * ResourcesOptions), any Edge API answer from its route's response schema (http/answer-check.ts).
   */
  checkAnswers?: boolean;
}

export interface RunningServer {
  listener: ListenerConfig;
  bindPoint: BindPoint;
  app: FastifyInstance;
  /** The interface, bound before anything else at start-up; `app` serves on it from listen(). */
  bound: BoundInterface;
}

/**
 * Binds every bind point's interface, in order; on a failure, closes those already bound. A port of
 * 0 becomes the free port bound, in the interface and (when it says 0 too) the advertised address.
 */
async function bindInterfaces(config: Config): Promise<Map<BindPoint, BoundInterface>> {
  const bound = new Map<BindPoint, BoundInterface>();
  try {
    for (const listener of config.web) {
      for (const bp of listener.bindPoints) {
        const server = await bindInterface(bp, listener.options.maxConnections);
        bound.set(bp, server);
        const iface = parseHostPort(bp.interface, { allowPortZero: true });
        if (iface.port !== 0) continue;
        bp.interface = formatHostPort(iface.host, boundPort(server));
        const advertised = parseHostPort(bp.address, { allowPortZero: true });
        if (advertised.port === 0) bp.address = formatHostPort(advertised.host, boundPort(server));
      }
    }
  } catch (err) {
    await closeAll([...bound.values()]);
    throw err;
  }
  return bound;
}

function closeAll(bound: readonly BoundInterface[]): Promise<void> {
  return Promise.all(bound.map(closeBound)).then(() => undefined);
}

export interface App {
  core: Core;
  servers: RunningServer[];
  /** Starts listening on every bind point; answers the URLs listened on. */
  listen(): Promise<string[]>;
  /** Closes the listeners, then the store. */
  close(): Promise<void>;
  /**
   * Reissues the server certificate when a start would (within 30 days of its end, or no longer
   * fitting) and has the listeners present it; listen() runs this twice a day.
   */
  renewServerCertificate(): Promise<void>;
}

/** How often a running controller looks at its server certificate's end. */
const SERVER_CERTIFICATE_CHECK_MS = 12 * 60 * 60 * 1000;

/** The advertised address of the first bind point serving the Client API (or of any, without one). */
function clientApiAddress(config: Config): string {
  const listener = config.web.find((l) => l.apis.some((a) => a.binding === 'edge-client')) ?? config.web[0];
  return listener?.bindPoints[0]?.address ?? 'localhost';
}

export async function createApp(config: Config, options: AppOptions = {}): Promise<App> {
  const clock = options.clock ?? systemClock;
  const requestScope = new RequestScope();
  const log =
    options.log ??
    createLogger(config.log, { scope: requestScope, ...(options.logDestination ? { destination: options.logDestination } : {}) });
  for (const warning of config.warnings) log.warn(warning);

  // Nothing in the data directory is created or changed before every interface is bound and the
  // directory's lock is held: a start refused for a busy port, an address this host lacks or a
  // controller already running leaves the directory as it was.
  const { dataDir } = config;
  await checkDataDirLock(dataDir);
  const bound = await bindInterfaces(config);
  let lock: DataDirLock | undefined;
  // Closed again when a later step of the start fails.
  let opened: Store | undefined;
  try {
    await inDataDir(dataDir, 'create the data directory', dataDir, () => createDataDirectory(dataDir));
    lock = await inDataDir(dataDir, 'take the lock', join(dataDir, LOCK_FILE), () =>
      acquireDataDirLock(dataDir, (path, message) => log.warn({ path }, message)),
    );
    await inDataDir(dataDir, 'secure the data directory', dataDir, () =>
      secureDataDirectory(dataDir, (path, message) => log.warn({ path }, message)),
    );
    // A write of the admin password cut short leaves its temp file, which holds the password.
    const stale = await inDataDir(dataDir, 'remove stale temp files from', dataDir, () => removeStaleTempFiles(dataDir));
    if (stale.length > 0) log.warn({ files: stale }, 'removed temp files of an interrupted write from the data directory');
  } catch (err) {
    await closeAll([...bound.values()]);
    await lock?.release();
    throw err;
  }

  const storeFile = 'overlay.db';
  const metrics = new Metrics();
  const allMigrations = [...appMigrations, ...(options.extraMigrations ?? [])];
  try {
    const storePath = join(dataDir, storeFile);
    const store = await inDataDir(dataDir, 'open the store', storePath, async () => {
      opened = new Store(
        openSqlite(options.memoryStore ? ':memory:' : storePath, {
          checkpointer: { onFailure: (err) => log.error({ err }, 'the WAL checkpoint worker failed; commits checkpoint the store again') },
        }),
      );
      const applied = await opened.migrate(allMigrations);
      if (applied.length > 0) log.info({ migrations: applied }, 'store migrated');
      return opened;
    });
    // Before anything else is written: a store beside another key than the one that sealed it is
    // refused here, the data directory as it was (but for pending migrations of the store).
    const secrets = await openSecretsKey({
      dataDir,
      storePath,
      store,
      forget: config.forgetSealedSecrets,
      now: () => iso(clock()),
      log,
    });
    const readiness = new Readiness(store, allMigrations.map((m) => m.name));

    const hosts = config.web.flatMap((l) => l.bindPoints.map((b) => parseHostPort(b.address, { allowPortZero: true }).host));
    const pkiDir = join(dataDir, 'pki');
    const pkiOptions = { dir: pkiDir, hosts, now: () => new Date(clock()) };
    const pki = await inDataDir(dataDir, 'set up the PKI in', pkiDir, () => ensurePki({ ...pkiOptions, log: (msg) => log.info(msg) }));

    const audit = new AuditTrail(store, clock, config.audit);
    const kernel = new Kernel({
      store,
      clock,
      log,
      audit,
      maxQueuedWrites: config.writes.maxQueued,
      observeTransaction: (seconds, committed) => metrics.transaction(seconds, committed),
    });
    const auditRetention = new AuditRetention({
      trail: audit,
      write: (fn) => kernel.write(fn),
      onError: (err) => log.warn({ err }, 'the audit log could not be pruned'),
    });
    // Every cache registers here and follows the change feed through it.
    const caches = new CacheRegistry(kernel.changes, log);
    const resources = new Resources(kernel, { checkAnswers: options.checkAnswers === true });
    const sessions = caches.register(new ApiSessions(kernel, clock, config.edge.api.sessionTimeout));
    const identities = caches.register(new IdentityDirectory(store, kernel.repo('identities'), clock));
    const certificateTrust = caches.register(new CertificateTrust(store, kernel.repo('cas'), clock, pki));
    const links = caches.register(new PolicyLinks(store.dialect, (trigger, seconds) => metrics.linkRecompute(trigger, seconds)));
    const configValidators = caches.register(new ConfigValidators());
    const externalJwtSigners = caches.register(
      new ExternalJwtSigners({
        loadSigners: async () => {
          const repo = kernel.repo('external-jwt-signers');
          return (await store.db.selectFrom('external_jwt_signers').selectAll().execute()).map((row) => repo.fromRow(row));
        },
        clock,
        fetchJwks: (url) => fetchJwks(url, config.edge.externalJwtSigners),
      }),
    );
    // Enrollment JWTs are signed with the OIDC keys, opened below; read only once requests are served.
    const enrollmentTokens = new EnrollmentTokens({
      box: secrets,
      keys: () => oidc.keys,
      address: clientApiAddress(config),
      clock,
      identityDuration: config.edge.enrollment.edgeIdentity.duration,
      routerDuration: config.edge.enrollment.edgeRouter.duration,
    });
    registerResources(resources, {
      enrollmentTokens,
      sessions,
      clock,
      tokenLifetimes: config.edge.oidc,
      links,
      configValidators,
      jwksPolicy: config.edge.externalJwtSigners,
      networkCaPems: [pki.rootCertPem, pki.signingCertPem],
      // Read only once requests are served, after the read model below is built.
      serviceFieldsForCaller: (caller, entities, choice) => client.services.callerFields(caller, entities, choice),
    });
    const adminPasswordPath = join(dataDir, ADMIN_PASSWORD_FILE);
    const { adminCreated } = await inDataDir(dataDir, 'write the admin password to', adminPasswordPath, () =>
      seed(resources, {
        dataDir,
        admin: config.admin,
        announce: options.announce ?? ((message) => process.stderr.write(`overlay: ${message}\n`)),
      }),
    );
    const givenAdmin = (['username', 'password'] as const).filter((key) => config.admin[key] !== undefined);
    if (adminCreated && config.admin.password !== undefined) log.info({ username: config.admin.username ?? 'admin' }, 'created the default admin with the password given');
    if (!adminCreated && givenAdmin.length > 0) {
      // Only the names: a value given may be a password.
      log.warn(
        { ignored: givenAdmin.map((key) => `admin.${key} / OVERLAY_ADMIN_${key.toUpperCase()}`) },
        'the store already has its default admin, so the admin credentials given to this start were ignored; ' +
          'change its password through the API: PATCH /edge/management/v1/current-identity/authenticators/{id} {currentPassword, password}',
      );
    }
    const stopFollowingAdminPassword = await inDataDir(dataDir, 'check', adminPasswordPath, () =>
      followAdminPasswordFile({ dataDir, store, changes: kernel.changes, log }),
    );
    const mfa = caches.register(new Mfa({ kernel, clock, box: secrets, issuer: config.edge.totp.issuer }));
    const revocations = new Revocations(clock);
    await revocations.start({ kernel, caches });
    const oidc = await inDataDir(dataDir, 'open the OIDC signing keys in', join(dataDir, 'oidc'), () =>
      OidcProvider.open({ config, clock, log, kernel, sessions, identities, revocations, mfa }),
    );
    caches.register(oidc.bearer);
    caches.register(oidc.grants);
    caches.register(oidc.issuers);
    await oidc.start();
    const oidcSettings = caches.register(new OidcSettingsView(kernel));
    // The Client API's read model, shared by every listener's Client and Management API.
    const client = new ClientReadModel({ store, clock, resources, caches, keys: oidc.keys, issuers: oidc.issuers, apiSessions: sessions, log });
    const clientAnswers = caches.register(new AnswerCache());
    const certificateSigner = new ClientCertificateSigner(pki, clock);
    const snapshots = new Snapshots({ store, dir: config.dataDir, file: storeFile, clock, log });
    const integrity = new DataIntegrity({ kernel, links, snapshots, clock, log });
    const core: Core = {
      config,
      clock,
      log,
      store,
      kernel,
      caches,
      links,
      pki,
      resources,
      build: loadBuildInfo(),
      sessions,
      identities,
      certificateTrust,
      externalJwtSigners,
      authPolicyRules: caches.register(new AuthPolicyRulesCache(store, kernel.repo('auth-policies'))),
      identityAnswers: caches.register(new IdentityAnswers(resources)),
      loginThrottle: new FailureThrottle(clock),
      mfa,
      secrets,
      enrollments: new Enrollments({ resources, tokens: enrollmentTokens, pki, clock }),
      routerEnrollments: new RouterEnrollments({ resources, tokens: enrollmentTokens, pki, trust: certificateTrust, clock }),
      certificateExtension: new CertificateExtension(resources, certificateSigner),
      apiSessionCertificates: new ApiSessionCertificates(resources, certificateSigner),
      revocations,
      oidc,
      oidcSettings,
      client,
      clientAnswers,
      capabilities: () =>
        SERVED_BINDINGS.includes('edge-oidc') && config.web.some((l) => l.apis.some((a) => a.binding === 'edge-oidc'))
          ? ['OIDC_AUTH']
          : [],
      metrics,
      readiness,
      requestScope,
      snapshots,
      integrity,
      traces: new IdentityTraces(clock, kernel.changes),
      auditLog: new AuditLog(store),
    };
    metrics.setSources({
      apiSessions: () => countRows(store, 'api_sessions'),
      sessions: () => countRows(store, 'sessions'),
      cacheLookups: () => caches.lookups(),
    });

    const self = config.web[0]?.bindPoints[0]?.address ?? 'localhost';
    const apiAddresses = apiAddressesOf(config.web, SERVED_BINDINGS);
    await resources.write((ctx) => registerController(ctx, { name: self, address: self, certPem: pki.serverCertPem, apiAddresses }));
    await oidcSettings.start();

    const servers: RunningServer[] = [];
    for (const listener of config.web) {
      for (const bindPoint of listener.bindPoints) {
        const app = await buildServer(core, listener, bindPoint, options.server);
        servers.push({ listener, bindPoint, app, bound: bound.get(bindPoint)! });
      }
    }

    // The bound sockets not yet handed to their servers: closed by close() if listen() never ran.
    const unserved = new Set(bound.values());
    // A controller may run for longer than its server certificate lasts: the check a start makes is
    // made again while it runs, and a new certificate is handed to the listeners in place, so
    // connections open now keep theirs and the next handshakes get the new one.
    const renewServerCertificate = async (): Promise<void> => {
      // The server certificate alone, under the CAs this controller runs with (never a new PKI).
      const current = await renewPkiServerCertificate({ ...pkiOptions, log: (msg) => log.info(msg) }, pki);
      if (!current) return;
      Object.assign(pki, current);
      // Each listener is a TLS server (listeners.ts), which Fastify's default type does not say.
      for (const s of servers) (s.app.server as unknown as TlsServer).setSecureContext({ key: pki.serverKeyPem, cert: pki.serverChainPem });
      await resources.write((ctx) => registerController(ctx, { name: self, address: self, certPem: pki.serverCertPem, apiAddresses }));
      log.info({ expires: new X509Certificate(pki.serverCertPem).validTo }, 'PKI: issued a new server certificate to the running listeners');
    };
    let renewalTimer: NodeJS.Timeout | undefined;
    return {
      core,
      servers,
      renewServerCertificate,
      async listen() {
        renewalTimer = setInterval(() => {
          renewServerCertificate().catch((err: unknown) =>
            log.error({ err }, 'PKI: could not renew the server certificate; a restart reports why and tries again'),
          );
        }, SERVER_CERTIFICATE_CHECK_MS).unref();
        sessions.start();
        auditRetention.start();
        client.enforcer.start();
        const urls: string[] = [];
        for (const s of servers) {
          await serveOn(s.app, s.bound);
          unserved.delete(s.bound);
          log.info(
            { listener: s.listener.name, interface: s.bindPoint.interface, address: s.bindPoint.address, apis: s.listener.apis.map((a) => a.binding) },
            `listening on https://${s.bindPoint.interface}`,
          );
          urls.push(`https://${s.bindPoint.interface}`);
        }
        return urls;
      },
      async close() {
        clearInterval(renewalTimer);
        readiness.stop();
        await Promise.all(servers.map((s) => s.app.close()));
        await closeAll([...unserved]);
        stopFollowingAdminPassword();
        oidc.stop();
        oidcSettings.stop();
        revocations.stop();
        await integrity.idle();
        auditRetention.stop();
        await client.enforcer.stop();
        await sessions.stop();
        await markControllerOffline(resources).catch((err: unknown) => log.warn({ err }, 'could not mark this controller offline'));
        await store.close();
        await lock?.release();
      },
    };
  } catch (err) {
    await closeAll([...bound.values()]);
    await opened?.close();
    await lock?.release();
    throw err;
  }
}

/** The rows of a table, for a gauge read at scrape time. */
async function countRows(store: Store, table: string): Promise<number> {
  const row = await store.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirst();
  return Number(row?.n ?? 0);
}
