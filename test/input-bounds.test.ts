// Input bounds no schema expresses (behaviour.md §1), through the Management API: open objects nest
// at most 32 levels (deeper ones once answered 500), object keys are 1–256 characters, and no string
// or key holds an unpaired UTF-16 surrogate (two names differing only there read back the same);
// each refusal is a 400 naming the field, and values at the bounds are kept as sent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inputIssue } from '../src/http/input-bounds.js';
import { MAX_KEY, MAX_NESTING } from '../src/resources/kit.js';
import { ADMIN_ENV, asAdmin, call, expectError, json, MGMT, startTestController, type TestController } from './helpers.js';

let t: TestController;
let admin: string;
let freeType: string;
let n = 0;

/** A JSON text of `levels` objects nested in one another around the number 1. */
const nested = (levels: number) => '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);
/** The same, as a value. */
const nestedValue = (levels: number): unknown => JSON.parse(nested(levels));
const unique = (prefix: string) => `${prefix}-${++n}`;

/** A request with a JSON text as its body, sent as it is. */
function send(method: 'POST' | 'PUT' | 'PATCH', url: string, text: string) {
  return t.inject({ method, url, headers: { 'overlay-session': admin, 'content-type': 'application/json' }, payload: text });
}

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  admin = await asAdmin(t);
  freeType = json(await call(t, 'POST', `${MGMT}/config-types`, { token: admin, body: { name: 'free-form' } })).data.id as string;
});
afterAll(async () => {
  await t.close();
});

describe('open objects nest at most 32 levels', () => {
  it('an identity appData nested 5,000 levels is a 400 naming appData, on create and on patch', async () => {
    const text = `{"name":"${unique('deep')}","type":"User","isAdmin":false,"appData":${nested(5000)}}`;
    expectError(await send('POST', `${MGMT}/identities`, text), 400, 'COULD_NOT_VALIDATE', 'appData');
    const id = json(await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: unique('shallow'), type: 'User', isAdmin: false } })).data.id;
    expectError(await send('PATCH', `${MGMT}/identities/${id}`, `{"appData":${nested(5000)}}`), 400, 'COULD_NOT_VALIDATE', 'appData');
  });

  it('a config data nested 50,000 levels is a 400 naming data', async () => {
    const text = `{"name":"${unique('deep')}","configTypeId":"${freeType}","data":${nested(50_000)}}`;
    const res = await send('POST', `${MGMT}/configs`, text);
    const body = expectError(res, 400, 'COULD_NOT_VALIDATE', 'data');
    expect(body.error.cause.reason).toBe(`nests deeper than ${MAX_NESTING} levels`);
  });

  it('a config type schema, an edge router appData and tags are bounded the same way', async () => {
    const schema = '{"properties":'.repeat(40) + '{}' + '}'.repeat(40);
    expectError(await send('POST', `${MGMT}/config-types`, `{"name":"${unique('ct')}","schema":${schema}}`), 400, 'COULD_NOT_VALIDATE', 'schema');
    expectError(await send('POST', `${MGMT}/edge-routers`, `{"name":"${unique('er')}","appData":${nested(5000)}}`), 400, 'COULD_NOT_VALIDATE', 'appData');
    expectError(await send('POST', `${MGMT}/services`, `{"name":"${unique('svc')}","tags":${nested(40)}}`), 400, 'COULD_NOT_VALIDATE', 'tags');
  });

  it('holds for fields no schema reads: a fixed field sent again on update', async () => {
    const id = json(await call(t, 'POST', `${MGMT}/configs`, { token: admin, body: { name: unique('cfg'), configTypeId: freeType, data: { a: 1 } } })).data.id;
    expectError(await send('PUT', `${MGMT}/configs/${id}`, `{"name":"kept","data":{},"configTypeId":${nested(5000)}}`), 400, 'COULD_NOT_VALIDATE', 'configTypeId');
  });

  it('names the element of a list body', async () => {
    const text = `[{"serviceId":"s","configId":"c","extra":${nested(100)}}]`;
    const id = json(await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name: unique('lister'), type: 'User', isAdmin: false } })).data.id;
    expectError(await send('POST', `${MGMT}/identities/${id}/service-configs`, text), 400, 'COULD_NOT_VALIDATE', '[0].extra');
  });

  it('32 levels are kept as sent; 33 are not', async () => {
    const ok = await call(t, 'POST', `${MGMT}/identities`, {
      token: admin,
      body: { name: unique('at-bound'), type: 'User', isAdmin: false, appData: nestedValue(MAX_NESTING) },
    });
    expect(ok.statusCode, ok.body).toBe(201);
    const read = json(await call(t, 'GET', `${MGMT}/identities/${json(ok).data.id}`, { token: admin })).data;
    expect(read.appData).toEqual(nestedValue(MAX_NESTING));
    const cfg = await call(t, 'POST', `${MGMT}/configs`, { token: admin, body: { name: unique('cfg'), configTypeId: freeType, data: nestedValue(MAX_NESTING) } });
    expect(cfg.statusCode, cfg.body).toBe(201);
    const over = { name: unique('over'), type: 'User', isAdmin: false, appData: nestedValue(MAX_NESTING + 1) };
    expectError(await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: over }), 400, 'COULD_NOT_VALIDATE', 'appData');
    const deepArray = { name: unique('over'), type: 'User', isAdmin: false, appData: { a: JSON.parse('['.repeat(MAX_NESTING) + ']'.repeat(MAX_NESTING)) } };
    expectError(await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: deepArray }), 400, 'COULD_NOT_VALIDATE', 'appData');
  });
});

describe('object keys are 1 to 256 characters', () => {
  const long = 'k'.repeat(MAX_KEY + 1);

  it('refuses a longer or empty key in tags, appData (at any depth) and service hosting maps, naming the object', async () => {
    const identity = (extra: Record<string, unknown>) => ({ name: unique('keys'), type: 'User', isAdmin: false, ...extra });
    for (const [body, field] of [
      [identity({ tags: { [long]: 'x' } }), 'tags'],
      [identity({ appData: { [long]: 1 } }), 'appData'],
      [identity({ appData: { outer: { [long]: 1 } } }), 'appData.outer'],
      [identity({ appData: { '': 1 } }), 'appData'],
      [identity({ serviceHostingCosts: { [long]: 1 } }), 'serviceHostingCosts'],
      [identity({ serviceHostingPrecedences: { [long]: 'required' } }), 'serviceHostingPrecedences'],
    ] as const) {
      const res = await call(t, 'POST', `${MGMT}/identities`, { token: admin, body });
      const answer = expectError(res, 400, 'COULD_NOT_VALIDATE', field);
      expect(answer.error.cause.reason).toBe(`has a key that is not 1 to ${MAX_KEY} characters long`);
    }
    const config = { name: unique('cfg'), configTypeId: freeType, data: { [long]: 1 } };
    expectError(await call(t, 'POST', `${MGMT}/configs`, { token: admin, body: config }), 400, 'COULD_NOT_VALIDATE', 'data');
  });

  it('keeps a key of 256 characters, counted in characters, not UTF-16 units', async () => {
    const key = 'k'.repeat(MAX_KEY);
    const emoji = '😀'.repeat(MAX_KEY);
    const res = await call(t, 'POST', `${MGMT}/identities`, {
      token: admin,
      body: { name: unique('keys-ok'), type: 'User', isAdmin: false, tags: { [key]: true }, appData: { [emoji]: 1 } },
    });
    expect(res.statusCode, res.body).toBe(201);
    const read = json(await call(t, 'GET', `${MGMT}/identities/${json(res).data.id}`, { token: admin })).data;
    expect(read.tags).toEqual({ [key]: true });
    expect(read.appData).toEqual({ [emoji]: 1 });
  });
});

describe('strings hold no unpaired surrogate', () => {
  it('two names differing only in a lone surrogate are both refused, naming the field', async () => {
    const base = unique('twin');
    for (const lone of ['\\ud800', '\\udc00', '\\udbff']) {
      const text = `{"name":"${base}${lone}","type":"User","isAdmin":false}`;
      expectError(await send('POST', `${MGMT}/identities`, text), 400, 'COULD_NOT_VALIDATE', 'name');
    }
    const names = json(await call(t, 'GET', `${MGMT}/identities?limit=500`, { token: admin })).data.map((i: { name: string }) => i.name);
    expect(names.filter((name: string) => name.startsWith(base))).toEqual([]);
  });

  it('is refused anywhere in a body: nested strings, list items, keys', async () => {
    const identity = (extra: string) => `{"name":"${unique('lone')}","type":"User","isAdmin":false,${extra}}`;
    for (const [text, field] of [
      [identity('"appData":{"a":{"b":"x\\udfff"}}'), 'appData.a.b'],
      [identity('"roleAttributes":["ok","\\ud83d"]'), 'roleAttributes[1]'],
      [identity('"tags":{"t":"\\ud83d!"}'), 'tags.t'],
      [identity('"appData":{"k\\ud800":1}'), 'appData'],
    ] as const) {
      const res = await send('POST', `${MGMT}/identities`, text);
      const answer = expectError(res, 400, 'COULD_NOT_VALIDATE', field);
      expect(answer.error.cause.value).toBeUndefined();
    }
  });

  it('keeps well-formed pairs as sent', async () => {
    const name = `${unique('pair')}-😀-𝄞`;
    const res = await call(t, 'POST', `${MGMT}/identities`, { token: admin, body: { name, type: 'User', isAdmin: false } });
    expect(res.statusCode, res.body).toBe(201);
    expect(json(await call(t, 'GET', `${MGMT}/identities/${json(res).data.id}`, { token: admin })).data.name).toBe(name);
  });
});

describe('the walk', () => {
  it('does not recurse: a list nested 200,000 levels is answered at once', () => {
    const levels = 200_000;
    const value = JSON.parse('['.repeat(levels) + ']'.repeat(levels));
    expect(inputIssue({ field: value })).toMatchObject({ keyword: 'maxNesting', instancePath: '/field' });
  });

  it('skips key bounds where asked (query strings), never the surrogate check', () => {
    expect(inputIssue({ '': 'x' }, { keys: false })).toBeUndefined();
    expect(inputIssue({ filter: 'a\ud800' }, { keys: false })).toMatchObject({ keyword: 'unpairedSurrogate', instancePath: '/filter' });
  });
});

describe('a choice among fixed values', () => {
  it('is refused naming the values it takes, not "must be equal to constant"', async () => {
    const res = await call(t, 'POST', `${MGMT}/revocations`, { token: admin, body: { id: unique('choice'), type: 'Foo' } });
    const body = expectError(res, 400, 'COULD_NOT_VALIDATE', 'type');
    expect(body.error.cause).toMatchObject({ reason: 'must be one of JTI, IDENTITY, API_SESSION', value: 'Foo' });
  });
});

describe('keys that could change the objects built from a body', () => {
  // Refused, as Fastify's parser refuses them, but named as a field problem: the body is valid JSON.
  it('a key named __proto__ is a 400 COULD_NOT_VALIDATE naming the object that holds it', async () => {
    const res = await send('POST', `${MGMT}/services`, `{"name":"${unique('proto')}","tags":{"__proto__":"x"}}`);
    expectError(res, 400, 'COULD_NOT_VALIDATE', 'tags');
    expect(json(res).error.message).toMatch(/__proto__/);
    expectError(await send('POST', `${MGMT}/services`, `{"__proto__":{"isAdmin":true},"name":"${unique('proto')}"}`), 400, 'COULD_NOT_VALIDATE', 'body');
  });

  it('a constructor key holding a prototype is refused the same way, at any depth; a plain constructor key is kept', async () => {
    const text = `{"name":"${unique('ctor')}","type":"User","isAdmin":false,"appData":{"a":[{"constructor":{"prototype":{}}}]}}`;
    const res = await send('POST', `${MGMT}/identities`, text);
    expectError(res, 400, 'COULD_NOT_VALIDATE', 'appData.a[0]');
    expect(json(res).error.message).toMatch(/constructor/);
    expect((await send('POST', `${MGMT}/services`, `{"name":"${unique('ctor')}","tags":{"constructor":"x"}}`)).statusCode).toBe(201);
  });

  it('a body that is not JSON is still COULD_NOT_PARSE_BODY', async () => {
    expectError(await send('POST', `${MGMT}/services`, '{"__proto__":'), 400, 'COULD_NOT_PARSE_BODY');
  });
});
