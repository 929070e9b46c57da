// Checks OIDC access tokens on every Edge API request without touching the store: a token's
// signature, issuer, audience and type are checked once and the result is remembered (by the exact
// token text, so nothing else can match it); every request then checks the times, the revocations,
// the API session and the identity, each from memory.
import type { Clock } from '../clock.js';
import type { ApiSession, ApiSessions } from '../auth/api-sessions.js';
import type { IdentityDirectory, IdentityState } from '../auth/identity-directory.js';
import type { Revocations } from '../auth/revocations.js';
import { BoundedMap } from '../kernel/bounded-map.js';
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import { parseCompact, verifySignature } from './jws.js';
import type { SigningKeys } from './keys.js';
import { Issuers } from './issuer.js';
import { CLIENT_ID, type AccessClaims } from './tokens.js';

/** Clock skew allowed on `exp` and `nbf`, seconds. */
export const CLOCK_SKEW_S = 5;
/** Checked tokens remembered at most; the oldest go first. */
export const VERIFIED_CACHE_SIZE = 20_000;
/** Ids of API sessions known not to exist, remembered at most. */
const DEAD_SESSIONS_SIZE = 20_000;

export class BearerError extends Error {
  constructor(
    readonly kind: 'invalid' | 'expired',
    message: string,
  ) {
    super(message);
    this.name = 'BearerError';
  }
}

export interface BearerPrincipal {
  identity: IdentityState;
  session: ApiSession;
  claims: AccessClaims;
  /** ms */
  expiresAt: number;
}

export class BearerVerifier implements Cache {
  readonly name = 'bearer-tokens';
  private readonly verified = new BoundedMap<string, AccessClaims>({ maxEntries: VERIFIED_CACHE_SIZE });
  /** API session ids the store no longer has: UUIDs are never reused, so this is never wrong. */
  private readonly deadSessions = new BoundedMap<string, true>({ maxEntries: DEAD_SESSIONS_SIZE });

  constructor(
    private readonly keys: SigningKeys,
    private readonly issuers: Issuers,
    private readonly clock: Clock,
    private readonly sessions: ApiSessions,
    private readonly identities: IdentityDirectory,
    private readonly revocations: Pick<Revocations, 'isRevoked'>,
  ) {
    // A key leaving the set takes the tokens it signed with it.
    keys.onChange(() => this.verified.clear());
  }

  /** An API session was deleted: its tokens fail from the next request on. */
  sessionDeleted(id: string): void {
    // Stryker: only `has` is asked of this map, so the value stored is never read.
    this.deadSessions.set(id, true);
  }

  onChange(c: Change): void {
    if (c.collection === 'api-sessions' && c.kind === 'delete') this.sessionDeleted(c.id);
  }

  reset(): void {
    this.verified.clear();
    this.deadSessions.clear();
  }

  /**
   * The claims of a token this provider signed with a current or previous key, for this controller
   * (issuer, audience) and of the access type; times are not checked here.
   */
  claims(token: string): AccessClaims {
    const cached = this.verified.get(token);
    if (cached) return cached;
    const claims = this.check(token);
    this.verified.set(token, claims);
    return claims;
  }

  /** The caller a bearer token stands for; throws BearerError (→ 401 with the bearer challenge). */
  async verify(token: string): Promise<BearerPrincipal> {
    const claims = this.claims(token);
    const now = this.clock() / 1000;
    if (claims.nbf > now + CLOCK_SKEW_S) throw new BearerError('invalid', 'the token is not valid yet');
    if (claims.exp <= now - CLOCK_SKEW_S) throw new BearerError('expired', 'the token has expired');
    if (this.revocations.isRevoked('JTI', claims.jti)) throw new BearerError('invalid', 'the token has been revoked');
    const session = await this.session(claims.ov_asid);
    if (!session || session.identityId !== claims.sub) throw new BearerError('invalid', 'the API session of the token has ended');
    if (this.clock() >= this.sessions.expiresAt(session)) {
      // A session that lapsed with its token (inside the clock skew): the token expired.
      if (claims.exp <= now) throw new BearerError('expired', 'the token has expired');
      throw new BearerError('invalid', 'the API session of the token has ended');
    }
    // By the login the token is of, in milliseconds: its `iat` has whole seconds, and a login made
    // in the second after an IDENTITY revocation is later than it (behaviour.md §6).
    if (this.revocations.isRevoked('API_SESSION', session.id, session.createdAt) || this.revocations.isRevoked('IDENTITY', claims.sub, session.createdAt)) {
      throw new BearerError('invalid', 'the token has been revoked');
    }
    const identity = await this.identities.get(claims.sub);
    if (!identity) throw new BearerError('invalid', 'the identity of the token no longer exists');
    if (this.identities.isDisabled(identity)) throw new BearerError('invalid', 'the identity is disabled');
    return { identity, session, claims, expiresAt: claims.exp * 1000 };
  }

  private async session(id: string): Promise<ApiSession | undefined> {
    const cached = this.sessions.cached(id);
    if (cached) return cached;
    if (this.deadSessions.has(id)) return undefined;
    const loaded = await this.sessions.load(id);
    if (!loaded) this.sessionDeleted(id);
    return loaded;
  }

  private check(token: string): AccessClaims {
    const parsed = parseCompact(token);
    if (!parsed) throw new BearerError('invalid', 'the token is not a JWT');
    const key = this.keys.get(parsed.header.kid);
    if (!key || key.alg !== parsed.header.alg) throw new BearerError('invalid', 'the token is not signed by a key of this controller');
    if (parsed.header.typ !== undefined && parsed.header.typ !== 'at+jwt') throw new BearerError('invalid', 'the token is not an access token');
    if (!verifySignature(parsed, key.publicKey)) throw new BearerError('invalid', 'the token signature is not valid');
    const c = parsed.payload;
    if (c.ov_t !== 'a') throw new BearerError('invalid', 'the token is not an access token');
    if (!this.issuers.accepts(c.iss)) throw new BearerError('invalid', 'the token issuer is not this controller');
    // Stryker: one value cannot be both the client and an origin, so a single audience is refused with
    // `[]` as well.
    const aud = Array.isArray(c.aud) ? c.aud : [c.aud];
    if (!aud.includes(CLIENT_ID) || !aud.includes(Issuers.audience(c.iss as string))) {
      throw new BearerError('invalid', 'the token audience is not this controller');
    }
    for (const name of ['exp', 'iat', 'nbf'] as const) {
      // Stryker: Number.isFinite is false for anything but a finite number; the typeof test narrows the type.
      if (typeof c[name] !== 'number' || !Number.isFinite(c[name])) throw new BearerError('invalid', `the token has no valid ${name}`);
    }
    for (const name of ['sub', 'jti', 'ov_asid'] as const) {
      if (typeof c[name] !== 'string' || c[name] === '') throw new BearerError('invalid', `the token has no ${name}`);
    }
    return c as unknown as AccessClaims;
  }
}
