// The bounded JWKS fetch: what it refuses before connecting (schemes, credentials, loopback, private,
// link-local and reserved targets) and what it refuses of an answer (redirects, other statuses, size,
// silence, non-JWKS), against real local servers.
import { createServer, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkJwksUrl, classifyAddress, fetchJwks, JwksFetchError, targetAddresses, type JwksFetchPolicy } from './jwks-fetch.js';

const STRICT: JwksFetchPolicy = { allowHttpLoopback: false, allowPrivateAddresses: false };
const LOOPBACK_HTTP: JwksFetchPolicy = { allowHttpLoopback: true, allowPrivateAddresses: false };
const JWKS = { keys: [{ kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0', kid: 'k1' }] };

let server: Server;
let base: string;
const held: ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    switch (req.url) {
      case '/jwks':
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(JWKS));
        break;
      case '/redirect':
        res.writeHead(302, { location: '/jwks' }).end();
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
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
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
  return (err as Error).message;
}

describe('addresses', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
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
  ])('refuses the target %s (%s) by default', async (url, kind) => {
    expect(await refusal(targetAddresses(new URL(url), STRICT))).toContain(kind);
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
  ])('refuses %s', (url, reason) => {
    expect(() => checkJwksUrl(url, STRICT)).toThrow(reason);
  });

  it('refuses http to a host that is not loopback even when http to loopback is allowed', async () => {
    expect(await refusal(fetchJwks('http://8.8.8.8/jwks', LOOPBACK_HTTP))).toContain('only to a loopback address');
  });
});

describe('fetching', () => {
  it('fetches a JWKS over http from loopback when configured', async () => {
    expect(await fetchJwks(`${base}/jwks`, LOOPBACK_HTTP)).toEqual(JWKS);
  });

  it('refuses the same endpoint without the configuration', async () => {
    expect(await refusal(fetchJwks(`${base}/jwks`, STRICT))).toContain('https');
  });

  it('does not follow a redirect', async () => {
    expect(await refusal(fetchJwks(`${base}/redirect`, LOOPBACK_HTTP))).toContain('redirect');
  });

  it('refuses another status', async () => {
    expect(await refusal(fetchJwks(`${base}/missing`, LOOPBACK_HTTP))).toContain('HTTP 404');
  });

  it('stops reading past the size cap', async () => {
    expect(await refusal(fetchJwks(`${base}/huge`, LOOPBACK_HTTP, { timeoutMs: 5_000, maxBytes: 1024 * 1024 }))).toContain('larger than');
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
});
