import { describe, expect, it } from 'vitest';
import type { EntityOf } from '../resources/index.js';
import type { Entity, Repository } from '../store/repository.js';
import type { Store } from '../store/store.js';
import { IdentityDirectory, isDisabledAt } from './identity-directory.js';

function record(disabled: boolean, more: Record<string, unknown> = {}): Entity {
  const at = '2026-01-01T00:00:00.000Z';
  return { id: 'id1', createdAt: at, updatedAt: at, tags: {}, name: 'one', authPolicyId: 'default', disabled, disabledUntil: null, ...more };
}

/** A directory over a store of one record (or none), counting its reads; the clock at `now`. */
function over(stored: () => Entity | undefined, now = 0) {
  const counter = { reads: 0 };
  const repo = {
    async get(_ex: unknown, id: string) {
      counter.reads++;
      const e = stored();
      return e && e.id === id ? e : undefined;
    },
  } as unknown as Repository<EntityOf<'identities'>>;
  return { directory: new IdentityDirectory({ db: {} } as Store, repo, () => now), counter };
}

describe('IdentityDirectory', () => {
  it('a read under way when the identity is invalidated does not fill the cache', async () => {
    let stored = record(false);
    let reads = 0;
    let unblock: () => void = () => undefined;
    const blocked = new Promise<void>((resolve) => {
      unblock = resolve;
    });
    const repo = {
      async get() {
        reads++;
        const seen = stored;
        if (reads === 1) await blocked;
        return seen;
      },
    } as unknown as Repository<EntityOf<'identities'>>;
    const directory = new IdentityDirectory({ db: {} } as Store, repo, () => 0);

    const pending = directory.get('id1');
    // A lockout commits while the read is under way.
    stored = record(true);
    directory.invalidate('id1');
    unblock();
    expect((await pending)?.disabled).toBe(false);

    // The next request reads again and sees the lock, and that answer is kept.
    expect((await directory.get('id1'))?.disabled).toBe(true);
    expect((await directory.get('id1'))?.disabled).toBe(true);
    expect(reads).toBe(2);
  });

  it('disabled: without an end, or before its end', () => {
    expect(isDisabledAt({ disabled: false, disabledUntil: null }, 5)).toBe(false);
    expect(isDisabledAt({ disabled: true, disabledUntil: null }, 5)).toBe(true);
    expect(isDisabledAt({ disabled: true, disabledUntil: 6 }, 5)).toBe(true);
    expect(isDisabledAt({ disabled: true, disabledUntil: 5 }, 5)).toBe(false);
    expect(isDisabledAt({ disabled: false, disabledUntil: 6 }, 5)).toBe(false);
  });

  it('reads an identity once into what the credential check needs, and nothing for an unknown id', async () => {
    const { directory, counter } = over(() =>
      record(true, { isAdmin: true, isDefaultAdmin: true, permissions: ['identity.read'], authPolicyId: 'p1', disabledUntil: '2026-01-02T00:00:00.000Z' }),
    );
    expect(directory.name).toBe('identity-directory');
    const expected = {
      id: 'id1',
      name: 'one',
      isAdmin: true,
      isDefaultAdmin: true,
      permissions: ['identity.read'],
      authPolicyId: 'p1',
      disabled: true,
      disabledUntil: Date.parse('2026-01-02T00:00:00.000Z'),
    };
    expect(await directory.get('id1')).toEqual(expected);
    expect(await directory.get('id1')).toEqual(expected);
    expect(counter.reads).toBe(1);
    expect(await directory.get('nobody')).toBeUndefined();
    // Fields left out of the record read as the safe values.
    const bare = over(() => record(false, { permissions: undefined }));
    expect(await bare.directory.get('id1')).toMatchObject({ isAdmin: false, isDefaultAdmin: false, permissions: [], disabled: false, disabledUntil: null });
  });

  it('isDisabled asks at the clock of the directory', () => {
    const until = 1_000;
    expect(over(() => undefined, 999).directory.isDisabled({ disabled: true, disabledUntil: until })).toBe(true);
    expect(over(() => undefined, 1_000).directory.isDisabled({ disabled: true, disabledUntil: until })).toBe(false);
  });

  it('a change of the identity drops it, a change of anything else does not; reset drops all', async () => {
    const { directory, counter } = over(() => record(false));
    await directory.get('id1');
    directory.onChange({ collection: 'authenticators', kind: 'update', id: 'id1' });
    await directory.get('id1');
    expect(counter.reads).toBe(1);
    directory.onChange({ collection: 'identities', kind: 'update', id: 'id1' });
    await directory.get('id1');
    expect(counter.reads).toBe(2);
    directory.reset();
    await directory.get('id1');
    expect(counter.reads).toBe(3);
  });
});
