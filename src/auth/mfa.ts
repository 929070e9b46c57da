// TOTP multi-factor authentication of identities (controller-interface.md, "TOTP MFA enrollment of an
// identity"; behaviour.md §5): enrollment, its confirmation by a live code, removal, recovery codes,
// and the check of a code when a login or an operation asks for one. The secret is sealed with the
// data directory's key; recovery codes are shown when made (and while the enrollment is unconfirmed)
// and kept as keyed digests once it is confirmed. A code is accepted once: the step of the last
// TOTP code taken and the set of unused recovery codes change with conditional updates, so two
// requests carrying the same code cannot both pass. Wrong codes are limited per API session or
// authorization request and per identity (5 in 5 minutes), the place taken before the check runs.
//
// Enrollments are kept in memory by identity, the absence of one too (every login asks whether
// there is one), following the change feed; the checks that take a code are decided by the store.
import QRCode from 'qrcode';
import { ApiError } from '../errors.js';
import type { Clock } from '../clock.js';
import { newUuid } from '../ids.js';
import type { Kernel, WriteContext } from '../kernel/kernel.js';
import { withOwner } from '../kernel/kernel.js';
import { BoundedMap } from '../kernel/bounded-map.js';
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import type { EntityOf } from '../resources/index.js';
import { constantTimeEqual } from './tokens.js';
import type { SecretBox } from './secret-box.js';
import { FailureThrottle } from './throttle.js';
import { template, type Template } from '../store/template.js';
import { matchingStep, newRecoveryCodes, newTotpSecret, normalRecoveryCode, normalTotpCode, provisioningUrl } from './totp.js';

type MfaEntity = EntityOf<'mfas'>;

/** Wrong codes allowed per API session or authorization request (and per identity) in the window. */
export const MFA_WRONG_CODES = 5;
export const MFA_WINDOW_MS = 5 * 60_000;

/** Identities whose enrollment (or its absence) is kept in memory at most. */
const MAX_KEPT_ENROLLMENTS = 10_000;

/** Whose attempts a code check counts against, besides the identity's. */
export type AttemptScope = { apiSessionId: string } | { authRequestId: string };

/** An enrollment as its identity sees it. */
export interface MfaView {
  id: string;
  createdAt: string;
  updatedAt: string;
  tags: MfaEntity['tags'];
  isVerified: boolean;
  /** While unconfirmed only. */
  provisioningUrl?: string;
  /** While unconfirmed only (once confirmed they are kept as digests). */
  recoveryCodes?: string[];
}

/** How a code was accepted. */
export type CodeKind = 'totp' | 'recovery';

/** Options of a code check: whether a recovery code is taken, and what to write with the code taken. */
export interface CodeCheck {
  recovery: boolean;
  /** Runs in the transaction that takes the code, so what it writes commits with it (or not at all). */
  alsoWrite?: (ctx: WriteContext) => Promise<void>;
}

export interface MfaDeps {
  kernel: Kernel;
  clock: Clock;
  box: SecretBox;
  /** The issuer named in provisioning URLs (edge.totp.issuer). */
  issuer: string;
}

function notStarted(): ApiError {
  return new ApiError('MFA_ENROLLMENT_NOT_STARTED', 'no MFA enrollment exists for this identity');
}

function invalidCode(): ApiError {
  return new ApiError('MFA_INVALID_TOKEN', 'the code is not valid', { field: 'code', reason: 'is not a valid TOTP or recovery code' });
}

/**
 * Inside the write removing an identity's enrollment: its API sessions no longer count as having
 * passed MFA for posture checks (they stay logged in; what they reach may shrink).
 */
export async function endMfaPasses(ctx: Pick<WriteContext, 'tx' | 'changed'>, identityId: string): Promise<void> {
  // Read first: the audit log shows when each pass was given (an update returns only what it set).
  const ended = await ctx.tx
    .selectFrom('api_sessions')
    .select(['id', 'mfa_passed_at'])
    .where('identity_id', '=', identityId)
    .where('mfa_passed_at', 'is not', null)
    .execute();
  if (ended.length === 0) return;
  await ctx.tx.updateTable('api_sessions').set({ mfa_passed_at: null }).where('identity_id', '=', identityId).where('mfa_passed_at', 'is not', null).execute();
  for (const r of ended) {
    ctx.changed({ collection: 'api-sessions', kind: 'update', id: String(r.id), ownerId: identityId }, { before: { mfaPassedAt: r.mfa_passed_at }, after: { mfaPassedAt: null } });
  }
}

export class Mfa implements Cache {
  readonly name = 'mfa-enrollments';
  private readonly attempts: FailureThrottle;
  /** Identity id → its enrollment, or none. */
  private readonly enrollments = new BoundedMap<string, { mfa: MfaEntity | undefined }>({ maxEntries: MAX_KEPT_ENROLLMENTS });
  /**
   * Enrollment id → what this process's own write of it stored, from its commit until its change
   * arrives: that change then keeps it rather than leaving it to be read back.
   */
  private readonly written = new Map<string, MfaEntity>();
  /** The conditional writes that take a code, compiled once (a login's second factor is a hot path). */
  private readonly takes: { totp: Template; recovery: Template };

  constructor(private readonly deps: MfaDeps) {
    // The throttle refuses once more than `limit` failures are in the window, so 4 lets 5 through.
    this.attempts = new FailureThrottle(deps.clock, MFA_WRONG_CODES - 1, MFA_WINDOW_MS);
    const db = deps.kernel.store.db;
    this.takes = {
      // Only a step later than the last one taken: a code passes once.
      totp: template(
        db
          .updateTable('mfas')
          .set({ last_totp_step: ':step', updated_at: ':now' })
          .where('id', '=', ':id')
          .where((eb) => eb.or([eb('last_totp_step', 'is', null), eb('last_totp_step', '<', ':step')]))
          .compile(),
        [':step', ':now', ':id'],
      ),
      // Only if no other request used a code meanwhile (on PostgreSQL two transactions may both read).
      recovery: template(
        db.updateTable('mfas').set({ recovery_codes: ':left', updated_at: ':now' }).where('id', '=', ':id').where('recovery_codes', '=', ':stored').compile(),
        [':left', ':now', ':id', ':stored'],
      ),
    };
  }

  /** The enrollment of an identity, confirmed or not. */
  async of(identityId: string): Promise<MfaEntity | undefined> {
    const kept = this.enrollments.get(identityId);
    if (kept) return kept.mfa;
    const seen = this.enrollments.drops;
    const mfa = await this.deps.kernel.repo('mfas').findBy(this.deps.kernel.store.db, 'identityId', identityId);
    this.enrollments.setIfUnchanged(identityId, { mfa }, seen);
    return mfa;
  }

  onChange(change: Change): void {
    if (change.collection === 'mfas') {
      const written = this.written.get(change.id);
      this.written.delete(change.id);
      // Every write of an enrollment names its identity; one that does not empties the lot. A
      // change that is the one a code taken here wrote keeps what it stored.
      if (change.ownerId === undefined) this.enrollments.clear();
      else {
        this.enrollments.delete(change.ownerId);
        if (written && change.kind === 'update') this.enrollments.set(change.ownerId, { mfa: written });
      }
    } else if (change.collection === 'identities' && change.kind === 'delete') {
      // Its enrollment went with it (the store cascades).
      this.enrollments.delete(change.id);
    }
  }

  reset(): void {
    this.enrollments.clear();
    this.written.clear();
  }

  /** Whether the identity has a confirmed enrollment (every login then asks for a code). */
  async isEnrolled(identityId: string): Promise<boolean> {
    return (await this.of(identityId))?.isVerified === true;
  }

  /** Starts an enrollment: 409 MFA_EXISTS while one exists, confirmed or not. */
  async start(identity: { id: string; name: string }): Promise<MfaView> {
    const secret = newTotpSecret();
    const codes = newRecoveryCodes();
    const id = newUuid(this.deps.clock());
    const { box } = this.deps;
    const created = await this.deps.kernel.write(async (ctx) => {
      const existing = await ctx.tx.selectFrom('mfas').select('id').where('identity_id', '=', identity.id).executeTakeFirst();
      if (existing) return false;
      await ctx.insert('mfas', {
        id,
        createdAt: ctx.now,
        updatedAt: ctx.now,
        tags: {},
        identityId: identity.id,
        isVerified: false,
        secret: box.seal(secret, id),
        recoveryCodes: this.digests(codes, id),
        pendingRecoveryCodes: box.seal(codes.join(','), id),
        lastTotpStep: null,
      });
      return true;
    });
    // Two starts at once: the store's unique identity lets one insert; the other finds it here.
    if (!created) throw new ApiError('MFA_EXISTS', 'an MFA enrollment exists; remove it before starting another');
    return this.view((await this.of(identity.id))!, identity.name);
  }

  /** The enrollment as its identity sees it; 404 when none. */
  async detail(identity: { id: string; name: string }): Promise<MfaView> {
    const mfa = await this.of(identity.id);
    if (!mfa) throw notStarted();
    return this.view(mfa, identity.name);
  }

  /** The QR code (PNG) of the provisioning URL while the enrollment is unconfirmed; 404 otherwise. */
  async qrCode(identity: { id: string; name: string }): Promise<Buffer> {
    const mfa = await this.of(identity.id);
    if (!mfa || mfa.isVerified) throw new ApiError('NOT_FOUND', 'no unconfirmed MFA enrollment exists for this identity');
    // Stryker: PNG and level M are also the library's defaults, so an empty type or level draws the same.
    return QRCode.toBuffer(this.url(mfa, identity.name), { type: 'png', errorCorrectionLevel: 'M', margin: 4, scale: 6 });
  }

  /**
   * Confirms an unconfirmed enrollment with a live TOTP code (a recovery code is not taken); the code
   * is taken and the enrollment confirmed in one write, with `alsoWrite`'s.
   */
  async verify(identityId: string, code: string, scope: AttemptScope, alsoWrite?: CodeCheck['alsoWrite']): Promise<void> {
    const mfa = await this.of(identityId);
    if (!mfa || mfa.isVerified) throw new ApiError('MFA_ENROLLMENT_NOT_STARTED', 'no unconfirmed MFA enrollment exists for this identity');
    await this.checked(mfa, code, scope, {
      recovery: false,
      alsoWrite: async (ctx) => {
        await ctx.update('mfas', mfa.id, { isVerified: true, pendingRecoveryCodes: null, updatedAt: ctx.now }, identityId);
        // The code's after-image is not the confirmed enrollment: read it back instead.
        ctx.afterCommit(() => this.written.delete(mfa.id));
        await alsoWrite?.(ctx);
      },
    });
  }

  /**
   * Removes the identity's own enrollment: a confirmed one takes a TOTP or recovery code, an
   * unconfirmed one none (its code is empty).
   */
  async remove(identityId: string, code: string, scope: AttemptScope): Promise<void> {
    const mfa = await this.of(identityId);
    if (!mfa) throw notStarted();
    if (!mfa.isVerified) {
      // Confirmed meanwhile: it now takes a code, and the empty one given is not one.
      if (!(await this.removeUnconfirmed(mfa))) throw invalidCode();
      return;
    }
    // In the write that takes the code: both happen, or neither.
    await this.checked(mfa, code, scope, {
      recovery: true,
      alsoWrite: async (ctx) => {
        await ctx.remove('mfas', mfa.id, identityId);
        await endMfaPasses(ctx, identityId);
      },
    });
  }

  /**
   * Abandons an unconfirmed enrollment (no code: none was ever confirmed). 404 when the identity has
   * none, or only a confirmed one, which is removed with a code (`remove`).
   */
  async cancel(identityId: string): Promise<void> {
    const mfa = await this.of(identityId);
    if (!mfa || mfa.isVerified || !(await this.removeUnconfirmed(mfa))) {
      throw new ApiError('MFA_ENROLLMENT_NOT_STARTED', 'no unconfirmed MFA enrollment exists for this identity');
    }
  }

  /**
   * What can be shown of the recovery codes of a confirmed enrollment, after a valid code: only their
   * digests are kept, so no code is shown and `remaining` tells how many are unused (new ones are made
   * with `regenerate`). As in the established controller, an unconfirmed enrollment has none to read
   * (404) and no code is a wrong one (401), not counted as an attempt: nothing was guessed.
   */
  async recoveryCodes(identity: { id: string; name: string }, code: string, scope: AttemptScope): Promise<MfaView & { remaining: number }> {
    const mfa = await this.of(identity.id);
    if (!mfa || !mfa.isVerified) throw notStarted();
    if (code === '') throw invalidCode();
    await this.checked(mfa, code, scope, { recovery: true });
    const now = (await this.of(identity.id)) ?? mfa;
    return { ...this.view(now, identity.name), recoveryCodes: [], remaining: this.storedDigests(now).length };
  }

  /** Replaces every recovery code of a confirmed enrollment after a valid code; answers the new ones. */
  async regenerate(identityId: string, code: string, scope: AttemptScope): Promise<string[]> {
    const mfa = await this.of(identityId);
    if (!mfa || !mfa.isVerified) throw notStarted();
    const codes = newRecoveryCodes();
    // In the write that takes the code: both happen, or neither.
    await this.checked(mfa, code, scope, {
      recovery: true,
      alsoWrite: async (ctx) => {
        await ctx.update('mfas', mfa.id, { recoveryCodes: this.digests(codes, mfa.id), updatedAt: ctx.now }, identityId);
        // The code's after-image is not what is stored now: read it back instead.
        ctx.afterCommit(() => this.written.delete(mfa.id));
      },
    });
    return codes;
  }

  /**
   * The second factor of a login: a TOTP code, or an unused recovery code (then used up) unless
   * `recovery` is false. 409 MFA_NOT_ENROLLED without a confirmed enrollment.
   */
  async authenticate(identityId: string, code: string, scope: AttemptScope, opts: Partial<CodeCheck> = {}): Promise<CodeKind> {
    const mfa = await this.of(identityId);
    if (!mfa || !mfa.isVerified) throw new ApiError('MFA_NOT_ENROLLED', 'the identity has no confirmed MFA enrollment');
    return this.checked(mfa, code, scope, { ...opts, recovery: opts.recovery ?? true });
  }

  // ---- internals ------------------------------------------------------------------------------

  /**
   * Checks a code under the attempt limit: 429 with Retry-After beyond it, 401 MFA_INVALID_TOKEN
   * when wrong (counted). A TOTP code is taken only if its step is later than the last one taken;
   * a recovery code is used up. Both happen in one conditional write, so a code passes once.
   */
  private async checked(mfa: MfaEntity, code: string, scope: AttemptScope, opts: CodeCheck): Promise<CodeKind> {
    const keys = ['apiSessionId' in scope ? `session:${scope.apiSessionId}` : `request:${scope.authRequestId}`, `identity:${mfa.identityId}`];
    const admission = await this.attempts.admit(keys);
    if (!admission.attempt) {
      throw new ApiError('SERVER_TOO_MANY_REQUESTS', 'too many wrong codes; try again later', undefined, {
        'retry-after': String(admission.retryAfter),
      });
    }
    let kind: CodeKind | undefined;
    try {
      kind = (await this.takeTotp(mfa, code, opts)) ? 'totp' : opts.recovery && (await this.takeRecoveryCode(mfa, code, opts)) ? 'recovery' : undefined;
    } catch (err) {
      admission.attempt.release();
      throw err;
    }
    if (kind === undefined) {
      admission.attempt.fail();
      throw invalidCode();
    }
    admission.attempt.release();
    return kind;
  }

  /**
   * Deletes an enrollment only while it is unconfirmed: its pending recovery codes are cleared by the
   * confirmation, so a confirmation that commits first leaves it in place (answers false).
   */
  private async removeUnconfirmed(mfa: MfaEntity): Promise<boolean> {
    return this.deps.kernel.write(async (ctx) => {
      const result = await ctx.tx.deleteFrom('mfas').where('id', '=', mfa.id).where('pending_recovery_codes', 'is not', null).executeTakeFirst();
      const removed = Number(result.numDeletedRows) === 1;
      if (removed) ctx.changed(withOwner({ collection: 'mfas', kind: 'delete', id: mfa.id }, mfa.identityId));
      return removed;
    });
  }

  private async takeTotp(mfa: MfaEntity, code: string, opts: CodeCheck): Promise<boolean> {
    // A recovery code is not opened against the secret: decrypting costs more than the whole check.
    const typed = normalTotpCode(code);
    if (typed === undefined) return false;
    const step = matchingStep(this.deps.box.open(mfa.secret, mfa.id), typed, this.deps.clock());
    if (step === undefined) return false;
    return this.deps.kernel.write(async (ctx) => {
      const current = await this.deps.kernel.repo('mfas').get(ctx.tx, mfa.id);
      if (!current) return false;
      const result = await this.deps.kernel.store.dialect.execute(ctx.tx, this.takes.totp({ ':step': step, ':now': ctx.now, ':id': mfa.id }));
      const after = { ...current, lastTotpStep: step, updatedAt: ctx.now };
      return this.tookCode(ctx, mfa, Number(result.numAffectedRows) === 1, opts, { before: current, after });
    });
  }

  private async takeRecoveryCode(mfa: MfaEntity, code: string, opts: CodeCheck): Promise<boolean> {
    const typed = normalRecoveryCode(code);
    if (typed === undefined) return false;
    const digest = this.deps.box.digest(typed, mfa.id);
    return this.deps.kernel.write(async (ctx) => {
      const current = await this.deps.kernel.repo('mfas').get(ctx.tx, mfa.id);
      if (!current) return false;
      const stored = current.recoveryCodes;
      // Stryker: '' split is [''], and no digest is empty, so the empty list only spares a comparison.
      const digests = stored === '' ? [] : stored.split(',');
      let found = -1;
      // Every digest is compared, so the time taken tells nothing of which matched.
      // Stryker: which of two equal digests is dropped leaves the same list, so `found < 0` cannot be seen.
      for (const [i, d] of digests.entries()) if (constantTimeEqual(d, digest) && found < 0) found = i;
      if (found < 0) return false;
      const left = digests.filter((_, i) => i !== found).join(',');
      const result = await this.deps.kernel.store.dialect.execute(ctx.tx, this.takes.recovery({ ':left': left, ':now': ctx.now, ':id': mfa.id, ':stored': stored }));
      const after = { ...current, recoveryCodes: left, updatedAt: ctx.now };
      // Stryker: on SQLite write transactions run one at a time, so the row just read is updated.
      return this.tookCode(ctx, mfa, Number(result.numAffectedRows) === 1, opts, { before: current, after });
    });
  }

  /**
   * Records the code taken (when it was): `images` are the record before and after, read in the
   * write, so the audit trail reads nothing and the cache keeps the after-image.
   */
  private async tookCode(ctx: WriteContext, mfa: MfaEntity, taken: boolean, opts: CodeCheck, images: { before: MfaEntity; after: MfaEntity }): Promise<boolean> {
    if (!taken) return false;
    ctx.changed(withOwner({ collection: 'mfas', kind: 'update', id: mfa.id }, mfa.identityId), images);
    ctx.afterCommit(() => this.written.set(mfa.id, images.after));
    await opts.alsoWrite?.(ctx);
    return true;
  }

  private digests(codes: readonly string[], mfaId: string): string {
    return codes.map((c) => this.deps.box.digest(c, mfaId)).join(',');
  }

  private storedDigests(mfa: MfaEntity): string[] {
    return mfa.recoveryCodes === '' ? [] : mfa.recoveryCodes.split(',');
  }

  private pendingCodes(mfa: MfaEntity): string[] | undefined {
    // Stryker: the store holds pending codes exactly while unconfirmed (start writes them, confirming
    // clears them), so `&&` would answer the same.
    if (mfa.isVerified || !mfa.pendingRecoveryCodes) return undefined;
    return this.deps.box.open(mfa.pendingRecoveryCodes, mfa.id).split(',');
  }

  private url(mfa: MfaEntity, name: string): string {
    return provisioningUrl(this.deps.issuer, name, this.deps.box.open(mfa.secret, mfa.id));
  }

  private view(mfa: MfaEntity, name: string): MfaView {
    const base = { id: mfa.id, createdAt: mfa.createdAt, updatedAt: mfa.updatedAt, tags: mfa.tags, isVerified: mfa.isVerified === true };
    if (base.isVerified) return base;
    // Stryker: an unconfirmed enrollment always has pending codes; the default is for the type checker.
    return { ...base, provisioningUrl: this.url(mfa, name), recoveryCodes: this.pendingCodes(mfa) ?? [] };
  }
}
