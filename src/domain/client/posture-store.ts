// Posture (behaviour.md §4): what clients report about their device, kept per API session, and the
// pure evaluation of posture checks against it. A session request passes when at least one service
// policy of the requested type granting access has every one of its checks passing.
//
// Reported data is stored per API session (the device that reported it) and read from memory; a
// write goes to the store first, then to memory. Refused session requests are recorded per identity.
import { Type } from '@sinclair/typebox';
import { fieldError } from '../../errors.js';
import { iso, type Clock } from '../../clock.js';
import { newId } from '../../ids.js';
import type { PostureCheckType } from '../posture-checks.js';
import { BoundedMap } from '../../kernel/bounded-map.js';
import type { Cache } from '../../kernel/caches.js';
import type { Change } from '../../kernel/changes.js';
import type { Kernel } from '../../kernel/kernel.js';
import type { Repository } from '../../store/repository.js';
import type { Executor, Store } from '../../store/store.js';

// ---- what clients report ---------------------------------------------------------------------------

/**
 * typeId of a posture response: a check kind, or ENDPOINT_STATE (the device woke or was unlocked),
 * which clients may also send as MFA.
 */
export const POSTURE_RESPONSE_TYPES = ['OS', 'PROCESS', 'PROCESS_MULTI', 'DOMAIN', 'MAC', 'MFA', 'ENDPOINT_STATE'] as const;
export type PostureResponseType = (typeof POSTURE_RESPONSE_TYPES)[number];

const Text = (description: string, maxLength = 1024) => Type.String({ maxLength, description });
const List = (description: string) => Type.Array(Type.String({ maxLength: 256 }), { maxItems: 100, description });

/** One posture response; which fields count depends on typeId. */
export const PostureResponseSchema = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 255, description: 'the posture check the response answers' }),
    typeId: Type.Union(
      POSTURE_RESPONSE_TYPES.map((t) => Type.Literal(t)),
      { description: 'OS, PROCESS, PROCESS_MULTI, DOMAIN, MAC, MFA or ENDPOINT_STATE' },
    ),
    domain: Type.Optional(Text('DOMAIN: the Windows domain the device is joined to', 255)),
    type: Type.Optional(Text('OS: operating system (Windows, macOS, Linux, ...)', 64)),
    version: Type.Optional(Text('OS: version, e.g. 10.0.19041', 128)),
    build: Type.Optional(Text('OS: build', 128)),
    path: Type.Optional(Text('PROCESS: the executable')),
    isRunning: Type.Optional(Type.Boolean({ description: 'PROCESS: the process runs' })),
    hash: Type.Optional(Text('PROCESS: SHA-512 of the executable, hex', 256)),
    signerFingerprints: Type.Optional(List('PROCESS: fingerprints of the certificates that signed it')),
    macAddresses: Type.Optional(List('MAC: hardware addresses of the interfaces')),
    unlocked: Type.Optional(Type.Boolean({ description: 'MFA / ENDPOINT_STATE: the device was just unlocked' })),
    woken: Type.Optional(Type.Boolean({ description: 'MFA / ENDPOINT_STATE: the device just woke' })),
  },
  { additionalProperties: true },
);

export const MAX_BULK_RESPONSES = 100;
export const PostureResponseBulkSchema = Type.Array(PostureResponseSchema, { maxItems: MAX_BULK_RESPONSES });

export interface PostureResponse {
  id: string;
  typeId: PostureResponseType;
  domain?: string;
  type?: string;
  version?: string;
  build?: string;
  path?: string;
  isRunning?: boolean;
  hash?: string;
  signerFingerprints?: string[];
  macAddresses?: string[];
  unlocked?: boolean;
  woken?: boolean;
}

/** A reported value with where it came from. */
export interface Reported<T> {
  postureCheckId: string | null;
  /** ms */
  lastUpdatedAt: number;
  value: T;
}

export interface OsReport {
  type: string;
  version: string;
  build: string;
}

export interface ProcessReport {
  path: string;
  isRunning: boolean;
  hash: string;
  signerFingerprints: string[];
}

/** Everything one API session reported. */
export interface SessionPosture {
  apiSessionId: string;
  identityId: string;
  os?: Reported<OsReport>;
  domain?: Reported<{ domain: string }>;
  mac?: Reported<{ addresses: string[] }>;
  /** By path as reported. */
  processes: Map<string, Reported<ProcessReport>>;
  endpointState: { unlockedAt?: number; wokenAt?: number; lastUpdatedAt?: number };
}

function emptyPosture(apiSessionId: string, identityId: string): SessionPosture {
  return { apiSessionId, identityId, processes: new Map(), endpointState: {} };
}

/** The fields a response of each type needs; a missing one is a 400 naming it. */
const REQUIRED: Partial<Record<PostureResponseType, readonly (keyof PostureResponse)[]>> = {
  OS: ['type', 'version'],
  PROCESS: ['path'],
  PROCESS_MULTI: ['path'],
  DOMAIN: ['domain'],
  MAC: ['macAddresses'],
};

/** Checks the per-type fields of responses (already schema-valid); `field` names the offender. */
export function checkResponses(responses: readonly PostureResponse[], field: (i: number, name: string) => string): void {
  for (const [i, r] of responses.entries()) {
    for (const name of REQUIRED[r.typeId] ?? []) {
      if (r[name] === undefined) throw fieldError(field(i, name), `is required for a ${r.typeId} response`);
    }
  }
}

// ---- evaluation (pure) -------------------------------------------------------------------------------

/** A stored posture check, as evaluation needs it. */
export interface PostureCheck {
  id: string;
  name: string;
  typeId: PostureCheckType | string;
  operatingSystems?: { type: string; versions: string[] }[] | null;
  process?: { osType: string; path: string; hashes?: string[]; signerFingerprint?: string } | null;
  processes?: { osType: string; path: string; hashes?: string[]; signerFingerprints?: string[] }[] | null;
  semantic?: string | null;
  domains?: string[] | null;
  macAddresses?: string[] | null;
  timeoutSeconds?: number | null;
  promptOnWake?: boolean | null;
  promptOnUnlock?: boolean | null;
}

/** What evaluation knows beyond the reported data. */
export interface PostureFacts {
  posture: SessionPosture | undefined;
  /**
   * The API session completed its secondary factor (and when, ms). Until TOTP lands nothing
   * completes it, so MFA checks fail.
   */
  mfa: { isMfaComplete: boolean; passedAt: number };
  /** ms */
  now: number;
}

/** Dotted version parts as numbers; a part that is not a number counts by its leading digits. */
function versionParts(v: string): number[] {
  return v
    .trim()
    .replace(/^v/i, '')
    .split(/[.+-]/)
    .map((p) => {
      const m = /^\d+/.exec(p);
      return m ? Number(m[0]) : 0;
    });
}

function compareVersions(a: string, b: string): number {
  const x = versionParts(a);
  const y = versionParts(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}

/**
 * Whether `version` satisfies a version constraint of an OS check: alternatives separated by `||`,
 * each a space-separated conjunction of `>=v`, `>v`, `<=v`, `<v`, `=v`, `==v`, `!=v` or a bare `v`
 * (equal). Missing parts count as 0 (`10` = `10.0.0`).
 */
export function versionSatisfies(version: string, spec: string): boolean {
  return spec.split('||').some((alternative) => {
    const terms = alternative.trim().split(/\s+/).filter((t) => t !== '');
    if (terms.length === 0) return false;
    return terms.every((term) => {
      const m = /^(>=|<=|==|!=|>|<|=)?\s*(.+)$/.exec(term);
      if (!m) return false;
      const c = compareVersions(version, m[2]!);
      switch (m[1]) {
        case '>=':
          return c >= 0;
        case '<=':
          return c <= 0;
        case '>':
          return c > 0;
        case '<':
          return c < 0;
        case '!=':
          return c !== 0;
        default:
          return c === 0;
      }
    });
  });
}

const lower = (s: string) => s.toLowerCase();
/** A MAC address or certificate fingerprint compared without case and separators. */
const hexKey = (s: string) => s.toLowerCase().replace(/[^0-9a-f]/g, '');

function processPasses(
  posture: SessionPosture | undefined,
  want: { osType: string; path: string; hashes?: string[] },
  fingerprints: readonly string[],
): boolean {
  if (!posture) return false;
  const windows = want.osType === 'Windows' || want.osType === 'WindowsServer';
  const same = (a: string, b: string) => (windows ? lower(a) === lower(b) : a === b);
  for (const reported of posture.processes.values()) {
    const p = reported.value;
    if (!same(p.path, want.path) || !p.isRunning) continue;
    if (want.hashes && want.hashes.length > 0 && !want.hashes.some((h) => lower(h) === lower(p.hash))) continue;
    if (fingerprints.length > 0) {
      const signed = new Set(p.signerFingerprints.map(hexKey));
      if (!fingerprints.some((f) => signed.has(hexKey(f)))) continue;
    }
    return true;
  }
  return false;
}

/** When a passed MFA stops counting (ms), or Infinity. */
function mfaExpiry(check: PostureCheck, facts: PostureFacts): number {
  const timeout = check.timeoutSeconds ?? -1;
  return timeout < 0 ? Infinity : facts.mfa.passedAt + timeout * 1000;
}

/** Whether one check passes for an API session. */
export function checkPasses(check: PostureCheck, facts: PostureFacts): boolean {
  const p = facts.posture;
  switch (check.typeId) {
    case 'OS': {
      const os = p?.os?.value;
      if (!os) return false;
      return (check.operatingSystems ?? []).some(
        (entry) => lower(entry.type) === lower(os.type) && (entry.versions.length === 0 || entry.versions.some((v) => versionSatisfies(os.version, v))),
      );
    }
    case 'PROCESS': {
      const want = check.process;
      if (!want) return false;
      return processPasses(p, want, want.signerFingerprint ? [want.signerFingerprint] : []);
    }
    case 'PROCESS_MULTI': {
      const list = check.processes ?? [];
      if (list.length === 0) return false;
      const passes = (w: (typeof list)[number]) => processPasses(p, w, w.signerFingerprints ?? []);
      return check.semantic === 'AnyOf' ? list.some(passes) : list.every(passes);
    }
    case 'DOMAIN': {
      const domain = p?.domain?.value.domain;
      if (domain === undefined) return false;
      return (check.domains ?? []).some((d) => lower(d) === lower(domain));
    }
    case 'MAC': {
      const reported = new Set((p?.mac?.value.addresses ?? []).map(hexKey));
      return (check.macAddresses ?? []).some((a) => reported.has(hexKey(a)));
    }
    case 'MFA': {
      const { isMfaComplete, passedAt } = facts.mfa;
      if (!isMfaComplete || facts.now >= mfaExpiry(check, facts)) return false;
      const state = p?.endpointState ?? {};
      if (check.promptOnWake === true && (state.wokenAt ?? -Infinity) > passedAt) return false;
      if (check.promptOnUnlock === true && (state.unlockedAt ?? -Infinity) > passedAt) return false;
      return true;
    }
    default:
      return false;
  }
}

export interface CheckResult {
  id: string;
  typeId: string;
  isPassing: boolean;
}

/** Every check of one policy; the policy passes when all do (a policy without checks passes). */
export function evaluatePolicy(checks: readonly PostureCheck[], facts: PostureFacts): { isPassing: boolean; results: CheckResult[] } {
  const results = checks.map((c) => ({ id: c.id, typeId: String(c.typeId), isPassing: checkPasses(c, facts) }));
  return { isPassing: results.every((r) => r.isPassing), results };
}

/** A posture query of a client service answer: one check, what it asks for and whether it passes. */
export interface PostureQuery {
  id: string;
  typeId: string;
  queryType: string;
  isPassing: boolean;
  /** seconds a passed MFA counts for; -1: forever or not an MFA check */
  timeout: number;
  /** seconds left; -1 as above */
  timeoutRemaining: number;
  promptOnWake?: boolean;
  promptOnUnlock?: boolean;
  process?: { osType: string; path: string };
  processes?: { osType: string; path: string }[];
}

export const PostureQuerySchema = Type.Object({
  id: Type.String(),
  typeId: Type.String(),
  queryType: Type.String(),
  isPassing: Type.Boolean(),
  timeout: Type.Integer(),
  timeoutRemaining: Type.Integer(),
  promptOnWake: Type.Optional(Type.Boolean()),
  promptOnUnlock: Type.Optional(Type.Boolean()),
  process: Type.Optional(Type.Object({ osType: Type.String(), path: Type.String() })),
  processes: Type.Optional(Type.Array(Type.Object({ osType: Type.String(), path: Type.String() }))),
});

export function postureQuery(check: PostureCheck, facts: PostureFacts): PostureQuery {
  const isPassing = checkPasses(check, facts);
  const q: PostureQuery = { id: check.id, typeId: String(check.typeId), queryType: String(check.typeId), isPassing, timeout: -1, timeoutRemaining: -1 };
  if (check.typeId === 'MFA') {
    const timeout = check.timeoutSeconds ?? -1;
    q.timeout = timeout;
    if (timeout >= 0) q.timeoutRemaining = isPassing ? Math.max(0, Math.floor((mfaExpiry(check, facts) - facts.now) / 1000)) : 0;
    q.promptOnWake = check.promptOnWake === true;
    q.promptOnUnlock = check.promptOnUnlock === true;
  } else if (check.typeId === 'PROCESS' && check.process) {
    q.process = { osType: check.process.osType, path: check.process.path };
  } else if (check.typeId === 'PROCESS_MULTI' && check.processes) {
    q.processes = check.processes.map((p) => ({ osType: p.osType, path: p.path }));
  }
  return q;
}

// ---- the posture store ---------------------------------------------------------------------------------

interface PostureRow {
  api_session_id: string;
  identity_id: string;
  kind: string;
  item_key: string;
  posture_check_id: string | null;
  data: unknown;
  updated_at: string;
}

function parseJson(value: unknown): Record<string, unknown> {
  if (typeof value === 'string') return JSON.parse(value) as Record<string, unknown>;
  return (value ?? {}) as Record<string, unknown>;
}

/** Applies one stored row to a session's posture. */
function applyRow(p: SessionPosture, row: PostureRow): void {
  const data = parseJson(row.data);
  const meta = { postureCheckId: row.posture_check_id, lastUpdatedAt: Date.parse(row.updated_at) };
  switch (row.kind) {
    case 'OS':
      p.os = { ...meta, value: data as unknown as OsReport };
      break;
    case 'DOMAIN':
      p.domain = { ...meta, value: data as { domain: string } };
      break;
    case 'MAC':
      p.mac = { ...meta, value: data as { addresses: string[] } };
      break;
    case 'PROCESS':
      p.processes.set(row.item_key, { ...meta, value: data as unknown as ProcessReport });
      break;
    case 'ENDPOINT_STATE': {
      const at = (k: string) => (typeof data[k] === 'string' ? Date.parse(data[k]) : undefined);
      p.endpointState = { lastUpdatedAt: meta.lastUpdatedAt };
      const unlockedAt = at('unlockedAt');
      const wokenAt = at('wokenAt');
      if (unlockedAt !== undefined) p.endpointState.unlockedAt = unlockedAt;
      if (wokenAt !== undefined) p.endpointState.wokenAt = wokenAt;
      break;
    }
  }
}

/** The store rows a response becomes (ENDPOINT_STATE merges into what the session had). */
function rowOf(r: PostureResponse, who: { apiSessionId: string; identityId: string }, current: SessionPosture, now: number): PostureRow | undefined {
  const base = { api_session_id: who.apiSessionId, identity_id: who.identityId, posture_check_id: r.id, updated_at: iso(now), item_key: '' };
  switch (r.typeId) {
    case 'OS':
      return { ...base, kind: 'OS', data: { type: r.type ?? '', version: r.version ?? '', build: r.build ?? '' } };
    case 'DOMAIN':
      return { ...base, kind: 'DOMAIN', data: { domain: r.domain ?? '' } };
    case 'MAC':
      return { ...base, kind: 'MAC', data: { addresses: r.macAddresses ?? [] } };
    case 'PROCESS':
    case 'PROCESS_MULTI':
      return {
        ...base,
        kind: 'PROCESS',
        item_key: r.path ?? '',
        data: { path: r.path ?? '', isRunning: r.isRunning === true, hash: r.hash ?? '', signerFingerprints: r.signerFingerprints ?? [] },
      };
    case 'MFA':
    case 'ENDPOINT_STATE': {
      if (r.unlocked !== true && r.woken !== true) return undefined;
      const state = current.endpointState;
      const unlockedAt = r.unlocked === true ? now : state.unlockedAt;
      const wokenAt = r.woken === true ? now : state.wokenAt;
      return {
        ...base,
        kind: 'ENDPOINT_STATE',
        data: {
          ...(unlockedAt !== undefined ? { unlockedAt: iso(unlockedAt) } : {}),
          ...(wokenAt !== undefined ? { wokenAt: iso(wokenAt) } : {}),
        },
      };
    }
  }
}

/** What a change of posture data is worth comparing: the values, not when they were reported. */
function valueKey(p: SessionPosture): string {
  return JSON.stringify([
    p.os?.value,
    p.domain?.value,
    p.mac?.value,
    [...p.processes.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v.value),
    p.endpointState.unlockedAt,
    p.endpointState.wokenAt,
  ]);
}

/** The failure record of a refused session request (the interface document's shape). */
export interface PostureFailure {
  apiSessionId: string;
  serviceId: string;
  serviceName: string;
  sessionType: string;
  when: string;
  policyFailures: {
    policyId: string;
    policyName: string;
    checks: { postureCheckId: string; postureCheckName: string; postureCheckType: string }[];
  }[];
}

/** How many refused requests are kept per identity (the newest). */
export const KEPT_FAILURES = 50;

/**
 * Posture data per API session, read through memory. Each session's entry counts its changes of
 * value (`generation`), which the service-list change marker follows.
 */
/** API sessions whose posture data is kept in memory at most. */
export const MAX_CACHED_POSTURE = 100_000;

/** What is known of one API session's posture data beyond the cache: its value changes so far. */
interface PostureGeneration {
  generation: number;
  /** ms of the last change of value */
  at: number;
  /** The values as last seen (valueKey). */
  key: string;
  identityId: string;
}

/**
 * Posture data per API session, read through memory. Each session's entry counts its changes of
 * value (`generation`), which the service-list change marker follows. A write announces a change
 * of `posture-data`; following it, the store reads the session's data again and counts a change
 * when the values moved. The counts are history, not a copy of the store: a reset keeps them.
 */
export class PostureStore implements Cache {
  readonly name = 'posture-data';
  private readonly cache: BoundedMap<string, SessionPosture>;
  private readonly loading = new Map<string, Promise<SessionPosture>>();
  private readonly generations = new Map<string, PostureGeneration>();
  private readonly store: Store;

  constructor(
    private readonly kernel: Kernel,
    private readonly clock: Clock,
    maxCached = MAX_CACHED_POSTURE,
  ) {
    this.store = kernel.store;
    this.cache = new BoundedMap({ maxEntries: maxCached });
  }

  async onChange(c: Change): Promise<void> {
    if (c.collection === 'api-sessions' && c.kind === 'delete') this.forget(c.id);
    else if (c.collection === 'identities' && c.kind === 'delete') this.forgetIdentity(c.id);
    else if (c.collection === 'posture-data') {
      this.cache.delete(c.id);
      this.loading.delete(c.id);
      const known = this.generations.get(c.id);
      const identityId = c.ownerId ?? known?.identityId;
      if (identityId === undefined) return;
      const fresh = await this.load(c.id, identityId);
      const key = valueKey(fresh);
      const g = this.generations.get(c.id);
      if (g && g.key !== key) this.generations.set(c.id, { generation: g.generation + 1, at: this.clock(), key, identityId });
    }
  }

  /** Drops the data kept; the counts of changes stay (see the class). */
  reset(): void {
    this.cache.clear();
    this.loading.clear();
  }

  /** What an API session reported (empty when nothing). */
  async of(apiSessionId: string, identityId: string): Promise<SessionPosture> {
    const cached = this.cache.get(apiSessionId);
    if (cached) return cached;
    let pending = this.loading.get(apiSessionId);
    if (!pending) {
      const started = this.load(apiSessionId, identityId).finally(() => {
        if (this.loading.get(apiSessionId) === started) this.loading.delete(apiSessionId);
      });
      pending = started;
      this.loading.set(apiSessionId, pending);
    }
    return pending;
  }

  private async load(apiSessionId: string, identityId: string): Promise<SessionPosture> {
    const seen = this.cache.drops;
    const rows = (await this.store.db.selectFrom('posture_data').selectAll().where('api_session_id', '=', apiSessionId).execute()) as PostureRow[];
    const p = emptyPosture(apiSessionId, identityId);
    for (const row of rows) applyRow(p, row);
    // A read that began before a drop may predate a write: it answers, but is not kept.
    if (this.cache.setIfUnchanged(apiSessionId, p, seen) && !this.generations.has(apiSessionId)) {
      this.generations.set(apiSessionId, { generation: 0, at: 0, key: valueKey(p), identityId });
    }
    return p;
  }

  /** Value changes of a session's posture data so far, and when the last one happened (ms). */
  generation(apiSessionId: string): { generation: number; at: number } {
    const g = this.generations.get(apiSessionId);
    return g ? { generation: g.generation, at: g.at } : { generation: 0, at: 0 };
  }

  /** Stores responses of one API session (all or none); its memory follows once they are stored. */
  async submit(who: { apiSessionId: string; identityId: string }, responses: readonly PostureResponse[]): Promise<void> {
    const current = await this.of(who.apiSessionId, who.identityId);
    const now = this.clock();
    const rows: PostureRow[] = [];
    for (const r of responses) {
      const row = rowOf(r, who, current, now);
      if (!row) continue;
      // Later responses of the same kind in one request win.
      const same = rows.findIndex((x) => x.kind === row.kind && x.item_key === row.item_key);
      if (same >= 0) rows.splice(same, 1);
      rows.push(row);
    }
    if (rows.length === 0) return;
    await this.kernel.write(async (ctx) => {
      for (const row of rows) {
        await ctx.tx
          .insertInto('posture_data')
          .values({ ...row, data: JSON.stringify(row.data) })
          .onConflict((oc) =>
            oc.columns(['api_session_id', 'kind', 'item_key']).doUpdateSet({
              posture_check_id: row.posture_check_id,
              data: JSON.stringify(row.data),
              updated_at: row.updated_at,
            }),
          )
          .execute();
      }
      ctx.changed({ collection: 'posture-data', kind: 'update', id: who.apiSessionId, ownerId: who.identityId });
    });
  }

  forget(apiSessionId: string): void {
    this.cache.delete(apiSessionId);
    this.loading.delete(apiSessionId);
    this.generations.delete(apiSessionId);
  }

  private forgetIdentity(identityId: string): void {
    this.cache.deleteWhere((p) => p.identityId === identityId);
    for (const [id, g] of this.generations) if (g.identityId === identityId) this.forget(id);
  }

  // ---- management views ---------------------------------------------------------------------------

  /** The posture data of an identity (interface document shape); newest report of each kind on top. */
  async identityData(identityId: string, apiSessions: Repository): Promise<Record<string, unknown>> {
    const db = this.store.db;
    const rows = (await db.selectFrom('posture_data').selectAll().where('identity_id', '=', identityId).execute()) as PostureRow[];
    const sessions = await db
      .selectFrom(apiSessions.table)
      .select(['id', 'is_mfa_complete', 'created_at'])
      .where('identity_id', '=', identityId)
      .orderBy('created_at')
      .execute();
    const bySession = new Map<string, SessionPosture>();
    for (const s of sessions) bySession.set(String(s.id), emptyPosture(String(s.id), identityId));
    for (const row of rows) {
      let p = bySession.get(row.api_session_id);
      if (!p) bySession.set(row.api_session_id, (p = emptyPosture(row.api_session_id, identityId)));
      applyRow(p, row);
    }
    const newest = <T>(pick: (p: SessionPosture) => Reported<T> | undefined): Reported<T> | undefined => {
      let best: Reported<T> | undefined;
      for (const p of bySession.values()) {
        const r = pick(p);
        if (r && (!best || r.lastUpdatedAt > best.lastUpdatedAt)) best = r;
      }
      return best;
    };
    const meta = (r: Reported<unknown>) => ({ lastUpdatedAt: iso(r.lastUpdatedAt), postureCheckId: r.postureCheckId ?? '', timedOut: false });
    const os = (r: Reported<OsReport> | undefined) => (r ? { ...meta(r), type: r.value.type, version: r.value.version, build: r.value.build } : null);
    const domain = (r: Reported<{ domain: string }> | undefined) => (r ? { ...meta(r), domain: r.value.domain } : null);
    const mac = (r: Reported<{ addresses: string[] }> | undefined) => (r ? { ...meta(r), addresses: r.value.addresses } : null);
    const processes = (list: Iterable<Reported<ProcessReport>>) =>
      [...list].map((r) => ({
        ...meta(r),
        path: r.value.path,
        isRunning: r.value.isRunning,
        binaryHash: r.value.hash,
        signerFingerprints: r.value.signerFingerprints,
      }));
    const latestProcesses = new Map<string, Reported<ProcessReport>>();
    for (const p of bySession.values()) {
      for (const [path, r] of p.processes) {
        const have = latestProcesses.get(path);
        if (!have || r.lastUpdatedAt > have.lastUpdatedAt) latestProcesses.set(path, r);
      }
    }
    const complete = new Map(sessions.map((s) => [String(s.id), { done: s.is_mfa_complete === 1 || s.is_mfa_complete === true, at: String(s.created_at) }]));
    const apiSessionPostureData: Record<string, unknown> = {};
    for (const [id, p] of bySession) {
      const mfa = complete.get(id);
      apiSessionPostureData[id] = {
        endpointState: {
          unlockedAt: p.endpointState.unlockedAt !== undefined ? iso(p.endpointState.unlockedAt) : null,
          wokenAt: p.endpointState.wokenAt !== undefined ? iso(p.endpointState.wokenAt) : null,
        },
        mfa: {
          apiSessionId: id,
          passedMfa: mfa?.done ?? false,
          passedAt: mfa?.done ? mfa.at : null,
          passedOnUnlock: false,
          passedOnWake: false,
        },
        sdkInfo: {},
        os: os(p.os),
        domain: domain(p.domain),
        mac: mac(p.mac),
        processes: processes(p.processes.values()),
      };
    }
    return {
      apiSessionPostureData,
      os: os(newest((p) => p.os)),
      domain: domain(newest((p) => p.domain)),
      mac: mac(newest((p) => p.mac)),
      processes: processes(latestProcesses.values()),
    };
  }

  /** Records a refused session request; only the newest KEPT_FAILURES of an identity are kept. */
  async recordFailure(identityId: string, failure: PostureFailure): Promise<void> {
    const id = newId();
    await this.kernel.write(async ({ tx, changed }) => {
      await tx
        .insertInto('failed_service_requests')
        .values({
          id,
          identity_id: identityId,
          api_session_id: failure.apiSessionId,
          service_id: failure.serviceId,
          service_name: failure.serviceName,
          session_type: failure.sessionType,
          policy_failures: JSON.stringify(failure.policyFailures),
          created_at: failure.when,
        })
        .execute();
      const keep = tx
        .selectFrom('failed_service_requests')
        .select('id')
        .where('identity_id', '=', identityId)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(KEPT_FAILURES);
      const dropped = await tx
        .deleteFrom('failed_service_requests')
        .where('identity_id', '=', identityId)
        .where('id', 'not in', keep)
        .returning('id')
        .execute();
      changed({ collection: 'posture-failures', kind: 'create', id, ownerId: identityId });
      for (const r of dropped) changed({ collection: 'posture-failures', kind: 'delete', id: String(r.id), ownerId: identityId });
    });
  }

  /** An identity's refused session requests, newest first. */
  async failures(ex: Executor, identityId: string): Promise<PostureFailure[]> {
    const rows = await ex
      .selectFrom('failed_service_requests')
      .selectAll()
      .where('identity_id', '=', identityId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    return rows.map((r) => ({
      apiSessionId: String(r.api_session_id),
      serviceId: String(r.service_id),
      serviceName: String(r.service_name),
      sessionType: String(r.session_type),
      when: String(r.created_at),
      policyFailures: parseJson(r.policy_failures) as unknown as PostureFailure['policyFailures'],
    }));
  }
}

export const PostureFailureSchema = Type.Object({
  apiSessionId: Type.String(),
  serviceId: Type.String(),
  serviceName: Type.String(),
  sessionType: Type.String(),
  when: Type.String({ format: 'date-time' }),
  policyFailures: Type.Array(
    Type.Object({
      policyId: Type.String(),
      policyName: Type.String(),
      checks: Type.Array(Type.Object({ postureCheckId: Type.String(), postureCheckName: Type.String(), postureCheckType: Type.String() })),
    }),
  ),
});

const Stamp = { lastUpdatedAt: Type.String(), postureCheckId: Type.String(), timedOut: Type.Boolean() };
const OsData = Type.Object({ ...Stamp, type: Type.String(), version: Type.String(), build: Type.String() });
const DomainData = Type.Object({ ...Stamp, domain: Type.String() });
const MacData = Type.Object({ ...Stamp, addresses: Type.Array(Type.String()) });
const ProcessData = Type.Object({
  ...Stamp,
  path: Type.String(),
  isRunning: Type.Boolean(),
  binaryHash: Type.String(),
  signerFingerprints: Type.Array(Type.String()),
});
const Nullable = <T extends ReturnType<typeof Type.Object>>(t: T) => Type.Union([t, Type.Null()]);

export const PostureDataSchema = Type.Object({
  apiSessionPostureData: Type.Record(
    Type.String(),
    Type.Object({
      endpointState: Type.Object({ unlockedAt: Type.Union([Type.String(), Type.Null()]), wokenAt: Type.Union([Type.String(), Type.Null()]) }),
      mfa: Type.Object({
        apiSessionId: Type.String(),
        passedMfa: Type.Boolean(),
        passedAt: Type.Union([Type.String(), Type.Null()]),
        passedOnUnlock: Type.Boolean(),
        passedOnWake: Type.Boolean(),
      }),
      sdkInfo: Type.Record(Type.String(), Type.Unknown()),
      os: Nullable(OsData),
      domain: Nullable(DomainData),
      mac: Nullable(MacData),
      processes: Type.Array(ProcessData),
    }),
  ),
  os: Nullable(OsData),
  domain: Nullable(DomainData),
  mac: Nullable(MacData),
  processes: Type.Array(ProcessData),
});
