// OIDC authorization requests and their state machine (controller-interface.md, "OIDC authorization
// request"). A request is Started by GET /oidc/authorization, moves on primary logins and secondary
// factors as the table below says, and ends Complete, when its authorization code is made. The
// secondary factors are plug-ins: each says when it is required, how it is asked for (an
// authentication query) and which response headers go with it; TOTP and external-JWT steps satisfy
// theirs through `satisfy`. Pending requests are held in a PendingStore (pending.ts): anyone may
// start one, so what they may hold is bounded per client address, in total and in time.
import { ApiError } from '../errors.js';
import type { Clock } from '../clock.js';
import type { AuthPolicyRules } from '../resources/auth-policies.js';
import { newSecret } from '../auth/tokens.js';
import { addressKey } from '../ipv6.js';
import { addOrRefuse, PENDING_LIMITS, PendingStore, type PendingLimits, type RefusalAnswers } from './pending.js';

export type RequestState = 'started' | 'partial' | 'complete';

/** What moves a request. */
export type FlowEvent = 'primary-ok' | 'primary-failed' | 'factor-ok' | 'factor-failed';

export interface Transition {
  from: RequestState;
  on: FlowEvent;
  /** Whether any secondary factor is still outstanding after the event; undefined: either. */
  outstanding?: boolean;
  to: RequestState;
}

/**
 * The state machine, one row per transition. Primary logins may be retried while partially
 * authenticated (a new primary login starts the factors over); nothing moves a Complete request:
 * its code is already made.
 */
export const TRANSITIONS: readonly Transition[] = [
  { from: 'started', on: 'primary-ok', outstanding: false, to: 'complete' },
  { from: 'started', on: 'primary-ok', outstanding: true, to: 'partial' },
  { from: 'started', on: 'primary-failed', to: 'started' },
  { from: 'partial', on: 'primary-ok', outstanding: false, to: 'complete' },
  { from: 'partial', on: 'primary-ok', outstanding: true, to: 'partial' },
  { from: 'partial', on: 'primary-failed', to: 'partial' },
  { from: 'partial', on: 'factor-ok', outstanding: false, to: 'complete' },
  { from: 'partial', on: 'factor-ok', outstanding: true, to: 'partial' },
  { from: 'partial', on: 'factor-failed', to: 'partial' },
];

/** The next state, or undefined when the event is not possible in `from`. */
export function nextState(from: RequestState, on: FlowEvent, outstanding: boolean): RequestState | undefined {
  return TRANSITIONS.find((t) => t.from === from && t.on === on && (t.outstanding === undefined || t.outstanding === outstanding))?.to;
}

/** An Authentication Query (controller-interface.md, API session). */
export interface AuthQuery {
  typeId: string;
  provider: string;
  format?: string;
  httpMethod?: string;
  httpUrl?: string;
  minLength?: number;
  maxLength?: number;
  isTotpEnrolled?: boolean;
  id?: string;
  clientId?: string;
  scopes?: string[];
}

export interface FactorContext {
  rules: AuthPolicyRules;
  identityId: string;
  /** Whether the identity has a confirmed TOTP enrollment (found by the primary login, or made since). */
  isTotpEnrolled: boolean;
  /** The EXT-JWT query of the required signer: where the client gets its token (read at the login). */
  extJwtQuery?: AuthQuery;
}

/** A secondary factor a policy (or the identity) can require after the primary login. */
export interface SecondaryFactor {
  id: string;
  required(ctx: FactorContext): boolean;
  query(ctx: FactorContext): AuthQuery;
  /** Headers of a login answer while this factor is outstanding. */
  headers?: Record<string, string>;
}

/**
 * TOTP, required by `secondary.requireTotp` and by a confirmed enrollment of the identity (which asks
 * for a code at every login, whatever the policy says); satisfied by POST /oidc/login/totp, or by
 * confirming an enrollment made while the request waits.
 */
export const TOTP_FACTOR: SecondaryFactor = {
  id: 'totp',
  required: ({ rules, isTotpEnrolled }) => rules.secondary.requireTotp || isTotpEnrolled,
  query: ({ isTotpEnrolled }) => ({
    typeId: 'TOTP',
    provider: 'overlay',
    format: 'numeric',
    httpMethod: 'POST',
    httpUrl: './oidc/login/totp',
    minLength: 6,
    maxLength: 6,
    isTotpEnrolled,
  }),
  headers: { 'totp-required': 'true' },
};

/**
 * A JWT of the signer `secondary.requireExtJwtSigner` names, sent with a login request (as the
 * Authorization bearer of a primary login, or of POST /oidc/login/ext-jwt while it is outstanding).
 * The query says where the client gets it: the signer's externalAuthUrl, clientId and scopes.
 */
export const EXT_JWT_FACTOR: SecondaryFactor = {
  id: 'ext-jwt',
  required: ({ rules }) => typeof rules.secondary.requireExtJwtSigner === 'string' && rules.secondary.requireExtJwtSigner !== '',
  query: ({ rules, extJwtQuery }) =>
    extJwtQuery ?? {
      typeId: 'EXT-JWT',
      provider: 'url',
      // Stryker: asked for only when required, that is with a signer named; the default is for the type checker.
      id: rules.secondary.requireExtJwtSigner ?? '',
    },
};

export const SECONDARY_FACTORS: readonly SecondaryFactor[] = [TOTP_FACTOR, EXT_JWT_FACTOR];

/** What a client asked for at GET /oidc/authorization. */
export interface AuthorizationParams {
  clientId: string;
  redirectUri: string;
  scopes: string[];
  codeChallenge: string;
  state?: string;
  nonce?: string;
  configTypes: string[];
}

/** Who the primary login found. */
export interface PrimaryOutcome {
  identityId: string;
  /** Null for a certificate login found by its CA's external id claim (see auth/login.ts). */
  authenticatorId: string | null;
  method: 'password' | 'cert' | 'ext-jwt';
  rules: AuthPolicyRules;
  isCertExtendable: boolean;
  ipAddress: string;
  /** Whether the identity has a confirmed TOTP enrollment; what it was at the login, or made since. */
  isTotpEnrolled: boolean;
  /** A certificate login whose network certificate came without its chain (see auth/cert-trust.ts). */
  improperClientCertChain: boolean;
  /** The EXT-JWT query of the signer the policy requires as a second factor, when it requires one. */
  extJwtQuery?: AuthQuery;
}

export interface AuthRequest extends AuthorizationParams {
  id: string;
  /** Where the request is in the state machine (`state` is the client's OAuth parameter). */
  status: RequestState;
  createdAt: number;
  expiresAt: number;
  primary?: PrimaryOutcome;
  /** Authentication methods satisfied so far (the tokens' `amr`). */
  amr: string[];
  authTime?: number;
  /** When a TOTP code was given (ms): what the API session's MFA posture checks count from. */
  totpAt?: number;
  /** Ids of the secondary factors still outstanding. */
  outstanding: string[];
}

/** A list parameter: repeated, or comma-separated. */
export function splitList(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  const parts = (Array.isArray(value) ? value : [value]).flatMap((v) => v.split(','));
  return [...new Set(parts.map((v) => v.trim()).filter((v) => v !== '' && v.length <= 100))].slice(0, 100);
}

/** Authorization requests live 10 minutes. */
export const REQUEST_LIFETIME_MS = 10 * 60_000;

function contextOf(primary: PrimaryOutcome): FactorContext {
  return {
    rules: primary.rules,
    identityId: primary.identityId,
    isTotpEnrolled: primary.isTotpEnrolled,
    ...(primary.extJwtQuery ? { extJwtQuery: primary.extJwtQuery } : {}),
  };
}

const AMR: Record<PrimaryOutcome['method'], string> = { password: 'password', cert: 'cert', 'ext-jwt': 'ext-jwt' };

/**
 * What a pending request is taken to cost in memory: an allowance for its objects and map entries
 * (measured at about 1 KB with short parameters), plus two bytes per character and a header for
 * every string it keeps.
 */
const REQUEST_BYTES = 640;

/** How a pending request that cannot be kept is refused. */
const REQUEST_REFUSALS: RefusalAnswers = {
  address: { description: 'too many authorization requests are pending from this address; finish or abandon them, or try again later', status: 429 },
  total: { description: 'too many authorization requests are pending; try again later', status: 429 },
};
const STRING_BYTES = 24;

export function sizeOf(r: AuthRequest): number {
  const strings = [
    r.id,
    r.clientId,
    r.redirectUri,
    r.codeChallenge,
    r.state,
    r.nonce,
    ...r.scopes,
    ...r.configTypes,
    ...r.amr,
    ...r.outstanding,
    ...(r.primary ? [r.primary.identityId, r.primary.authenticatorId ?? undefined, r.primary.ipAddress] : []),
  ];
  let bytes = REQUEST_BYTES;
  for (const s of strings) if (s !== undefined) bytes += STRING_BYTES + 2 * s.length;
  return bytes;
}

export interface AuthRequestsOptions {
  factors?: readonly SecondaryFactor[];
  limits?: Readonly<PendingLimits>;
}

export class AuthRequests {
  private readonly pending: PendingStore<AuthRequest>;
  private readonly factors: readonly SecondaryFactor[];

  constructor(
    private readonly clock: Clock,
    options: AuthRequestsOptions = {},
  ) {
    this.factors = options.factors ?? SECONDARY_FACTORS;
    this.pending = new PendingStore(clock, options.limits ?? PENDING_LIMITS);
  }

  /**
   * Starts a request for a client at `clientAddress` (the peer address). Beyond the bounds of the
   * pending store: 429 temporarily_unavailable with Retry-After.
   */
  start(params: AuthorizationParams, clientAddress: string): AuthRequest {
    const now = this.clock();
    const request: AuthRequest = {
      ...params,
      id: newSecret(),
      status: 'started',
      createdAt: now,
      expiresAt: now + REQUEST_LIFETIME_MS,
      amr: [],
      outstanding: [],
    };
    const address = addressKey(clientAddress);
    addOrRefuse(this.pending, REQUEST_REFUSALS, request.id, address, request, sizeOf(request), request.expiresAt);
    return request;
  }

  /** The live request with this id; 404 when unknown or expired. */
  get(id: unknown): AuthRequest {
    // Stryker: a key of another type would find nothing among the string ids either; the test keeps it clear.
    const request = typeof id === 'string' ? this.pending.get(id) : undefined;
    if (!request) throw new ApiError('NOT_FOUND', 'the authorization request is unknown or has expired');
    return request;
  }

  /** Config types a login step adds to those of the authorization (the request grows, and is charged for it). */
  addConfigTypes(request: AuthRequest, configTypes: readonly string[]): void {
    if (configTypes.length === 0) return;
    request.configTypes = splitList([...request.configTypes, ...configTypes]);
    this.charge(request);
  }

  /** Records the outcome of a primary login and moves the request. */
  primarySucceeded(request: AuthRequest, outcome: PrimaryOutcome): AuthRequest {
    const ctx = contextOf(outcome);
    const outstanding = this.factors.filter((f) => f.required(ctx)).map((f) => f.id);
    const to = this.move(request, 'primary-ok', outstanding.length > 0);
    request.primary = outcome;
    request.amr = [AMR[outcome.method]];
    request.authTime = this.clock();
    request.outstanding = outstanding;
    request.status = to;
    this.charge(request);
    return request;
  }

  primaryFailed(request: AuthRequest): void {
    // Stryker: no failure row depends on what is outstanding (TRANSITIONS), so the flag passed is not looked at.
    request.status = this.move(request, 'primary-failed', request.outstanding.length > 0);
  }

  /**
   * A secondary factor was met (`amr` gains its method, e.g. `totp` or `ejs:<signerId>`) by the
   * identity of `checkedFor`, the primary outcome it was checked against. A primary login may be
   * given again while the check awaits, and then the request waits for the factor of another
   * identity: that one is refused.
   */
  satisfy(request: AuthRequest, factorId: string, amr: string, checkedFor: PrimaryOutcome | undefined): AuthRequest {
    if (request.primary !== checkedFor) {
      throw new ApiError('COULD_NOT_VALIDATE', 'the authorization request was logged in again while the factor was checked; give the factor again');
    }
    if (!request.outstanding.includes(factorId)) {
      throw new ApiError('COULD_NOT_VALIDATE', `the factor ${factorId} is not outstanding for this request`);
    }
    const outstanding = request.outstanding.filter((f) => f !== factorId);
    request.status = this.move(request, 'factor-ok', outstanding.length > 0);
    request.outstanding = outstanding;
    if (!request.amr.includes(amr)) request.amr.push(amr);
    if (amr === 'totp') request.totpAt = this.clock();
    this.charge(request);
    return request;
  }

  factorFailed(request: AuthRequest): void {
    // Stryker: as in primaryFailed, the flag is not looked at.
    request.status = this.move(request, 'factor-failed', request.outstanding.length > 0);
  }

  /** The authentication queries of the outstanding factors. */
  queries(request: AuthRequest): AuthQuery[] {
    if (!request.primary) return [];
    const ctx = contextOf(request.primary);
    return this.factors.filter((f) => request.outstanding.includes(f.id)).map((f) => f.query(ctx));
  }

  /** Response headers of a login answer while factors are outstanding. */
  headers(request: AuthRequest): Record<string, string> {
    return Object.assign({}, ...this.factors.filter((f) => request.outstanding.includes(f.id)).map((f) => f.headers ?? {}));
  }

  /** Ends a request (its code is made, or it is abandoned). */
  end(request: AuthRequest): void {
    this.pending.delete(request.id);
  }

  /** Requests pending (expired ones not yet dropped included). */
  get size(): number {
    return this.pending.size;
  }

  /** Estimated bytes of the pending requests. */
  get bytes(): number {
    return this.pending.bytes;
  }

  /** Requests pending for a client address. */
  heldBy(clientAddress: string): number {
    return this.pending.heldBy(addressKey(clientAddress));
  }

  /** Drops expired requests. */
  sweep(): void {
    this.pending.sweep();
  }

  private charge(request: AuthRequest): void {
    this.pending.resize(request.id, sizeOf(request));
  }

  private move(request: AuthRequest, on: FlowEvent, outstanding: boolean): RequestState {
    const to = nextState(request.status, on, outstanding);
    if (!to) throw new ApiError('COULD_NOT_VALIDATE', `the authorization request is ${request.status}; it cannot take this step`);
    return to;
  }
}
