// The names a server certificate must cover: advertise hosts plus the loopback names, normalised and
// deduplicated, split into DNS names and IP addresses.

import { isIP } from 'node:net';

/** Always in the server certificate, whatever the advertise hosts are. */
export const LOOPBACK_HOSTS: readonly string[] = ['localhost', '127.0.0.1', '::1'];

export interface ServerNames {
  /** Lowercase DNS names without trailing dot. */
  dns: string[];
  /** IP addresses as given (normalised text), one per distinct address. */
  ips: string[];
}

const LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** Bytes of an IPv4 (4) or IPv6 (16) address; throws on anything else. */
export function ipToBytes(ip: string): Buffer {
  const family = isIP(ip);
  if (family === 4) return Buffer.from(ip.split('.').map((p) => Number.parseInt(p, 10)));
  if (family !== 6 || ip.includes('%')) throw new Error(`not an IP address: ${ip}`);

  let text = ip;
  const tail: number[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    tail.push(...v4[1].split('.').map((p) => Number.parseInt(p, 10)));
    text = text.slice(0, -v4[1].length) + '0:0';
  }
  const [head = '', rest] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = rest ? rest.split(':') : [];
  const groups = rest === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(Number.parseInt(g, 16), i * 2));
  if (tail.length === 4) out.set(tail, 12);
  return out;
}

/** An IPv6 address as eight uncompressed hex groups, e.g. `0:0:0:0:0:0:0:1`. */
export function ipv6Groups(bytes: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  return groups.join(':');
}

/**
 * Normalises the hosts a server certificate must cover: brackets around IPv6 literals and a trailing
 * dot are dropped, names are lowercased, IPs are compared by value, the loopback names are added.
 * Throws on a host that is neither a valid DNS name nor an IP address (ports, zones, URLs, wildcards).
 */
export function serverNames(hosts: readonly string[]): ServerNames {
  const dns = new Set<string>();
  const ips = new Map<string, string>();
  for (const raw of [...hosts, ...LOOPBACK_HOSTS]) {
    let host = raw.trim();
    if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
    if (host.includes('%')) {
      throw new Error(`invalid advertise host ${JSON.stringify(raw)}: IPv6 zone ids cannot appear in a certificate`);
    }
    if (isIP(host) !== 0) {
      const bytes = ipToBytes(host);
      const key = bytes.toString('hex');
      if (!ips.has(key)) ips.set(key, host.toLowerCase());
      continue;
    }
    const name = host.toLowerCase().replace(/\.$/, '');
    if (name.length === 0 || name.length > 253 || !name.split('.').every((label) => LABEL.test(label))) {
      throw new Error(`invalid advertise host ${JSON.stringify(raw)}: expected a DNS name or an IP address`);
    }
    if (/^[0-9.]+$/.test(name)) {
      throw new Error(`invalid advertise host ${JSON.stringify(raw)}: not a valid IPv4 address`);
    }
    dns.add(name);
  }
  return { dns: [...dns], ips: [...ips.values()] };
}
