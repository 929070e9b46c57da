// Verification of JWTs issued by external JWT signers (behaviour.md §7b). The signers and their keys
// are kept in memory and follow the change feed: an edited or deleted signer drops its record and its
// keys at once, so nothing is trusted from a cache that the store no longer says. Keys come from the
// signer's certificate or its JWKS, fetched (bounded, see jwks-fetch.ts) when first needed and again
// for an unknown `kid`, at most once per signer per 30 s; a failed fetch is remembered as long, so a
// dead endpoint costs each request nothing. Every refusal says which check failed.
import { hash, X509Certificate, type KeyObject } from 'node:crypto';
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { Clock } from '../clock.js';
import { BoundedMap } from '../kernel/bounded-map.js';
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import { DEFAULT_CLAIMS_PROPERTY } from '../resources/external-jwt-signers.js';
import type { EntityOf } from '../resources/index.js';
import { JwksFetchError } from './jwks-fetch.js';

export type Signer = EntityOf<'external-jwt-signers'>;

/** An unknown kid refetches a signer's JWKS at most this often; a failed fetch is not retried sooner. */
export const JWKS_REFETCH_INTERVAL_MS = 30_000;
/** Clock skew allowed on exp and nbf. */
export const CLOCK_SKEW_SECONDS = 30;
/** Longest token looked at. */
export const MAX_EXT_JWT_LENGTH = 16 * 1024;
/** Tokens whose verification is kept (by digest), and the longest kept: a client sends one many times. */
const MAX_VERIFIED = 10_000;
export const MAX_VERIFIED_LENGTH = 4 * 1024;

/** Asymmetric algorithms only: an HMAC algorithm would take a public key for a shared secret. */
const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

export type ExtJwtRefusal = 'missing' | 'invalid' | 'expired';

/** A token refused, with the check that failed (for the challenge and the log; never the token). */
export class ExtJwtError extends Error {
  override readonly name = 'ExtJwtError';
  constructor(
    readonly kind: ExtJwtRefusal,
    message: string,
    /** The signer the token was checked against, when one was found. */
    readonly signer?: Pick<Signer, 'id' | 'issuer'>,
  ) {
    super(message);
  }
}

export interface VerifiedExtJwt {
  signer: Signer;
  claims: JWTPayload;
  /** The value of the signer's claimsProperty: an identity id, or an external id with useExternalId. */
  subject: string;
}

/** The value a claims selector names: a top-level claim, or a JSON pointer (`/a/b`) into the claims. */
export function claimAt(claims: Record<string, unknown>, selector: string): unknown {
  if (!selector.startsWith('/')) return claims[selector];
  let at: unknown = claims;
  for (const raw of selector.slice(1).split('/')) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof at !== 'object' || at === null || !Object.hasOwn(at, part)) return undefined;
    at = (at as Record<string, unknown>)[part];
  }
  return at;
}

/** The algorithms a certificate's key can verify. */
export function algorithmsOf(key: KeyObject): string[] {
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];
    case 'rsa-pss':
      return ['PS256', 'PS384', 'PS512'];
    case 'ec': {
      // Stryker: an EC key always has its details; the `?.` is for the type.
      const curve = key.asymmetricKeyDetails?.namedCurve;
      return curve === 'prime256v1' ? ['ES256'] : curve === 'secp384r1' ? ['ES384'] : curve === 'secp521r1' ? ['ES512'] : [];
    }
    case 'ed25519':
      return ['EdDSA', 'Ed25519'];
    default:
      return [];
  }
}

interface CertKeys {
  kind: 'cert';
  key: KeyObject;
  algorithms: string[];
}
interface JwksKeys {
  kind: 'jwks';
  keys?: JWTVerifyGetKey;
  /** When the last fetch ended, successful or not. */
  fetchedAt: number;
  failure?: string;
  pending?: Promise<void>;
}
type KeySource = CertKeys | JwksKeys;

export interface ExternalJwtSignersDeps {
  /** Reads every signer from the store. */
  loadSigners(): Promise<Signer[]>;
  clock: Clock;
  /** Fetches a JWKS (bounded); throws JwksFetchError with the reason. */
  fetchJwks(url: string): Promise<{ keys: Record<string, unknown>[] }>;
}

export class ExternalJwtSigners implements Cache {
  readonly name = 'external-jwt-signers';
  private signers: Map<string, Signer> | undefined;
  private loading: Promise<Map<string, Signer>> | undefined;
  private readonly keys = new Map<string, KeySource>();
  /** Bumped by every change, so a read or fetch begun before one is not kept. */
  private generation = 0;
  /**
   * Tokens verified, by SHA-256: the same token sent again (a second factor on every request, a
   * client logging in again) skips the signature. Dropped with any change of any signer; the time
   * claims are checked again at each use.
   */
  private readonly verified = new BoundedMap<string, VerifiedExtJwt>({ maxEntries: MAX_VERIFIED });

  constructor(private readonly deps: ExternalJwtSignersDeps) {}

  /** Every signer, enabled or not, from memory once read. */
  async all(): Promise<Map<string, Signer>> {
    if (this.signers) return this.signers;
    if (!this.loading) {
      const seen = this.generation;
      const loading = this.deps
        .loadSigners()
        .then((signers) => {
          const map = new Map(signers.map((s) => [s.id, s] as const));
          if (seen === this.generation) this.signers = map;
          return map;
        })
        .finally(() => {
          if (this.loading === loading) this.loading = undefined;
        });
      this.loading = loading;
    }
    return this.loading;
  }

  async get(id: string): Promise<Signer | undefined> {
    return (await this.all()).get(id);
  }

  /** The signer a token names by its `iss` (issuers are unique among signers). */
  async byIssuer(issuer: string): Promise<Signer | undefined> {
    for (const s of (await this.all()).values()) if (s.issuer === issuer) return s;
    return undefined;
  }

  onChange(c: Change): void {
    if (c.collection !== 'external-jwt-signers') return;
    this.generation++;
    this.signers = undefined;
    this.loading = undefined;
    this.keys.delete(c.id);
    this.verified.clear();
  }

  reset(): void {
    this.generation++;
    this.signers = undefined;
    this.loading = undefined;
    this.keys.clear();
    this.verified.clear();
  }

  /**
   * Verifies a token: against the signer `signerId` when given (a second factor, a named enrollment
   * issuer), else against the signer whose issuer the token names. Throws ExtJwtError.
   */
  async verify(token: string | undefined, opts: { signerId?: string } = {}): Promise<VerifiedExtJwt> {
    let expected: Signer | undefined;
    if (opts.signerId !== undefined) {
      expected = await this.get(opts.signerId);
      if (!expected) throw new ExtJwtError('invalid', `the external JWT signer ${opts.signerId} does not exist`);
    }
    if (token === undefined || token === '') {
      throw new ExtJwtError('missing', 'no bearer token was provided', expected);
    }
    if (token.length > MAX_EXT_JWT_LENGTH) throw new ExtJwtError('invalid', `the token is longer than ${MAX_EXT_JWT_LENGTH} characters`, expected);
    const digest = token.length <= MAX_VERIFIED_LENGTH ? hash('sha256', token, 'base64url') : undefined;
    // Stryker: nothing is kept under undefined (see the end), so looking it up would find nothing too.
    const kept = digest !== undefined ? this.verified.get(digest) : undefined;
    if (kept && (expected === undefined || kept.signer.id === expected.id) && this.inTime(kept)) return kept;
    const seen = this.verified.drops;
    let alg: string | undefined;
    let unverified: JWTPayload;
    try {
      alg = decodeProtectedHeader(token).alg;
      unverified = decodeJwt(token);
    } catch {
      throw new ExtJwtError('invalid', 'the token is not a well-formed signed JWT', expected);
    }
    // Stryker: every issuer is a string, so looking up another value would find no signer either.
    const signer = expected ?? (typeof unverified.iss === 'string' ? await this.byIssuer(unverified.iss) : undefined);
    if (!signer) {
      throw new ExtJwtError('invalid', typeof unverified.iss === 'string' ? `no external JWT signer has the issuer ${printable(unverified.iss)}` : 'the token has no iss claim');
    }
    if (!signer.enabled) throw new ExtJwtError('invalid', `the external JWT signer ${signer.id} is disabled`, signer);
    // Said before the signature is looked at: a token of another provider is the likelier mistake.
    if (unverified.iss !== signer.issuer) throw new ExtJwtError('invalid', `the token's issuer (iss) is not ${printable(signer.issuer)}`, signer);
    if (alg === undefined || alg === 'none') throw new ExtJwtError('invalid', 'the token is unsigned (alg none is refused)', signer);
    if (!ASYMMETRIC.includes(alg)) throw new ExtJwtError('invalid', `the algorithm ${printable(alg)} is not accepted`, signer);
    const claims = await this.checkSignature(signer, token, alg);
    const property = signer.claimsProperty ?? DEFAULT_CLAIMS_PROPERTY;
    const subject = claimAt(claims, property);
    if (typeof subject !== 'string' || subject === '') {
      throw new ExtJwtError('invalid', `the claim ${property} (claimsProperty) is missing or not a string`, signer);
    }
    const result = { signer, claims, subject };
    // Stryker: a verification kept under undefined would never be looked up (see above); the test spares memory.
    if (digest !== undefined) this.verified.setIfUnchanged(digest, result, seen);
    return result;
  }

  /** A kept verification still in time: exp (and nbf) checked against the clock as jose checks them. */
  private inTime({ claims }: VerifiedExtJwt): boolean {
    const now = this.deps.clock() / 1000;
    // Stryker: exp is a number in every verification kept (required, and jose checks its type).
    if (typeof claims.exp !== 'number' || now - CLOCK_SKEW_SECONDS >= claims.exp) return false;
    return typeof claims.nbf !== 'number' || now + CLOCK_SKEW_SECONDS >= claims.nbf;
  }

  private async checkSignature(signer: Signer, token: string, alg: string): Promise<JWTPayload> {
    const source = await this.keySource(signer);
    const options = {
      // Stryker: the algorithm was checked against these lists above, so jose's check (a second guard)
      // never refuses it.
      algorithms: source.kind === 'cert' ? source.algorithms : ASYMMETRIC,
      issuer: signer.issuer,
      ...(signer.audience ? { audience: signer.audience } : {}),
      currentDate: new Date(this.deps.clock()),
      clockTolerance: CLOCK_SKEW_SECONDS,
      requiredClaims: ['exp'],
    };
    if (source.kind === 'cert') {
      if (!source.algorithms.includes(alg)) {
        throw new ExtJwtError('invalid', `the algorithm ${printable(alg)} does not fit the key of the signer's certificate`, signer);
      }
      const kid = decodeProtectedHeader(token).kid;
      if (signer.kid && kid !== undefined && kid !== signer.kid) {
        throw new ExtJwtError('invalid', `the token's kid ${printable(kid)} is not the signer's kid`, signer);
      }
      return this.run(signer, () => jwtVerify(token, source.key, options));
    }
    try {
      return await this.run(signer, () => jwtVerify(token, source.keys!, options));
    } catch (err) {
      if (!(err instanceof NoMatchingKey)) throw err;
      // An unknown kid may be a rotated key: fetch again, unless that was done a moment ago.
      const again = await this.refetch(signer, source);
      if (again.failure !== undefined) throw new ExtJwtError('invalid', `the signer's JWKS could not be fetched: ${again.failure}`, signer);
      return await this.run(signer, () => jwtVerify(token, again.keys!, options));
    }
  }

  /** Runs a jose verification, saying in plain words which check failed. */
  private async run(signer: Signer, verify: () => Promise<{ payload: JWTPayload }>): Promise<JWTPayload> {
    try {
      return (await verify()).payload;
    } catch (err) {
      throw refusal(signer, err);
    }
  }

  /** The keys of a signer: its certificate's, or its JWKS (fetched now if never fetched). */
  private async keySource(signer: Signer): Promise<CertKeys | (JwksKeys & { keys: JWTVerifyGetKey })> {
    let source = this.keys.get(signer.id);
    if (!source) {
      if (signer.certPem) {
        let key: KeyObject;
        try {
          key = new X509Certificate(signer.certPem).publicKey;
        } catch {
          throw new ExtJwtError('invalid', "the signer's certificate cannot be read", signer);
        }
        source = { kind: 'cert', key, algorithms: algorithmsOf(key) };
      } else if (signer.jwksEndpoint) {
        // Stryker: kind is only told from 'cert', and an unset fetchedAt (NaN) lets the first fetch go as well.
        source = { kind: 'jwks', fetchedAt: -Infinity };
      } else {
        throw new ExtJwtError('invalid', 'the signer has neither a certificate nor a JWKS endpoint', signer);
      }
      this.keys.set(signer.id, source);
    }
    if (source.kind === 'cert') return source;
    const jwks = source.keys ? source : await this.refetch(signer, source);
    // Stryker: a fetch ends with keys or a failure, so the default is never said.
    if (!jwks.keys) throw new ExtJwtError('invalid', `the signer's JWKS could not be fetched: ${jwks.failure ?? 'no keys'}`, signer);
    return jwks as JwksKeys & { keys: JWTVerifyGetKey };
  }

  /**
   * Fetches the signer's JWKS again unless it was fetched (or failed) less than 30 s ago; concurrent
   * callers share one fetch. Keeps what it fetched only while the signer is unchanged.
   */
  private async refetch(signer: Signer, source: JwksKeys): Promise<JwksKeys> {
    if (source.pending) {
      await source.pending;
      return source;
    }
    if (this.deps.clock() - source.fetchedAt < JWKS_REFETCH_INTERVAL_MS) return source;
    const seen = this.generation;
    source.pending = (async () => {
      try {
        const jwks = await this.deps.fetchJwks(signer.jwksEndpoint!);
        source.keys = createLocalJWKSet(jwks as Parameters<typeof createLocalJWKSet>[0]);
        source.failure = undefined;
      } catch (err) {
        source.failure = err instanceof JwksFetchError ? err.message : err instanceof errors.JOSEError ? `it is not a valid JWKS (${err.message})` : 'it could not be fetched';
      } finally {
        source.fetchedAt = this.deps.clock();
        source.pending = undefined;
        if (seen !== this.generation && this.keys.get(signer.id) === source) this.keys.delete(signer.id);
      }
    })();
    await source.pending;
    return source;
  }
}

/** jose's "no key of the set matches", told apart so that it may refetch. */
class NoMatchingKey extends ExtJwtError {}

function printable(text: string): string {
  const cut = text.length > 120 ? `${text.slice(0, 120)}...` : text;
  return JSON.stringify(cut).slice(1, -1).replace(/"/g, "'");
}

/** What a failed jose check was, in words. */
function refusal(signer: Signer, err: unknown): ExtJwtError {
  if (err instanceof errors.JWTExpired) return new ExtJwtError('expired', 'the token has expired (exp)', signer);
  if (err instanceof errors.JWTClaimValidationFailed) {
    // iss was compared before the signature was checked, so jose never finds it wrong.
    switch (err.claim) {
      case 'aud':
        // Stryker: jose checks aud only when the signer has an audience, so the default is never said.
        return new ExtJwtError('invalid', `the token's audience (aud) does not contain ${printable(signer.audience ?? '')}`, signer);
      case 'nbf':
        return new ExtJwtError('invalid', 'the token is not valid yet (nbf)', signer);
      case 'exp':
        return new ExtJwtError('invalid', err.reason === 'missing' ? 'the token has no expiry (exp)' : 'the token\'s exp claim is not a number', signer);
      default:
        return new ExtJwtError('invalid', `the token's ${printable(err.claim)} claim is not valid (${err.reason})`, signer);
    }
  }
  if (err instanceof errors.JWKSNoMatchingKey) return new NoMatchingKey('invalid', 'no key of the signer\'s JWKS matches the token\'s kid and alg', signer);
  if (err instanceof errors.JWKSMultipleMatchingKeys) return new ExtJwtError('invalid', 'several keys of the signer\'s JWKS match the token\'s kid and alg (the token has no kid, or the JWKS repeats it)', signer);
  if (err instanceof errors.JWSSignatureVerificationFailed) return new ExtJwtError('invalid', 'the signature does not verify with the signer\'s key', signer);
  if (err instanceof errors.JWTInvalid || err instanceof errors.JWSInvalid) return new ExtJwtError('invalid', `the token is not a valid JWT (${err.message})`, signer);
  if (err instanceof errors.JOSEError) return new ExtJwtError('invalid', `the token could not be verified (${err.code})`, signer);
  // A key of the JWKS that WebCrypto cannot import (its key data is bad): jose lets the DOMException
  // through, and it is the signer's fault, not the controller's.
  if (err instanceof DOMException) return new ExtJwtError('invalid', `the signer's key for the token cannot be read (${err.message})`, signer);
  // A key that cannot check the algorithm: of another type, or an RSA key under 2048 bits (jose throws
  // TypeError for it).
  // Stryker: jose throws nothing but these, so an error left is a fault of the controller's own.
  if (err instanceof TypeError) return new ExtJwtError('invalid', 'the token\'s algorithm does not fit the signer\'s key', signer);
  throw err;
}
