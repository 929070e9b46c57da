// Posture responses on the Client API: every kind of check fails, then passes once the matching
// response is in, at session creation and in the service list; responses count for the API session
// that sent them only; bad input is 400 naming the field; the Management API shows an identity's
// posture data and refused requests (and nobody else's).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ENV, asAdmin, authenticatorApp, call, expectError, MGMT, startTestController, type TestController } from './helpers.js';
import { client, Network, ok, type Person } from './fixtures/network.js';
import { KEPT_FAILURES, MAX_BULK_RESPONSES, MAX_SESSION_PROCESSES } from '../src/domain/client/posture-store.js';
import { MFA_PROMPT_GRACE_MS } from '../src/policy/posture.js';

const GRACE_S = MFA_PROMPT_GRACE_MS / 1000;

let t: TestController;
let net: Network;
let alice: Person;
let bob: Person;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  net = new Network(t, await asAdmin(t));
  alice = await net.person('alice', ['staff']);
  bob = await net.person('bob', ['staff']);
  await net.edgeRouter('er-1');
  await net.openRouters();
});
afterAll(async () => {
  await t.close();
});

/** A service whose one Dial policy (for #staff) carries one check; answers the service and check ids. */
async function guarded(name: string, typeId: string, fields: Record<string, unknown>): Promise<{ service: string; check: string }> {
  const check = await net.postureCheck(typeId, fields);
  const service = await net.service(name);
  await net.servicePolicy('Dial', ['#staff'], [`@${service}`], [`@${check}`]);
  return { service, check };
}

type Responses = (check: string) => Record<string, unknown>[];

const KINDS: [string, Record<string, unknown>, Responses, Responses][] = [
  [
    'OS',
    { operatingSystems: [{ type: 'Linux', versions: ['>=6.1'] }] },
    (id) => [{ id, typeId: 'OS', type: 'Linux', version: '5.15.0', build: 'x' }],
    (id) => [{ id, typeId: 'OS', type: 'Linux', version: '6.8.0', build: 'x' }],
  ],
  [
    'PROCESS',
    { process: { osType: 'Linux', path: '/usr/bin/agent', hashes: ['ab12'] } },
    (id) => [{ id, typeId: 'PROCESS', path: '/usr/bin/agent', isRunning: false, hash: 'ab12' }],
    (id) => [{ id, typeId: 'PROCESS', path: '/usr/bin/agent', isRunning: true, hash: 'AB12', signerFingerprints: [] }],
  ],
  [
    'PROCESS_MULTI',
    { processes: [{ osType: 'Linux', path: '/opt/a' }, { osType: 'Linux', path: '/opt/b', signerFingerprints: ['00ff'] }], semantic: 'AllOf' },
    (id) => [
      { id, typeId: 'PROCESS_MULTI', path: '/opt/a', isRunning: true },
      { id, typeId: 'PROCESS_MULTI', path: '/opt/b', isRunning: false, signerFingerprints: ['00ff'] },
    ],
    (id) => [
      { id, typeId: 'PROCESS_MULTI', path: '/opt/a', isRunning: true },
      { id, typeId: 'PROCESS_MULTI', path: '/opt/b', isRunning: true, signerFingerprints: ['00:FF'] },
    ],
  ],
  ['DOMAIN', { domains: ['corp.example'] }, (id) => [{ id, typeId: 'DOMAIN', domain: 'home' }], (id) => [{ id, typeId: 'DOMAIN', domain: 'corp.example' }]],
  [
    'MAC',
    { macAddresses: ['0a:1b:2c:3d:4e:5f'] },
    (id) => [{ id, typeId: 'MAC', macAddresses: ['11:22:33:44:55:66'] }],
    (id) => [{ id, typeId: 'MAC', macAddresses: ['11:22:33:44:55:66', '0A-1B-2C-3D-4E-5F'] }],
  ],
];

describe.each(KINDS)('a %s check', (typeId, fields, failing, passing) => {
  it('fails without a response and with a wrong one, and passes with the right one', async () => {
    const { service, check } = await guarded(`svc-${typeId}`, typeId, fields);
    const token = await net.login(alice);
    const other = await net.login(alice);
    expectError(await client(t, 'POST', '/sessions', token, { serviceId: service }), 409, 'INVALID_POSTURE');
    ok(await client(t, 'POST', '/posture-response-bulk', token, failing(check)));
    expectError(await client(t, 'POST', '/sessions', token, { serviceId: service }), 409, 'INVALID_POSTURE');
    const query = async (tk: string) => ok(await client(t, 'GET', `/services/${service}`, tk)).postureQueries[0];
    expect((await query(token)).isPassing).toBe(false);
    for (const r of passing(check)) ok(await client(t, 'POST', '/posture-response', token, r), 201);
    expect(await query(token)).toMatchObject({ isPassing: true, postureQueries: [{ id: check, typeId, isPassing: true }] });
    expect(ok(await client(t, 'POST', '/sessions', token, { serviceId: service }), 201).serviceId).toBe(service);
    // the other API session of the same identity has reported nothing
    expect((await query(other)).isPassing).toBe(false);
    expectError(await client(t, 'POST', '/sessions', other, { serviceId: service }), 409, 'INVALID_POSTURE');
    // a later wrong report makes it fail again, even for the session already made
    ok(await client(t, 'POST', '/posture-response-bulk', token, failing(check)));
    expectError(await client(t, 'POST', '/sessions', token, { serviceId: service }), 409, 'INVALID_POSTURE');
  });
});

describe('an MFA check', () => {
  it('passes only for an API session whose MFA is complete, and asks again after a wake when told to', async () => {
    const { service, check } = await guarded('svc-MFA', 'MFA', { timeoutSeconds: 600, promptOnWake: true });
    const token = await net.login(alice);
    // No MFA given by this session: the check fails.
    const body = expectError(await client(t, 'POST', '/sessions', token, { serviceId: service }), 409, 'INVALID_POSTURE');
    expect(Object.values(body.error.cause.data)).toEqual([[{ id: check, typeId: 'MFA', isPassing: false }]]);
    const apiSessionId = ok(await client(t, 'GET', '/current-api-session', token)).id as string;
    await t.app.core.sessions.setMfaComplete(t.app.core.sessions.cached(apiSessionId)!);
    const q = ok(await client(t, 'GET', `/services/${service}`, token)).postureQueries[0].postureQueries[0];
    expect(q).toMatchObject({ id: check, typeId: 'MFA', isPassing: true, timeout: 600, promptOnWake: true, promptOnUnlock: false });
    expect(q.timeoutRemaining).toBeGreaterThan(0);
    expect(ok(await client(t, 'POST', '/sessions', token, { serviceId: service }), 201).serviceId).toBe(service);
    // the device woke after the MFA: asked again, and the answer says for which service
    t.clock.advance(1_000);
    const woke = ok(await client(t, 'POST', '/posture-response', token, { id: check, typeId: 'MFA', woken: true }), 201);
    expect(woke).toEqual({ services: [{ id: service, name: 'svc-MFA', postureQueryType: 'MFA', timeout: 600, timeoutRemaining: GRACE_S }] });
    // It passes for the grace period, then fails until the MFA is given again.
    expect(ok(await client(t, 'GET', `/services/${service}`, token)).postureQueries[0].isPassing).toBe(true);
    t.clock.advance(MFA_PROMPT_GRACE_MS);
    expect(ok(await client(t, 'GET', `/services/${service}`, token)).postureQueries[0].isPassing).toBe(false);
    // already asked: a second wake changes nothing
    t.clock.advance(1_000);
    expect(ok(await client(t, 'POST', '/posture-response', token, { id: check, typeId: 'MFA', woken: true }), 201)).toEqual({ services: [] });
    const data = ok(await call(t, 'GET', `${MGMT}/identities/${alice.id}/posture-data`, { token: net.admin }));
    expect(data.apiSessionPostureData[apiSessionId]).toMatchObject({
      endpointState: { wokenAt: expect.any(String) },
      mfa: { apiSessionId, passedMfa: true },
    });
    // ENDPOINT_STATE is the same report under its own name
    // the check does not ask again on unlock
    expect(ok(await client(t, 'POST', '/posture-response', token, { id: check, typeId: 'ENDPOINT_STATE', unlocked: true }), 201)).toEqual({ services: [] });
    expect(ok(await call(t, 'GET', `${MGMT}/identities/${alice.id}/posture-data`, { token: net.admin })).apiSessionPostureData[apiSessionId].endpointState.unlockedAt).toEqual(
      expect.any(String),
    );
  });
});

// A client once stored any number of process rows under made-up paths.
describe('the processes one API session reports', () => {
  it(`are at most ${MAX_SESSION_PROCESSES} paths, also for reports sent at once; known paths may be reported again`, async () => {
    const token = await net.login(bob);
    const bulk = (from: number, count = MAX_BULK_RESPONSES) =>
      client(t, 'POST', '/posture-response-bulk', token, Array.from({ length: count }, (_, i) => ({ id: 'any', typeId: 'PROCESS', path: `/opt/p${from + i}`, isRunning: true })));
    const at = MAX_SESSION_PROCESSES - MAX_BULK_RESPONSES;
    for (let from = 0; from < at; from += MAX_BULK_RESPONSES) ok(await bulk(from));
    // Room for one of the two.
    const [a, b] = await Promise.all([bulk(at), bulk(at + 10_000)]);
    expect([a.statusCode, b.statusCode].sort()).toEqual([200, 400]);
    expectError(await client(t, 'POST', '/posture-response', token, { id: 'any', typeId: 'PROCESS', path: '/opt/one-more', isRunning: true }), 400, 'COULD_NOT_VALIDATE', 'path');
    ok(await client(t, 'POST', '/posture-response', token, { id: 'any', typeId: 'PROCESS', path: '/opt/p0', isRunning: false }), 201);
    const apiSessionId = ok(await client(t, 'GET', '/current-api-session', token)).id as string;
    const { n } = await t.app.core.store.db
      .selectFrom('posture_data')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('api_session_id', '=', apiSessionId)
      .where('kind', '=', 'PROCESS')
      .executeTakeFirstOrThrow();
    expect(Number(n)).toBe(MAX_SESSION_PROCESSES);
  });
});

describe('sessions whose posture stops passing', () => {
  it('end: after a response, and when an MFA timeout runs out (looked at every minute)', async () => {
    const { service } = await guarded('svc-MFA-timeout', 'MFA', { timeoutSeconds: 60 });
    const token = await net.login(bob);
    const apiSessionId = ok(await client(t, 'GET', '/current-api-session', token)).id as string;
    await t.app.core.sessions.setMfaComplete(t.app.core.sessions.cached(apiSessionId)!);
    const session = ok(await client(t, 'POST', '/sessions', token, { serviceId: service }), 201).id as string;
    const exists = async () => (await call(t, 'GET', `${MGMT}/sessions/${session}`, { token: net.admin })).statusCode;
    t.clock.advance(59_000);
    t.app.core.client.enforcer.reset();
    await t.app.core.client.enforcer.idle();
    expect(await exists()).toBe(200);
    t.clock.advance(2_000);
    t.app.core.client.enforcer.reset();
    await t.app.core.client.enforcer.idle();
    expect(await exists()).toBe(404);
    expectError(await client(t, 'POST', '/sessions', token, { serviceId: service }), 409, 'INVALID_POSTURE');
  });
});

describe('an MFA check met with TOTP', () => {
  it('passes once the API session gives a live code, times out, asks again after a wake, and fails once MFA is removed', async () => {
    const carol = await net.person('carla', ['mfa-staff']);
    const check = await net.postureCheck('MFA', { timeoutSeconds: 300, promptOnWake: true });
    const service = await net.service('svc-totp');
    await net.servicePolicy('Dial', ['#mfa-staff'], [`@${service}`], [`@${check}`]);
    const plain = await net.login(carol);
    // Without TOTP the check fails: MFA posture needs an enrollment.
    expectError(await client(t, 'POST', '/sessions', plain, { serviceId: service }), 409, 'INVALID_POSTURE');
    const started = ok(await client(t, 'POST', '/current-identity/mfa', plain, {}), 201);
    const codeAt = authenticatorApp(started.provisioningUrl);
    const code = () => codeAt(t.clock());
    // Confirming the enrollment is a live code given by this session: the check passes for it.
    ok(await client(t, 'POST', '/current-identity/mfa/verify', plain, { code: code() }));
    expect(ok(await client(t, 'POST', '/sessions', plain, { serviceId: service }), 201).serviceId).toBe(service);

    // A new login waits for its code; given, the check passes and counts down from then.
    t.clock.advance(30_000);
    const token = await net.login(carol);
    ok(await client(t, 'POST', '/authenticate/mfa', token, { code: code() }));
    const query = async () => ok(await client(t, 'GET', `/services/${service}`, token)).postureQueries[0];
    expect((await query()).postureQueries[0]).toMatchObject({ isPassing: true, timeout: 300, timeoutRemaining: 300 });
    t.clock.advance(120_000);
    expect((await query()).postureQueries[0]).toMatchObject({ isPassing: true, timeoutRemaining: 180 });
    const apiSessionId = ok(await client(t, 'GET', '/current-api-session', token)).id as string;
    const data = ok(await call(t, 'GET', `${MGMT}/identities/${carol.id}/posture-data`, { token: net.admin }));
    expect(data.apiSessionPostureData[apiSessionId].mfa).toMatchObject({ passedMfa: true, passedAt: new Date(t.clock() - 120_000).toISOString() });
    // Past the timeout it fails, until a code is given again.
    t.clock.advance(181_000);
    expect((await query()).isPassing).toBe(false);
    expectError(await client(t, 'POST', '/sessions', token, { serviceId: service }), 409, 'INVALID_POSTURE');
    ok(await client(t, 'POST', '/authenticate/mfa', token, { code: code() }));
    expect((await query()).isPassing).toBe(true);
    // A wake after the code asks for it again: due within the grace period.
    t.clock.advance(1_000);
    ok(await client(t, 'POST', '/posture-response', token, { id: check, typeId: 'MFA', woken: true }), 201);
    // (its own timeout, 299 s away, comes before the end of the grace)
    expect((await query()).postureQueries[0]).toMatchObject({ isPassing: true, timeoutRemaining: 299 });
    t.clock.advance(MFA_PROMPT_GRACE_MS);
    expect((await query()).isPassing).toBe(false);
    t.clock.advance(1_000);
    ok(await client(t, 'POST', '/authenticate/mfa', token, { code: code() }));
    expect((await query()).isPassing).toBe(true);
    // An admin removes the MFA: the session stays, the check fails.
    ok(await call(t, 'DELETE', `${MGMT}/identities/${carol.id}/mfa`, { token: net.admin }));
    expect((await query()).isPassing).toBe(false);
    expectError(await client(t, 'POST', '/sessions', token, { serviceId: service }), 409, 'INVALID_POSTURE');
    const after = ok(await call(t, 'GET', `${MGMT}/identities/${carol.id}/posture-data`, { token: net.admin }));
    expect(after.apiSessionPostureData[apiSessionId].mfa).toEqual({ apiSessionId, passedMfa: false, passedOnUnlock: false, passedOnWake: false });
  });
});

describe('the answer of a posture response', () => {
  it('lists the caller\u2019s services whose MFA checks ask again after the report, with the shortest timeout', async () => {
    const long = await net.postureCheck('MFA', { timeoutSeconds: 900, promptOnUnlock: true });
    const short = await net.postureCheck('MFA', { timeoutSeconds: 300, promptOnUnlock: true });
    const wakeOnly = await net.postureCheck('MFA', { timeoutSeconds: 60, promptOnWake: true });
    const forever = await net.postureCheck('MFA', { timeoutSeconds: -1, promptOnUnlock: true });
    const erin = await net.person('erin', ['mfa-staff']);
    const frank = await net.person('frank', ['mfa-other']);
    const both = await net.service('mfa-both');
    const noTimeout = await net.service('mfa-forever');
    const wake = await net.service('mfa-wake');
    const others = await net.service('mfa-others');
    await net.servicePolicy('Dial', ['#mfa-staff'], [`@${both}`], [`@${long}`, `@${short}`]);
    await net.servicePolicy('Bind', ['#mfa-staff'], [`@${noTimeout}`], [`@${forever}`]);
    await net.servicePolicy('Dial', ['#mfa-staff'], [`@${wake}`], [`@${wakeOnly}`]);
    // frank's service shares the check, but erin may not use it: never named to her
    await net.servicePolicy('Dial', ['#mfa-other'], [`@${others}`], [`@${long}`]);
    const token = await net.login(erin);
    const bulk = (body: unknown) => client(t, 'POST', '/posture-response-bulk', token, body);
    // no MFA yet: nothing passed, so nothing changes
    expect(ok(await bulk([{ id: long, typeId: 'ENDPOINT_STATE', unlocked: true }]))).toEqual({ services: [] });
    const apiSessionId = ok(await client(t, 'GET', '/current-api-session', token)).id as string;
    await t.app.core.sessions.setMfaComplete(t.app.core.sessions.cached(apiSessionId)!);
    t.clock.advance(1_000);
    // reports of other kinds never ask for MFA
    expect(ok(await bulk([{ id: 'x', typeId: 'DOMAIN', domain: 'erin.example' }]))).toEqual({ services: [] });
    const res = await bulk([
      { id: 'x', typeId: 'DOMAIN', domain: 'erin.example' },
      { id: long, typeId: 'ENDPOINT_STATE', unlocked: true },
    ]);
    expect(res.statusCode).toBe(200);
    expect(ok(res)).toEqual({
      services: [
        { id: both, name: 'mfa-both', postureQueryType: 'MFA', timeout: 300, timeoutRemaining: GRACE_S },
        { id: noTimeout, name: 'mfa-forever', postureQueryType: 'MFA', timeout: -1, timeoutRemaining: GRACE_S },
      ],
    });
    // Asked already: another unlock within the grace asks nothing more.
    expect(ok(await bulk([{ id: long, typeId: 'ENDPOINT_STATE', unlocked: true }]))).toEqual({ services: [] });
    // and the service list agrees: those checks pass for the grace period, then fail; the wake-only one still passes
    const queries = async (id: string) => ok(await client(t, 'GET', `/services/${id}`, token)).postureQueries[0];
    expect((await queries(both)).isPassing).toBe(true);
    t.clock.advance(MFA_PROMPT_GRACE_MS);
    expect((await queries(both)).isPassing).toBe(false);
    expect((await queries(noTimeout)).isPassing).toBe(false);
    expect((await queries(wake)).isPassing).toBe(false); // its own 60 s timeout ran out meanwhile
    // frank's own session is another device: untouched
    const franks = await net.login(frank);
    const frankSession = ok(await client(t, 'GET', '/current-api-session', franks)).id as string;
    await t.app.core.sessions.setMfaComplete(t.app.core.sessions.cached(frankSession)!);
    expect((ok(await client(t, 'GET', `/services/${others}`, franks)).postureQueries[0]).isPassing).toBe(true);
  });

  it('the service list follows the end of the grace period of an MFA check without a timeout', async () => {
    const forever = await net.postureCheck('MFA', { timeoutSeconds: -1, promptOnWake: true });
    const gina = await net.person('gina', ['mfa-wake-staff']);
    const service = await net.service('mfa-wake-forever');
    await net.servicePolicy('Dial', ['#mfa-wake-staff'], [`@${service}`], [`@${forever}`]);
    const token = await net.login(gina);
    const apiSessionId = ok(await client(t, 'GET', '/current-api-session', token)).id as string;
    await t.app.core.sessions.setMfaComplete(t.app.core.sessions.cached(apiSessionId)!);
    t.clock.advance(1_000);
    ok(await client(t, 'POST', '/posture-response', token, { id: forever, typeId: 'ENDPOINT_STATE', woken: true }), 201);
    const listed = async () => (ok(await client(t, 'GET', '/services', token)) as { postureQueries: { isPassing: boolean }[] }[]).map((s) => s.postureQueries[0]!.isPassing);
    expect(await listed()).toEqual([true]);
    // Nothing changes but the time: the grace after the wake ends, and the list says so.
    t.clock.advance(MFA_PROMPT_GRACE_MS);
    expect(await listed()).toEqual([false]);
    expectError(await client(t, 'POST', '/sessions', token, { serviceId: service }), 409, 'INVALID_POSTURE');
  });
});

describe('POST /posture-response and /posture-response-bulk', () => {
  it('answer 400 naming the field for bad input', async () => {
    const token = await net.login(bob);
    const one = (body: unknown) => client(t, 'POST', '/posture-response', token, body);
    const bulk = (body: unknown) => client(t, 'POST', '/posture-response-bulk', token, body);
    expectError(await one({ typeId: 'DOMAIN', domain: 'x' }), 400, 'COULD_NOT_VALIDATE', 'id');
    expectError(await one({ id: 'x', domain: 'x' }), 400, 'COULD_NOT_VALIDATE', 'typeId');
    expectError(await one({ id: 'x', typeId: 'RETINA' }), 400, 'COULD_NOT_VALIDATE', 'typeId');
    expectError(await one({ id: 'x', typeId: 'DOMAIN' }), 400, 'COULD_NOT_VALIDATE', 'domain');
    expectError(await one({ id: 'x', typeId: 'OS', type: 'Linux' }), 400, 'COULD_NOT_VALIDATE', 'version');
    expectError(await one({ id: 'x', typeId: 'MAC' }), 400, 'COULD_NOT_VALIDATE', 'macAddresses');
    expectError(await one({ id: 'x', typeId: 'PROCESS', isRunning: true }), 400, 'COULD_NOT_VALIDATE', 'path');
    expectError(await one({ id: 'x', typeId: 'PROCESS', path: '/x', isRunning: 'yes' }), 400, 'COULD_NOT_VALIDATE', 'isRunning');
    expectError(await one({ id: 'x', typeId: 'DOMAIN', domain: 'x'.repeat(300) }), 400, 'COULD_NOT_VALIDATE', 'domain');
    expectError(await one([]), 400, 'COULD_NOT_VALIDATE');
    expectError(await bulk({ id: 'x', typeId: 'DOMAIN', domain: 'x' }), 400, 'COULD_NOT_VALIDATE');
    expectError(await bulk([{ id: 'x', typeId: 'DOMAIN', domain: 'x' }, { id: 'y', typeId: 'DOMAIN' }]), 400, 'COULD_NOT_VALIDATE', '[1].domain');
    expectError(await bulk([{ id: 'x', typeId: 'MAC', macAddresses: 'aa' }]), 400, 'COULD_NOT_VALIDATE', '[0].macAddresses');
    expectError(await bulk(Array.from({ length: 101 }, () => ({ id: 'x', typeId: 'DOMAIN', domain: 'x' }))), 400, 'COULD_NOT_VALIDATE');
    // nothing of a refused bulk is stored
    const data = ok(await call(t, 'GET', `${MGMT}/identities/${bob.id}/posture-data`, { token: net.admin }));
    expect(data.domain).toEqual({ postureCheckId: '', timedOut: false, domain: '' });
  });

  it('answer 401 without a credential', async () => {
    expectError(await client(t, 'POST', '/posture-response', undefined, { id: 'x', typeId: 'DOMAIN', domain: 'x' }), 401, 'UNAUTHORIZED');
    expectError(await client(t, 'POST', '/posture-response-bulk', undefined, []), 401, 'UNAUTHORIZED');
  });

  it('accept an empty bulk and a response for a check that does not exist', async () => {
    const token = await net.login(bob);
    expect(ok(await client(t, 'POST', '/posture-response-bulk', token, []))).toEqual({ services: [] });
    expect(ok(await client(t, 'POST', '/posture-response', token, { id: 'no-such-check', typeId: 'DOMAIN', domain: 'bob.example' }), 201)).toEqual({ services: [] });
  });
});

describe('posture on the Management API', () => {
  it('GET /identities/{id}/posture-data shows the identity\u2019s latest reports per kind and per API session, and nobody else\u2019s', async () => {
    const carol = await net.person('carol', ['staff']);
    const token = await net.login(carol);
    t.clock.advance(1_000);
    ok(
      await client(t, 'POST', '/posture-response-bulk', token, [
        { id: 'c-os', typeId: 'OS', type: 'Windows', version: '10.0.22631', build: '3007' },
        { id: 'c-dom', typeId: 'DOMAIN', domain: 'carol.example' },
        { id: 'c-mac', typeId: 'MAC', macAddresses: ['0a:1b:2c:3d:4e:5f'] },
        { id: 'c-proc', typeId: 'PROCESS', path: 'C:\\agent.exe', isRunning: true, hash: 'ff', signerFingerprints: ['aa'] },
      ]),
    );
    const data = ok(await call(t, 'GET', `${MGMT}/identities/${carol.id}/posture-data`, { token: net.admin }));
    const at = expect.stringMatching(/^\d{4}-\d\d-\d\dT/);
    expect(data.os).toEqual({ lastUpdatedAt: at, postureCheckId: 'c-os', timedOut: false, type: 'Windows', version: '10.0.22631', build: '3007' });
    expect(data.domain).toEqual({ lastUpdatedAt: at, postureCheckId: 'c-dom', timedOut: false, domain: 'carol.example' });
    expect(data.mac).toEqual({ lastUpdatedAt: at, postureCheckId: 'c-mac', timedOut: false, addresses: ['0a:1b:2c:3d:4e:5f'] });
    expect(data.processes).toEqual([
      { lastUpdatedAt: at, postureCheckId: 'c-proc', timedOut: false, path: 'C:\\agent.exe', isRunning: true, binaryHash: 'ff', signerFingerprints: ['aa'] },
    ]);
    const apiSessionId = ok(await client(t, 'GET', '/current-api-session', token)).id;
    expect(Object.keys(data.apiSessionPostureData)).toEqual([apiSessionId]);
    expect(data.apiSessionPostureData[apiSessionId].domain.domain).toBe('carol.example');
    // a newer report from another API session wins at the top
    const second = await net.login(carol);
    t.clock.advance(1_000);
    ok(await client(t, 'POST', '/posture-response', second, { id: 'c-dom', typeId: 'DOMAIN', domain: 'second.example' }), 201);
    const later = ok(await call(t, 'GET', `${MGMT}/identities/${carol.id}/posture-data`, { token: net.admin }));
    expect(later.domain.domain).toBe('second.example');
    expect(Object.keys(later.apiSessionPostureData)).toHaveLength(2);
    // bob sees none of it
    const bobs = ok(await call(t, 'GET', `${MGMT}/identities/${bob.id}/posture-data`, { token: net.admin }));
    expect(JSON.stringify(bobs)).not.toContain('carol.example');
    // posture data goes with its API session
    ok(await client(t, 'DELETE', '/current-api-session', token));
    const after = ok(await call(t, 'GET', `${MGMT}/identities/${carol.id}/posture-data`, { token: net.admin }));
    expect(Object.keys(after.apiSessionPostureData)).toHaveLength(1);
    expect(after.os).toEqual({ postureCheckId: '', timedOut: false, type: '', version: '', build: '' });
  });

  it('GET /identities/{id}/posture-data before any report: os, domain and mac are objects, and no date-time is null', async () => {
    const grace = await net.person('grace', ['staff']);
    const token = await net.login(grace);
    const apiSessionId = ok(await client(t, 'GET', '/current-api-session', token)).id as string;
    const res = await call(t, 'GET', `${MGMT}/identities/${grace.id}/posture-data`, { token: net.admin });
    const data = ok(res);
    expect(data.os).toEqual({ postureCheckId: '', timedOut: false, type: '', version: '', build: '' });
    expect(data.domain).toEqual({ postureCheckId: '', timedOut: false, domain: '' });
    expect(data.mac).toEqual({ postureCheckId: '', timedOut: false, addresses: [] });
    expect(data.processes).toEqual([]);
    // not woken, not unlocked, no MFA passed: those times are left out rather than null
    expect(data.apiSessionPostureData[apiSessionId].endpointState).toEqual({});
    expect(data.apiSessionPostureData[apiSessionId].mfa).toEqual({ apiSessionId, passedMfa: false, passedOnUnlock: false, passedOnWake: false });
    const topLevel = JSON.stringify({ ...data, apiSessionPostureData: Object.values(data.apiSessionPostureData).map((p: any) => ({ endpointState: p.endpointState, mfa: p.mfa })) });
    expect(topLevel).not.toContain('null');
  });

  it('GET /identities/{id}/failed-service-requests lists the identity\u2019s refusals only, newest first, the newest few kept', async () => {
    const { service } = await guarded('svc-refused', 'DOMAIN', { domains: ['never.example'] });
    const dave = await net.person('dave', ['staff']);
    const token = await net.login(dave);
    for (let i = 0; i < KEPT_FAILURES + 3; i++) {
      t.clock.advance(1_000);
      expectError(await client(t, 'POST', '/sessions', token, { serviceId: service }), 409, 'INVALID_POSTURE');
    }
    const list = ok(await call(t, 'GET', `${MGMT}/identities/${dave.id}/failed-service-requests`, { token: net.admin })) as any[];
    expect(list).toHaveLength(KEPT_FAILURES);
    expect(list.map((f) => f.when)).toEqual(list.map((f) => f.when).sort().reverse());
    expect(list[0]).toMatchObject({ serviceId: service, serviceName: 'svc-refused', sessionType: 'Dial' });
    const others = ok(await call(t, 'GET', `${MGMT}/identities/${bob.id}/failed-service-requests`, { token: net.admin })) as any[];
    expect(others.some((f) => f.serviceId === service)).toBe(false);
  });

  it('GET /identities/{id}/failed-service-requests shows per failing check what the device reported and what the check asks', async () => {
    const checks = {
      domain: await net.postureCheck('DOMAIN', { domains: ['corp.example'] }),
      os: await net.postureCheck('OS', { operatingSystems: [{ type: 'Linux', versions: ['>=6.1'] }] }),
      mfa: await net.postureCheck('MFA', { timeoutSeconds: 600, promptOnWake: true, promptOnUnlock: false }),
      mac: await net.postureCheck('MAC', { macAddresses: ['0a:1b:2c:3d:4e:5f'] }),
      process: await net.postureCheck('PROCESS', { process: { osType: 'Linux', path: '/usr/bin/agent', hashes: ['ab12'] } }),
      multi: await net.postureCheck('PROCESS_MULTI', { processes: [{ osType: 'Linux', path: '/opt/a' }, { osType: 'Linux', path: '/opt/b' }], semantic: 'AnyOf' }),
    };
    const service = await net.service('svc-seen');
    const policy = await net.servicePolicy('Dial', ['#seen'], [`@${service}`], Object.values(checks).map((c) => `@${c}`));
    const heidi = await net.person('heidi', ['seen']);
    const token = await net.login(heidi);
    ok(
      await client(t, 'POST', '/posture-response-bulk', token, [
        { id: checks.domain, typeId: 'DOMAIN', domain: 'home.example' },
        { id: checks.os, typeId: 'OS', type: 'Linux', version: '5.15.0', build: 'x' },
        { id: checks.mfa, typeId: 'ENDPOINT_STATE', woken: true },
        { id: checks.process, typeId: 'PROCESS', path: '/usr/bin/agent', isRunning: false, hash: 'ab12', signerFingerprints: [] },
        { id: checks.multi, typeId: 'PROCESS_MULTI', path: '/opt/b', isRunning: false, hash: 'cd34' },
      ]),
    );
    expectError(await client(t, 'POST', '/sessions', token, { serviceId: service }), 409, 'INVALID_POSTURE');

    const [refusal] = ok(await call(t, 'GET', `${MGMT}/identities/${heidi.id}/failed-service-requests`, { token: net.admin })) as any[];
    expect(refusal.policyFailures).toHaveLength(1);
    expect(refusal.policyFailures[0].policyId).toBe(policy);
    const byId = new Map<string, any>(refusal.policyFailures[0].checks.map((c: any) => [c.postureCheckId, c]));
    expect([...byId.keys()].sort()).toEqual(Object.values(checks).sort());
    const values = (id: string) => {
      const { postureCheckId: _id, postureCheckName: _name, ...rest } = byId.get(id);
      return rest;
    };
    expect(values(checks.domain)).toEqual({ postureCheckType: 'DOMAIN', actualValue: 'home.example', expectedValue: ['corp.example'] });
    expect(values(checks.os)).toEqual({
      postureCheckType: 'OS',
      actualValue: { type: 'Linux', version: '5.15.0' },
      expectedValue: [{ type: 'Linux', versions: ['>=6.1'] }],
    });
    // MFA never passed (so timed out and not passed on wake); the device reported waking
    expect(values(checks.mfa)).toEqual({
      postureCheckType: 'MFA',
      actualValue: { passedMfa: false, passedOnUnlock: true, passedOnWake: false, timedOut: true },
      expectedValue: { passedMfa: true, passedOnUnlock: false, passedOnWake: true, timedOut: false },
      criteria: { wokenAt: expect.any(String), timeoutSeconds: 600, timeoutRemainingSeconds: 0 },
    });
    // MAC never reported: nothing to show; the check's addresses read as stored, lowercase hex
    expect(values(checks.mac)).toEqual({ postureCheckType: 'MAC', actualValue: [], expectedValue: ['0a1b2c3d4e5f'] });
    expect(values(checks.process)).toEqual({
      postureCheckType: 'PROCESS',
      actualValue: { path: '/usr/bin/agent', isRunning: false, hash: 'ab12', signerFingerprints: [] },
      expectedValue: { osType: 'Linux', path: '/usr/bin/agent', hashes: ['ab12'] },
    });
    expect(values(checks.multi)).toEqual({
      postureCheckType: 'PROCESS_MULTI',
      actualValue: [{ path: '/opt/b', isRunning: false, hash: 'cd34', signerFingerprints: [] }],
      expectedValue: [
        { osType: 'Linux', path: '/opt/a', hashes: [], signerFingerprints: [] },
        { osType: 'Linux', path: '/opt/b', hashes: [], signerFingerprints: [] },
      ],
      semantic: 'AnyOf',
    });
  });

  it('GET /identities/{id}/failed-service-requests answers a refusal recorded without check values with the base fields', async () => {
    const ivan = await net.person('ivan', ['staff']);
    const base = { postureCheckId: 'pc-old', postureCheckName: 'old', postureCheckType: 'DOMAIN' };
    await t.app.core.client.posture.recordFailure(ivan.id, {
      apiSessionId: 'as-old',
      serviceId: 'svc-old',
      serviceName: 'old',
      sessionType: 'Dial',
      when: new Date(t.clock()).toISOString(),
      policyFailures: [{ policyId: 'sp-old', policyName: 'old', checks: [base] }],
    });
    const list = ok(await call(t, 'GET', `${MGMT}/identities/${ivan.id}/failed-service-requests`, { token: net.admin })) as any[];
    expect(list[0].policyFailures[0].checks).toEqual([base]);
  });

  it('answer 404 for an unknown identity and 401 to callers who are not admins', async () => {
    for (const sub of ['posture-data', 'failed-service-requests']) {
      expectError(await call(t, 'GET', `${MGMT}/identities/no-such-id/${sub}`, { token: net.admin }), 404, 'NOT_FOUND');
      expectError(await call(t, 'GET', `${MGMT}/identities/${alice.id}/${sub}`, { token: await net.login(alice) }), 401, 'UNAUTHORIZED');
      expectError(await call(t, 'GET', `${MGMT}/identities/${alice.id}/${sub}`), 401, 'UNAUTHORIZED');
    }
  });
});
