import { describe, expect, it } from 'vitest';
import { FailureThrottle } from './throttle.js';

function clock(start = 1_000_000) {
  let now = start;
  const c = () => now;
  c.advance = (ms: number) => {
    now += ms;
  };
  return c;
}

describe('FailureThrottle', () => {
  it('allows 20 failures within the window and refuses after the 21st until the window passes', () => {
    const c = clock();
    const throttle = new FailureThrottle(c);
    for (let i = 0; i < 20; i++) {
      expect(throttle.retryAfter('ip:a')).toBe(0);
      throttle.fail('ip:a');
    }
    expect(throttle.retryAfter('ip:a')).toBe(0);
    throttle.fail('ip:a');
    expect(throttle.retryAfter('ip:a')).toBe(10);
    c.advance(4_000);
    expect(throttle.retryAfter('ip:a')).toBe(6);
    c.advance(5_999);
    expect(throttle.retryAfter('ip:a')).toBeGreaterThan(0);
    c.advance(1);
    expect(throttle.retryAfter('ip:a')).toBe(0);
  });

  it('counts keys separately', () => {
    const c = clock();
    const throttle = new FailureThrottle(c);
    for (let i = 0; i < 21; i++) throttle.fail('ip:a');
    expect(throttle.retryAfter('ip:a')).toBeGreaterThan(0);
    expect(throttle.retryAfter('ip:b')).toBe(0);
    expect(throttle.retryAfter('user:a')).toBe(0);
  });

  it('only counts failures inside the sliding window', () => {
    const c = clock();
    const throttle = new FailureThrottle(c);
    for (let i = 0; i < 11; i++) throttle.fail('k');
    c.advance(5_000);
    for (let i = 0; i < 10; i++) throttle.fail('k');
    // 21 failures within the last 10 s: refused until the first 11 leave the window.
    expect(throttle.retryAfter('k')).toBe(5);
    c.advance(5_000);
    expect(throttle.retryAfter('k')).toBe(0);
    // 10 remain; one more is still within the limit.
    throttle.fail('k');
    expect(throttle.retryAfter('k')).toBe(0);
  });

  it('failures spread wider than the window never trigger it', () => {
    const c = clock();
    const throttle = new FailureThrottle(c);
    for (let i = 0; i < 100; i++) {
      throttle.fail('k');
      c.advance(600);
      expect(throttle.retryAfter('k')).toBe(0);
    }
  });

  it('honours a custom limit and window', () => {
    const c = clock();
    const throttle = new FailureThrottle(c, 2, 1_000);
    throttle.fail('k');
    throttle.fail('k');
    expect(throttle.retryAfter('k')).toBe(0);
    throttle.fail('k');
    expect(throttle.retryAfter('k')).toBe(1);
    c.advance(1_000);
    expect(throttle.retryAfter('k')).toBe(0);
  });
});
