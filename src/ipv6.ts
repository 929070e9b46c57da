// IPv6 addresses as numbers, for the checks that look inside them (connection caps per /64, the
// IPv4 address a JWKS target reaches through a translator).

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
