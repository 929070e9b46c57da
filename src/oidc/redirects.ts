// Which redirect URIs the public client `overlay` may name (behaviour.md §6): loopback callbacks on any
// port by default, plus the patterns configured on the listener's edge-oidc API. A pattern is an
// absolute http(s) URL whose port may be `*`; a pattern without a path stands for any path on that
// host and port, one with a path must be met exactly (path and query).
import { canonicalHost } from '../config/address.js';

/** Always allowed: loopback callbacks on any port and path. */
export const DEFAULT_REDIRECT_PATTERNS: readonly string[] = ['http://127.0.0.1:*', 'http://localhost:*'];

export const MAX_REDIRECT_URI_LENGTH = 2048;

interface Pattern {
  protocol: string;
  host: string;
  /** null: any port. */
  port: string | null;
  /** null: any path and query. */
  path: string | null;
  search: string;
}

const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443' };

function portOf(url: URL): string {
  return url.port === '' ? (DEFAULT_PORTS[url.protocol] ?? '') : url.port;
}

function parsePattern(text: string): Pattern | undefined {
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*?)(:\*)?([/?].*)?$/.exec(text);
  if (!m) return undefined;
  const [, origin = '', wildcard, rest] = m;
  let url: URL;
  try {
    url = new URL(`${origin}${rest ?? ''}`);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  const hasPath = rest !== undefined && rest !== '' && rest !== '/';
  return {
    protocol: url.protocol,
    host: canonicalHost(url.hostname),
    port: wildcard ? null : portOf(url),
    path: hasPath ? url.pathname : null,
    search: hasPath ? url.search : '',
  };
}

function parsePatterns(texts: readonly string[]): Pattern[] {
  return texts.map(parsePattern).filter((p): p is Pattern => p !== undefined);
}

export class RedirectPolicy {
  private readonly patterns: Pattern[];
  private extraSource: readonly string[] = [];
  private extraPatterns: Pattern[] = [];

  /**
   * `configured`: the listener's patterns. `extra`: patterns that may change while running (the
   * controller settings), asked for on every check and parsed again only when they change.
   */
  constructor(
    configured: readonly string[] = [],
    private readonly extra: () => readonly string[] = () => [],
  ) {
    this.patterns = parsePatterns([...DEFAULT_REDIRECT_PATTERNS, ...configured]);
  }

  private all(): Pattern[] {
    const source = this.extra();
    if (source !== this.extraSource) {
      this.extraSource = source;
      this.extraPatterns = parsePatterns(source);
    }
    return this.extraPatterns.length === 0 ? this.patterns : [...this.patterns, ...this.extraPatterns];
  }

  /** Whether `uri` may receive the answer of an authorization (or a post-logout redirect). */
  allows(uri: string): boolean {
    if (typeof uri !== 'string' || uri.length === 0 || uri.length > MAX_REDIRECT_URI_LENGTH) return false;
    let url: URL;
    try {
      url = new URL(uri);
    } catch {
      return false;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
    if (url.username !== '' || url.password !== '' || uri.includes('#')) return false;
    const host = canonicalHost(url.hostname);
    const port = portOf(url);
    return this.all().some(
      (p) =>
        p.protocol === url.protocol &&
        p.host === host &&
        (p.port === null || p.port === port) &&
        (p.path === null || (p.path === url.pathname && p.search === url.search)),
    );
  }
}

/** `uri` with the parameters added to its query (existing ones kept). */
export function withQuery(uri: string, params: Record<string, string | undefined>): string {
  const url = new URL(uri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.append(k, v);
  return url.href;
}
