// The external JWT as a second factor (`secondary.requireExtJwtSigner`, behaviour.md §7b): a token of
// the signer the identity's auth policy names, naming that same identity. An API session of such an
// identity must carry one as `Authorization: Bearer` on every request; an OIDC login completes only
// when a login request carries one. The policies' rules are kept in memory (they are read on every
// request) and follow the change feed.
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import { BoundedMap } from '../kernel/bounded-map.js';
import type { AuthPolicyRules } from '../resources/auth-policies.js';
import type { EntityOf } from '../resources/index.js';
import type { Repository } from '../store/repository.js';
import type { Store } from '../store/store.js';
import { authPolicyRules } from './lockout.js';
import { ExtJwtError, type ExternalJwtSigners, type Signer } from './ext-jwt.js';
import type { IdentityState } from './identity-directory.js';

/** The rules of auth policies by id, from memory once read; any change of a policy drops them all. */
export class AuthPolicyRulesCache implements Cache {
  readonly name = 'auth-policy-rules';
  private readonly rules = new BoundedMap<string, AuthPolicyRules>({ maxEntries: 10_000 });

  constructor(
    private readonly store: Store,
    private readonly repo: Repository<EntityOf<'auth-policies'>>,
  ) {}

  async get(policyId: string | null | undefined): Promise<AuthPolicyRules> {
    // Stryker: any one key for "no policy" is as good; '' is no policy id.
    const key = policyId ?? '';
    const kept = this.rules.get(key);
    if (kept) return kept;
    const seen = this.rules.drops;
    const read = await authPolicyRules(this.repo, this.store.db, policyId);
    this.rules.setIfUnchanged(key, read, seen);
    return read;
  }

  onChange(c: Change): void {
    // A policy that is read in place of a missing one (the default) may be kept under other ids.
    if (c.collection === 'auth-policies') this.rules.clear();
  }

  reset(): void {
    this.rules.clear();
  }
}

/** An EXT-JWT authentication query: where a client gets the token the signer requires. */
export interface ExtJwtQuery {
  typeId: 'EXT-JWT';
  provider: 'url';
  id: string;
  httpUrl: string;
  clientId: string;
  scopes: string[];
}

export function extJwtQuery(signerId: string, signer: Pick<Signer, 'externalAuthUrl' | 'clientId' | 'scopes'> | undefined): ExtJwtQuery {
  return {
    typeId: 'EXT-JWT',
    provider: 'url',
    id: signerId,
    httpUrl: signer?.externalAuthUrl ?? '',
    clientId: signer?.clientId ?? '',
    scopes: signer?.scopes ?? [],
  };
}

export interface SecondaryExtJwtDeps {
  externalJwtSigners: Pick<ExternalJwtSigners, 'verify' | 'get'>;
  authPolicyRules: Pick<AuthPolicyRulesCache, 'get'>;
}

/** The signer an identity's policy requires as a second factor, or null. */
export async function requiredSigner(deps: SecondaryExtJwtDeps, identity: Pick<IdentityState, 'authPolicyId'>): Promise<string | null> {
  const rules = await deps.authPolicyRules.get(identity.authPolicyId);
  const id = rules.secondary.requireExtJwtSigner;
  // Stryker: the id is a string or null; without the type test a null id is answered as itself, null.
  return typeof id === 'string' && id !== '' ? id : null;
}

/**
 * Checks the second-factor token of an identity: a valid token of `signerId` whose mapped claim
 * names this identity (its id, or its externalId with useExternalId). Throws ExtJwtError.
 */
export async function checkSecondToken(
  deps: SecondaryExtJwtDeps,
  signerId: string,
  identity: Pick<IdentityState, 'id' | 'externalId'>,
  token: string | undefined,
): Promise<Signer> {
  const { signer, subject } = await deps.externalJwtSigners.verify(token, { signerId });
  const named = signer.useExternalId === true ? identity.externalId : identity.id;
  if (named === undefined || subject !== named) {
    throw new ExtJwtError('invalid', `the token names another identity than the one logged in (claim ${signer.claimsProperty ?? 'sub'})`, signer);
  }
  return signer;
}

/**
 * What the second factor of an identity asks of a request: nothing when its policy requires no signer
 * or the token carried satisfies it; else the query to answer and the refusal.
 */
export async function secondFactorOutstanding(
  deps: SecondaryExtJwtDeps,
  identity: Pick<IdentityState, 'id' | 'externalId' | 'authPolicyId'>,
  token: string | undefined,
): Promise<{ query: ExtJwtQuery; refusal: ExtJwtError } | undefined> {
  const signerId = await requiredSigner(deps, identity);
  if (signerId === null) return undefined;
  try {
    await checkSecondToken(deps, signerId, identity, token);
    return undefined;
  } catch (err) {
    if (!(err instanceof ExtJwtError)) throw err;
    return { query: extJwtQuery(signerId, await deps.externalJwtSigners.get(signerId)), refusal: err };
  }
}
