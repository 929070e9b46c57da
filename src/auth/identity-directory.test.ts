import { describe, expect, it } from 'vitest';
import type { EntityOf } from '../resources/index.js';
import type { Entity, Repository } from '../store/repository.js';
import type { Store } from '../store/store.js';
import { IdentityDirectory, isDisabledAt } from './identity-directory.js';

function record(disabled: boolean): Entity {
  const at = '2026-01-01T00:00:00.000Z';
  return { id: 'id1', createdAt: at, updatedAt: at, tags: {}, name: 'one', authPolicyId: 'default', disabled, disabledUntil: null };
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
});
