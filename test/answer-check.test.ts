// The answer check of the tests (AppOptions.checkAnswers): an Edge API answer is held to the response
// schema its route declares, so a field the serializer would silently drop, a required one missing or
// a value of another type fails loudly instead of reaching a client changed.
import Fastify, { type FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerCheck } from '../src/http/answer-check.js';

const Answer = Type.Object({
  data: Type.Object({
    name: Type.String(),
    note: Type.Union([Type.String(), Type.Null()]),
    tags: Type.Record(Type.String(), Type.Union([Type.String(), Type.Boolean(), Type.Null()])),
    open: Type.Object({}, { additionalProperties: true }),
    items: Type.Array(Type.Object({ id: Type.String() })),
  }),
});

const GOOD = { name: 'n', note: null, tags: { a: 'x', b: true }, open: { anything: [1] }, items: [{ id: '1' }] };

function server(checked: boolean, answer: unknown): FastifyInstance {
  const app = Fastify();
  const check = checked ? answerCheck() : undefined;
  if (check) {
    app.addHook('preSerialization', async (request, reply, payload) => {
      check(request, reply, payload);
      return payload;
    });
  }
  app.get('/answer', { schema: { response: { 200: Answer } } }, async () => answer);
  app.get('/unchecked', async () => ({ whatever: 1 }));
  return app;
}

describe('with the check', () => {
  it('lets an answer that is exactly its schema through, and routes without a schema', async () => {
    const res = await server(true, { data: GOOD }).inject({ method: 'GET', url: '/answer' });
    expect(res.statusCode, res.body).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ data: GOOD });
    expect((await server(true, {}).inject({ method: 'GET', url: '/unchecked' })).statusCode).toBe(200);
  });

  it.each([
    ['an undeclared field', { data: { ...GOOD, extra: 1 } }, '/data/extra'],
    ['an undeclared field in a list item', { data: { ...GOOD, items: [{ id: '1', secret: 'x' }] } }, '/data/items/0/secret'],
    ['a missing required field', { data: { ...GOOD, name: undefined } }, 'name'],
    ['a value of another type', { data: { ...GOOD, name: 7 } }, '/data/name'],
    ['null where null is not a value', { data: { ...GOOD, items: null } }, '/data/items'],
  ])('fails the request on %s', async (_what, answer, where) => {
    const res = await server(true, answer).inject({ method: 'GET', url: '/answer' });
    expect(res.statusCode).toBe(500);
    expect(res.body).toContain(where);
  });
});

describe('without the check (a controller in service)', () => {
  let app: FastifyInstance;
  beforeAll(() => {
    app = server(false, { data: { ...GOOD, extra: 1 } });
  });
  afterAll(async () => {
    await app.close();
  });

  it('the serializer drops an undeclared field silently: what the check is for', async () => {
    const res = await app.inject({ method: 'GET', url: '/answer' });
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body).data.extra).toBeUndefined();
  });
});
