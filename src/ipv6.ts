// IPv6 addresses as numbers, for the checks that look inside them (connection caps and the
// failed-login throttle per /64, the IPv4 address a JWKS target reaches through a translator).
import { isIPv4, isIPv6 } from 'node:net';

/**
 * The eight 16-bit groups of a valid IPv6 address (as `isIPv6` says): `::` expanded, a zone after
 * `%` dropped, a trailing dotted quad read as the last two groups.
 */
export function ipv6Groups(address: string): number[] {
  let text = address.split('%')[0]!;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const first = head === '' ? [] : head.split(':');
  const last = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? first : [...first, ...Array<string>(8 - first.length - last.length).fill('0'), ...last];
  return groups.map((g) => parseInt(g, 16));
}

/**
 * What a client address counts as wherever clients are limited by address (connections, failed
 * logins, pending OIDC requests): IPv4 as is (also when IPv4-mapped), IPv6 by its /64, since one
 * subscriber usually holds a whole /64; anything else as given, cut to 64 characters.
 */
export function addressKey(address: string | undefined): string {
  if (address === undefined) return '';
  const plain = address.split('%')[0]!; // no zone index
  if (isIPv4(plain)) return plain;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(plain);
  if (mapped && isIPv4(mapped[1]!)) return mapped[1]!;
  if (!isIPv6(plain)) return address.slice(0, 64);
  return `${ipv6Groups(plain).slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}
