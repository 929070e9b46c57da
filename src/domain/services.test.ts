import { describe, expect, it } from 'vitest';
import { ApiError } from '../errors.js';
import type { Entity } from '../store/repository.js';
import { ConfigValidators } from './services.js';

const type = (schema: unknown, updatedAt = '2026-01-01T00:00:00.000Z'): Entity =>
  ({ id: 't1', createdAt: updatedAt, updatedAt, tags: {}, name: 't1', schema, target: 'service' }) as Entity;

describe('ConfigValidators', () => {
  it('compiles a type once and reuses it while the schema is the same', () => {
    const validators = new ConfigValidators();
    const first = validators.for(type({ type: 'object', required: ['a'] }));
    expect(validators.for(type({ type: 'object', required: ['a'] }))).toBe(first);
    expect(first({})).toBe(false);
    expect(validators.size).toBe(1);
  });

  it('compiles again when the schema or updatedAt moved, even within one millisecond', () => {
    const validators = new ConfigValidators();
    const first = validators.for(type({ required: ['a'] }));
    const changed = validators.for(type({ required: ['b'] }));
    expect(changed).not.toBe(first);
    expect([changed({ a: 1 }), changed({ b: 1 })]).toEqual([false, true]);
    expect(validators.for(type({ required: ['b'] }, '2026-01-01T00:00:00.001Z'))).not.toBe(changed);
    expect(validators.size).toBe(1);
  });

  it('forgets a dropped type', () => {
    const validators = new ConfigValidators();
    validators.for(type({}));
    validators.drop('t1');
    expect(validators.size).toBe(0);
  });

  it('refuses a stored schema that does not compile, naming schema', () => {
    const validators = new ConfigValidators();
    try {
      validators.for(type({ type: 'nope' }));
      throw new Error('compiled');
    } catch (err) {
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).cause).toMatchObject({ field: 'schema' });
    }
  });
});
