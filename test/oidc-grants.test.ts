// Refresh grants over a real store with an injected clock: creation, rotation (which extends the
// grant), the token lifetime to the millisecond, reuse (also racing, also against another process),
// deletion while a token is still remembered, the sweep, the memory bound, and a store failing
// mid-rotation.
import type { CompiledQuery } from 'kysely';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { iso } from '../src/clock.js';
import { Grants, type Grant, type RefreshCheck } from '../src/oidc/grants.js';
import { template } from '../src/store/template.js';
import { Kernel } from '../src/kernel/kernel.js';
import { migrations } from '../src/store/migrations/index.js';
import { openSqlite } from '../src/store/sqlite.js';
import { Store } from '../src/store/store.js';
import { testClock, type TestClock } from './helpers.js';

const LIFETIME = 60 * 60_000;

let store: Store;
let clock: TestClock;
let grants: Grants;
let sessions = 0;

/** An identity with an API session (the rows a grant references); answers the session id. */
async function apiSession(): Promise<{ apiSessionId: string; identityId: string }> {
  const n = ++sessions;
  const at = iso(clock());
  const identityId = `identity-${n}`;
  const apiSessionId = `session-${n}`;
  await store.db
    .insertInto('identities')
    .values({ id: identityId, created_at: at, updated_at: at, name: `grant-user-${n}`, type: 'User', is_admin: 0, auth_policy_id: 'policy' })
    .execute();
  await store.db
    .insertInto('api_sessions')
    .values({ id: apiSessionId, created_at: at, updated_at: at, token_hash: `hash-${n}`, identity_id: identityId, auth_method: 'password', last_activity_at: at })
    .execute();
  return { apiSessionId, identityId };
}

async function newGrant(g = grants): Promise<{ grant: Grant; refreshToken: string }> {
  const ids = await apiSession();
  return g.create({ ...ids, clientId: 'overlay', scopes: ['openid', 'offline_access'], amr: ['password', 'totp'], authTime: clock() - 5_000 });
}

const pass: RefreshCheck = async () => undefined;

/** The grant's expiry as the store has it. */
async function storedExpiry(grant: Grant): Promise<number | undefined> {
  return (await grants.live()).get(grant.apiSessionId);
}

/** A kernel over the store, on the test clock (the clock is read at each write). */
function kernelOf(s: Store): Kernel {
  return new Kernel({ store: s, clock: () => clock() });
}

beforeEach(async () => {
  store = new Store(openSqlite(':memory:'));
  await store.migrate(migrations);
  clock = testClock();
  const at = iso(clock());
  await store.db.insertInto('auth_policies').values({ id: 'policy', created_at: at, updated_at: at, name: 'p', primary: '{}', secondary: '{}' }).execute();
  grants = new Grants(kernelOf(store), clock, LIFETIME);
});
afterEach(async () => {
  vi.restoreAllMocks();
  await store.close();
});

describe('a grant', () => {
  it('is created with the lifetime of its first token, and read back from the store as it was made', async () => {
    const { grant, refreshToken } = await newGrant();
    expect(grant.expiresAt).toBe(clock() + LIFETIME);
    expect(refreshToken).toMatch(/^[0-9a-z]{9}[A-Za-z0-9_-]{43}$/);
    expect(await storedExpiry(grant)).toBe(grant.expiresAt);
    // Another process (nothing in its memory) reads the token from the store.
    const check = vi.fn(pass);
    const cold = await new Grants(kernelOf(store), clock, LIFETIME).refresh(refreshToken, check);
    expect(check).toHaveBeenCalledWith(grant, clock());
    expect(cold).toMatchObject({ kind: 'rotated', grant: { ...grant, expiresAt: clock() + LIFETIME } });
  });

  it('rotation answers a new token and extends the grant, in memory and in the store', async () => {
    const { grant, refreshToken } = await newGrant();
    const createdAt = clock();
    clock.advance(10 * 60_000);
    const check = vi.fn(pass);
    const outcome = await grants.refresh(refreshToken, check);
    expect(check).toHaveBeenCalledWith(grant, createdAt);
    if (outcome.kind !== 'rotated') throw new Error(`expected rotated, got ${outcome.kind}`);
    expect(outcome.refreshToken).not.toBe(refreshToken);
    expect(outcome.issuedAt).toBe(clock());
    expect(outcome.grant).toEqual({ ...grant, expiresAt: clock() + LIFETIME });
    expect(await storedExpiry(grant)).toBe(clock() + LIFETIME);

    // The successor rotates again, from memory and (in another process) from the store; its issue time is the rotation's.
    const rotatedAt = clock();
    clock.advance(60_000);
    const again = vi.fn(pass);
    const cold = await new Grants(kernelOf(store), clock, LIFETIME).refresh(outcome.refreshToken, again);
    expect(again).toHaveBeenCalledWith({ ...grant, expiresAt: rotatedAt + LIFETIME }, rotatedAt);
    expect(cold.kind).toBe('rotated');
    expect(await storedExpiry(grant)).toBe(clock() + LIFETIME);
  });

  it('the successor is remembered: its next rotation reads nothing', async () => {
    const { refreshToken } = await newGrant();
    const first = await grants.refresh(refreshToken, pass);
    if (first.kind !== 'rotated') throw new Error('expected rotated');
    const select = vi.spyOn(store.db, 'executeQuery');
    const check = vi.fn(pass);
    const second = await grants.refresh(first.refreshToken, check);
    expect(second.kind).toBe('rotated');
    expect(check).toHaveBeenCalledWith(first.grant, first.issuedAt);
    expect(select).not.toHaveBeenCalled();
  });

  it('a refused check writes nothing: the token stays current', async () => {
    const { refreshToken } = await newGrant();
    const refusal = new Error('session revoked');
    await expect(grants.refresh(refreshToken, async () => Promise.reject(refusal))).rejects.toBe(refusal);
    expect((await grants.refresh(refreshToken, pass)).kind).toBe('rotated');
  });
});

describe('a token', () => {
  it('expires at its lifetime to the millisecond, in memory and read from the store', async () => {
    const { grant, refreshToken } = await newGrant();
    clock.advance(LIFETIME - 1);
    const other = new Grants(kernelOf(store), clock, LIFETIME);
    expect((await other.refresh(refreshToken, pass)).kind).toBe('rotated');

    const second = await newGrant();
    const third = await newGrant();
    clock.advance(LIFETIME);
    const check = vi.fn(pass);
    const remembered = grants.remembering;
    expect(await grants.refresh(second.refreshToken, check)).toEqual({ kind: 'expired', grant: second.grant });
    expect(grants.remembering).toBe(remembered - 1);
    expect(await new Grants(kernelOf(store), clock, LIFETIME).refresh(third.refreshToken, check)).toEqual({ kind: 'expired', grant: third.grant });
    // Expired stays expired (and is forgotten: the store answers the same).
    expect((await grants.refresh(second.refreshToken, check)).kind).toBe('expired');
    expect(check).not.toHaveBeenCalled();
    expect(grant.id).not.toBe(second.grant.id);
  });

  it('unknown: nothing is checked', async () => {
    const check = vi.fn(pass);
    expect(await grants.refresh('not-a-token', check)).toEqual({ kind: 'unknown' });
    expect(check).not.toHaveBeenCalled();
  });

  it('a rotated token presented again is reuse, from memory and from the store, and extends nothing', async () => {
    const { grant, refreshToken } = await newGrant();
    clock.advance(60_000);
    expect((await grants.refresh(refreshToken, pass)).kind).toBe('rotated');
    const extended = await storedExpiry(grant);
    clock.advance(60_000);
    const check = vi.fn(pass);
    expect(await grants.refresh(refreshToken, check)).toEqual({ kind: 'reused', grant: expect.objectContaining({ id: grant.id }) });
    expect(await new Grants(kernelOf(store), clock, LIFETIME).refresh(refreshToken, check)).toEqual({ kind: 'reused', grant: { ...grant, expiresAt: extended } });
    expect(check).not.toHaveBeenCalled();
    expect(await storedExpiry(grant)).toBe(extended);
  });

  it('two uses at once: the first rotates, the second is reuse; the successor works', async () => {
    const { refreshToken } = await newGrant();
    const [first, second] = await Promise.all([grants.refresh(refreshToken, pass), grants.refresh(refreshToken, pass)]);
    expect([first.kind, second.kind]).toEqual(['rotated', 'reused']);
    if (first.kind !== 'rotated') throw new Error('expected rotated');
    expect((await grants.refresh(first.refreshToken, pass)).kind).toBe('rotated');
  });

  it('rotated by another process while remembered here: reuse, never a second successor', async () => {
    const { grant, refreshToken } = await newGrant();
    const elsewhere = await new Grants(kernelOf(store), clock, LIFETIME).refresh(refreshToken, pass);
    expect(elsewhere.kind).toBe('rotated');
    clock.advance(1_000);
    const here = await grants.refresh(refreshToken, pass);
    expect(here).toEqual({ kind: 'reused', grant });
    const tokens = await store.db.selectFrom('oidc_refresh_tokens').select('token_hash').where('grant_id', '=', grant.id).execute();
    expect(tokens).toHaveLength(2);
  });

  it('rotations of one batch asked for at different times: each grant lives as long as its own token', async () => {
    const a = await newGrant();
    const b = await newGrant();
    const askedA = clock();
    const rotatingA = grants.refresh(a.refreshToken, pass);
    clock.advance(5_000);
    const rotatingB = grants.refresh(b.refreshToken, pass);
    const [ra, rb] = await Promise.all([rotatingA, rotatingB]);
    expect([ra.kind, rb.kind]).toEqual(['rotated', 'rotated']);
    expect(await storedExpiry(a.grant)).toBe(askedA + LIFETIME);
    expect(await storedExpiry(b.grant)).toBe(clock() + LIFETIME);
  });

  it('rotations asked for while a transaction is written are written together, in the next one', async () => {
    const made = [await newGrant(), await newGrant(), await newGrant()];
    // A store slow to commit (as over a network): the first transaction waits until released.
    const transaction = store.commit.bind(store);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const spy = vi.spyOn(store, 'commit').mockImplementation(async (fn) => {
      if (spy.mock.calls.length === 1) await released;
      return transaction(fn);
    });
    const macrotask = () => new Promise((resolve) => setImmediate(resolve));
    const first = grants.refresh(made[0]!.refreshToken, pass);
    while (spy.mock.calls.length === 0) await macrotask();
    const second = grants.refresh(made[1]!.refreshToken, pass);
    await macrotask();
    await macrotask();
    const third = grants.refresh(made[2]!.refreshToken, pass);
    await macrotask();
    await macrotask();
    release();
    expect((await Promise.all([first, second, third])).map((o) => o.kind)).toEqual(['rotated', 'rotated', 'rotated']);
    expect(spy).toHaveBeenCalledTimes(2);
  });

  it('a store failing mid-rotation fails the refresh, and the token stays current', async () => {
    const { refreshToken } = await newGrant();
    const failure = new Error('disk full');
    vi.spyOn(store, 'commit').mockRejectedValueOnce(failure);
    const [one, two] = await Promise.allSettled([grants.refresh(refreshToken, pass), grants.refresh(refreshToken, pass)]);
    expect(one).toEqual({ status: 'rejected', reason: failure });
    expect(two).toEqual({ status: 'rejected', reason: failure });
    expect((await grants.refresh(refreshToken, pass)).kind).toBe('rotated');
  });
});

describe('deleting a grant', () => {
  it('refuses its token at once, although the token was remembered; other grants stay remembered', async () => {
    const { grant, refreshToken } = await newGrant();
    const other = await newGrant();
    expect(grants.remembering).toBe(2);
    await grants.delete(grant.id);
    expect(grants.remembering).toBe(1);
    const check = vi.fn(pass);
    expect(await grants.refresh(refreshToken, check)).toEqual({ kind: 'unknown' });
    expect(check).not.toHaveBeenCalled();
    expect(await grants.live()).toEqual(new Map([[other.grant.apiSessionId, other.grant.expiresAt]]));
    expect((await grants.refresh(other.refreshToken, pass)).kind).toBe('rotated');
  });
});

describe('the sweep', () => {
  it('removes the grants (and tokens) that ended, to the millisecond, and answers their sessions', async () => {
    const ending = await newGrant();
    clock.advance(30 * 60_000);
    const later = await newGrant();
    clock.set(ending.grant.expiresAt - 1);
    expect(await grants.sweep()).toEqual([]);
    expect(grants.remembering).toBe(2);
    expect([...(await grants.live()).keys()]).toEqual([ending.grant.apiSessionId, later.grant.apiSessionId]);

    clock.set(ending.grant.expiresAt);
    expect([...(await grants.live()).keys()]).toEqual([later.grant.apiSessionId]);
    expect(await grants.sweep()).toEqual([ending.grant.apiSessionId]);
    expect(grants.remembering).toBe(1);
    expect(await store.db.selectFrom('oidc_grants').select('id').execute()).toEqual([{ id: later.grant.id }]);
    expect(await store.db.selectFrom('oidc_refresh_tokens').select('grant_id').execute()).toEqual([{ grant_id: later.grant.id }]);
    expect(await grants.refresh(ending.refreshToken, pass)).toEqual({ kind: 'unknown' });
    expect(await grants.sweep()).toEqual([]);
  });

  it('keeps a grant that rotation extended', async () => {
    const { grant, refreshToken } = await newGrant();
    clock.advance(LIFETIME - 1);
    expect((await grants.refresh(refreshToken, pass)).kind).toBe('rotated');
    clock.advance(1);
    expect(await grants.sweep()).toEqual([]);
    expect(await storedExpiry(grant)).toBe(clock() - 1 + LIFETIME);
  });
});

describe('remembered tokens', () => {
  it('are bounded: past the bound the least recently used goes, and a forgotten token is read from the store', async () => {
    const bounded = new Grants(kernelOf(store), clock, LIFETIME, 15);
    const made = [];
    for (let i = 0; i < 15; i++) made.push(await newGrant(bounded));
    expect(bounded.remembering).toBe(15);
    made.push(await newGrant(bounded));
    // the first token made left for the sixteenth
    expect(bounded.remembering).toBe(15);
    const select = vi.spyOn(store.db, 'executeQuery');
    expect((await bounded.refresh(made[0]!.refreshToken, pass)).kind).toBe('rotated');
    expect(select).toHaveBeenCalled();
    select.mockClear();
    expect((await bounded.refresh(made[2]!.refreshToken, pass)).kind).toBe('rotated');
    expect(select).not.toHaveBeenCalled();
  });
});

describe('query templates', () => {
  const compiled = (parameters: unknown[]) => ({ sql: 'select ?', parameters, query: {} }) as unknown as CompiledQuery;
  it('bind values by name in the order of the compiled parameters', () => {
    const bind = template(compiled([':b', ':a', ':b']), [':a', ':b']);
    expect(bind({ ':a': 1, ':b': 2 }).parameters).toEqual([2, 1, 2]);
    expect(bind({ ':a': 1, ':b': 2 }).sql).toBe('select ?');
  });
  it('refuse a parameter that is not a named placeholder', () => {
    expect(() => template(compiled([':a', ':c']), [':a'])).toThrow('unexpected parameter :c in select ?');
    expect(() => template(compiled([7]), [':a'])).toThrow('unexpected parameter 7 in select ?');
  });
});
