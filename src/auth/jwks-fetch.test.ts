// The bounded JWKS fetch: what it refuses before connecting (schemes, credentials, loopback, private,
// link-local and reserved targets, names that resolve to them), that it connects to the address it
// checked, and what it refuses of an answer (redirects, other statuses, size, silence, an untrusted
// certificate, non-JWKS), closing the connection of a refused answer, against real local servers.
import { createServer as createHttpsServer } from 'node:https';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testCertificate } from '../../test/helpers.js';
import { checkJwksUrl, classifyAddress, fetchJwks, JwksFetchError, targetAddresses, type JwksFetchPolicy, type ResolveHost } from './jwks-fetch.js';

const STRICT: JwksFetchPolicy = { allowHttpLoopback: false, allowPrivateAddresses: false };
const LOOPBACK_HTTP: JwksFetchPolicy = { allowHttpLoopback: true, allowPrivateAddresses: false };
const JWKS = { keys: [{ kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0', kid: 'k1' }] };

const JWKS_TEXT = JSON.stringify(JWKS);

let server: Server;
let base: string;
let port: number;
const held: ServerResponse[] = [];
/** The server's side of the last connection to each path, closed or not. */
const connections = new Map<string, { socket: Socket; closed: Promise<void> }>();
/** The accept header of the last request. */
let accepted: string | undefined;

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    connections.set(path, { socket: req.socket, closed: new Promise((resolve) => req.socket.once('close', () => resolve())) });
    accepted = req.headers.accept;
    switch (path) {
      case '/jwks':
        res.writeHead(200, { 'content-type': 'application/json' }).end(JWKS_TEXT);
        break;
      case '/exact':
        // Exactly as long as the cap the test sets, and saying so.
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(JWKS_TEXT) }).end(JWKS_TEXT);
        break;
      case '/answer':
        // The body the query names.
        res.writeHead(200, { 'content-type': 'application/json' }).end(new URL(req.url!, 'http://x').searchParams.get('body'));
        break;
      case '/redirect':
        res.writeHead(302, { location: '/jwks' }).end();
        break;
      case '/status': {
        // The status the query names, with a body that never ends.
        const status = Number(new URL(req.url!, 'http://x').searchParams.get('status'));
        res.writeHead(status, { location: '/jwks' });
        res.write('{');
        held.push(res);
        break;
      }
      case '/declared-huge':
        // Says it is larger than the cap, then sends nothing more.
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': 2 * 1024 * 1024 });
        res.write('{');
        held.push(res);
        break;
      case '/endless': {
        // Never ends while the connection is open.
        res.writeHead(200, { 'content-type': 'application/json' });
        const chunk = 'x'.repeat(16 * 1024);
        const timer = setInterval(() => res.write(chunk), 5);
        res.on('close', () => clearInterval(timer));
        break;
      }
      case '/dropped':
        // Answers its head and part of the body, then drops the connection.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"keys":[', () => req.socket.destroy());
        break;
      case '/slow-body':
        // Answers its head and part of the body, then nothing.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"keys":[');
        held.push(res);
        break;
      case '/missing':
        res.writeHead(404).end();
        break;
      case '/huge':
        // No content-length: the cap must hold on the bytes as they come.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"keys":[');
        for (let i = 0; i < 64; i++) res.write(`"${'x'.repeat(32 * 1024)}",`);
        res.end('""]}');
        break;
      case '/not-json':
        res.writeHead(200).end('<html>');
        break;
      case '/no-keys':
        res.writeHead(200).end('{"keys":"none"}');
        break;
      default:
        // Never answers.
        held.push(res);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  port = typeof address === 'object' && address ? address.port : 0;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  for (const res of held) res.destroy();
  await new Promise((resolve) => server.close(resolve));
});

async function refusal(work: Promise<unknown>): Promise<string> {
  const err = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(JwksFetchError);
  expect((err as Error).name).toBe('JwksFetchError');
  return (err as Error).message;
}

/** Whether the server saw the connection to `path` closed within `ms`. */
async function closedWithin(path: string, ms: number): Promise<boolean> {
  const connection = connections.get(path);
  expect(connection).toBeDefined();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const closed = await Promise.race([connection!.closed.then(() => true), late]);
  clearTimeout(timer);
  return closed;
}

/** A resolver answering from a table, counting the names it was asked. */
function resolver(table: Record<string, string[]>): ResolveHost & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (host: string) => {
    asked.push(host);
    const addresses = table[host];
    if (!addresses) throw Object.assign(new Error(`queryA ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { asked });
}

describe('addresses', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['::ffff:10.0.0.1', 'private'],
    ['10.1.2.3', 'private'],
    ['172.20.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['fd00::1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['0.0.0.0', 'reserved'],
    ['224.0.0.1', 'reserved'],
    ['::', 'reserved'],
    ['8.8.8.8', 'public'],
    ['2606:4700:4700::1111', 'public'],
    // IPv6 addresses that reach an IPv4 address through a translator or a tunnel are that address.
    ['64:ff9b::7f00:1', 'loopback'],
    ['64:ff9b::10.0.0.1', 'private'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['64:ff9b::808:808', 'public'],
    ['64:ff9b:1::a00:1', 'reserved'],
    ['::127.0.0.1', 'loopback'],
    ['::a00:1', 'private'],
    ['::8.8.8.8', 'public'],
    ['::ffff:0:7f00:1', 'loopback'],
    ['::ffff:0:808:808', 'public'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:c0a8:101::1', 'private'],
    ['2002:808:808::1', 'public'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved'],
    ['fe80::1%eth0', 'link-local'],
  ])('%s is %s', (address, kind) => {
    expect(classifyAddress(address)).toBe(kind);
  });

  it.each([
    ['https://169.254.169.254/latest/meta-data', 'link-local'],
    ['https://10.0.0.1/jwks', 'private'],
    ['https://127.0.0.1/jwks', 'loopback'],
    ['https://[::1]/jwks', 'loopback'],
    ['https://[::ffff:169.254.169.254]/jwks', 'link-local'],
    ['https://0.0.0.0/jwks', 'reserved'],
    ['https://localhost/jwks', 'loopback'],
    ['https://[64:ff9b::7f00:1]/jwks', 'loopback'],
    ['https://[::127.0.0.1]/jwks', 'loopback'],
    ['https://[64:ff9b::10.1.2.3]/jwks', 'private'],
  ])('refuses the target %s (%s) by default', async (url, kind) => {
    expect(await refusal(targetAddresses(new URL(url), STRICT))).toContain(kind);
  });

  it('allows a public target', async () => {
    expect(await targetAddresses(new URL('https://8.8.8.8/jwks'), STRICT)).toEqual([{ address: '8.8.8.8', family: 4 }]);
    expect(await targetAddresses(new URL('https://[2606:4700:4700::1111]/jwks'), STRICT)).toEqual([{ address: '2606:4700:4700::1111', family: 6 }]);
  });

  it('allows https to loopback when http to loopback is allowed, but not private targets', async () => {
    expect(await targetAddresses(new URL('https://127.0.0.1/jwks'), LOOPBACK_HTTP)).toEqual([{ address: '127.0.0.1', family: 4 }]);
    expect(await refusal(targetAddresses(new URL('https://10.0.0.1/jwks'), LOOPBACK_HTTP))).toBe('the host 10.0.0.1 is the private address 10.0.0.1, which is not allowed');
  });

  it('checks every address of a name, and refuses the name when one is not allowed', async () => {
    const resolve = resolver({ 'idp.test': ['8.8.8.8', '10.0.0.1'], 'empty.test': [] });
    expect(await refusal(targetAddresses(new URL('https://idp.test/jwks'), STRICT, resolve))).toBe('the host idp.test is the private address 10.0.0.1, which is not allowed');
    expect(await refusal(targetAddresses(new URL('https://empty.test/jwks'), STRICT, resolve))).toBe('the host empty.test has no address');
    expect(await refusal(targetAddresses(new URL('https://nowhere.test/jwks'), STRICT, resolve))).toBe('the host nowhere.test could not be resolved (ENOTFOUND)');
    const failing: ResolveHost = () => Promise.reject(new Error('no code'));
    expect(await refusal(targetAddresses(new URL('https://idp.test/jwks'), STRICT, failing))).toBe('the host idp.test could not be resolved (error)');
  });

  it('does not resolve an address', async () => {
    const resolve = resolver({});
    expect(await targetAddresses(new URL('https://8.8.8.8/jwks'), STRICT, resolve)).toEqual([{ address: '8.8.8.8', family: 4 }]);
    expect(resolve.asked).toEqual([]);
  });

  it('allows private targets when configured, but never reserved ones', async () => {
    const open: JwksFetchPolicy = { allowHttpLoopback: false, allowPrivateAddresses: true };
    expect(await targetAddresses(new URL('https://10.0.0.1/jwks'), open)).toEqual([{ address: '10.0.0.1', family: 4 }]);
    expect(await refusal(targetAddresses(new URL('https://224.0.0.1/jwks'), open))).toContain('reserved');
  });
});

describe('URLs', () => {
  it.each([
    ['not a url', 'not a URL'],
    ['ftp://idp.example.com/jwks', 'https'],
    ['file:///etc/passwd', 'https'],
    ['http://idp.example.com/jwks', 'https'],
    ['https://user:pw@idp.example.com/jwks', 'credentials'],
    ['https://user@idp.example.com/jwks', 'credentials'],
    ['https://:pw@idp.example.com/jwks', 'credentials'],
  ])('refuses %s', (url, reason) => {
    expect(() => checkJwksUrl(url, STRICT)).toThrow(reason);
  });

  it('refuses http to a host that is not loopback even when http to loopback is allowed', async () => {
    expect(await refusal(fetchJwks('http://8.8.8.8/jwks', LOOPBACK_HTTP))).toContain('only to a loopback address');
  });
});

describe('fetching', () => {
  it('fetches a JWKS over http from loopback when configured, asking for JSON', async () => {
    accepted = undefined;
    expect(await fetchJwks(`${base}/jwks`, LOOPBACK_HTTP)).toEqual(JWKS);
    expect(accepted).toBe('application/json');
  });

  it('connects to the address it checked, resolving the name once', async () => {
    // A second lookup would answer another address (DNS rebinding); the connection does not ask.
    let answers = [['127.0.0.1'], ['10.0.0.1']];
    const asked: string[] = [];
    const rebinding: ResolveHost = async (host) => {
      asked.push(host);
      const [now, ...later] = answers;
      answers = later.length > 0 ? later : answers;
      return now!.map((address) => ({ address, family: 4 }));
    };
    expect(await fetchJwks(`http://idp.test:${port}/jwks`, LOOPBACK_HTTP, undefined, rebinding)).toEqual(JWKS);
    expect(asked).toEqual(['idp.test']);
  });

  it('refuses http to a name that resolves to an address that is not loopback', async () => {
    const resolve = resolver({ 'idp.test': ['127.0.0.1', '8.8.8.8'] });
    expect(await refusal(fetchJwks(`http://idp.test:${port}/jwks`, LOOPBACK_HTTP, undefined, resolve))).toBe(
      'http is allowed only to a loopback address, and idp.test is 8.8.8.8',
    );
  });

  it('gives up on a name that does not resolve in time', async () => {
    const never: ResolveHost = () => new Promise(() => undefined);
    expect(await refusal(fetchJwks('https://idp.test/jwks', STRICT, { timeoutMs: 100, maxBytes: 1024 }, never))).toBe('it did not answer within 100 ms');
  });

  it('checks the certificate of an https endpoint', async () => {
    // A server certificate (serverAuth) that nothing vouches for.
    const { certPem, keyPem } = await testCertificate('127.0.0.1', { extendedKeyUsages: ['1.3.6.1.5.5.7.3.1'] });
    const tls = createHttpsServer({ cert: certPem, key: keyPem }, (_req, res) => res.writeHead(200).end(JWKS_TEXT));
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
    try {
      const address = tls.address();
      const url = `https://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/jwks`;
      expect(await refusal(fetchJwks(url, LOOPBACK_HTTP))).toBe('it could not be reached (DEPTH_ZERO_SELF_SIGNED_CERT)');
    } finally {
      await new Promise((resolve) => tls.close(resolve));
    }
  });

  it('says an endpoint cannot be reached', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const address = closed.address();
    await new Promise((resolve) => closed.close(resolve));
    const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/jwks`;
    expect(await refusal(fetchJwks(url, LOOPBACK_HTTP))).toBe('it could not be reached (ECONNREFUSED)');
  });

  it('refuses the same endpoint without the configuration', async () => {
    expect(await refusal(fetchJwks(`${base}/jwks`, STRICT))).toContain('https');
  });

  it('does not follow a redirect', async () => {
    expect(await refusal(fetchJwks(`${base}/redirect`, LOOPBACK_HTTP))).toBe('it answered a redirect (HTTP 302), which is not followed');
    for (const status of [300, 307, 399]) {
      expect(await refusal(fetchJwks(`${base}/status?status=${status}`, LOOPBACK_HTTP))).toBe(`it answered a redirect (HTTP ${status}), which is not followed`);
    }
  });

  it('refuses another status', async () => {
    expect(await refusal(fetchJwks(`${base}/missing`, LOOPBACK_HTTP))).toBe('it answered HTTP 404');
    for (const status of [201, 400, 500]) {
      expect(await refusal(fetchJwks(`${base}/status?status=${status}`, LOOPBACK_HTTP))).toBe(`it answered HTTP ${status}`);
    }
  });

  it('closes the connection of a refused status rather than reading on', async () => {
    await refusal(fetchJwks(`${base}/status?status=302`, LOOPBACK_HTTP));
    expect(await closedWithin('/status', 2_000)).toBe(true);
    await refusal(fetchJwks(`${base}/status?status=404`, LOOPBACK_HTTP));
    expect(await closedWithin('/status', 2_000)).toBe(true);
  });

  it('stops reading past the size cap', async () => {
    expect(await refusal(fetchJwks(`${base}/huge`, LOOPBACK_HTTP, { timeoutMs: 5_000, maxBytes: 1024 * 1024 }))).toBe('its answer is larger than 1048576 bytes');
    expect(await refusal(fetchJwks(`${base}/endless`, LOOPBACK_HTTP, { timeoutMs: 5_000, maxBytes: 64 * 1024 }))).toBe('its answer is larger than 65536 bytes');
    expect(await closedWithin('/endless', 2_000)).toBe(true);
  });

  it('refuses at once an answer that says it is larger than the cap', async () => {
    expect(await refusal(fetchJwks(`${base}/declared-huge`, LOOPBACK_HTTP, { timeoutMs: 5_000, maxBytes: 1024 * 1024 }))).toBe('its answer is larger than 1048576 bytes');
    expect(await closedWithin('/declared-huge', 2_000)).toBe(true);
  });

  it('takes an answer exactly as long as the cap', async () => {
    expect(await fetchJwks(`${base}/exact`, LOOPBACK_HTTP, { timeoutMs: 5_000, maxBytes: Buffer.byteLength(JWKS_TEXT) })).toEqual(JWKS);
  });

  it('says an endpoint that drops the connection mid-answer cannot be reached, at once', async () => {
    expect(await refusal(fetchJwks(`${base}/dropped`, LOOPBACK_HTTP))).toBe('it could not be reached (ECONNRESET)');
  });

  it('gives up on a body that stops coming', async () => {
    expect(await refusal(fetchJwks(`${base}/slow-body`, LOOPBACK_HTTP, { timeoutMs: 300, maxBytes: 1024 }))).toBe('it did not answer within 300 ms');
  });

  it('gives up on an endpoint that never answers', async () => {
    const started = Date.now();
    expect(await refusal(fetchJwks(`${base}/silent`, LOOPBACK_HTTP, { timeoutMs: 300, maxBytes: 1024 }))).toContain('did not answer within 300 ms');
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('refuses an answer that is not a JWKS', async () => {
    expect(await refusal(fetchJwks(`${base}/not-json`, LOOPBACK_HTTP))).toContain('not JSON');
    expect(await refusal(fetchJwks(`${base}/no-keys`, LOOPBACK_HTTP))).toContain('not a JWKS');
  });

  it.each(['null', '{"keys":[1]}', '{"keys":[null]}', '{"keys":[[]]}', '{"keys":[{"kty":"EC"},"k"]}', '[]'])('refuses the answer %s', async (body) => {
    expect(await refusal(fetchJwks(`${base}/answer?body=${encodeURIComponent(body)}`, LOOPBACK_HTTP))).toBe('its answer is not a JWKS (an object with a keys array)');
  });

  it('takes a JWKS of several keys, and one of none', async () => {
    const two = { keys: [{ kty: 'EC', kid: 'a' }, { kty: 'RSA', kid: 'b' }] };
    expect(await fetchJwks(`${base}/answer?body=${encodeURIComponent(JSON.stringify(two))}`, LOOPBACK_HTTP)).toEqual(two);
    expect(await fetchJwks(`${base}/answer?body=${encodeURIComponent('{"keys":[]}')}`, LOOPBACK_HTTP)).toEqual({ keys: [] });
  });
});
