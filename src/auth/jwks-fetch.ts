// The one outbound fetch of the controller: an external JWT signer's JWKS. An admin names the URL, so
// it must not become a way into the controller's own network (SSRF): https only (http only to a
// loopback address, and only when configured), the host resolved here and every address it has
// checked — loopback, private and link-local addresses refused unless configured, reserved ones
// always — and the connection made to the address checked, so a second lookup cannot answer another.
// A fetch is bounded: 5 s for all of it, 1 MiB of body, no redirects followed.
import { lookup } from 'node:dns/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { ipv6Groups } from '../ipv6.js';

export interface JwksFetchPolicy {
  /** http:// is accepted when every address of the host is a loopback address. */
  allowHttpLoopback: boolean;
  /** Loopback, private (RFC 1918, ULA, CGNAT) and link-local targets are accepted. */
  allowPrivateAddresses: boolean;
}

export const JWKS_FETCH_TIMEOUT_MS = 5_000;
export const JWKS_MAX_BYTES = 1024 * 1024;

/** A JWKS that could not be fetched, with the reason (said to operators, never a secret). */
export class JwksFetchError extends Error {
  override readonly name = 'JwksFetchError';
}

type AddressClass = 'public' | 'loopback' | 'private' | 'link-local' | 'reserved';

function blockList(entries: [string, number, 'ipv4' | 'ipv6'][]): BlockList {
  const list = new BlockList();
  for (const [net, prefix, family] of entries) list.addSubnet(net, prefix, family);
  return list;
}

const LOOPBACK = blockList([
  ['127.0.0.0', 8, 'ipv4'],
  ['::1', 128, 'ipv6'],
]);
const LINK_LOCAL = blockList([
  ['169.254.0.0', 16, 'ipv4'],
  ['fe80::', 10, 'ipv6'],
]);
const PRIVATE = blockList([
  ['10.0.0.0', 8, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['fc00::', 7, 'ipv6'],
]);
/** Never a host to fetch from: this network, multicast, reserved and broadcast, unspecified, documentation. */
const RESERVED = blockList([
  ['0.0.0.0', 8, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  ['192.0.2.0', 24, 'ipv4'],
  ['198.51.100.0', 24, 'ipv4'],
  ['203.0.113.0', 24, 'ipv4'],
  ['::', 128, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
  ['2001:db8::', 32, 'ipv6'],
  // Teredo, whose client address is hidden in the address; NAT64 for local use (RFC 8215).
  ['2001::', 32, 'ipv6'],
  ['64:ff9b:1::', 48, 'ipv6'],
]);

/**
 * The IPv4 address an IPv6 address reaches through a translator or tunnel: NAT64 (64:ff9b::/96),
 * IPv4-compatible (::/96) and IPv4-translated (::ffff:0:0/96) forms, 6to4 (2002::/16). A NAT64 gateway
 * makes 64:ff9b::10.0.0.1 reach 10.0.0.1, so such an address is what its IPv4 address is.
 */
function embeddedIpv4(address: string): string | undefined {
  const w = ipv6Groups(address);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  if (w[0] === 0x64 && w[1] === 0xff9b && zero(2, 6)) return v4(w[6]!, w[7]!);
  if (zero(0, 6) && (w[6] !== 0 || w[7]! > 1)) return v4(w[6]!, w[7]!);
  if (zero(0, 4) && w[4] === 0xffff && w[5] === 0) return v4(w[6]!, w[7]!);
  if (w[0] === 0x2002) return v4(w[1]!, w[2]!);
  return undefined;
}

/**
 * What kind of target an address is. An IPv6 address that carries an IPv4 address to reach counts as
 * that address: IPv4-mapped ones (`::ffff:127.0.0.1`, or `::ffff:7f00:1` as the URL parser writes it)
 * through BlockList, which matches them against the IPv4 rules, and the others through
 * {@link embeddedIpv4}.
 */
export function classifyAddress(address: string): AddressClass {
  // Stryker: BlockList.check reads an IPv6 address as one whatever family it is told (only an IPv4
  // address needs 'ipv4'), so a mutant of the 'ipv6' literal is the same.
  const family = isIP(address) === 4 ? 'ipv4' : 'ipv6';
  const carried = family === 'ipv6' ? embeddedIpv4(address) : undefined;
  if (carried !== undefined) return classifyAddress(carried);
  if (LOOPBACK.check(address, family)) return 'loopback';
  if (LINK_LOCAL.check(address, family)) return 'link-local';
  if (PRIVATE.check(address, family)) return 'private';
  if (RESERVED.check(address, family)) return 'reserved';
  return 'public';
}

/**
 * Checks a JWKS URL as far as it can be without resolving it: a URL, https (or http when http to
 * loopback is allowed), no credentials in it. Answers the parsed URL; throws JwksFetchError.
 */
export function checkJwksUrl(text: string, policy: JwksFetchPolicy): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new JwksFetchError('it is not a URL');
  }
  if (url.protocol === 'http:') {
    if (!policy.allowHttpLoopback) throw new JwksFetchError('it must be an https URL');
  } else if (url.protocol !== 'https:') {
    throw new JwksFetchError('it must be an https URL');
  }
  if (url.username !== '' || url.password !== '') throw new JwksFetchError('it must not carry credentials');
  return url;
}

/** Every address of a host name: the system resolver, or in tests one that answers what they need. */
export type ResolveHost = (host: string) => Promise<{ address: string; family: number }[]>;

// Stryker: verbatim only orders the addresses, each of which is checked.
const systemResolver: ResolveHost = (host) => lookup(host, { all: true, verbatim: true });

/** The addresses of the URL's host that may be fetched from; throws JwksFetchError naming the refusal. */
export async function targetAddresses(url: URL, policy: JwksFetchPolicy, resolve: ResolveHost = systemResolver): Promise<{ address: string; family: number }[]> {
  // Stryker: only an IPv6 host is bracketed, and as a whole, so an unanchored pattern is the same.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: { address: string; family: number }[];
  if (isIP(host) !== 0) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    try {
      addresses = await resolve(host);
    } catch (err) {
      throw new JwksFetchError(`the host ${host} could not be resolved (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  if (addresses.length === 0) throw new JwksFetchError(`the host ${host} has no address`);
  for (const { address } of addresses) {
    const kind = classifyAddress(address);
    if (url.protocol === 'http:' && kind !== 'loopback') {
      throw new JwksFetchError(`http is allowed only to a loopback address, and ${host} is ${address}`);
    }
    if (kind === 'public') continue;
    if (kind === 'reserved') throw new JwksFetchError(`the host ${host} is the reserved address ${address}`);
    const allowed = policy.allowPrivateAddresses || (kind === 'loopback' && policy.allowHttpLoopback);
    if (!allowed) throw new JwksFetchError(`the host ${host} is the ${kind} address ${address}, which is not allowed`);
  }
  return addresses;
}

export interface FetchBounds {
  timeoutMs: number;
  maxBytes: number;
}

/** Fetches and parses a JWKS under the policy; throws JwksFetchError with the reason. */
export async function fetchJwks(
  text: string,
  policy: JwksFetchPolicy,
  bounds: FetchBounds = { timeoutMs: JWKS_FETCH_TIMEOUT_MS, maxBytes: JWKS_MAX_BYTES },
  resolve: ResolveHost = systemResolver,
): Promise<{ keys: Record<string, unknown>[] }> {
  const url = checkJwksUrl(text, policy);
  const deadline = AbortSignal.timeout(bounds.timeoutMs);
  const addresses = await withDeadline(targetAddresses(url, policy, resolve), deadline, bounds.timeoutMs);
  const pinned = addresses[0]!;
  // The connection goes to the address checked above, whatever a lookup now would answer.
  const pinnedLookup: LookupFunction = (_host, options, callback) => {
    // Stryker: a connection with autoSelectFamily (Node's default) asks for all addresses; the other
    // answer is for a caller that does not.
    if (options.all) callback(null, [pinned]);
    else callback(null, pinned.address, pinned.family);
  };
  const body = await new Promise<Buffer>((resolve, reject) => {
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    // Stryker: Node sends GET when the method is empty, so a mutant of 'GET' is the same request.
    const req = send(url, { method: 'GET', lookup: pinnedLookup, headers: { accept: 'application/json' }, agent: false, signal: deadline }, (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400) {
        res.destroy();
        reject(new JwksFetchError(`it answered a redirect (HTTP ${status}), which is not followed`));
        return;
      }
      if (status !== 200) {
        res.destroy();
        reject(new JwksFetchError(`it answered HTTP ${status}`));
        return;
      }
      const declared = Number(res.headers['content-length'] ?? 0);
      if (declared > bounds.maxBytes) {
        res.destroy();
        reject(new JwksFetchError(`its answer is larger than ${bounds.maxBytes} bytes`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > bounds.maxBytes) {
          res.destroy();
          reject(new JwksFetchError(`its answer is larger than ${bounds.maxBytes} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => resolve(Buffer.concat(chunks)));
      res.on('error', (err) => reject(describe(err, bounds.timeoutMs)));
    });
    req.on('error', (err) => reject(describe(err, bounds.timeoutMs)));
    req.end();
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new JwksFetchError('its answer is not JSON');
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || !keys.every((k) => typeof k === 'object' && k !== null && !Array.isArray(k))) {
    throw new JwksFetchError('its answer is not a JWKS (an object with a keys array)');
  }
  return { keys: keys as Record<string, unknown>[] };
}

/** A failed request in words; the deadline's abort reaches the request as an AbortError. */
function describe(err: Error, timeoutMs: number): JwksFetchError {
  if (err.name === 'AbortError') return new JwksFetchError(`it did not answer within ${timeoutMs} ms`);
  return new JwksFetchError(`it could not be reached (${(err as NodeJS.ErrnoException).code ?? err.message})`);
}

function withDeadline<T>(work: Promise<T>, signal: AbortSignal, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new JwksFetchError(`it did not answer within ${timeoutMs} ms`));
    // Stryker: the signal aborts once, and an abort after the work settled rejects a settled promise,
    // which does nothing: `once` and the removals below only let the listener go sooner.
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}
