// One Fastify server per configured bind point, each a TLS server hosting the APIs bound to its
// listener. Client certificates are asked for but not required. The listener's options bound what a
// slow, silent or greedy client may hold (connection-limits.ts).
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';
import type { ListenerConfig, BindPoint } from '../config/index.js';
import { installCors } from '../http/cors.js';
import { handleError, handleFrameworkError, handleNotFound } from '../http/errors.js';
import { jsonBodyParser, refuseContentCoding } from '../http/json-body.js';
import { validatorCompiler } from '../http/validation.js';
import { lazySerializers } from '../http/lazy-serializer.js';
import { registerEdgeApi, type EdgeBinding } from '../http/edge-api.js';
import { clientRoutes } from '../http/client/index.js';
import { managementRoutes } from '../http/management/index.js';
import { registerOidcApi } from '../http/oidc/index.js';
import type { Core } from '../core/core.js';
import { ConnectionLimits, serverTimeoutOptions } from './connection-limits.js';
import { recordRequests } from '../http/request-log.js';
import { PROBE_PATHS, READY_RETRY_AFTER, registerProbes } from '../http/probes.js';
import { requestLogger } from '../core/logger.js';

export const BODY_LIMIT = 1024 * 1024;

const EDGE_ROUTES: Record<EdgeBinding, (app: FastifyInstance, core: Core) => void> = {
  'edge-client': clientRoutes,
  'edge-management': managementRoutes,
};

export interface ServerOptions {
  /** Extra routes (the benchmark's baseline) registered at the root of the server. */
  extraRoutes?: (app: FastifyInstance) => void;
}

export async function buildServer(
  core: Core,
  listener: ListenerConfig,
  bindPoint: BindPoint,
  options: ServerOptions = {},
): Promise<FastifyInstance> {
  const log = core.log.child({ listener: listener.name });
  const limits = new ConnectionLimits(listener.options, log);
  const app = Fastify({
    https: {
      key: core.pki.serverKeyPem,
      cert: core.pki.serverChainPem,
      requestCert: true,
      // TLS does not judge client certificates: the trusted CAs change at runtime, so a certificate
      // login verifies the presented chain itself (auth/cert-trust.ts).
      rejectUnauthorized: false,
      // Node's own refusal of an HTTP/1.1 request without Host is a bare 400; the hook below answers it.
      requireHostHeader: false,
      ...serverTimeoutOptions(listener.options),
    },
    // Fastify sets these two on the server after creating it; the same values as above.
    requestTimeout: listener.options.readTimeout,
    keepAliveTimeout: listener.options.idleTimeout,
    clientErrorHandler: limits.clientErrorHandler(),
    loggerInstance: log,
    childLoggerFactory: (logger, bindings, opts) => requestLogger(logger.child(bindings, opts)),
    // Fastify's own two lines per request are replaced by one of ours (http/request-log.ts).
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    genReqId: () => randomUUID(),
    schemaController: lazySerializers(),
    bodyLimit: BODY_LIMIT,
    // Fastify's own answer while closing is a bare body without the envelope; the hook below answers.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 500 },
    // Errors before routing (an undecodable path) get the same envelope as every other.
    frameworkErrors: handleFrameworkError,
  }) as unknown as FastifyInstance; // the HTTPS server and pino logger generics narrow nothing we use
  limits.install(app);
  // Before every other hook and API plugin: a preflight needs no credential and no OPTIONS route.
  installCors(app);
  app.setValidatorCompiler(validatorCompiler());
  jsonBodyParser(app);
  app.setErrorHandler(handleError);
  app.setNotFoundHandler(handleNotFound);

  // Node answers `Expect: 100-continue` itself unless told otherwise. A body refused from its declared
  // length (below) is not asked for: the 413 is the one answer the client gets.
  app.server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    if (!(Number(request.headers['content-length']) > BODY_LIMIT)) response.writeContinue();
    app.server.emit('request', request, response);
  });
  // From app.close() on, requests under way finish; a new one (on a connection that was busy then) is
  // refused, the probes excepted: /ready then tells a load balancer why.
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  // Requests refused from their head alone, before any other work on them: one arriving while the
  // controller stops, a missing or doubled Host, a body in a content coding, and an oversized body
  // (from its declared length).
  app.addHook('onRequest', async (request) => {
    if (closing && !PROBE_PATHS.has(request.routeOptions.url ?? '')) {
      throw new ApiError('SERVICE_UNAVAILABLE', 'the controller is shutting down', undefined, {
        'retry-after': String(READY_RETRY_AFTER),
        connection: 'close',
      });
    }
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      throw new ApiError('COULD_NOT_VALIDATE', 'an HTTP/1.1 request must have a Host header');
    }
    // Node keeps the first of several; a proxy may have routed by another (RFC 9112 §3.2: 400).
    if (headerLines(request.raw.rawHeaders, 'host') > 1) {
      throw new ApiError('COULD_NOT_VALIDATE', 'a request must have one Host header');
    }
    refuseContentCoding(request);
    const length = Number(request.headers['content-length']);
    if (length > BODY_LIMIT) {
      throw new ApiError('REQUEST_ENTITY_TOO_LARGE', `the request body is larger than ${BODY_LIMIT} bytes`);
    }
  });
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // Whatever the request's handling starts, body reading included, runs in its scope from here on.
  app.addHook('onRequest', (request, _reply, done) => core.requestScope.run(request.id, done));
  // Before the APIs, so that every route of every API is logged and measured.
  recordRequests(app, { log: core.config.log.requests, observe: (...a) => core.metrics.request(...a) });
  registerProbes(app, {
    notReady: () => core.readiness.problem(),
    ...(listener.metrics === true ? { metrics: core.metrics } : {}),
  });

  for (const api of listener.apis) {
    if (api.binding === 'edge-client' || api.binding === 'edge-management') {
      await registerEdgeApi(app, {
        core,
        binding: api.binding,
        listener,
        address: bindPoint.address,
        routes: EDGE_ROUTES[api.binding],
      });
    } else if (api.binding === 'edge-oidc') {
      await registerOidcApi(app, { core, listener, bindPoint, redirectURIs: api.options.redirectURIs ?? [] });
    }
  }
  options.extraRoutes?.(app);
  return app;
}

/** How many lines of the header `name` (lower case) a request has. */
function headerLines(rawHeaders: readonly string[], name: string): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === name) count += 1;
  return count;
}

/** host:port of a bind point's interface, split for listen(). */
export function listenAddress(bindPoint: BindPoint): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(bindPoint.interface);
  if (!m) throw new Error(`bad interface address ${bindPoint.interface}`);
  return { host: m[1] ?? m[2]!, port: Number(m[3]) };
}

/** A bind point's interface, bound at start-up, and the connections that arrived before serving. */
export interface BoundInterface {
  server: NetServer;
  /** Accepted while the controller was still starting, paused; handed to the TLS server by serveOn. */
  early: Set<Socket>;
}

/**
 * Binds a bind point's interface before anything else happens at start-up, so a busy port or an
 * address this host does not have stops the start while the data directory is still untouched. The
 * bound socket is handed to the bind point's TLS server by {@link serveOn}; port 0 gets a free port.
 * A client connecting in between (a load balancer's probe) is held, at most `maxEarly` of them, and
 * answered once the controller serves.
 */
export async function bindInterface(bindPoint: BindPoint, maxEarly: number): Promise<BoundInterface> {
  const { host, port } = listenAddress(bindPoint);
  const early = new Set<Socket>();
  const server = createNetServer({ pauseOnConnect: true }, (socket) => {
    if (early.size >= maxEarly) {
      socket.destroy();
      return;
    }
    early.add(socket);
    socket.once('close', () => early.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const why =
        err.code === 'EADDRINUSE'
          ? 'the port is in use (another controller, or another program): stop it or choose another address with --listen'
          : err.code === 'EADDRNOTAVAIL'
            ? 'this host has no such address: listen on one of its addresses (or 0.0.0.0) and advertise the public name with --advertise'
            : err.code === 'EACCES'
              ? 'ports below 1024 need privileges: choose a port of 1024 or more, or grant the capability (CAP_NET_BIND_SERVICE)'
              : `${err.message}`;
      reject(new Error(`cannot listen on ${bindPoint.interface}: ${why}; nothing was created or changed`));
    });
    server.listen({ host, port, exclusive: true }, resolve);
  });
  return { server, early };
}

/** The port a bound interface got (the one asked for, or the free one chosen for port 0). */
export function boundPort(bound: BoundInterface): number {
  const address = bound.server.address();
  return typeof address === 'object' && address !== null ? address.port : 0;
}

/** Closes a bound interface that was never served, and the connections it held. */
export function closeBound(bound: BoundInterface): Promise<void> {
  for (const socket of bound.early) socket.destroy();
  return new Promise<void>((resolve) => bound.server.close(() => resolve()));
}

/**
 * Serves `app` on the socket `bound` holds (Node's listen(handle) takes over its handle), then hands
 * it the connections that came early. From then on closing the app closes the socket; `bound.server`
 * itself must not be closed.
 */
export async function serveOn(app: FastifyInstance, bound: BoundInterface): Promise<void> {
  await app.ready();
  await new Promise<void>((resolve, reject) => {
    app.server.once('error', reject);
    app.server.listen(bound.server, () => {
      app.server.off('error', reject);
      resolve();
    });
  });
  for (const socket of bound.early) {
    socket.removeAllListeners('close');
    app.server.emit('connection', socket);
  }
  bound.early.clear();
}
