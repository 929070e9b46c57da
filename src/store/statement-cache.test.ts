import { describe, expect, it } from 'vitest';
import { withStatementCache } from './sqlite.js';

/** A connection that counts how often each text is prepared; a statement is its text and count. */
function counting() {
  const prepared = new Map<string, number>();
  let closed = false;
  return {
    prepared,
    get closed() {
      return closed;
    },
    prepare(sqlText: string) {
      const n = (prepared.get(sqlText) ?? 0) + 1;
      prepared.set(sqlText, n);
      return `${sqlText}#${n}`;
    },
    close() {
      closed = true;
    },
  };
}

describe('the statement cache', () => {
  it('prepares a text once while it is kept, and again once it has gone', () => {
    const db = counting();
    const cache = withStatementCache(db, 4);
    expect(cache.prepare('a')).toBe('a#1');
    expect(cache.prepare('a')).toBe('a#1');
    for (const t of ['b', 'c', 'd', 'e']) cache.prepare(t);
    // Four others came after it and it was not used again: it went first.
    expect(cache.prepare('a')).toBe('a#2');
    expect(cache.prepare('e')).toBe('e#1');
  });

  it('keeps a statement used once in every half of its bound, however many others pass', () => {
    const db = counting();
    const cache = withStatementCache(db, 8);
    cache.prepare('hot');
    for (let i = 0; i < 1_000; i++) {
      cache.prepare(`cold ${i}`);
      if (i % 4 === 3) expect(cache.prepare('hot')).toBe('hot#1');
    }
    expect(db.prepared.get('hot')).toBe(1);
    // The cold ones stay within the bound: the oldest of them were prepared again when asked.
    expect(cache.prepare('cold 0')).toBe('cold 0#2');
    expect(cache.prepare('cold 999')).toBe('cold 999#1');
  });

  it('drops the least recently used first, a use in the older half counting as one', () => {
    const db = counting();
    const cache = withStatementCache(db, 4);
    for (const t of ['a', 'b', 'c', 'd']) cache.prepare(t);
    // a is in the older half now: this use moves it to the newest end, so b goes next.
    cache.prepare('a');
    cache.prepare('e');
    expect(cache.prepare('a')).toBe('a#1');
    expect(cache.prepare('c')).toBe('c#1');
    expect(cache.prepare('b')).toBe('b#2');
  });

  it('closes the connection', () => {
    const db = counting();
    withStatementCache(db, 4).close();
    expect(db.closed).toBe(true);
  });
});
