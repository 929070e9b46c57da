// Write throttling under real parallel requests over TLS: with a small bound on the writes waiting,
// a burst of creates gets some 429 SERVER_TOO_MANY_REQUESTS with Retry-After, nothing partial is
// written, reads made at the same time all answer, and writes are taken again once the burst is over.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request as httpsRequest } from 'node:https';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_ENV, asAdmin, authPolicyBody, CLIENT, createIdentityWithPassword, holdWrites, MGMT, startTestController, tempDir, type HttpsAnswer, type TestController } from './helpers.js';

let t: TestController;
let admin: string;
let port: number;
let agent: Agent;
const dir = tempDir();

beforeAll(async () => {
  const file = join(dir.path, 'overlay.yml');
  writeFileSync(file, 'writes:\n  maxQueued: 1\n');
  t = await startTestController({ env: { ...ADMIN_ENV, OVERLAY_CONFIG: file } });
  admin = await asAdmin(t);
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
  agent = new Agent({ keepAlive: true, maxSockets: 64, ca: t.app.core.pki.trustBundlePem });
});

afterAll(async () => {
  agent.destroy();
  await t.close();
  dir.remove();
});

function send(method: string, path: string, body?: unknown, token: string | null = admin): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        agent,
        headers: {
          ...(token !== null && { 'overlay-session': token }),
          ...(payload !== undefined && { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

describe('a full write queue', () => {
  it('refuses writes with 429 and Retry-After while reads keep answering', async () => {
    const burst = 48;
    // Connections opened beforehand, so the burst's requests arrive together.
    const warm = await Promise.all(Array.from({ length: burst + 8 }, () => send('GET', `${MGMT}/identity-types`)));
    expect(warm.every((r) => r.statusCode === 200)).toBe(true);

    const writes = Array.from({ length: burst }, (_, i) => send('POST', `${MGMT}/identities`, { name: `burst-${i}`, type: 'User', isAdmin: false }));
    const reads = Array.from({ length: 8 }, () => send('GET', `${MGMT}/identities?limit=1`));
    const [written, read] = await Promise.all([Promise.all(writes), Promise.all(reads)]);

    const statuses = written.map((r) => r.statusCode);
    expect(statuses.every((s) => s === 201 || s === 429)).toBe(true);
    const refused = written.filter((r) => r.statusCode === 429);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.length).toBeLessThan(burst);
    for (const r of refused) {
      expect(r.headers['retry-after']).toBe('1');
      expect(JSON.parse(r.body).error.code).toBe('SERVER_TOO_MANY_REQUESTS');
    }
    expect(read.map((r) => r.statusCode)).toEqual(read.map(() => 200));

    // Exactly the accepted creates were written.
    const stored = await t.app.core.store.db.selectFrom('identities').select('name').where('name', 'like', 'burst-%').execute();
    expect(stored.length).toBe(statuses.filter((s) => s === 201).length);

    // The queue drained: a write is taken again.
    expect((await send('POST', `${MGMT}/identities`, { name: 'after-burst', type: 'User', isAdmin: false })).statusCode).toBe(201);
  });
});

describe('a full write queue and the lockout', () => {
  it('still counts every wrong password: a guess is never refused for the queue, so the lockout holds', async () => {
    const policy = await send('POST', `${MGMT}/auth-policies`, authPolicyBody('queue-lockout', { primary: { updb: { allowed: true, maxAttempts: 2, lockoutDurationMinutes: 10 } } }));
    expect(policy.statusCode, policy.body).toBe(201);
    const { id } = await createIdentityWithPassword(t, admin, { name: 'queue-guess', username: 'queue-guess', password: 'queue-right-1', authPolicyId: JSON.parse(policy.body).data.id });

    // The writer held, and the one place of the queue taken by a request's write.
    const kernel = t.app.core.kernel;
    const writer = await holdWrites(t);
    const queued = kernel.withOrigin({ requestId: 'filler', ipAddress: '127.0.0.1' }, () => kernel.write(async () => undefined));
    expect((await send('POST', `${MGMT}/identities`, { name: 'refused-while-full', type: 'User', isAdmin: false })).statusCode).toBe(429);

    const guesses = [1, 2].map((n) => send('POST', `${CLIENT}/authenticate?method=password`, { username: 'queue-guess', password: `queue-wrong-${n}` }, null));
    // Both guesses are checked (Argon2id) and wait for their count to be written.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await writer.release();
    await queued;
    expect((await Promise.all(guesses)).map((r) => [r.statusCode, JSON.parse(r.body).error.code])).toEqual([
      [401, 'INVALID_AUTH'],
      [401, 'INVALID_AUTH'],
    ]);
    // Two wrong passwords locked it: the right one is refused.
    const right = await send('POST', `${CLIENT}/authenticate?method=password`, { username: 'queue-guess', password: 'queue-right-1' }, null);
    expect(right.statusCode, right.body).toBe(401);
    const identity = JSON.parse((await send('GET', `${MGMT}/identities/${id}`)).body).data;
    expect(identity.disabled).toBe(true);
  });
});
