import { describe, expect, it } from 'vitest';
import { DEFAULT_LISTENER_OPTIONS } from '../config/index.js';
import { AddressCounts, serverTimeoutOptions } from './connection-limits.js';
import { addressKey } from '../ipv6.js';

describe('addressKey', () => {
  it.each([
    ['192.0.2.7', '192.0.2.7'],
    ['::ffff:192.0.2.7', '192.0.2.7'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:ffff::1%eth0', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1:2', 'fe80:0:0:0::/64'],
    ['::ffff:0:192.0.2.7', '0:0:0:0::/64'],
  ])('%s counts as %s', (address, key) => {
    expect(addressKey(address)).toBe(key);
  });

  it('puts every address of one /64 together and different /64s apart', () => {
    expect(addressKey('2001:db8:a:b:1::1')).toBe(addressKey('2001:db8:a:b:ffff:ffff:ffff:ffff'));
    expect(addressKey('2001:db8:a:b::1')).not.toBe(addressKey('2001:db8:a:c::1'));
  });
});

describe('serverTimeoutOptions', () => {
  it('hands the listener deadlines to Node, checking them at a quarter of the header deadline at most 1 s apart', () => {
    expect(serverTimeoutOptions(DEFAULT_LISTENER_OPTIONS)).toEqual({
      handshakeTimeout: 10_000,
      headersTimeout: 10_000,
      requestTimeout: 30_000,
      keepAliveTimeout: 60_000,
      connectionsCheckingInterval: 1_000,
    });
    expect(serverTimeoutOptions({ ...DEFAULT_LISTENER_OPTIONS, readHeaderTimeout: 400 }).connectionsCheckingInterval).toBe(100);
    expect(serverTimeoutOptions({ ...DEFAULT_LISTENER_OPTIONS, readHeaderTimeout: 100 }).connectionsCheckingInterval).toBe(25);
  });
});

describe('AddressCounts', () => {
  it('counts the connections open from each address', () => {
    const counts = new AddressCounts();
    counts.opened('a');
    counts.opened('a');
    counts.opened('b');
    expect([counts.count('a'), counts.count('b'), counts.count('c')]).toEqual([2, 1, 0]);
    counts.closed('a');
    counts.closed('b');
    expect([counts.count('a'), counts.count('b')]).toEqual([1, 0]);
    counts.opened('b');
    expect(counts.count('b')).toBe(1);
  });

  it('keeps an address that comes and goes, and sweeps out those gone once they outnumber the rest', () => {
    const counts = new AddressCounts();
    for (let i = 0; i < 2_000; i++) counts.opened(`live ${i}`);
    for (let i = 0; i < 100_000; i++) {
      counts.opened('churn');
      counts.closed('churn');
      counts.opened(`gone ${i}`);
      counts.closed(`gone ${i}`);
      // At most as many addresses without a connection as with one, and 1,024, beyond the one just closed.
      expect(counts.size).toBeLessThanOrEqual(2_000 + Math.max(1_024, 2_000) + 1);
    }
    for (let i = 0; i < 2_000; i++) expect(counts.count(`live ${i}`)).toBe(1);
    expect([counts.count('churn'), counts.count('gone 5')]).toEqual([0, 0]);
    counts.opened('gone 5');
    expect(counts.count('gone 5')).toBe(1);
  });

  it('keeps a small number of idle addresses without sweeping', () => {
    const counts = new AddressCounts();
    for (let i = 0; i < 1_024; i++) {
      counts.opened(`gone ${i}`);
      counts.closed(`gone ${i}`);
    }
    expect(counts.size).toBe(1_024);
    // One that comes back is no longer without a connection: its comings and goings add none.
    for (let i = 0; i < 100; i++) {
      counts.opened('gone 0');
      counts.closed('gone 0');
    }
    expect(counts.size).toBe(1_024);
    counts.opened('one more');
    counts.closed('one more');
    expect(counts.size).toBe(0);
  });
});
