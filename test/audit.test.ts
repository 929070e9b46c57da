// The audit log: every kind of write a request makes is recorded with its actor, request id and
// address, in the transaction of the change; no secret reaches a row; failed logins are recorded;
// the Management API lists events with the filter language to admins and admin_readonly callers
// only; retention prunes by age and by count.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
  asAdmin,
  authenticate,
  authenticatorApp,
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
import { AuditRetention, type Scheduler } from '../src/kernel/audit.js';
import { decodeJwt } from 'jose';
import { oidcLogin } from './oidc-helpers.js';

let t: TestController;
let admin: string;

beforeEach(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
});
afterEach(async () => {
  await t.close();
});

/** Every stored row, as the store holds it. */
async function rows(): Promise<Record<string, unknown>[]> {
  const { rows } = await sql<Record<string, unknown>>`select * from audit_events order by created_at, id`.execute(t.app.core.store.db);
  return rows;
}

async function events(filter: string, token = admin): Promise<any[]> {
  const res = await call(t, 'GET', `${MGMT}/audit-events?limit=500&filter=${encodeURIComponent(filter)}`, { token });
  expect(res.statusCode, res.body).toBe(200);
  return json(res).data;
}

const PASSWORD = 'alice-password-1';

describe('recording', () => {
  it('records creates, updates and deletes with the actor, request id, address and images', async () => {
    const created = await call(t, 'POST', `${MGMT}/services`, { token: admin, body: { name: 'web', roleAttributes: ['a'] }, remoteAddress: '10.1.2.3' });
    expect(created.statusCode).toBe(201);
    const id = json(created).data.id as string;
    const patched = await call(t, 'PATCH', `${MGMT}/services/${id}`, { token: admin, body: { roleAttributes: ['b'] }, remoteAddress: '10.1.2.3' });
    expect(patched.statusCode).toBe(200);
    const deleted = await call(t, 'DELETE', `${MGMT}/services/${id}`, { token: admin, remoteAddress: '10.1.2.3' });
    expect(deleted.statusCode).toBe(200);

    const list = await events(`entityType = "services" and entityId = "${id}"`);
    expect(list.map((e) => e.action)).toEqual(['delete', 'update', 'create']); // newest first
    const me = json(await call(t, 'GET', `${MGMT}/current-identity`, { token: admin })).data;
    for (const e of list) {
      expect(e.actor).toMatchObject({ identityId: me.id, name: me.name, method: 'password' });
      expect(e.actor.apiSessionId).toEqual(expect.any(String));
      expect(e.ipAddress).toBe('10.1.2.3');
      expect(e.requestId).toEqual(expect.any(String));
      expect(e.entityName).toBe('web');
    }
    const [del, upd, cre] = list;
    expect(new Set([del.requestId, upd.requestId, cre.requestId]).size).toBe(3);
    expect(cre.changes.before).toBeUndefined();
    expect(cre.changes.after).toMatchObject({ id, name: 'web', roleAttributes: ['a'] });
    expect(upd.changes.before).toMatchObject({ roleAttributes: ['a'] });
    expect(upd.changes.after).toMatchObject({ roleAttributes: ['b'] });
    // An update shows the fields that changed, not the whole record.
    expect(upd.changes.before).not.toHaveProperty('name');
    expect(upd.changes.after).not.toHaveProperty('name');
    expect(del.changes.before).toMatchObject({ name: 'web', roleAttributes: ['b'] });
    expect(del.changes.after).toBeUndefined();

    // The request id is the one the request was answered with in an error envelope too: a detail read.
    const one = await call(t, 'GET', `${MGMT}/audit-events/${cre.id}`, { token: admin });
    expect(one.statusCode).toBe(200);
    expect(json(one).data).toEqual(cre);
  });

  it('records logins, logouts, failed logins, revocations and MFA changes, and no secret', async () => {
    const alice = await createIdentityWithPassword(t, admin, { name: 'alice', username: 'alice', password: PASSWORD });
    const wrong = await authenticate(t, 'alice', 'not-the-password', { api: CLIENT, remoteAddress: '10.9.9.9' });
    expect(wrong.statusCode).toBe(401);
    const unknown = await authenticate(t, 'nobody', 'not-the-password', { api: CLIENT, remoteAddress: '10.9.9.8' });
    expect(unknown.statusCode).toBe(401);
    const token = await login(t, 'alice', PASSWORD, CLIENT);

    // MFA: enroll (the secret and recovery codes are made), confirm, then remove.
    const started = await call(t, 'POST', `${CLIENT}/current-identity/mfa`, { token, body: {} });
    expect(started.statusCode).toBe(201);
    const { provisioningUrl, recoveryCodes } = json(started).data as { provisioningUrl: string; recoveryCodes: string[] };
    const codeAt = authenticatorApp(provisioningUrl);
    const verified = await call(t, 'POST', `${CLIENT}/current-identity/mfa/verify`, { token, body: { code: codeAt(t.clock()) } });
    expect(verified.statusCode, verified.body).toBe(200);
    const removed = await call(t, 'DELETE', `${MGMT}/identities/${alice.id}/mfa`, { token: admin });
    expect(removed.statusCode, removed.body).toBe(200);

    // A change of the own password (the new one and the current one are secrets).
    const changed = await call(t, 'PATCH', `${CLIENT}/current-identity/authenticators/${alice.authenticatorId}`, {
      token,
      body: { password: 'alice-password-2', currentPassword: PASSWORD },
    });
    expect(changed.statusCode, changed.body).toBe(200);

    const logout = await call(t, 'DELETE', `${CLIENT}/current-api-session`, { token });
    expect(logout.statusCode).toBe(200);
    const second = await login(t, 'alice', 'alice-password-2', CLIENT);
    const secondSession = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { token: second })).data.id as string;
    const revoked = await call(t, 'POST', `${MGMT}/revocations`, { token: admin, body: { id: secondSession, type: 'API_SESSION' } });
    expect(revoked.statusCode, revoked.body).toBe(201);

    const failed = await events('action = "login-failed"');
    expect(failed.map((e) => e.entityName).sort()).toEqual(['alice', 'nobody']);
    for (const e of failed) {
      expect(e.actor).toBeNull();
      expect(e.requestId).toEqual(expect.any(String));
      expect(e.changes.after).toMatchObject({ method: 'password' });
    }
    expect(failed.find((e) => e.entityName === 'alice').ipAddress).toBe('10.9.9.9');

    const logins = await events(`action = "login" and actor.identityId = "${alice.id}"`);
    expect(logins).toHaveLength(2);
    expect(logins[0]).toMatchObject({ entityType: 'api-sessions', actor: { identityId: alice.id, name: 'alice', method: 'password' } });
    expect(logins[0].actor.apiSessionId).toBe(logins[0].entityId);

    const logouts = await events('action = "logout"');
    expect(logouts).toHaveLength(1);
    expect(logouts[0].actor).toMatchObject({ identityId: alice.id });
    expect(logouts[0].actor.apiSessionId).toBe(logouts[0].entityId);

    const revocations = await events('entityType = "revocations"');
    const adminName = json(await call(t, 'GET', `${MGMT}/current-identity`, { token: admin })).data.name as string;
    expect(revocations).toMatchObject([{ action: 'create', entityId: secondSession, actor: { name: adminName } }]);
    expect(revocations[0].changes.after).toMatchObject({ id: secondSession, type: 'API_SESSION' });
    const ended = await events(`entityType = "api-sessions" and action = "delete" and entityId = "${secondSession}"`);
    expect(ended).toHaveLength(1);
    expect(ended[0].requestId).toBe(revocations[0].requestId);

    const mfa = await events('entityType = "mfas"');
    expect(mfa.map((e) => e.action)).toEqual(['delete', 'update', 'create']);
    expect(mfa[1].changes).toMatchObject({ before: { isVerified: false }, after: { isVerified: true } });
    expect(mfa.filter((e) => e.action === 'delete')[0].actor.name).toBe(adminName);
    // The admin's removal ended the MFA pass of alice's session: the event shows when it was given.
    const [passEnded] = await events(`entityType = "api-sessions" and action = "update" and actor.name = "${adminName}"`);
    expect(passEnded.changes).toEqual({ before: { mfaPassedAt: expect.stringMatching(/^\d{4}-/) }, after: { mfaPassedAt: null } });

    const passwordChange = await events(`entityType = "authenticators" and entityId = "${alice.authenticatorId}" and actor.name = "alice"`);
    expect(passwordChange.length).toBeGreaterThan(0);

    // No secret in any stored row: passwords, hashes, tokens, TOTP secrets, recovery codes.
    const stored = JSON.stringify(await rows());
    const secrets = [PASSWORD, 'alice-password-2', 'not-the-password', ADMIN_PASSWORD, token, second, ...recoveryCodes];
    const secretParam = new URL(provisioningUrl).searchParams.get('secret')!;
    secrets.push(secretParam);
    const hashes = await t.app.core.store.db.selectFrom('authenticators').select('password_hash').execute();
    for (const h of hashes) if (h.password_hash) secrets.push(String(h.password_hash));
    const tokenHashes = await t.app.core.store.db.selectFrom('api_sessions').select('token_hash').execute();
    for (const h of tokenHashes) secrets.push(String(h.token_hash));
    for (const secret of secrets) expect(stored).not.toContain(secret);
    for (const word of ['passwordHash', 'tokenHash', '\\"secret\\"', 'recoveryCodes', 'currentPassword', '\\"password\\":']) {
      expect(stored).not.toContain(word);
    }
  });

  it('records an OIDC logout as the caller\'s, sessions ended by others and used enrollments as they were, and no count of wrong passwords', async () => {
    const alice = await createIdentityWithPassword(t, admin, { name: 'alice', username: 'alice', password: PASSWORD });
    // A wrong password counts against the lockout: bookkeeping, not a change anyone reads.
    expect((await authenticate(t, 'alice', 'not-the-password', { api: CLIENT, remoteAddress: '10.9.9.7' })).statusCode).toBe(401);
    expect(await login(t, 'alice', PASSWORD, CLIENT)).toEqual(expect.any(String));
    expect(await events(`entityType = "authenticators" and entityId = "${alice.authenticatorId}" and action = "update"`)).toEqual([]);

    const tokens = await oidcLogin(t, 'alice', PASSWORD);
    const asid = decodeJwt(tokens.id_token!).sid as string;
    const ended = await t.inject({ method: 'GET', url: `/oidc/end_session?id_token_hint=${tokens.id_token}` });
    expect(ended.statusCode, ended.body).toBe(200);
    const [logout] = await events(`entityId = "${asid}" and action = "logout"`);
    expect(logout).toMatchObject({ entityType: 'api-sessions', actor: { identityId: alice.id, name: 'alice', apiSessionId: asid, method: 'oidc' } });

    // An IDENTITY revocation ends the legacy session: its delete shows the session it ended.
    const legacy = await login(t, 'alice', PASSWORD, CLIENT);
    const legacyId = json(await call(t, 'GET', `${CLIENT}/current-api-session`, { token: legacy })).data.id as string;
    expect((await call(t, 'POST', `${MGMT}/revocations`, { token: admin, body: { id: alice.id, type: 'IDENTITY' } })).statusCode).toBe(201);
    const [gone] = await events(`entityId = "${legacyId}" and action = "delete"`);
    expect(gone.changes.before).toMatchObject({ id: legacyId, identityId: alice.id, authMethod: 'password' });

    // A used enrollment goes, and its event shows it.
    const bob = json(await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: 'bob', type: 'User', isAdmin: false, enrollment: { updb: 'bob-user' } } })).data.id as string;
    const enrollment = json(await call(t, 'GET', `${MGMT}/identities/${bob}/enrollments`, { token: admin })).data[0];
    expect((await call(t, 'POST', `${CLIENT}/enroll/updb?token=${enrollment.token}`, { body: { password: 'bob-password-1' } })).statusCode).toBe(200);
    const [used] = await events(`entityType = "enrollments" and entityId = "${enrollment.id}" and action = "delete"`);
    expect(used.changes.before).toMatchObject({ id: enrollment.id, method: 'updb', identityId: bob });
    expect(JSON.stringify(used)).not.toContain(enrollment.token);
  });

  it('records one event of the enrollment when a code regenerates the recovery codes or removes MFA', async () => {
    await createIdentityWithPassword(t, admin, { name: 'carol', username: 'carol', password: PASSWORD });
    const token = await login(t, 'carol', PASSWORD, CLIENT);
    const started = json(await call(t, 'POST', `${CLIENT}/current-identity/mfa`, { token, body: {} })).data as { id: string; provisioningUrl: string };
    const codeAt = authenticatorApp(started.provisioningUrl);
    expect((await call(t, 'POST', `${CLIENT}/current-identity/mfa/verify`, { token, body: { code: codeAt(t.clock()) } })).statusCode).toBe(200);
    const before = (await events(`entityId = "${started.id}"`)).length;
    t.clock.advance(30_000);
    const regenerated = await call(t, 'POST', `${CLIENT}/current-identity/mfa/recovery-codes`, { token, body: { code: codeAt(t.clock()) } });
    expect(regenerated.statusCode, regenerated.body).toBe(200);
    expect((await events(`entityId = "${started.id}"`)).length).toBe(before + 1);
    t.clock.advance(30_000);
    const removed = await call(t, 'DELETE', `${CLIENT}/current-identity/mfa`, { token, body: { code: codeAt(t.clock()) } });
    expect(removed.statusCode, removed.body).toBe(200);
    const all = await events(`entityId = "${started.id}"`);
    expect(all.length).toBe(before + 2);
    expect(all[0]).toMatchObject({ action: 'delete', actor: { name: 'carol' } });
  });

  it("records a change of an identity's service-config overrides with the overrides before and after", async () => {
    const created = async (path: string, body: Record<string, unknown>) => {
      const res = await call(t, 'POST', `${MGMT}/${path}`, { token: admin, body });
      expect(res.statusCode, res.body).toBe(201);
      return json(res).data.id as string;
    };
    const typeId = await created('config-types', { name: 'audit-type', schema: {} });
    const [first, second] = [await created('configs', { name: 'audit-cfg-1', configTypeId: typeId, data: {} }), await created('configs', { name: 'audit-cfg-2', configTypeId: typeId, data: {} })];
    const serviceId = await created('services', { name: 'audit-web' });
    const dana = await created('identities', { name: 'dana', type: 'User', isAdmin: false });
    const overrides = `${MGMT}/identities/${dana}/service-configs`;
    expect((await call(t, 'POST', overrides, { token: admin, body: [{ serviceId, configId: first }] })).statusCode).toBe(200);
    expect((await call(t, 'POST', overrides, { token: admin, body: [{ serviceId, configId: second }] })).statusCode).toBe(200);
    expect((await call(t, 'DELETE', overrides, { token: admin, body: [] })).statusCode).toBe(200);
    const changes = (await events(`entityType = "identities" and entityId = "${dana}" and action = "update"`)).map((e) => ({ name: e.entityName, ...e.changes }));
    expect(changes).toEqual([
      { name: 'dana', before: { serviceConfigs: [{ serviceId, configId: second }] }, after: { serviceConfigs: [] } },
      { name: 'dana', before: { serviceConfigs: [{ serviceId, configId: first }] }, after: { serviceConfigs: [{ serviceId, configId: second }] } },
      { name: 'dana', before: { serviceConfigs: [] }, after: { serviceConfigs: [{ serviceId, configId: first }] } },
    ]);
  });

  it('records nothing for a write that fails, nor for reads', async () => {
    const before = (await rows()).length;
    const bad = await call(t, 'POST', `${MGMT}/services`, { token: admin, body: { name: 'web', configs: ['missing'] } });
    expect(bad.statusCode).toBe(400);
    await call(t, 'GET', `${MGMT}/services`, { token: admin });
    expect((await rows()).length).toBe(before);
  });

  it('records nothing when turned off in the configuration', async () => {
    const dir = tempDir();
    try {
      const file = join(dir.path, 'overlay.yml');
      writeFileSync(file, 'audit:\n  enabled: false\n');
      const off = await startTestController({ env: { ...ADMIN_ENV, OVERLAY_CONFIG: file } });
      try {
        const token = await asAdmin(off);
        expect((await call(off, 'POST', `${MGMT}/services`, { token, body: { name: 'web' } })).statusCode).toBe(201);
        const { rows } = await sql`select id from audit_events`.execute(off.app.core.store.db);
        expect(rows).toEqual([]);
      } finally {
        await off.close();
      }
    } finally {
      dir.remove();
    }
  });
});

describe('GET /audit-events', () => {
  it('filters by actor, action, entity and time, and sorts', async () => {
    const bob = await createIdentityWithPassword(t, admin, { name: 'bob', username: 'bobby', password: PASSWORD, isAdmin: true });
    const bobToken = await login(t, 'bobby', PASSWORD);
    const cutoff = new Date(t.clock()).toISOString();
    t.clock.advance(60_000);
    const policy = await call(t, 'POST', `${MGMT}/service-policies`, {
      token: bobToken,
      body: { name: 'dial-all', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#all'], serviceRoles: ['#all'] },
    });
    expect(policy.statusCode, policy.body).toBe(201);
    const policyId = json(policy).data.id as string;
    expect((await call(t, 'DELETE', `${MGMT}/service-policies/${policyId}`, { token: bobToken })).statusCode).toBe(200);

    // "Who deleted this service policy?"
    const who = await events(`entityType = "service-policies" and entityId = "${policyId}" and action = "delete"`);
    expect(who).toHaveLength(1);
    expect(who[0].actor).toMatchObject({ identityId: bob.id, name: 'bob' });
    expect(who[0].entityName).toBe('dial-all');

    expect((await events(`actor.name = "bob"`)).map((e) => e.action)).toEqual(['delete', 'create', 'login']);
    expect((await events(`actor.identityId = "${bob.id}" and action in ["create", "delete"]`)).length).toBe(2);
    const recent = await events(`createdAt > datetime(${cutoff})`);
    expect(recent.map((e) => e.entityType).sort()).toEqual(['service-policies', 'service-policies']);
    const older = await events(`createdAt <= datetime(${cutoff})`);
    expect(older.some((e) => e.entityType === 'service-policies')).toBe(false);
    const sorted = await events('actor.name = "bob" sort by createdAt asc');
    expect(sorted.map((e) => e.action)).toEqual(['login', 'create', 'delete']);

    const page = await call(t, 'GET', `${MGMT}/audit-events?limit=1&filter=${encodeURIComponent('actor.name = "bob"')}`, { token: admin });
    expect(json(page).meta.pagination).toEqual({ limit: 1, offset: 0, totalCount: 3 });
    expect(json(page).meta.filterableFields).toEqual(expect.arrayContaining(['actor.identityId', 'actor.name', 'action', 'entityType', 'entityId', 'createdAt']));
  });

  it('refuses a bad filter with 400 naming it', async () => {
    const res = await call(t, 'GET', `${MGMT}/audit-events?filter=${encodeURIComponent('changes = "x"')}`, { token: admin });
    expectError(res, 400, 'INVALID_FILTER');
  });

  it('is for admins and admin_readonly only', async () => {
    expectMissingCredential(await call(t, 'GET', `${MGMT}/audit-events`));
    expectMissingCredential(await call(t, 'GET', `${MGMT}/audit-events/x`));
    await createIdentityWithPassword(t, admin, { name: 'carol', username: 'carol', password: PASSWORD, permissions: ['identity', 'service'] });
    const carol = await login(t, 'carol', PASSWORD);
    const refused = await call(t, 'GET', `${MGMT}/audit-events`, { token: carol });
    expect(refused.statusCode).toBe(401);
    expect(json(refused).error.code).toBe('UNAUTHORIZED');
    await createIdentityWithPassword(t, admin, { name: 'dave', username: 'dave', password: PASSWORD, permissions: ['admin_readonly'] });
    const dave = await login(t, 'dave', PASSWORD);
    const read = await call(t, 'GET', `${MGMT}/audit-events`, { token: dave });
    expect(read.statusCode).toBe(200);
    expect(json(read).data.length).toBeGreaterThan(0);
  });

  it('answers 404 for an unknown id', async () => {
    expectError(await call(t, 'GET', `${MGMT}/audit-events/no-such-event`, { token: admin }), 404, 'NOT_FOUND');
  });
});

describe('retention', () => {
  it('prunes by age and by count in the background', async () => {
    const core = t.app.core;
    const trail = core.kernel.audit!;
    const jobs: (() => void)[] = [];
    const scheduler: Scheduler = (job) => {
      jobs.push(job);
      return () => jobs.splice(jobs.indexOf(job), 1);
    };
    const failures: unknown[] = [];
    const retention = new AuditRetention({ trail, write: (fn) => core.kernel.write(fn), onError: (err) => failures.push(err), scheduler });

    for (let i = 0; i < 5; i++) {
      expect((await call(t, 'POST', `${MGMT}/services`, { token: admin, body: { name: `old-${i}` } })).statusCode).toBe(201);
    }
    t.clock.advance(trail.settings.maxAge - 1000);
    admin = await asAdmin(t); // the session of before has long expired
    for (let i = 0; i < 3; i++) {
      expect((await call(t, 'POST', `${MGMT}/services`, { token: admin, body: { name: `new-${i}` } })).statusCode).toBe(201);
    }
    const all = (await rows()).length;
    t.clock.advance(2000);
    const fresh = (await rows()).filter((r) => String(r.created_at) >= new Date(t.clock() - trail.settings.maxAge).toISOString());

    retention.start(); // prunes at once, then on the schedule
    await expect.poll(async () => (await rows()).length).toBe(fresh.length);
    expect((await rows()).filter((r) => r.entity_type === 'services').map((r) => r.entity_name)).toEqual(['new-0', 'new-1', 'new-2']);
    expect(all).toBeGreaterThan(fresh.length);

    // By count: keep the newest `maxEvents`.
    (trail.settings as { maxEvents: number }).maxEvents = 2;
    expect(jobs).toHaveLength(1);
    jobs[0]!();
    await expect.poll(async () => (await rows()).map((r) => r.entity_name)).toEqual(['new-1', 'new-2']);
    expect((await rows()).map((r) => r.id)).toEqual(fresh.slice(-2).map((r) => r.id));
    retention.stop();
    expect(jobs).toHaveLength(0);
    expect(failures).toEqual([]);
  });
});
