// The store's upkeep through the Management API: snapshots taken while clients write, restored into a
// working controller; data integrity checks that come back clean, and damage planted behind the API's
// back (raw SQL) found by a check and repaired by a fix.
import { copyFileSync, existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  expectMissingCredential,
  json,
  login,
  MGMT,
  startTestController,
  tempDir,
  type TestController,
} from './helpers.js';

/** A logger whose lines the test reads. */
function capturedLog(): { log: pino.Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return {
    log: pino({ level: 'info' }, stream),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

/** Polls the results until the run has ended; answers them. */
async function finished(t: TestController, token: string): Promise<any> {
  for (let i = 0; i < 500; i++) {
    const res = await call(t, 'GET', `${MGMT}/database/data-integrity-results`, { token });
    expect(res.statusCode).toBe(200);
    const data = json(res).data;
    if (!data.inProgress) return data;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('the data integrity run did not end');
}

async function run(t: TestController, token: string, kind: 'check' | 'fix'): Promise<any> {
  const res = await call(t, 'POST', `${MGMT}/database/${kind}-data-integrity`, { token });
  expect(res.statusCode).toBe(202);
  expect(json(res).data).toEqual({});
  return finished(t, token);
}

const DATABASE_OPS = [
  ['POST', '/database/check-data-integrity'],
  ['POST', '/database/fix-data-integrity'],
  ['GET', '/database/data-integrity-results'],
  ['POST', '/database/snapshot'],
] as const;

describe('database operations: who may', () => {
  let t: TestController;
  let admin: string;
  let reader: string;
  beforeAll(async () => {
    t = await startTestController({ env: ADMIN_ENV });
    admin = await asAdmin(t);
    // admin_readonly and every group permission: still not an admin.
    await createIdentityWithPassword(t, admin, {
      name: 'operator',
      username: 'operator',
      password: 'operator-pw-1',
      permissions: ['admin_readonly', 'ops', 'identity', 'service-policy'],
    });
    reader = await login(t, 'operator', 'operator-pw-1');
  });
  afterAll(() => t.close());

  it.each(DATABASE_OPS)('%s %s needs a credential, and an admin', async (method, path) => {
    expectMissingCredential(await call(t, method, `${MGMT}${path}`));
    expectError(await call(t, method, `${MGMT}${path}`, { token: reader }), 401, 'UNAUTHORIZED');
  });

  it('an in-memory store is checked too', async () => {
    expect(await run(t, admin, 'check')).toMatchObject({ error: null, results: [] });
  });

  it('a snapshot of an in-memory store is refused, not faked', async () => {
    const res = await call(t, 'POST', `${MGMT}/database/snapshot`, { token: admin });
    expect(res.statusCode).toBe(500);
    expect(readdirSync(t.dataDir).filter((f) => f.startsWith('overlay.db-'))).toEqual([]);
  });
});

describe('snapshots', () => {
  const dir = tempDir();
  let t: TestController;
  let admin: string;
  const captured = capturedLog();
  beforeAll(async () => {
    t = await startTestController({ env: ADMIN_ENV, dataDir: dir.path, memoryStore: false, log: captured.log });
    admin = await asAdmin(t);
  });
  afterAll(async () => {
    await t?.close();
    dir.remove();
  });

  it('is taken while clients write, at most once a minute, and restores into a working controller', async () => {
    for (let i = 0; i < 5; i++) await createIdentityWithPassword(t, admin, { name: `before-${i}`, username: `before-${i}`, password: 'password-before' });
    // Writes and the snapshot at once: real parallel requests.
    const writes = Array.from({ length: 40 }, (_, i) =>
      call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: `during-${i}`, type: 'User', isAdmin: false, roleAttributes: ['during'] } }),
    );
    const [snap, ...written] = await Promise.all([call(t, 'POST', `${MGMT}/database/snapshot`, { token: admin }), ...writes]);
    expect(written.map((r) => r.statusCode)).toEqual(written.map(() => 201));
    expect(snap.statusCode).toBe(200);
    const path = json(snap).data.path as string;
    expect(dirname(path)).toBe(dir.path);
    expect(basename(path)).toMatch(/^overlay\.db-\d{8}-\d{6}$/);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(captured.lines().some((l) => l.msg === 'store snapshot written' && l.path === path)).toBe(true);

    // Within the minute: refused, even in parallel; a minute later: taken.
    const again = await Promise.all([1, 2, 3].map(() => call(t, 'POST', `${MGMT}/database/snapshot`, { token: admin })));
    for (const res of again) {
      expectError(res, 429, 'RATE_LIMITED');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }
    // A minute later: one of several asked for at once is taken.
    t.clock.advance(60_000);
    const later = await Promise.all([1, 2, 3].map(() => call(t, 'POST', `${MGMT}/database/snapshot`, { token: admin })));
    expect(later.map((r) => r.statusCode).sort()).toEqual([200, 429, 429]);
    expect(json(later.find((r) => r.statusCode === 200)!).data.path).not.toBe(path);

    // Restore: stop, put the snapshot in the store's place, start again on the same data directory.
    await t.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(join(dir.path, `overlay.db${suffix}`), { force: true });
    copyFileSync(path, join(dir.path, 'overlay.db'));
    t = await startTestController({ env: ADMIN_ENV, dataDir: dir.path, memoryStore: false });
    admin = await asAdmin(t);
    const before = await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent('name contains "before-"')}`, { token: admin });
    expect(json(before).meta.pagination.totalCount).toBe(5);
    // The snapshot is one moment: some of the parallel creates, each whole (with its links), none half.
    const during = json(await call(t, 'GET', `${MGMT}/identities?filter=${encodeURIComponent('name contains "during-" limit none')}`, { token: admin }));
    expect(during.data.length).toBeLessThanOrEqual(40);
    const restored = await run(t, admin, 'check');
    expect(restored).toMatchObject({ inProgress: false, fixingErrors: false, tooManyErrors: false, error: null, results: [] });
    // The restored controller takes writes.
    await createIdentityWithPassword(t, admin, { name: 'after-restore', username: 'after-restore', password: 'password-after' });
    expect(await login(t, 'after-restore', 'password-after')).toEqual(expect.any(String));
  });
});

describe('data integrity', () => {
  const dir = tempDir();
  let t: TestController;
  let admin: string;
  const ids: Record<string, string> = {};
  const captured = capturedLog();
  beforeAll(async () => {
    t = await startTestController({ env: ADMIN_ENV, dataDir: dir.path, memoryStore: false, log: captured.log });
    admin = await asAdmin(t);
    const create = async (path: string, body: Record<string, unknown>) => {
      const res = await call(t, 'POST', `${MGMT}/${path}`, { token: admin, body });
      if (res.statusCode !== 201) throw new Error(`${path}: ${res.statusCode} ${res.body}`);
      t.clock.advance(1000); // so the older of two records is told by its time
      return json(res).data.id as string;
    };
    ids.alice = await create('identities', { name: 'alice', type: 'User', isAdmin: false, roleAttributes: ['staff'] });
    ids.bob = await create('identities', { name: 'bob', type: 'User', isAdmin: false, roleAttributes: ['staff'] });
    ids.carol = await create('identities', { name: 'carol', type: 'User', isAdmin: false, roleAttributes: ['guest'] });
    ids.service = await create('services', { name: 'wiki', roleAttributes: ['internal'] });
    ids.policy = await create('service-policies', {
      name: 'staff-dial',
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: ['#staff'],
      serviceRoles: ['#internal'],
    });
  });
  afterAll(async () => {
    await t?.close();
    dir.remove();
  });

  it('a check of a sound store comes back clean', async () => {
    const res = await run(t, admin, 'check');
    expect(res).toMatchObject({ inProgress: false, fixingErrors: false, tooManyErrors: false, error: null, results: [] });
    expect(Date.parse(res.startTime)).toBe(t.clock());
    expect(res.endTime).not.toBeNull();
  });

  it('a check while clients write sees one moment of the store: clean', async () => {
    const writes = Array.from({ length: 30 }, (_, i) =>
      call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: `busy-${i}`, type: 'User', isAdmin: false, roleAttributes: ['staff'] } }),
    );
    const [started, ...written] = await Promise.all([call(t, 'POST', `${MGMT}/database/check-data-integrity`, { token: admin }), ...writes]);
    expect(started.statusCode).toBe(202);
    expect(written.every((r) => r.statusCode === 201)).toBe(true);
    expect(await finished(t, admin)).toMatchObject({ error: null, results: [] });
    for (const r of written) expect((await call(t, 'DELETE', `${MGMT}/identities/${json(r).data.id}`, { token: admin })).statusCode).toBe(200);
  });

  it('one run at a time, across check and fix', async () => {
    // Parallel requests: one starts a run, the others find it running.
    const paths = ['check', 'fix', 'check', 'fix', 'check'];
    const answers = await Promise.all(paths.map((p) => call(t, 'POST', `${MGMT}/database/${p}-data-integrity`, { token: admin })));
    expect(answers.filter((r) => r.statusCode === 202)).toHaveLength(1);
    for (const res of answers.filter((r) => r.statusCode !== 202)) expectError(res, 429, 'RATE_LIMITED');
    expect((await finished(t, admin)).results).toEqual([]);
  });

  it('finds damage planted behind the API, and a fix repairs it', async () => {
    const db = t.app.core.store.db;
    const ghost = 'ghost-identity';
    await sql`pragma foreign_keys = off`.execute(db);
    // A dangling reference (nullable: cleared by the fix) and a dangling policy link.
    await sql`update identities set auth_policy_id = 'no-such-policy' where id = ${ids.carol}`.execute(db);
    await sql`insert into service_policy_identities (policy_id, identity_id) values (${ids.policy}, ${ghost})`.execute(db);
    await sql`insert into role_attribute_index (kind, attribute, entity_id) values ('identity', 'staff', ${ghost})`.execute(db);
    await sql`pragma foreign_keys = on`.execute(db);
    // A missing link (alice is staff) and an extra one (carol is not).
    await sql`delete from service_policy_identities where policy_id = ${ids.policy} and identity_id = ${ids.alice}`.execute(db);
    await sql`insert into service_policy_identities (policy_id, identity_id) values (${ids.policy}, ${ids.carol})`.execute(db);
    // The attribute index lost bob's attribute.
    await sql`delete from role_attribute_index where kind = 'identity' and entity_id = ${ids.bob}`.execute(db);
    // A duplicate name, once the unique index is gone.
    await sql`drop index identities_name_unique`.execute(db);
    await sql`update identities set name = 'alice' where id = ${ids.bob}`.execute(db);

    const checked = await run(t, admin, 'check');
    expect(checked.error).toBeNull();
    const descriptions: string[] = checked.results.map((r: { description: string }) => r.description);
    const expected = [
      new RegExp(`identity ${ids.carol}: authPolicyId names auth policy no-such-policy, which does not exist`),
      new RegExp(`service_policy_identities: .*${ghost}.* does not exist`),
      new RegExp(`role_attribute_index: attributes of identity ${ghost}`),
      new RegExp(`identity ${ids.bob}: name "alice" is also held by identity ${ids.alice}`),
      /identities\.name: the unique index is missing/,
      new RegExp(`identity ${ids.bob}: the role attribute index differs`),
      new RegExp(`service policy ${ids.policy}: identityRoles selects identity .*${ids.alice}.* without a link`),
      new RegExp(`is linked to identity .*${ids.carol}.* it does not select`),
    ];
    for (const pattern of expected) expect(descriptions.some((d) => pattern.test(d)), String(pattern)).toBe(true);
    expect(checked.results.every((r: { fixed: boolean }) => !r.fixed)).toBe(true);
    // A check repairs nothing.
    expect((await run(t, admin, 'check')).results).toHaveLength(checked.results.length);

    const snapshotsBefore = readdirSync(dir.path).filter((f) => f.startsWith('overlay.db-')).length;
    const fixed = await run(t, admin, 'fix');
    expect(fixed.fixingErrors).toBe(true);
    expect(fixed.error).toBeNull();
    for (const pattern of expected) expect(fixed.results.some((r: { description: string }) => pattern.test(r.description)), String(pattern)).toBe(true);
    expect(captured.lines().filter((l) => l.msg === 'data integrity repair failed')).toEqual([]);
    expect(fixed.results.filter((r: { fixed: boolean }) => !r.fixed)).toEqual([]);
    // The fix took a snapshot first.
    expect(readdirSync(dir.path).filter((f) => f.startsWith('overlay.db-')).length).toBe(snapshotsBefore + 1);

    // Clean now, and the repairs are what they say.
    expect((await run(t, admin, 'check')).results).toEqual([]);
    // A fix with nothing to repair writes no copy of the store (each run once wrote one).
    t.clock.advance(2_000);
    expect((await run(t, admin, 'fix')).results).toEqual([]);
    expect(readdirSync(dir.path).filter((f) => f.startsWith('overlay.db-')).length).toBe(snapshotsBefore + 1);
    const links = await db.selectFrom('service_policy_identities').select('identity_id').where('policy_id', '=', ids.policy).execute();
    expect(links.map((l) => l.identity_id).sort()).toEqual([ids.alice, ids.bob].sort());
    const bob = json(await call(t, 'GET', `${MGMT}/identities/${ids.bob}`, { token: admin })).data;
    expect(bob.name).toBe(`alice (duplicate ${ids.bob})`);
    const carol = json(await call(t, 'GET', `${MGMT}/identities/${ids.carol}`, { token: admin })).data;
    expect(carol.authPolicyId).toBe('default');
    expect(await t.app.core.store.dialect.uniqueColumns('identities')).toContain('name');
    // The index is back, so the API refuses the duplicate again.
    const dup = await call(t, 'PATCH', `${MGMT}/identities/${ids.carol}`, { token: admin, body: { name: 'alice' } });
    expect(dup.statusCode).toBe(400);
    // The related list (read through the links) follows the repair.
    const related = json(await call(t, 'GET', `${MGMT}/service-policies/${ids.policy}/identities`, { token: admin }));
    expect(related.data.map((i: { id: string }) => i.id).sort()).toEqual([ids.alice, ids.bob].sort());
    expect(existsSync(join(dir.path, 'overlay.db'))).toBe(true);
  });

  it('repairs cascade, lets caches follow, reports what it cannot repair, and bounds the results', async () => {
    const db = t.app.core.store.db;
    // dave is a guest: no policy lets him reach the wiki.
    const dave = await createIdentityWithPassword(t, admin, { name: 'dave', username: 'dave', password: 'dave-password-1', roleAttributes: ['guest'] });
    t.clock.advance(1000);
    const erin = await createIdentityWithPassword(t, admin, { name: 'erin', username: 'erin', password: 'erin-password-1' });
    t.clock.advance(1000);
    const frank = await createIdentityWithPassword(t, admin, { name: 'frank', username: 'frank', password: 'frank-password-1' });
    const daveToken = await login(t, 'dave', 'dave-password-1', CLIENT);
    const services = async () =>
      json(await call(t, 'GET', `${CLIENT}/services`, { token: daveToken })).data.map((s: { name: string }) => s.name);
    expect(await services()).toEqual([]);

    await sql`pragma foreign_keys = off`.execute(db);
    // An authenticator of an identity that is gone: it cascades, so the fix removes it.
    await sql`update authenticators set identity_id = 'ghost-owner' where id = ${erin.authenticatorId}`.execute(db);
    // 1,001 index rows of entities that do not exist: more than the results hold.
    for (let i = 0; i <= 1000; i += 100) {
      const rows = Array.from({ length: Math.min(100, 1001 - i) }, (_, j) => ({ kind: 'identity', attribute: 'x', entity_id: `ghost-${i + j}` }));
      await db.insertInto('role_attribute_index').values(rows).execute();
    }
    await sql`pragma foreign_keys = on`.execute(db);
    // A duplicate username: not a name, so nothing to rename it to; its index cannot come back either.
    await sql`drop index authenticators_username_unique`.execute(db);
    await sql`update authenticators set username = 'dave' where id = ${frank.authenticatorId}`.execute(db);
    // A link dave's policies do not give him, read by the client views once their caches are dropped.
    await sql`insert into service_policy_identities (policy_id, identity_id) values (${ids.policy}, ${dave.id})`.execute(db);
    await t.app.core.caches.resetAll();
    expect(await services()).toEqual(['wiki']);

    const fixed = await run(t, admin, 'fix');
    expect(fixed.tooManyErrors).toBe(true);
    expect(fixed.results).toHaveLength(1000);
    // Every finding was handled, the ones past the first 1,000 too.
    const after = await run(t, admin, 'check');
    const left = after.results.map((r: { description: string }) => r.description);
    expect(after.tooManyErrors).toBe(false);
    expect(left).toHaveLength(2);
    expect(left[0]).toMatch(new RegExp(`authenticator ${frank.authenticatorId}: username "dave" is also held by authenticator ${dave.authenticatorId}$`));
    expect(left[1]).toMatch(/authenticators\.username: the unique index is missing/);
    expect(await db.selectFrom('role_attribute_index').select('entity_id').where('entity_id', 'like', 'ghost-%').execute()).toEqual([]);
    expect((await call(t, 'GET', `${MGMT}/authenticators/${erin.authenticatorId}`, { token: admin })).statusCode).toBe(404);
    // The repair announced what moved: the client's cached view followed without a reset.
    expect(await services()).toEqual([]);

    // Put right by hand, the store checks clean again.
    await sql`update authenticators set username = 'frank' where id = ${frank.authenticatorId}`.execute(db);
    expect((await run(t, admin, 'fix')).results.every((r: { fixed: boolean }) => r.fixed)).toBe(true);
    expect((await run(t, admin, 'check')).results).toEqual([]);
  });
});
