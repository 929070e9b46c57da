// The provider's tokens claim by claim, with signing keys in a temp dir and an injected clock: the
// access token, the ID token (with and without a nonce) and the TOTP token, their headers, lifetimes
// to the second, and signatures of the current key.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCompact, verifySignature } from './jws.js';
import { SigningKeys } from './keys.js';
import { CLIENT_ID, TokenIssuer, type TokenSubject } from './tokens.js';

const ISSUER = 'https://ctrl.example.com:1280/oidc';
const AUDIENCE = 'https://ctrl.example.com:1280';
// Not on a second boundary: times in claims are whole seconds, rounded down.
const T0 = 1_700_000_000_789;
const NOW_S = 1_700_000_000;

let dir: string;
let keys: SigningKeys;
let issuer: TokenIssuer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'overlay-tokens-'));
  keys = await SigningKeys.open(dir, { now: () => T0 });
  issuer = new TokenIssuer(keys, () => T0, { accessTokenDuration: 1_800_999, idTokenDuration: 3_600_500 });
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const subject: TokenSubject = {
  identityId: 'identity-1',
  name: 'Alice',
  isAdmin: true,
  apiSessionId: 'session-1',
  configTypes: ['ct-1'],
  isCertExtendable: true,
  amr: ['password', 'totp'],
  authTime: T0 - 10_500,
  scopes: ['openid', 'offline_access'],
};

/** Header and claims of a token signed by the current key. */
function opened(token: string) {
  const parsed = parseCompact(token)!;
  expect(verifySignature(parsed, keys.current.publicKey)).toBe(true);
  return { header: parsed.header, claims: parsed.payload };
}

describe('issue', () => {
  it('makes an access token of the current key with every claim of the interface', () => {
    const issued = issuer.issue(ISSUER, subject);
    const { header, claims } = opened(issued.accessToken);
    expect(header).toEqual({ alg: 'ES256', kid: keys.current.kid, typ: 'at+jwt' });
    expect(claims).toEqual({
      iss: ISSUER,
      sub: 'identity-1',
      aud: [CLIENT_ID, AUDIENCE],
      exp: NOW_S + 1800,
      iat: NOW_S,
      nbf: NOW_S,
      jti: issued.jti,
      auth_time: NOW_S - 10,
      amr: ['password', 'totp'],
      scope: 'openid offline_access',
      client_id: 'overlay',
      ov_asid: 'session-1',
      ov_ia: true,
      ov_ct: ['ct-1'],
      ov_t: 'a',
      ov_ice: true,
    });
    expect(issued.jti).toMatch(/^[0-9a-f-]{36}$/);
    expect(issued.expiresIn).toBe(1800);
    expect(issued.accessExpiresAt).toBe((NOW_S + 1800) * 1000);
    expect(issuer.issue(ISSUER, subject).jti).not.toBe(issued.jti);
  });

  it('makes an ID token for the client, with the nonce when the request had one', () => {
    const { header, claims } = opened(issuer.issue(ISSUER, subject).idToken);
    expect(header).toEqual({ alg: 'ES256', kid: keys.current.kid, typ: 'JWT' });
    expect(claims).toEqual({
      iss: ISSUER,
      sub: 'identity-1',
      aud: 'overlay',
      azp: 'overlay',
      exp: NOW_S + 3600,
      iat: NOW_S,
      auth_time: NOW_S - 10,
      amr: ['password', 'totp'],
      name: 'Alice',
      ov_ia: true,
      sid: 'session-1',
    });
    expect(opened(issuer.issue(ISSUER, { ...subject, nonce: 'nonce-1' }).idToken).claims.nonce).toBe('nonce-1');
  });
});

describe('totpToken', () => {
  it('carries the access token’s issuer, subject, audience and API session, and lives as long', () => {
    const access = { iss: ISSUER, sub: 'identity-1', aud: [CLIENT_ID, AUDIENCE], ov_asid: 'session-1' };
    const made = issuer.totpToken(access);
    const { header, claims } = opened(made.token);
    expect(header).toEqual({ alg: 'ES256', kid: keys.current.kid, typ: 'JWT' });
    expect(claims).toEqual({ ...access, iat: NOW_S, exp: NOW_S + 1800, jti: made.claims.jti, ov_t: 't' });
    expect(made.claims).toEqual(claims);
    expect(made.claims.jti).toMatch(/^[0-9a-f-]{36}$/);
    // The audience is a copy: changing the caller's list later changes nothing.
    access.aud.push('other');
    expect(made.claims.aud).toEqual([CLIENT_ID, AUDIENCE]);
  });
});
