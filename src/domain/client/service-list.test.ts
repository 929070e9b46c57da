import { describe, expect, it } from 'vitest';
import type { PostureFacts } from '../../policy/posture.js';
import type { StoredPostureCheck } from './catalogs.js';
import { policyPostureQueries, type PolicyPostureQueries } from './service-list.js';

const at = '2026-01-01T00:00:00.000Z';
const check = (id: string) =>
  ({ id, name: id, typeId: 'MFA', roleAttributes: [], tags: {}, createdAt: at, updatedAt: at, timeoutSeconds: -1, promptOnWake: false, promptOnUnlock: false }) as unknown as StoredPostureCheck;
const catalog = new Map(['c1', 'c2'].map((id) => [id, check(id)]));
const checksOf = new Map([
  ['p1', ['c1', 'c2']],
  ['p2', ['c2']],
]);
const facts: PostureFacts = { posture: undefined, mfa: { isMfaComplete: true, passedAt: 0 }, now: 1 };

describe('posture query entries of a list', () => {
  it('are made once per policy and type and shared by the services that policy grants', () => {
    const made = new Map<string, PolicyPostureQueries>();
    const first = policyPostureQueries([{ policyId: 'p1', type: 'Dial' }, { policyId: 'p2', type: 'Dial' }], checksOf, catalog, facts, made);
    const second = policyPostureQueries([{ policyId: 'p1', type: 'Dial' }, { policyId: 'p1', type: 'Bind' }], checksOf, catalog, facts, made);
    expect(second[0]).toBe(first[0]);
    expect(second[1]).not.toBe(first[0]);
    expect(second[1]).toMatchObject({ policyId: 'p1', policyType: 'Bind', isPassing: true });
    expect(first.map((e) => e.postureQueries.map((q) => q.id))).toEqual([['c1', 'c2'], ['c2']]);
    expect(made.size).toBe(3);
  });

  it('are made anew for another list', () => {
    const grants = [{ policyId: 'p2', type: 'Dial' as const }];
    expect(policyPostureQueries(grants, checksOf, catalog, facts)[0]).not.toBe(policyPostureQueries(grants, checksOf, catalog, facts)[0]);
  });
});
