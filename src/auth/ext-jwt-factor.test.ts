// The external JWT as a second factor, called directly: the auth policy rules kept in memory (and
// dropped by a policy change, also one that comes while a read is under way), the signer a policy
// requires, the EXT-JWT query, and that the token must name the identity logged in.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Kernel } from '../kernel/kernel.js';
import { DEFAULT_AUTH_POLICY_ID, DEFAULT_PRIMARY, DEFAULT_SECONDARY, type AuthPolicyRules } from '../resources/auth-policies.js';
import type { EntityOf } from '../resources/index.js';
import { migrations } from '../store/migrations/index.js';
import type { Repository } from '../store/repository.js';
import { openSqlite } from '../store/sqlite.js';
import { Store } from '../store/store.js';
import { AuthPolicyRulesCache, checkSecondToken, extJwtQuery, requiredSigner, secondFactorOutstanding, type SecondaryExtJwtDeps } from './ext-jwt-factor.js';
import { ExtJwtError, type Signer, type VerifiedExtJwt } from './ext-jwt.js';

type Policies = Repository<EntityOf<'auth-policies'>>;

let store: Store;
let kernel: Kernel;

beforeEach(async () => {
  store = new Store(openSqlite(':memory:'));
  await store.migrate(migrations);
  kernel = new Kernel({ store, clock: () => Date.parse('2026-03-04T05:06:07Z') });
  await kernel.write((ctx) =>
    ctx.insert('auth-policies', {
      id: DEFAULT_AUTH_POLICY_ID,
      name: 'default',
      createdAt: ctx.now,
      updatedAt: ctx.now,
      tags: {},
      isSystem: true,
      primary: DEFAULT_PRIMARY,
      secondary: DEFAULT_SECONDARY,
    }),
  );
  await kernel.write((ctx) =>
    ctx.insert('auth-policies', {
      id: 'strict',
      name: 'strict',
      createdAt: ctx.now,
      updatedAt: ctx.now,
      tags: {},
      isSystem: false,
      primary: DEFAULT_PRIMARY,
      secondary: { requireTotp: false, requireExtJwtSigner: 'signer-1' },
    }),
  );
});
afterEach(async () => {
  await store.close();
});

/** Sets the signer policy `id` requires, in the store only: caches hear of it when a test says so. */
async function requireSigner(id: string, signerId: string | null): Promise<void> {
  await kernel.write((ctx) => ctx.update('auth-policies', id, { secondary: { requireTotp: false, requireExtJwtSigner: signerId } }));
}

const policyChange = (id: string) => ({ collection: 'auth-policies' as const, kind: 'update' as const, id });

describe('AuthPolicyRulesCache', () => {
  it("answers a policy's rules, the default policy's for none or a missing one, and keeps them", async () => {
    const cache = new AuthPolicyRulesCache(store, kernel.repo('auth-policies'));
    expect(cache.name).toBe('auth-policy-rules');
    expect((await cache.get('strict')).secondary.requireExtJwtSigner).toBe('signer-1');
    for (const none of [null, undefined, 'gone']) expect(await cache.get(none)).toEqual({ primary: DEFAULT_PRIMARY, secondary: DEFAULT_SECONDARY });
    await requireSigner('strict', 'signer-2');
    await requireSigner(DEFAULT_AUTH_POLICY_ID, 'signer-3');
    // Not told of the change yet: what was read is kept.
    expect((await cache.get('strict')).secondary.requireExtJwtSigner).toBe('signer-1');
    expect((await cache.get(null)).secondary.requireExtJwtSigner).toBeNull();
    cache.onChange({ collection: 'identities', kind: 'update', id: 'strict' });
    expect((await cache.get('strict')).secondary.requireExtJwtSigner).toBe('signer-1');
    // Any policy change drops them all: the default policy is also read in place of missing ones.
    cache.onChange(policyChange(DEFAULT_AUTH_POLICY_ID));
    expect((await cache.get('strict')).secondary.requireExtJwtSigner).toBe('signer-2');
    expect((await cache.get('gone')).secondary.requireExtJwtSigner).toBe('signer-3');
    expect((await cache.get(undefined)).secondary.requireExtJwtSigner).toBe('signer-3');
  });

  it('forgets everything on reset', async () => {
    const cache = new AuthPolicyRulesCache(store, kernel.repo('auth-policies'));
    await cache.get('strict');
    await requireSigner('strict', null);
    cache.reset();
    expect((await cache.get('strict')).secondary.requireExtJwtSigner).toBeNull();
  });

  it('does not keep a read that a change overtook', async () => {
    const repo = kernel.repo('auth-policies');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let readDone!: () => void;
    const done = new Promise<void>((resolve) => (readDone = resolve));
    // Reads the store, then waits: the change comes between the read and its keeping.
    const slow = {
      get: async (...args: Parameters<Policies['get']>) => {
        const read = await repo.get(...args);
        readDone();
        await gate;
        return read;
      },
    } as unknown as Policies;
    const cache = new AuthPolicyRulesCache(store, slow);
    const reading = cache.get('strict');
    await done;
    await requireSigner('strict', 'signer-2');
    cache.onChange(policyChange('strict'));
    release();
    expect((await reading).secondary.requireExtJwtSigner).toBe('signer-1');
    expect((await cache.get('strict')).secondary.requireExtJwtSigner).toBe('signer-2');
  });
});

const SIGNER = { id: 'signer-1', issuer: 'https://idp.example.com', claimsProperty: null, useExternalId: false, externalAuthUrl: 'https://idp.example.com/auth', clientId: 'overlay', scopes: ['openid'] } as unknown as Signer;

/** Second-factor deps whose verification answers `subject` for a token 'good' and refuses others. */
function deps(signer: Signer, subject: string, secondary: Partial<AuthPolicyRules['secondary']> = {}) {
  const calls: { token: string | undefined; signerId: string | undefined }[] = [];
  const d: SecondaryExtJwtDeps = {
    externalJwtSigners: {
      verify: async (token, opts = {}) => {
        calls.push({ token, signerId: opts.signerId });
        if (token !== 'good') throw new ExtJwtError(token === undefined ? 'missing' : 'invalid', 'refused by the signer', signer);
        return { signer, claims: {}, subject } satisfies VerifiedExtJwt;
      },
      get: async (id) => (id === signer.id ? signer : undefined),
    },
    authPolicyRules: { get: async () => ({ primary: DEFAULT_PRIMARY, secondary: { ...DEFAULT_SECONDARY, ...secondary } }) as AuthPolicyRules },
  };
  return { deps: d, calls };
}

describe('the EXT-JWT query', () => {
  it("says where to get the signer's token, and is empty for a signer that is gone", () => {
    expect(extJwtQuery('signer-1', SIGNER)).toEqual({ typeId: 'EXT-JWT', provider: 'url', id: 'signer-1', httpUrl: 'https://idp.example.com/auth', clientId: 'overlay', scopes: ['openid'] });
    expect(extJwtQuery('signer-9', undefined)).toEqual({ typeId: 'EXT-JWT', provider: 'url', id: 'signer-9', httpUrl: '', clientId: '', scopes: [] });
    const bare = { ...SIGNER, externalAuthUrl: null, clientId: null, scopes: null } as unknown as Signer;
    expect(extJwtQuery('signer-1', bare)).toMatchObject({ httpUrl: '', clientId: '', scopes: [] });
  });
});

describe('requiredSigner', () => {
  it('answers the signer the policy names, else null', async () => {
    const identity = { authPolicyId: 'p' };
    expect(await requiredSigner(deps(SIGNER, 'x', { requireExtJwtSigner: 'signer-1' }).deps, identity)).toBe('signer-1');
    expect(await requiredSigner(deps(SIGNER, 'x', { requireExtJwtSigner: null }).deps, identity)).toBeNull();
    expect(await requiredSigner(deps(SIGNER, 'x', { requireExtJwtSigner: '' }).deps, identity)).toBeNull();
  });
});

describe('checkSecondToken', () => {
  const identity = { id: 'identity-1', externalId: 'laptop-1' };

  it("accepts a token of the signer naming the identity's id, checked against that signer", async () => {
    const { deps: d, calls } = deps(SIGNER, 'identity-1');
    expect(await checkSecondToken(d, 'signer-1', identity, 'good')).toBe(SIGNER);
    expect(calls).toEqual([{ token: 'good', signerId: 'signer-1' }]);
  });

  it('with useExternalId, accepts a token naming the external id and not the id', async () => {
    const external = { ...SIGNER, useExternalId: true } as Signer;
    expect(await checkSecondToken(deps(external, 'laptop-1').deps, 'signer-1', identity, 'good')).toBe(external);
    const err = await checkSecondToken(deps(external, 'identity-1').deps, 'signer-1', identity, 'good').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExtJwtError);
    expect(await checkSecondToken(deps(external, 'laptop-1').deps, 'signer-1', { id: 'identity-1' }, 'good').catch((e: unknown) => e)).toBeInstanceOf(ExtJwtError);
  });

  it('refuses a token naming another identity, saying which claim it read', async () => {
    const err = (await checkSecondToken(deps(SIGNER, 'identity-2').deps, 'signer-1', identity, 'good').catch((e: unknown) => e)) as ExtJwtError;
    expect(err).toBeInstanceOf(ExtJwtError);
    expect(err.kind).toBe('invalid');
    expect(err.message).toBe('the token names another identity than the one logged in (claim sub)');
    expect(err.signer).toBe(SIGNER);
    const mapped = { ...SIGNER, claimsProperty: '/device/id' } as Signer;
    expect(((await checkSecondToken(deps(mapped, 'identity-2').deps, 'signer-1', identity, 'good').catch((e: unknown) => e)) as Error).message).toBe(
      'the token names another identity than the one logged in (claim /device/id)',
    );
  });
});

describe('secondFactorOutstanding', () => {
  const identity = { id: 'identity-1', externalId: 'laptop-1', authPolicyId: 'p' };

  it('asks nothing when the policy requires no signer, whatever the token', async () => {
    const { deps: d, calls } = deps(SIGNER, 'identity-1', { requireExtJwtSigner: null });
    expect(await secondFactorOutstanding(d, identity, undefined)).toBeUndefined();
    expect(calls).toEqual([]);
  });

  it('asks nothing of a request carrying a good token', async () => {
    expect(await secondFactorOutstanding(deps(SIGNER, 'identity-1', { requireExtJwtSigner: 'signer-1' }).deps, identity, 'good')).toBeUndefined();
  });

  it('answers the query and the refusal for a missing, bad or foreign token', async () => {
    const query = extJwtQuery('signer-1', SIGNER);
    const { deps: d } = deps(SIGNER, 'identity-1', { requireExtJwtSigner: 'signer-1' });
    const missing = await secondFactorOutstanding(d, identity, undefined);
    expect(missing?.query).toEqual(query);
    expect(missing?.refusal.kind).toBe('missing');
    expect((await secondFactorOutstanding(d, identity, 'bad'))?.refusal.message).toBe('refused by the signer');
    const foreign = await secondFactorOutstanding(deps(SIGNER, 'identity-2', { requireExtJwtSigner: 'signer-1' }).deps, identity, 'good');
    expect(foreign?.refusal.message).toContain('another identity');
    expect(foreign?.query).toEqual(query);
  });

  it('lets another failure through', async () => {
    const { deps: d } = deps(SIGNER, 'identity-1', { requireExtJwtSigner: 'signer-1' });
    d.externalJwtSigners.verify = () => Promise.reject(new Error('the store is closed'));
    await expect(secondFactorOutstanding(d, identity, 'good')).rejects.toThrow('the store is closed');
  });
});
