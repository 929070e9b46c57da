// Unit tests of the bounded store of pending authorization requests, with an injected clock: the
// bound per address, the totals (count and bytes) and who gives way at them, expiry, growth, and the
// address a request is charged to.
import { describe, expect, it } from 'vitest';
import { addressKey } from '../ipv6.js';
import { PendingRefused, PendingStore, PENDING_LIMITS, type PendingLimits } from './pending.js';
import { AuthRequests, REQUEST_LIFETIME_MS } from './flow.js';
import { OAuthError } from './errors.js';

const LIFETIME = 60_000;

function store(limits: Partial<PendingLimits> = {}, start = 1_000_000) {
  let now = start;
  const pending = new PendingStore<string>(() => now, { perAddress: 3, total: 6, totalBytes: 1_000_000, ...limits });
  let n = 0;
  const add = (address: string, bytes = 10): string => {
    const id = `r${++n}`;
    pending.add(id, address, `value of ${id}`, bytes, now + LIFETIME);
    return id;
  };
  return {
    pending,
    add,
    advance: (ms: number) => (now += ms),
    set: (ms: number) => (now = ms),
  };
}

function refusal(fn: () => unknown): PendingRefused {
  try {
    fn();
  } catch (err) {
    if (err instanceof PendingRefused) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('the bound per address', () => {
  it('refuses the request beyond it, with the seconds until the oldest of the address expires', () => {
    const s = store();
    s.add('a');
    s.advance(10_000);
    s.add('a');
    s.add('a');
    const refused = refusal(() => s.add('a'));
    expect(refused.reason).toBe('address');
    expect([refused.name, refused.message]).toEqual(['PendingRefused', 'too many pending requests from this address']);
    // The oldest was added 10 s ago with a 60 s lifetime.
    expect(refused.retryAfterSeconds).toBe(50);
    expect(s.pending.heldBy('a')).toBe(3);
    expect(s.pending.size).toBe(3);
    // Another address is not affected.
    s.add('b');
    expect(s.pending.heldBy('b')).toBe(1);
  });

  it('rounds Retry-After up, and never answers less than one second', () => {
    const s = store();
    for (let i = 0; i < 3; i++) s.add('a');
    s.advance(LIFETIME - 1_500);
    expect(refusal(() => s.add('a')).retryAfterSeconds).toBe(2);
    s.advance(1_499);
    expect(refusal(() => s.add('a')).retryAfterSeconds).toBe(1);
  });

  it('frees a place when a request ends', () => {
    const s = store();
    const first = s.add('a');
    s.add('a');
    s.add('a');
    s.pending.delete(first);
    expect(s.pending.heldBy('a')).toBe(2);
    s.add('a');
    expect(s.pending.heldBy('a')).toBe(3);
    expect(s.pending.get(first)).toBeUndefined();
    s.pending.delete('unknown');
    expect(s.pending.size).toBe(3);
  });
});

describe('the total count', () => {
  it('is made room for at the expense of the address holding the most, its oldest first', () => {
    const s = store();
    const a = [s.add('a'), s.add('a'), s.add('a')];
    const b = [s.add('b'), s.add('b')];
    s.add('c');
    expect(s.pending.size).toBe(6);
    // A newcomer evicts the oldest request of `a` (3), not one of `b` (2) or `c` (1).
    const d = s.add('d');
    expect(s.pending.get(a[0]!)).toBeUndefined();
    expect(s.pending.get(a[1]!)).toBeDefined();
    expect(s.pending.get(d)).toBeDefined();
    expect(s.pending.size).toBe(6);
    expect(s.pending.heldBy('a')).toBe(2);
    // Now `a` and `b` hold 2 each: the one that reached 2 first gives way.
    s.add('e');
    expect(b.map((id) => s.pending.get(id) !== undefined)).toEqual([false, true]);
    expect(s.pending.heldBy('b')).toBe(1);
    expect(s.pending.heldBy('a')).toBe(2);
  });

  it('refuses the address holding the most, and one holding as many as any other', () => {
    const s = store();
    s.add('a');
    s.add('a');
    s.add('a');
    s.add('b');
    s.add('b');
    s.add('c');
    // `a` holds the most: its own request is refused, nothing is evicted.
    const refused = refusal(() => s.add('a'));
    expect(refused.reason).toBe('address');
    const s2 = store({ perAddress: 5 });
    for (let i = 0; i < 3; i++) s2.add('a');
    for (let i = 0; i < 3; i++) s2.add('b');
    s2.advance(5_000);
    const tie = refusal(() => s2.add('a'));
    expect(tie.reason).toBe('total');
    expect(tie.message).toBe('too many pending requests');
    expect(tie.retryAfterSeconds).toBe(55);
    expect(s2.pending.size).toBe(6);
    expect(s2.pending.heldBy('b')).toBe(3);
  });

  it('an address the eviction brought down to the most held by another is refused too', () => {
    const s = store({ perAddress: 5, total: 5 });
    for (let i = 0; i < 3; i++) s.add('a');
    s.add('b');
    s.add('b');
    // b (2) < a (3): a gives way.
    s.add('b');
    expect(s.pending.heldBy('a')).toBe(2);
    expect(s.pending.heldBy('b')).toBe(3);
    // Now b holds the most.
    expect(refusal(() => s.add('b')).reason).toBe('total');
    expect(s.pending.heldBy('a')).toBe(2);
  });
});

describe('the total bytes', () => {
  it('are made room for like the count, as many requests of the heaviest address as needed', () => {
    const s = store({ perAddress: 10, total: 100, totalBytes: 1_000 });
    const a = [s.add('a', 300), s.add('a', 300), s.add('a', 300)];
    s.add('b', 100);
    expect(s.pending.bytes).toBe(1_000);
    // 450 more bytes: two of a's go (one would leave 700 + 450 > 1000).
    s.add('c', 450);
    expect(a.map((id) => s.pending.get(id) !== undefined)).toEqual([false, false, true]);
    expect(s.pending.bytes).toBe(850);
  });

  it('a request exactly filling the budget fits; one byte more does not', () => {
    const s = store({ perAddress: 10, total: 100, totalBytes: 1_000 });
    s.add('a', 600);
    s.add('b', 400);
    expect(s.pending.bytes).toBe(1_000);
    expect(refusal(() => s.add('b', 1)).reason).toBe('total');
    const only = store({ perAddress: 10, total: 100, totalBytes: 1_000 });
    expect(refusal(() => only.add('a', 1_001)).reason).toBe('total');
    expect(refusal(() => only.add('a', 1_001)).retryAfterSeconds).toBe(1);
    only.add('a', 1_000);
    expect(only.pending.bytes).toBe(1_000);
  });

  it('a request that grows is charged, and growth beyond the budget evicts from the heaviest address', () => {
    const s = store({ perAddress: 10, total: 100, totalBytes: 1_000 });
    const a = [s.add('a', 200), s.add('a', 200), s.add('a', 200)];
    const b = s.add('b', 100);
    s.pending.resize(b, 300);
    expect(s.pending.bytes).toBe(900);
    s.pending.resize(b, 500);
    // 1100 > 1000: the oldest of a goes.
    expect(s.pending.bytes).toBe(900);
    expect(s.pending.get(a[0]!)).toBeUndefined();
    expect(s.pending.get(b)).toBe(`value of ${b}`);
    s.pending.resize('unknown', 5_000);
    expect(s.pending.bytes).toBe(900);
  });

  it('when the grower holds the most, its own other requests give way, never the one that grows', () => {
    const s = store({ perAddress: 10, total: 100, totalBytes: 1_000 });
    const a = [s.add('a', 200), s.add('a', 200), s.add('a', 200)];
    const b = s.add('b', 200);
    s.pending.resize(a[2]!, 600);
    expect(a.map((id) => s.pending.get(id) !== undefined)).toEqual([false, true, true]);
    expect(s.pending.get(b)).toBeDefined();
    expect(s.pending.bytes).toBe(1_000);
    // Alone, it may overshoot: there is nothing else of its own to give.
    const alone = store({ perAddress: 10, total: 100, totalBytes: 1_000 });
    const only = alone.add('a', 100);
    const other = alone.add('b', 100);
    alone.pending.resize(only, 1_200);
    expect(alone.pending.get(only)).toBeDefined();
    expect(alone.pending.get(other)).toBeDefined();
    expect(alone.pending.bytes).toBe(1_300);
  });
});

describe('expiry', () => {
  it('an expired request is dropped when the next one is added, not only refused', () => {
    const s = store();
    const old = s.add('a');
    s.add('a');
    s.advance(LIFETIME - 1);
    const live = s.add('a');
    expect(s.pending.size).toBe(3);
    s.advance(1);
    // The first two expire now (their lifetime ends at this very millisecond).
    s.add('b');
    expect(s.pending.size).toBe(2);
    expect(s.pending.bytes).toBe(20);
    expect(s.pending.heldBy('a')).toBe(1);
    expect(s.pending.get(old)).toBeUndefined();
    expect(s.pending.get(live)).toBeDefined();
    // `a` has room again.
    s.add('a');
    s.add('a');
    expect(s.pending.heldBy('a')).toBe(3);
  });

  it('get answers nothing for an expired request and drops it', () => {
    const s = store();
    const id = s.add('a');
    s.advance(LIFETIME - 1);
    expect(s.pending.get(id)).toBe(`value of ${id}`);
    s.advance(1);
    expect(s.pending.get(id)).toBeUndefined();
    expect(s.pending.size).toBe(0);
    expect(s.pending.heldBy('a')).toBe(0);
    expect(s.pending.bytes).toBe(0);
  });

  it('sweep drops every expired request, also behind a live one (a clock that stepped back)', () => {
    const s = store({ perAddress: 10, total: 100 });
    const early = s.add('a');
    s.set(1_000_000 - 30_000);
    const stepped = s.add('a');
    s.set(1_000_000 + LIFETIME - 30_000);
    // `early` is live; `stepped`, behind it, has expired.
    s.add('b');
    expect(s.pending.size).toBe(3);
    s.pending.sweep();
    expect(s.pending.size).toBe(2);
    expect(s.pending.get(early)).toBeDefined();
    expect(s.pending.get(stepped)).toBeUndefined();
    s.advance(30_000);
    s.pending.sweep();
    expect(s.pending.size).toBe(1);
    expect(s.pending.heldBy('a')).toBe(0);
  });

  it('after a flood expires, the counts per address start over', () => {
    const s = store({ perAddress: 3, total: 6 });
    for (const address of ['a', 'b']) for (let i = 0; i < 3; i++) s.add(address);
    s.advance(LIFETIME);
    s.pending.sweep();
    expect(s.pending.size).toBe(0);
    // The address holding the most is found again from scratch: a newcomer takes no one's place.
    for (let i = 0; i < 3; i++) s.add('c');
    for (let i = 0; i < 3; i++) s.add('d');
    expect(refusal(() => s.add('c')).reason).toBe('address');
    s.add('e');
    expect(s.pending.heldBy('c') + s.pending.heldBy('d')).toBe(5);
  });
});

describe('the address a request is charged to', () => {
  it.each([
    ['192.0.2.7', '192.0.2.7'],
    ['::ffff:192.0.2.7', '192.0.2.7'],
    ['::FFFF:192.0.2.7', '192.0.2.7'],
    ['::ffff:198.51.100.23', '198.51.100.23'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:ffff::1', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['64:ff9b:1::192.0.2.7', '64:ff9b:1:0::/64'],
    ['::2:3:4:5:6:192.0.2.7', '0:2:3:4::/64'],
    ['2001:db8::1:2:3:4:5', '2001:db8:0:1::/64'],
    ['::ffff:999.0.0.1', '::ffff:999.0.0.1'],
    ['unix-socket', 'unix-socket'],
    ['x'.repeat(100), 'x'.repeat(64)],
  ])('%s → %s', (ip, key) => {
    expect(addressKey(ip)).toBe(key);
  });

  it('IPv4 clients of a dual-stack listener (IPv4-mapped) are told apart, as are /64s that differ after a "::"', () => {
    expect(addressKey('::ffff:198.51.100.23')).not.toBe(addressKey('::ffff:198.51.100.24'));
    expect(addressKey('2001:db8::1:2:3:4:5')).not.toBe(addressKey('2001:db8::2:2:3:4:5'));
  });

  it('an IPv6 address merely ending like an IPv4-mapped one, or junk after one, is not charged to that IPv4 address', () => {
    expect(addressKey('2001:db8::ffff:192.0.2.7')).toBe('2001:db8:0:0::/64');
    expect(addressKey('::ffff:192.0.2.7x')).toBe('::ffff:192.0.2.7x');
  });
});

describe('authorization requests in the store', () => {
  const params = { clientId: 'overlay', redirectUri: 'http://127.0.0.1/cb', scopes: ['openid'], codeChallenge: 'c'.repeat(43), configTypes: [] };

  it('the defaults are those documented', () => {
    expect(PENDING_LIMITS).toEqual({ perAddress: 100, total: 20_000, totalBytes: 32 * 1024 * 1024 });
  });

  it('beyond the bound of an address: 429 temporarily_unavailable with Retry-After; another /64 is not affected', () => {
    let now = 5_000;
    const requests = new AuthRequests(() => now, { limits: { perAddress: 2, total: 100, totalBytes: 1_000_000 } });
    requests.start(params, '2001:db8:1:2::1');
    requests.start(params, '2001:db8:1:2::2');
    now += 1_000;
    let refused: unknown;
    try {
      requests.start(params, '2001:db8:1:2::3');
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(OAuthError);
    const e = refused as OAuthError;
    expect([e.status, e.error, e.headers]).toEqual([429, 'temporarily_unavailable', { 'retry-after': String(REQUEST_LIFETIME_MS / 1000 - 1) }]);
    expect(e.description).toMatch(/from this address/);
    expect(requests.start(params, '2001:db8:1:3::1').status).toBe('started');
    expect(requests.heldBy('2001:db8:1:2::ffff')).toBe(2);
  });

  it('at the total, the heaviest address is refused with its own message, and a newcomer is served', () => {
    const requests = new AuthRequests(() => 0, { limits: { perAddress: 5, total: 3, totalBytes: 1_000_000 } });
    for (let i = 0; i < 3; i++) requests.start(params, '10.0.0.1');
    expect(() => requests.start(params, '10.0.0.1')).toThrow(/too many authorization requests are pending; try again later/);
    expect(requests.start(params, '10.0.0.2').status).toBe('started');
    expect([requests.heldBy('10.0.0.1'), requests.heldBy('10.0.0.2'), requests.size]).toEqual([2, 1, 3]);
  });

  it('each request is charged for the strings it keeps, also those a login adds, and freed when it ends', () => {
    const requests = new AuthRequests(() => 0);
    const small = requests.start(params, '10.0.0.1');
    const base = requests.bytes;
    const big = requests.start({ ...params, state: 's'.repeat(2048), nonce: 'n'.repeat(512) }, '10.0.0.1');
    expect(requests.bytes - base - base).toBe(2 * (2048 + 512) + 2 * 24);
    const before = requests.bytes;
    requests.addConfigTypes(small, []);
    expect(requests.bytes).toBe(before);
    requests.addConfigTypes(small, ['aaaa', 'bbbb,cccc']);
    expect(small.configTypes).toEqual(['aaaa', 'bbbb', 'cccc']);
    expect(requests.bytes - before).toBe(3 * (24 + 2 * 4));
    requests.end(big);
    requests.end(small);
    expect([requests.size, requests.bytes]).toEqual([0, 0]);
  });

  it('an expired request is dropped by the sweep', () => {
    let now = 0;
    const requests = new AuthRequests(() => now);
    requests.start(params, '10.0.0.1');
    now = REQUEST_LIFETIME_MS - 1;
    requests.sweep();
    expect(requests.size).toBe(1);
    now = REQUEST_LIFETIME_MS;
    requests.sweep();
    expect([requests.size, requests.bytes]).toEqual([0, 0]);
  });
});
