// Verification of external JWTs: every refusal with the check it names, the key sources (certificate,
// JWKS), the refetch of an unknown kid at most once per 30 s, a failed fetch not retried sooner, the
// verifications kept (and their time checked at each use), and the change feed dropping a signer's
// record and keys, also while a read or a fetch is under way.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { generateKeyPairSync, KeyObject, sign as signData, webcrypto } from 'node:crypto';
import { exportJWK, SignJWT, type JWK } from 'jose';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  algorithmsOf,
  claimAt,
  ExternalJwtSigners,
  ExtJwtError,
  JWKS_REFETCH_INTERVAL_MS,
  MAX_EXT_JWT_LENGTH,
  MAX_VERIFIED_LENGTH,
  type ExternalJwtSignersDeps,
  type Signer,
} from './ext-jwt.js';
import { JwksFetchError } from './jwks-fetch.js';

const NOW = Date.parse('2026-03-01T12:00:00Z');
const ISSUER = 'https://idp.example.com';

function signer(over: Partial<Signer> = {}): Signer {
  return {
    id: 'signer-1',
    createdAt: '2026-01-01T00:00:00Z',
    updatedAt: '2026-01-01T00:00:00Z',
    tags: {},
    name: 'idp',
    issuer: ISSUER,
    audience: 'overlay',
    enabled: true,
    certPem: null,
    jwksEndpoint: 'https://idp.example.com/jwks',
    kid: null,
    claimsProperty: null,
    useExternalId: false,
    clientId: null,
    externalAuthUrl: null,
    scopes: [],
    targetToken: 'ACCESS',
    enrollToCertEnabled: false,
    enrollToTokenEnabled: false,
    enrollAuthPolicyId: '',
    enrollNameClaimsSelector: '',
    enrollAttributeClaimsSelector: '',
    commonName: null,
    fingerprint: null,
    notBefore: null,
    notAfter: null,
    ...over,
  } as Signer;
}

const ec = () => generateKeyPairSync('ec', { namedCurve: 'P-256' });
const keyA = ec();
const keyB = ec();
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });

async function jwk(publicKey: KeyObject, kid: string): Promise<JWK> {
  return { ...(await exportJWK(publicKey)), kid, use: 'sig' };
}

interface TokenOptions {
  key?: KeyObject;
  alg?: string;
  kid?: string | null;
  claims?: Record<string, unknown>;
  exp?: number | null;
}

async function token(o: TokenOptions = {}): Promise<string> {
  const claims = { iss: ISSUER, aud: 'overlay', sub: 'identity-1', ...o.claims };
  const jwt = new SignJWT(claims).setProtectedHeader({ alg: o.alg ?? 'ES256', ...(o.kid === null ? {} : { kid: o.kid ?? 'a' }) }).setIssuedAt(Math.floor(NOW / 1000));
  if (o.exp !== null) jwt.setExpirationTime(o.exp ?? Math.floor(NOW / 1000) + 300);
  return jwt.sign(o.key ?? keyA.privateKey);
}

const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

function unsigned(claims: Record<string, unknown>): string {
  return `${part({ alg: 'none' })}.${part(claims)}.`;
}

/** A token signed by hand, with a header jose would not write: ES256 with an EC key, RS256 with an RSA one. */
function handSigned(header: Record<string, unknown>, claims: Record<string, unknown>, key: KeyObject = keyA.privateKey): string {
  const input = `${part(header)}.${part(claims)}`;
  const signature = signData('sha256', Buffer.from(input), key.asymmetricKeyType === 'ec' ? { key, dsaEncoding: 'ieee-p1363' } : key);
  return `${input}.${signature.toString('base64url')}`;
}

/** A valid token of key a exactly `length` characters long (padded in its header and claims). */
async function tokenOfLength(length: number, claims: Record<string, unknown> = {}): Promise<string> {
  const exp = Math.floor(NOW / 1000) + 300;
  const make = (headerPad: number, claimPad: number) =>
    new SignJWT({ iss: ISSUER, aud: 'overlay', sub: 'identity-1', pad: 'p'.repeat(claimPad), ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: 'a', pad: 'h'.repeat(headerPad) })
      .setExpirationTime(exp)
      .sign(keyA.privateKey);
  const base = (await make(0, 0)).length;
  const claimPad = Math.max(0, Math.floor(((length - base) * 3) / 4) - 4);
  for (let headerPad = 0; headerPad < 4; headerPad++) {
    for (let extra = 0; extra < 12; extra++) {
      const t = await make(headerPad, claimPad + extra);
      if (t.length === length) return t;
    }
  }
  throw new Error(`no token of length ${length}`);
}

let now: number;
let served: { keys: JWK[] } | Error;
let fetches: number;
let records: Signer[];

async function serve(): Promise<{ keys: Record<string, unknown>[] }> {
  fetches++;
  if (served instanceof Error) throw served;
  return served as { keys: Record<string, unknown>[] };
}

function verifier(over: Partial<ExternalJwtSignersDeps> = {}): ExternalJwtSigners {
  return new ExternalJwtSigners({ loadSigners: async () => records, clock: () => now, fetchJwks: serve, ...over });
}

async function refusal(work: Promise<unknown>): Promise<ExtJwtError> {
  const err = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ExtJwtError);
  expect((err as Error).name).toBe('ExtJwtError');
  expect(['missing', 'invalid', 'expired']).toContain((err as ExtJwtError).kind);
  return err as ExtJwtError;
}

/** Calls that wait, while `hold` is set, until the test lets them go one by one. */
class Gate {
  hold = false;
  private readonly waiting: (() => void)[] = [];
  async pass(): Promise<void> {
    if (this.hold) await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  get queued(): number {
    return this.waiting.length;
  }
  release(): void {
    this.waiting.shift()!();
  }
}

/** Lets pending work run until `done` holds (a bounded number of turns of the event loop). */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((resolve) => setImmediate(resolve));
  expect(done()).toBe(true);
}

const signerChange = (id: string) => ({ collection: 'external-jwt-signers' as const, kind: 'update' as const, id });

/**
 * A verifier that has verified (and kept) `kept`, after which the JWKS was fetched again without key
 * a: checked afresh, a token of key a is refused, so accepting `kept` means it was kept.
 */
async function keptThenRotated(kept: string, v = verifier()): Promise<ExternalJwtSigners> {
  expect((await v.verify(kept)).subject).toBe('identity-1');
  served = { keys: [await jwk(keyB.publicKey, 'b')] };
  now += JWKS_REFETCH_INTERVAL_MS;
  await v.verify(await token({ key: keyB.privateKey, kid: 'b' }));
  expect(fetches).toBe(2);
  expect((await refusal(v.verify(await token({ claims: { jti: 'fresh' } })))).message).toBe("no key of the signer's JWKS matches the token's kid and alg");
  return v;
}

beforeEach(async () => {
  now = NOW;
  fetches = 0;
  served = { keys: [await jwk(keyA.publicKey, 'a')] };
  records = [signer()];
});

describe('a JWKS signer', () => {
  it('accepts a token of its key and maps the claim', async () => {
    const v = verifier();
    const ok = await v.verify(await token());
    expect(ok.signer.id).toBe('signer-1');
    expect(ok.subject).toBe('identity-1');
    expect(fetches).toBe(1);
    await v.verify(await token());
    expect(fetches).toBe(1);
  });

  it.each<[string, () => Promise<string>, string, string?]>([
    ['a foreign key', () => token({ key: keyB.privateKey }), 'signature does not verify'],
    ['a wrong audience', () => token({ claims: { aud: 'someone-else' } }), 'audience (aud) does not contain overlay'],
    ['an expired token', () => token({ exp: Math.floor(NOW / 1000) - 120 }), 'has expired', 'expired'],
    ['a token not valid yet', () => token({ claims: { nbf: Math.floor(NOW / 1000) + 600 } }), 'not valid yet (nbf)'],
    ['a token without exp', () => token({ exp: null }), 'no expiry (exp)'],
    ['a token without the mapped claim', () => token({ claims: { sub: undefined } }), 'claim sub (claimsProperty) is missing'],
    ['alg none', async () => unsigned({ iss: ISSUER, aud: 'overlay', sub: 'x', exp: Math.floor(NOW / 1000) + 60 }), 'alg none is refused'],
    ['an HMAC algorithm', async () => new SignJWT({ iss: ISSUER, aud: 'overlay', sub: 'x' }).setProtectedHeader({ alg: 'HS256', kid: 'a' }).setExpirationTime(Math.floor(NOW / 1000) + 60).sign(new TextEncoder().encode('k'.repeat(32))), 'HS256 is not accepted'],
    ['a token that is no JWT', async () => 'not.a.jwt', 'not a well-formed signed JWT'],
    ['an unknown issuer', () => token({ claims: { iss: 'https://evil.example.com' } }), 'no external JWT signer has the issuer https://evil.example.com'],
    ['an algorithm its key does not have', () => token({ key: rsa.privateKey, alg: 'RS256' }), 'no key of the signer\'s JWKS matches'],
  ])('refuses %s, saying so', async (_what, make, reason, kind = 'invalid') => {
    const err = await refusal(verifier().verify(await make()));
    expect(err.message).toContain(reason);
    expect(err.kind).toBe(kind);
  });

  it('refuses every token of a disabled signer', async () => {
    records = [signer({ enabled: false })];
    expect((await refusal(verifier().verify(await token()))).message).toContain('is disabled');
  });

  it('says a token is missing', async () => {
    const err = await refusal(verifier().verify(undefined, { signerId: 'signer-1' }));
    expect(err.kind).toBe('missing');
    expect(err.signer?.id).toBe('signer-1');
  });

  it('checks against the named signer only when one is named', async () => {
    records = [signer(), signer({ id: 'signer-2', issuer: 'https://other.example.com' })];
    expect((await refusal(verifier().verify(await token(), { signerId: 'signer-2' }))).message).toContain("issuer (iss) is not https://other.example.com");
  });

  it('refetches for an unknown kid at most once per 30 s', async () => {
    const v = verifier();
    await v.verify(await token());
    served = { keys: [await jwk(keyA.publicKey, 'a'), await jwk(keyB.publicKey, 'b')] };
    // A rotated key 1 s after the fetch is not known yet: the JWKS is not fetched again so soon.
    now += 1_000;
    await refusal(v.verify(await token({ key: keyB.privateKey, kid: 'b' })));
    expect(fetches).toBe(1);
    now += JWKS_REFETCH_INTERVAL_MS;
    expect((await v.verify(await token({ key: keyB.privateKey, kid: 'b' }))).subject).toBe('identity-1');
    expect(fetches).toBe(2);
    // A kid nobody has: within 30 s of the last fetch, no new fetch.
    for (let i = 0; i < 5; i++) expect((await refusal(v.verify(await token({ kid: 'c', key: keyB.privateKey })))).message).toContain('matches');
    expect(fetches).toBe(2);
    now += JWKS_REFETCH_INTERVAL_MS;
    await refusal(v.verify(await token({ kid: 'c', key: keyB.privateKey })));
    expect(fetches).toBe(3);
  });

  it('shares one fetch among concurrent verifications', async () => {
    const v = verifier();
    const tokens = await Promise.all(Array.from({ length: 10 }, () => token()));
    await Promise.all(tokens.map((tk) => v.verify(tk)));
    expect(fetches).toBe(1);
  });

  it('does not retry a failed fetch for 30 s, and says why it failed', async () => {
    served = new JwksFetchError('it did not answer within 5000 ms');
    const v = verifier();
    expect((await refusal(v.verify(await token()))).message).toContain('could not be fetched: it did not answer within 5000 ms');
    await refusal(v.verify(await token()));
    expect(fetches).toBe(1);
    served = { keys: [await jwk(keyA.publicKey, 'a')] };
    now += JWKS_REFETCH_INTERVAL_MS;
    expect((await v.verify(await token())).subject).toBe('identity-1');
    expect(fetches).toBe(2);
  });

  it('keeps a verified token, and forgets it with any change of a signer', async () => {
    const once = await token();
    const v = await keptThenRotated(once);
    expect((await v.verify(once)).subject).toBe('identity-1');
    expect((await v.verify(once, { signerId: 'signer-1' })).subject).toBe('identity-1');
    expect((await refusal(v.verify(once, { signerId: 'other' }))).message).toBe('the external JWT signer other does not exist');
    v.onChange(signerChange('signer-2'));
    expect((await refusal(v.verify(once))).message).toBe("no key of the signer's JWKS matches the token's kid and alg");
  });

  it('says a kept token has expired once it has', async () => {
    const v = verifier();
    const once = await token({ exp: Math.floor(NOW / 1000) + 60 });
    await v.verify(once);
    now = NOW + 120_000;
    const err = await refusal(v.verify(once));
    expect(err.kind).toBe('expired');
    expect(err.message).toBe('the token has expired (exp)');
  });

  it('answers a verification kept for one signer to no other signer', async () => {
    const once = await token();
    records = [signer(), signer({ id: 'signer-2', issuer: 'https://other.example.com' })];
    const v = await keptThenRotated(once);
    expect((await refusal(v.verify(once, { signerId: 'signer-2' }))).message).toBe("the token's issuer (iss) is not https://other.example.com");
  });

  it('keeps a token up to 4 KiB long, and checks a longer one afresh each time', async () => {
    const longest = await tokenOfLength(MAX_VERIFIED_LENGTH);
    const longer = await tokenOfLength(MAX_VERIFIED_LENGTH + 1, { jti: 'longer' });
    const v = verifier();
    await v.verify(longer);
    await keptThenRotated(longest, v);
    expect((await v.verify(longest)).subject).toBe('identity-1');
    expect((await refusal(v.verify(longer))).message).toBe("no key of the signer's JWKS matches the token's kid and alg");
  });

  it('answers a kept token until 30 s past its exp, and not from then on', async () => {
    const exp = Math.floor(NOW / 1000) + 60;
    const once = await token({ exp });
    const v = await keptThenRotated(once);
    now = (exp + 30) * 1000 - 1;
    expect((await v.verify(once)).subject).toBe('identity-1');
    now = (exp + 30) * 1000;
    await refusal(v.verify(once));
  });

  it('answers a kept token with nbf only from 30 s before its nbf (a clock set back)', async () => {
    const nbf = Math.floor(NOW / 1000) + 20;
    const once = await token({ claims: { nbf } });
    const v = await keptThenRotated(once);
    now = (nbf - 30) * 1000;
    expect((await v.verify(once)).subject).toBe('identity-1');
    now = (nbf - 30) * 1000 - 1;
    await refusal(v.verify(once));
  });

  it('forgets a changed signer and its keys at once', async () => {
    const v = verifier();
    await v.verify(await token());
    records = [signer({ audience: 'changed' })];
    v.onChange({ collection: 'external-jwt-signers', kind: 'update', id: 'signer-1' });
    expect((await refusal(v.verify(await token()))).message).toContain('does not contain changed');
    expect(fetches).toBe(2);
    records = [];
    v.onChange({ collection: 'external-jwt-signers', kind: 'delete', id: 'signer-1' });
    expect((await refusal(v.verify(await token()))).message).toContain('no external JWT signer has the issuer');
  });
});

describe('refusals, word for word', () => {
  const exp = Math.floor(NOW / 1000) + 60;
  const claims = { iss: ISSUER, aud: 'overlay', sub: 'identity-1', exp };

  it.each<[string, () => Promise<string>, string]>([
    ['an empty token', async () => '', 'no bearer token was provided'],
    ['a token without alg', async () => handSigned({ kid: 'a' }, claims), 'the token is unsigned (alg none is refused)'],
    ['a token without iss', () => token({ claims: { iss: undefined } }), 'the token has no iss claim'],
    ['a token whose iss is no string', () => token({ claims: { iss: 7 } }), 'the token has no iss claim'],
    ['an empty mapped claim', () => token({ claims: { sub: '' } }), 'the claim sub (claimsProperty) is missing or not a string'],
    ['a mapped claim that is no string', () => token({ claims: { sub: 7 } }), 'the claim sub (claimsProperty) is missing or not a string'],
    ['an exp that is no number', async () => handSigned({ alg: 'ES256', kid: 'a' }, { ...claims, exp: 'soon' }), "the token's exp claim is not a number"],
    ['an iat that is no number', async () => handSigned({ alg: 'ES256', kid: 'a' }, { ...claims, iat: 'yesterday' }), "the token's iat claim is not valid (invalid)"],
    ['an empty list of critical headers', async () => handSigned({ alg: 'ES256', kid: 'a', crit: [] }, claims), 'the token is not a valid JWT ("crit" (Critical) Header Parameter MUST be an array of non-empty strings when present)'],
    ['a critical header not understood', async () => handSigned({ alg: 'ES256', kid: 'a', crit: ['x'], x: 1 }, claims), 'the token could not be verified (ERR_JOSE_NOT_SUPPORTED)'],
    ['a token of exactly the longest length that is no JWT', async () => 'a'.repeat(MAX_EXT_JWT_LENGTH), 'the token is not a well-formed signed JWT'],
    ['a token longer than that', async () => 'a'.repeat(MAX_EXT_JWT_LENGTH + 1), `the token is longer than ${MAX_EXT_JWT_LENGTH} characters`],
  ])('refuses %s', async (_what, make, message) => {
    const err = await refusal(verifier().verify(await make()));
    expect(err.message).toBe(message);
    expect(err.kind).toBe(message.startsWith('no bearer') ? 'missing' : 'invalid');
  });

  it('names the signer it checked against, and no signer when none was found', async () => {
    expect((await refusal(verifier().verify(await token({ claims: { aud: 'x' } })))).signer?.id).toBe('signer-1');
    expect((await refusal(verifier().verify(await token({ claims: { iss: 'https://nobody.example.com' } })))).signer).toBeUndefined();
    expect((await refusal(verifier().verify('a'.repeat(MAX_EXT_JWT_LENGTH + 1), { signerId: 'signer-1' }))).signer?.id).toBe('signer-1');
  });

  it('says a signer is disabled', async () => {
    records = [signer({ enabled: false })];
    const err = await refusal(verifier().verify(await token()));
    expect(err.message).toBe('the external JWT signer signer-1 is disabled');
    expect(err.kind).toBe('invalid');
  });

  it('says the kid of a token is not known, also after fetching the JWKS again', async () => {
    const err = await refusal(verifier().verify(await token({ kid: 'unknown' })));
    expect(err.message).toBe("no key of the signer's JWKS matches the token's kid and alg");
    expect(err.kind).toBe('invalid');
  });

  it('says several keys fit a token whose kid the JWKS repeats', async () => {
    served = { keys: [await jwk(keyA.publicKey, 'a'), await jwk(keyB.publicKey, 'a')] };
    expect((await refusal(verifier().verify(await token({ kid: 'a' })))).message).toBe(
      "several keys of the signer's JWKS match the token's kid and alg (the token has no kid, or the JWKS repeats it)",
    );
  });

  it('says several keys fit a token without kid', async () => {
    served = { keys: [await jwk(keyA.publicKey, 'a'), await jwk(keyB.publicKey, 'b')] };
    expect((await refusal(verifier().verify(await token({ kid: null })))).message).toBe("several keys of the signer's JWKS match the token's kid and alg (the token has no kid, or the JWKS repeats it)");
  });

  it('refuses a token whose key in the JWKS is broken, rather than failing itself', async () => {
    const good = await jwk(keyA.publicKey, 'a');
    served = { keys: [{ ...good, x: `${good.x!.slice(0, -4)}AAAA` }] };
    const err = await refusal(verifier().verify(await token()));
    expect(err.message).toMatch(/^the signer's key for the token cannot be read \(.+\)$/);
    expect(err.kind).toBe('invalid');
  });

  it('does not fetch the JWKS again for a signature that does not verify', async () => {
    const v = verifier();
    await v.verify(await token());
    now += JWKS_REFETCH_INTERVAL_MS;
    expect((await refusal(v.verify(await token({ key: keyB.privateKey })))).message).toBe("the signature does not verify with the signer's key");
    expect(fetches).toBe(1);
  });

  it('refuses a key too weak for its algorithm', async () => {
    const weak = generateKeyPairSync('rsa', { modulusLength: 1024 });
    served = { keys: [await jwk(weak.publicKey, 'weak')] };
    const tk = handSigned({ alg: 'RS256', kid: 'weak' }, claims, weak.privateKey);
    expect((await refusal(verifier().verify(tk))).message).toBe("the token's algorithm does not fit the signer's key");
  });

  it('allows 30 s of clock skew on exp', async () => {
    expect((await verifier().verify(await token({ exp: Math.floor(NOW / 1000) - 29 }))).subject).toBe('identity-1');
    expect((await refusal(verifier().verify(await token({ exp: Math.floor(NOW / 1000) - 31 })))).kind).toBe('expired');
  });

  it('checks the issuer a named signer has before the signature', async () => {
    // A certificate signer: its key would refuse the signature, but the issuer is said first.
    const cert = await certificateSigner('ES256');
    records = [signer(), { ...cert.signer, id: 'signer-2', issuer: 'https://other.example.com' }];
    const err = await refusal(verifier().verify(await token(), { signerId: 'signer-2' }));
    expect(err.message).toBe("the token's issuer (iss) is not https://other.example.com");
    expect(err.signer?.id).toBe('signer-2');
  });

  it('prints an issuer it does not know shortened and quoted', async () => {
    const long = `https://"evil"\n${'x'.repeat(200)}`;
    expect((await refusal(verifier().verify(await token({ claims: { iss: long } })))).message).toBe(
      `no external JWT signer has the issuer https://\\'evil\\'\\n${'x'.repeat(105)}...`,
    );
    const fits = `https://${'y'.repeat(112)}`;
    expect((await refusal(verifier().verify(await token({ claims: { iss: fits } })))).message).toBe(`no external JWT signer has the issuer ${fits}`);
  });

  it('takes any audience when the signer names none', async () => {
    records = [signer({ audience: null })];
    expect((await verifier().verify(await token({ claims: { aud: 'anyone' } }))).subject).toBe('identity-1');
  });
});

describe('the JWKS fetched', () => {
  it('says why a JWKS is no use', async () => {
    served = { keys: 'none' } as unknown as { keys: JWK[] };
    expect((await refusal(verifier().verify(await token()))).message).toBe("the signer's JWKS could not be fetched: it is not a valid JWKS (JSON Web Key Set malformed)");
    served = new Error('socket closed');
    expect((await refusal(verifier().verify(await token()))).message).toBe("the signer's JWKS could not be fetched: it could not be fetched");
  });

  it('keeps the keys it has when a fetch for an unknown kid fails, and says why', async () => {
    const v = verifier();
    await v.verify(await token());
    served = new JwksFetchError('it answered HTTP 500');
    now += JWKS_REFETCH_INTERVAL_MS;
    const err = await refusal(v.verify(await token({ key: keyB.privateKey, kid: 'b' })));
    expect(err.message).toBe("the signer's JWKS could not be fetched: it answered HTTP 500");
    expect(err.kind).toBe('invalid');
    expect((await v.verify(await token({ claims: { jti: 'later' } }))).subject).toBe('identity-1');
    expect(fetches).toBe(2);
  });

  it('checks the signature with the key fetched again', async () => {
    const v = verifier();
    await v.verify(await token());
    // Key b appears with a's public key: the kid is found, the signature of b's private key is not.
    served = { keys: [await jwk(keyA.publicKey, 'a'), await jwk(keyA.publicKey, 'b')] };
    now += JWKS_REFETCH_INTERVAL_MS;
    expect((await refusal(v.verify(await token({ key: keyB.privateKey, kid: 'b' })))).message).toBe("the signature does not verify with the signer's key");
  });

  it('does not keep keys fetched while another signer changed, nor let that fetch drop newer keys', async () => {
    const gate = new Gate();
    const v = verifier({
      fetchJwks: async () => {
        await gate.pass();
        return serve();
      },
    });
    gate.hold = true;
    const first = v.verify(await token());
    await until(() => gate.queued === 1);
    v.onChange(signerChange('signer-2'));
    gate.release();
    expect((await first).subject).toBe('identity-1');
    gate.hold = false;
    await v.verify(await token({ claims: { jti: 'second' } }));
    expect(fetches).toBe(2);
    await v.verify(await token({ claims: { jti: 'third' } }));
    expect(fetches).toBe(2);

    // The signer itself changes during a fetch, and a verification after the change fetches anew:
    // the first fetch, ending last but one, leaves the newer keys alone.
    gate.hold = true;
    v.onChange(signerChange('signer-1'));
    const before = v.verify(await token({ claims: { jti: 'before' } }));
    await until(() => gate.queued === 1);
    v.onChange(signerChange('signer-1'));
    const after = v.verify(await token({ claims: { jti: 'after' } }));
    await until(() => gate.queued === 2);
    gate.release();
    gate.release();
    await Promise.all([before, after]);
    gate.hold = false;
    await v.verify(await token({ claims: { jti: 'last' } }));
    expect(fetches).toBe(4);
  });
});

describe('the signers read', () => {
  it('reads them once, sharing the read among concurrent verifications', async () => {
    let loads = 0;
    const v = verifier({
      loadSigners: async () => {
        loads++;
        return records;
      },
    });
    expect(v.name).toBe('external-jwt-signers');
    await Promise.all([v.verify(await token()), v.verify(await token({ claims: { jti: '2' } }))]);
    await v.verify(await token({ claims: { jti: '3' } }));
    expect(loads).toBe(1);
    // A change of anything but a signer drops nothing.
    v.onChange({ collection: 'identities', kind: 'update', id: 'signer-1' });
    await v.verify(await token({ claims: { jti: '4' } }));
    expect(loads).toBe(1);
    expect(fetches).toBe(1);
  });

  it('reads them again after a read failed', async () => {
    let fail = true;
    const v = verifier({ loadSigners: async () => (fail ? Promise.reject(new Error('the store is closed')) : records) });
    await expect(v.verify(await token())).rejects.toThrow('the store is closed');
    fail = false;
    expect((await v.verify(await token())).subject).toBe('identity-1');
  });

  /** A verifier whose signer reads take the records of their start and wait at the gate. */
  function gatedVerifier(gate: Gate): { v: ExternalJwtSigners; loads: () => number } {
    let loads = 0;
    const v = verifier({
      loadSigners: async () => {
        loads++;
        const read = records;
        await gate.pass();
        return read;
      },
    });
    return { v, loads: () => loads };
  }

  it('does not keep a read that a change overtook, nor let it end a newer read', async () => {
    const gate = new Gate();
    const { v, loads } = gatedVerifier(gate);
    gate.hold = true;
    const first = v.verify(await token());
    await until(() => gate.queued === 1);
    records = [signer({ enabled: false })];
    v.onChange(signerChange('signer-1'));
    const second = v.verify(await token({ claims: { jti: '2' } }));
    await until(() => gate.queued === 2);
    gate.release();
    await first;
    // The second read is still under way: a third verification shares it.
    const third = v.verify(await token({ claims: { jti: '3' } }));
    await until(() => loads() >= 2);
    gate.release();
    expect((await refusal(second)).message).toContain('is disabled');
    expect((await refusal(third)).message).toContain('is disabled');
    expect(loads()).toBe(2);
  });

  it.each([
    ['a change, then a reset', (v: ExternalJwtSigners) => (v.onChange(signerChange('signer-1')), v.reset())],
    ['a reset, then a change', (v: ExternalJwtSigners) => (v.reset(), v.onChange(signerChange('signer-1')))],
  ])('does not keep a read overtaken by %s', async (_what, overtake) => {
    const gate = new Gate();
    const { v } = gatedVerifier(gate);
    gate.hold = true;
    const first = v.verify(await token());
    await until(() => gate.queued === 1);
    records = [signer({ enabled: false })];
    overtake(v);
    gate.release();
    await first;
    gate.hold = false;
    expect((await refusal(v.verify(await token({ claims: { jti: '2' } })))).message).toContain('is disabled');
  });

  it('forgets signers, keys and kept verifications on reset', async () => {
    let loads = 0;
    const v = verifier({
      loadSigners: async () => {
        loads++;
        return records;
      },
    });
    const once = await token();
    await v.verify(once);
    v.reset();
    await v.verify(await token({ claims: { jti: '2' } }));
    expect(loads).toBe(2);
    expect(fetches).toBe(2);
    records = [];
    v.reset();
    expect((await refusal(v.verify(once))).message).toBe('no external JWT signer has the issuer https://idp.example.com');
  });
});

/** A signer with a self-signed certificate of a fresh key for `alg`, and that key. */
async function certificateSigner(alg: 'ES256' | 'RS256', kid: string | null = null): Promise<{ signer: Signer; key: webcrypto.CryptoKey }> {
  const params =
    alg === 'ES256'
      ? ({ name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const)
      : ({ name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' } as const);
  const keys = (await webcrypto.subtle.generateKey(params, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    { serialNumber: '01', name: 'CN=idp', notBefore: new Date(NOW - 86_400_000), notAfter: new Date(NOW + 86_400_000), keys, signingAlgorithm: params },
    webcrypto,
  );
  return { signer: signer({ certPem: cert.toString('pem'), jwksEndpoint: null, kid }), key: keys.privateKey };
}

describe('a certificate signer', () => {
  const signWith = (key: webcrypto.CryptoKey, alg: string, kid?: string) =>
    new SignJWT({ iss: ISSUER, aud: 'overlay', sub: 'identity-1' })
      .setProtectedHeader({ alg, ...(kid === undefined ? {} : { kid }) })
      .setExpirationTime(Math.floor(NOW / 1000) + 60)
      .sign(key);

  it('takes any kid when the signer names none, and a token without kid when it names one', async () => {
    const open = await certificateSigner('ES256');
    records = [open.signer];
    expect((await verifier().verify(await signWith(open.key, 'ES256', 'whatever'))).subject).toBe('identity-1');
    const named = await certificateSigner('ES256', 'cert-kid');
    records = [named.signer];
    expect((await verifier().verify(await signWith(named.key, 'ES256'))).subject).toBe('identity-1');
  });

  it('verifies RSA tokens with an RSA certificate', async () => {
    const rsaCert = await certificateSigner('RS256');
    records = [rsaCert.signer];
    expect((await verifier().verify(await signWith(rsaCert.key, 'RS256', 'k'))).subject).toBe('identity-1');
    const pss = await new SignJWT({ iss: ISSUER, aud: 'overlay', sub: 'identity-1' })
      .setProtectedHeader({ alg: 'PS256' })
      .setExpirationTime(Math.floor(NOW / 1000) + 60)
      .sign(KeyObject.from(rsaCert.key));
    expect((await verifier().verify(pss)).subject).toBe('identity-1');
  });

  it('says when its certificate cannot be read, or when it has no key at all', async () => {
    records = [signer({ certPem: 'not a certificate', jwksEndpoint: null })];
    expect((await refusal(verifier().verify(await token()))).message).toBe("the signer's certificate cannot be read");
    records = [signer({ certPem: null, jwksEndpoint: null })];
    expect((await refusal(verifier().verify(await token()))).message).toBe('the signer has neither a certificate nor a JWKS endpoint');
    expect(fetches).toBe(0);
  });

  it('verifies with the certificate key, checks its kid and refuses other algorithms', async () => {
    const cert = await certificateSigner('ES256', 'cert-kid');
    records = [cert.signer];
    const v = verifier();
    const sign = (alg: string, kid: string) => signWith(cert.key, alg, kid);
    expect((await v.verify(await sign('ES256', 'cert-kid'))).subject).toBe('identity-1');
    expect((await refusal(v.verify(await sign('ES256', 'other-kid')))).message).toBe("the token's kid other-kid is not the signer's kid");
    expect((await refusal(v.verify(await token({ key: rsa.privateKey, alg: 'RS256', kid: 'cert-kid' })))).message).toBe(
      "the algorithm RS256 does not fit the key of the signer's certificate",
    );
    expect((await refusal(v.verify(await token({ key: keyA.privateKey, kid: 'cert-kid' })))).message).toContain('signature does not verify');
    expect(fetches).toBe(0);
  });
});

describe('claim selectors', () => {
  it('reads a top-level claim or a JSON pointer', () => {
    const claims = { sub: 's', 'a/b': 1, 'a~b': 2, realm: { roles: ['x'] }, gone: null };
    expect(claimAt(claims, 'sub')).toBe('s');
    expect(claimAt(claims, '/realm/roles')).toEqual(['x']);
    expect(claimAt(claims, '/realm/roles/0')).toBe('x');
    expect(claimAt(claims, '/a~1b')).toBe(1);
    expect(claimAt(claims, '/a~0b')).toBe(2);
    expect(claimAt(claims, '/realm/none')).toBeUndefined();
  });

  it('finds nothing inside a value that is no object, nor an inherited property', () => {
    const claims = { sub: 's', gone: null, realm: {} };
    expect(claimAt(claims, '/sub/0')).toBeUndefined();
    expect(claimAt(claims, '/sub/length')).toBeUndefined();
    expect(claimAt(claims, '/gone/x')).toBeUndefined();
    expect(claimAt(claims, '/realm/constructor')).toBeUndefined();
  });
});

describe('the algorithms of a certificate key', () => {
  it.each<[string, KeyObject, string[]]>([
    ['RSA', rsa.publicKey, ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512']],
    ['RSA-PSS', generateKeyPairSync('rsa-pss', { modulusLength: 2048 }).publicKey, ['PS256', 'PS384', 'PS512']],
    ['EC P-256', keyA.publicKey, ['ES256']],
    ['EC P-384', generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey, ['ES384']],
    ['EC P-521', generateKeyPairSync('ec', { namedCurve: 'P-521' }).publicKey, ['ES512']],
    ['EC secp256k1', generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).publicKey, []],
    ['Ed25519', generateKeyPairSync('ed25519').publicKey, ['EdDSA', 'Ed25519']],
    ['Ed448', generateKeyPairSync('ed448').publicKey, []],
  ])('%s', (_what, key, algorithms) => {
    expect(algorithmsOf(key)).toEqual(algorithms);
  });
});
