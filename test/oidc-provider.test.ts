// The OIDC provider's decisions called directly, on a controller with an injected clock: each refusal
// of an authorization request, a code exchange, a refresh and an id_token_hint is told apart by its
// description (so the test shows which check refused it); codes expire, are swept and bounded (per
// identity, and in total by count and estimated bytes); a code exchanged twice at once opens
// nothing; the issuers follow the configured bind points.
import { createHash, generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OAuthError } from '../src/oidc/errors.js';
import type { AuthRequest } from '../src/oidc/flow.js';
import { OidcProvider, type TokenAnswer } from '../src/oidc/provider.js';
import { encodeHeader, signCompact } from '../src/oidc/jws.js';
import { RedirectPolicy } from '../src/oidc/redirects.js';
import { ADMIN_ENV, asAdmin, call, createIdentityWithPassword, MGMT, startTestController, tempDir, type TestController } from './helpers.js';
import { decodeJwt, pkce, postLogin, REDIRECT_URI } from './oidc-helpers.js';

let t: TestController;
let p: OidcProvider;
let issuer: string;
let n = 0;
const redirects = new RedirectPolicy([], () => []);

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  p = t.app.core.oidc;
  const port = Number(t.config.web[0]!.bindPoints[0]!.interface.split(':')[1]);
  issuer = `https://127.0.0.1:${port}/oidc`;
});
afterAll(async () => {
  await t.close();
});

async function user(extra: Record<string, unknown> = {}): Promise<{ id: string; username: string; password: string }> {
  const name = `oidc-provider-${++n}`;
  const { id } = await createIdentityWithPassword(t, await asAdmin(t), { name, username: name, password: `${name}-pw`, ...extra });
  return { id, username: name, password: `${name}-pw` };
}

function query(over: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  return {
    response_type: 'code',
    client_id: 'overlay',
    redirect_uri: REDIRECT_URI,
    scope: 'openid offline_access',
    code_challenge: pkce().challenge,
    code_challenge_method: 'S256',
    ...over,
  };
}

async function refusal(fn: () => unknown): Promise<OAuthError> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof OAuthError) return err;
    throw err;
  }
  throw new Error('expected an OAuth error');
}

async function expectRefused(fn: () => unknown, error: string, description: string): Promise<void> {
  const err = await refusal(fn);
  expect([err.error, err.description]).toEqual([error, description]);
}

/** An authorization request of `u`, logged in (Complete): its code and verifier. */
async function codeFor(u: { username: string; password: string }, over: Record<string, string | undefined> = {}) {
  const { verifier, challenge } = pkce();
  const request = p.authorize(query({ code_challenge: challenge, ...over }), redirects, '10.30.0.1');
  const login = await postLogin(t, request.id, u.username, u.password);
  expect(login.statusCode, login.body).toBe(302);
  return { verifier, code: new URL(String(login.headers.location)).searchParams.get('code')! };
}

function exchange(code: string, verifier: string, over: Record<string, string | undefined> = {}): Promise<TokenAnswer> {
  return p.exchangeCode({ code, redirect_uri: REDIRECT_URI, code_verifier: verifier, ...over }, issuer);
}

/** The private code store, to see what the sweep keeps. */
const codes = () => (p as unknown as { codes: { size: number; bytes: number; heldBy(identityId: string): number } }).codes;

/** A request that has reached Complete, as complete() takes it. */
function completed(over: Partial<AuthRequest> = {}, q: Record<string, string> = { state: 'st-9' }): AuthRequest {
  return { ...p.authorize(query(q), redirects, `10.31.${n % 250}.${++n % 250}`), status: 'complete', ...over };
}

/** A complete request of a login by `identityId`. */
function completedBy(identityId: string, q?: Record<string, string>): AuthRequest {
  return completed({ primary: { identityId, authenticatorId: null, method: 'password', ipAddress: '10.31.0.1' } as AuthRequest['primary'] }, q);
}

describe('authorization requests', () => {
  it.each([
    ['an unknown client', { client_id: 'intruder' }, 'invalid_request', 'unknown client_id'],
    ['no redirect URI', { redirect_uri: undefined }, 'invalid_request', 'redirect_uri is missing or not allowed for this client'],
    ['an unlisted redirect URI', { redirect_uri: 'https://evil.example.com/cb' }, 'invalid_request', 'redirect_uri is missing or not allowed for this client'],
    ['response_type token', { response_type: 'token' }, 'unsupported_response_type', 'response_type must be code'],
    ['plain PKCE', { code_challenge_method: 'plain' }, 'invalid_request', 'code_challenge_method must be S256 (plain is not accepted)'],
    ['no code challenge', { code_challenge: undefined }, 'invalid_request', 'code_challenge must be the base64url SHA-256 of the code verifier (43 characters)'],
    ['a challenge of 42 characters', { code_challenge: 'a'.repeat(42) }, 'invalid_request', 'code_challenge must be the base64url SHA-256 of the code verifier (43 characters)'],
    ['a challenge with a character before', { code_challenge: `=${'a'.repeat(43)}` }, 'invalid_request', 'code_challenge must be the base64url SHA-256 of the code verifier (43 characters)'],
    ['a challenge with a character after', { code_challenge: `${'a'.repeat(43)}=` }, 'invalid_request', 'code_challenge must be the base64url SHA-256 of the code verifier (43 characters)'],
    ['a challenge in standard base64', { code_challenge: `${'a'.repeat(42)}+` }, 'invalid_request', 'code_challenge must be the base64url SHA-256 of the code verifier (43 characters)'],
    ['a scope without openid', { scope: 'offline_access openid-like' }, 'invalid_scope', 'scope must include openid'],
    ['a state longer than 2048', { state: 's'.repeat(2049) }, 'invalid_request', 'state is longer than 2048 characters'],
    ['a nonce longer than 512', { nonce: 'n'.repeat(513) }, 'invalid_request', 'nonce is longer than 512 characters'],
  ])('refuses %s, saying why', async (_what, over, error, description) => {
    const before = p.requests.size;
    await expectRefused(() => p.authorize(query(over), redirects, '10.30.1.1'), error, description);
    expect(p.requests.size).toBe(before);
  });

  it('keeps what was asked within the bounds, the supported scopes once each, charged to the client address', () => {
    const challenge = `${'A'.repeat(20)}-_${'9'.repeat(21)}`;
    const r = p.authorize(
      query({ code_challenge: challenge, scope: 'openid  profile openid offline_access', state: 's'.repeat(2048), nonce: 'n'.repeat(512), configTypes: 'a,b' }),
      redirects,
      '10.30.2.1',
    );
    expect(r).toMatchObject({ clientId: 'overlay', redirectUri: REDIRECT_URI, codeChallenge: challenge, scopes: ['openid', 'offline_access'], configTypes: ['a', 'b'] });
    expect([r.state?.length, r.nonce?.length]).toEqual([2048, 512]);
    expect(p.requests.heldBy('10.30.2.1')).toBe(1);
    const bare = p.authorize(query({ scope: 'openid' }), redirects, '10.30.2.1');
    expect(['state' in bare, 'nonce' in bare, bare.scopes]).toEqual([false, false, ['openid']]);
  });
});

describe('authorization codes', () => {
  it('are made only for a complete request, which then ends; the redirect carries code, state and iss', async () => {
    const started = p.authorize(query({ state: 'st-1' }), redirects, '10.30.3.1');
    expect(() => p.complete(started, issuer)).toThrow('the authorization request is not complete');
    const request = { ...started, status: 'complete' as const };
    const location = new URL(p.complete(request, issuer));
    expect([location.origin + location.pathname, location.searchParams.get('state'), location.searchParams.get('iss')]).toEqual([REDIRECT_URI, 'st-1', issuer]);
    expect(location.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(p.requests.heldBy('10.30.3.1')).toBe(0);
  });

  it('expired ones are dropped when a code is made', () => {
    t.clock.advance(60_000);
    p.complete(completed(), issuer);
    expect(codes().size).toBe(1);
    t.clock.advance(55_000);
    p.complete(completed(), issuer);
    expect(codes().size).toBe(2);
    // The first code expires now, and goes as the next is made.
    t.clock.advance(5_000);
    p.complete(completed(), issuer);
    expect(codes().size).toBe(2);
    t.clock.advance(60_000);
  });

  it('one identity holds at most 1,000: its next is refused with 429 and Retry-After, another identity still gets one', async () => {
    t.clock.advance(60_000);
    const request = completedBy('flooder');
    for (let i = 0; i < 1_000; i++) p.complete(request, issuer);
    t.clock.advance(20_000);
    const err = await refusal(() => p.complete(request, issuer));
    expect([err.error, err.status, err.description, err.headers]).toEqual([
      'temporarily_unavailable',
      429,
      'too many authorization codes of this identity are pending; exchange them, or try again later',
      { 'retry-after': '40' },
    ]);
    expect(new URL(p.complete(completedBy('bystander'), issuer)).searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Once its codes expire, the identity gets new ones.
    t.clock.advance(40_000);
    p.complete(request, issuer);
    expect(codes().heldBy('flooder')).toBe(1);
    t.clock.advance(60_000);
  });

  it('are bounded in total by their estimated bytes: requests with every parameter at its bound cannot take more than 32 MiB', () => {
    t.clock.advance(60_000);
    const big = {
      state: 's'.repeat(2048),
      nonce: 'n'.repeat(512),
      redirect_uri: `http://127.0.0.1:9/${'p'.repeat(2000)}`,
      configTypes: Array.from({ length: 40 }, (_, i) => `${i}`.padEnd(100, 'c')).join(','),
    };
    const identities = ['big-1', 'big-2', 'big-3'];
    const requests = identities.map((id) => completedBy(id, big));
    for (let i = 0; i < 999; i++) for (const request of requests) p.complete(request, issuer);
    expect(codes().bytes).toBeLessThanOrEqual(32 * 1024 * 1024);
    expect(codes().size).toBeLessThan(3 * 999);
    // The store made room at the expense of the identity holding the most, so each keeps a share.
    for (const id of identities) expect(codes().heldBy(id)).toBeGreaterThan(100);
    // A newcomer is not locked out.
    p.complete(completedBy('newcomer', big), issuer);
    expect(codes().heldBy('newcomer')).toBe(1);
    t.clock.advance(60_000);
  });
});

describe('the code exchange', () => {
  it('needs code, redirect_uri and code_verifier', async () => {
    for (const name of ['code', 'redirect_uri', 'code_verifier']) {
      await expectRefused(() => exchange('c', 'v'.repeat(43), { [name]: '' }), 'invalid_request', `${name} is required`);
    }
  });

  it('refuses a verifier that is malformed or does not match, and then still takes the right one', async () => {
    const u = await user();
    const { verifier, code } = await codeFor(u);
    await expectRefused(() => exchange(code, 'v'.repeat(42)), 'invalid_grant', 'the code verifier is malformed');
    await expectRefused(() => exchange(code, 'v'.repeat(129)), 'invalid_grant', 'the code verifier is malformed');
    await expectRefused(() => exchange(code, `${'v'.repeat(43)}+`), 'invalid_grant', 'the code verifier is malformed');
    await expectRefused(() => exchange(code, 'v'.repeat(128)), 'invalid_grant', 'the code verifier does not match the code challenge');
    await expectRefused(() => exchange(code, verifier, { redirect_uri: `${REDIRECT_URI}/other` }), 'invalid_grant', 'redirect_uri does not match the authorization request');
    const tokens = await exchange(code, verifier);
    expect((await p.bearer.verify(tokens.access_token)).identity.id).toBe(u.id);
    await expectRefused(() => exchange(code, verifier), 'invalid_grant', 'the authorization code has already been used');
    // The reuse ended what the first exchange opened.
    await expect(p.bearer.verify(tokens.access_token)).rejects.toThrow('the API session of the token has ended');
  });

  it('the ID token carries the nonce of the authorization request, and none when none was asked', async () => {
    const u = await user();
    const asked = await codeFor(u, { nonce: 'nonce-42' });
    expect(decodeJwt((await exchange(asked.code, asked.verifier)).id_token).payload.nonce).toBe('nonce-42');
    const none = await codeFor(u);
    expect('nonce' in decodeJwt((await exchange(none.code, none.verifier)).id_token).payload).toBe(false);
  });

  it('takes verifiers of 43 to 128 characters of the unreserved set', async () => {
    const u = await user();
    for (const verifier of [`${'a'.repeat(40)}.~_-`.slice(0, 43), `${'Z9.~_-'.repeat(21)}xy`]) {
      const challenge = createHash('sha256').update(verifier).digest('base64url');
      const request = p.authorize(query({ code_challenge: challenge }), redirects, '10.30.4.1');
      const login = await postLogin(t, request.id, u.username, u.password);
      const code = new URL(String(login.headers.location)).searchParams.get('code')!;
      expect((await exchange(code, verifier)).access_token).toBeTypeOf('string');
    }
  });

  it('a code expires at 60 s to the millisecond', async () => {
    const u = await user();
    const first = await codeFor(u);
    const second = await codeFor(u);
    t.clock.advance(59_999);
    expect((await exchange(first.code, first.verifier)).token_type).toBe('Bearer');
    t.clock.advance(1);
    await expectRefused(() => exchange(second.code, second.verifier), 'invalid_grant', 'the authorization code is invalid or has expired');
  });

  it('the same code exchanged twice at once: both refused, and no API session stays open', async () => {
    const u = await user();
    const { verifier, code } = await codeFor(u);
    const answers = await Promise.allSettled([exchange(code, verifier), exchange(code, verifier)]);
    for (const a of answers) {
      expect(a.status).toBe('rejected');
      const err = (a as PromiseRejectedResult).reason as OAuthError;
      expect([err.error, err.description]).toEqual(['invalid_grant', 'the authorization code has already been used']);
    }
    const sessions = await t.app.core.store.db.selectFrom('api_sessions').select('id').where('identity_id', '=', u.id).execute();
    expect(sessions).toEqual([]);
  });

  it('an identity disabled after its login gets no tokens', async () => {
    const u = await user();
    const { verifier, code } = await codeFor(u);
    expect((await call(t, 'POST', `${MGMT}/identities/${u.id}/disable`, { token: await asAdmin(t), body: { durationMinutes: 0 } })).statusCode).toBe(200);
    await expectRefused(() => exchange(code, verifier), 'invalid_grant', 'the identity is disabled or no longer exists');
  });

  it('config types "all" are every type; names and ids are resolved, unknown ones dropped', async () => {
    const types = JSON.parse((await call(t, 'GET', `${MGMT}/config-types?limit=500`, { token: await asAdmin(t) })).body).data as { id: string; name: string }[];
    expect(types.length).toBeGreaterThan(1);
    const u = await user();
    const none = await codeFor(u);
    expect(decodeJwt((await exchange(none.code, none.verifier)).access_token).payload.ov_ct).toEqual([]);
    const all = await codeFor(u, { configTypes: 'all' });
    expect(new Set(decodeJwt((await exchange(all.code, all.verifier)).access_token).payload.ov_ct)).toEqual(new Set(types.map((ct) => ct.id)));
    const some = await codeFor(u, { configTypes: `${types[0]!.name},${types[1]!.id},no-such-type` });
    expect(new Set(decodeJwt((await exchange(some.code, some.verifier)).access_token).payload.ov_ct)).toEqual(new Set([types[0]!.id, types[1]!.id]));
  });
});

describe('refresh', () => {
  async function tokensOf(u: { username: string; password: string }): Promise<TokenAnswer> {
    const { verifier, code } = await codeFor(u);
    return exchange(code, verifier);
  }
  const refresh = (token: string, scope?: string) => p.refresh({ refresh_token: token, ...(scope !== undefined ? { scope } : {}) }, issuer);

  it('needs a refresh token; one longer than any we issue is invalid', async () => {
    await expectRefused(() => p.refresh({}, issuer), 'invalid_request', 'refresh_token is required');
    await expectRefused(() => refresh('r'.repeat(257)), 'invalid_grant', 'the refresh token is invalid');
  });

  it('a grant of another client is not refreshed by this one', async () => {
    const u = await user();
    // A session without a grant of its own (no offline_access).
    const { verifier, code } = await codeFor(u, { scope: 'openid' });
    const asid = decodeJwt((await exchange(code, verifier)).access_token).payload.ov_asid as string;
    const other = await p.grants.create({ apiSessionId: asid, identityId: u.id, clientId: 'another-client', scopes: ['openid', 'offline_access'], amr: ['password'], authTime: t.clock() });
    await expectRefused(() => refresh(other.refreshToken), 'invalid_grant', 'the refresh token was issued to another client');
  });

  it('a revoked API session ends the grant: refused now, unknown after', async () => {
    const u = await user();
    const tokens = await tokensOf(u);
    const asid = decodeJwt(tokens.access_token).payload.ov_asid as string;
    expect((await call(t, 'POST', `${MGMT}/revocations`, { token: await asAdmin(t), body: { id: asid, type: 'API_SESSION' } })).statusCode).toBe(201);
    await expectRefused(() => refresh(tokens.refresh_token!), 'invalid_grant', 'the grant of the refresh token has been revoked');
    await expectRefused(() => refresh(tokens.refresh_token!), 'invalid_grant', 'the refresh token is invalid');
  });

  it('an IDENTITY revocation ends the grants issued before it, not those issued after', async () => {
    const u = await user();
    const before = await tokensOf(u);
    expect((await call(t, 'POST', `${MGMT}/revocations`, { token: await asAdmin(t), body: { id: u.id, type: 'IDENTITY' } })).statusCode).toBe(201);
    t.clock.advance(1_000);
    const after = await tokensOf(u);
    await expectRefused(() => refresh(before.refresh_token!), 'invalid_grant', 'the grant of the refresh token has been revoked');
    expect((await refresh(after.refresh_token!)).access_token).toBeTypeOf('string');
  });

  it('a disabled identity is refused; a wider scope is refused; a narrower one is answered', async () => {
    const u = await user();
    const tokens = await tokensOf(u);
    await expectRefused(() => refresh(tokens.refresh_token!, 'openid profile'), 'invalid_scope', 'scope asks for more than the grant holds');
    const narrowed = await refresh(tokens.refresh_token!, 'openid');
    expect([narrowed.scope, decodeJwt(narrowed.access_token).payload.scope]).toEqual(['openid', 'openid']);
    const kept = await refresh(narrowed.refresh_token!, ' openid  offline_access ');
    expect(kept.scope).toBe('openid offline_access');
    // Disabling ends the identity's API sessions, and their grants with them.
    expect((await call(t, 'POST', `${MGMT}/identities/${u.id}/disable`, { token: await asAdmin(t), body: { durationMinutes: 0 } })).statusCode).toBe(200);
    await expectRefused(() => refresh(kept.refresh_token!), 'invalid_grant', 'the grant of the refresh token has been revoked');
  });

  it('a refresh keeps the API session alive: it is touched, and held while the grant lives', async () => {
    const u = await user();
    const tokens = await tokensOf(u);
    const asid = decodeJwt(tokens.access_token).payload.ov_asid as string;
    const sessions = t.app.core.sessions;
    t.clock.advance(60_000);
    sessions.release(asid);
    await refresh(tokens.refresh_token!);
    const session = (await sessions.load(asid))!;
    expect(session.lastActivityAt).toBe(t.clock());
    const grant = (await p.grants.live()).get(asid)!;
    expect(sessions.expiresAt(session)).toBe(grant);
  });

  it('an expired refresh token, and a rotated one presented again, say so; the reuse is logged', async () => {
    const u = await user();
    const tokens = await tokensOf(u);
    const next = await refresh(tokens.refresh_token!);
    const warn = vi.spyOn(t.app.core.log, 'warn');
    try {
      await expectRefused(() => refresh(tokens.refresh_token!), 'invalid_grant', 'the refresh token has already been used; the grant is revoked');
      const asid = decodeJwt(next.access_token).payload.ov_asid as string;
      expect(warn).toHaveBeenCalledWith({ grantId: expect.any(String), apiSessionId: asid }, 'refresh token reused; grant revoked');
    } finally {
      warn.mockRestore();
    }
    await expectRefused(() => refresh(next.refresh_token!), 'invalid_grant', 'the refresh token is invalid');
    const later = await tokensOf(u);
    t.clock.advance(24 * 3_600_000);
    await expectRefused(() => refresh(later.refresh_token!), 'invalid_grant', 'the refresh token has expired');
  });
});

describe('id_token_hint', () => {
  const hint = (payload: Record<string, unknown>, header?: string, key = p.keys.current.privateKey, alg: 'ES256' | 'RS256' = 'ES256') =>
    signCompact(alg, key, header ?? p.keys.current.headers.jwt, payload);
  const claims = (over: Record<string, unknown> = {}) => ({ iss: issuer, aud: 'overlay', sub: 'identity-x', sid: 'session-x', ...over });
  const notOurs = 'id_token_hint is not an ID token of this provider';

  it('names the API session of an ID token of this provider, also with the client among several audiences', () => {
    expect(p.sessionOfIdToken(hint(claims()))).toEqual({ apiSessionId: 'session-x', identityId: 'identity-x' });
    expect(p.sessionOfIdToken(hint(claims({ aud: ['other', 'overlay'] })))).toEqual({ apiSessionId: 'session-x', identityId: 'identity-x' });
  });

  it('refuses anything else: not a JWS, another key, another algorithm, a forged signature', async () => {
    await expectRefused(() => p.sessionOfIdToken('not-a-token'), 'invalid_request', notOurs);
    await expectRefused(() => p.sessionOfIdToken(hint(claims(), encodeHeader({ alg: 'ES256', kid: 'another', typ: 'JWT' }))), 'invalid_request', notOurs);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    await expectRefused(() => p.sessionOfIdToken(hint(claims(), encodeHeader({ alg: 'RS256', kid: p.keys.current.kid, typ: 'JWT' }), rsa, 'RS256')), 'invalid_request', notOurs);
    const forger = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    await expectRefused(() => p.sessionOfIdToken(hint(claims(), undefined, forger)), 'invalid_request', notOurs);
    // Signed by the provider's own EC key, but naming RS256: the algorithm is the key's, not the token's choice.
    const confused = hint(claims(), encodeHeader({ alg: 'RS256', kid: p.keys.current.kid, typ: 'JWT' }), p.keys.current.privateKey, 'RS256');
    await expectRefused(() => p.sessionOfIdToken(confused), 'invalid_request', notOurs);
  });

  it('refuses another issuer, another audience, an access token, and one without sid or sub', async () => {
    for (const over of [
      { iss: 'https://evil.example.com/oidc' },
      { aud: 'another-client' },
      { aud: ['another-client'] },
      { ov_t: 'a' },
      { sid: undefined },
      { sub: 42 },
    ]) {
      await expectRefused(() => p.sessionOfIdToken(hint(claims(over))), 'invalid_request', notOurs);
    }
  });
});

describe('userinfo and end_session', () => {
  it('userinfo names the external id when there is one', async () => {
    const withId = await user({ externalId: 'ext-17' });
    expect(await p.userinfo((await exchangeFor(withId)).access_token)).toEqual({ sub: withId.id, name: withId.username, ov_ia: false, ov_eid: 'ext-17' });
    const without = await user();
    expect(Object.entries(await p.userinfo((await exchangeFor(without)).access_token))).toEqual([
      ['sub', without.id],
      ['name', without.username],
      ['ov_ia', false],
    ]);
    const empty = await user({ externalId: '' });
    expect(Object.keys(await p.userinfo((await exchangeFor(empty)).access_token))).toEqual(['sub', 'name', 'ov_ia']);
  });

  it('ends only an API session of the identity named', async () => {
    const u = await user();
    const asid = decodeJwt((await exchangeFor(u)).access_token).payload.ov_asid as string;
    expect(await p.endSession(asid, 'someone-else')).toBe(false);
    expect(await p.endSession('no-such-session', u.id)).toBe(false);
    expect(await p.endSession(asid, u.id)).toBe(true);
    expect(await p.endSession(asid, u.id)).toBe(false);
  });

  async function exchangeFor(u: { username: string; password: string }): Promise<TokenAnswer> {
    const { verifier, code } = await codeFor(u);
    return exchange(code, verifier);
  }
});

describe('the sweep', () => {
  it('drops expired authorization requests and codes, and lets the sessions of ended grants expire', async () => {
    const u = await user();
    const { verifier, code } = await codeFor(u);
    const asid = decodeJwt((await exchange(code, verifier)).access_token).payload.ov_asid as string;
    p.authorize(query(), redirects, '10.30.9.1');
    p.complete(completed(), issuer);
    const sessions = t.app.core.sessions;
    const grantEnd = (await p.grants.live()).get(asid)!;
    expect(sessions.expiresAt((await sessions.load(asid))!)).toBe(grantEnd);
    t.clock.set(grantEnd);
    await p.sweep();
    expect(p.requests.heldBy('10.30.9.1')).toBe(0);
    expect(codes().size).toBe(0);
    // Released: the session now ends with its idle timeout, long past.
    expect(sessions.expiresAt((await sessions.load(asid))!)).toBeLessThan(grantEnd);
  });

  it('runs every minute once started, logs a failure, and stops', async () => {
    const dir = tempDir();
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const provider = await OidcProvider.open({ ...t.app.core, config: { ...t.config, dataDir: dir.path } } as never);
      const failure = new Error('store gone');
      const sweep = vi.spyOn(provider.grants, 'sweep').mockRejectedValue(failure);
      const warn = vi.spyOn(t.app.core.log, 'warn');
      await provider.start();
      await vi.advanceTimersByTimeAsync(59_999);
      expect(sweep).not.toHaveBeenCalled();
      await vi.advanceTimersByTimeAsync(1);
      expect(sweep).toHaveBeenCalledTimes(1);
      expect(warn).toHaveBeenCalledWith({ err: failure }, 'OIDC sweep failed');
      provider.stop();
      await vi.advanceTimersByTimeAsync(120_000);
      expect(sweep).toHaveBeenCalledTimes(1);
      warn.mockRestore();
    } finally {
      vi.useRealTimers();
      dir.remove();
    }
  });

  it('when started, holds the API sessions of the live grants', async () => {
    const u = await user();
    const { verifier, code } = await codeFor(u);
    const asid = decodeJwt((await exchange(code, verifier)).access_token).payload.ov_asid as string;
    const sessions = t.app.core.sessions;
    const grantEnd = (await p.grants.live()).get(asid)!;
    // As after a restart: nothing is held.
    sessions.release(asid);
    expect(sessions.expiresAt((await sessions.load(asid))!)).toBeLessThan(grantEnd);
    const dir = tempDir();
    try {
      const provider = await OidcProvider.open({ ...t.app.core, config: { ...t.config, dataDir: dir.path } } as never);
      await provider.start();
      provider.stop();
      expect(sessions.expiresAt((await sessions.load(asid))!)).toBe(grantEnd);
    } finally {
      dir.remove();
    }
  });
});

describe('issuers from the configuration', () => {
  it('are the advertised hosts of every bind point, on every port bound or advertised', async () => {
    const dir = tempDir();
    try {
      const web = [
        { ...t.config.web[0]!, bindPoints: [{ interface: '0.0.0.0:1443', address: 'ctrl.example.com:1280' }] },
        { ...t.config.web[0]!, bindPoints: [{ interface: '[::]:2443', address: '[2001:db8::7]:2280' }] },
      ];
      const provider = await OidcProvider.open({ ...t.app.core, config: { ...t.config, dataDir: dir.path, web } } as never);
      // Its signing key is made under <dataDir>/oidc, at the time of the injected clock.
      expect(existsSync(join(dir.path, 'oidc', 'signing-keys.json'))).toBe(true);
      expect(provider.keys.current.createdAt).toBe(t.clock());
      for (const iss of ['https://ctrl.example.com:1280/oidc', 'https://ctrl.example.com:1443/oidc', 'https://[2001:db8::7]:2280/oidc', 'https://[2001:db8::7]:2443/oidc']) {
        expect(provider.issuers.accepts(iss), iss).toBe(true);
      }
      // An interface address is a port, not a host.
      for (const iss of ['https://0.0.0.0:1443/oidc', 'https://ctrl.example.com:9999/oidc', 'https://[::]:2443/oidc']) {
        expect(provider.issuers.accepts(iss), iss).toBe(false);
      }
      provider.stop();
    } finally {
      dir.remove();
    }
  });
});
