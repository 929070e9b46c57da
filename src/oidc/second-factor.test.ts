// The TOTP steps of the OIDC flow over real authorization requests and a recording stand-in for the
// enrollments: which requests may take a step, whose attempts a code counts against, a wrong code
// as a failed factor (and only then), a request that expired or moved on while its code was checked,
// and the TOTP token (an OIDC caller only, no recovery code, an MFA pass of the session).
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ApiSession } from '../auth/api-sessions.js';
import type { AttemptScope, CodeCheck, MfaView } from '../auth/mfa.js';
import { iso } from '../clock.js';
import { ApiError } from '../errors.js';
import type { AuthPolicyRules } from '../resources/auth-policies.js';
import { AuthRequests, REQUEST_LIFETIME_MS, type AuthRequest, type AuthorizationParams, type PrimaryOutcome } from './flow.js';
import { TotpSteps, type TotpTokenCaller } from './second-factor.js';

const T0 = 1_772_000_000_000;
let now = T0;
const clock = () => now;

const rules = (requireTotp: boolean): AuthPolicyRules =>
  ({ primary: {}, secondary: { requireTotp, requireExtJwtSigner: null } }) as unknown as AuthPolicyRules;

const params: AuthorizationParams = {
  clientId: 'overlay',
  redirectUri: 'http://127.0.0.1:8765/callback',
  scopes: ['openid'],
  codeChallenge: 'c'.repeat(43),
  configTypes: [],
};

const outcome = (requireTotp: boolean, isTotpEnrolled = false): PrimaryOutcome => ({
  identityId: 'identity-1',
  authenticatorId: 'authenticator-1',
  method: 'password',
  rules: rules(requireTotp),
  isCertExtendable: false,
  improperClientCertChain: false,
  ipAddress: '192.0.2.10',
  isTotpEnrolled,
});

const wrongCode = () => new ApiError('MFA_INVALID_TOKEN', 'the code is not valid');

interface Calls {
  authenticate: [string, string, AttemptScope, Partial<CodeCheck> | undefined][];
  verify: [string, string, AttemptScope][];
  start: { id: string; name: string }[];
  cancel: string[];
  mfaComplete: ApiSession[];
}

function setup(over: { authenticate?: () => Promise<unknown>; verify?: () => Promise<unknown>; identity?: { id: string; name: string } | undefined } = {}) {
  now = T0;
  const requests = new AuthRequests(clock);
  const calls: Calls = { authenticate: [], verify: [], start: [], cancel: [], mfaComplete: [] };
  const view: MfaView = { id: 'mfa-1', createdAt: iso(T0), updatedAt: iso(T0), tags: {}, isVerified: false };
  const steps = new TotpSteps({
    requests,
    mfa: {
      authenticate: async (identityId, code, scope, opts) => {
        calls.authenticate.push([identityId, code, scope, opts]);
        await over.authenticate?.();
        // What is written with a code taken commits with it: here, there is no store to write to.
        await opts?.alsoWrite?.({} as never);
        return 'totp';
      },
      verify: async (identityId, code, scope) => {
        calls.verify.push([identityId, code, scope]);
        await over.verify?.();
      },
      start: async (identity) => {
        calls.start.push(identity);
        return view;
      },
      cancel: async (identityId) => void calls.cancel.push(identityId),
    },
    identities: { get: async (id: string) => ('identity' in over ? over.identity : { id, name: 'Alice' }) as never },
    sessions: { mfaCompleteIn: async (_ctx, session) => void calls.mfaComplete.push(session) },
    tokens: {
      totpToken: (access) => ({
        token: `totp-token-for-${access.sub}`,
        claims: { ...access, aud: [...access.aud], iat: Math.floor(now / 1000), exp: Math.floor(now / 1000) + 60, jti: 'j', ov_t: 't' },
      }),
    },
  });
  const partial = (requireTotp = true): AuthRequest => requests.primarySucceeded(requests.start(params, '192.0.2.10'), outcome(requireTotp));
  return { requests, steps, calls, view, partial };
}

/** The ApiError a promise is rejected with. */
async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const err: unknown = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('which requests take a TOTP step', () => {
  it('only one partially authenticated with TOTP outstanding', async () => {
    const { requests, steps, calls, partial } = setup();
    const started = requests.start(params, '192.0.2.10');
    const complete = partial(false);
    const waiting = partial(true);
    for (const step of [
      (r: AuthRequest) => steps.login(r, '123456'),
      (r: AuthRequest) => steps.verifyEnrollment(r, '123456'),
      (r: AuthRequest) => steps.startEnrollment(r),
      (r: AuthRequest) => steps.cancelEnrollment(r),
    ]) {
      const early = await refusal(step(started));
      expect([early.code, early.message]).toEqual(['COULD_NOT_VALIDATE', 'the authorization request is started; it cannot take this step']);
      expect((await refusal(step(complete))).message).toBe('the authorization request is complete; it cannot take this step');
      // Partial, but with another factor outstanding only.
      const other = { ...waiting, outstanding: ['ext-jwt'] };
      const notOutstanding = await refusal(step(other));
      expect([notOutstanding.code, notOutstanding.message]).toEqual(['COULD_NOT_VALIDATE', 'TOTP is not outstanding for this authorization request']);
      // Partial without a primary outcome (never so in the flow, refused all the same).
      expect((await refusal(step({ ...waiting, primary: undefined }))).code).toBe('COULD_NOT_VALIDATE');
    }
    expect(calls).toEqual({ authenticate: [], verify: [], start: [], cancel: [], mfaComplete: [] });
  });
});

describe('login', () => {
  it('satisfies the TOTP factor with a code checked against the request and the identity', async () => {
    const { steps, calls, partial } = setup();
    const r = partial();
    const after = await steps.login(r, '123456');
    expect(calls.authenticate).toEqual([['identity-1', '123456', { authRequestId: r.id }, undefined]]);
    expect(after).toBe(r);
    expect(after.status).toBe('complete');
    expect(after.amr).toEqual(['password', 'totp']);
    expect(after.outstanding).toEqual([]);
  });

  it('a wrong code is a failed factor: the request stays partial and may try again', async () => {
    let wrong = true;
    const { requests, steps, partial } = setup({ authenticate: async () => (wrong ? Promise.reject(wrongCode()) : undefined) });
    const failed = vi.spyOn(requests, 'factorFailed');
    const r = partial();
    expect((await refusal(steps.login(r, '000000'))).code).toBe('MFA_INVALID_TOKEN');
    expect(failed).toHaveBeenCalledWith(r);
    expect(r.status).toBe('partial');
    wrong = false;
    expect((await steps.login(r, '123456')).status).toBe('complete');
  });

  it('other refusals (the attempt limit) are not failed factors', async () => {
    const { requests, steps, partial } = setup({
      authenticate: async () => Promise.reject(new ApiError('SERVER_TOO_MANY_REQUESTS', 'too many wrong codes')),
    });
    const failed = vi.spyOn(requests, 'factorFailed');
    expect((await refusal(steps.login(partial(), '000000'))).code).toBe('SERVER_TOO_MANY_REQUESTS');
    const other = new Error('the store is gone');
    const broken = setup({ authenticate: async () => Promise.reject(other) });
    const brokenFailed = vi.spyOn(broken.requests, 'factorFailed');
    await expect(broken.steps.login(broken.partial(), '000000')).rejects.toBe(other);
    expect(failed).not.toHaveBeenCalled();
    expect(brokenFailed).not.toHaveBeenCalled();
  });

  it('a wrong code for a request that moved on meanwhile is refused as wrong, without a failed factor', async () => {
    const held: { request?: AuthRequest } = {};
    const { requests, steps, partial } = setup({
      authenticate: async () => {
        held.request!.status = 'complete';
        throw wrongCode();
      },
    });
    const failed = vi.spyOn(requests, 'factorFailed');
    held.request = partial();
    expect((await refusal(steps.login(held.request, '000000'))).code).toBe('MFA_INVALID_TOKEN');
    expect(failed).not.toHaveBeenCalled();
  });

  it('a request that expired while its code was checked: 404', async () => {
    const { steps, partial } = setup({
      authenticate: async () => {
        now += REQUEST_LIFETIME_MS;
      },
    });
    expect((await refusal(steps.login(partial(), '123456'))).code).toBe('NOT_FOUND');
  });

  // An attack that worked: the attacker's own code, checked while the victim's password was given
  // on the same request, completed the request as the victim.
  it("a code checked while another identity's password was given on the request does not complete it", async () => {
    const held: { requests?: AuthRequests; request?: AuthRequest } = {};
    const { requests, steps, partial } = setup({
      authenticate: async () => void held.requests!.primarySucceeded(held.request!, { ...outcome(true, true), identityId: 'victim' }),
    });
    held.requests = requests;
    held.request = partial();
    const err = await refusal(steps.login(held.request, '123456'));
    expect(err.code).toBe('COULD_NOT_VALIDATE');
    expect([held.request.status, held.request.outstanding, held.request.primary?.identityId]).toEqual(['partial', ['totp'], 'victim']);
  });

  it("the same for an enrollment confirmed while another identity's password was given", async () => {
    const held: { requests?: AuthRequests; request?: AuthRequest } = {};
    const { requests, steps, partial } = setup({
      verify: async () => void held.requests!.primarySucceeded(held.request!, { ...outcome(true), identityId: 'victim' }),
    });
    held.requests = requests;
    held.request = partial();
    expect((await refusal(steps.verifyEnrollment(held.request, '123456'))).code).toBe('COULD_NOT_VALIDATE');
    expect([held.request.status, held.request.primary?.identityId]).toEqual(['partial', 'victim']);
  });
});

describe('enrollment while the request waits', () => {
  it('starts one for the identity of the request, by its name', async () => {
    const { steps, calls, view, partial } = setup();
    expect(await steps.startEnrollment(partial())).toBe(view);
    expect(calls.start).toEqual([{ id: 'identity-1', name: 'Alice' }]);
  });

  it('404 when the identity is gone', async () => {
    const { steps, calls, partial } = setup({ identity: undefined });
    const err = await refusal(steps.startEnrollment(partial()));
    expect([err.code, err.message]).toEqual(['NOT_FOUND', 'the identity of the authorization request no longer exists']);
    expect(calls.start).toEqual([]);
  });

  it('a confirming code satisfies the TOTP factor; a wrong one is a failed factor', async () => {
    let wrong = true;
    const { requests, steps, calls, partial } = setup({ verify: async () => (wrong ? Promise.reject(wrongCode()) : undefined) });
    const failed = vi.spyOn(requests, 'factorFailed');
    const r = partial();
    expect((await refusal(steps.verifyEnrollment(r, '000000'))).code).toBe('MFA_INVALID_TOKEN');
    expect(failed).toHaveBeenCalledTimes(1);
    wrong = false;
    const after = await steps.verifyEnrollment(r, '123456');
    expect(calls.verify).toEqual([
      ['identity-1', '000000', { authRequestId: r.id }],
      ['identity-1', '123456', { authRequestId: r.id }],
    ]);
    expect([after.status, after.amr]).toEqual(['complete', ['password', 'totp']]);
  });

  it('a request that expired while the enrollment was confirmed: 404', async () => {
    const { steps, partial } = setup({
      verify: async () => {
        now += REQUEST_LIFETIME_MS;
      },
    });
    expect((await refusal(steps.verifyEnrollment(partial(), '123456'))).code).toBe('NOT_FOUND');
  });

  it('an abandoned enrollment leaves the request waiting for TOTP', async () => {
    const { steps, calls, partial } = setup();
    const r = partial();
    expect(await steps.cancelEnrollment(r)).toBe(r);
    expect(calls.cancel).toEqual(['identity-1']);
    expect([r.status, r.outstanding]).toEqual(['partial', ['totp']]);
  });
});

describe('the TOTP token', () => {
  const session = { id: 'session-1', identityId: 'identity-1' } as ApiSession;
  const claims = { iss: 'https://ctrl.example:1280/oidc', sub: 'identity-1', aud: ['overlay'], ov_asid: 'session-1' };

  it('is refused to a legacy session token', async () => {
    const { steps, calls } = setup();
    const err = await refusal(steps.token({ session }, '123456'));
    expect(err.code).toBe('INVALID_BACKING_TOKEN_TYPE');
    expect(err.message).toBe('a TOTP token is made for callers with an OIDC access token, not a legacy session token');
    expect(calls.authenticate).toEqual([]);
  });

  it('takes a live code (no recovery code) against the session, passes MFA for it, and is issued now', async () => {
    const { steps, calls } = setup();
    now = T0 + 1234;
    const caller: TotpTokenCaller = { session, bearer: { claims } };
    expect(await steps.token(caller, '123456')).toEqual({ issuedAt: iso(Math.floor(now / 1000) * 1000), token: 'totp-token-for-identity-1' });
    expect(calls.authenticate).toEqual([['identity-1', '123456', { apiSessionId: 'session-1' }, { recovery: false, alsoWrite: expect.any(Function) }]]);
    expect(calls.mfaComplete).toEqual([session]);
  });

  it('a wrong code issues nothing and passes nothing', async () => {
    const { steps, calls } = setup({ authenticate: async () => Promise.reject(wrongCode()) });
    expect((await refusal(steps.token({ session, bearer: { claims } }, '000000'))).code).toBe('MFA_INVALID_TOKEN');
    expect(calls.mfaComplete).toEqual([]);
  });
});
