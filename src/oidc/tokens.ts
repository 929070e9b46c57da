// The provider's JWTs (behaviour.md §6): access tokens (`typ: at+jwt`, `ov_t: "a"`), ID tokens, and
// TOTP tokens (`ov_t: "t"`: proof that a live TOTP code was given at `iat` in an API session, for
// posture responses; never an access token), signed with the current key and carrying its `kid`.
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.js';
import { signCompact } from './jws.js';
import type { SigningKeys } from './keys.js';
import { Issuers } from './issuer.js';

/** The one client of this provider: public, PKCE S256. */
export const CLIENT_ID = 'overlay';

export interface TokenDurations {
  accessTokenDuration: number;
  idTokenDuration: number;
}

/** Who and what a token pair is for. */
export interface TokenSubject {
  identityId: string;
  name: string;
  isAdmin: boolean;
  apiSessionId: string;
  configTypes: string[];
  isCertExtendable: boolean;
  amr: string[];
  /** ms */
  authTime: number;
  scopes: string[];
  nonce?: string;
}

export interface IssuedTokens {
  accessToken: string;
  idToken: string;
  /** seconds */
  expiresIn: number;
  accessExpiresAt: number;
  jti: string;
}

export interface AccessClaims {
  iss: string;
  sub: string;
  aud: string[];
  exp: number;
  iat: number;
  nbf: number;
  jti: string;
  auth_time: number;
  amr: string[];
  scope: string;
  client_id: string;
  ov_asid: string;
  ov_ia: boolean;
  ov_ct: string[];
  ov_t: 'a';
  ov_ice: boolean;
}

/**
 * A TOTP token's claims: who gave a code (sub), in which API session (ov_asid), and when (iat). It
 * lives as long as an access token would: a signed proof without an end would be good forever.
 */
export interface TotpClaims {
  iss: string;
  sub: string;
  aud: string[];
  iat: number;
  exp: number;
  jti: string;
  ov_asid: string;
  ov_t: 't';
}

export class TokenIssuer {
  constructor(
    private readonly keys: SigningKeys,
    private readonly clock: Clock,
    private readonly durations: TokenDurations,
  ) {}

  issue(issuer: string, s: TokenSubject): IssuedTokens {
    const key = this.keys.current;
    const nowMs = this.clock();
    const now = Math.floor(nowMs / 1000);
    const exp = now + Math.floor(this.durations.accessTokenDuration / 1000);
    const jti = randomUUID();
    const authTime = Math.floor(s.authTime / 1000);
    const access: AccessClaims = {
      iss: issuer,
      sub: s.identityId,
      aud: [CLIENT_ID, Issuers.audience(issuer)],
      exp,
      iat: now,
      nbf: now,
      jti,
      auth_time: authTime,
      amr: s.amr,
      scope: s.scopes.join(' '),
      client_id: CLIENT_ID,
      ov_asid: s.apiSessionId,
      ov_ia: s.isAdmin,
      ov_ct: s.configTypes,
      ov_t: 'a',
      ov_ice: s.isCertExtendable,
    };
    const id: Record<string, unknown> = {
      iss: issuer,
      sub: s.identityId,
      aud: CLIENT_ID,
      azp: CLIENT_ID,
      exp: now + Math.floor(this.durations.idTokenDuration / 1000),
      iat: now,
      auth_time: authTime,
      // Stryker: JSON leaves out an undefined nonce as well, so the token is the same either way.
      ...(s.nonce !== undefined ? { nonce: s.nonce } : {}),
      amr: s.amr,
      name: s.name,
      ov_ia: s.isAdmin,
      // The API session this login opened: what end_session revokes for an id_token_hint.
      sid: s.apiSessionId,
    };
    return {
      accessToken: signCompact(key.alg, key.privateKey, key.headers.accessToken, access),
      idToken: signCompact(key.alg, key.privateKey, key.headers.jwt, id),
      expiresIn: exp - now,
      accessExpiresAt: exp * 1000,
      jti,
    };
  }

  /** A TOTP token for the caller of an access token: the same issuer, audience, subject and API session. */
  totpToken(access: Pick<AccessClaims, 'iss' | 'sub' | 'aud' | 'ov_asid'>): { token: string; claims: TotpClaims } {
    const key = this.keys.current;
    const now = Math.floor(this.clock() / 1000);
    const claims: TotpClaims = {
      iss: access.iss,
      sub: access.sub,
      aud: [...access.aud],
      iat: now,
      exp: now + Math.floor(this.durations.accessTokenDuration / 1000),
      jti: randomUUID(),
      ov_asid: access.ov_asid,
      ov_t: 't',
    };
    return { token: signCompact(key.alg, key.privateKey, key.headers.jwt, claims), claims };
  }
}
