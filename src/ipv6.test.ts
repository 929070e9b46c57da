import { describe, expect, it } from 'vitest';
import { ipv6Groups } from './ipv6.js';

describe('ipv6Groups', () => {
  it.each([
    ['::', [0, 0, 0, 0, 0, 0, 0, 0]],
    ['::1', [0, 0, 0, 0, 0, 0, 0, 1]],
    ['fe80::1%eth0', [0xfe80, 0, 0, 0, 0, 0, 0, 1]],
    ['2001:db8:0:0:1:0:0:1', [0x2001, 0xdb8, 0, 0, 1, 0, 0, 1]],
    ['2001:db8::', [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]],
    ['::ffff:10.0.0.1', [0, 0, 0, 0, 0, 0xffff, 0x0a00, 1]],
    ['64:ff9b::192.168.1.2', [0x64, 0xff9b, 0, 0, 0, 0, 0xc0a8, 0x0102]],
    ['1:2:3:4:5:6:7.8.9.10', [1, 2, 3, 4, 5, 6, 0x0708, 0x090a]],
  ])('%s', (address, groups) => {
    expect(ipv6Groups(address)).toEqual(groups);
  });
});
