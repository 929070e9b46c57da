// Unit tests of the bearer-token check, with an injected clock, signing keys in a temp dir, the real
// revocation list and in-memory API sessions and identities: every claim that makes a token one of
// ours (key, type, signature, issuer, audience, times, subject), every way access ends, and what is
// remembered between requests.
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ApiSession, ApiSessions } from '../auth/api-sessions.js';
import { isDisabledAt, type IdentityDirectory, type IdentityState } from '../auth/identity-directory.js';
import { Revocations } from '../auth/revocations.js';
import { BearerError, BearerVerifier, CLOCK_SKEW_S } from './bearer.js';
import { Issuers } from './issuer.js';
import { encodeHeader, signCompact } from './jws.js';
import { SigningKeys } from './keys.js';
import { TokenIssuer } from './tokens.js';

const ISSUER = 'https://ctrl.example.com:1280/oidc';
const AUDIENCE = 'https://ctrl.example.com:1280';
/** Another address of the same controller: its tokens are accepted too, with their own audience. */
const OTHER_ISSUER = 'https://10.1.2.3:1280/oidc';
const T0 = 1_700_000_000_000;
const IAT = T0 / 1000;
const SESSION_END = T0 + 30 * 60_000;

let dir: string;
let keys: SigningKeys;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'overlay-bearer-'));
  keys = await SigningKeys.open(join(dir, 'shared'), { now: () => T0 });
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function session(id: string, identityId: string): ApiSession {
  return {
    id,
    tokenHash: `hash-${id}`,
    identityId,
    authenticatorId: null,
    authMethod: 'password',
    configTypes: [],
    ipAddress: null,
    createdAt: T0,
    lastActivityAt: T0,
    storedActivityAt: T0,
    isMfaRequired: false,
    isMfaComplete: false,
    mfaPassedAt: null,
    isCertExtendable: false,
    improperClientCertChain: false,
    tags: {},
  };
}

function identity(id: string, over: Partial<IdentityState> = {}): IdentityState {
  return { id, name: id, isAdmin: false, isDefaultAdmin: false, permissions: [], authPolicyId: 'default', disabled: false, disabledUntil: null, ...over };
}

/** A verifier over one identity `id-1` with API session `as-1` (in the store, not yet in memory). */
function setup(signingKeys: SigningKeys = keys) {
  let now = T0;
  const clock = () => now;
  const stored = new Map<string, ApiSession>([['as-1', session('as-1', 'id-1')]]);
  const inMemory = new Map<string, ApiSession>();
  const ends = new Map<string, number>();
  const loads: string[] = [];
  const sessions = {
    cached: (id: string) => inMemory.get(id),
    load: async (id: string) => {
      loads.push(id);
      const s = stored.get(id);
      if (s) inMemory.set(id, s);
      return s;
    },
    expiresAt: (s: ApiSession) => ends.get(s.id) ?? SESSION_END,
  } as unknown as ApiSessions;
  const people = new Map<string, IdentityState>([['id-1', identity('id-1')]]);
  const identities = {
    get: async (id: string) => people.get(id),
    isDisabled: (s: IdentityState) => isDisabledAt(s, now),
  } as unknown as IdentityDirectory;
  const revocations = new Revocations(clock);
  const issuers = new Issuers(['ctrl.example.com', '10.1.2.3'], [1280]);
  const verifier = new BearerVerifier(signingKeys, issuers, clock, sessions, identities, revocations);
  return {
    verifier,
    stored,
    inMemory,
    ends,
    loads,
    people,
    at: (ms: number) => (now = ms),
    revoke: (type: 'JTI' | 'API_SESSION' | 'IDENTITY', id: string, atMs: number) =>
      revocations.add({ id, type, createdAt: new Date(atMs).toISOString(), expiresAt: null }),
  };
}

/** The claims of an access token of ISSUER for `id-1` on `as-1`, issued at T0 for a minute. */
function claims(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    iss: ISSUER,
    sub: 'id-1',
    aud: ['overlay', AUDIENCE],
    exp: IAT + 60,
    iat: IAT,
    nbf: IAT,
    jti: 'jti-1',
    auth_time: IAT,
    amr: ['password'],
    scope: 'openid',
    client_id: 'overlay',
    ov_asid: 'as-1',
    ov_ia: false,
    ov_ct: [],
    ov_t: 'a',
    ov_ice: false,
    ...over,
  };
}

function token(payload: Record<string, unknown> = claims(), header: string = keys.current.headers.accessToken, key: KeyObject = keys.current.privateKey): string {
  return signCompact('ES256', key, header, payload);
}

/** A token whose payload is the given JSON text as written (numbers JSON.stringify cannot write). */
function rawToken(json: string): string {
  const input = `${keys.current.headers.accessToken}.${Buffer.from(json).toString('base64url')}`;
  const signature = sign('sha256', Buffer.from(input), { key: keys.current.privateKey, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}

async function refusal(p: Promise<unknown>): Promise<BearerError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof BearerError) return err;
    throw err;
  }
  throw new Error('expected the token to be refused');
}

async function expectRefused(p: Promise<unknown>, message: string, kind: 'invalid' | 'expired' = 'invalid'): Promise<void> {
  const err = await refusal(p);
  expect([err.name, err.kind, err.message]).toEqual(['BearerError', kind, message]);
}

describe('a token of this controller', () => {
  it('stands for its identity and API session, until its exp', async () => {
    const s = setup();
    const issued = new TokenIssuer(keys, () => T0, { accessTokenDuration: 60_000, idTokenDuration: 60_000 }).issue(ISSUER, {
      identityId: 'id-1',
      name: 'id-1',
      isAdmin: false,
      apiSessionId: 'as-1',
      configTypes: [],
      isCertExtendable: false,
      amr: ['password'],
      authTime: T0,
      scopes: ['openid'],
    });
    const principal = await s.verifier.verify(issued.accessToken);
    expect(principal.identity.id).toBe('id-1');
    expect(principal.session.id).toBe('as-1');
    expect(principal.claims).toMatchObject({ sub: 'id-1', ov_asid: 'as-1', jti: issued.jti });
    expect(principal.expiresAt).toBe(issued.accessExpiresAt);
    // Its ID token, signed by the same key, is not an access token.
    await expectRefused(s.verifier.verify(issued.idToken), 'the token is not an access token');
  });

  it('is accepted without a typ header, and from another address of the controller with that audience', async () => {
    const s = setup();
    const bare = encodeHeader({ alg: 'ES256', kid: keys.current.kid });
    expect((await s.verifier.verify(token(claims(), bare))).claims.jti).toBe('jti-1');
    const other = token(claims({ iss: OTHER_ISSUER, aud: ['overlay', 'https://10.1.2.3:1280'], jti: 'jti-2' }));
    expect((await s.verifier.verify(other)).claims.iss).toBe(OTHER_ISSUER);
  });
});

describe('what makes a token one of ours', () => {
  it('a JWT signed by a key of this controller, with the algorithm of that key', async () => {
    const s = setup();
    await expectRefused(s.verifier.verify('not-a-jwt'), 'the token is not a JWT');
    const unknownKid = encodeHeader({ alg: 'ES256', kid: 'another-kid', typ: 'at+jwt' });
    await expectRefused(s.verifier.verify(token(claims(), unknownKid)), 'the token is not signed by a key of this controller');
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    const otherAlg = encodeHeader({ alg: 'RS256', kid: keys.current.kid, typ: 'at+jwt' });
    await expectRefused(
      s.verifier.verify(signCompact('RS256', rsa, otherAlg, claims())),
      'the token is not signed by a key of this controller',
    );
    // Signed by the controller's own EC key but naming RS256 (a DER signature that key verifies):
    // the algorithm is the key's, not the token's choice.
    const confused = signCompact('RS256', keys.current.privateKey, otherAlg, claims());
    await expectRefused(s.verifier.verify(confused), 'the token is not signed by a key of this controller');
  });

  it('a signature by that very key: another key under its kid is refused', async () => {
    const s = setup();
    const forger = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    await expectRefused(s.verifier.verify(token(claims(), undefined, forger)), 'the token signature is not valid');
  });

  it('an access token: typ at+jwt when there is one, and ov_t "a"', async () => {
    const s = setup();
    const idHeader = encodeHeader({ alg: 'ES256', kid: keys.current.kid, typ: 'JWT' });
    await expectRefused(s.verifier.verify(token(claims(), idHeader)), 'the token is not an access token');
    await expectRefused(s.verifier.verify(token(claims({ ov_t: 'i' }))), 'the token is not an access token');
    await expectRefused(s.verifier.verify(token(claims({ ov_t: undefined }))), 'the token is not an access token');
  });

  it('a TOTP token is no access token, whatever its header says', async () => {
    const s = setup();
    const { token: totp, claims: made } = new TokenIssuer(keys, () => T0, { accessTokenDuration: 60_000, idTokenDuration: 60_000 }).totpToken({
      iss: ISSUER,
      sub: 'id-1',
      aud: ['overlay', AUDIENCE],
      ov_asid: 'as-1',
    });
    expect(made.ov_t).toBe('t');
    await expectRefused(s.verifier.verify(totp), 'the token is not an access token');
    // Its claims under an access token's header: refused for its type claim.
    await expectRefused(s.verifier.verify(token({ ...made })), 'the token is not an access token');
  });

  it('an issuer naming this controller', async () => {
    const s = setup();
    for (const iss of ['https://evil.example.com:1280/oidc', 'https://ctrl.example.com:9999/oidc', undefined]) {
      await expectRefused(s.verifier.verify(token(claims({ iss }))), 'the token issuer is not this controller');
    }
  });

  it('an audience of both the client and the origin of its own issuer', async () => {
    const s = setup();
    const refused = 'the token audience is not this controller';
    await expectRefused(s.verifier.verify(token(claims({ aud: ['overlay'] }))), refused);
    await expectRefused(s.verifier.verify(token(claims({ aud: [AUDIENCE] }))), refused);
    await expectRefused(s.verifier.verify(token(claims({ aud: ['another-client', AUDIENCE] }))), refused);
    // For another address of this controller than the issuer's: a token of one is not one of the other.
    await expectRefused(s.verifier.verify(token(claims({ aud: ['overlay', 'https://10.1.2.3:1280'] }))), refused);
    // One string holding both is not an audience of both.
    await expectRefused(s.verifier.verify(token(claims({ aud: `overlay ${AUDIENCE}` }))), refused);
  });

  it('numeric, finite exp, iat and nbf', async () => {
    const s = setup();
    for (const name of ['exp', 'iat', 'nbf']) {
      await expectRefused(s.verifier.verify(token(claims({ [name]: undefined }))), `the token has no valid ${name}`);
      await expectRefused(s.verifier.verify(token(claims({ [name]: String(IAT + 60) }))), `the token has no valid ${name}`);
    }
    // 1e400 is a JSON number that reads as Infinity: a token that would never expire.
    const endless = JSON.stringify(claims()).replace(/"exp":\d+/, '"exp":1e400');
    await expectRefused(s.verifier.verify(rawToken(endless)), 'the token has no valid exp');
    const early = JSON.stringify(claims()).replace(/"nbf":\d+/, '"nbf":-1e400');
    await expectRefused(s.verifier.verify(rawToken(early)), 'the token has no valid nbf');
  });

  it('a non-empty sub, jti and ov_asid', async () => {
    const s = setup();
    for (const name of ['sub', 'jti', 'ov_asid']) {
      for (const value of [undefined, '', 42]) {
        await expectRefused(s.verifier.verify(token(claims({ [name]: value }))), `the token has no ${name}`);
      }
    }
  });
});

describe('times, with the allowed clock skew', () => {
  it('nbf may be up to the skew ahead of the clock; beyond it the token is not valid yet', async () => {
    const s = setup();
    const t = token(claims({ nbf: IAT + CLOCK_SKEW_S }));
    s.at(T0);
    expect((await s.verifier.verify(t)).claims.nbf).toBe(IAT + CLOCK_SKEW_S);
    s.at(T0 - 1);
    await expectRefused(s.verifier.verify(t), 'the token is not valid yet');
  });

  it('exp may be less than the skew behind the clock; from then on the token has expired', async () => {
    const s = setup();
    const t = token();
    s.at((IAT + 60 + CLOCK_SKEW_S) * 1000 - 1);
    expect((await s.verifier.verify(t)).expiresAt).toBe((IAT + 60) * 1000);
    s.at((IAT + 60 + CLOCK_SKEW_S) * 1000);
    await expectRefused(s.verifier.verify(t), 'the token has expired', 'expired');
  });
});

describe('ending access', () => {
  it('a JTI revocation refuses that token, whenever it was issued', async () => {
    const s = setup();
    const t = token();
    const other = token(claims({ jti: 'jti-2' }));
    s.revoke('JTI', 'jti-1', T0 - 60_000);
    await expectRefused(s.verifier.verify(t), 'the token has been revoked');
    expect((await s.verifier.verify(other)).claims.jti).toBe('jti-2');
  });

  for (const [type, id] of [
    ['API_SESSION', 'as-1'],
    ['IDENTITY', 'id-1'],
  ] as const) {
    it(`an ${type} revocation refuses the tokens of logins made no later than it, not those made after`, async () => {
      const s = setup();
      s.revoke(type, id, T0 - 1);
      // Its API session was made a millisecond after the revocation: still good.
      expect((await s.verifier.verify(token())).claims.sub).toBe('id-1');
      s.revoke(type, id, T0);
      await expectRefused(s.verifier.verify(token(claims({ jti: 'jti-2' }))), 'the token has been revoked');
    });
  }

  // Tokens of a login made in the same second as an IDENTITY revocation, after it, were refused:
  // their whole-second iat read as issued before it.
  it('a revocation is judged by when the login was made, in milliseconds, not by the whole-second iat', async () => {
    const s = setup();
    s.revoke('IDENTITY', 'id-1', T0 + 100);
    s.stored.set('as-later', { ...session('as-later', 'id-1'), createdAt: T0 + 250 });
    s.stored.set('as-earlier', { ...session('as-earlier', 'id-1'), createdAt: T0 + 50 });
    s.at(T0 + 300);
    expect((await s.verifier.verify(token(claims({ ov_asid: 'as-later', jti: 'jti-later' })))).session.id).toBe('as-later');
    await expectRefused(s.verifier.verify(token(claims({ ov_asid: 'as-earlier', jti: 'jti-earlier' }))), 'the token has been revoked');
  });

  it('the API session must exist, be the subject’s and be live', async () => {
    const s = setup();
    const ended = 'the API session of the token has ended';
    await expectRefused(s.verifier.verify(token(claims({ ov_asid: 'as-unknown' }))), ended);
    s.stored.set('as-2', session('as-2', 'id-2'));
    await expectRefused(s.verifier.verify(token(claims({ ov_asid: 'as-2' }))), ended);
    const t = token();
    s.ends.set('as-1', T0 + 10_000);
    s.at(T0 + 9_999);
    expect((await s.verifier.verify(t)).session.id).toBe('as-1');
    s.at(T0 + 10_000);
    await expectRefused(s.verifier.verify(t), ended);
  });

  it('the identity must exist and not be disabled (a disabling that has run out no longer counts)', async () => {
    const s = setup();
    const t = token();
    s.people.set('id-1', identity('id-1', { disabled: true, disabledUntil: T0 + 1_000 }));
    await expectRefused(s.verifier.verify(t), 'the identity is disabled');
    s.at(T0 + 1_000);
    expect((await s.verifier.verify(t)).identity.id).toBe('id-1');
    s.people.delete('id-1');
    await expectRefused(s.verifier.verify(t), 'the identity of the token no longer exists');
  });
});

describe('what is remembered', () => {
  it('an API session is read from the store once, then from memory', async () => {
    const s = setup();
    const t = token();
    await s.verifier.verify(t);
    await s.verifier.verify(t);
    expect(s.loads).toEqual(['as-1']);
    // Evicted from memory, it is read again, not taken for deleted.
    s.inMemory.clear();
    expect((await s.verifier.verify(t)).session.id).toBe('as-1');
    expect(s.loads).toEqual(['as-1', 'as-1']);
  });

  it('an API session the store does not have is not asked for again; nor one told deleted', async () => {
    const s = setup();
    const missing = token(claims({ ov_asid: 'as-gone' }));
    await refusal(s.verifier.verify(missing));
    await refusal(s.verifier.verify(missing));
    expect(s.loads).toEqual(['as-gone']);
    // Deleted while not in memory: refused without a read, though the store (as read here) still has it.
    s.verifier.sessionDeleted('as-1');
    await expectRefused(s.verifier.verify(token()), 'the API session of the token has ended');
    expect(s.loads).toEqual(['as-gone']);
    // A reset forgets what it knew: the store is asked again.
    s.verifier.reset();
    expect((await s.verifier.verify(token())).session.id).toBe('as-1');
    expect(s.loads).toEqual(['as-gone', 'as-1']);
  });

  it('a deleted API session from the change feed counts; other changes do not', async () => {
    const s = setup();
    s.verifier.onChange({ collection: 'api-sessions', kind: 'update', id: 'as-1' });
    s.verifier.onChange({ collection: 'identities', kind: 'delete', id: 'as-1' });
    expect((await s.verifier.verify(token())).session.id).toBe('as-1');
    s.inMemory.clear();
    s.verifier.onChange({ collection: 'api-sessions', kind: 'delete', id: 'as-1' });
    await expectRefused(s.verifier.verify(token(claims({ jti: 'jti-2' }))), 'the API session of the token has ended');
  });

  it('a token is checked once; a reset checks it again', async () => {
    const s = setup();
    const get = vi.spyOn(keys, 'get');
    try {
      const t = token();
      expect(s.verifier.claims(t)).toBe(s.verifier.claims(t));
      expect(get).toHaveBeenCalledTimes(1);
      s.verifier.reset();
      s.verifier.claims(t);
      expect(get).toHaveBeenCalledTimes(2);
    } finally {
      get.mockRestore();
    }
    expect(s.verifier.name).toBe('bearer-tokens');
  });

  it('a key leaving the set takes the tokens it signed with it, though they were checked before', async () => {
    const own = await SigningKeys.open(join(dir, 'rotated'), { now: () => T0 });
    const s = setup(own);
    const t = signCompact('ES256', own.current.privateKey, own.current.headers.accessToken, claims());
    expect((await s.verifier.verify(t)).claims.jti).toBe('jti-1');
    // The previous key is still accepted.
    await own.rotate('ES256', T0);
    expect((await s.verifier.verify(t)).claims.jti).toBe('jti-1');
    await own.rotate('ES256', T0);
    await expectRefused(s.verifier.verify(t), 'the token is not signed by a key of this controller');
  });
});
