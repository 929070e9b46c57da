// The unauthenticated authorization flood, performed: hundreds of GET /oidc/authorization at once
// from one address once filled the pending-request store, so every later authorization (the
// legitimate user's too) got 503. Now the flooding address gets 429 beyond its bound while another
// address, in the same burst, is served and logs in; expired requests are dropped.
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PENDING_LIMITS } from '../src/oidc/pending.js';
import { REQUEST_LIFETIME_MS } from '../src/oidc/flow.js';
import { ADMIN_ENV, asAdmin, createIdentityWithPassword, json, startTestController, type TestController } from './helpers.js';
import { authorizeQuery, postLogin, REDIRECT_URI } from './oidc-helpers.js';

let t: TestController;
let user: { username: string; password: string };
/** A request of the flood that was let in. */
let flooded: string;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  const admin = await asAdmin(t);
  user = { username: 'flood-victim', password: 'flood-victim-pw' };
  await createIdentityWithPassword(t, admin, { name: 'flood-victim', ...user });
});
afterAll(async () => {
  await t.close();
});

function authorize(remoteAddress: string): Promise<LightMyRequestResponse> {
  return t.inject({ method: 'GET', url: `/oidc/authorization?${authorizeQuery()}`, remoteAddress });
}

function authRequestId(res: LightMyRequestResponse): string {
  return new URL(String(res.headers.location), 'https://x').searchParams.get('authRequestID')!;
}

/** The OAuth answer of a refused authorization: 429, Retry-After within the request lifetime, never a redirect. */
function expectThrottled(res: LightMyRequestResponse): void {
  expect(res.statusCode).toBe(429);
  expect(res.headers.location).toBeUndefined();
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.headers['cache-control']).toBe('no-store');
  const retryAfter = Number(res.headers['retry-after']);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(REQUEST_LIFETIME_MS / 1000);
  expect(json(res)).toEqual({ error: 'temporarily_unavailable', error_description: expect.stringMatching(/pending from this address/) });
}

describe('an authorization flood from one address', () => {
  const flooder = '10.20.0.1';
  const victim = '10.20.0.2';
  const burst = 3 * PENDING_LIMITS.perAddress;

  it('is refused with 429 beyond the bound, while another address in the same burst is served and logs in', async () => {
    const flood = Array.from({ length: burst }, () => authorize(flooder));
    // The legitimate user's authorization runs in the middle of the burst.
    const [answers, own] = await Promise.all([Promise.all(flood), authorize(victim)]);
    const started = answers.filter((res) => res.statusCode === 302);
    expect(started).toHaveLength(PENDING_LIMITS.perAddress);
    for (const res of answers.filter((r) => r.statusCode !== 302)) expectThrottled(res);
    flooded = authRequestId(started[0]!);
    expect(t.app.core.oidc.requests.heldBy(flooder)).toBe(PENDING_LIMITS.perAddress);

    expect(own.statusCode).toBe(302);
    const login = await postLogin(t, authRequestId(own), user.username, user.password, { remoteAddress: victim });
    expect(login.statusCode).toBe(302);
    const callback = new URL(String(login.headers.location));
    expect(`${callback.origin}${callback.pathname}`).toBe(REDIRECT_URI);
    expect(callback.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // The finished login freed its place.
    expect(t.app.core.oidc.requests.heldBy(victim)).toBe(0);
    // The flooder is still refused.
    expectThrottled(await authorize(flooder));
  });

  it('the addresses of one IPv6 /64 share one bound; another /64 is served', async () => {
    const answers = await Promise.all([
      ...Array.from({ length: PENDING_LIMITS.perAddress + 20 }, (_, i) => authorize(`2001:db8:20:1::${(i + 1).toString(16)}`)),
      authorize('2001:db8:20:2::1'),
    ]);
    const other = answers.pop()!;
    expect(answers.filter((res) => res.statusCode === 302)).toHaveLength(PENDING_LIMITS.perAddress);
    for (const res of answers.filter((r) => r.statusCode !== 302)) expectThrottled(res);
    expect(other.statusCode).toBe(302);
  });

  it('expired requests are dropped, and the address may start again', async () => {
    const before = t.app.core.oidc.requests.size;
    expect(before).toBeGreaterThanOrEqual(2 * PENDING_LIMITS.perAddress);
    t.clock.advance(REQUEST_LIFETIME_MS);
    const again = await authorize(flooder);
    expect(again.statusCode).toBe(302);
    // Dropped, not only refused: the store holds the new request alone.
    expect(t.app.core.oidc.requests.heldBy(flooder)).toBe(1);
    expect(t.app.core.oidc.requests.size).toBe(1);
    const stale = await t.inject({ method: 'GET', url: `/oidc/login/auth-queries?id=${flooded}` });
    expect(stale.statusCode).toBe(404);
  });
});
