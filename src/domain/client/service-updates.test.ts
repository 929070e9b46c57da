// The markers of service-updates are bounded: one identity may open API sessions without end, and
// each that asks keeps a marker. A marker that made room for another is not missed: the next answer
// of its session is dated no earlier than that, while a session begun later answers as ever.
import { describe, expect, it } from 'vitest';
import type { Caller } from './caller.js';
import type { PostureStore } from './posture-store.js';
import type { ClientServices } from './service-list.js';
import { ServiceUpdateMarkers } from './service-updates.js';
import { ViewGenerations } from './view-generations.js';

function setup(maxKept: number) {
  let now = 10_000;
  const clock = () => now;
  const services = { list: async () => ({ items: [{ id: 'svc' }] }) } as unknown as ClientServices;
  const posture = { generation: () => ({ generation: 0, at: 0 }) } as unknown as PostureStore;
  const markers = new ServiceUpdateMarkers(services, new ViewGenerations(clock), posture, 0, clock, maxKept);
  const caller = (apiSessionId: string, sessionCreatedAt: number): Caller => ({
    apiSessionId,
    identityId: 'flooder',
    identityName: 'flooder',
    sessionCreatedAt,
    configTypes: [],
    isMfaComplete: false,
    mfaPassedAt: null,
  });
  return { markers, caller, advance: (ms: number) => (now += ms), kept: () => (markers as unknown as { state: { size: number } }).state.size };
}

describe('service-update markers', () => {
  it('keep at most their bound, however many API sessions ask', async () => {
    const { markers, caller, kept } = setup(100);
    for (let i = 0; i < 1_000; i++) await markers.lastChangeAt(caller(`s-${i}`, 5_000));
    expect(kept()).toBe(100);
  });

  it('date the next answer of a session whose marker made room no earlier than that; a later session answers its start', async () => {
    const { markers, caller, advance } = setup(2);
    expect(await markers.lastChangeAt(caller('a', 5_000))).toBe(new Date(5_000).toISOString());
    advance(1_000);
    await markers.lastChangeAt(caller('b', 6_000));
    advance(1_000);
    await markers.lastChangeAt(caller('c', 7_000)); // a goes, at 12,000
    advance(1_000);
    expect(await markers.lastChangeAt(caller('a', 5_000))).toBe(new Date(12_000).toISOString());
    // Asked again with nothing changed, it stays.
    expect(await markers.lastChangeAt(caller('a', 5_000))).toBe(new Date(12_000).toISOString());
    advance(1_000);
    expect(await markers.lastChangeAt(caller('d', 14_000))).toBe(new Date(14_000).toISOString());
  });
});
