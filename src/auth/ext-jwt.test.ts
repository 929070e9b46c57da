// Verification of external JWTs: every refusal with the check it names, the key sources (certificate,
// JWKS), the refetch of an unknown kid at most once per 30 s, a failed fetch not retried sooner, and
// the change feed dropping a signer's record and keys.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { generateKeyPairSync, webcrypto, type KeyObject } from 'node:crypto';
import { exportJWK, SignJWT, type JWK } from 'jose';
import { beforeEach, describe, expect, it } from 'vitest';
import { claimAt, ExternalJwtSigners, ExtJwtError, JWKS_REFETCH_INTERVAL_MS, type Signer } from './ext-jwt.js';
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

function unsigned(claims: Record<string, unknown>): string {
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${part({ alg: 'none' })}.${part(claims)}.`;
}

let now: number;
let served: { keys: JWK[] } | Error;
let fetches: number;
let records: Signer[];

function verifier(): ExternalJwtSigners {
  return new ExternalJwtSigners({
    loadSigners: async () => records,
    clock: () => now,
    fetchJwks: async () => {
      fetches++;
      if (served instanceof Error) throw served;
      return served as { keys: Record<string, unknown>[] };
    },
  });
}

async function refusal(work: Promise<unknown>): Promise<ExtJwtError> {
  const err = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ExtJwtError);
  return err as ExtJwtError;
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

  it('refuses a token whose key in the JWKS is broken, rather than failing itself', async () => {
    const good = await jwk(keyA.publicKey, 'a');
    served = { keys: [{ ...good, x: `${good.x!.slice(0, -4)}AAAA` }] };
    const err = await refusal(verifier().verify(await token()));
    expect(err.message).toMatch(/^the signer's key for the token cannot be read \(.+\)$/);
    expect(err.kind).toBe('invalid');
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

  it('keeps a verified token, but checks its time at every use and forgets it with any change of a signer', async () => {
    const v = verifier();
    const once = await token({ exp: Math.floor(NOW / 1000) + 60 });
    await v.verify(once);
    // Kept: a key the JWKS no longer has would refuse it if its signature were checked again.
    served = { keys: [] };
    now += JWKS_REFETCH_INTERVAL_MS;
    expect((await v.verify(once)).subject).toBe('identity-1');
    expect((await refusal(v.verify(once, { signerId: 'other' }))).message).toContain('does not exist');
    now = NOW + 120_000;
    expect((await refusal(v.verify(once))).kind).toBe('expired');
    now = NOW;
    v.onChange({ collection: 'external-jwt-signers', kind: 'update', id: 'signer-1' });
    expect((await refusal(v.verify(once))).message).toContain("no key of the signer's JWKS matches");
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

describe('a certificate signer', () => {
  async function certSigner(kid: string | null): Promise<Signer> {
    const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
    const cert = await x509.X509CertificateGenerator.createSelfSigned(
      { serialNumber: '01', name: 'CN=idp', notBefore: new Date(NOW - 86_400_000), notAfter: new Date(NOW + 86_400_000), keys, signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' } },
      webcrypto,
    );
    certKey = keys.privateKey;
    return signer({ certPem: cert.toString('pem'), jwksEndpoint: null, kid });
  }
  let certKey: webcrypto.CryptoKey;

  it('verifies with the certificate key, checks its kid and refuses other algorithms', async () => {
    records = [await certSigner('cert-kid')];
    const v = verifier();
    const sign = (alg: string, kid: string) =>
      new SignJWT({ iss: ISSUER, aud: 'overlay', sub: 'identity-1' }).setProtectedHeader({ alg, kid }).setExpirationTime(Math.floor(NOW / 1000) + 60).sign(certKey);
    expect((await v.verify(await sign('ES256', 'cert-kid'))).subject).toBe('identity-1');
    expect((await refusal(v.verify(await sign('ES256', 'other-kid')))).message).toContain("kid other-kid is not the signer's kid");
    expect((await refusal(v.verify(await token({ key: rsa.privateKey, alg: 'RS256', kid: 'cert-kid' })))).message).toContain('does not fit the key');
    expect((await refusal(v.verify(await token({ key: keyA.privateKey, kid: 'cert-kid' })))).message).toContain('signature does not verify');
    expect(fetches).toBe(0);
  });
});

describe('claim selectors', () => {
  it('reads a top-level claim or a JSON pointer', () => {
    const claims = { sub: 's', 'a/b': 1, realm: { roles: ['x'] } };
    expect(claimAt(claims, 'sub')).toBe('s');
    expect(claimAt(claims, '/realm/roles')).toEqual(['x']);
    expect(claimAt(claims, '/a~1b')).toBe(1);
    expect(claimAt(claims, '/realm/none')).toBeUndefined();
  });
});
