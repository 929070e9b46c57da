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

  it('once over a bound of 64 or more, drops the oldest down to a 64th below it, in order', () => {
    const dropped: string[] = [];
    const map = new BoundedMap<string, number>({ maxEntries: 128, onDrop: (k) => dropped.push(k) });
    for (let i = 0; i < 128; i++) map.set(`k${i}`, i);
    expect(dropped).toEqual([]);
    map.get('k0'); // used now: no longer among the oldest
    map.set('k128', 128);
    expect(dropped).toEqual(['k1', 'k2', 'k3']);
    expect(map.size).toBe(126);
    expect([...map.keys()].slice(-2)).toEqual(['k0', 'k128']);
    map.set('k129', 129);
    map.set('k130', 130);
    expect(map.size).toBe(128);
    expect(dropped).toHaveLength(3);
  });

  it('drops by bytes down to a 64th below the bound too, but never the entry just set', () => {
    const dropped: string[] = [];
    const map = new BoundedMap<string, string>({ maxEntries: 1000, maxBytes: 640, sizeOf: (v) => v.length, onDrop: (k) => dropped.push(k) });
    map.set('a', 'x'.repeat(5));
    map.set('b', 'x'.repeat(630));
    expect(map.bytes).toBe(635);
    map.set('c', 'x'.repeat(8));
    // Without a, 638 bytes are within the bound, but not below 630: b goes too.
    expect(dropped).toEqual(['a', 'b']);
    expect(map.bytes).toBe(8);
    // Over what the map drops down to (630) by itself, yet within the bound: kept, alone.
    expect(map.set('d', 'x'.repeat(640))).toBe(true);
    expect([...map.keys()]).toEqual(['d']);
    expect(map.bytes).toBe(640);
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
