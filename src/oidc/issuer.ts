// The issuer is `https://<host:port>/oidc` where host:port is the address the client used (its Host
// header), so a client verifying tokens against the address it talks to succeeds (behaviour.md §6).
// A Host this controller does not answer to — a name outside its server certificate or a port it
// does not listen on — is not trusted: the bind point's advertised address is used instead. Tokens
// are accepted when their issuer is one of those addresses.
import { isIP } from 'node:net';
import { parseHostPort } from '../config/address.js';
import { BoundedMap } from '../kernel/bounded-map.js';
import type { Cache } from '../kernel/caches.js';
import { ipToBytes, serverNames } from '../pki/hosts.js';

export const OIDC_PATH = '/oidc';

/** Issuers judged, kept at most: the answers depend on the configuration alone. */
const ACCEPTED_SIZE = 1000;

export class Issuers implements Cache {
  readonly name = 'oidc-issuers';
  private readonly dns: Set<string>;
  private readonly ips: Set<string>;
  private readonly ports: Set<number>;
  private readonly accepted = new BoundedMap<string, boolean>({ maxEntries: ACCEPTED_SIZE });

  /**
   * @param hosts the advertised hosts of every bind point (the server certificate's names)
   * @param ports every port a bind point listens or is advertised on
   */
  constructor(hosts: readonly string[], ports: readonly number[]) {
    const names = serverNames(hosts);
    this.dns = new Set(names.dns);
    this.ips = new Set(names.ips.map((ip) => ipToBytes(ip).toString('hex')));
    this.ports = new Set(ports);
  }

  /** The issuer of a request that arrived with `hostHeader` at a bind point advertised as `fallback`. */
  forHost(hostHeader: string | undefined, fallback: string): string {
    const address = hostHeader !== undefined ? this.trustedAddress(hostHeader) : undefined;
    return `https://${address ?? fallback}${OIDC_PATH}`;
  }

  /** Whether a token issuer names this controller. */
  accepts(iss: unknown): boolean {
    if (typeof iss !== 'string') return false;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: the bound only spares judging long text; an address that long is refused below anyway
    if (iss.length > 400) return false;
    let ok = this.accepted.get(iss);
    // What is kept only spares judging again: judged anew, the answer is the same.
    // Stryker disable next-line ConditionalExpression: judged anew, the answer is the same
    if (ok === undefined) {
      const m = /^https:\/\/([^/?#@]+)\/oidc$/.exec(iss);
      ok = m !== null && this.trustedAddress(m[1]!) === m[1];
      // Stryker disable next-line all: keeping the answer only spares judging again
      this.accepted.set(iss, ok);
    }
    return ok;
  }

  /** No change of the store moves what is kept here. */
  onChange(): void {}

  // What is kept depends on the configuration alone, so keeping it through a reset changes no answer.
  // Stryker disable next-line all: see above
  reset(): void {
    // Stryker disable next-line all: see above
    this.accepted.clear();
  }

  /** The API audience of an issuer: the controller origin its tokens are for. */
  static audience(issuer: string): string {
    return issuer.slice(0, -OIDC_PATH.length);
  }

  /** host[:port] as written, when it names this controller; undefined otherwise. */
  private trustedAddress(text: string): string | undefined {
    // Neither an empty nor so long a text names a host of the certificate, so the parse below refuses
    // them too; the bound spares the work.
    // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator: see above
    if (text.length === 0 || text.length > 300) return undefined;
    let host: string;
    let port: number;
    // Port 0 is refused either way (no bind point listens on it), and a host with a trailing dot
    // never parses, so the options and the dot below change no answer; nor would a failed parse that
    // went on (no port is known then).
    try {
      if (/:\d+$/.test(text)) {
        // Stryker disable next-line ObjectLiteral,BooleanLiteral: see above
        ({ host, port } = parseHostPort(text, { allowPortZero: false }));
      } else {
        // Stryker disable next-line ObjectLiteral,BooleanLiteral: see above
        ({ host } = parseHostPort(`${text}:443`, { allowPortZero: false }));
        port = 443;
      }
    } catch {
      // Stryker: an empty catch would go on with no port known, refused below all the same.
      return undefined;
    }
    if (!this.ports.has(port)) return undefined;
    if (isIP(host) !== 0) return this.ips.has(ipToBytes(host).toString('hex')) ? text : undefined;
    // Stryker disable next-line StringLiteral: see above
    return this.dns.has(host.toLowerCase().replace(/\.$/, '')) ? text : undefined;
  }
}
