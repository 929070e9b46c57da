// An empty body is no body, whatever its content type: clients generated from the established
// controller's documents send `Content-Type: application/json` with nothing after it on every DELETE
// and on POSTs without a body (logout, enable). Routes without a body work for them on both Edge APIs;
// routes that need one answer the schema's 400 naming `body`, never a 5xx nor a parse error.
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Network, type Person } from './fixtures/network.js';
import { ADMIN_ENV, asAdmin, CLIENT, expectError, json, MGMT, startTestController, type TestController } from './helpers.js';

let t: TestController;
let net: Network;
let alice: Person;
const ids: Record<string, string> = {};

/** The empty bodies such clients send: nothing, or only white space, under a JSON content type. */
const EMPTY_BODIES = ['', ' \r\n\t'];

function send(method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, token: string | undefined, payload: string, type = 'application/json') {
  const headers: Record<string, string> = { 'content-type': type };
  if (token !== undefined) headers['overlay-session'] = token;
  return t.inject({ method, url, headers, payload });
}

function expectOk(res: LightMyRequestResponse, what: string): void {
  expect(res.statusCode, `${what}: ${res.body}`).toBe(200);
  expect(json(res)).toMatchObject({ data: {}, meta: { apiVersion: expect.any(String) } });
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  net = new Network(t, await asAdmin(t));
  alice = await net.person('alice', ['eng']);
  ids.web = await net.service('web', ['web']);
  ids.router = await net.edgeRouter('er-1', ['public']);
  await net.openRouters(['#eng']);
  await net.servicePolicy('Dial', ['#eng'], ['#web']);
});
afterAll(async () => {
  await t.close();
});

describe.each(EMPTY_BODIES.map((body) => [JSON.stringify(body), body] as const))('an empty JSON body (%s)', (_label, body) => {
  it('logs out on both APIs (DELETE /current-api-session)', async () => {
    for (const api of [CLIENT, MGMT]) {
      const token = await net.login(alice);
      expectOk(await send('DELETE', `${api}/current-api-session`, token, body), `${api} logout`);
      expect((await t.inject({ method: 'GET', url: `${api}/current-api-session`, headers: { 'overlay-session': token } })).statusCode).toBe(401);
    }
  });

  it('deletes a session on the Client API and on the Management API', async () => {
    const token = await net.login(alice);
    const create = async () => {
      const res = await t.inject({ method: 'POST', url: `${CLIENT}/sessions`, headers: { 'overlay-session': token }, payload: { serviceId: ids.web } });
      expect(res.statusCode, res.body).toBe(201);
      return json(res).data.id as string;
    };
    const own = await create();
    expectOk(await send('DELETE', `${CLIENT}/sessions/${own}`, token, body), 'client delete');
    const other = await create();
    expectOk(await send('DELETE', `${MGMT}/sessions/${other}`, net.admin, body), 'management delete');
    for (const id of [own, other]) expectError(await send('DELETE', `${MGMT}/sessions/${id}`, net.admin, body), 404, 'NOT_FOUND');
  });

  it('deletes an entity through the generic route and clears service configs', async () => {
    const id = await net.service(`gone-${body.length}`);
    expectOk(await send('DELETE', `${MGMT}/services/${id}`, net.admin, body), 'delete service');
    expectError(await send('DELETE', `${MGMT}/services/${id}`, net.admin, body), 404, 'NOT_FOUND');
    expectOk(await send('DELETE', `${MGMT}/identities/${alice.id}/service-configs`, net.admin, body), 'disassociate');
  });

  it('enables an identity (POST without a body)', async () => {
    const res = await t.inject({
      method: 'POST',
      url: `${MGMT}/identities/${alice.id}/disable`,
      headers: { 'overlay-session': net.admin },
      payload: { durationMinutes: 0 },
    });
    expect(res.statusCode, res.body).toBe(200);
    expectOk(await send('POST', `${MGMT}/identities/${alice.id}/enable`, net.admin, body), 'enable');
    await net.login(alice);
  });

  it('is no body for authenticate: a password login asks for its fields, a certificate login for a certificate', async () => {
    for (const api of [CLIENT, MGMT]) {
      expectError(await send('POST', `${api}/authenticate?method=password`, undefined, body), 400, 'COULD_NOT_VALIDATE', 'username');
      expectError(await send('POST', `${api}/authenticate?method=cert`, undefined, body), 401, 'INVALID_AUTH');
    }
  });

  it('is refused with 400 naming the body where a route needs one, on both APIs', async () => {
    const token = await net.login(alice);
    const cases: [string, 'POST' | 'PUT' | 'PATCH' | 'DELETE', string, string][] = [
      [net.admin, 'POST', `${MGMT}/identities`, 'create'],
      [net.admin, 'PUT', `${MGMT}/services/${ids.web}`, 'full update'],
      [net.admin, 'PATCH', `${MGMT}/services/${ids.web}`, 'patch'],
      [net.admin, 'POST', `${MGMT}/identities/${alice.id}/disable`, 'disable'],
      [net.admin, 'POST', `${MGMT}/identities/${alice.id}/service-configs`, 'associate'],
      [net.admin, 'PATCH', `${CLIENT}/services/${ids.web}`, 'client patch'],
      [token, 'POST', `${CLIENT}/sessions`, 'create session'],
      [token, 'POST', `${CLIENT}/posture-response`, 'posture response'],
      [token, 'POST', `${CLIENT}/posture-response-bulk`, 'posture responses'],
    ];
    for (const [caller, method, url, what] of cases) {
      const res = await send(method, url, caller, body);
      expect(res.statusCode, `${what}: ${res.body}`).toBe(400);
      expect(json(res).error, what).toMatchObject({ code: 'COULD_NOT_VALIDATE', cause: { field: 'body' } });
    }
  });
});

describe('what is not empty', () => {
  it('a body that is not JSON is still 400 COULD_NOT_PARSE_BODY, on DELETE and POST', async () => {
    expectError(await send('DELETE', `${MGMT}/identities/${alice.id}/service-configs`, net.admin, '[{'), 400, 'COULD_NOT_PARSE_BODY');
    expectError(await send('POST', `${MGMT}/identities/${alice.id}/enable`, net.admin, 'nope'), 400, 'COULD_NOT_PARSE_BODY');
    expectError(await send('POST', `${CLIENT}/sessions`, await net.login(alice), '{"serviceId":'), 400, 'COULD_NOT_PARSE_BODY');
  });

  it('a JSON body still guards against prototype poisoning', async () => {
    const res = await send('POST', `${MGMT}/identities`, net.admin, '{"name":"p","type":"User","isAdmin":false,"__proto__":{"isAdmin":true}}');
    expectError(res, 400, 'COULD_NOT_VALIDATE', 'body');
  });

  it('a POST without any content type and without a body is no body as well', async () => {
    const token = await net.login(alice);
    const res = await t.inject({ method: 'POST', url: `${CLIENT}/sessions`, headers: { 'overlay-session': token } });
    expect(json(res).error).toMatchObject({ code: 'COULD_NOT_VALIDATE', cause: { field: 'body' } });
    const enable = await t.inject({ method: 'POST', url: `${MGMT}/identities/${alice.id}/enable`, headers: { 'overlay-session': net.admin } });
    expectOk(enable, 'enable without a body');
  });
});
