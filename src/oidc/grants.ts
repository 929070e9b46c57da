// Refresh grants in the store: one per OIDC login that asked for offline_access, tied to the login's
// API session. Refresh tokens are opaque, kept only as hashes, rotated on every use; a rotated token
// presented again is reuse, and the caller revokes the whole grant.
import { iso, type Clock } from '../clock.js';
import { newUuid } from '../ids.js';
import { hashToken, newToken } from '../auth/tokens.js';
import { BoundedMap } from '../kernel/bounded-map.js';
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import type { Kernel, WriteContext } from '../kernel/kernel.js';
import type { Store } from '../store/store.js';
import { template, type Template } from '../store/template.js';

export interface Grant {
  id: string;
  apiSessionId: string;
  identityId: string;
  clientId: string;
  scopes: string[];
  amr: string[];
  authTime: number;
  expiresAt: number;
}

export type RefreshOutcome =
  | { kind: 'rotated'; grant: Grant; refreshToken: string; issuedAt: number }
  | { kind: 'unknown' }
  | { kind: 'expired'; grant: Grant }
  /** A token rotated before: the grant must be revoked. */
  | { kind: 'reused'; grant: Grant };

/** What a refresh token must satisfy before it is rotated (client, session, revocations, ...). */
export type RefreshCheck = (grant: Grant, tokenIssuedAt: number) => Promise<void>;

/** Rotations written in one transaction at most. */
const MAX_BATCH = 256;
/** Current refresh tokens remembered at most; the oldest go first (a miss reads the store). */
const MAX_REMEMBERED = 100_000;

/** A refresh token believed current: what the store said, or what this process wrote. */
interface Remembered {
  grant: Grant;
  createdAt: number;
  expiresAt: number;
}

interface Rotation {
  hash: string;
  nextHash: string;
  grantId: string;
  now: string;
  expiresAt: string;
  resolve(rotated: boolean): void;
  reject(err: unknown): void;
}

export class Grants implements Cache {
  readonly name = 'oidc-refresh-tokens';
  private readonly q: {
    find: Template;
    insert: Template;
  };
  private queue: Rotation[] = [];
  private flushing = false;
  /**
   * Token hash → its grant, for tokens this process made or read and has not seen rotated. Only a
   * shortcut for the read: the rotation itself is decided by the store (a token rotated elsewhere,
   * or a grant gone, fails there), so a stale entry can never let a token through twice.
   */
  private readonly remembered: BoundedMap<string, Remembered>;
  /** Grant id → the hashes remembered of its tokens, so a grant's end drops them without a scan. */
  private readonly byGrant = new Map<string, Set<string>>();
  private readonly store: Store;

  constructor(
    /** Every write goes through the kernel, which announces it as a change of `oidc-grants`. */
    private readonly kernel: Kernel,
    private readonly clock: Clock,
    /** Lifetime of each refresh token, ms. */
    private readonly lifetime: number,
    /** Current refresh tokens remembered at most. */
    private readonly maxRemembered = MAX_REMEMBERED,
  ) {
    this.store = kernel.store;
    this.remembered = new BoundedMap<string, Remembered>({
      maxEntries: maxRemembered,
      onDrop: (hash, entry) => {
        const hashes = this.byGrant.get(entry.grant.id);
        hashes?.delete(hash);
        if (hashes?.size === 0) this.byGrant.delete(entry.grant.id);
      },
    });
    const db = this.store.db;
    this.q = {
      find: template(
        db
          .selectFrom('oidc_refresh_tokens as t')
          .innerJoin('oidc_grants as g', 'g.id', 't.grant_id')
          .select([
            't.created_at as token_created_at',
            't.expires_at as token_expires_at',
            't.rotated_at',
            'g.id',
            'g.api_session_id',
            'g.identity_id',
            'g.client_id',
            'g.scopes',
            'g.amr',
            'g.auth_time',
            'g.expires_at',
          ])
          .where('t.token_hash', '=', ':hash')
          .compile(),
        [':hash'],
      ),
      insert: template(
        db
          .insertInto('oidc_refresh_tokens')
          .values({ token_hash: ':hash', grant_id: ':grant', created_at: ':now', expires_at: ':expires' })
          .compile(),
        [':hash', ':grant', ':now', ':expires'],
      ),
    };
  }

  /** Stores a new grant with its first refresh token; answers the token. */
  async create(values: Omit<Grant, 'id' | 'expiresAt'>): Promise<{ grant: Grant; refreshToken: string }> {
    return this.kernel.write((ctx) => this.createIn(ctx, values));
  }

  /** create inside a write of the caller's (the code exchange, with the grant's API session). */
  async createIn({ tx, changed, afterCommit }: WriteContext, values: Omit<Grant, 'id' | 'expiresAt'>): Promise<{ grant: Grant; refreshToken: string }> {
    const now = this.clock();
    const grant: Grant = { ...values, id: newUuid(now), expiresAt: now + this.lifetime };
    const refreshToken = newToken(now);
    const d = this.store.dialect;
    await tx
      .insertInto('oidc_grants')
      .values({
        id: grant.id,
        api_session_id: grant.apiSessionId,
        identity_id: grant.identityId,
        client_id: grant.clientId,
        scopes: d.toDb('json', grant.scopes),
        amr: d.toDb('json', grant.amr),
        auth_time: iso(grant.authTime),
        created_at: iso(now),
        expires_at: iso(grant.expiresAt),
      })
      .execute();
    await d.execute(tx, this.q.insert({ ':hash': hashToken(refreshToken), ':grant': grant.id, ':now': iso(now), ':expires': iso(grant.expiresAt) }));
    changed({ collection: 'oidc-grants', kind: 'create', id: grant.id, ownerId: grant.identityId });
    // Only a grant that was stored is remembered.
    afterCommit(() => this.remember(hashToken(refreshToken), { grant, createdAt: now, expiresAt: grant.expiresAt }));
    return { grant, refreshToken };
  }

  /**
   * Exchanges a refresh token for its successor. `check` runs on a current, unexpired token before
   * anything is written and throws to refuse. Two uses of one token racing each other: one rotates,
   * the other is reuse. Rotations of concurrent requests are written together, one transaction (one
   * sync to disk) for all of them, each answered once its transaction has committed.
   */
  async refresh(token: string, check: RefreshCheck): Promise<RefreshOutcome> {
    const hash = hashToken(token);
    let known = this.remembered.get(hash);
    if (!known) {
      const { rows } = await this.store.db.executeQuery<Record<string, unknown>>(this.q.find({ ':hash': hash }));
      const row = rows[0];
      if (!row) return { kind: 'unknown' };
      const grant = this.grantOf(row);
      if (row.rotated_at !== null) return { kind: 'reused', grant };
      known = { grant, createdAt: Date.parse(row.token_created_at as string), expiresAt: Date.parse(row.token_expires_at as string) };
    }
    const { grant } = known;
    const now = this.clock();
    if (now >= known.expiresAt) {
      this.remembered.delete(hash);
      return { kind: 'expired', grant };
    }
    await check(grant, known.createdAt);

    const next = newToken(now);
    const expiresAt = now + this.lifetime;
    const nextHash = hashToken(next);
    const rotated = await new Promise<boolean>((resolve, reject) => {
      this.queue.push({ hash, nextHash, grantId: grant.id, now: iso(now), expiresAt: iso(expiresAt), resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => void this.flush());
      }
    });
    this.remembered.delete(hash);
    if (!rotated) return { kind: 'reused', grant };
    const successor = { ...grant, expiresAt };
    this.remember(nextHash, { grant: successor, createdAt: now, expiresAt });
    return { kind: 'rotated', grant: successor, refreshToken: next, issuedAt: now };
  }

  /**
   * Writes the queued rotations, a batch per transaction, until none is left. Three statements per
   * batch whatever its size: mark the presented tokens rotated (those not rotated before come
   * back), insert their successors, extend their grants.
   */
  private async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, MAX_BATCH);
      try {
        // A token twice in one batch: the first use rotates it, the second is reuse.
        const first = new Map<string, Rotation>();
        for (const r of batch) if (!first.has(r.hash)) first.set(r.hash, r);
        const rotated = await this.kernel.write(async ({ tx, changed }) => {
          const now = batch[batch.length - 1]!.now;
          const rows = await tx
            .updateTable('oidc_refresh_tokens')
            .set({ rotated_at: now })
            .where('token_hash', 'in', [...first.keys()])
            .where('rotated_at', 'is', null)
            .returning('token_hash')
            .execute();
          const done = new Set(rows.map((row) => row.token_hash as string));
          const winners = [...first.values()].filter((r) => done.has(r.hash));
          if (winners.length > 0) {
            await tx
              .insertInto('oidc_refresh_tokens')
              .values(winners.map((r) => ({ token_hash: r.nextHash, grant_id: r.grantId, created_at: r.now, expires_at: r.expiresAt })))
              .execute();
            // Each grant lives as long as its current token (the one not rotated; the rotations of
            // one batch may have been asked for at different times).
            const grants = [...new Set(winners.map((r) => r.grantId))];
            await tx
              .updateTable('oidc_grants')
              .set((eb) => ({
                expires_at: eb
                  .selectFrom('oidc_refresh_tokens as t')
                  .select('t.expires_at')
                  .whereRef('t.grant_id', '=', 'oidc_grants.id')
                  .where('t.rotated_at', 'is', null)
                  .limit(1),
              }))
              .where('id', 'in', grants)
              .execute();
            for (const id of grants) changed({ collection: 'oidc-grants', kind: 'update', id });
          }
          return done;
        });
        for (const r of batch) r.resolve(first.get(r.hash) === r && rotated.has(r.hash));
      } catch (err) {
        for (const r of batch) r.reject(err);
      }
    }
    this.flushing = false;
  }

  private remember(hash: string, entry: Remembered): void {
    if (!this.remembered.set(hash, entry)) return;
    let hashes = this.byGrant.get(entry.grant.id);
    if (!hashes) this.byGrant.set(entry.grant.id, (hashes = new Set()));
    hashes.add(hash);
  }

  private forgetGrant(id: string): void {
    for (const hash of [...(this.byGrant.get(id) ?? [])]) this.remembered.delete(hash);
  }

  /** A grant deleted (here or elsewhere) takes its remembered tokens with it; a rotation needs nothing (see remembered). */
  onChange(c: Change): void {
    if (c.collection === 'oidc-grants' && c.kind === 'delete') this.forgetGrant(c.id);
  }

  reset(): void {
    this.remembered.clear();
  }

  /** Deletes a grant and its refresh tokens. */
  async delete(id: string): Promise<void> {
    this.forgetGrant(id);
    await this.kernel.write(async ({ tx, changed }) => {
      const gone = await tx.deleteFrom('oidc_grants').where('id', '=', id).returning('identity_id').executeTakeFirst();
      if (gone) changed({ collection: 'oidc-grants', kind: 'delete', id, ownerId: String(gone.identity_id) });
    });
  }

  /** The grants still alive: api session id → until when. */
  async live(): Promise<Map<string, number>> {
    const rows = await this.store.db
      .selectFrom('oidc_grants')
      .select(['api_session_id', 'expires_at'])
      .where('expires_at', '>', iso(this.clock()))
      .execute();
    return new Map(rows.map((r) => [r.api_session_id as string, Date.parse(r.expires_at as string)]));
  }

  /** Deletes ended grants (their tokens go with them); answers their API session ids. */
  async sweep(): Promise<string[]> {
    const now = this.clock();
    this.remembered.deleteWhere((entry) => now >= entry.expiresAt);
    const cutoff = iso(now);
    const ended = await this.kernel.write(async ({ tx, changed }) => {
      const rows = await tx.deleteFrom('oidc_grants').where('expires_at', '<=', cutoff).returning(['id', 'api_session_id', 'identity_id']).execute();
      for (const r of rows) changed({ collection: 'oidc-grants', kind: 'delete', id: String(r.id), ownerId: String(r.identity_id) });
      return rows;
    });
    return ended.map((r) => r.api_session_id as string);
  }

  /** Refresh tokens held in memory. */
  get remembering(): number {
    return this.remembered.size;
  }

  private grantOf(row: Record<string, unknown>): Grant {
    const d = this.store.dialect;
    return {
      id: row.id as string,
      apiSessionId: row.api_session_id as string,
      identityId: row.identity_id as string,
      clientId: row.client_id as string,
      scopes: d.fromDb('json', row.scopes) as string[],
      amr: d.fromDb('json', row.amr) as string[],
      authTime: Date.parse(row.auth_time as string),
      expiresAt: Date.parse(row.expires_at as string),
    };
  }
}
