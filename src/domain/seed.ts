// Records every controller starts with: identity types, the default auth policy and, at the first
// start only, the default admin. Never a fixed default password.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { hashPassword } from '../auth/passwords.js';
import { writeFileAtomic } from '../pki/files.js';
import { newId } from '../ids.js';
import { DEFAULT_AUTH_POLICY_ID, DEFAULT_PRIMARY, DEFAULT_SECONDARY } from '../resources/auth-policies.js';
import { IDENTITY_TYPES } from '../resources/identity-types.js';
import type { Executor } from '../store/store.js';
import type { Resources } from './resources.js';
import { seedConfigTypes } from './services.js';
import { seedPostureCheckTypes } from './posture-checks.js';

export interface SeedOptions {
  dataDir: string;
  admin: { username?: string; password?: string };
  /** Shows a generated admin password to the operator, once. */
  announce(message: string): void;
}

export async function seed(resources: Resources, opts: SeedOptions): Promise<{ adminCreated: boolean }> {
  const isDefaultAdmin = resources.store.dialect.toDb('boolean', true) as number;
  const findAdmin = (ex: Executor) =>
    ex.selectFrom('identities').select('id').where('is_default_admin', '=', isDefaultAdmin).executeTakeFirst();
  const needsAdmin = !(await findAdmin(resources.store.db));
  const adminPassword = opts.admin.password ?? randomBytes(18).toString('base64url');
  // Hashed before the transaction: it takes a while and must not hold the store's writer.
  const passwordHash = needsAdmin ? await hashPassword(adminPassword) : '';
  // A generated password is on disk before the admin it opens is committed: a crash between the two
  // then leaves a file with no admin (the next start makes both anew), never an admin nobody can open.
  const file = needsAdmin && opts.admin.password === undefined ? join(opts.dataDir, 'admin-password') : undefined;
  if (file) await writeFileAtomic(file, `${adminPassword}\n`, 0o600);
  let adminCreated = false;
  await resources.write(async (ctx) => {
    const base = { createdAt: ctx.now, updatedAt: ctx.now, tags: {} };
    const types = resources.get('identity-types').repo;
    for (const name of IDENTITY_TYPES) {
      if (!(await types.exists(ctx.tx, name))) await ctx.insert('identity-types', { ...base, id: name, name });
    }
    const policies = resources.get('auth-policies').repo;
    if (!(await policies.exists(ctx.tx, DEFAULT_AUTH_POLICY_ID))) {
      await ctx.insert('auth-policies', {
        ...base,
        id: DEFAULT_AUTH_POLICY_ID,
        name: 'Default',
        isSystem: true,
        primary: DEFAULT_PRIMARY,
        secondary: DEFAULT_SECONDARY,
      });
    }
    await seedConfigTypes(ctx);
    await seedPostureCheckTypes(ctx);
    if (!needsAdmin || (await findAdmin(ctx.tx))) return;
    const identityId = newId();
    await ctx.insert('identities', {
      ...base,
      id: identityId,
      name: 'Default Admin',
      type: 'User',
      isAdmin: true,
      isDefaultAdmin: true,
      authPolicyId: DEFAULT_AUTH_POLICY_ID,
      defaultHostingCost: 0,
      defaultHostingPrecedence: 'default',
      serviceHostingCosts: {},
      serviceHostingPrecedences: {},
      roleAttributes: [],
      permissions: [],
      disabled: false,
      envInfo: {},
      sdkInfo: {},
      interfaces: [],
    });
    await ctx.insert('authenticators', {
      ...base,
      id: newId(),
      method: 'updb',
      identityId,
      username: opts.admin.username ?? 'admin',
      passwordHash,
      failedAttempts: 0,
      isIssuedByNetwork: false,
      isExtendRequested: false,
      isKeyRollRequested: false,
      lastAuthResolvedToRoot: false,
      lastExtendRolledKeys: false,
    });
    adminCreated = true;
  }).finally(async () => {
    // Another controller on the same store made the admin meanwhile, or the write failed.
    if (file && !adminCreated) await rm(file, { force: true });
  });
  if (file && adminCreated) {
    opts.announce(
      `created the default admin "${opts.admin.username ?? 'admin'}" with the generated password ${adminPassword} (also in ${file}, mode 0600)`,
    );
  }
  return { adminCreated };
}
