// Revocations on the Management API (create, list, detail; never changed or removed), the moment
// each may be forgotten, the in-memory view the bearer-token check reads, and the API sessions (legacy
// and OIDC) a revocation ends with their sessions.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRUNE_INTERVAL_MS, Revocations, type RevocationRecord } from '../src/auth/revocations.js';
import { revocationBehaviour, revocationKeepMs } from '../src/domain/operations.js';
import type { WriteContext } from '../src/domain/resources.js';
import type { EntityOf } from '../src/resources/index.js';
import {
  ADMIN_ENV,
  asAdmin,
  authenticate,
  call,
  CHALLENGE_SESSION_INVALID,
  CLIENT,
  createIdentityWithPassword,
  expectError,
  json,
  login,
  MGMT,
  startTestController,
  tempDir,
  testClock,
  type TestController,
} from './helpers.js';
import { client, Network, ok, type Person } from './fixtures/network.js';
import { bearer, decodeJwt, oidcLogin, pkce, postLogin, postToken, REDIRECT_URI, startAuthorization } from './oidc-helpers.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

let t: TestController;
let admin: string;
let ops: string;
let n = 0;

async function userWith(name: string, permissions: string[]): Promise<string> {
  await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw1`, permissions });
  return login(t, name, `${name}-pw1`);
}

/** A revocation id never used before in this file. */
const fresh = (prefix = 'rev') => `${prefix}-${++n}-${Math.random().toString(36).slice(2, 8)}`;

async function revoke(token: string, body: Record<string, unknown>) {
  return call(t, 'POST', `${MGMT}/revocations`, { token, body });
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  ops = await userWith('rev-ops', ['ops']);
});
afterAll(async () => {
  await t.close();
});

describe('create and read', () => {
  it('creates a revocation under the id it revokes and answers it with its expiry', async () => {
    const id = '6b1c2a5e-1c1f-4a55-9a11-0c2c4e6f7a80';
    const now = t.clock();
    const res = await revoke(admin, { id, type: 'JTI', tags: { reason: 'leaked', ticket: true } });
    expect(res.statusCode, res.body).toBe(201);
    expect(json(res).data).toEqual({ id, _links: { self: { href: `./revocations/${id}` } } });

    const got = await call(t, 'GET', `${MGMT}/revocations/${id}`, { token: admin });
    expect(got.statusCode).toBe(200);
    expect(json(got).data).toEqual({
      _links: { self: { href: `./revocations/${id}` } },
      id,
      type: 'JTI',
      tags: { reason: 'leaked', ticket: true },
      createdAt: new Date(now).toISOString(),
      updatedAt: new Date(now).toISOString(),
      // the longest lifetime of what it can revoke: the default refresh token duration, 24h
      expiresAt: new Date(now + 24 * HOUR).toISOString(),
    });
  });

  it('keeps an id of any shape up to 255 characters, tags optional', async () => {
    for (const id of ['x', 'a'.repeat(255), 'id.with_odd-chars~1']) {
      const res = await revoke(admin, { id, type: 'API_SESSION' });
      expect(res.statusCode, res.body).toBe(201);
      const got = json(await call(t, 'GET', `${MGMT}/revocations/${encodeURIComponent(id)}`, { token: admin })).data;
      expect(got).toMatchObject({ id, type: 'API_SESSION', tags: {} });
    }
  });

  it('renews a revocation named again with the same type: it takes effect anew and is kept the full lifetime', async () => {
    const id = fresh();
    expect((await revoke(admin, { id, type: 'IDENTITY', tags: { round: '1' } })).statusCode).toBe(201);
    t.clock.advance(10 * MINUTE);
    const res = await revoke(admin, { id, type: 'IDENTITY' });
    expect(res.statusCode, res.body).toBe(201);
    expect(json(res).data).toEqual({ id, _links: { self: { href: `./revocations/${id}` } } });
    expect(json(await call(t, 'GET', `${MGMT}/revocations/${id}`, { token: admin })).data).toMatchObject({
      id,
      type: 'IDENTITY',
      tags: { round: '1' }, // kept when not given
      // Made anew, as the established controller replaces it: a filter on createdAt finds it.
      createdAt: new Date(t.clock()).toISOString(),
      updatedAt: new Date(t.clock()).toISOString(),
      expiresAt: new Date(t.clock() + 24 * HOUR).toISOString(),
    });
    expect((await revoke(admin, { id, type: 'IDENTITY', tags: { round: '3' } })).statusCode).toBe(201);
    expect(json(await call(t, 'GET', `${MGMT}/revocations/${id}`, { token: admin })).data.tags).toEqual({ round: '3' });
    const listed = json(await call(t, 'GET', `${MGMT}/revocations?filter=${encodeURIComponent(`id = "${id}"`)}`, { token: admin }));
    expect(listed.meta.pagination.totalCount).toBe(1);
  });

  // An attack that worked: a JTI revocation of one's own identity id (or API session id) made the
  // IDENTITY (or API_SESSION) revocation of it a 400 for a day.
  it('replaces a revocation in force named with another type, as a new one', async () => {
    const id = fresh();
    expect((await revoke(admin, { id, type: 'JTI', tags: { by: 'someone' } })).statusCode).toBe(201);
    t.clock.advance(1_000);
    const res = await revoke(admin, { id, type: 'IDENTITY' });
    expect(res.statusCode, res.body).toBe(201);
    const got = json(await call(t, 'GET', `${MGMT}/revocations/${id}`, { token: admin })).data;
    expect(got).toMatchObject({ type: 'IDENTITY', tags: {}, createdAt: new Date(t.clock()).toISOString() });
    expect(t.app.core.revocations.isRevoked('IDENTITY', id, t.clock() - 1)).toBe(true);
  });

  it.each([
    ['no id', { type: 'JTI' }, 'id'],
    ['an empty id', { id: '', type: 'JTI' }, 'id'],
    ['an id of 256 characters', { id: 'b'.repeat(256), type: 'JTI' }, 'id'],
    ['an id that is a number', { id: 42, type: 'JTI' }, 'id'],
    ['no type', { id: 'no-type' }, 'type'],
    ['an unknown type', { id: 'bad-type', type: 'SESSION' }, 'type'],
    ['a tag value of the wrong kind', { id: 'bad-tags', type: 'JTI', tags: { n: 1 } }, 'tags.n'],
  ])('answers 400 naming the field for %s', async (_name, body, field) => {
    expectError(await revoke(admin, body), 400, 'COULD_NOT_VALIDATE', field);
  });

  it('has no route to change or remove a revocation', async () => {
    const id = fresh();
    expect((await revoke(admin, { id, type: 'JTI' })).statusCode).toBe(201);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
      const res = await call(t, method, `${MGMT}/revocations/${id}`, { token: admin, body: { type: 'IDENTITY' } });
      expectError(res, 405, 'METHOD_NOT_ALLOWED');
    }
    expect(json(await call(t, 'GET', `${MGMT}/revocations/${id}`, { token: admin })).data.type).toBe('JTI');
  });
});

describe('list', () => {
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    for (const type of ['JTI', 'IDENTITY', 'API_SESSION']) {
      ids[type] = fresh(`list-${type.toLowerCase()}`);
      expect((await revoke(admin, { id: ids[type], type, tags: { listed: true } })).statusCode).toBe(201);
    }
  });

  it('filters by type and by id', async () => {
    const byType = json(
      await call(t, 'GET', `${MGMT}/revocations?filter=${encodeURIComponent('type = "IDENTITY" and tags.listed = true')}`, { token: admin }),
    );
    expect(byType.data.map((r: { id: string }) => r.id)).toEqual([ids.IDENTITY]);
    expect(byType.meta.pagination).toEqual({ limit: 10, offset: 0, totalCount: 1 });
    expect(byType.meta.filterableFields).toEqual(expect.arrayContaining(['id', 'type', 'expiresAt', 'createdAt']));

    const byId = json(await call(t, 'GET', `${MGMT}/revocations?filter=${encodeURIComponent(`id = "${ids.JTI}"`)}`, { token: admin }));
    expect(byId.data).toHaveLength(1);
    expect(byId.data[0]).toMatchObject({ id: ids.JTI, type: 'JTI' });
  });

  it('pages', async () => {
    const res = json(await call(t, 'GET', `${MGMT}/revocations?limit=2&offset=1&filter=${encodeURIComponent('tags.listed = true')}&sort=id`, { token: admin }));
    expect(res.meta.pagination).toEqual({ limit: 2, offset: 1, totalCount: 3 });
    expect(res.data).toHaveLength(2);
  });
});

describe('who may', () => {
  it('lets an ops identity create and read', async () => {
    const id = fresh('by-ops');
    expect((await revoke(ops, { id, type: 'IDENTITY' })).statusCode).toBe(201);
    expect((await call(t, 'GET', `${MGMT}/revocations/${id}`, { token: ops })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${MGMT}/revocations`, { token: ops })).statusCode).toBe(200);
  });
});

describe('expiry', () => {
  it('is the longest lifetime of anything revocable', () => {
    expect(revocationKeepMs({ accessTokenDuration: 30 * MINUTE, refreshTokenDuration: 24 * HOUR })).toBe(24 * HOUR);
    expect(revocationKeepMs({ accessTokenDuration: 5 * HOUR, refreshTokenDuration: 2 * HOUR })).toBe(5 * HOUR);
  });

  it('is stamped from the write time, on create only', async () => {
    const behaviour = revocationBehaviour({ accessTokenDuration: HOUR, refreshTokenDuration: 3 * HOUR });
    const ctx = { now: '2026-03-04T05:06:07.890Z' } as WriteContext;
    const next = { id: 'x', type: 'JTI' } as unknown as EntityOf<'revocations'>;
    await behaviour.validate!(ctx, next, undefined);
    expect(next.expiresAt).toBe('2026-03-04T08:06:07.890Z');
    const later = { ...next, expiresAt: 'kept' };
    await behaviour.validate!({ now: '2027-01-01T00:00:00.000Z' } as WriteContext, later, next);
    expect(later.expiresAt).toBe('kept');
  });

  it('follows the configured token durations', async () => {
    const dir = tempDir();
    const file = join(dir.path, 'overlay.yaml');
    writeFileSync(file, 'edge:\n  oidc: { accessTokenDuration: 2h, refreshTokenDuration: 36h }\n');
    const other = await startTestController({ env: { ...ADMIN_ENV, OVERLAY_CONFIG: file } });
    try {
      const token = await asAdmin(other);
      const now = other.clock();
      const res = await call(other, 'POST', `${MGMT}/revocations`, { token, body: { id: 'configured', type: 'JTI' } });
      expect(res.statusCode, res.body).toBe(201);
      const got = json(await call(other, 'GET', `${MGMT}/revocations/configured`, { token })).data;
      expect(got.expiresAt).toBe(new Date(now + 36 * HOUR).toISOString());
    } finally {
      await other.close();
      dir.remove();
    }
  });
});

describe('the in-memory view', () => {
  const T0 = Date.parse('2026-05-06T07:00:00.000Z');
  const at = (ms: number) => new Date(ms).toISOString();
  const record = (id: string, type: string, createdAt: number, expiresAt: number | null): RevocationRecord => ({
    id,
    type,
    createdAt: at(createdAt),
    expiresAt: expiresAt === null ? null : at(expiresAt),
  });

  it('revokes one token by JTI, whenever it was issued', () => {
    const clock = testClock(T0);
    const view = new Revocations(clock);
    view.add(record('jti-1', 'JTI', T0, T0 + HOUR));
    expect(view.isRevoked('JTI', 'jti-1')).toBe(true);
    expect(view.isRevoked('JTI', 'jti-1', T0 + 10 * MINUTE)).toBe(true);
    expect(view.isRevoked('JTI', 'jti-2')).toBe(false);
    // the same id under another kind is another thing
    expect(view.isRevoked('API_SESSION', 'jti-1', T0 - 1)).toBe(false);
  });

  it.each(['IDENTITY', 'API_SESSION'] as const)('revokes %s tokens issued no later than the revocation', (kind) => {
    const clock = testClock(T0);
    const view = new Revocations(clock);
    view.add(record('subject', kind, T0, T0 + HOUR));
    expect(view.isRevoked(kind, 'subject', T0 - 5 * MINUTE)).toBe(true);
    expect(view.isRevoked(kind, 'subject', T0)).toBe(true);
    expect(view.isRevoked(kind, 'subject', T0 + 1)).toBe(false);
    expect(view.isRevoked(kind, 'subject', T0 + 5 * MINUTE)).toBe(false);
    // without an issue time the doubt goes against the token
    expect(view.isRevoked(kind, 'subject')).toBe(true);
    expect(view.isRevoked(kind, 'someone-else', T0 - 1)).toBe(false);
  });

  it('forgets a revocation once it expires, and prunes memory at most once a minute', () => {
    const clock = testClock(T0);
    const view = new Revocations(clock);
    view.add(record('short', 'JTI', T0, T0 + 10_000));
    view.add(record('long', 'IDENTITY', T0, T0 + HOUR));
    view.add(record('forever', 'API_SESSION', T0, null));
    expect(view.size).toBe(3);

    clock.advance(10_000);
    expect(view.isRevoked('JTI', 'short')).toBe(false);
    expect(view.isRevoked('IDENTITY', 'long', T0 - 1)).toBe(true);
    expect(view.size).toBe(3); // not pruned yet: the last prune was less than a minute ago

    clock.set(T0 + PRUNE_INTERVAL_MS);
    expect(view.isRevoked('IDENTITY', 'long', T0 - 1)).toBe(true);
    expect(view.size).toBe(2);

    clock.set(T0 + HOUR);
    expect(view.prune()).toBe(1);
    expect(view.isRevoked('IDENTITY', 'long', T0 - 1)).toBe(false);
    expect(view.isRevoked('API_SESSION', 'forever', T0 - 1)).toBe(true);
    expect(view.size).toBe(1);
  });

  it('ignores records that are expired, malformed or of an unknown type', () => {
    const clock = testClock(T0);
    const view = new Revocations(clock);
    view.add(record('old', 'JTI', T0 - 2 * HOUR, T0));
    view.add(record('odd', 'SESSION', T0, T0 + HOUR));
    view.add({ id: 'bad', type: 'JTI', createdAt: 'not a date', expiresAt: null });
    expect(view.size).toBe(0);
    expect(view.isRevoked('JTI', 'old')).toBe(false);
  });

  it('follows changes: revocations in, deletions out, other collections ignored', async () => {
    const clock = testClock(T0);
    // What the store holds: a changed revocation is read again from it.
    const stored = new Map<string, RevocationRecord>();
    const view = new Revocations(clock, async (id) => stored.get(id));
    const entity = { id: 'c1', type: 'IDENTITY', createdAt: at(T0), updatedAt: at(T0), expiresAt: at(T0 + HOUR) };
    stored.set('c1', entity);
    await view.apply({ collection: 'identities', kind: 'create', id: 'c1' });
    expect(view.size).toBe(0);
    await view.apply({ collection: 'revocations', kind: 'create', id: 'c1' });
    expect(view.isRevoked('IDENTITY', 'c1', T0 - 1)).toBe(true);
    stored.set('c1', { ...entity, updatedAt: at(T0 + MINUTE), expiresAt: at(T0 + 2 * HOUR) });
    await view.apply({ collection: 'revocations', kind: 'update', id: 'c1' });
    expect(view.isRevoked('IDENTITY', 'c1', T0 + 30_000)).toBe(true);
    clock.set(T0 + 90 * MINUTE);
    expect(view.isRevoked('IDENTITY', 'c1', T0 - 1)).toBe(true);
    expect(view.size).toBe(1);
    await view.apply({ collection: 'revocations', kind: 'delete', id: 'c1' });
    expect(view.isRevoked('IDENTITY', 'c1', T0 - 1)).toBe(false);
    await view.apply({ collection: 'revocations', kind: 'create', id: 'c2' });
    expect(view.size).toBe(0);
  });

  it('loads what the store holds and learns of new revocations after they commit', async () => {
    const before = fresh('stored');
    expect((await revoke(admin, { id: before, type: 'API_SESSION' })).statusCode).toBe(201);
    const createdAt = Date.parse(json(await call(t, 'GET', `${MGMT}/revocations/${before}`, { token: admin })).data.createdAt);

    const clock = testClock(t.clock());
    const view = new Revocations(clock);
    await view.start(t.app.core);
    try {
      expect(view.isRevoked('API_SESSION', before, createdAt - 1000)).toBe(true);
      expect(view.isRevoked('API_SESSION', before, createdAt + 1000)).toBe(false);

      const after = fresh('live');
      expect(view.isRevoked('JTI', after)).toBe(false);
      expect((await revoke(admin, { id: after, type: 'JTI' })).statusCode).toBe(201);
      expect(view.isRevoked('JTI', after)).toBe(true);

      // named with another type, it is replaced there too
      expect((await revoke(admin, { id: after, type: 'IDENTITY' })).statusCode).toBe(201);
      expect([view.isRevoked('IDENTITY', after, 0), view.isRevoked('JTI', after)]).toEqual([true, false]);
      // a refused write never reaches the view
      expectError(await revoke(admin, { id: fresh('refused'), type: 'IDENTITY', tags: { n: 1 } }), 400, 'COULD_NOT_VALIDATE', 'tags.n');

      // naming it again revokes what was issued since, too
      t.clock.advance(10 * MINUTE);
      clock.set(t.clock());
      expect((await revoke(admin, { id: before, type: 'API_SESSION' })).statusCode).toBe(201);
      expect(view.isRevoked('API_SESSION', before, createdAt + 1000)).toBe(true);
      expect(view.isRevoked('API_SESSION', before, t.clock() + 1)).toBe(false);

      clock.advance(24 * HOUR);
      expect(view.isRevoked('JTI', after)).toBe(false);
      expect(view.isRevoked('API_SESSION', before, createdAt - 1000)).toBe(false);
    } finally {
      view.stop();
    }
    const unseen = fresh('after-stop');
    expect((await revoke(admin, { id: unseen, type: 'JTI' })).statusCode).toBe(201);
    clock.set(t.clock());
    expect(view.isRevoked('JTI', unseen)).toBe(false);
  });

  it('does not load revocations that have expired', async () => {
    const id = fresh('expired');
    expect((await revoke(admin, { id, type: 'JTI' })).statusCode).toBe(201);
    const view = new Revocations(testClock(t.clock() + 24 * HOUR));
    await view.start(t.app.core);
    view.stop();
    expect(view.isRevoked('JTI', id)).toBe(false);
  });
});

describe('after expiry', () => {
  it('replaces an expired revocation, whatever its type', async () => {
    const id = fresh('expiring');
    expect((await revoke(admin, { id, type: 'JTI', tags: { old: true } })).statusCode).toBe(201);
    t.clock.advance(24 * HOUR);
    admin = await asAdmin(t);
    const res = await revoke(admin, { id, type: 'API_SESSION' });
    expect(res.statusCode, res.body).toBe(201);
    const now = new Date(t.clock()).toISOString();
    expect(json(await call(t, 'GET', `${MGMT}/revocations/${id}`, { token: admin })).data).toMatchObject({
      id,
      type: 'API_SESSION',
      tags: {},
      createdAt: now,
      updatedAt: now,
      expiresAt: new Date(t.clock() + 24 * HOUR).toISOString(),
    });
  });
});

describe('expired revocations', () => {
  it('are deleted from the store by the sweep once nothing they could revoke is valid', async () => {
    const id = fresh('sweep');
    expect((await revoke(admin, { id, type: 'API_SESSION' })).statusCode).toBe(201);
    await t.app.core.revocations.sweep(); // whatever earlier tests left expired
    expect((await call(t, 'GET', `${MGMT}/revocations/${id}`, { token: admin })).statusCode).toBe(200);
    t.clock.advance(24 * HOUR + MINUTE);
    try {
      expect(await t.app.core.revocations.sweep()).toBeGreaterThanOrEqual(1);
      const token = await asAdmin(t);
      expect((await call(t, 'GET', `${MGMT}/revocations/${id}`, { token })).statusCode).toBe(404);
      expect(t.app.core.revocations.isRevoked('API_SESSION', id, 0)).toBe(false);
    } finally {
      t.clock.advance(-(24 * HOUR + MINUTE));
    }
  });
});

describe('ending API sessions (behaviour.md §6)', () => {
  let net: Network;
  let service: string;
  let people = 0;

  beforeAll(async () => {
    net = new Network(t, admin);
    const router = await net.edgeRouter('rev-er', ['rev-public']);
    expect(router).toBeTypeOf('string');
    await net.edgeRouterPolicy(['#rev-users'], ['#rev-public']);
    await net.serviceEdgeRouterPolicy(['#rev-routed'], ['#rev-public']);
    service = await net.service('rev-web', ['rev-routed']);
    await net.servicePolicy('Dial', ['#rev-users'], [`@${service}`]);
  });

  const person = () => net.person(`rev-user-${++people}`, ['rev-users']);

  /** A legacy login on the Client API: its token, API session id and one session of it. */
  async function loggedIn(p: Person): Promise<{ token: string; apiSession: string; session: string }> {
    const token = await net.login(p);
    const apiSession = ok(await client(t, 'GET', '/current-api-session', token)).id as string;
    const session = ok(await client(t, 'POST', '/sessions', token, { serviceId: service }), 201).id as string;
    return { token, apiSession, session };
  }

  async function expectEnded(s: { token: string; apiSession: string; session: string }): Promise<void> {
    for (const res of [await client(t, 'GET', '/current-api-session', s.token), await call(t, 'GET', `${MGMT}/current-identity`, { token: s.token })]) {
      expectError(res, 401, 'UNAUTHORIZED');
      expect(res.headers['www-authenticate']).toBe(CHALLENGE_SESSION_INVALID);
    }
    expectError(await call(t, 'GET', `${MGMT}/api-sessions/${s.apiSession}`, { token: admin }), 404, 'NOT_FOUND');
    expectError(await call(t, 'GET', `${MGMT}/sessions/${s.session}`, { token: admin }), 404, 'NOT_FOUND');
    const sessions = json(await call(t, 'GET', `${MGMT}/sessions?filter=${encodeURIComponent(`apiSessionId = "${s.apiSession}"`)}`, { token: admin }));
    expect(sessions.meta.pagination.totalCount).toBe(0);
  }

  async function expectLive(s: { token: string; apiSession: string; session: string }): Promise<void> {
    expect(ok(await client(t, 'GET', '/current-api-session', s.token)).id).toBe(s.apiSession);
    expect(ok(await client(t, 'GET', `/sessions/${s.session}`, s.token)).id).toBe(s.session);
  }

  const apiSessionsOf = async (identityId: string) =>
    (json(await call(t, 'GET', `${MGMT}/api-sessions?filter=${encodeURIComponent(`identityId = "${identityId}"`)}`, { token: admin })).data as { id: string }[])
      .map((s) => s.id)
      .sort();

  it('IDENTITY ends every API session of the identity at once, with its sessions; others and later logins work', async () => {
    const [alice, bob] = [await person(), await person()];
    const first = await loggedIn(alice);
    const second = await loggedIn(alice);
    const bobs = await loggedIn(bob);
    await expectLive(first);

    const res = await revoke(admin, { id: alice.id, type: 'IDENTITY' });
    expect(res.statusCode, res.body).toBe(201);
    await expectEnded(first);
    await expectEnded(second);
    expect(await apiSessionsOf(alice.id)).toEqual([]);
    await expectLive(bobs);

    t.clock.advance(1_000);
    const later = await loggedIn(alice);
    await expectLive(later);
    expect(await apiSessionsOf(alice.id)).toEqual([later.apiSession]);
  });

  it('IDENTITY ends an API session of a login that raced it: committed after it, dated before it', async () => {
    const hank = await person();
    const revokedAt = t.clock();
    expect((await revoke(admin, { id: hank.id, type: 'IDENTITY' })).statusCode).toBe(201);
    // The login took its time before the revocation and queued its write behind it: refused, and
    // its session is not left behind in the lists.
    t.clock.set(revokedAt - 1);
    const raced = await authenticate(t, hank.username, hank.password, { api: CLIENT });
    expectError(raced, 401, 'INVALID_AUTH');
    expect(json(raced).error.message).toBe("the identity's sessions were revoked while it logged in");
    expect(await apiSessionsOf(hank.id)).toEqual([]);
    t.clock.set(revokedAt + 1_000);
    await expectLive(await loggedIn(hank));
  });

  it('IDENTITY named again ends the API sessions created since', async () => {
    const carol = await person();
    expect((await revoke(admin, { id: carol.id, type: 'IDENTITY' })).statusCode).toBe(201);
    t.clock.advance(1_000);
    const since = await loggedIn(carol);
    await expectLive(since);
    expect((await revoke(admin, { id: carol.id, type: 'IDENTITY' })).statusCode).toBe(201);
    await expectEnded(since);
    t.clock.advance(1_000);
    await expectLive(await loggedIn(carol));
  });

  it('IDENTITY ends an OIDC login whose code was not exchanged yet, also a second later; a later login works', async () => {
    const gina = await person();
    const { verifier, challenge } = pkce();
    const { id } = await startAuthorization(t, { challenge });
    const login = await postLogin(t, id, gina.username, gina.password);
    expect(login.statusCode, login.body).toBe(302);
    const code = new URL(String(login.headers.location)).searchParams.get('code')!;
    t.clock.advance(100);
    expect((await revoke(admin, { id: gina.id, type: 'IDENTITY' })).statusCode).toBe(201);
    // The API session of an OIDC login is made at the exchange, after the revocation.
    t.clock.advance(1_500);
    const exchange = await postToken(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: 'overlay', code_verifier: verifier });
    expect(exchange.statusCode, exchange.body).toBe(400);
    expect(json(exchange)).toMatchObject({ error: 'invalid_grant', error_description: 'the sessions of the identity were revoked after this login' });
    expect(await apiSessionsOf(gina.id)).toEqual([]);
    const later = await oidcLogin(t, gina.username, gina.password);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(later.access_token) })).statusCode).toBe(200);
  });

  it('API_SESSION ends the legacy API session it names and its sessions, nothing else', async () => {
    const dave = await person();
    const revoked = await loggedIn(dave);
    const kept = await loggedIn(dave);
    const res = await revoke(admin, { id: revoked.apiSession, type: 'API_SESSION' });
    expect(res.statusCode, res.body).toBe(201);
    await expectEnded(revoked);
    await expectLive(kept);
    expect(await apiSessionsOf(dave.id)).toEqual([kept.apiSession]);
    await expectLive(await loggedIn(dave));
  });

  it('API_SESSION ends an OIDC API session: its bearer token fails and the API session is gone', async () => {
    const erin = await person();
    const tokens = await oidcLogin(t, erin.username, erin.password);
    const asid = decodeJwt(tokens.access_token).payload.ov_asid as string;
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(tokens.access_token) })).statusCode).toBe(200);
    expect(await apiSessionsOf(erin.id)).toEqual([asid]);
    expect((await revoke(admin, { id: asid, type: 'API_SESSION' })).statusCode).toBe(201);
    expectError(await call(t, 'GET', `${CLIENT}/current-identity`, { headers: bearer(tokens.access_token) }), 401, 'UNAUTHORIZED');
    expect(await apiSessionsOf(erin.id)).toEqual([]);
    await expectLive(await loggedIn(erin));
  });

  it('a revocation that is refused ends nothing; one that replaces another of its id ends what it names', async () => {
    const frank = await person();
    const live = await loggedIn(frank);
    expectError(await revoke(admin, { id: live.apiSession, type: 'API_SESSION', tags: { n: 1 } }), 400, 'COULD_NOT_VALIDATE', 'tags.n');
    await expectLive(live);
    // Without the permission to revoke, nothing is revoked either.
    expectError(await revoke(live.token, { id: frank.id, type: 'IDENTITY' }), 401, 'UNAUTHORIZED');
    await expectLive(live);
    // The API session's id revoked as a JTI first: the API_SESSION revocation replaces it and ends the session.
    expect((await revoke(admin, { id: live.apiSession, type: 'JTI' })).statusCode).toBe(201);
    await expectLive(live);
    expect((await revoke(admin, { id: live.apiSession, type: 'API_SESSION' })).statusCode).toBe(201);
    expect(await apiSessionsOf(frank.id)).toEqual([]);
  });

  it('many concurrent requests of a revoked identity all fail once the revocation is answered', async () => {
    const gina = await person();
    const sessions = await Promise.all([loggedIn(gina), loggedIn(gina), loggedIn(gina)]);
    expect((await revoke(admin, { id: gina.id, type: 'IDENTITY' })).statusCode).toBe(201);
    const answers = await Promise.all(sessions.flatMap((s) => [client(t, 'GET', '/services', s.token), client(t, 'POST', '/sessions', s.token, { serviceId: service })]));
    expect(answers.map((r) => r.statusCode)).toEqual(answers.map(() => 401));
  });
});
