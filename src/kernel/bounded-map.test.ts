import { describe, expect, it } from 'vitest';
import { BoundedMap } from './bounded-map.js';

describe('BoundedMap', () => {
  it('evicts the least recently used entry beyond its count', () => {
    const dropped: string[] = [];
    const map = new BoundedMap<string, number>({ maxEntries: 2, onDrop: (k) => dropped.push(k) });
    map.set('a', 1);
    map.set('b', 2);
    expect(map.get('a')).toBe(1); // a is now the most recently used
    map.set('c', 3);
    expect([...map.keys()]).toEqual(['a', 'c']);
    expect(dropped).toEqual(['b']);
    // peek does not count as a use
    expect(map.peek('a')).toBe(1);
    map.set('d', 4);
    expect([...map.keys()]).toEqual(['c', 'd']);
  });

  it('evicts by approximate bytes, and refuses an entry over the bound by itself', () => {
    const map = new BoundedMap<string, string>({ maxEntries: 100, maxBytes: 10, sizeOf: (v) => v.length });
    map.set('a', 'xxxx');
    map.set('b', 'yyyy');
    expect(map.bytes).toBe(8);
    map.set('c', 'zzzz');
    expect([...map.keys()]).toEqual(['b', 'c']);
    expect(map.bytes).toBe(8);
    expect(map.set('big', 'x'.repeat(11))).toBe(false);
    expect(map.has('big')).toBe(false);
    // replacing an entry counts its new size only
    map.set('b', 'y');
    expect(map.bytes).toBe(5);
  });

  it('keeps the entry just set when it alone fills the byte bound', () => {
    const dropped: string[] = [];
    const map = new BoundedMap<string, string>({ maxEntries: 1000, maxBytes: 640, sizeOf: (v) => v.length, onDrop: (k) => dropped.push(k) });
    map.set('a', 'x'.repeat(5));
    map.set('b', 'x'.repeat(630));
    map.set('c', 'x'.repeat(8));
    expect(dropped).toEqual(['a']);
    expect(map.bytes).toBe(638);
    expect(map.set('d', 'x'.repeat(640))).toBe(true);
    expect(dropped).toEqual(['a', 'b', 'c']);
    expect([...map.keys()]).toEqual(['d']);
    expect(map.bytes).toBe(640);
    // Replaced by a value over the bound by itself, the entry leaves, and is told of.
    expect(map.set('d', 'x'.repeat(641))).toBe(false);
    expect(dropped).toEqual(['a', 'b', 'c', 'd']);
    expect(map.size).toBe(0);
    expect(map.bytes).toBe(0);
  });

  it('orders, evicts and weighs exactly as a plain list of entries would, whatever the operations', () => {
    // A model: the entries in order of use, least recent first.
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const dropped: string[] = [];
    const map = new BoundedMap<string, number>({ maxEntries: 20, maxBytes: 150, sizeOf: (v) => v, onDrop: (k, v) => dropped.push(`${k}=${v}`) });
    let model: [string, number][] = [];
    const modelDropped: string[] = [];
    const evictModel = () => {
      while (model.length > 20 || model.reduce((n, [, v]) => n + v, 0) > 150) {
        const [k, v] = model.shift()!;
        modelDropped.push(`${k}=${v}`);
      }
    };
    for (let step = 0; step < 5000; step++) {
      const key = `k${random(30)}`;
      const at = model.findIndex(([k]) => k === key);
      const op = random(10);
      if (op < 4) {
        const value = random(12);
        map.set(key, value);
        if (at >= 0) {
          const [, was] = model.splice(at, 1)[0]!;
          if (was !== value) modelDropped.push(`${key}=${was}`);
        }
        model.push([key, value]);
        evictModel();
      } else if (op < 8) {
        expect(map.get(key)).toBe(at >= 0 ? model[at]![1] : undefined);
        if (at >= 0) model.push(model.splice(at, 1)[0]!);
      } else if (op < 9) {
        expect(map.delete(key)).toBe(at >= 0);
        if (at >= 0) modelDropped.push(`${key}=${model.splice(at, 1)[0]![1]}`);
      } else {
        expect(map.peek(key)).toBe(at >= 0 ? model[at]![1] : undefined);
      }
      if (step % 1000 === 999) {
        map.deleteWhere((v) => v % 3 === 0);
        for (const [k, v] of model.filter(([, v]) => v % 3 === 0)) modelDropped.push(`${k}=${v}`);
        model = model.filter(([, v]) => v % 3 !== 0);
      }
      expect([...map.entries()]).toEqual(model);
      expect(map.bytes).toBe(model.reduce((n, [, v]) => n + v, 0));
    }
    expect(dropped).toEqual(modelDropped);
    expect(dropped.length).toBeGreaterThan(1000);
  });

  it('tells of every entry that leaves: replaced, deleted, cleared', () => {
    const dropped: string[] = [];
    const map = new BoundedMap<string, number>({ maxEntries: 10, onDrop: (k, v) => dropped.push(`${k}=${v}`) });
    map.set('a', 1);
    map.set('a', 2);
    map.set('b', 3);
    map.delete('b');
    map.set('c', 4);
    map.clear();
    expect(dropped).toEqual(['a=1', 'b=3', 'a=2', 'c=4']);
    expect(map.size).toBe(0);
  });

  it('does not keep what was read before a delete or clear (even of a key it did not hold)', () => {
    const map = new BoundedMap<string, number>({ maxEntries: 10 });
    let seen = map.drops;
    map.delete('x');
    expect(map.setIfUnchanged('x', 1, seen)).toBe(false);
    seen = map.drops;
    expect(map.setIfUnchanged('x', 2, seen)).toBe(true);
    seen = map.drops;
    map.set('y', 1); // adding and evicting are no drops
    expect(map.setIfUnchanged('z', 3, seen)).toBe(true);
    map.clear();
    expect(map.setIfUnchanged('z', 4, seen)).toBe(false);
  });

  it('walks on past entries deleted during the walk, the one given or a later one', () => {
    const map = new BoundedMap<string, number>({ maxEntries: 10 });
    for (const [k, v] of [['a', 1], ['b', 2], ['c', 3], ['d', 4]] as const) map.set(k, v);
    const seen: string[] = [];
    for (const [k] of map.entries()) {
      seen.push(k);
      if (k === 'a') map.delete('a');
      if (k === 'b') map.delete('c');
    }
    expect(seen).toEqual(['a', 'b', 'd']);
    expect([...map.keys()]).toEqual(['b', 'd']);
  });

  it('deletes what a test picks', () => {
    const map = new BoundedMap<string, number>({ maxEntries: 10 });
    for (const [k, v] of [['a', 1], ['b', 2], ['c', 3]] as const) map.set(k, v);
    map.deleteWhere((v) => v % 2 === 1);
    expect([...map.entries()]).toEqual([['b', 2]]);
  });

  it('counts lookups through get as hits and misses; peek and has count none', () => {
    const map = new BoundedMap<string, number>({ maxEntries: 1 });
    map.set('a', 1);
    map.get('a');
    map.get('b');
    map.peek('a');
    map.has('b');
    map.set('b', 2); // evicts a
    map.get('a');
    expect(map.lookups).toEqual({ hits: 1, misses: 2 });
  });
});
