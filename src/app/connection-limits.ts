// What one client may cost a listener. A client that is slow or silent holds a socket; a client that
// sends requests and never reads the answers made the server produce them all into memory. So:
//   - deadlines (Node's HTTP and TLS layers): the handshake and headers within readHeaderTimeout,
//     the whole request within readTimeout, an idle kept-alive connection closed after idleTimeout;
//   - caps: maxConnections per bind point (Node refuses the rest), maxConnectionsPerAddress per
//     client address (IPv4 address, IPv6 /64, as one holder of a /64 can use all of it);
//   - backpressure: one connection's requests are processed one after another, the next only when
//     the socket has taken the previous answer, so the server holds at most one answer per
//     connection; an answer not taken within writeTimeout closes the connection, and so does
//     pipelining more than MAX_PIPELINED_REQUESTS requests, since each waiting request costs memory;
//   - a request the HTTP parser refuses (headers too large, malformed) or one that missed its
//     deadline is answered with the error envelope and `Connection: close`, and the connection
//     closes: the parser's state is lost, so nothing more on it can be read reliably.
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Server as HttpsServer, ServerOptions as HttpsServerOptions } from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { ListenerOptions } from '../config/index.js';
import { addressKey } from '../ipv6.js';
import { ApiError, ERROR_STATUS, type ErrorCode } from '../errors.js';
import { CORS_ANSWER_HEADERS } from '../http/cors.js';
import { errorBody } from '../http/errors.js';

/** Requests one connection may have received and not yet answered. */
export const MAX_PIPELINED_REQUESTS = 16;
/** How long a connection is kept, after its error answer, for the client to read it and close. */
const LINGER_MS = 2_000;

/** The CORS headers every answer carries, for the answers written here straight to the socket. */
const CORS_LINES = Object.entries(CORS_ANSWER_HEADERS)
  .map(([name, value]) => `${name}: ${value}\r\n`)
  .join('');

/** Node's own deadlines, for https.createServer. */
export function serverTimeoutOptions(options: ListenerOptions): HttpsServerOptions {
  return {
    handshakeTimeout: options.readHeaderTimeout,
    headersTimeout: options.readHeaderTimeout,
    requestTimeout: options.readTimeout,
    keepAliveTimeout: options.idleTimeout,
    // Node checks the header and request deadlines on this interval (30 s by default, which would
    // let a short deadline run far over); a quarter of the shorter deadline keeps them close.
    connectionsCheckingInterval: Math.max(25, Math.min(1_000, Math.floor(options.readHeaderTimeout / 4))),
  };
}

interface Waiting {
  start(): void;
  abandon(): void;
}

/** One TLS connection's requests: the one being answered and those waiting behind it. */
interface ConnectionState {
  /** Requests received and not yet answered, the current one included. */
  pending: number;
  /** The answer being produced or not yet taken by the socket. */
  current: ServerResponse | undefined;
  waiting: Waiting[];
  closed: boolean;
}

/**
 * Installs the connection caps, the per-connection backpressure and the client error answers on a
 * Fastify server built with {@link serverTimeoutOptions} and {@link clientErrorHandler}.
 */
export class ConnectionLimits {
  private readonly connections = new WeakMap<Socket, ConnectionState>();
  private readonly perAddress = new AddressCounts();
  /** Addresses at their cap, so that a refusal is logged once, not once per connection. */
  private readonly refusing = new Set<string>();
  private atMaxConnections = false;

  constructor(
    private readonly options: ListenerOptions,
    private readonly log: FastifyBaseLogger,
  ) {}

  install(app: FastifyInstance): void {
    const server = app.server as HttpsServer;
    server.maxConnections = this.options.maxConnections;
    server.on('drop', (data?: { remoteAddress?: string }) => {
      if (this.atMaxConnections) return;
      this.atMaxConnections = true;
      this.log.warn(
        { maxConnections: this.options.maxConnections, remoteAddress: data?.remoteAddress },
        `refusing connections: ${this.options.maxConnections} (maxConnections) are open`,
      );
    });
    // Before the TLS layer sees the socket, so a refused connection costs no handshake.
    server.prependListener('connection', (socket: Socket) => this.admit(socket));
    server.on('secureConnection', (socket: Socket) => this.track(socket));
    this.answerOutsideRoutes(server);
    app.addHook('onRequest', (request, reply, done) => {
      const state = this.connections.get(request.raw.socket);
      if (!state) {
        done(); // inject(): no network connection
        return;
      }
      const abandon = (): void => {
        reply.hijack(); // nothing is sent: the connection is gone
        done();
      };
      if (state.closed) return abandon();
      state.pending += 1;
      if (state.pending > MAX_PIPELINED_REQUESTS) {
        this.log.info(
          { remoteAddress: request.raw.socket.remoteAddress },
          `closing a connection that pipelined more than ${MAX_PIPELINED_REQUESTS} requests`,
        );
        close(state, request.raw.socket);
        return abandon();
      }
      const start = (): void => {
        this.watch(reply.raw, request.raw.socket, state);
        done();
      };
      if (state.current) state.waiting.push({ start, abandon });
      else start();
    });
  }

  /** The client error handler: the envelope with `Connection: close`, then the connection closes. */
  clientErrorHandler(): (err: NodeJS.ErrnoException, socket: Socket) => void {
    return (err, socket) => {
      // Reset by the peer, or answered already and lingering: nothing to add.
      if (err.code === 'ECONNRESET' || socket.destroyed || socket.writableEnded) return;
      const { code, message } = describeClientError(err);
      this.answerAndClose(socket, code, message, { parserError: err.code });
    };
  }

  /**
   * Requests Node answers before any route, bare or not at all: a CONNECT (its socket is handed over,
   * and would be dropped) and an Expect other than 100-continue (417 with no body). Both get the
   * envelope, and the connection closes.
   */
  private answerOutsideRoutes(server: HttpsServer): void {
    server.on('connect', (request: IncomingMessage, socket: Socket) =>
      this.answerAndClose(socket, 'METHOD_NOT_ALLOWED', `${request.method ?? 'CONNECT'} is not allowed`),
    );
    server.on('checkExpectation', (request: IncomingMessage) =>
      this.answerAndClose(request.socket, 'EXPECTATION_FAILED', 'only the expectation 100-continue is supported'),
    );
    // A plain HTTP request on this TLS port (http:// for https://) would get an empty reply; it is
    // told with a 400 in plain HTTP on the connection under the failed handshake (the established
    // controller answers a 400 in text). A plain CONNECT (ERR_SSL_HTTPS_PROXY_REQUEST) is a proxy
    // client's mistake and is dropped. Node destroys the TLS socket itself after this event.
    server.on('tlsClientError', (err: NodeJS.ErrnoException, tlsSocket: TLSSocket) => {
      if (err.code !== 'ERR_SSL_HTTP_REQUEST') return;
      const raw = (tlsSocket as unknown as { _parent?: Socket })._parent;
      if (raw) this.answerAndClose(raw, 'COULD_NOT_VALIDATE', 'this port speaks HTTPS only, and the request came in plain HTTP: use https://');
    });
  }

  /** Writes the envelope of `code` straight to the socket with `Connection: close`, then closes it. */
  private answerAndClose(socket: Socket, code: ErrorCode, message: string, logged: Record<string, unknown> = {}): void {
    const status = ERROR_STATUS[code];
    const requestId = randomUUID();
    this.log.info({ requestId, status, code, ...logged }, message);
    // An answer already started on this connection would be corrupted by another one.
    const started = this.connections.get(socket)?.current?.headersSent === true;
    if (!socket.writable || started) {
      socket.destroy();
      return;
    }
    const body = JSON.stringify(errorBody(new ApiError(code, message), requestId));
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        'Connection: close\r\n' +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        CORS_LINES +
        `x-request-id: ${requestId}\r\n\r\n${body}`,
    );
    // The client reads the answer and closes; one that does not is cut off.
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  }

  private admit(socket: Socket): void {
    const key = addressKey(socket.remoteAddress);
    if (this.perAddress.count(key) >= this.options.maxConnectionsPerAddress) {
      if (!this.refusing.has(key)) {
        this.refusing.add(key);
        this.log.warn(
          { remoteAddress: socket.remoteAddress, maxConnectionsPerAddress: this.options.maxConnectionsPerAddress },
          `refusing connections from ${key}: ${this.options.maxConnectionsPerAddress} (maxConnectionsPerAddress) are open`,
        );
      }
      socket.destroy();
      return;
    }
    this.perAddress.opened(key);
    socket.once('close', () => {
      this.perAddress.closed(key);
      this.refusing.delete(key);
      this.atMaxConnections = false;
    });
  }

  private track(socket: Socket): void {
    const state: ConnectionState = { pending: 0, current: undefined, waiting: [], closed: false };
    this.connections.set(socket, state);
    socket.once('close', () => close(state, socket));
  }

  /** Follows one answer: it holds the connection until the socket has taken all of it. */
  private watch(res: ServerResponse, socket: Socket, state: ConnectionState): void {
    state.current = res;
    let timer: NodeJS.Timeout | undefined;
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      clearTimeout(timer);
      state.pending -= 1;
      state.current = undefined;
      if (!state.closed) state.waiting.shift()?.start();
    };
    // 'prefinish': the answer is complete and handed to the socket; 'finish': the socket took it.
    res.once('prefinish', () => {
      timer = setTimeout(() => {
        this.log.info(
          { remoteAddress: socket.remoteAddress, unsentBytes: socket.writableLength },
          `closing a connection whose client did not take its answer within ${this.options.writeTimeout} ms (writeTimeout)`,
        );
        close(state, socket);
      }, this.options.writeTimeout);
      timer.unref();
    });
    res.once('finish', release);
    res.once('close', release);
  }
}

/** Ends a connection: nothing waiting on it is processed any more. */
/** Addresses with no connection open kept at least before they are swept out. */
const IDLE_ADDRESSES_KEPT = 1_024;

/**
 * Connections open by client address. An address whose connections have all closed stays, at 0,
 * until such addresses outnumber the others (and IDLE_ADDRESSES_KEPT): a client that connects
 * again and again would otherwise delete and set its key each time, and V8 keeps each deleted slot
 * in the key's chain until the table is rebuilt (with 40,000 addresses connected, 70–300 µs a
 * connection). The sweep then costs at most two steps for each close since the last one.
 */
export class AddressCounts {
  private readonly open = new Map<string, number>();
  private idle = 0;

  /** Connections open from the address. */
  count(key: string): number {
    return this.open.get(key) ?? 0;
  }

  opened(key: string): void {
    const open = this.open.get(key);
    if (open === 0) this.idle--;
    this.open.set(key, (open ?? 0) + 1);
  }

  closed(key: string): void {
    const left = (this.open.get(key) ?? 1) - 1;
    this.open.set(key, left);
    if (left > 0) return;
    this.idle++;
    if (this.idle <= Math.max(IDLE_ADDRESSES_KEPT, this.open.size - this.idle)) return;
    for (const [k, n] of this.open) if (n === 0) this.open.delete(k);
    this.idle = 0;
  }

  /** Addresses kept, those with no connection open included. */
  get size(): number {
    return this.open.size;
  }
}

function close(state: ConnectionState, socket: Socket): void {
  state.closed = true;
  for (const waiting of state.waiting.splice(0)) waiting.abandon();
  socket.destroy();
}

/** What a client error is answered with. */
function describeClientError(err: NodeJS.ErrnoException): { code: ErrorCode; message: string } {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { code: 'REQUEST_TIMEOUT', message: 'the request did not arrive in time' };
    case 'HPE_HEADER_OVERFLOW':
      return { code: 'REQUEST_HEADER_FIELDS_TOO_LARGE', message: 'the request headers are too large' };
    default:
      return { code: 'COULD_NOT_VALIDATE', message: 'the request is not valid HTTP/1.1' };
  }
}
