// Composition root: createApp(config) opens the store, migrates it, loads or creates the PKI,
// registers the resources and builds one TLS server per bind point. Nothing is a module singleton.
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { systemClock, type Clock } from '../clock.js';
import { parseHostPort, formatHostPort, type BindPoint, type Config, type ListenerConfig } from '../config/index.js';
import { ensurePki } from '../pki/index.js';
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
import { AnswerCache } from '../http/client/answer-cache.js';
import type { Core } from './core.js';
import { registerResources } from './resources.js';
import { secureDataDirectory } from './data-dir.js';
import { Mfa } from '../auth/mfa.js';
import { SecretBox } from '../auth/secret-box.js';
import { buildServer, listenAddress, type ServerOptions } from './listeners.js';

export interface AppOptions {
  clock?: Clock;
  log?: Logger;
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
}

export interface App {
  core: Core;
  servers: RunningServer[];
  /** Starts listening on every bind point; answers the URLs listened on. */
  listen(): Promise<string[]>;
  /** Closes the listeners, then the store. */
  close(): Promise<void>;
}

/** An interface port of 0 means any free port: choose it now, so every answer can name it. */
async function resolveFreePorts(config: Config): Promise<void> {
  for (const listener of config.web) {
    for (const bp of listener.bindPoints) {
      const iface = parseHostPort(bp.interface, { allowPortZero: true });
      if (iface.port !== 0) continue;
      const port = await new Promise<number>((resolve, reject) => {
        const probe = createServer();
        probe.once('error', reject);
        probe.listen(0, iface.host, () => {
          const address = probe.address();
          probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
        });
      });
      bp.interface = formatHostPort(iface.host, port);
      const advertised = parseHostPort(bp.address, { allowPortZero: true });
      if (advertised.port === 0) bp.address = formatHostPort(advertised.host, port);
    }
  }
}

/** The advertised address of the first bind point serving the Client API (or of any, without one). */
function clientApiAddress(config: Config): string {
  const listener = config.web.find((l) => l.apis.some((a) => a.binding === 'edge-client')) ?? config.web[0];
  return listener?.bindPoints[0]?.address ?? 'localhost';
}

export async function createApp(config: Config, options: AppOptions = {}): Promise<App> {
  const clock = options.clock ?? systemClock;
  const log =
    options.log ??
    pino({
      level: config.log.level,
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers["overlay-session"]',
          '*.password',
          '*.token',
          '*.code',
        ],
        censor: '[redacted]',
      },
    });
  for (const warning of config.warnings) log.warn(warning);

  await secureDataDirectory(config.dataDir, (path, message) => log.warn({ path }, message));
  await resolveFreePorts(config);

  const store = new Store(openSqlite(options.memoryStore ? ':memory:' : join(config.dataDir, 'overlay.db')));
  try {
    const applied = await store.migrate([...appMigrations, ...(options.extraMigrations ?? [])]);
    if (applied.length > 0) log.info({ migrations: applied }, 'store migrated');

    const hosts = config.web.flatMap((l) => l.bindPoints.map((b) => parseHostPort(b.address, { allowPortZero: true }).host));
    const pki = await ensurePki({
      dir: join(config.dataDir, 'pki'),
      hosts,
      now: () => new Date(clock()),
      log: (msg) => log.info(msg),
    });

    const audit = new AuditTrail(store, clock, config.audit);
    const kernel = new Kernel({ store, clock, log, audit, maxQueuedWrites: config.writes.maxQueued });
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
    const links = caches.register(new PolicyLinks(store.dialect));
    const configValidators = caches.register(new ConfigValidators());
    const secrets = await SecretBox.open(config.dataDir);
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
      // Read only once requests are served, after the read model below is built.
      serviceFieldsForCaller: (caller, entities, choice) => client.services.callerFields(caller, entities, choice),
    });
    await seed(resources, {
      dataDir: config.dataDir,
      admin: config.admin,
      announce: options.announce ?? ((message) => process.stderr.write(`overlay: ${message}\n`)),
    });
    const mfa = new Mfa({ kernel, clock, box: secrets, issuer: config.edge.totp.issuer });
    const revocations = new Revocations(clock);
    await revocations.start({ kernel, caches });
    const oidc = await OidcProvider.open({ config, clock, log, kernel, sessions, identities, revocations, mfa });
    caches.register(oidc.bearer);
    caches.register(oidc.grants);
    caches.register(oidc.issuers);
    await oidc.start();
    const oidcSettings = caches.register(new OidcSettingsView(kernel));
    // The Client API's read model, shared by every listener's Client and Management API.
    const client = new ClientReadModel({ store, clock, resources, caches, keys: oidc.keys, issuers: oidc.issuers, apiSessions: sessions });
    const clientAnswers = caches.register(new AnswerCache());
    const certificateSigner = new ClientCertificateSigner(pki, clock);
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
      auditLog: new AuditLog(store),
    };

    const self = config.web[0]?.bindPoints[0]?.address ?? 'localhost';
    const apiAddresses = apiAddressesOf(config.web, SERVED_BINDINGS);
    await resources.write((ctx) => registerController(ctx, { name: self, address: self, certPem: pki.serverCertPem, apiAddresses }));
    await oidcSettings.start();

    const servers: RunningServer[] = [];
    for (const listener of config.web) {
      for (const bindPoint of listener.bindPoints) {
        servers.push({ listener, bindPoint, app: await buildServer(core, listener, bindPoint, options.server) });
      }
    }

    return {
      core,
      servers,
      async listen() {
        sessions.start();
        auditRetention.start();
        const urls: string[] = [];
        for (const s of servers) {
          const { host, port } = listenAddress(s.bindPoint);
          await s.app.listen({ host, port });
          log.info(
            { listener: s.listener.name, interface: s.bindPoint.interface, address: s.bindPoint.address, apis: s.listener.apis.map((a) => a.binding) },
            `listening on https://${s.bindPoint.interface}`,
          );
          urls.push(`https://${s.bindPoint.interface}`);
        }
        return urls;
      },
      async close() {
        await Promise.all(servers.map((s) => s.app.close()));
        oidc.stop();
        oidcSettings.stop();
        revocations.stop();
        auditRetention.stop();
        await sessions.stop();
        await markControllerOffline(resources).catch((err: unknown) => log.warn({ err }, 'could not mark this controller offline'));
        await store.close();
      },
    };
  } catch (err) {
    await store.close();
    throw err;
  }
}
