// Unit tests of authorization requests with an injected clock: their lifetime, the steps each state
// allows, the secondary factors a policy asks for, what a request is charged for in the pending
// store, and list parameters (the state machine table itself: oidc.test.ts; the store's bounds:
// pending.test.ts).
import { describe, expect, it } from 'vitest';
import { ApiError } from '../errors.js';
import type { AuthPolicyRules } from '../resources/auth-policies.js';
import {
  AuthRequests,
  EXT_JWT_FACTOR,
  nextState,
  REQUEST_LIFETIME_MS,
  splitList,
  TOTP_FACTOR,
  type AuthorizationParams,
  type PrimaryOutcome,
  type SecondaryFactor,
} from './flow.js';

const rules = (requireTotp: boolean, requireExtJwtSigner: string | null = null): AuthPolicyRules =>
  ({ primary: {}, secondary: { requireTotp, requireExtJwtSigner } }) as unknown as AuthPolicyRules;

const outcome = (r: AuthPolicyRules, method: PrimaryOutcome['method'] = 'password'): PrimaryOutcome => ({
  identityId: 'identity-1',
  authenticatorId: 'authenticator-1',
  method,
  rules: r,
  isCertExtendable: false,
  ipAddress: '192.0.2.10',
  isTotpEnrolled: false,
  improperClientCertChain: false,
});

const params: AuthorizationParams = {
  clientId: 'overlay',
  redirectUri: 'http://127.0.0.1:8765/callback',
  scopes: ['openid', 'offline_access'],
  codeChallenge: 'c'.repeat(43),
  state: 'state-1',
  nonce: 'nonce-12',
  configTypes: ['intercept.v1'],
};

/** What a request is charged per string it keeps (see flow.ts). */
const cost = (...strings: string[]): number => strings.reduce((n, s) => n + 24 + 2 * s.length, 0);
const REQUEST_BYTES = 640;

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('an authorization request', () => {
  it('starts with a fresh id, lives 10 minutes to the millisecond, and is unknown after', () => {
    let now = 1_000_000;
    const requests = new AuthRequests(() => now);
    const r = requests.start(params, '10.0.0.1');
    const other = requests.start(params, '10.0.0.1');
    expect(r.id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(other.id).not.toBe(r.id);
    expect(r).toMatchObject({ ...params, status: 'started', createdAt: 1_000_000, expiresAt: 1_000_000 + REQUEST_LIFETIME_MS, amr: [], outstanding: [] });
    expect(r.primary).toBeUndefined();
    now += REQUEST_LIFETIME_MS - 1;
    expect(requests.get(r.id)).toBe(r);
    now += 1;
    const gone = refusal(() => requests.get(r.id));
    expect([gone.code, gone.message]).toEqual(['NOT_FOUND', 'the authorization request is unknown or has expired']);
  });

  it('is looked up only by a string id', () => {
    const requests = new AuthRequests(() => 0);
    const r = requests.start(params, '10.0.0.1');
    for (const id of [undefined, 42, [r.id], { id: r.id }]) expect(refusal(() => requests.get(id)).code).toBe('NOT_FOUND');
    expect(refusal(() => requests.get('unknown')).code).toBe('NOT_FOUND');
    expect(requests.get(r.id)).toBe(r);
  });

  it('ended, it is unknown', () => {
    const requests = new AuthRequests(() => 0);
    const r = requests.start(params, '10.0.0.1');
    requests.end(r);
    expect(refusal(() => requests.get(r.id)).code).toBe('NOT_FOUND');
    expect([requests.size, requests.heldBy('10.0.0.1')]).toEqual([0, 0]);
  });
});

describe('steps', () => {
  it('a factor step on a request without a primary login is refused, naming its state', () => {
    const requests = new AuthRequests(() => 0);
    const r = requests.start(params, '10.0.0.1');
    const refused = refusal(() => requests.factorFailed(r));
    expect([refused.code, refused.message]).toEqual(['COULD_NOT_VALIDATE', 'the authorization request is started; it cannot take this step']);
    expect(r.status).toBe('started');
    const notOutstanding = refusal(() => requests.satisfy(r, 'totp', 'totp', r.primary));
    expect([notOutstanding.code, notOutstanding.message]).toEqual(['COULD_NOT_VALIDATE', 'the factor totp is not outstanding for this request']);
  });

  it('nothing moves a complete request, not even a failed login', () => {
    const requests = new AuthRequests(() => 0);
    const r = requests.start(params, '10.0.0.1');
    requests.primarySucceeded(r, outcome(rules(false)));
    for (const step of [() => requests.primaryFailed(r), () => requests.factorFailed(r)]) {
      expect(refusal(step).message).toBe('the authorization request is complete; it cannot take this step');
    }
    expect(r.status).toBe('complete');
  });

  it('a primary login records who, how and when, and what the policy still asks for', () => {
    let now = 5_000;
    const requests = new AuthRequests(() => now);
    const r = requests.start(params, '10.0.0.1');
    now = 7_000;
    requests.primarySucceeded(r, outcome(rules(true), 'cert'));
    expect(r).toMatchObject({ status: 'partial', amr: ['cert'], authTime: 7_000, outstanding: ['totp'] });
    expect(r.primary?.identityId).toBe('identity-1');
    // A failed primary retry leaves the factors as they were.
    requests.primaryFailed(r);
    expect([r.status, r.outstanding]).toEqual(['partial', ['totp']]);
    // A new primary login starts the factors over, by the policy it finds.
    now = 8_000;
    requests.primarySucceeded(r, outcome(rules(false), 'ext-jwt'));
    expect(r).toMatchObject({ status: 'complete', amr: ['ext-jwt'], authTime: 8_000, outstanding: [] });
    expect(nextState('partial', 'primary-failed', false)).toBe('partial');
  });

  it('a method already in amr is not recorded twice; a factor still outstanding keeps the request partial', () => {
    const factor = (id: string): SecondaryFactor => ({ id, required: () => true, query: () => ({ typeId: id.toUpperCase(), provider: 'overlay' }) });
    const requests = new AuthRequests(() => 0, { factors: [factor('one'), factor('two')] });
    const r = requests.start(params, '10.0.0.1');
    requests.primarySucceeded(r, outcome(rules(false)));
    expect([r.status, r.outstanding]).toEqual(['partial', ['one', 'two']]);
    requests.satisfy(r, 'one', 'password', r.primary);
    expect([r.status, r.outstanding, r.amr]).toEqual(['partial', ['two'], ['password']]);
    requests.satisfy(r, 'two', 'mfa', r.primary);
    expect([r.status, r.amr]).toEqual(['complete', ['password', 'mfa']]);
  });

  it('a factor checked against a primary login that was given again meanwhile is refused, and the request waits for the new one', () => {
    const requests = new AuthRequests(() => 0);
    const r = requests.start(params, '10.0.0.1');
    const first = outcome(rules(true));
    requests.primarySucceeded(r, first);
    // Another identity's password, given while the first one's code was being checked.
    requests.primarySucceeded(r, { ...outcome(rules(true)), identityId: 'identity-2' });
    const refused = refusal(() => requests.satisfy(r, 'totp', 'totp', first));
    expect([refused.code, refused.message]).toEqual([
      'COULD_NOT_VALIDATE',
      'the authorization request was logged in again while the factor was checked; give the factor again',
    ]);
    expect([r.status, r.outstanding, r.amr, r.primary?.identityId]).toEqual(['partial', ['totp'], ['password'], 'identity-2']);
    expect(requests.satisfy(r, 'totp', 'totp', r.primary).status).toBe('complete');
  });
});

describe('secondary factors', () => {
  const ctx = (r: AuthPolicyRules, isTotpEnrolled = false) => ({ rules: r, identityId: 'identity-1', isTotpEnrolled });

  it('TOTP when the policy requires it; an external JWT when it names a signer', () => {
    expect(TOTP_FACTOR.required(ctx(rules(true)))).toBe(true);
    expect(TOTP_FACTOR.query(ctx(rules(true)))).toEqual({
      typeId: 'TOTP',
      provider: 'overlay',
      format: 'numeric',
      httpMethod: 'POST',
      httpUrl: './oidc/login/totp',
      minLength: 6,
      maxLength: 6,
      isTotpEnrolled: false,
    });
    expect(TOTP_FACTOR.required(ctx(rules(false)))).toBe(false);
    expect(EXT_JWT_FACTOR.required(ctx(rules(false, 'signer-1')))).toBe(true);
    expect(EXT_JWT_FACTOR.required(ctx(rules(false, '')))).toBe(false);
    expect(EXT_JWT_FACTOR.required(ctx(rules(false, null)))).toBe(false);
    expect(EXT_JWT_FACTOR.query(ctx(rules(false, 'signer-1')))).toEqual({ typeId: 'EXT-JWT', provider: 'url', id: 'signer-1' });
    const known = { typeId: 'EXT-JWT', provider: 'url', id: 'signer-1', httpUrl: 'https://idp.example/authorize', clientId: 'app', scopes: ['openid'] };
    expect(EXT_JWT_FACTOR.query({ ...ctx(rules(false, 'signer-1')), extJwtQuery: known })).toEqual(known);
  });

  it('TOTP also for an identity with a confirmed enrollment, whatever the policy; its query says so', () => {
    expect(TOTP_FACTOR.required(ctx(rules(false), true))).toBe(true);
    expect(TOTP_FACTOR.query(ctx(rules(false), true))).toMatchObject({ typeId: 'TOTP', isTotpEnrolled: true });
    expect(TOTP_FACTOR.query(ctx(rules(true), true)).isTotpEnrolled).toBe(true);
    // Through a request: the primary outcome carries what the login found.
    const requests = new AuthRequests(() => 0);
    const r = requests.start(params, '10.0.0.1');
    requests.primarySucceeded(r, { ...outcome(rules(false)), isTotpEnrolled: true });
    expect([r.status, r.outstanding]).toEqual(['partial', ['totp']]);
    expect(requests.queries(r)).toEqual([expect.objectContaining({ typeId: 'TOTP', isTotpEnrolled: true })]);
    expect(requests.headers(r)).toEqual({ 'totp-required': 'true' });
    // A new primary login of an identity without one (removed meanwhile) asks for nothing more.
    requests.primarySucceeded(r, outcome(rules(false)));
    expect([r.status, r.outstanding]).toEqual(['complete', []]);
  });

  it('queries and headers are those of the outstanding factors only, and none before the primary login', () => {
    const requests = new AuthRequests(() => 0);
    const r = requests.start(params, '10.0.0.1');
    expect(requests.queries(r)).toEqual([]);
    requests.primarySucceeded(r, outcome(rules(true, 'signer-1')));
    requests.satisfy(r, 'totp', 'totp', r.primary);
    expect(requests.queries(r)).toEqual([expect.objectContaining({ typeId: 'EXT-JWT', id: 'signer-1' })]);
    // The external-JWT factor has no headers: TOTP's are gone with it.
    expect(requests.headers(r)).toEqual({});
  });
});

describe('what a request is charged for', () => {
  it('every string it keeps, from the start and as the login adds to it; its end frees all', () => {
    const requests = new AuthRequests(() => 0);
    const r = requests.start(params, '10.0.0.1');
    const started =
      REQUEST_BYTES +
      cost(r.id, params.clientId, params.redirectUri, params.codeChallenge, params.state!, params.nonce!, ...params.scopes, ...params.configTypes);
    expect(requests.bytes).toBe(started);
    requests.primarySucceeded(r, outcome(rules(true)));
    const primary = cost('identity-1', 'authenticator-1', '192.0.2.10');
    expect(requests.bytes).toBe(started + primary + cost('password', 'totp'));
    requests.satisfy(r, 'totp', 'totp', r.primary);
    expect(requests.bytes).toBe(started + primary + cost('password', 'totp'));
    requests.addConfigTypes(r, ['host.v1']);
    expect(requests.bytes).toBe(started + primary + cost('password', 'totp', 'host.v1'));
    requests.end(r);
    expect(requests.bytes).toBe(0);
  });

  it('a met factor is charged for the method it adds to amr (an external JWT names its signer)', () => {
    const requests = new AuthRequests(() => 0);
    const r = requests.start(params, '10.0.0.1');
    requests.primarySucceeded(r, outcome(rules(false, 'signer-1')));
    const before = requests.bytes;
    requests.satisfy(r, 'ext-jwt', 'ejs:signer-1', r.primary);
    expect(requests.bytes - before).toBe(cost('ejs:signer-1') - cost('ext-jwt'));
  });

  it('without state and nonce, those are not charged', () => {
    const requests = new AuthRequests(() => 0);
    const { state: _state, nonce: _nonce, ...bare } = params;
    const r = requests.start(bare, '10.0.0.1');
    expect(requests.bytes).toBe(REQUEST_BYTES + cost(r.id, bare.clientId, bare.redirectUri, bare.codeChallenge, ...bare.scopes, ...bare.configTypes));
  });

  it('adding no config types leaves the request as it was', () => {
    const requests = new AuthRequests(() => 0);
    const r = requests.start({ ...params, configTypes: ['a,b', 'a'] }, '10.0.0.1');
    const bytes = requests.bytes;
    requests.addConfigTypes(r, []);
    expect([r.configTypes, requests.bytes]).toEqual([['a,b', 'a'], bytes]);
  });
});

describe('list parameters', () => {
  it('repeated or comma-separated, trimmed, without empty or repeated items', () => {
    expect(splitList(undefined)).toEqual([]);
    expect(splitList('a, b,,a ')).toEqual(['a', 'b']);
    expect(splitList(['a,b', ' c ', 'b'])).toEqual(['a', 'b', 'c']);
  });

  it('items longer than 100 characters are dropped, and at most 100 items are kept', () => {
    expect(splitList(['x'.repeat(100), 'y'.repeat(101)])).toEqual(['x'.repeat(100)]);
    const many = Array.from({ length: 150 }, (_, i) => `t${i}`);
    expect(splitList(many.join(','))).toEqual(many.slice(0, 100));
  });
});
