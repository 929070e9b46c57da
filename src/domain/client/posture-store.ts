// The posture store (behaviour.md §4): what clients report about their device, kept per API
// session, and the session requests refused for failing posture checks, kept per identity. Whether
// the data satisfies posture checks is decided by the pure evaluation in policy/posture.ts.
//
// Reported data is stored per API session (the device that reported it) and read from memory; a
// write goes to the store first, then to memory. Refused session requests are recorded per identity.
import { Type, type TSchema } from '@sinclair/typebox';
import { sql } from 'kysely';
import { fieldError } from '../../errors.js';
import { iso, type Clock } from '../../clock.js';
import { newId } from '../../ids.js';
import { BoundedMap } from '../../kernel/bounded-map.js';
import type { Cache } from '../../kernel/caches.js';
import type { Change } from '../../kernel/changes.js';
import type { Kernel } from '../../kernel/kernel.js';
import type { Store } from '../../store/store.js';
import type { CheckFailureValues, OsReport, ProcessReport, Reported, SessionPosture } from '../../policy/posture.js';

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
/**
 * Processes (by path) one API session reports at most: each is a row kept while the session lives,
 * and a client could otherwise fill the store under made-up paths.
 */
export const MAX_SESSION_PROCESSES = 1000;
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
    checks: RecordedCheckFailure[];
  }[];
}

/**
 * One failing check of a refused request, with what it saw (policy/posture.ts); a check of a kind
 * without values, or a record kept from before the values were, has the base fields only.
 */
export type RecordedCheckFailure = CheckFailureBase | (CheckFailureBase & CheckFailureValues);
interface CheckFailureBase {
  postureCheckId: string;
  postureCheckName: string;
  postureCheckType: string;
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
      // Counted in the write, after it: writes run one at a time, so concurrent reports hold the bound too.
      if (rows.some((r) => r.kind === 'PROCESS')) {
        const { n } = await ctx.tx
          .selectFrom('posture_data')
          .select(sql<number>`count(*)`.as('n'))
          .where('api_session_id', '=', who.apiSessionId)
          .where('kind', '=', 'PROCESS')
          .executeTakeFirstOrThrow();
        if (Number(n) > MAX_SESSION_PROCESSES) {
          throw fieldError('path', `an API session reports at most ${MAX_SESSION_PROCESSES} processes (by path)`);
        }
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
  async identityData(identityId: string): Promise<Record<string, unknown>> {
    const db = this.store.db;
    const rows = (await db.selectFrom('posture_data').selectAll().where('identity_id', '=', identityId).execute()) as PostureRow[];
    const sessions = await db
      .selectFrom('api_sessions')
      .select(['id', 'is_mfa_complete', 'mfa_passed_at', 'created_at'])
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
    // The identity's own os, domain and mac are objects even before any report: empty values, no
    // postureCheckId, and no lastUpdatedAt (nothing was reported when).
    const none = { postureCheckId: '', timedOut: false };
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
    const complete = new Map(
      sessions.map((s) => [String(s.id), { done: (s.is_mfa_complete === 1 || s.is_mfa_complete === true) && s.mfa_passed_at !== null, at: String(s.mfa_passed_at) }]),
    );
    const apiSessionPostureData: Record<string, unknown> = {};
    for (const [id, p] of bySession) {
      const mfa = complete.get(id);
      // A time not (yet) reported is left out: these are date-times, never null.
      apiSessionPostureData[id] = {
        endpointState: {
          ...(p.endpointState.unlockedAt !== undefined && { unlockedAt: iso(p.endpointState.unlockedAt) }),
          ...(p.endpointState.wokenAt !== undefined && { wokenAt: iso(p.endpointState.wokenAt) }),
        },
        mfa: {
          apiSessionId: id,
          passedMfa: mfa?.done ?? false,
          ...(mfa?.done && { passedAt: mfa.at }),
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
      os: os(newest((p) => p.os)) ?? { ...none, type: '', version: '', build: '' },
      domain: domain(newest((p) => p.domain)) ?? { ...none, domain: '' },
      mac: mac(newest((p) => p.mac)) ?? { ...none, addresses: [] },
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
  async failures(identityId: string): Promise<PostureFailure[]> {
    const rows = await this.store.db
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

const FailureBase = { postureCheckId: Type.String(), postureCheckName: Type.String() };
const Strings = Type.Array(Type.String());
const OsTypeName = Type.String({ description: 'Windows, WindowsServer, Android, iOS, Linux or macOS' });
// Titles name the parts as the established document does.
const ProcessActualSchema = Type.Object(
  {
    path: Type.Optional(Type.String()),
    isRunning: Type.Boolean(),
    hash: Type.String({ description: 'empty when never reported' }),
    signerFingerprints: Strings,
  },
  { title: 'postureCheckFailureProcessActual' },
);
const MfaValuesSchema = Type.Object(
  { passedMfa: Type.Boolean(), passedOnUnlock: Type.Boolean(), passedOnWake: Type.Boolean(), timedOut: Type.Boolean() },
  { title: 'postureChecksFailureMfaValues' },
);
const Kind = <K extends string, P extends Record<string, TSchema>>(kind: K, title: string, values: P) =>
  Type.Object({ ...FailureBase, postureCheckType: Type.Literal(kind), ...values }, { title });

/** A failing check per kind, what the API session had reported (actualValue) beside what the check asks (expectedValue). */
const CheckFailureSchema = Type.Union([
  Kind('DOMAIN', 'postureCheckFailureDomain', { actualValue: Type.String({ description: 'empty when never reported' }), expectedValue: Strings }),
  Kind('MAC', 'postureCheckFailureMacAddress', { actualValue: Strings, expectedValue: Strings }),
  Kind('OS', 'postureCheckFailureOperatingSystem', {
    actualValue: Type.Object({ type: Type.String(), version: Type.String() }, { title: 'postureCheckFailureOperatingSystemActual' }),
    expectedValue: Type.Array(Type.Object({ type: OsTypeName, versions: Strings })),
  }),
  Kind('PROCESS', 'postureCheckFailureProcess', {
    actualValue: ProcessActualSchema,
    expectedValue: Type.Object({
      osType: OsTypeName,
      path: Type.String(),
      hashes: Type.Optional(Strings),
      signerFingerprint: Type.Optional(Type.String()),
    }),
  }),
  Kind('PROCESS_MULTI', 'postureCheckFailureProcessMulti', {
    actualValue: Type.Array(ProcessActualSchema),
    expectedValue: Type.Array(
      Type.Object({ osType: OsTypeName, path: Type.String(), hashes: Type.Optional(Strings), signerFingerprints: Type.Optional(Strings) }),
    ),
    semantic: Type.Union([Type.Literal('AllOf'), Type.Literal('AnyOf')]),
  }),
  Kind('MFA', 'postureCheckFailureMfa', {
    actualValue: MfaValuesSchema,
    expectedValue: MfaValuesSchema,
    criteria: Type.Object(
      {
        passedMfaAt: Type.Optional(Type.String({ format: 'date-time', description: 'absent while MFA has not passed' })),
        wokenAt: Type.Optional(Type.String({ format: 'date-time', description: 'absent while the device has not reported waking' })),
        unlockedAt: Type.Optional(Type.String({ format: 'date-time', description: 'absent while the device has not reported an unlock' })),
        timeoutSeconds: Type.Integer({ description: '-1: a passed MFA counts forever' }),
        timeoutRemainingSeconds: Type.Integer({ description: '-1: no timeout' }),
      },
      { title: 'postureChecksFailureMfaCriteria' },
    ),
  }),
  // a check without values (see RecordedCheckFailure); last, so any of the above is preferred
  Type.Object({ ...FailureBase, postureCheckType: Type.String() }, { title: 'postureCheckFailure' }),
]);

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
      checks: Type.Array(CheckFailureSchema),
    }),
  ),
});

const DateTime = Type.String({ format: 'date-time' });
const Stamp = {
  lastUpdatedAt: Type.Optional({ ...DateTime, description: 'when it was reported; absent before any report' }),
  postureCheckId: Type.String({ description: 'the check it was reported for; empty before any report' }),
  timedOut: Type.Boolean(),
};
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
      endpointState: Type.Object({ unlockedAt: Type.Optional(DateTime), wokenAt: Type.Optional(DateTime) }),
      mfa: Type.Object({
        apiSessionId: Type.String(),
        passedMfa: Type.Boolean(),
        passedAt: Type.Optional(DateTime),
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
  os: OsData,
  domain: DomainData,
  mac: MacData,
  processes: Type.Array(ProcessData),
});
