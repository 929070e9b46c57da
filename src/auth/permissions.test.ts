import { describe, expect, it } from 'vitest';
import type { Action } from './permissions.js';
import { allows, type Permitted } from './permissions.js';

const ACTIONS: readonly Action[] = ['read', 'create', 'update', 'delete'];

const user = (...permissions: string[]): Permitted => ({ isAdmin: false, permissions });

describe('allows', () => {
  it('lets an admin do everything, including admin-only (null group) records', () => {
    const admin: Permitted = { isAdmin: true, permissions: [] };
    for (const group of ['identity', 'auth-policy', 'ops', null]) {
      for (const action of ACTIONS) expect(allows(admin, group, action)).toBe(true);
    }
  });

  const cases: [string, Permitted, string | null, Action, boolean][] = [
    ['no permission', user(), 'identity', 'read', false],
    ['no permission, admin-only record', user(), null, 'read', false],
    ['admin_readonly reads a group', user('admin_readonly'), 'identity', 'read', true],
    ['admin_readonly reads another group', user('admin_readonly'), 'auth-policy', 'read', true],
    ['admin_readonly reads admin-only records', user('admin_readonly'), null, 'read', true],
    ['admin_readonly does not create', user('admin_readonly'), 'identity', 'create', false],
    ['admin_readonly does not update', user('admin_readonly'), 'identity', 'update', false],
    ['admin_readonly does not delete', user('admin_readonly'), 'identity', 'delete', false],
    ['admin_readonly does not delete admin-only records', user('admin_readonly'), null, 'delete', false],
    ['group grants read', user('identity'), 'identity', 'read', true],
    ['group grants create', user('identity'), 'identity', 'create', true],
    ['group grants update', user('identity'), 'identity', 'update', true],
    ['group grants delete', user('identity'), 'identity', 'delete', true],
    ['group does not grant another group', user('identity'), 'auth-policy', 'read', false],
    ['group does not grant admin-only records', user('identity'), null, 'read', false],
    ['a permission spelt "null" does not grant admin-only records', user('null', 'null.delete'), null, 'delete', false],
    ['group.read grants read', user('identity.read'), 'identity', 'read', true],
    ['group.read does not grant update', user('identity.read'), 'identity', 'update', false],
    ['group.create grants create only', user('identity.create'), 'identity', 'create', true],
    ['group.create does not grant read', user('identity.create'), 'identity', 'read', false],
    ['group.update grants update only', user('identity.update'), 'identity', 'update', true],
    ['group.update does not grant delete', user('identity.update'), 'identity', 'delete', false],
    ['group.delete grants delete only', user('identity.delete'), 'identity', 'delete', true],
    ['group.delete does not grant create', user('identity.delete'), 'identity', 'create', false],
    ['auth-policy.read reads auth policies', user('auth-policy.read'), 'auth-policy', 'read', true],
    ['auth-policy.read does not read identities', user('auth-policy.read'), 'identity', 'read', false],
    ['a prefix of a group is not the group', user('identity'), 'identity-x', 'read', false],
    ['ops grants ops reads', user('ops'), 'ops', 'read', true],
    ['ops grants nothing on identities', user('ops'), 'identity', 'read', false],
    ['ops.read does not grant ops.update', user('ops.read'), 'ops', 'update', false],
    ['several permissions combine', user('identity.read', 'auth-policy'), 'auth-policy', 'delete', true],
    ['several permissions combine (negative)', user('identity.read', 'auth-policy'), 'identity', 'delete', false],
  ];

  it.each(cases)('%s', (_name, caller, group, action, expected) => {
    expect(allows(caller, group, action)).toBe(expected);
  });
});
