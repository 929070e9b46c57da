import { describe, expect, it } from 'vitest';
import { compileJsonSchema, dataProblem, JsonSchemaCompiler, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, SchemaProblem } from './json-schema.js';
import { HOST_V1, HOST_V2, INTERCEPT_V1, PROXY_V1, SEEDED_CONFIG_TYPES } from './config-type-schemas.js';

function problemOf(schema: unknown): string {
  try {
    compileJsonSchema(schema);
  } catch (err) {
    expect(err).toBeInstanceOf(SchemaProblem);
    return (err as SchemaProblem).reason;
  }
  throw new Error('the schema compiled');
}

function check(schema: unknown, data: unknown): ReturnType<typeof dataProblem> | undefined {
  const validate = compileJsonSchema(schema);
  return validate(data) ? undefined : dataProblem(validate.errors, 'data');
}

// Attacks that worked: one config write held the event loop, and every caller, for minutes.
describe('work bounded by the data', () => {
  it('patterns run in linear time: a pattern that backtracks exponentially in JavaScript answers at once', () => {
    const validate = compileJsonSchema({ type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } });
    expect(validate({ s: `${'a'.repeat(5000)}!` })).toBe(false);
    expect(validate({ s: 'a'.repeat(5000) })).toBe(true);
    // Each pattern is its own: two in one schema are not confused.
    const two = compileJsonSchema({ type: 'object', properties: { d: { type: 'string', pattern: '^[0-9]+$' }, w: { type: 'string', pattern: '^[a-z]+$' } } });
    expect([two({ d: '12', w: 'ab' }), two({ d: 'ab', w: 'ab' }), two({ d: '12', w: '12' })]).toEqual([true, false, false]);
  });

  it('patterns RE2 does not run (lookaround, backreferences) are refused with the schema', () => {
    for (const pattern of ['^(?=a)a$', '^(a)\\1$']) expect(problemOf({ type: 'string', pattern })).toMatch(/is not a regular expression RE2 runs/);
    expect(problemOf({ type: 'object', patternProperties: { '(?<!x)y': { type: 'number' } } })).toMatch(/RE2/);
  });

  it('uniqueItems compares items as JSON values, in linear time', () => {
    const validate = compileJsonSchema({ type: 'array', uniqueItems: true });
    expect(validate(Array.from({ length: 60_000 }, (_, i) => [i]))).toBe(true);
    expect(validate([{ a: 1, b: [2] }, { b: [2], a: 1 }])).toBe(false);
    expect(validate([1, 1.0])).toBe(false);
    expect(validate([1, '1', true, null, [1], { '1': 1 }])).toBe(true);
    expect(validate([[1], [1]])).toBe(false);
    expect(dataProblem(validate.errors, 'data')).toMatchObject({ field: 'data', reason: 'must not have duplicate items' });
    expect(compileJsonSchema({ type: 'array', uniqueItems: false })([1, 1])).toBe(true);
  });
});

describe('compileJsonSchema', () => {
  it('compiles draft-07 by default and the drafts $schema names', () => {
    expect(check({ type: 'integer' }, 1)).toBeUndefined();
    for (const $schema of [
      'http://json-schema.org/draft-07/schema#',
      'https://json-schema.org/draft-07/schema',
      'https://json-schema.org/draft/2019-09/schema',
      'https://json-schema.org/draft/2020-12/schema',
    ]) {
      expect(check({ $schema, type: 'string' }, 'x')).toBeUndefined();
      expect(check({ $schema, type: 'string' }, 1)?.reason).toBe('must be string');
    }
    // 2020-12 keywords mean what 2020-12 says.
    expect(check({ $schema: 'https://json-schema.org/draft/2020-12/schema', prefixItems: [{ type: 'string' }] }, [1])?.field).toBe('data[0]');
  });

  it('refuses what is not a usable schema, with a reason', () => {
    expect(problemOf(null)).toBe('must be an object');
    expect(problemOf([])).toBe('must be an object');
    expect(problemOf({ type: 'nothing' })).toMatch(/^\/type must be equal to one of the allowed values/);
    expect(problemOf({ required: 'a' })).toMatch(/^\/required must be array/);
    expect(problemOf({ $schema: 'http://json-schema.org/draft-04/schema#' })).toMatch(/not supported/);
    expect(problemOf({ $ref: '#/nowhere' })).toMatch(/can't resolve reference/);
    expect(problemOf({ pattern: '[' })).toMatch(/regular expression/i);
  });

  it('bounds the nesting depth', () => {
    const nest = (levels: number) => {
      let schema: Record<string, unknown> = { type: 'string' };
      for (let i = 1; i < levels; i++) schema = { items: schema };
      return schema;
    };
    expect(() => compileJsonSchema(nest(MAX_SCHEMA_DEPTH))).not.toThrow();
    expect(problemOf(nest(MAX_SCHEMA_DEPTH + 1))).toBe(`is nested deeper than ${MAX_SCHEMA_DEPTH} levels`);
  });

  it('bounds the size', () => {
    const wide = (count: number) => ({
      type: 'object',
      properties: Object.fromEntries(Array.from({ length: count }, (_, i) => [`p${i}`, { type: 'string' }])),
    });
    // 3 nodes around the properties, 2 per property.
    const fits = Math.floor((MAX_SCHEMA_NODES - 3) / 2);
    expect(compileJsonSchema(wide(fits))({ p0: 'x' })).toBe(true);
    expect(problemOf(wide(fits + 1))).toBe(`has more than ${MAX_SCHEMA_NODES} nodes`);
  });

  it('lets two schemas carry the same $id, on one compiler', () => {
    const compiler = new JsonSchemaCompiler();
    const a = compiler.compile({ $id: 'https://example.com/s.json', type: 'string' });
    const b = compiler.compile({ $id: 'https://example.com/s.json', type: 'integer' });
    expect([a('x'), a(1), b('x'), b(1)]).toEqual([true, false, false, true]);
    expect(() => compiler.compile({ type: 'nope' })).toThrow(SchemaProblem);
    expect(compiler.compile({ type: 'boolean' })(true)).toBe(true);
  });
});

describe('dataProblem', () => {
  it('names the path the way a client would, with the value', () => {
    const schema = {
      type: 'object',
      properties: { list: { type: 'array', items: { type: 'object', properties: { n: { type: 'integer', maximum: 3 } } } } },
    };
    expect(check(schema, { list: [{ n: 1 }, { n: 4 }] })).toEqual({ field: 'data.list[1].n', reason: 'must be <= 3', value: 4 });
    expect(check({ type: 'object' }, 'x')).toEqual({ field: 'data', reason: 'must be object', value: 'x' });
    expect(check({ properties: { 'a/b': { type: 'string' }, 'c~d': { type: 'string' } } }, { 'a/b': 1 })?.field).toBe('data.a/b');
    expect(check({ properties: { 'a/b': { type: 'string' }, 'c~d': { type: 'string' } } }, { 'c~d': 1 })?.field).toBe('data.c~d');
  });

  it('names the missing and the unexpected property', () => {
    expect(check({ required: ['x'] }, {})).toEqual({ field: 'data.x', reason: 'is required' });
    expect(check({ additionalProperties: false, properties: { a: {} } }, { a: 1, b: 2 })).toEqual({
      field: 'data.b',
      reason: 'is not a known property here',
    });
  });

  it('spells out enums and constants, and never echoes objects', () => {
    expect(check({ enum: ['a', 1] }, 'b')).toEqual({ field: 'data', reason: 'must be one of "a", 1', value: 'b' });
    expect(check({ const: true }, false)).toEqual({ field: 'data', reason: 'must be true', value: false });
    expect(check({ type: 'string' }, { big: 'object' })).toEqual({ field: 'data', reason: 'must be string' });
    const long = 'x'.repeat(300);
    expect((check({ type: 'integer' }, long)?.value as string).length).toBe(257);
  });

  it('reports a failed anyOf as a whole, with its description when there is one', () => {
    const described = { description: 'a port or a name', anyOf: [{ type: 'integer' }, { type: 'string', minLength: 1 }] };
    expect(check({ properties: { to: described } }, { to: '' })).toEqual({ field: 'data.to', reason: 'must be a port or a name', value: '' });
    const bare = { anyOf: [{ type: 'integer' }, { type: 'string' }] };
    expect(check(bare, true)).toEqual({ field: 'data', reason: 'matches none of the allowed shapes', value: true });
  });

  it('reports the failing branch of a conditional, not the conditional', () => {
    const schema = {
      if: { properties: { forward: { const: true } }, required: ['forward'] },
      then: { required: ['allowed'], properties: { fixed: false } },
      else: { required: ['fixed'] },
    };
    expect(check(schema, { forward: true })).toEqual({ field: 'data.allowed', reason: 'is required' });
    expect(check(schema, { forward: true, allowed: 1, fixed: 2 })).toEqual({ field: 'data.fixed', reason: 'is not allowed here', value: 2 });
    expect(check(schema, {})).toEqual({ field: 'data.fixed', reason: 'is required' });
  });

  it('falls back to the root when there is nothing to report', () => {
    expect(dataProblem(null, 'data')).toEqual({ field: 'data', reason: 'is invalid' });
  });
});

describe('seeded schemas', () => {
  it('compile, are draft-07 and closed at the top', () => {
    for (const seeded of SEEDED_CONFIG_TYPES) {
      expect(() => compileJsonSchema(seeded.schema)).not.toThrow();
      expect(seeded.id).toBe(seeded.name);
      expect(seeded.schema.additionalProperties).toBe(false);
    }
    expect([INTERCEPT_V1, HOST_V1, HOST_V2, PROXY_V1].map((s) => s.title)).toEqual(['intercept.v1', 'host.v1', 'host.v2', 'proxy.v1']);
  });

  it('accept the address forms of intercept.v1 and refuse others', () => {
    const addresses = (list: string[]) => check(INTERCEPT_V1, { protocols: ['tcp'], addresses: list, portRanges: [{ low: 1, high: 1 }] });
    for (const ok of ['example.com', 'localhost', '10.1.2.3', '10.0.0.0/8', '0.0.0.0/0', '*.example.com', '*.a-b.example', '::1', 'fd00::/64', '2001:db8::1']) {
      expect(addresses([ok]), ok).toBeUndefined();
    }
    for (const bad of ['', 'two words', '10.0.0.0/33', '300.1.1.1/8', '*example.com', 'a.*.com', '*.', '-leading.example.com', 'http://x']) {
      expect(addresses([bad])?.field, bad).toBe('data.addresses[0]');
    }
  });

  it('accept Go durations in host.v1 and refuse others', () => {
    const duration = (d: string) => check(HOST_V1, { protocol: 'tcp', address: 'h', port: 1, listenOptions: { connectTimeout: d } });
    for (const ok of ['0', '5s', '250ms', '1m30s', '1.5h', '100us', '10ns']) expect(duration(ok), ok).toBeUndefined();
    for (const bad of ['', '5', 's', '5 s', '-5s', '5sec', '1d']) expect(duration(bad)?.field, bad).toBe('data.listenOptions.connectTimeout');
  });
});
