// TOTP enrollments called directly over an in-memory store with a test clock: what is kept sealed or
// as digests, the view while unconfirmed and once confirmed, confirmation and removal (also racing a
// confirmation), codes taken once (replays, older steps, recovery codes used up), the attempt limit
// per session or authorization request and per identity, and writes that commit with the code.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { iso } from '../clock.js';
import { ApiError } from '../errors.js';
import type { Change } from '../kernel/changes.js';
import { CacheRegistry } from '../kernel/caches.js';
import { Kernel } from '../kernel/kernel.js';
import { DEFAULT_AUTH_POLICY_ID, DEFAULT_PRIMARY, DEFAULT_SECONDARY } from '../resources/auth-policies.js';
import { migrations } from '../store/migrations/index.js';
import { openSqlite } from '../store/sqlite.js';
import { Store } from '../store/store.js';
import { ApiSessions } from './api-sessions.js';
import { endMfaPasses, Mfa, MFA_WINDOW_MS, type MfaView } from './mfa.js';
import { SecretBox } from './secret-box.js';
import { RECOVERY_CODE_COUNT, totpCode } from './totp.js';

const T0 = Date.parse('2026-03-04T05:06:07.089Z');
const STEP = 30_000;
const ALICE = { id: 'alice', name: 'Alice Example' };
const BOB = { id: 'bob', name: 'bob' };
const AT_SESSION = { apiSessionId: 's-1' };

let dir: string;
let store: Store;
let kernel: Kernel;
let box: SecretBox;
let now: number;
const clock = () => now;
let mfa: Mfa;
let changes: Change[];
let stopListening: () => void;

beforeEach(async () => {
  now = T0;
  dir = mkdtempSync(join(tmpdir(), 'overlay-mfa-'));
  box = await SecretBox.open(dir);
  store = new Store(openSqlite(':memory:'));
  await store.migrate(migrations);
  kernel = new Kernel({ store, clock });
  await kernel.write(async (ctx) => {
    const base = { createdAt: ctx.now, updatedAt: ctx.now, tags: {} };
    await ctx.insert('auth-policies', { ...base, id: DEFAULT_AUTH_POLICY_ID, name: 'Default', isSystem: true, primary: DEFAULT_PRIMARY, secondary: DEFAULT_SECONDARY });
    for (const { id, name } of [ALICE, BOB]) {
      await ctx.insert('identities', { ...base, id, name, type: 'User', isAdmin: false, isDefaultAdmin: false, authPolicyId: DEFAULT_AUTH_POLICY_ID });
    }
  });
  mfa = new CacheRegistry(kernel.changes).register(new Mfa({ kernel, clock, box, issuer: 'Overlay Test' }));
  changes = [];
  stopListening = kernel.changes.subscribe((c) => void changes.push(c));
});
afterEach(async () => {
  stopListening();
  vi.restoreAllMocks();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

async function row(identityId = ALICE.id) {
  return store.db.selectFrom('mfas').selectAll().where('identity_id', '=', identityId).executeTakeFirst();
}

/** The TOTP secret of an enrollment, read from its provisioning URL. */
function secretOf(view: MfaView): string {
  return new URL(view.provisioningUrl!).searchParams.get('secret')!;
}

/** Starts and confirms an enrollment; answers its secret and recovery codes. Time moves on a step. */
async function enrolled(identity = ALICE): Promise<{ secret: string; codes: string[] }> {
  const view = await mfa.start(identity);
  const secret = secretOf(view);
  await mfa.verify(identity.id, totpCode(secret, now), AT_SESSION);
  now += STEP;
  return { secret, codes: view.recoveryCodes! };
}

/** The ApiError a promise is rejected with. */
async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const err: unknown = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

describe('start', () => {
  it('answers the secret as a provisioning URL and 20 recovery codes; the store keeps them sealed or as digests', async () => {
    const view = await mfa.start(ALICE);
    expect(view).toEqual({
      id: expect.any(String),
      createdAt: iso(T0),
      updatedAt: iso(T0),
      tags: {},
      isVerified: false,
      provisioningUrl: expect.stringMatching(/^otpauth:\/\/totp\/Alice%20Example\?issuer=Overlay%20Test&secret=[A-Z2-7]{32}$/),
      recoveryCodes: expect.any(Array),
    });
    const codes = view.recoveryCodes!;
    expect(codes).toHaveLength(RECOVERY_CODE_COUNT);
    const r = (await row())!;
    expect(r.id).toBe(view.id);
    expect(Boolean(r.is_verified)).toBe(false);
    expect(r.last_totp_step).toBeNull();
    expect(r.secret).not.toContain(secretOf(view));
    expect(box.open(String(r.secret), view.id)).toBe(secretOf(view));
    expect(String(r.recovery_codes).split(',')).toEqual(codes.map((c) => box.digest(c, view.id)));
    expect(box.open(String(r.pending_recovery_codes), view.id)).toBe(codes.join(','));
    expect(await mfa.isEnrolled(ALICE.id)).toBe(false);
    expect(await mfa.of(BOB.id)).toBeUndefined();
    expect(await mfa.isEnrolled(BOB.id)).toBe(false);
  });

  it('refuses a second enrollment, unconfirmed or confirmed, with 409 MFA_EXISTS', async () => {
    await mfa.start(ALICE);
    const exists = await refusal(mfa.start(ALICE));
    expect([exists.code, exists.message]).toEqual(['MFA_EXISTS', 'an MFA enrollment exists; remove it before starting another']);
    await enrolled(BOB);
    expect((await refusal(mfa.start(BOB))).code).toBe('MFA_EXISTS');
    // Two starts at once: one enrollment, one refusal.
    await mfa.cancel(ALICE.id);
    const both = await Promise.allSettled([mfa.start(ALICE), mfa.start(ALICE)]);
    expect(both.map((s) => s.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(await store.db.selectFrom('mfas').select('id').where('identity_id', '=', ALICE.id).execute()).toHaveLength(1);
  });
});

describe('detail and QR code', () => {
  it('shows the provisioning URL and recovery codes only while unconfirmed', async () => {
    const none = await refusal(mfa.detail(ALICE));
    expect([none.code, none.message]).toEqual(['MFA_ENROLLMENT_NOT_STARTED', 'no MFA enrollment exists for this identity']);
    const started = await mfa.start(ALICE);
    expect(await mfa.detail(ALICE)).toEqual(started);
    await mfa.verify(ALICE.id, totpCode(secretOf(started), now), AT_SESSION);
    const confirmed = await mfa.detail(ALICE);
    expect(confirmed).toEqual({ id: started.id, createdAt: iso(T0), updatedAt: iso(T0), tags: {}, isVerified: true });
    expect(await mfa.isEnrolled(ALICE.id)).toBe(true);
  });

  it('draws the QR code as a PNG of 6-pixel modules with a 4-module margin, while unconfirmed only', async () => {
    const none = await refusal(mfa.qrCode(ALICE));
    expect([none.code, none.message]).toEqual(['NOT_FOUND', 'no unconfirmed MFA enrollment exists for this identity']);
    const view = await mfa.start(ALICE);
    const png = await mfa.qrCode(ALICE);
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    const width = png.readUInt32BE(16);
    expect(png.readUInt32BE(20)).toBe(width);
    expect(width % 6).toBe(0);
    // A QR code of version v has 17 + 4v modules a side.
    const modules = width / 6 - 2 * 4;
    expect((modules - 17) % 4).toBe(0);
    await mfa.verify(ALICE.id, totpCode(secretOf(view), now), AT_SESSION);
    expect((await refusal(mfa.qrCode(ALICE))).code).toBe('NOT_FOUND');
  });
});

describe('verify', () => {
  it('confirms with a live code: the pending recovery codes are dropped, the digests kept', async () => {
    const view = await mfa.start(ALICE);
    now += 10 * STEP;
    changes = [];
    await mfa.verify(ALICE.id, totpCode(secretOf(view), now), AT_SESSION);
    const r = (await row())!;
    expect(Boolean(r.is_verified)).toBe(true);
    expect(r.pending_recovery_codes).toBeNull();
    expect(String(r.recovery_codes).split(',')).toHaveLength(RECOVERY_CODE_COUNT);
    expect(r.last_totp_step).toBe(Math.floor(now / STEP));
    expect(r.updated_at).toBe(iso(now));
    expect(changes).toContainEqual({ collection: 'mfas', kind: 'update', id: view.id, ownerId: ALICE.id });
  });

  it('refuses a wrong code, a recovery code, and an enrollment missing or confirmed', async () => {
    const none = await refusal(mfa.verify(ALICE.id, '123456', AT_SESSION));
    expect([none.code, none.message]).toEqual(['MFA_ENROLLMENT_NOT_STARTED', 'no unconfirmed MFA enrollment exists for this identity']);
    const view = await mfa.start(ALICE);
    const secret = secretOf(view);
    const wrong = await refusal(mfa.verify(ALICE.id, totpCode(secret, now + 5 * STEP), AT_SESSION));
    expect([wrong.code, wrong.message, wrong.status]).toEqual(['MFA_INVALID_TOKEN', 'the code is not valid', 401]);
    expect(wrong.cause).toEqual({ field: 'code', reason: 'is not a valid TOTP or recovery code' });
    expect((await refusal(mfa.verify(ALICE.id, view.recoveryCodes![0]!, AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    expect(Boolean((await row())!.is_verified)).toBe(false);
    await mfa.verify(ALICE.id, totpCode(secret, now), AT_SESSION);
    now += STEP;
    expect((await refusal(mfa.verify(ALICE.id, totpCode(secret, now), AT_SESSION))).code).toBe('MFA_ENROLLMENT_NOT_STARTED');
  });
});

describe('authenticate', () => {
  it('refuses an identity without a confirmed enrollment with 409 MFA_NOT_ENROLLED', async () => {
    const none = await refusal(mfa.authenticate(ALICE.id, '123456', AT_SESSION));
    expect([none.code, none.message]).toEqual(['MFA_NOT_ENROLLED', 'the identity has no confirmed MFA enrollment']);
    const view = await mfa.start(ALICE);
    const err = await refusal(mfa.authenticate(ALICE.id, totpCode(secretOf(view), now), AT_SESSION));
    expect([err.code, err.status]).toEqual(['MFA_NOT_ENROLLED', 409]);
  });

  it('takes a TOTP code once: the same code again, or one of an earlier step, is refused', async () => {
    const { secret } = await enrolled();
    changes = [];
    const code = totpCode(secret, now);
    expect(await mfa.authenticate(ALICE.id, code, AT_SESSION)).toBe('totp');
    expect((await row())!.last_totp_step).toBe(Math.floor(now / STEP));
    expect((await row())!.updated_at).toBe(iso(now));
    expect(changes).toEqual([{ collection: 'mfas', kind: 'update', id: (await row())!.id, ownerId: ALICE.id }]);
    expect((await refusal(mfa.authenticate(ALICE.id, code, AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    // The next step's code (in the window) passes; then the current one, earlier, no longer does.
    expect(await mfa.authenticate(ALICE.id, totpCode(secret, now + STEP), AT_SESSION)).toBe('totp');
    expect((await refusal(mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    now += 2 * STEP;
    expect(await mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION)).toBe('totp');
    // Nothing else moved with the refusals.
    expect(changes).toHaveLength(3);
  });

  it('two requests with the same code: one passes', async () => {
    const { secret } = await enrolled();
    const code = totpCode(secret, now);
    const both = await Promise.allSettled([mfa.authenticate(ALICE.id, code, AT_SESSION), mfa.authenticate(ALICE.id, code, { apiSessionId: 's-2' })]);
    expect(both.map((s) => s.status).sort()).toEqual(['fulfilled', 'rejected']);
  });

  it('takes a recovery code once, typed in any case with spaces around, unless recovery codes are not taken', async () => {
    const { codes } = await enrolled();
    const [first, second] = codes as [string, string];
    const id = (await row())!.id;
    expect((await refusal(mfa.authenticate(ALICE.id, second, AT_SESSION, { recovery: false }))).code).toBe('MFA_INVALID_TOKEN');
    now += STEP;
    changes = [];
    expect(await mfa.authenticate(ALICE.id, `  ${first.toLowerCase()} `, AT_SESSION)).toBe('recovery');
    expect(changes).toEqual([{ collection: 'mfas', kind: 'update', id, ownerId: ALICE.id }]);
    const left = String((await row())!.recovery_codes).split(',');
    expect(left).toEqual(codes.slice(1).map((c) => box.digest(c, id)));
    expect((await row())!.updated_at).toBe(iso(now));
    expect((await refusal(mfa.authenticate(ALICE.id, first, AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    expect(await mfa.authenticate(ALICE.id, second, AT_SESSION, { recovery: true })).toBe('recovery');
    // A code of another enrollment, or not a code at all, is no recovery code.
    const other = await enrolled(BOB);
    // Past the window of the wrong codes above, so these few are not limited.
    now += MFA_WINDOW_MS;
    for (const wrong of [other.codes[0]!, 'ABC1', 'ABCDEFG', 'ABCDE1', '']) {
      expect((await refusal(mfa.authenticate(ALICE.id, wrong, { apiSessionId: `s-${wrong}` }))).code).toBe('MFA_INVALID_TOKEN');
    }
    expect(String((await row())!.recovery_codes).split(',')).toHaveLength(RECOVERY_CODE_COUNT - 2);
  });

  it('takes the last recovery code, and then none', async () => {
    const { codes } = await enrolled();
    const id = (await row())!.id;
    await store.db.updateTable('mfas').set({ recovery_codes: box.digest(codes[0]!, id) }).where('id', '=', id).execute();
    expect(await mfa.authenticate(ALICE.id, codes[0]!, AT_SESSION)).toBe('recovery');
    expect((await row())!.recovery_codes).toBe('');
    expect((await refusal(mfa.authenticate(ALICE.id, codes[0]!, AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    const shown = await mfa.recoveryCodes(ALICE, totpCode((await enrolledSecret())!, now), AT_SESSION);
    expect(shown.remaining).toBe(0);
  });

  it('refuses a code of an enrollment removed meanwhile', async () => {
    const { secret, codes } = await enrolled();
    const stale = (await mfa.of(ALICE.id))!;
    await store.db.deleteFrom('mfas').where('id', '=', stale.id).execute();
    vi.spyOn(mfa, 'of').mockResolvedValue(stale);
    expect((await refusal(mfa.authenticate(ALICE.id, codes[0]!, AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    expect((await refusal(mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
  });

  it('commits what the caller writes with the code taken, and nothing when the code is wrong', async () => {
    const { secret, codes } = await enrolled();
    const sessions = new ApiSessions(kernel, clock, 30 * 60_000);
    const { session } = await sessions.create({
      identityId: ALICE.id,
      authenticatorId: 'a-1',
      authMethod: 'password',
      configTypes: [],
      ipAddress: '192.0.2.7',
      isMfaRequired: true,
      isCertExtendable: false,
    });
    const passed = async () => (await store.db.selectFrom('api_sessions').select('mfa_passed_at').where('id', '=', session.id).executeTakeFirst())!.mfa_passed_at;
    const alsoWrite = (ctx: Parameters<typeof sessions.mfaCompleteIn>[0]) => sessions.mfaCompleteIn(ctx, session);
    await refusal(mfa.authenticate(ALICE.id, totpCode(secret, now + 5 * STEP), AT_SESSION, { alsoWrite }));
    expect(await passed()).toBeNull();
    expect(await mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION, { alsoWrite })).toBe('totp');
    expect(await passed()).toBe(iso(now));
    now += STEP;
    expect(await mfa.authenticate(ALICE.id, codes[0]!, AT_SESSION, { alsoWrite })).toBe('recovery');
    expect(await passed()).toBe(iso(now));
    await sessions.stop();
  });

  it('a write of the caller that fails takes no code and counts no wrong code', async () => {
    const { secret, codes } = await enrolled();
    const alsoWrite = () => Promise.reject(new Error('the disk is full'));
    // More failures than wrong codes are allowed: none is counted, so none is refused with 429.
    for (let i = 0; i < 7; i++) {
      await expect(mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION, { alsoWrite })).rejects.toThrow('the disk is full');
    }
    await expect(mfa.authenticate(ALICE.id, codes[0]!, AT_SESSION, { alsoWrite })).rejects.toThrow('the disk is full');
    expect((await row())!.last_totp_step).toBe(Math.floor((now - STEP) / STEP));
    expect(await mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION)).toBe('totp');
    expect(await mfa.authenticate(ALICE.id, codes[0]!, AT_SESSION)).toBe('recovery');
  });
});

/** The secret of Alice's enrollment, from the store. */
async function enrolledSecret(): Promise<string | undefined> {
  const r = await row();
  return r ? box.open(String(r.secret), String(r.id)) : undefined;
}

describe('wrong codes', () => {
  it('allows 5 per API session and identity in 5 minutes, then 429 with Retry-After until the window passes', async () => {
    const { secret } = await enrolled();
    for (let i = 0; i < 5; i++) {
      expect((await refusal(mfa.authenticate(ALICE.id, '000000', AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
      now += 1000;
    }
    const limited = await refusal(mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION));
    expect([limited.code, limited.message, limited.status]).toEqual(['SERVER_TOO_MANY_REQUESTS', 'too many wrong codes; try again later', 429]);
    // The first failure, 5 s ago, leaves the window in 295 s.
    expect(limited.headers).toEqual({ 'retry-after': '295' });
    // The identity is limited in its other sessions too.
    expect((await refusal(mfa.authenticate(ALICE.id, totpCode(secret, now), { apiSessionId: 's-2' }))).code).toBe('SERVER_TOO_MANY_REQUESTS');
    now = T0 + STEP + MFA_WINDOW_MS;
    expect(await mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION)).toBe('totp');
  });

  it('a right code before the limit does not count', async () => {
    const { secret } = await enrolled();
    for (let i = 0; i < 4; i++) await refusal(mfa.authenticate(ALICE.id, '000000', AT_SESSION));
    for (let i = 0; i < 3; i++) {
      expect(await mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION)).toBe('totp');
      now += STEP;
    }
    expect((await refusal(mfa.authenticate(ALICE.id, '000000', AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    expect((await refusal(mfa.authenticate(ALICE.id, '000000', AT_SESSION))).code).toBe('SERVER_TOO_MANY_REQUESTS');
  });

  it('counts per API session or per authorization request, each apart, besides the identity', async () => {
    const a = await enrolled(ALICE);
    const b = await enrolled(BOB);
    for (let i = 0; i < 5; i++) await refusal(mfa.authenticate(ALICE.id, '000000', { authRequestId: 'r-1' }));
    // Bob through the same authorization request is refused; through another, or an API session of that id, not.
    expect((await refusal(mfa.authenticate(BOB.id, totpCode(b.secret, now), { authRequestId: 'r-1' }))).code).toBe('SERVER_TOO_MANY_REQUESTS');
    expect(await mfa.authenticate(BOB.id, totpCode(b.secret, now), { authRequestId: 'r-2' })).toBe('totp');
    now += STEP;
    expect(await mfa.authenticate(BOB.id, totpCode(b.secret, now), { apiSessionId: 'r-1' })).toBe('totp');

    // Once those failures have left the window, the same with an API session.
    now += MFA_WINDOW_MS;
    for (let i = 0; i < 5; i++) await refusal(mfa.authenticate(BOB.id, '000000', { apiSessionId: 's-9' }));
    expect((await refusal(mfa.authenticate(ALICE.id, totpCode(a.secret, now), { apiSessionId: 's-9' }))).code).toBe('SERVER_TOO_MANY_REQUESTS');
    expect(await mfa.authenticate(ALICE.id, totpCode(a.secret, now), { authRequestId: 's-9' })).toBe('totp');
    now += STEP;
    expect(await mfa.authenticate(ALICE.id, totpCode(a.secret, now), { apiSessionId: 's-10' })).toBe('totp');
    expect((await refusal(mfa.authenticate(BOB.id, b.codes[0]!, { apiSessionId: 's-10' }))).code).toBe('SERVER_TOO_MANY_REQUESTS');
  });
});

describe('remove and cancel', () => {
  it('removes an unconfirmed enrollment without a code', async () => {
    const view = await mfa.start(ALICE);
    changes = [];
    await mfa.remove(ALICE.id, '', AT_SESSION);
    expect(await row()).toBeUndefined();
    expect(changes).toEqual([{ collection: 'mfas', kind: 'delete', id: view.id, ownerId: ALICE.id }]);
    expect((await refusal(mfa.remove(ALICE.id, '', AT_SESSION))).code).toBe('MFA_ENROLLMENT_NOT_STARTED');
  });

  it('removes a confirmed enrollment with a TOTP or recovery code; its sessions no longer count as having passed MFA', async () => {
    const { secret } = await enrolled();
    const sessions = new ApiSessions(kernel, clock, 30 * 60_000);
    const made = async (identityId: string) =>
      (
        await sessions.create({
          identityId,
          authenticatorId: 'a-1',
          authMethod: 'password',
          configTypes: [],
          ipAddress: '192.0.2.7',
          isMfaRequired: true,
          isCertExtendable: false,
        })
      ).session;
    const [passed, notPassed, bobs] = [await made(ALICE.id), await made(ALICE.id), await made(BOB.id)];
    await sessions.setMfaComplete(passed);
    await sessions.setMfaComplete(bobs);
    expect((await refusal(mfa.remove(ALICE.id, '', AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    expect((await refusal(mfa.remove(ALICE.id, '000000', AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    expect(await row()).toBeDefined();
    const id = (await row())!.id;
    changes = [];
    await mfa.remove(ALICE.id, totpCode(secret, now), AT_SESSION);
    expect(await row()).toBeUndefined();
    const passedAt = async (sid: string) => (await store.db.selectFrom('api_sessions').select('mfa_passed_at').where('id', '=', sid).executeTakeFirst())!.mfa_passed_at;
    expect(await passedAt(passed.id)).toBeNull();
    expect(await passedAt(bobs.id)).toBe(iso(now));
    expect(changes).toContainEqual({ collection: 'mfas', kind: 'delete', id, ownerId: ALICE.id });
    expect(changes.filter((c) => c.collection === 'api-sessions')).toEqual([{ collection: 'api-sessions', kind: 'update', id: passed.id, ownerId: ALICE.id }]);
    expect(notPassed.id).not.toBe(passed.id);

    const again = await enrolled();
    await mfa.remove(ALICE.id, again.codes[3]!, AT_SESSION);
    expect(await row()).toBeUndefined();
    await sessions.stop();
  });

  it('endMfaPasses inside a write changes nothing for an identity whose sessions never passed', async () => {
    changes = [];
    await kernel.write((ctx) => endMfaPasses(ctx, ALICE.id));
    expect(changes).toEqual([]);
  });

  it('an enrollment confirmed meanwhile is not removed without a code, nor cancelled', async () => {
    const view = await mfa.start(ALICE);
    const stale = (await mfa.of(ALICE.id))!;
    await mfa.verify(ALICE.id, totpCode(secretOf(view), now), AT_SESSION);
    changes = [];
    vi.spyOn(mfa, 'of').mockResolvedValue(stale);
    expect((await refusal(mfa.remove(ALICE.id, '', AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    expect((await refusal(mfa.cancel(ALICE.id))).code).toBe('MFA_ENROLLMENT_NOT_STARTED');
    expect(await row()).toBeDefined();
    expect(changes).toEqual([]);
  });

  it('cancels an unconfirmed enrollment only', async () => {
    const none = await refusal(mfa.cancel(ALICE.id));
    expect([none.code, none.message]).toEqual(['MFA_ENROLLMENT_NOT_STARTED', 'no unconfirmed MFA enrollment exists for this identity']);
    const view = await mfa.start(ALICE);
    changes = [];
    await mfa.cancel(ALICE.id);
    expect(await row()).toBeUndefined();
    expect(changes).toEqual([{ collection: 'mfas', kind: 'delete', id: view.id, ownerId: ALICE.id }]);
    await enrolled();
    expect((await refusal(mfa.cancel(ALICE.id))).code).toBe('MFA_ENROLLMENT_NOT_STARTED');
    expect(await row()).toBeDefined();
  });
});

describe('recovery codes', () => {
  it('are read of a confirmed enrollment only, after a code: how many are left, never the codes', async () => {
    expect((await refusal(mfa.recoveryCodes(ALICE, '123456', AT_SESSION))).code).toBe('MFA_ENROLLMENT_NOT_STARTED');
    const view = await mfa.start(ALICE);
    const secret = secretOf(view);
    expect((await refusal(mfa.recoveryCodes(ALICE, totpCode(secret, now), AT_SESSION))).code).toBe('MFA_ENROLLMENT_NOT_STARTED');
    await mfa.verify(ALICE.id, totpCode(secret, now), AT_SESSION);
    now += STEP;
    expect((await refusal(mfa.recoveryCodes(ALICE, '000000', AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    expect((await refusal(mfa.recoveryCodes(ALICE, '', AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    const confirmed = await mfa.recoveryCodes(ALICE, view.recoveryCodes![0]!, AT_SESSION);
    expect(confirmed).toEqual({ id: view.id, createdAt: iso(T0), updatedAt: iso(now), tags: {}, isVerified: true, recoveryCodes: [], remaining: RECOVERY_CODE_COUNT - 1 });
  });

  it('regenerates them for a confirmed enrollment after a code: the old ones stop working', async () => {
    expect((await refusal(mfa.regenerate(ALICE.id, '123456', AT_SESSION))).code).toBe('MFA_ENROLLMENT_NOT_STARTED');
    const view = await mfa.start(ALICE);
    expect((await refusal(mfa.regenerate(ALICE.id, totpCode(secretOf(view), now), AT_SESSION))).code).toBe('MFA_ENROLLMENT_NOT_STARTED');
    await mfa.verify(ALICE.id, totpCode(secretOf(view), now), AT_SESSION);
    now += STEP;
    expect((await refusal(mfa.regenerate(ALICE.id, '000000', AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    const fresh = await mfa.regenerate(ALICE.id, totpCode(secretOf(view), now), AT_SESSION);
    expect(fresh).toHaveLength(RECOVERY_CODE_COUNT);
    expect(fresh).not.toEqual(view.recoveryCodes);
    expect(String((await row())!.recovery_codes).split(',')).toEqual(fresh.map((c) => box.digest(c, view.id)));
    expect((await row())!.updated_at).toBe(iso(now));
    expect((await refusal(mfa.authenticate(ALICE.id, view.recoveryCodes![1]!, AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
    expect(await mfa.authenticate(ALICE.id, fresh[1]!, AT_SESSION)).toBe('recovery');
    // A recovery code is taken too, and used up.
    const again = await mfa.regenerate(ALICE.id, fresh[2]!, AT_SESSION);
    expect(String((await row())!.recovery_codes).split(',')).toEqual(again.map((c) => box.digest(c, view.id)));
    expect((await refusal(mfa.regenerate(ALICE.id, fresh[2]!, AT_SESSION))).code).toBe('MFA_INVALID_TOKEN');
  });
});

describe('the enrollments kept in memory', () => {
  it('keeps an identity without one as such, and sees one started, confirmed and removed', async () => {
    const reads = vi.spyOn(kernel.repo('mfas'), 'findBy');
    expect(await mfa.isEnrolled(ALICE.id)).toBe(false);
    expect(await mfa.isEnrolled(ALICE.id)).toBe(false);
    expect(reads).toHaveBeenCalledTimes(1);
    const { secret } = await enrolled();
    expect(await mfa.isEnrolled(ALICE.id)).toBe(true);
    expect(await mfa.isEnrolled(ALICE.id)).toBe(true);
    // Read again after each change of the enrollment, and then kept.
    expect(reads.mock.calls.length).toBeLessThanOrEqual(4);
    const called = reads.mock.calls.length;
    await mfa.remove(ALICE.id, totpCode(secret, now), AT_SESSION);
    expect(await mfa.isEnrolled(ALICE.id)).toBe(false);
    expect(reads.mock.calls.length).toBe(called + 1);
  });

  it('keeps what a code taken stored, without reading it back; a write of another kind is read again', async () => {
    const { secret, codes } = await enrolled();
    const before = (await mfa.of(ALICE.id))!;
    const reads = vi.spyOn(kernel.repo('mfas'), 'findBy');
    await mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION);
    await mfa.authenticate(ALICE.id, codes[0]!, AT_SESSION);
    const kept = (await mfa.of(ALICE.id))!;
    expect(reads).not.toHaveBeenCalled();
    // What memory holds is the row as stored, field for field.
    const stored = (await kernel.repo('mfas').get(store.db, before.id))!;
    expect(kept).toEqual(stored);
    expect(kept.lastTotpStep).toBe(Math.floor(now / STEP));
    expect(kept.recoveryCodes.split(',')).toHaveLength(RECOVERY_CODE_COUNT - 1);
    // The same code again is refused by the store, whatever memory holds.
    await expect(mfa.authenticate(ALICE.id, totpCode(secret, now), AT_SESSION)).rejects.toMatchObject({ code: 'MFA_INVALID_TOKEN' });
    await expect(mfa.authenticate(ALICE.id, codes[0]!, AT_SESSION)).rejects.toMatchObject({ code: 'MFA_INVALID_TOKEN' });
    // Regenerated codes are a write without an after-image: read again.
    await mfa.regenerate(ALICE.id, codes[1]!, AT_SESSION);
    await mfa.of(ALICE.id);
    expect(reads).toHaveBeenCalledTimes(1);
    expect(await mfa.of(ALICE.id)).toEqual(await kernel.repo('mfas').get(store.db, before.id));
  });

  it('forgets the enrollment of a deleted identity, and everything on a reset', async () => {
    await enrolled();
    await enrolled(BOB);
    expect(await mfa.isEnrolled(ALICE.id)).toBe(true);
    expect(await mfa.isEnrolled(BOB.id)).toBe(true);
    // Deleted with its identity by the store's cascade: only the identity's change is announced.
    await kernel.write((ctx) => ctx.remove('identities', ALICE.id));
    expect(await mfa.isEnrolled(ALICE.id)).toBe(false);
    // Written behind the kernel's back (a restored snapshot, say): seen after a reset only.
    await store.db.deleteFrom('mfas').where('identity_id', '=', BOB.id).execute();
    expect(await mfa.isEnrolled(BOB.id)).toBe(true);
    mfa.reset();
    expect(await mfa.isEnrolled(BOB.id)).toBe(false);
  });

  it('a change without its identity empties the lot', async () => {
    await enrolled();
    expect(await mfa.isEnrolled(ALICE.id)).toBe(true);
    await store.db.deleteFrom('mfas').execute();
    mfa.onChange({ collection: 'mfas', kind: 'delete', id: 'unknown' });
    expect(await mfa.isEnrolled(ALICE.id)).toBe(false);
  });
});
