// TOTP in the OIDC flow (controller-interface.md, "OIDC flow", secondary factors): the code that
// satisfies the TOTP factor of a partially authenticated request, the enrollment an identity not yet
// enrolled makes while its request waits (start, confirm, abandon), and the TOTP token a caller with
// an access token asks for after a live code (POST /current-api-session/totp-token). Wrong codes
// count against the authorization request (or the API session) and the identity (auth/mfa.ts).
import { ApiError } from '../errors.js';
import { iso } from '../clock.js';
import type { ApiSession, ApiSessions } from '../auth/api-sessions.js';
import type { IdentityDirectory } from '../auth/identity-directory.js';
import type { Mfa, MfaView } from '../auth/mfa.js';
import { TOTP_FACTOR, type AuthRequest, type AuthRequests, type PrimaryOutcome } from './flow.js';
import type { AccessClaims, TokenIssuer } from './tokens.js';

export interface TotpStepsDeps {
  requests: AuthRequests;
  mfa: Pick<Mfa, 'authenticate' | 'start' | 'verify' | 'cancel'>;
  identities: Pick<IdentityDirectory, 'get'>;
  sessions: Pick<ApiSessions, 'mfaCompleteIn'>;
  tokens: Pick<TokenIssuer, 'totpToken'>;
}

/** An API session's caller as the Edge APIs know it: with the access token's claims when it used one. */
export interface TotpTokenCaller {
  session: ApiSession;
  bearer?: { claims: Pick<AccessClaims, 'iss' | 'sub' | 'aud' | 'ov_asid'> };
}

export class TotpSteps {
  constructor(private readonly deps: TotpStepsDeps) {}

  /**
   * A TOTP or recovery code for the request's TOTP factor. A wrong one leaves the request partially
   * authenticated (it may try again, within the attempt limit).
   */
  async login(request: AuthRequest, code: string): Promise<AuthRequest> {
    const primary = this.waiting(request);
    await this.counted(request, () => this.deps.mfa.authenticate(primary.identityId, code, { authRequestId: request.id }));
    return this.deps.requests.satisfy(this.live(request), TOTP_FACTOR.id, 'totp', primary);
  }

  /** Starts an enrollment for the request's identity: 409 MFA_EXISTS when it has one, confirmed or not. */
  async startEnrollment(request: AuthRequest): Promise<MfaView> {
    const primary = this.waiting(request);
    const identity = await this.deps.identities.get(primary.identityId);
    if (!identity) throw new ApiError('NOT_FOUND', 'the identity of the authorization request no longer exists');
    return this.deps.mfa.start({ id: identity.id, name: identity.name });
  }

  /**
   * Confirms the enrollment with a live TOTP code (a recovery code is not taken): the identity is
   * enrolled from now on, and the code given satisfies the request's TOTP factor.
   */
  async verifyEnrollment(request: AuthRequest, code: string): Promise<AuthRequest> {
    const primary = this.waiting(request);
    await this.counted(request, () => this.deps.mfa.verify(primary.identityId, code, { authRequestId: request.id }));
    return this.deps.requests.satisfy(this.live(request), TOTP_FACTOR.id, 'totp', primary);
  }

  /** Abandons an unconfirmed enrollment; the request keeps waiting for its TOTP factor. */
  async cancelEnrollment(request: AuthRequest): Promise<AuthRequest> {
    const primary = this.waiting(request);
    await this.deps.mfa.cancel(primary.identityId);
    return request;
  }

  /**
   * A TOTP token after a live TOTP code (no recovery code), for a caller with an OIDC access token
   * only; the code is an MFA pass of the API session too, which MFA posture checks count from.
   */
  async token(caller: TotpTokenCaller, code: string): Promise<{ issuedAt: string; token: string }> {
    if (!caller.bearer) {
      throw new ApiError('INVALID_BACKING_TOKEN_TYPE', 'a TOTP token is made for callers with an OIDC access token, not a legacy session token');
    }
    const { claims } = caller.bearer;
    await this.deps.mfa.authenticate(claims.sub, code, { apiSessionId: caller.session.id }, {
      recovery: false,
      alsoWrite: (ctx) => this.deps.sessions.mfaCompleteIn(ctx, caller.session),
    });
    const made = this.deps.tokens.totpToken(claims);
    return { issuedAt: iso(made.claims.iat * 1000), token: made.token };
  }

  /** The primary outcome of a request partially authenticated with TOTP outstanding; else refused. */
  private waiting(request: AuthRequest): PrimaryOutcome {
    if (request.status !== 'partial' || !request.primary) {
      throw new ApiError('COULD_NOT_VALIDATE', `the authorization request is ${request.status}; it cannot take this step`);
    }
    if (!request.outstanding.includes(TOTP_FACTOR.id)) {
      throw new ApiError('COULD_NOT_VALIDATE', 'TOTP is not outstanding for this authorization request');
    }
    return request.primary;
  }

  /** Runs a code check; a wrong code is a failed factor of the request (which stays as it is). */
  private async counted(request: AuthRequest, check: () => Promise<unknown>): Promise<void> {
    try {
      await check();
    } catch (err) {
      if (err instanceof ApiError && err.code === 'MFA_INVALID_TOKEN' && request.status === 'partial') this.deps.requests.factorFailed(request);
      throw err;
    }
  }

  /** The request after a check that awaited: 404 when it expired meanwhile. */
  private live(request: AuthRequest): AuthRequest {
    return this.deps.requests.get(request.id);
  }
}
