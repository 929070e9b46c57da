// Posture evaluation (behaviour.md §4), pure: whether what an API session reported about its device
// satisfies posture checks, a policy passing when all of its checks do, the posture queries of
// client service answers, and for a failing check what the device had reported beside what the
// check asks (kept with a refused session request). No I/O and no clock: the time comes in with the
// facts.
import { iso } from '../clock.js';
import type { EntityOf } from '../resources/index.js';

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

type StoredPostureCheck = EntityOf<'posture-checks'>;

/**
 * A stored posture check, as evaluation needs it: its id, name and kind (OS, PROCESS, PROCESS_MULTI,
 * DOMAIN, MAC, MFA; any other fails), and the fields of the kinds, which it may leave out.
 */
export type PostureCheck = Pick<StoredPostureCheck, 'id' | 'name' | 'typeId'> &
  Partial<
    Pick<
      StoredPostureCheck,
      | 'operatingSystems'
      | 'process'
      | 'processes'
      | 'semantic'
      | 'domains'
      | 'macAddresses'
      | 'timeoutSeconds'
      | 'promptOnWake'
      | 'promptOnUnlock'
    >
  >;

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
  // Stryker: one step past the end compares 0 with 0, and d is not 0 where its sign is asked, so
  // `<=` in either place answers the same.
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}

/** One term of a version constraint: an operator glued to a version (`>=6.1`, `10.0.19041`, `<7.0-rc1`). */
const VERSION_TERM = /^(?:>=|<=|==|!=|>|<|=)?v?\d+(?:\.\d+)*(?:[-+][0-9A-Za-z.-]+)?$/;

/**
 * Whether a constraint reads as `versionSatisfies` takes it: no empty alternative, and every term an
 * operator glued to a version (`>= 6.1`, split in two, would read as the equality `6.1`).
 */
export function isVersionConstraint(spec: string): boolean {
  return spec.split('||').every((alternative) => {
    const terms = alternative.trim().split(/\s+/).filter((t) => t !== '');
    return terms.length > 0 && terms.every((t) => VERSION_TERM.test(t));
  });
}

/**
 * Whether `version` satisfies a version constraint of an OS check: alternatives separated by `||`,
 * each a space-separated conjunction of `>=v`, `>v`, `<=v`, `<v`, `=v`, `==v`, `!=v` or a bare `v`
 * (equal). Missing parts count as 0 (`10` = `10.0.0`).
 */
export function versionSatisfies(version: string, spec: string): boolean {
  return spec.split('||').some((alternative) => {
    // Stryker: trimming, splitting on runs of spaces and dropping empty terms overlap: any two of them
    // leave no empty term, and an empty term would fail the pattern below anyway.
    const terms = alternative.trim().split(/\s+/).filter((t) => t !== '');
    if (terms.length === 0) return false;
    return terms.every((term) => {
      // Stryker: `(.+)` takes the rest of any non-empty term, so the anchors change nothing and the
      // pattern always matches; the test is for the type checker.
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

/**
 * How long an MFA check that asks again after a wake or an unlock keeps passing after it (the
 * established controller's grace period): the client prompts for a code meanwhile.
 */
export const MFA_PROMPT_GRACE_MS = 5 * 60_000;

/** The wake and unlock after the MFA was passed that the check asks again for (ms). */
function promptsSincePassed(check: PostureCheck, facts: PostureFacts): number[] {
  const state = facts.posture?.endpointState ?? {};
  const asked = [check.promptOnWake === true ? state.wokenAt : undefined, check.promptOnUnlock === true ? state.unlockedAt : undefined];
  return asked.filter((at): at is number => at !== undefined && at > facts.mfa.passedAt);
}

/** Whether the check asks for the MFA again: a wake or unlock it prompts on came after the MFA. */
export function mfaAskedAgain(check: PostureCheck, facts: PostureFacts): boolean {
  return check.typeId === 'MFA' && facts.mfa.isMfaComplete && promptsSincePassed(check, facts).length > 0;
}

/**
 * The next moment (ms) after `facts.now` at which whether the check passes changes with time alone,
 * or undefined when it cannot: a passed MFA's timeout, or the end of the grace after a wake or
 * unlock that asks for it again. Time only ever ends an MFA's passing, so a check failing now (an
 * MFA never passed, or timed out) fails until something is written.
 */
export function nextChangeAt(check: PostureCheck, facts: PostureFacts): number | undefined {
  if (check.typeId !== 'MFA' || !checkPasses(check, facts)) return undefined;
  const at = Math.min(mfaExpiry(check, facts), ...promptsSincePassed(check, facts).map((woke) => woke + MFA_PROMPT_GRACE_MS));
  return at === Infinity ? undefined : at;
}

/** When a passed MFA stops counting (ms), or Infinity: its timeout, or the grace after a prompt. */
function mfaExpiry(check: PostureCheck, facts: PostureFacts): number {
  const timeout = check.timeoutSeconds ?? -1;
  if (timeout < 0) return Infinity;
  return Math.min(facts.mfa.passedAt + timeout * 1000, ...promptsSincePassed(check, facts).map((at) => at + MFA_PROMPT_GRACE_MS));
}

/** The four conditions of an MFA check as the API session meets them; the check passes when all hold. */
export interface MfaValues {
  passedMfa: boolean;
  passedOnUnlock: boolean;
  passedOnWake: boolean;
  timedOut: boolean;
}

function mfaValues(check: PostureCheck, facts: PostureFacts): MfaValues {
  const { isMfaComplete, passedAt } = facts.mfa;
  const state = facts.posture?.endpointState ?? {};
  // Waking or unlocking after the MFA asks for it again, when the check says so: within the grace
  // period after it, the MFA still counts.
  const passedOn = (prompt: boolean | null | undefined, at: number | undefined) =>
    prompt !== true || (isMfaComplete && (at === undefined || at <= passedAt || facts.now < at + MFA_PROMPT_GRACE_MS));
  return {
    passedMfa: isMfaComplete,
    passedOnUnlock: passedOn(check.promptOnUnlock, state.unlockedAt),
    passedOnWake: passedOn(check.promptOnWake, state.wokenAt),
    // an MFA never passed counts as timed out
    timedOut: !isMfaComplete || facts.now >= mfaExpiry(check, facts),
  };
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
      // Stryker: a default of anything but processes could never pass, so only its emptiness is seen.
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
      const v = mfaValues(check, facts);
      return v.passedMfa && !v.timedOut && v.passedOnWake && v.passedOnUnlock;
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

// ---- what a failing check saw ------------------------------------------------------------------------

/** A reported process as a failure record shows it; a process never reported is not running. */
export interface ProcessActual {
  path?: string;
  isRunning: boolean;
  hash: string;
  signerFingerprints: string[];
}

/**
 * What a failing check asked for (expectedValue) and what the API session had reported for it
 * (actualValue), per kind, in the shapes of the interface document's postureCheckFailure subtypes.
 * A value never reported is empty: '' for a domain, [] for MAC addresses, '' type and version for an OS.
 */
export type CheckFailureValues =
  | { postureCheckType: 'DOMAIN'; actualValue: string; expectedValue: string[] }
  | { postureCheckType: 'MAC'; actualValue: string[]; expectedValue: string[] }
  | { postureCheckType: 'OS'; actualValue: { type: string; version: string }; expectedValue: { type: string; versions: string[] }[] }
  | {
      postureCheckType: 'PROCESS';
      actualValue: ProcessActual;
      expectedValue: { osType: string; path: string; hashes?: string[]; signerFingerprint?: string };
    }
  | {
      postureCheckType: 'PROCESS_MULTI';
      actualValue: ProcessActual[];
      expectedValue: { osType: string; path: string; hashes?: string[]; signerFingerprints?: string[] }[];
      semantic: 'AllOf' | 'AnyOf';
    }
  | {
      postureCheckType: 'MFA';
      actualValue: MfaValues;
      expectedValue: MfaValues;
      /** Times are left out when unknown: MFA never passed, the device never woke or was unlocked. */
      criteria: { passedMfaAt?: string; wokenAt?: string; unlockedAt?: string; timeoutSeconds: number; timeoutRemainingSeconds: number };
    };

/** The report of the process at a path the check names (without case on Windows). */
function reportedProcess(posture: SessionPosture | undefined, want: { osType: string; path: string }): ProcessReport | undefined {
  if (!posture) return undefined;
  const windows = want.osType === 'Windows' || want.osType === 'WindowsServer';
  for (const { value } of posture.processes.values()) {
    if (windows ? lower(value.path) === lower(want.path) : value.path === want.path) return value;
  }
  return undefined;
}

/** A process reported for the check itself, whatever its path. */
function reportedFor(posture: SessionPosture | undefined, checkId: string): ProcessReport | undefined {
  // Stryker: with no posture, a default of anything but reports names no check, so none is found either way.
  for (const r of posture?.processes.values() ?? []) if (r.postureCheckId === checkId) return r.value;
  return undefined;
}

function processActual(report: ProcessReport | undefined): ProcessActual {
  if (!report) return { isRunning: false, hash: '', signerFingerprints: [] };
  return { path: report.path, isRunning: report.isRunning, hash: report.hash, signerFingerprints: [...report.signerFingerprints] };
}

/**
 * What a check saw when it failed; undefined for a kind this controller does not know, or a check
 * missing the fields of its kind (it fails without anything to compare).
 */
export function checkFailureValues(check: PostureCheck, facts: PostureFacts): CheckFailureValues | undefined {
  const p = facts.posture;
  switch (check.typeId) {
    case 'DOMAIN':
      return { postureCheckType: 'DOMAIN', actualValue: p?.domain?.value.domain ?? '', expectedValue: [...(check.domains ?? [])] };
    case 'MAC':
      return { postureCheckType: 'MAC', actualValue: [...(p?.mac?.value.addresses ?? [])], expectedValue: [...(check.macAddresses ?? [])] };
    case 'OS': {
      const os = p?.os?.value;
      return {
        postureCheckType: 'OS',
        actualValue: { type: os?.type ?? '', version: os?.version ?? '' },
        expectedValue: (check.operatingSystems ?? []).map((o) => ({ type: o.type, versions: [...o.versions] })),
      };
    }
    case 'PROCESS': {
      const want = check.process;
      if (!want) return undefined;
      return { postureCheckType: 'PROCESS', actualValue: processActual(reportedProcess(p, want) ?? reportedFor(p, check.id)), expectedValue: structuredClone(want) };
    }
    case 'PROCESS_MULTI': {
      const list = check.processes;
      if (!list) return undefined;
      const reported = list.map((w) => reportedProcess(p, w)).filter((r): r is ProcessReport => r !== undefined);
      return {
        postureCheckType: 'PROCESS_MULTI',
        actualValue: [...new Set(reported)].map(processActual),
        expectedValue: structuredClone(list),
        semantic: check.semantic === 'AnyOf' ? 'AnyOf' : 'AllOf',
      };
    }
    case 'MFA': {
      const timeout = check.timeoutSeconds ?? -1;
      const { isMfaComplete, passedAt } = facts.mfa;
      const state = p?.endpointState ?? {};
      const criteria: Extract<CheckFailureValues, { postureCheckType: 'MFA' }>['criteria'] = {
        timeoutSeconds: timeout < 0 ? -1 : timeout,
        timeoutRemainingSeconds: timeout < 0 ? -1 : isMfaComplete ? Math.max(0, Math.floor((mfaExpiry(check, facts) - facts.now) / 1000)) : 0,
      };
      if (isMfaComplete) criteria.passedMfaAt = iso(passedAt);
      if (state.wokenAt !== undefined) criteria.wokenAt = iso(state.wokenAt);
      if (state.unlockedAt !== undefined) criteria.unlockedAt = iso(state.unlockedAt);
      return {
        postureCheckType: 'MFA',
        actualValue: mfaValues(check, facts),
        // as the established controller states it: passed on wake or unlock is asked for when the
        // check prompts then
        expectedValue: { passedMfa: true, passedOnUnlock: check.promptOnUnlock === true, passedOnWake: check.promptOnWake === true, timedOut: false },
        criteria,
      };
    }
    // Stryker: falling out of the switch answers undefined as well.
    default:
      return undefined;
  }
}
