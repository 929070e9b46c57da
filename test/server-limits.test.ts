// Slow, silent and greedy clients over real TLS sockets: a stalled handshake, slow headers, a slow
// body and an idle kept-alive connection are each closed after their configured deadline; the
// connection caps refuse the extra connection; a client that pipelines requests and never reads
// the answers makes the server hold at most one answer for it, then lose the connection; and
// requests the HTTP parser refuses are answered with the error envelope and `Connection: close`.
import { writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createApp, type App } from '../src/app/app.js';
import { loadConfig } from '../src/config/index.js';
import { ADMIN_ENV, ADMIN_PASSWORD, ADMIN_USERNAME, MGMT, tempDir } from './helpers.js';

interface Running {
  app: App;
  port: number;
}

const clients: Client[] = [];
afterEach(() => {
  for (const client of clients.splice(0)) client.destroy();
});

/** Controllers by their listener options, shared by the tests that use the same options. */
const controllers = new Map<string, Promise<Running & { remove(): void }>>();
afterAll(async () => {
  for (const started of controllers.values()) {
    const { app, remove } = await started;
    await app.close();
    remove();
  }
});

/** A controller whose one listener has the given options (a YAML flow mapping). */
function start(options: string): Promise<Running> {
  let started = controllers.get(options);
  if (!started) {
    started = (async () => {
      const dir = tempDir();
      const file = join(dir.path, 'overlay.yaml');
      writeFileSync(
        file,
        `web:
  - name: limits
    bindPoints: [{ interface: "127.0.0.1:0" }]
    apis: [{ binding: edge-client }, { binding: edge-management }]
    options: ${options}
`,
      );
      const config = loadConfig({ config: file, dataDir: join(dir.path, 'data') }, ADMIN_ENV);
      const app = await createApp(config, { log: pino({ level: 'silent' }), memoryStore: true, checkAnswers: true });
      const [url] = await app.listen();
      return { app, port: Number(new URL(url!).port), remove: dir.remove };
    })();
    controllers.set(options, started);
  }
  return started;
}

/** A TLS connection that records what it receives and when it closed. */
class Client {
  readonly socket: TLSSocket;
  readonly opened = Date.now();
  received = '';
  secured = false;
  closedAt: number | undefined;
  private readonly closed: Promise<void>;

  constructor(port: number) {
    clients.push(this);
    this.socket = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false });
    this.socket.setEncoding('latin1');
    this.socket.on('secureConnect', () => (this.secured = true));
    this.socket.on('data', (chunk: string) => (this.received += chunk));
    this.socket.on('error', () => undefined); // a refused or reset connection shows as closed
    this.closed = new Promise((resolve) =>
      this.socket.once('close', () => {
        this.closedAt = Date.now();
        resolve();
      }),
    );
  }

  /** Resolves true once the handshake is done, false if the connection closes first. */
  handshake(): Promise<boolean> {
    if (this.secured) return Promise.resolve(true);
    return new Promise((resolve) => {
      this.socket.once('secureConnect', () => resolve(true));
      void this.closed.then(() => resolve(this.secured));
    });
  }

  /** Waits for the close, at most `ms`; answers how long after opening it closed (undefined: still open). */
  async waitClosed(ms: number): Promise<number | undefined> {
    await Promise.race([this.closed, new Promise((resolve) => setTimeout(resolve, ms))]);
    return this.closedAt === undefined ? undefined : this.closedAt - this.opened;
  }

  /** Waits until `count` complete answers arrived (or the connection closed, or `ms` passed). */
  async waitAnswers(count: number, ms = 5_000): Promise<string[]> {
    const deadline = Date.now() + ms;
    while (answers(this.received).length < count && this.closedAt === undefined && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return answers(this.received);
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** The complete HTTP answers (head + Content-Length body) at the start of `text`. */
function answers(text: string): string[] {
  const out: string[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return out;
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(rest.slice(0, end))?.[1] ?? 0);
    if (rest.length < end + 4 + length) return out;
    out.push(rest.slice(0, end + 4 + length));
    rest = rest.slice(end + 4 + length);
  }
}

function statusOf(answer: string): number {
  return Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1]);
}

function headerOf(answer: string, name: string): string | undefined {
  return new RegExp(`\\r\\n${name}: *([^\\r]*)`, 'i').exec(answer)?.[1];
}

function bodyOf(answer: string): any {
  return JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Writes `piece` every `everyMs` until the socket closes or `untilMs` passed. */
async function dribble(client: Client, piece: string, everyMs: number, untilMs: number): Promise<void> {
  const stop = Date.now() + untilMs;
  while (client.closedAt === undefined && Date.now() < stop) {
    client.socket.write(piece);
    await sleep(everyMs);
  }
}

const GET_VERSION = 'GET /edge/client/v1/version HTTP/1.1\r\nHost: ctrl\r\n\r\n';

describe('timeouts', () => {
  // Header deadline 400 ms, request deadline 3 s, idle deadline 1.5 s: each test tells them apart.
  const TIMEOUTS = '{ readHeaderTimeout: 400ms, readTimeout: 3s, idleTimeout: 1500ms }';
  it('closes a connection that never completes the TLS handshake after readHeaderTimeout', async () => {
    const { port } = await start(TIMEOUTS);
    const socket: Socket = netConnect({ host: '127.0.0.1', port });
    socket.on('error', () => undefined);
    const opened = Date.now();
    const closedAfter = await new Promise<number | undefined>((resolve) => {
      socket.once('close', () => resolve(Date.now() - opened));
      setTimeout(() => resolve(undefined), 5_000);
    });
    socket.destroy();
    expect(closedAfter).toBeDefined();
    expect(closedAfter!).toBeGreaterThanOrEqual(400);
  });

  it('closes a connection that sends nothing after the handshake after readHeaderTimeout', async () => {
    const { port } = await start(TIMEOUTS);
    const client = new Client(port);
    expect(await client.handshake()).toBe(true);
    const closedAfter = await client.waitClosed(5_000);
    client.destroy();
    expect(closedAfter).toBeDefined();
    expect(closedAfter!).toBeGreaterThanOrEqual(400);
  });

  it('answers 408 and closes when the headers come too slowly', async () => {
    const { port } = await start(TIMEOUTS);
    const client = new Client(port);
    expect(await client.handshake()).toBe(true);
    client.socket.write('GET /edge/client/v1/version HTTP/1.1\r\nHost: ctrl\r\n');
    // A header line every 100 ms: always some traffic, never the end of the headers.
    await dribble(client, 'X-Slow: 1\r\n', 100, 5_000);
    const closedAfter = await client.waitClosed(1_000);
    expect(closedAfter).toBeDefined();
    expect(closedAfter!).toBeGreaterThanOrEqual(400);
    expect(closedAfter!).toBeLessThan(2_500); // the header deadline, not the request deadline
    const [answer] = answers(client.received);
    expect(statusOf(answer!)).toBe(408);
    expect(headerOf(answer!, 'connection')).toBe('close');
    expect(bodyOf(answer!).error).toMatchObject({ code: 'REQUEST_TIMEOUT' });
  });

  it('answers 413 and closes at once when the declared body is too large, reading none of it', async () => {
    const { port } = await start(TIMEOUTS);
    const client = new Client(port);
    expect(await client.handshake()).toBe(true);
    client.socket.write(`POST ${MGMT}/identities HTTP/1.1\r\nHost: ctrl\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n{}`);
    // Closed well before the request deadline (3 s), with one answer only.
    const closedAfter = await client.waitClosed(2_000);
    expect(closedAfter).toBeDefined();
    const all = answers(client.received);
    expect(all).toHaveLength(1);
    expect(statusOf(all[0]!)).toBe(413);
    expect(headerOf(all[0]!, 'connection')).toBe('close');
    expect(bodyOf(all[0]!).error).toMatchObject({ code: 'REQUEST_ENTITY_TOO_LARGE' });
  });

  // It sent 100 Continue first, and the client's body then often cut the 413 off.
  it('answers 413 instead of 100 Continue to an Expect: 100-continue with too large a body, and 100 Continue otherwise', async () => {
    const { port } = await start(TIMEOUTS);
    const client = new Client(port);
    expect(await client.handshake()).toBe(true);
    client.socket.write(`POST ${MGMT}/identities HTTP/1.1\r\nHost: ctrl\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 2000000\r\n\r\n`);
    expect(await client.waitClosed(2_000)).toBeDefined();
    expect(client.received).not.toContain('100 Continue');
    const [answer] = answers(client.received);
    expect(statusOf(answer!)).toBe(413);
    expect(bodyOf(answer!).error).toMatchObject({ code: 'REQUEST_ENTITY_TOO_LARGE' });

    const small = new Client(port);
    expect(await small.handshake()).toBe(true);
    small.socket.write(`POST ${MGMT}/authenticate?method=password HTTP/1.1\r\nHost: ctrl\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n`);
    const [interim] = await small.waitAnswers(1);
    expect(statusOf(interim!)).toBe(100);
    small.socket.write('{}');
    const [, final] = await small.waitAnswers(2);
    expect(statusOf(final!)).toBe(400);
    small.destroy();
  });

  it('answers 413 and closes when a chunked body grows past the limit', async () => {
    const { port } = await start(TIMEOUTS);
    const client = new Client(port);
    expect(await client.handshake()).toBe(true);
    const chunk = 'x'.repeat(64 * 1024);
    client.socket.write(`POST ${MGMT}/authenticate?method=password HTTP/1.1\r\nHost: ctrl\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
    for (let i = 0; i < 18; i++) client.socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    const closedAfter = await client.waitClosed(2_500);
    expect(closedAfter).toBeDefined();
    const [answer] = answers(client.received);
    expect(statusOf(answer!)).toBe(413);
    expect(headerOf(answer!, 'connection')).toBe('close');
  });

  it('answers 408 and closes when the body comes too slowly', async () => {
    const { port } = await start('{ readHeaderTimeout: 500ms, readTimeout: 1s }');
    const client = new Client(port);
    expect(await client.handshake()).toBe(true);
    client.socket.write(
      `POST ${MGMT}/authenticate?method=password HTTP/1.1\r\nHost: ctrl\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"username":`,
    );
    await dribble(client, ' ', 100, 5_000);
    const closedAfter = await client.waitClosed(1_000);
    expect(closedAfter).toBeDefined();
    expect(closedAfter!).toBeGreaterThanOrEqual(900);
    const [answer] = answers(client.received);
    expect(statusOf(answer!)).toBe(408);
    expect(headerOf(answer!, 'connection')).toBe('close');
    expect(bodyOf(answer!).error).toMatchObject({ code: 'REQUEST_TIMEOUT' });
  });

  it('closes a kept-alive connection left idle after idleTimeout', async () => {
    const { port } = await start(TIMEOUTS);
    const client = new Client(port);
    client.socket.write(GET_VERSION);
    const [answer] = await client.waitAnswers(1);
    expect(statusOf(answer!)).toBe(200);
    const answeredAt = Date.now();
    const closedAfter = await client.waitClosed(5_000);
    expect(closedAfter).toBeDefined();
    expect(client.closedAt! - answeredAt).toBeGreaterThanOrEqual(1_400);
  });

  it('keeps a kept-alive connection past the header deadline while idleTimeout runs', async () => {
    const { port } = await start(TIMEOUTS);
    const client = new Client(port);
    client.socket.write(GET_VERSION);
    expect(statusOf((await client.waitAnswers(1))[0]!)).toBe(200);
    expect(await client.waitClosed(1_000)).toBeUndefined();
    client.socket.write(GET_VERSION);
    expect((await client.waitAnswers(2)).map(statusOf)).toEqual([200, 200]);
  });
});

describe('connection caps', () => {
  it('refuses a connection beyond maxConnectionsPerAddress, and takes one again once a slot is free', async () => {
    const { port } = await start('{ maxConnectionsPerAddress: 2 }');
    const held = [new Client(port), new Client(port)];
    for (const client of held) {
      client.socket.write(GET_VERSION);
      expect(statusOf((await client.waitAnswers(1))[0]!)).toBe(200);
    }
    const extra = new Client(port);
    expect(await extra.handshake()).toBe(false);
    expect(await extra.waitClosed(5_000)).toBeDefined();
    expect(extra.received).toBe('');

    held[0]!.destroy();
    await held[0]!.waitClosed(5_000);
    // The server counts the slot free when it sees the close; give it a moment.
    let again: Client | undefined;
    for (let attempt = 0; attempt < 20 && !again; attempt++) {
      const candidate = new Client(port);
      if (await candidate.handshake()) again = candidate;
      else await sleep(50);
    }
    expect(again).toBeDefined();
    again!.socket.write(GET_VERSION);
    expect(statusOf((await again!.waitAnswers(1))[0]!)).toBe(200);
    // The second held connection was never disturbed.
    held[1]!.socket.write(GET_VERSION);
    expect((await held[1]!.waitAnswers(2)).map(statusOf)).toEqual([200, 200]);
    for (const client of [...held, again!]) client.destroy();
  });

  it('refuses a connection beyond maxConnections', async () => {
    const { port } = await start('{ maxConnections: 2, maxConnectionsPerAddress: 100 }');
    const held = [new Client(port), new Client(port)];
    for (const client of held) expect(await client.handshake()).toBe(true);
    const extra = new Client(port);
    expect(await extra.handshake()).toBe(false);
    expect(await extra.waitClosed(5_000)).toBeDefined();
    for (const client of held) client.destroy();
  });
});

/** Default deadlines but a short writeTimeout. */
const ANSWERS = '{ writeTimeout: 2s }';

describe('a client that does not read its answers', () => {
  /** Identities with many long role attributes, so that one list answer is several MiB. */
  async function bigList(app: App): Promise<{ token: string; path: string; size: number }> {
    const server = app.servers[0]!.app;
    const login = await server.inject({
      method: 'POST',
      url: `${MGMT}/authenticate?method=password`,
      payload: { username: ADMIN_USERNAME, password: ADMIN_PASSWORD },
    });
    const token = login.headers['overlay-session'] as string;
    const path = `${MGMT}/identities?limit=500`;
    for (let i = 0; ; i++) {
      const size = (await server.inject({ method: 'GET', url: path, headers: { 'overlay-session': token } })).body.length;
      if (size >= 2 * 1024 * 1024) return { token, path, size };
      const roleAttributes = Array.from({ length: 1000 }, (_, j) => `${String(j).padStart(4, '0')}-${'r'.repeat(240)}`);
      const res = await server.inject({
        method: 'POST',
        url: `${MGMT}/identities`,
        headers: { 'overlay-session': token },
        payload: { name: `big-${i}`, type: 'User', isAdmin: false, roleAttributes },
      });
      expect(res.statusCode).toBe(201);
    }
  }

  it('holds at most one answer for it and closes the connection after writeTimeout', async () => {
    const { app, port } = await start(ANSWERS);
    const { token, path, size } = await bigList(app);

    // Every answer the server produces for this connection, and when it closed, seen from the
    // server side (the paused client cannot notice a close).
    const produced: ServerResponse[] = [];
    let serverClosedAt: number | undefined;
    const client = new Client(port);
    expect(await client.handshake()).toBe(true);
    const localPort = client.socket.localPort;
    app.servers[0]!.app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      if (req.socket.remotePort !== localPort) return;
      if (produced.length === 0) req.socket.once('close', () => (serverClosedAt = Date.now()));
      produced.push(res);
    });

    // Eight pipelined requests, together far more than the socket buffers take, and no reading.
    client.socket.pause();
    const requests = 8;
    client.socket.write(`GET ${path} HTTP/1.1\r\nHost: ctrl\r\noverlay-session: ${token}\r\n\r\n`.repeat(requests));

    let mostHeld = 0; // answers produced but not yet taken by the socket
    let mostBuffered = 0; // bytes of them still in the server's memory
    const written = Date.now();
    const deadline = written + 6_000;
    while (serverClosedAt === undefined && Date.now() < deadline) {
      const held = produced.filter((res) => res.writableEnded && !res.writableFinished);
      mostHeld = Math.max(mostHeld, held.length);
      mostBuffered = Math.max(mostBuffered, held.reduce((sum, res) => sum + res.writableLength, 0));
      await sleep(20);
    }
    client.destroy();

    expect(produced.length).toBeGreaterThanOrEqual(1);
    expect(mostHeld).toBeLessThanOrEqual(1);
    expect(mostBuffered).toBeLessThanOrEqual(size + 64 * 1024);
    // Of eight requests, only those whose answers the socket took were processed at all.
    expect(produced.filter((res) => res.writableEnded).length).toBeLessThan(requests);
    // Closed once the answer was not taken within writeTimeout (2 s).
    expect(serverClosedAt).toBeDefined();
    expect(serverClosedAt! - written).toBeGreaterThanOrEqual(1_900);
  });

  it('closes a connection that pipelines more than 16 requests', async () => {
    const { port } = await start(ANSWERS);
    const client = new Client(port);
    expect(await client.handshake()).toBe(true);
    client.socket.write(GET_VERSION.repeat(40));
    const closedAfter = await client.waitClosed(5_000);
    expect(closedAfter).toBeDefined();
    const got = answers(client.received);
    expect(got.length).toBeLessThanOrEqual(16);
    for (const answer of got) expect(statusOf(answer)).toBe(200);
  });

  it('still answers a few pipelined requests in order', async () => {
    const { port } = await start(ANSWERS);
    const client = new Client(port);
    client.socket.write(
      GET_VERSION + 'GET /edge/client/v1/nope HTTP/1.1\r\nHost: ctrl\r\n\r\n' + GET_VERSION.repeat(3),
    );
    const got = await client.waitAnswers(5);
    expect(got.map(statusOf)).toEqual([200, 404, 200, 200, 200]);
    expect(client.closedAt).toBeUndefined();
    client.destroy();
  });
});

describe('requests the HTTP parser refuses', () => {
  it.each([
    {
      name: 'headers larger than the parser takes',
      request: `GET /edge/client/v1/version HTTP/1.1\r\nHost: ctrl\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      status: 431,
      code: 'REQUEST_HEADER_FIELDS_TOO_LARGE',
    },
    { name: 'a malformed request line', request: 'GARBAGE\r\n\r\n', status: 400, code: 'COULD_NOT_VALIDATE' },
    {
      name: 'a malformed header line',
      request: 'GET /edge/client/v1/version HTTP/1.1\r\nHost: ctrl\r\nNo Colon Here\r\n\r\n',
      status: 400,
      code: 'COULD_NOT_VALIDATE',
    },
    {
      name: 'two different Content-Lengths',
      request: 'POST /edge/client/v1/version HTTP/1.1\r\nHost: ctrl\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
      status: 400,
      code: 'COULD_NOT_VALIDATE',
    },
    // Node answers these before any route: a CONNECT it would drop, an Expect it would answer bare.
    { name: 'a CONNECT', request: 'CONNECT ctrl:443 HTTP/1.1\r\nHost: ctrl:443\r\n\r\n', status: 405, code: 'METHOD_NOT_ALLOWED' },
    {
      name: 'an Expect other than 100-continue',
      request: 'GET /edge/client/v1/version HTTP/1.1\r\nHost: ctrl\r\nExpect: weird\r\n\r\n',
      status: 417,
      code: 'EXPECTATION_FAILED',
    },
  ])('$name: $status with the envelope and Connection: close, then the connection closes', async ({ request, status, code }) => {
    const { port } = await start(ANSWERS);
    const client = new Client(port);
    // A good request first: the connection is kept alive, then the bad one arrives on it.
    client.socket.write(GET_VERSION);
    expect(statusOf((await client.waitAnswers(1))[0]!)).toBe(200);
    client.socket.write(request);
    expect(await client.waitClosed(5_000)).toBeDefined();
    const [, answer] = answers(client.received);
    expect(statusOf(answer!)).toBe(status);
    expect(headerOf(answer!, 'connection')).toBe('close');
    expect(headerOf(answer!, 'content-type')).toMatch(/^application\/json/);
    // A page on another origin may read it, as every other answer (README, CORS).
    expect(headerOf(answer!, 'access-control-allow-origin')).toBe('*');
    expect(headerOf(answer!, 'access-control-expose-headers')).toContain('www-authenticate');
    const body = bodyOf(answer!);
    expect(body.error).toMatchObject({ code });
    expect(body.error.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(body.meta).toMatchObject({ apiVersion: expect.any(String) });
  });
});

describe('an HTTP/1.1 request without Host', () => {
  it('is refused with 400 and the envelope, and an HTTP/1.0 one is served', async () => {
    const { port } = await start(ANSWERS);
    const client = new Client(port);
    client.socket.write('GET /edge/client/v1/version HTTP/1.1\r\n\r\n');
    const [answer] = await client.waitAnswers(1);
    expect(statusOf(answer!)).toBe(400);
    expect(bodyOf(answer!).error).toMatchObject({ code: 'COULD_NOT_VALIDATE', message: 'an HTTP/1.1 request must have a Host header' });
    client.destroy();
    const old = new Client(port);
    old.socket.write('GET /edge/client/v1/version HTTP/1.0\r\n\r\n');
    expect(statusOf((await old.waitAnswers(1))[0]!)).toBe(200);
    old.destroy();
  });
});

describe('a request with more than one Host header', () => {
  it('is refused with 400 and the envelope (RFC 9112 §3.2): which host it meant is ambiguous', async () => {
    const { port } = await start(ANSWERS);
    const client = new Client(port);
    client.socket.write('GET /edge/client/v1/version HTTP/1.1\r\nHost: ctrl\r\nHost: other.example\r\n\r\n');
    const [answer] = await client.waitAnswers(1);
    expect(statusOf(answer!)).toBe(400);
    expect(bodyOf(answer!).error).toMatchObject({ code: 'COULD_NOT_VALIDATE', message: 'a request must have one Host header' });
    client.socket.write(GET_VERSION);
    expect(statusOf((await client.waitAnswers(2))[1]!)).toBe(200);
  });
});

describe('a request arriving while the controller stops', () => {
  it('is answered 503 SERVICE_UNAVAILABLE with the envelope, Retry-After and Connection: close', async () => {
    // A controller of its own, stopped here.
    const options = '{ maxConnections: 999 }';
    const { port } = await start(options);
    const running = (await controllers.get(options))!;
    controllers.delete(options);
    const client = new Client(port);
    const prober = new Client(port);
    // A request under way (its body not all sent) keeps the connection open while the controller stops.
    const underWay = `POST ${MGMT}/authenticate?method=password HTTP/1.1\r\nHost: ctrl\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{`;
    client.socket.write(underWay);
    prober.socket.write(underWay);
    await sleep(200);
    const stopped = running.app.close();
    await sleep(200);
    client.socket.write(`}${GET_VERSION}`);
    prober.socket.write('}GET /ready HTTP/1.1\r\nHost: ctrl\r\n\r\n');
    const [first, second] = await client.waitAnswers(2);
    const [, ready] = await prober.waitAnswers(2);
    await stopped;
    running.remove();
    // The probe answers as itself, saying why.
    expect(statusOf(ready!)).toBe(503);
    expect(bodyOf(ready!)).toEqual({ status: 'unavailable', reason: 'shutting down' });
    expect(statusOf(first!)).toBe(400); // finished: it was under way
    expect(statusOf(second!)).toBe(503);
    expect(headerOf(second!, 'retry-after')).toBe('5');
    expect(headerOf(second!, 'connection')).toBe('close');
    expect(headerOf(second!, 'access-control-allow-origin')).toBe('*');
    const body = bodyOf(second!);
    expect(body.error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', requestId: headerOf(second!, 'x-request-id') });
    expect(body.meta).toMatchObject({ apiVersion: expect.any(String) });
  });
});

describe('a plain HTTP request on the TLS port', () => {
  // http:// for https://: an empty reply left the user guessing.
  it('is answered 400 with the envelope in plain HTTP, saying the port speaks HTTPS, and closed', async () => {
    const { port } = await start(ANSWERS);
    const socket: Socket = netConnect({ host: '127.0.0.1', port });
    socket.on('error', () => undefined);
    socket.setEncoding('latin1');
    let received = '';
    socket.on('data', (chunk: string) => (received += chunk));
    const closed = new Promise<boolean>((resolve) => {
      socket.once('close', () => resolve(true));
      setTimeout(() => resolve(false), 5_000);
    });
    socket.write('GET /edge/client/v1/version HTTP/1.1\r\nHost: ctrl\r\n\r\n');
    expect(await closed).toBe(true);
    const [answer] = answers(received);
    expect(statusOf(answer!)).toBe(400);
    expect(headerOf(answer!, 'connection')).toBe('close');
    expect(bodyOf(answer!).error).toMatchObject({ code: 'COULD_NOT_VALIDATE', message: expect.stringMatching(/HTTPS/) });
  });
});
