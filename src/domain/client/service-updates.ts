// Service-update markers: `lastChangeAt` of `/current-api-session/service-updates`, the time the
// caller's service list last changed, found by comparing a fingerprint of that list when a change
// that may alter it has come.
import { createHash } from 'node:crypto';
import { iso, type Clock } from '../../clock.js';
import { MAX_CACHED_API_SESSIONS } from '../../auth/api-sessions.js';
import { BoundedMap } from '../../kernel/bounded-map.js';
import type { Cache } from '../../kernel/caches.js';
import type { Change } from '../../kernel/changes.js';
import type { Caller } from './caller.js';
import type { PostureStore } from './posture-store.js';
import type { ClientServices } from './service-list.js';
import { viewStamp, type ViewGenerations } from './view-generations.js';

interface MarkerState {
  /** The generations the fingerprint was taken under. */
  key: string;
  fingerprint: string;
  /** ms */
  at: number;
  /**
   * ms; when the list may next change with time alone (a passed MFA check's timeout or a prompt's
   * grace runs out), undefined when it cannot.
   */
  changesAt: number | undefined;
}

/**
 * Markers kept at most, as many as API sessions kept in memory: one identity may open API sessions
 * without end (as in the established controller), and a marker per session asked would follow.
 */
export const MAX_MARKERS = MAX_CACHED_API_SESSIONS;

/**
 * `lastChangeAt` of `/current-api-session/service-updates`, per API session. It is the time of the
 * last change of what the caller's full service list would show (every service it may use with its
 * permissions, configs of every type, overrides and posture queries with isPassing) or of a config
 * or posture check behind it (any write of one counts, even one that leaves the list as it was),
 * found by comparing a fingerprint of that list. The fingerprint is taken again only after a change that may
 * alter it: a change in VIEW_COLLECTIONS, of the caller's identity, of the API session's posture
 * data or MFA state. So an unrelated change (another identity's attributes, an edge router) never
 * moves it and costs nothing; a change elsewhere in the network costs one fingerprint per polling
 * API session, and moves only the markers of callers whose list it changed. A list with a posture
 * check that will pass or fail with time alone (a passed MFA's timeout or a prompt's grace running
 * out) is taken again at the first call once that moment has come, and a change found then is dated
 * then: nothing was written when it happened. Before it, and for an MFA never passed or already
 * timed out, a call costs nothing.
 * The seconds an MFA check has left are a countdown, not a change, and are not in the fingerprint.
 *
 * The first answer of an API session is the latest of its start and of the changes since that may
 * have altered its list: it may tell of a change that altered nothing, never miss one.
 *
 * A marker's time is history the store does not hold, so a reset keeps it (and the fingerprint it
 * belongs to) and only makes every marker take its fingerprint again; an API session's marker goes
 * with the session.
 */
export class ServiceUpdateMarkers implements Cache {
  readonly name = 'service-update-markers';
  private readonly state: BoundedMap<string, MarkerState>;
  /**
   * When a marker last made room for another (ms). A session with no marker that began before then
   * may have had one: its next answer is dated no earlier, so it may tell of a change that altered
   * nothing, never miss one.
   */
  private droppedAt = 0;

  constructor(
    private readonly services: ClientServices,
    private readonly generations: ViewGenerations,
    private readonly posture: PostureStore,
    /** ms; no marker is older than this (the controller start): nothing before it is known. */
    private readonly since: number,
    private readonly clock: Clock,
    /** Markers kept; the least recently asked for goes first. */
    private readonly maxKept = MAX_MARKERS,
  ) {
    this.state = new BoundedMap({ maxEntries: maxKept });
  }

  onChange(c: Change): void {
    if (c.collection === 'api-sessions' && c.kind === 'delete') this.state.delete(c.id);
  }

  reset(): void {
    for (const s of this.state.values()) s.key = '';
  }

  async lastChangeAt(caller: Caller): Promise<string> {
    const identity = this.generations.identity(caller.identityId);
    const posture = this.posture.generation(caller.apiSessionId);
    const global = this.generations.global;
    const key = viewStamp(this.generations, this.posture, caller);
    const prev = this.state.get(caller.apiSessionId);
    const now = this.clock();
    const due = prev?.changesAt !== undefined && now >= prev.changesAt;
    if (prev && prev.key === key && !due) return iso(prev.at);
    const report: { changesAt: number | undefined } = { changesAt: undefined };
    const fingerprint = await this.fingerprint(caller, report);
    let at: number;
    // An API session's first answer: what its list was before is not known, so a change since the
    // session began that may have altered the list counts (a client that listed its services, then
    // saw a change before it first asked, must not keep the old list).
    if (!prev) {
      const mayHaveHadOne = caller.sessionCreatedAt < this.droppedAt ? this.droppedAt : 0;
      at = Math.max(caller.sessionCreatedAt, this.since, global.at, identity.at, posture.at, caller.mfaPassedAt ?? 0, mayHaveHadOne);
    }
    else if (prev.fingerprint === fingerprint) at = prev.at;
    else at = Math.max(prev.at + 1, global.at, identity.at, posture.at, due ? now : 0);
    // A change that lands while the fingerprint is taken is seen at the next call (the key is older).
    if (!this.state.has(caller.apiSessionId) && this.state.size >= this.maxKept) {
      // The least recently asked goes; its last answer may lie ahead of the clock (a change dated +1 ms).
      const leaving = this.state.values().next().value;
      this.droppedAt = Math.max(this.droppedAt, this.clock(), leaving?.at ?? 0);
    }
    this.state.set(caller.apiSessionId, { key, fingerprint, at, changesAt: report.changesAt });
    return iso(at);
  }

  /**
   * Services share the posture query entry of a policy (policyPostureQueries), which is taken once
   * each: a policy with many checks granting many services would otherwise be written out once per
   * service (10,000 checks for each of 100 services took seconds of the event loop).
   */
  private async fingerprint(caller: Caller, report: { changesAt: number | undefined }): Promise<string> {
    const versions: string[] = [];
    const { items } = await this.services.list(caller, { sort: [], offset: 0, limit: null }, 'all', undefined, { versions, report });
    const digests = new Map<unknown, string>();
    const digestOf = (entry: unknown): string => {
      let digest = digests.get(entry);
      if (digest === undefined) {
        digest = createHash('sha256').update(JSON.stringify(entry, (k, v: unknown) => (k === 'timeoutRemaining' ? undefined : v))).digest('base64url');
        digests.set(entry, digest);
      }
      return digest;
    };
    const hash = createHash('sha256');
    for (const item of items) {
      const queries = (item as { postureQueries?: unknown[] }).postureQueries ?? [];
      hash.update(JSON.stringify({ ...item, postureQueries: queries.map(digestOf) }));
    }
    return hash.update(JSON.stringify(versions.sort())).digest('base64url');
  }
}

