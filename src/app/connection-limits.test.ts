import { describe, expect, it } from 'vitest';
import { DEFAULT_LISTENER_OPTIONS } from '../config/index.js';
import { addressKey, serverTimeoutOptions } from './connection-limits.js';

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
      keepAliveTimeout: 30_000,
      connectionsCheckingInterval: 1_000,
    });
    expect(serverTimeoutOptions({ ...DEFAULT_LISTENER_OPTIONS, readHeaderTimeout: 400 }).connectionsCheckingInterval).toBe(100);
    expect(serverTimeoutOptions({ ...DEFAULT_LISTENER_OPTIONS, readHeaderTimeout: 100 }).connectionsCheckingInterval).toBe(25);
  });
});
