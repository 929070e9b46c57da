// The request log: one info line per request with method, route template, status, duration,
// identity, client address and the request id of the answer's x-request-id; failures logged with the
// same context; probes at debug; ISO 8601 times; and none of it when configured off.
import { Writable } from 'node:stream';
import type { DestinationStream } from 'pino';
import { describe, expect, it } from 'vitest';
import type { AppOptions } from '../src/app/app.js';
import { ADMIN_ENV, asAdmin, call, CLIENT, json, MGMT, overTls, startTestController, type TestController } from './helpers.js';

async function controller(
  env: NodeJS.ProcessEnv = {},
  server: AppOptions['server'] = {},
): Promise<{ t: TestController; lines(): Record<string, unknown>[] }> {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  const t = await startTestController({
    env: { ...ADMIN_ENV, OVERLAY_LOG_FORMAT: 'json', ...env },
    log: undefined,
    logDestination: sink as unknown as DestinationStream,
    server,
  });
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { t, lines };
}

describe('request log', () => {
  it('one info line per request: method, route template, status, duration, identity, address, request id', async () => {
    const { t, lines } = await controller();
    try {
      const admin = await asAdmin(t);
      const self = json(await call(t, 'GET', `${MGMT}/current-identity`, { token: admin })).data.id as string;
      const res = await call(t, 'GET', `${MGMT}/identities/${self}?x=1`, { token: admin, remoteAddress: '10.2.3.4' });
      expect(res.statusCode).toBe(200);
      const requestId = String(res.headers['x-request-id']);
      const mine = lines().filter((l) => l.requestId === requestId);
      expect(mine).toHaveLength(1);
      const line = mine[0]!;
      expect(line).toMatchObject({
        level: 30,
        msg: `GET ${MGMT}/identities/:id 200`,
        method: 'GET',
        route: `${MGMT}/identities/:id`,
        status: 200,
        identityId: self,
        address: '10.2.3.4',
        listener: 'default',
      });
      expect(line.durationMs).toBeTypeOf('number');
      expect(line.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      // The URL itself (its id, its query) is not logged.
      expect(JSON.stringify(line)).not.toContain('?x=1');
    } finally {
      await t.close();
    }
  });

  it('a failure is logged with the same context, and the request line follows it', async () => {
    const { t, lines } = await controller();
    try {
      const admin = await asAdmin(t);
      const res = await call(t, 'GET', `${MGMT}/identities/no-such-identity`, { token: admin });
      expect(res.statusCode).toBe(404);
      const mine = lines().filter((l) => l.requestId === res.headers['x-request-id']);
      expect(mine.map((l) => l.msg)).toEqual([expect.stringContaining('no-such-identity'), `GET ${MGMT}/identities/:id 404`]);
      for (const line of mine) {
        expect(line).toMatchObject({ method: 'GET', route: `${MGMT}/identities/:id`, status: 404, address: '127.0.0.1' });
        expect(line.identityId).toBeTypeOf('string');
      }
      expect(mine[0]).toMatchObject({ code: 'NOT_FOUND' });

      const unrouted = await call(t, 'DELETE', `${CLIENT}/nowhere`);
      const unroutedLines = lines().filter((l) => l.requestId === unrouted.headers['x-request-id']);
      expect(unroutedLines.at(-1)).toMatchObject({ route: 'unmatched', status: 404, msg: 'DELETE unmatched 404' });
    } finally {
      await t.close();
    }
  });

  it('a path that does not decode is refused naming the path, never its query, which may carry a token', async () => {
    const { t, lines } = await controller();
    try {
      const res = await t.inject({ method: 'POST', url: `${CLIENT}/enroll/updb%ZZ?token=QuerySecret-4f2a&method=updb` });
      expect(res.statusCode).toBe(400);
      expect(json(res).error).toMatchObject({ code: 'COULD_NOT_VALIDATE', message: expect.stringContaining(`${CLIENT}/enroll/updb%ZZ`) });
      expect(res.body).not.toContain('QuerySecret');
      const mine = lines().filter((l) => l.requestId === json(res).error.requestId);
      expect(mine[0]).toMatchObject({ code: 'COULD_NOT_VALIDATE', status: 400, msg: expect.stringContaining(`${CLIENT}/enroll/updb%ZZ`) });
      expect(JSON.stringify(lines())).not.toContain('QuerySecret');
    } finally {
      await t.close();
    }
  });

  it('an unexpected failure is logged as an error with the same context, and answered without its details', async () => {
    const { t, lines } = await controller({}, {
      extraRoutes: (app) =>
        app.get('/fails/:what', async () => {
          throw new Error('the disk is on fire');
        }),
    });
    try {
      const res = await t.inject({ method: 'GET', url: '/fails/now', remoteAddress: '10.7.7.7' });
      expect(res.statusCode).toBe(500);
      expect(res.body).not.toContain('fire');
      const mine = lines().filter((l) => l.requestId === res.headers['x-request-id']);
      expect(mine.map((l) => [l.level, l.msg])).toEqual([
        [50, 'request failed'],
        [30, 'GET /fails/:what 500'],
      ]);
      expect(mine[0]).toMatchObject({ method: 'GET', route: '/fails/:what', address: '10.7.7.7', status: 500, err: { message: 'the disk is on fire' } });
    } finally {
      await t.close();
    }
  });

  it('probes are logged at debug, so a load balancer does not fill the log', async () => {
    const info = await controller();
    const debug = await controller({ OVERLAY_LOG_LEVEL: 'debug' });
    try {
      for (const { t, lines } of [info, debug]) {
        const res = await t.inject({ method: 'GET', url: '/ready' });
        const mine = lines().filter((l) => l.requestId === res.headers['x-request-id']);
        expect(mine.map((l) => l.level)).toEqual(t === info.t ? [] : [20]);
      }
    } finally {
      await info.t.close();
      await debug.t.close();
    }
  });

  it('OVERLAY_LOG_REQUESTS=false turns the request lines off, not the failures', async () => {
    const { t, lines } = await controller({ OVERLAY_LOG_REQUESTS: 'false' });
    try {
      const admin = await asAdmin(t);
      const ok = await call(t, 'GET', `${MGMT}/identities`, { token: admin });
      const missing = await call(t, 'GET', `${MGMT}/identities/nope`, { token: admin });
      expect(lines().filter((l) => l.requestId === ok.headers['x-request-id'])).toEqual([]);
      const failure = lines().filter((l) => l.requestId === missing.headers['x-request-id']);
      expect(failure).toHaveLength(1);
      expect(failure[0]).toMatchObject({ code: 'NOT_FOUND', route: `${MGMT}/identities/:id` });
    } finally {
      await t.close();
    }
  });

  it("lines the controller's own logger writes on behalf of a request carry its id, after a body was read and after awaiting", async () => {
    // The route is registered before the controller it logs through exists.
    const late: { t?: TestController } = {};
    const { t, lines } = await controller({}, {
      extraRoutes: (app) =>
        app.post('/log-probe', async () => {
          await new Promise((resolve) => setTimeout(resolve, 2));
          late.t!.app.core.log.warn('written by the core');
          return {};
        }),
    });
    late.t = t;
    try {
      // Over a real TLS connection, the body read from the socket after the scope was entered.
      const [url] = await t.app.listen();
      const port = Number(new URL(url!).port);
      const answers = await Promise.all([1, 2, 3].map(() => overTls(t, port, 'POST', '/log-probe', { body: { some: 'body' } })));
      const warnings = lines().filter((l) => l.msg === 'written by the core');
      expect(warnings.map((l) => l.requestId).sort()).toEqual(answers.map((a) => a.headers['x-request-id']).sort());
    } finally {
      await t.close();
    }
  });
  // The query may carry a token (POST /enroll?method=ott&token=…); Fastify's message named the whole URL.
  it.each([
    ['a malformed percent-encoding', `${CLIENT}/enroll/%ff?method=ott&token=the-secret-token`],
    ['a path segment over 500 characters', `${CLIENT}/sessions/${'a'.repeat(600)}?token=the-secret-token`],
  ])('a path with %s is a 400 whose answer and log hold no query', async (_what, url) => {
    const { t, lines } = await controller();
    try {
      const res = await t.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(400);
      expect(json(res).error.code).toBe('COULD_NOT_VALIDATE');
      expect(res.body).not.toContain('the-secret-token');
      expect(JSON.stringify(lines())).not.toContain('the-secret-token');
      expect(json(res).error.message).toContain(`${CLIENT}/`);
    } finally {
      await t.close();
    }
  });
});
