import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_KEYS, FailureThrottle, type Admission, type Attempt } from './throttle.js';

function clock(start = 1_000_000) {
  let now = start;
  const c = () => now;
  c.advance = (ms: number) => {
    now += ms;
  };
  return c;
}

/** Lets every admission that can resolve do so. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** An admission whose outcome can be read without awaiting it (undefined: still waiting). */
function track(p: Promise<Admission>) {
  const t: { admission?: Admission } = {};
  void p.then((a) => {
    t.admission = a;
  });
  return t;
}

async function admitted(throttle: FailureThrottle, keys: string[]): Promise<Attempt> {
  const a = await throttle.admit(keys);
  if (!a.attempt) throw new Error(`refused for ${a.retryAfter} s`);
  return a.attempt;
}

/** One failed check under `keys`. */
async function failOnce(throttle: FailureThrottle, ...keys: string[]): Promise<void> {
  (await admitted(throttle, keys)).fail();
}

describe('FailureThrottle: failures in the window', () => {
  it('allows 20 failures within the window and refuses after the 21st until the window passes', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c);
    for (let i = 0; i < 20; i++) {
      expect(throttle.retryAfter('ip:a')).toBe(0);
      await failOnce(throttle, 'ip:a');
    }
    expect(throttle.retryAfter('ip:a')).toBe(0);
    await failOnce(throttle, 'ip:a');
    expect(throttle.retryAfter('ip:a')).toBe(10);
    expect(await throttle.admit(['ip:a'])).toEqual({ retryAfter: 10 });
    c.advance(4_000);
    expect(throttle.retryAfter('ip:a')).toBe(6);
    c.advance(5_999);
    expect(throttle.retryAfter('ip:a')).toBe(1);
    // Exactly one window after the failures they no longer count.
    c.advance(1);
    expect(throttle.retryAfter('ip:a')).toBe(0);
    expect((await throttle.admit(['ip:a'])).attempt).toBeDefined();
  });

  it('counts keys separately', async () => {
    const throttle = new FailureThrottle(clock());
    for (let i = 0; i < 21; i++) await failOnce(throttle, 'ip:a');
    expect(throttle.retryAfter('ip:a')).toBeGreaterThan(0);
    expect(throttle.retryAfter('ip:b')).toBe(0);
    expect(throttle.retryAfter('user:a')).toBe(0);
  });

  it('a check counts under every key it names; one refusing key refuses, with the longest wait', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c, 1, 10_000);
    await failOnce(throttle, 'ip:x');
    c.advance(3_000);
    await failOnce(throttle, 'ip:x', 'user:y');
    await failOnce(throttle, 'user:y');
    // ip:x frees up when its first failure leaves, 7 s from now; user:y 10 s from now.
    expect(throttle.retryAfter('ip:x')).toBe(7);
    expect(throttle.retryAfter('user:y')).toBe(10);
    expect(await throttle.admit(['ip:x', 'user:y'])).toEqual({ retryAfter: 10 });
    expect(await throttle.admit(['user:y', 'ip:x'])).toEqual({ retryAfter: 10 });
    expect(await throttle.admit(['ip:x', 'ip:z'])).toEqual({ retryAfter: 7 });
    expect((await throttle.admit(['ip:z'])).attempt).toBeDefined();
  });

  it('a key named twice counts once', async () => {
    const throttle = new FailureThrottle(clock(), 1, 10_000);
    await failOnce(throttle, 'k', 'k');
    expect(throttle.retryAfter('k')).toBe(0);
    await failOnce(throttle, 'k');
    expect(throttle.retryAfter('k')).toBe(10);
  });

  it('only counts failures inside the sliding window', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c);
    for (let i = 0; i < 11; i++) await failOnce(throttle, 'k');
    c.advance(5_000);
    for (let i = 0; i < 10; i++) await failOnce(throttle, 'k');
    // 21 failures within the last 10 s: refused until the first 11 leave the window.
    expect(throttle.retryAfter('k')).toBe(5);
    c.advance(5_000);
    expect(throttle.retryAfter('k')).toBe(0);
    // 10 remain; eleven more are still let through, then it refuses until the older ten leave.
    for (let i = 0; i < 11; i++) await failOnce(throttle, 'k');
    expect(throttle.retryAfter('k')).toBe(5);
    expect(await throttle.admit(['k'])).toEqual({ retryAfter: 5 });
  });

  it('failures spread wider than the window never trigger it', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c);
    for (let i = 0; i < 100; i++) {
      await failOnce(throttle, 'k');
      c.advance(600);
      expect(throttle.retryAfter('k')).toBe(0);
    }
  });

  it('honours a custom limit and window', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c, 2, 1_000);
    await failOnce(throttle, 'k');
    await failOnce(throttle, 'k');
    expect(throttle.retryAfter('k')).toBe(0);
    await failOnce(throttle, 'k');
    expect(throttle.retryAfter('k')).toBe(1);
    c.advance(999);
    expect(throttle.retryAfter('k')).toBe(1);
    c.advance(1);
    expect(throttle.retryAfter('k')).toBe(0);
  });

  it('limit 0: every failure refuses until it leaves the window', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c, 0, 2_000);
    expect(throttle.retryAfter('k')).toBe(0);
    await failOnce(throttle, 'k');
    expect(throttle.retryAfter('k')).toBe(2);
    c.advance(2_000);
    expect(throttle.retryAfter('k')).toBe(0);
  });
});

describe('FailureThrottle: Retry-After with failures spread over the window', () => {
  it('answers the exact seconds until the oldest failure has left the window', async () => {
    const c = clock(0);
    const throttle = new FailureThrottle(c, 2, 10_000);
    for (const at of [0, 3_000, 6_000]) {
      c.advance(at - c());
      await failOnce(throttle, 'k');
    }
    // Three failures at 0, 3 and 6 s: refused until the one at 0 s leaves, at 10 s.
    c.advance(6_600 - c());
    expect(throttle.retryAfter('k')).toBe(4); // 3.4 s, rounded up
    c.advance(400);
    expect(throttle.retryAfter('k')).toBe(3); // exactly 3 s
    c.advance(2_999);
    expect(throttle.retryAfter('k')).toBe(1);
    c.advance(1);
    // The failures at 3 and 6 s remain, which is the limit: one more may run, and if it fails
    // the key is refused until the one at 3 s leaves.
    expect(throttle.retryAfter('k')).toBe(0);
    await failOnce(throttle, 'k');
    expect(throttle.retryAfter('k')).toBe(3);
    c.advance(1_500);
    expect(throttle.retryAfter('k')).toBe(2); // 1.5 s, rounded up
  });

  it('the refusal moves on to the next failure as the window slides', async () => {
    const c = clock(0);
    const throttle = new FailureThrottle(c, 1, 10_000);
    for (const at of [1_000, 7_500]) {
      c.advance(at - c());
      await failOnce(throttle, 'k');
    }
    c.advance(8_000 - c());
    expect(throttle.retryAfter('k')).toBe(3);
    c.advance(2_999);
    expect(throttle.retryAfter('k')).toBe(1);
    c.advance(1);
    expect(throttle.retryAfter('k')).toBe(0);
    await failOnce(throttle, 'k');
    // Failures at 7.5 and 11 s: refused until 17.5 s.
    expect(throttle.retryAfter('k')).toBe(7);
    c.advance(6_499);
    expect(throttle.retryAfter('k')).toBe(1);
    c.advance(1);
    expect(throttle.retryAfter('k')).toBe(0);
  });

  it('a failure counts from when the check ended, not from when it began', async () => {
    const c = clock(0);
    const throttle = new FailureThrottle(c, 0, 10_000);
    const attempt = await admitted(throttle, ['k']);
    c.advance(3_000);
    attempt.fail();
    expect(throttle.retryAfter('k')).toBe(10);
    c.advance(9_999);
    expect(throttle.retryAfter('k')).toBe(1);
  });
});

describe('FailureThrottle: places taken before the check', () => {
  it('admits at most limit + 1 checks at once; a failing burst reaches no more', async () => {
    const throttle = new FailureThrottle(clock(), 2, 10_000);
    const all = Array.from({ length: 10 }, () => track(throttle.admit(['k'])));
    await settle();
    const running = all.filter((t) => t.admission?.attempt);
    expect(running).toHaveLength(3);
    expect(all.filter((t) => t.admission === undefined)).toHaveLength(7);
    for (const t of running) t.admission!.attempt!.fail();
    await settle();
    // Three failures are more than 2: every waiting check is refused without running.
    expect(all.map((t) => t.admission?.retryAfter).filter((r) => r !== undefined)).toEqual(Array(7).fill(10));
    expect(throttle.retryAfter('k')).toBe(10);
  });

  it('a released place goes to the first waiting check; successes never count', async () => {
    const throttle = new FailureThrottle(clock(), 1, 10_000);
    const first = await admitted(throttle, ['k']);
    const second = await admitted(throttle, ['k']);
    const third = track(throttle.admit(['k']));
    const fourth = track(throttle.admit(['k']));
    await settle();
    expect(third.admission).toBeUndefined();
    expect(fourth.admission).toBeUndefined();
    first.release();
    await settle();
    expect(third.admission?.attempt).toBeDefined();
    expect(fourth.admission).toBeUndefined();
    second.release();
    await settle();
    expect(fourth.admission?.attempt).toBeDefined();
    third.admission!.attempt!.release();
    fourth.admission!.attempt!.release();
    expect(throttle.retryAfter('k')).toBe(0);
    // Nothing left to remember.
    expect(throttle.size).toBe(0);
  });

  it('many successes at once all get through, a limit + 1 at a time', async () => {
    const throttle = new FailureThrottle(clock(), 2, 10_000);
    const all = Array.from({ length: 20 }, () => track(throttle.admit(['k'])));
    let done = 0;
    while (done < all.length) {
      await settle();
      const running = all.filter((t) => t.admission?.attempt).length - done;
      expect(running).toBeGreaterThan(0);
      expect(running).toBeLessThanOrEqual(3);
      for (const t of all.slice(done, done + running)) t.admission!.attempt!.release();
      done += running;
    }
    expect(all.every((t) => t.admission?.attempt)).toBe(true);
    expect(throttle.size).toBe(0);
  });

  it('a failure among running checks keeps the others waiting; the limit-th failure refuses them', async () => {
    const throttle = new FailureThrottle(clock(), 1, 10_000);
    const a = await admitted(throttle, ['k']);
    const b = await admitted(throttle, ['k']);
    const waiting = track(throttle.admit(['k']));
    a.fail();
    await settle();
    // One failure and one running check: no place.
    expect(waiting.admission).toBeUndefined();
    b.release();
    await settle();
    expect(waiting.admission?.attempt).toBeDefined();
    waiting.admission!.attempt!.fail();
    expect(await throttle.admit(['k'])).toEqual({ retryAfter: 10 });
  });

  it('several waiting checks all get in when failures have left the window meanwhile', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c, 1, 10_000);
    await failOnce(throttle, 'k');
    const running = await admitted(throttle, ['k']);
    const w1 = track(throttle.admit(['k']));
    const w2 = track(throttle.admit(['k']));
    await settle();
    expect(w1.admission).toBeUndefined();
    c.advance(10_000);
    running.release();
    await settle();
    expect(w1.admission?.attempt).toBeDefined();
    expect(w2.admission?.attempt).toBeDefined();
  });

  it('a failure that refuses a key refuses every check waiting on it', async () => {
    const throttle = new FailureThrottle(clock(), 0, 10_000);
    const onA = await admitted(throttle, ['a']);
    const waiting = [track(throttle.admit(['a', 'b'])), track(throttle.admit(['a'])), track(throttle.admit(['a']))];
    await settle();
    expect(waiting.every((t) => t.admission === undefined)).toBe(true);
    onA.fail();
    await settle();
    expect(waiting.map((t) => t.admission?.retryAfter)).toEqual([10, 10, 10]);
    // 'b' was never charged.
    expect((await throttle.admit(['b'])).attempt).toBeDefined();
  });

  it('a waiting check freed on one key but held on another waits there', async () => {
    const throttle = new FailureThrottle(clock(), 0, 10_000);
    const onA = await admitted(throttle, ['a']);
    const onB = await admitted(throttle, ['b']);
    const both = track(throttle.admit(['a', 'b']));
    await settle();
    onA.release();
    await settle();
    expect(both.admission).toBeUndefined();
    onB.release();
    await settle();
    expect(both.admission?.attempt).toBeDefined();
    // It holds both keys now.
    const onAAgain = track(throttle.admit(['a']));
    await settle();
    expect(onAAgain.admission).toBeUndefined();
    both.admission!.attempt!.release();
    await settle();
    expect(onAAgain.admission?.attempt).toBeDefined();
  });

  it('an attempt settles once: a second fail or a later release changes nothing', async () => {
    const throttle = new FailureThrottle(clock(), 1, 10_000);
    const attempt = await admitted(throttle, ['k']);
    attempt.fail();
    attempt.fail();
    attempt.release();
    expect(throttle.retryAfter('k')).toBe(0);
    // The place was given back once: two more run at once, not three.
    const next = [track(throttle.admit(['k'])), track(throttle.admit(['k']))];
    await settle();
    expect(next.filter((t) => t.admission?.attempt)).toHaveLength(1);
    const other = new FailureThrottle(clock(), 0, 10_000);
    const released = await admitted(other, ['x']);
    released.release();
    released.fail();
    expect(other.retryAfter('x')).toBe(0);
  });

  it('a released check leaves no failure behind', async () => {
    const throttle = new FailureThrottle(clock(), 0, 10_000);
    (await admitted(throttle, ['k'])).release();
    expect(throttle.retryAfter('k')).toBe(0);
    expect((await throttle.admit(['k'])).attempt).toBeDefined();
  });
});

describe('FailureThrottle: memory', () => {
  it('pruning drops only keys whose failures have all left the window', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c, 1, 10_000, 4);
    await failOnce(throttle, 'stale-1');
    await failOnce(throttle, 'stale-2');
    c.advance(5_000);
    // Two failures: refused, and must stay so however many other keys come.
    await failOnce(throttle, 'locked');
    await failOnce(throttle, 'locked');
    await failOnce(throttle, 'recent');
    c.advance(5_000);
    expect(throttle.size).toBe(4);
    // A fifth key prunes the two whose only failure is exactly one window old.
    await failOnce(throttle, 'fifth');
    expect(throttle.size).toBe(3);
    expect(throttle.retryAfter('locked')).toBe(5);
    expect(throttle.retryAfter('recent')).toBe(0);
    await failOnce(throttle, 'recent');
    // 'recent' kept its earlier failure: with this one, two refuse until the earlier one leaves.
    expect(throttle.retryAfter('recent')).toBe(5);
  });

  it('keys below the bound are not pruned; stale keys are dropped once it is reached', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c, 1, 10_000, 4);
    for (const k of ['a', 'b', 'c', 'd']) await failOnce(throttle, k);
    c.advance(10_000);
    expect(throttle.size).toBe(4);
    await failOnce(throttle, 'e');
    expect(throttle.size).toBe(1);
    for (const k of ['f', 'g', 'h']) await failOnce(throttle, k);
    // Below the bound again: nothing pruned, though a, b, c and d would be.
    expect(throttle.size).toBe(4);
  });

  it('when most keys still count, the next prune waits until the map has doubled', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c, 1, 10_000, 4);
    for (const k of ['a', 'b', 'c', 'd', 'e']) await failOnce(throttle, k);
    // All five still count: the prune at 'e' dropped none, and the next waits for 8 keys.
    expect(throttle.size).toBe(5);
    c.advance(10_000);
    for (const k of ['f', 'g', 'h']) await failOnce(throttle, k);
    expect(throttle.size).toBe(8);
    await failOnce(throttle, 'i');
    // a to e are stale now and go; f to i stay.
    expect(throttle.size).toBe(4);
  });

  it('a key with a check running or waiting is never pruned', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c, 0, 10_000, 2);
    const running = await admitted(throttle, ['shared', 'busy']);
    const waiting = track(throttle.admit(['shared', 'other']));
    const queued = track(throttle.admit(['busy']));
    await settle();
    expect(throttle.size).toBe(2);
    // Releasing wakes the waiter of 'shared' first; its new key 'other' prunes while 'busy' has
    // nothing running but a check waiting: 'busy' must survive and give it its place.
    running.release();
    await settle();
    expect(waiting.admission?.attempt).toBeDefined();
    expect(queued.admission?.attempt).toBeDefined();
    // A failure of a check running through a prune still counts.
    for (const k of ['x', 'y', 'z']) await failOnce(throttle, k);
    queued.admission!.attempt!.fail();
    expect(throttle.retryAfter('busy')).toBe(10);
  });

  it('a prune while a check settles may drop its other, now idle key', async () => {
    const throttle = new FailureThrottle(clock(), 0, 10_000, 2);
    const attempt = await admitted(throttle, ['k1', 'k2']);
    const waiting = track(throttle.admit(['k1', 'k3']));
    await settle();
    // Waking k1's waiter adds k3, which prunes k2 before k2's own turn to wake.
    expect(() => attempt.release()).not.toThrow();
    await settle();
    expect(waiting.admission?.attempt).toBeDefined();
    expect(throttle.size).toBe(2);
  });

  it('by default holds 100 000 keys before it prunes', async () => {
    const c = clock();
    const throttle = new FailureThrottle(c);
    expect(DEFAULT_MAX_KEYS).toBe(100_000);
    for (let i = 0; i < DEFAULT_MAX_KEYS; i++) await failOnce(throttle, `k${i}`);
    c.advance(10_000);
    expect(throttle.size).toBe(DEFAULT_MAX_KEYS);
    await failOnce(throttle, 'one more');
    expect(throttle.size).toBe(1);
  });
});
