// Which redirect URIs the public client `overlay` may name (behaviour.md §6): loopback callbacks on any
// port by default, plus the patterns configured on the listener's edge-oidc API. A pattern is an
// absolute http(s) URL whose port may be `*`; a pattern without a path (or with just `/`) stands for
// any path on that host and port, one with a path must be met exactly (path and query).
import { canonicalHost } from '../config/address.js';

/** Always allowed: loopback callbacks on any port and path. */
export const DEFAULT_REDIRECT_PATTERNS: readonly string[] = ['http://127.0.0.1:*', 'http://localhost:*'];

export const MAX_REDIRECT_URI_LENGTH = 2048;

interface Pattern {
  protocol: string;
  host: string;
  /** null: any port; '': the scheme's default port (URL leaves it out, on both sides). */
  port: string | null;
  /** null: any path and query; else the path and query a URI must have, exactly. */
  exact: string | null;
}

/** A pattern, or undefined when it is not an absolute http(s) URL (such a pattern allows nothing). */
function parsePattern(text: string): Pattern | undefined {
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*?)(:\*)?([/?].*)?$/.exec(text);
  if (!m) return undefined;
  const origin = m[1]!;
  const wildcard = m[2];
  const rest = m[3];
  let url: URL;
  try {
    url = new URL(`${origin}${rest ?? ''}`);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  // A bare "/" is no path: a trailing slash means any path, as none does.
  const anyPath = rest === undefined || rest === '/';
  return {
    protocol: url.protocol,
    host: canonicalHost(url.hostname),
    port: wildcard ? null : url.port,
    exact: anyPath ? null : url.pathname + url.search,
  };
}

function parsePatterns(texts: readonly string[]): Pattern[] {
  return texts.map(parsePattern).filter((p): p is Pattern => p !== undefined);
}

export class RedirectPolicy {
  private readonly configured: Pattern[];
  private extraSource: readonly string[] | undefined;
  /** The configured patterns and those of `extraSource`; set by the first check. */
  private current!: Pattern[];

  /**
   * `configured`: the listener's patterns. `extra`: patterns that may change while running (the
   * controller settings), asked for on every check and parsed again only when they change.
   */
  constructor(
    configured: readonly string[],
    private readonly extra: () => readonly string[],
  ) {
    this.configured = parsePatterns([...DEFAULT_REDIRECT_PATTERNS, ...configured]);
  }

  private all(): Pattern[] {
    const source = this.extra();
    if (source !== this.extraSource) {
      this.extraSource = source;
      this.current = [...this.configured, ...parsePatterns(source)];
    }
    return this.current;
  }

  /**
   * Whether `uri` may receive the answer of an authorization (or a post-logout redirect). Only
   * http(s) patterns are kept, so a URI of any other scheme matches none.
   */
  allows(uri: string): boolean {
    if (typeof uri !== 'string' || uri.length > MAX_REDIRECT_URI_LENGTH) return false;
    let url: URL;
    try {
      url = new URL(uri);
    } catch {
      return false;
    }
    if (url.username !== '' || url.password !== '' || uri.includes('#')) return false;
    const host = canonicalHost(url.hostname);
    const pathAndQuery = url.pathname + url.search;
    return this.all().some(
      (p) => p.protocol === url.protocol && p.host === host && (p.port === null || p.port === url.port) && (p.exact === null || p.exact === pathAndQuery),
    );
  }
}

/** `uri` with the parameters added to its query (existing ones kept). */
export function withQuery(uri: string, params: Record<string, string | undefined>): string {
  const url = new URL(uri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.append(k, v);
  return url.href;
}
