// Unit tests of the provider's pure parts: the state machine table, issuers and the compact JWS
// checks (redirect URI patterns: redirects.test.ts).
import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { compactVerify, importJWK } from 'jose';
import { AuthRequests, nextState, TRANSITIONS, type PrimaryOutcome } from './flow.js';
import { Issuers } from './issuer.js';
import { encodeHeader, parseCompact, signCompact, verifySignature } from './jws.js';
import type { AuthPolicyRules } from '../resources/auth-policies.js';

const rules = (requireTotp: boolean, requireExtJwtSigner: string | null = null): AuthPolicyRules =>
  ({ primary: {}, secondary: { requireTotp, requireExtJwtSigner } }) as unknown as AuthPolicyRules;

const outcome = (r: AuthPolicyRules): PrimaryOutcome => ({
  identityId: 'i1',
  authenticatorId: 'a1',
  method: 'password',
  rules: r,
  isCertExtendable: false,
  ipAddress: '127.0.0.1',
  isTotpEnrolled: false,
  improperClientCertChain: false,
});

const params = { clientId: 'overlay', redirectUri: 'http://127.0.0.1/cb', scopes: ['openid'], codeChallenge: 'c'.repeat(43), configTypes: [] };

describe('the authorization request state machine', () => {
  it('is the table of the interface document', () => {
    expect(nextState('started', 'primary-ok', false)).toBe('complete');
    expect(nextState('started', 'primary-ok', true)).toBe('partial');
    expect(nextState('started', 'primary-failed', false)).toBe('started');
    expect(nextState('partial', 'factor-ok', false)).toBe('complete');
    expect(nextState('partial', 'factor-ok', true)).toBe('partial');
    expect(nextState('partial', 'factor-failed', true)).toBe('partial');
    expect(nextState('started', 'factor-ok', false)).toBeUndefined();
    for (const on of ['primary-ok', 'primary-failed', 'factor-ok', 'factor-failed'] as const) {
      expect(nextState('complete', on, false)).toBeUndefined();
    }
    // Every row is reachable and no two rows overlap.
    const keys = TRANSITIONS.map((t) => `${t.from}/${t.on}/${String(t.outstanding)}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('runs Started → Partially authenticated → Complete with the factors of the policy', () => {
    let now = 1_000;
    const requests = new AuthRequests(() => now);
    const r = requests.start(params, '10.0.0.1');
    expect(r.status).toBe('started');
    requests.primaryFailed(r);
    expect(r.status).toBe('started');
    requests.primarySucceeded(r, outcome(rules(true, 'signer')));
    expect(r.status).toBe('partial');
    expect(r.outstanding).toEqual(['totp', 'ext-jwt']);
    expect(requests.queries(r).map((q) => q.typeId)).toEqual(['TOTP', 'EXT-JWT']);
    expect(requests.headers(r)).toEqual({ 'totp-required': 'true' });
    requests.factorFailed(r);
    expect(r.status).toBe('partial');
    requests.satisfy(r, 'totp', 'totp', r.primary);
    expect(r.status).toBe('partial');
    expect(requests.headers(r)).toEqual({});
    expect(() => requests.satisfy(r, 'totp', 'totp', r.primary)).toThrow(/not outstanding/);
    requests.satisfy(r, 'ext-jwt', 'ejs:signer', r.primary);
    expect(r.status).toBe('complete');
    expect(r.amr).toEqual(['password', 'totp', 'ejs:signer']);
    expect(() => requests.primarySucceeded(r, outcome(rules(false)))).toThrow(/complete/);
    now += 10 * 60_000;
    expect(() => requests.get(r.id)).toThrow(/expired/);
  });

  it('a policy without secondary factors completes on the primary login', () => {
    const requests = new AuthRequests(() => 0);
    const r = requests.start(params, '10.0.0.1');
    requests.primarySucceeded(r, outcome(rules(false)));
    expect(r.status).toBe('complete');
    expect(r.amr).toEqual(['password']);
  });
});

describe('issuers', () => {
  const issuers = new Issuers(['ctrl.example.com', '10.1.2.3'], [1280, 443]);
  it('follow a Host that names this controller', () => {
    expect(issuers.forHost('ctrl.example.com:1280', 'fallback:1')).toBe('https://ctrl.example.com:1280/oidc');
    expect(issuers.forHost('CTRL.example.com:1280', 'fallback:1')).toBe('https://CTRL.example.com:1280/oidc');
    expect(issuers.forHost('ctrl.example.com', 'fallback:1')).toBe('https://ctrl.example.com/oidc');
    expect(issuers.forHost('localhost:1280', 'fallback:1')).toBe('https://localhost:1280/oidc');
    expect(issuers.forHost('10.1.2.3:1280', 'fallback:1')).toBe('https://10.1.2.3:1280/oidc');
    expect(issuers.forHost('[::1]:1280', 'fallback:1')).toBe('https://[::1]:1280/oidc');
  });
  it('fall back to the advertised address otherwise', () => {
    for (const host of ['evil.example.com:1280', 'ctrl.example.com:9999', 'ctrl.example.com:1280/x', 'a b', '', undefined]) {
      expect(issuers.forHost(host, 'ctrl.example.com:1280')).toBe('https://ctrl.example.com:1280/oidc');
    }
  });
  it('accept only issuers of this controller', () => {
    expect(issuers.accepts('https://ctrl.example.com:1280/oidc')).toBe(true);
    expect(issuers.accepts('https://localhost:443/oidc')).toBe(true);
    expect(issuers.accepts('http://ctrl.example.com:1280/oidc')).toBe(false);
    expect(issuers.accepts('https://ctrl.example.com:1280/oidc/')).toBe(false);
    expect(issuers.accepts('https://evil.example.com:1280/oidc')).toBe(false);
    // Only a string: what would read as a trusted issuer once turned into text is not one.
    expect(issuers.accepts(['https://ctrl.example.com:1280/oidc'])).toBe(false);
    expect(issuers.accepts({ toString: () => 'https://ctrl.example.com:1280/oidc' })).toBe(false);
    expect(issuers.accepts(`https://${'a'.repeat(400)}/oidc`)).toBe(false);
    expect(issuers.accepts('https://x@ctrl.example.com:1280/oidc')).toBe(false);
    expect(issuers.accepts(42)).toBe(false);
    expect(issuers.accepts('xhttps://ctrl.example.com:1280/oidc')).toBe(false);
    expect(Issuers.audience('https://ctrl.example.com:1280/oidc')).toBe('https://ctrl.example.com:1280');
    // Judged the same the second time (from what is kept) and after a reset.
    expect(issuers.accepts('https://ctrl.example.com:1280/oidc')).toBe(true);
    issuers.reset();
    expect(issuers.accepts('https://evil.example.com:1280/oidc')).toBe(false);
    // Only a string: what would read as a trusted issuer once turned into text is not one.
    expect(issuers.accepts(['https://ctrl.example.com:1280/oidc'])).toBe(false);
    expect(issuers.accepts({ toString: () => 'https://ctrl.example.com:1280/oidc' })).toBe(false);
    expect(issuers.accepts(`https://${'a'.repeat(400)}/oidc`)).toBe(false);
    expect(issuers.name).toBe('oidc-issuers');
  });
  it('read a Host as a URL authority: an IPv6 literal without a port, no bad port', () => {
    expect(issuers.forHost('[::1]', 'fallback:1')).toBe('https://[::1]/oidc');
    for (const host of ['ctrl.example.com:99999', 'ctrl.example.com:0', '[::1', 'ctrl.example.com:1280x']) {
      expect(issuers.forHost(host, 'fallback:1'), host).toBe('https://fallback:1/oidc');
    }
  });
});

describe('compact JWS', () => {
  it('signs what jose verifies, and checks what it signs', async () => {
    for (const [alg, key] of [
      ['ES256', generateKeyPairSync('ec', { namedCurve: 'P-256' })],
      ['RS256', generateKeyPairSync('rsa', { modulusLength: 2048 })],
    ] as const) {
      const token = signCompact(alg, key.privateKey, encodeHeader({ alg, kid: 'k1', typ: 'JWT' }), { sub: 'x' });
      const pub = await importJWK(key.publicKey.export({ format: 'jwk' }) as never, alg);
      const { payload, protectedHeader } = await compactVerify(token, pub);
      expect(JSON.parse(new TextDecoder().decode(payload))).toEqual({ sub: 'x' });
      expect(protectedHeader).toEqual({ alg, kid: 'k1', typ: 'JWT' });
      const parsed = parseCompact(token)!;
      expect(verifySignature(parsed, key.publicKey)).toBe(true);
      const other = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      if (alg === 'ES256') expect(verifySignature(parsed, other.publicKey)).toBe(false);
    }
  });

  it('refuses what is malformed or asks for more than we use', () => {
    const b = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    for (const token of [
      '',
      'a.b',
      'a.b.c.d',
      '..',
      `${b({ alg: 'none', kid: 'k' })}.${b({})}.`,
      `${b({ alg: 'HS256', kid: 'k' })}.${b({})}.c2ln`,
      `${b({ alg: 'ES256' })}.${b({})}.c2ln`,
      `${b({ alg: 'ES256', kid: 'k', crit: ['x'] })}.${b({})}.c2ln`,
      `${b({ alg: 'ES256', kid: 'k', jwk: {} })}.${b({})}.c2ln`,
      `${b({ alg: 'ES256', kid: 'k' })}.${b([1])}.c2ln`,
      `${b({ alg: 'ES256', kid: 'k' })}.not+base64.c2ln`,
      `${b({ alg: 'ES256', kid: 'k' })}.${b({})}.${'A'.repeat(9000)}`,
    ]) {
      expect(parseCompact(token)).toBeUndefined();
    }
  });
});
