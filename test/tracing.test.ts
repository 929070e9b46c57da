// Tracing of one identity's requests: PUT /identities/{id}/trace turns it on for a duration (injected
// clock); meanwhile that identity's requests are logged at debug detail with the trace id, though the
// log level is info, and no other identity's are. No secret reaches the traced lines.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
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
  type TestController,
} from './helpers.js';

describe('identity tracing', () => {
  let t: TestController;
  let admin: string;
  let userId: string;
  let otherId: string;
  const chunks: string[] = [];
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, any>);
  const traced = (traceId: string) => lines().filter((l) => l.traceId === traceId);

  beforeAll(async () => {
    const stream = new Writable({
      write(chunk, _encoding, done) {
        chunks.push(String(chunk));
        done();
      },
    });
    t = await startTestController({ env: ADMIN_ENV, log: pino({ level: 'info' }, stream) });
    admin = await asAdmin(t);
    userId = (await createIdentityWithPassword(t, admin, { name: 'traced', username: 'traced', password: 'traced-password-1' })).id;
    otherId = (await createIdentityWithPassword(t, admin, { name: 'other', username: 'other', password: 'other-password-1', permissions: ['admin_readonly'] })).id;
  });
  afterAll(() => t.close());

  const trace = (id: string, body: unknown, token = admin) => call(t, 'PUT', `${MGMT}/identities/${id}/trace`, { token, body });

  it('needs a credential and the identity update permission', async () => {
    expectMissingCredential(await call(t, 'PUT', `${MGMT}/identities/${userId}/trace`, { body: { enabled: false } }));
    const reader = await login(t, 'other', 'other-password-1');
    expectError(await trace(userId, { enabled: true, duration: '1m' }, reader), 401, 'UNAUTHORIZED');
  });

  it('answers 404 for an unknown identity and 400 naming the field for a bad spec', async () => {
    expectError(await trace('no-such-identity', { enabled: true, duration: '1m' }), 404, 'NOT_FOUND');
    expectError(await trace(userId, { enabled: true }), 400, 'COULD_NOT_VALIDATE', 'duration');
    expectError(await trace(userId, { enabled: true, duration: 'soon' }), 400, 'COULD_NOT_VALIDATE', 'duration');
    expectError(await trace(userId, { enabled: true, duration: '0s' }), 400, 'COULD_NOT_VALIDATE', 'duration');
    expectError(await trace(userId, { enabled: true, duration: '25h' }), 400, 'COULD_NOT_VALIDATE', 'duration');
    expectError(await trace(userId, { enabled: true, duration: '1m', channels: ['select.path'] }), 400, 'COULD_NOT_VALIDATE', 'channels');
    expectError(await trace(userId, { enabled: 'yes', duration: '1m' }), 400, 'COULD_NOT_VALIDATE');
    expectError(await trace(userId, { enabled: true, duration: '1m', traceId: 'with space' }), 400, 'COULD_NOT_VALIDATE');
    // Nothing was turned on by the refused ones.
    await login(t, 'traced', 'traced-password-1').then((token) => call(t, 'GET', `${CLIENT}/current-identity`, { token }));
    expect(lines().filter((l) => l.traceId !== undefined)).toEqual([]);
  });

  it('logs the traced identity’s requests at debug with the trace id until the duration passes', async () => {
    const res = await trace(userId, { enabled: true, duration: '10m', traceId: 'trace-one' });
    expect(res.statusCode).toBe(200);
    expect(json(res).data).toEqual({
      enabled: true,
      traceId: 'trace-one',
      until: new Date(t.clock() + 600_000).toISOString(),
      channels: ['request', 'response'],
    });

    const password = 'traced-password-1';
    const token = await login(t, 'traced', password);
    expect((await call(t, 'GET', `${CLIENT}/current-identity?foo=secret-query-value`, { token })).statusCode).toBe(200);
    expect((await call(t, 'GET', `${MGMT}/identities`, { token })).statusCode).toBe(401);
    const mine = traced('trace-one');
    const requests = mine.filter((l) => l.msg === 'traced request');
    const responses = mine.filter((l) => l.msg === 'traced response');
    expect(requests.map((l) => [l.level, l.method, l.route, l.identityId])).toContainEqual([20, 'GET', '/edge/client/v1/current-identity', userId]);
    expect(requests[0]!.queryParameters).toEqual(['foo']);
    expect(responses.map((l) => l.statusCode)).toEqual([200, 401]);
    // The error line of the refused request carries the trace id too.
    expect(mine.some((l) => l.level >= 30 && l.msg !== 'traced request' && l.msg !== 'traced response')).toBe(true);
    const text = chunks.join('');
    for (const secret of [password, token, ADMIN_PASSWORD, admin, 'secret-query-value']) expect(text).not.toContain(secret);

    // Another identity's requests are not traced.
    const before = lines().filter((l) => l.traceId !== undefined).length;
    expect((await call(t, 'GET', `${MGMT}/identities/${otherId}`, { token: admin })).statusCode).toBe(200);
    expect(lines().filter((l) => l.traceId !== undefined)).toHaveLength(before);

    // Once the duration has passed, the identity's requests are not traced any more.
    t.clock.advance(600_000);
    expect((await call(t, 'GET', `${CLIENT}/current-identity`, { token })).statusCode).toBe(200);
    expect(traced('trace-one')).toHaveLength(mine.length);
  });

  it('channels narrow what is logged; a generated trace id; off ends it', async () => {
    const on = json(await trace(userId, { enabled: true, duration: '5m', channels: ['response'] })).data;
    expect(on.traceId).toMatch(/^[0-9a-f-]{36}$/);
    const token = await login(t, 'traced', 'traced-password-1');
    await call(t, 'GET', `${CLIENT}/current-identity`, { token });
    // The request line carries the trace id as every line of the request does; of the trace's own
    // lines only the response is written.
    const own = () => traced(on.traceId).filter((l) => String(l.msg).startsWith('traced '));
    expect(own().map((l) => l.msg)).toEqual(['traced response']);
    const before = traced(on.traceId).length;

    expect(json(await trace(userId, { enabled: false })).data).toEqual({ enabled: false });
    await call(t, 'GET', `${CLIENT}/current-identity`, { token });
    expect(traced(on.traceId)).toHaveLength(before);
  });

  it('ends with the identity', async () => {
    const victim = (await createIdentityWithPassword(t, admin, { name: 'gone', username: 'gone', password: 'gone-password-1' })).id;
    expect((await trace(victim, { enabled: true, duration: '1h', traceId: 'trace-gone' })).statusCode).toBe(200);
    expect(t.app.core.traces.active(victim)).toBeDefined();
    expect((await call(t, 'DELETE', `${MGMT}/identities/${victim}`, { token: admin })).statusCode).toBe(200);
    expect(t.app.core.traces.active(victim)).toBeUndefined();
  });
});
