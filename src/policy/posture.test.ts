// The pure posture evaluation (src/policy/posture.ts), table-driven: each kind of check against
// reported data, version constraints, a policy passing only when all its checks pass, the
// posture queries of client service answers, and what a failing check saw beside what it asks.
import { describe, expect, it } from 'vitest';
import {
  checkFailureValues,
  checkPasses,
  evaluatePolicy,
  postureQuery,
  versionSatisfies,
  isVersionConstraint,
  MFA_PROMPT_GRACE_MS,
  nextChangeAt,
  type PostureCheck,
  type PostureFacts,
  type SessionPosture,
} from './posture.js';

const NOW = Date.parse('2026-01-02T03:04:05.678Z');

function posture(p: Partial<Omit<SessionPosture, 'processes'>> & { processes?: [string, boolean, string?, string[]?][] } = {}): SessionPosture {
  const stamp = { postureCheckId: 'x', lastUpdatedAt: NOW };
  return {
    apiSessionId: 'as',
    identityId: 'i',
    endpointState: {},
    ...p,
    processes: new Map(
      (p.processes ?? []).map(([path, isRunning, hash, signerFingerprints]) => [
        path,
        { ...stamp, value: { path, isRunning, hash: hash ?? '', signerFingerprints: signerFingerprints ?? [] } },
      ]),
    ),
  };
}

const reported = <T>(value: T) => ({ postureCheckId: 'x', lastUpdatedAt: NOW, value });

function facts(p: SessionPosture | undefined, mfa: Partial<PostureFacts['mfa']> = {}, now = NOW): PostureFacts {
  return { posture: p, mfa: { isMfaComplete: false, passedAt: NOW - 60_000, ...mfa }, now };
}

const check = (typeId: string, fields: Partial<PostureCheck>): PostureCheck => ({ id: `pc-${typeId}`, name: typeId, typeId, ...fields });

describe('versionSatisfies', () => {
  it.each([
    ['10.0.19041', '>=10.0.19041', true],
    ['10.0.19040', '>=10.0.19041', false],
    ['10.0.22000', '>10.0.19041', true],
    ['10.0.19041', '>10.0.19041', false],
    ['14', '14', true],
    ['14.0.0', '14', true],
    ['14.1', '14', false],
    ['6.8.0', '>=6.1 <7', true],
    ['7.0', '>=6.1 <7', false],
    ['5.4', '<5 || >=5.4', true],
    ['5.3', '<5 || >=5.4', false],
    ['5.3', '!=5.3', false],
    ['13.4.1', '<=13.4.1', true],
    ['v13.5', '=13.5.0', true],
    ['abc', '1', false],
    ['1', '', false],
    ['  14.1 ', '14.1', true],
    ['1.v2', '1.0', true],
    ['10.rc1', '10.0', true],
    ['13.4', '<=13.4.1', true],
    ['13.5', '<=13.4.1', false],
    ['5.4', '!=5.3', true],
  ])('%s against %s: %s', (version, spec, expected) => {
    expect(versionSatisfies(version, spec)).toBe(expected);
  });
});

// Once any string was stored as a version constraint, and it never matched.
describe('isVersionConstraint', () => {
  it.each([
    ['>=10.0.19041', true],
    ['14', true],
    ['v13.5', true],
    ['>=6.1 <7', true],
    ['<5 || >=5.4', true],
    ['!=5.3', true],
    ['==1.0.0-rc.1', true],
    ['<=2.0+build.5', true],
    ['not a version', false],
    ['', false],
    ['>= 6.1', false],
    ['<5 ||', false],
    ['1.x', false],
    ['>=a.b', false],
    ['=>1', false],
    ['1..2', false],
  ])('%s: %s', (spec, expected) => {
    expect(isVersionConstraint(spec)).toBe(expected);
  });
});

const OS = check('OS', { operatingSystems: [{ type: 'Windows', versions: ['>=10.0.19041'] }, { type: 'macOS', versions: [] }] });
const DOMAIN = check('DOMAIN', { domains: ['corp.example', 'lab.example'] });
const MAC = check('MAC', { macAddresses: ['0a:1b:2c:3d:4e:5f', 'AA-BB-CC-DD-EE-FF'] });
const PROCESS = check('PROCESS', { process: { osType: 'Windows', path: 'C:\\Agent\\agent.exe', hashes: ['ABCD'], signerFingerprint: 'AA:BB' } });
const PROCESS_PLAIN = check('PROCESS', { process: { osType: 'Linux', path: '/usr/bin/agent' } });
const MULTI_ALL = check('PROCESS_MULTI', {
  semantic: 'AllOf',
  processes: [
    { osType: 'Linux', path: '/usr/bin/a' },
    { osType: 'Linux', path: '/usr/bin/b', signerFingerprints: ['ff00', 'ee11'] },
  ],
});
const MULTI_ANY = { ...MULTI_ALL, semantic: 'AnyOf' as const };
const MFA = check('MFA', { timeoutSeconds: -1, promptOnWake: false, promptOnUnlock: false });
const MFA_TIMED = check('MFA', { timeoutSeconds: 300, promptOnWake: true, promptOnUnlock: true });
const MFA_PROMPTS = check('MFA', { timeoutSeconds: -1, promptOnWake: true, promptOnUnlock: true });

describe('checkPasses', () => {
  it.each<[string, PostureCheck, PostureFacts, boolean]>([
    ['OS: nothing reported', OS, facts(undefined), false],
    ['OS: a listed system and version', OS, facts(posture({ os: reported({ type: 'Windows', version: '10.0.22631', build: '1' }) })), true],
    ['OS: system names without case', OS, facts(posture({ os: reported({ type: 'windows', version: '10.0.22631', build: '' }) })), true],
    ['OS: too old a version', OS, facts(posture({ os: reported({ type: 'Windows', version: '10.0.17763', build: '' }) })), false],
    ['OS: any version when none listed', OS, facts(posture({ os: reported({ type: 'macOS', version: '9', build: '' }) })), true],
    ['OS: a system not listed', OS, facts(posture({ os: reported({ type: 'Linux', version: '6.8', build: '' }) })), false],
    ['DOMAIN: listed, any case', DOMAIN, facts(posture({ domain: reported({ domain: 'LAB.example' }) })), true],
    ['DOMAIN: another domain', DOMAIN, facts(posture({ domain: reported({ domain: 'home' }) })), false],
    ['DOMAIN: nothing reported', DOMAIN, facts(posture()), false],
    ['MAC: one address listed (any separators and case)', MAC, facts(posture({ mac: reported({ addresses: ['11:22:33:44:55:66', 'aabbccddeeff'] }) })), true],
    ['MAC: none listed', MAC, facts(posture({ mac: reported({ addresses: ['11:22:33:44:55:66'] }) })), false],
    ['PROCESS: running, hash and signer match', PROCESS, facts(posture({ processes: [['c:\\agent\\AGENT.exe', true, 'abcd', ['aabb']]] })), true],
    ['PROCESS: not running', PROCESS, facts(posture({ processes: [['C:\\Agent\\agent.exe', false, 'abcd', ['aabb']]] })), false],
    ['PROCESS: another hash', PROCESS, facts(posture({ processes: [['C:\\Agent\\agent.exe', true, 'beef', ['aabb']]] })), false],
    ['PROCESS: another signer', PROCESS, facts(posture({ processes: [['C:\\Agent\\agent.exe', true, 'abcd', ['ccdd']]] })), false],
    ['PROCESS: no hash or signer asked', PROCESS_PLAIN, facts(posture({ processes: [['/usr/bin/agent', true]] })), true],
    ['PROCESS: paths outside Windows keep their case', PROCESS_PLAIN, facts(posture({ processes: [['/usr/bin/Agent', true]] })), false],
    ['PROCESS_MULTI AllOf: all pass', MULTI_ALL, facts(posture({ processes: [['/usr/bin/a', true], ['/usr/bin/b', true, '', ['EE:11']]] })), true],
    ['PROCESS_MULTI AllOf: one fails', MULTI_ALL, facts(posture({ processes: [['/usr/bin/a', true], ['/usr/bin/b', true, '', ['0000']]] })), false],
    ['PROCESS_MULTI AnyOf: one passes', MULTI_ANY, facts(posture({ processes: [['/usr/bin/a', true]] })), true],
    ['PROCESS_MULTI AnyOf: none passes', MULTI_ANY, facts(posture({ processes: [['/usr/bin/a', false]] })), false],
    ['MFA: not completed', MFA, facts(posture(), { isMfaComplete: false }), false],
    ['MFA: completed, no timeout', MFA, facts(posture(), { isMfaComplete: true, passedAt: NOW - 86_400_000 }), true],
    ['MFA: completed within the timeout', MFA_TIMED, facts(posture(), { isMfaComplete: true, passedAt: NOW - 299_000 }), true],
    ['MFA: the timeout has passed', MFA_TIMED, facts(posture(), { isMfaComplete: true, passedAt: NOW - 300_000 }), false],
    // Asked again after a wake or unlock: the MFA counts for the grace period after it, then no more.
    ['MFA: woken since, within the grace', MFA_TIMED, facts(posture({ endpointState: { wokenAt: NOW - 1_000 } }), { isMfaComplete: true, passedAt: NOW - 2_000 }), true],
    ['MFA: unlocked since, within the grace', MFA_TIMED, facts(posture({ endpointState: { unlockedAt: NOW - 1_000 } }), { isMfaComplete: true, passedAt: NOW - 2_000 }), true],
    ['MFA: woken since, the grace over', MFA_PROMPTS, facts(posture({ endpointState: { wokenAt: NOW - MFA_PROMPT_GRACE_MS } }), { isMfaComplete: true, passedAt: NOW - MFA_PROMPT_GRACE_MS - 1 }), false],
    ['MFA: unlocked since, the grace over', MFA_PROMPTS, facts(posture({ endpointState: { unlockedAt: NOW - MFA_PROMPT_GRACE_MS } }), { isMfaComplete: true, passedAt: NOW - MFA_PROMPT_GRACE_MS - 1 }), false],
    ['MFA: woken since, the grace not over yet', MFA_PROMPTS, facts(posture({ endpointState: { wokenAt: NOW - MFA_PROMPT_GRACE_MS + 1 } }), { isMfaComplete: true, passedAt: NOW - MFA_PROMPT_GRACE_MS }), true],
    ['MFA: woken since, never passed', MFA_TIMED, facts(posture({ endpointState: { wokenAt: NOW - 1_000 } }), { isMfaComplete: false }), false],
    ['MFA: woken before it passed', MFA_TIMED, facts(posture({ endpointState: { wokenAt: NOW - 3_000 } }), { isMfaComplete: true, passedAt: NOW - 2_000 }), true],
    ['MFA: woken, not asked to prompt', MFA, facts(posture({ endpointState: { wokenAt: NOW } }), { isMfaComplete: true }), true],
    ['an unknown kind never passes', check('RETINA', {}), facts(posture()), false],
    ['OS: a posture without an OS', OS, facts(posture()), false],
    ['OS: one of several versions', check('OS', { operatingSystems: [{ type: 'Linux', versions: ['<6', '>=6.8'] }] }), facts(posture({ os: reported({ type: 'Linux', version: '6.9', build: '' }) })), true],
    ['DOMAIN: no posture at all', DOMAIN, facts(undefined), false],
    // Compared in lower case: ß is not ss (in upper case both would be SS).
    ['DOMAIN: ß is not ss', check('DOMAIN', { domains: ['straße.example'] }), facts(posture({ domain: reported({ domain: 'STRASSE.example' }) })), false],
    ['MAC: no posture at all', MAC, facts(undefined), false],
    ['PROCESS: no posture at all', PROCESS_PLAIN, facts(undefined), false],
    ['PROCESS: a check without its process', check('PROCESS', {}), facts(posture({ processes: [['/usr/bin/agent', true]] })), false],
    ['PROCESS: another path on Windows', PROCESS, facts(posture({ processes: [['C:\\Agent\\other.exe', true, 'abcd', ['aabb']]] })), false],
    [
      'PROCESS: Windows Server paths without case',
      check('PROCESS', { process: { osType: 'WindowsServer', path: 'C:\\Agent\\agent.exe' } }),
      facts(posture({ processes: [['c:\\agent\\AGENT.EXE', true]] })),
      true,
    ],
    ['PROCESS: an empty hash list asks for none', check('PROCESS', { process: { osType: 'Linux', path: '/a', hashes: [] } }), facts(posture({ processes: [['/a', true, 'beef']] })), true],
    ['PROCESS: one of several hashes', check('PROCESS', { process: { osType: 'Linux', path: '/a', hashes: ['0000', 'BEEF'] } }), facts(posture({ processes: [['/a', true, 'beef']] })), true],
    ['PROCESS_MULTI: an empty list never passes', check('PROCESS_MULTI', { semantic: 'AllOf', processes: [] }), facts(posture()), false],
    ['OS: a check listing no systems', check('OS', {}), facts(posture({ os: reported({ type: 'Linux', version: '6.8', build: '' }) })), false],
    ['MFA: a check without a timeout never times out', check('MFA', {}), facts(posture(), { isMfaComplete: true, passedAt: NOW - 60_000 }), true],
    ['MFA: completed, nothing reported', MFA_TIMED, facts(undefined, { isMfaComplete: true, passedAt: NOW - 1_000 }), true],
    ['MFA: a timeout of 0 is over at once', check('MFA', { timeoutSeconds: 0 }), facts(posture(), { isMfaComplete: true, passedAt: NOW - 1 }), false],
    ['MFA: woken as it passed', MFA_TIMED, facts(posture({ endpointState: { wokenAt: NOW - 2_000 } }), { isMfaComplete: true, passedAt: NOW - 2_000 }), true],
  ])('%s', (_name, c, f, expected) => {
    expect(checkPasses(c, f)).toBe(expected);
  });
});

describe('nextChangeAt', () => {
  const passed = (passedAt: number, endpointState: SessionPosture['endpointState'] = {}) => facts(posture({ endpointState }), { isMfaComplete: true, passedAt });
  it.each<[string, PostureCheck, PostureFacts, number | undefined]>([
    ['not an MFA check', DOMAIN, facts(posture()), undefined],
    ['MFA never passed, with a timeout', MFA_TIMED, facts(posture(), { isMfaComplete: false }), undefined],
    ['MFA never passed, woken since', MFA_TIMED, facts(posture({ endpointState: { wokenAt: NOW - 1_000 } }), { isMfaComplete: false }), undefined],
    ['MFA passed, no timeout, no prompt', MFA, passed(NOW - 1_000), undefined],
    ['MFA passed within its timeout: when it runs out', MFA_TIMED, passed(NOW - 100_000), NOW + 200_000],
    ['MFA timed out already', MFA_TIMED, passed(NOW - 300_000), undefined],
    ['MFA timed out long ago', MFA_TIMED, passed(NOW - 86_400_000), undefined],
    ['a timeout of 0', check('MFA', { timeoutSeconds: 0 }), passed(NOW - 1), undefined],
    ['woken since, the timeout first', MFA_TIMED, passed(NOW - 10_000, { wokenAt: NOW - 1_000 }), NOW + 290_000],
    ['timed out, the grace of a later wake not over', MFA_TIMED, passed(NOW - 300_000, { wokenAt: NOW - 1_000 }), undefined],
    ['woken since, the grace first', check('MFA', { timeoutSeconds: 600, promptOnWake: true }), passed(NOW - 10_000, { wokenAt: NOW - 1_000 }), NOW - 1_000 + MFA_PROMPT_GRACE_MS],
    ['unlocked since, without a timeout: the grace', MFA_PROMPTS, passed(NOW - 10_000, { unlockedAt: NOW - 1_000 }), NOW - 1_000 + MFA_PROMPT_GRACE_MS],
    ['woken since, the grace over', MFA_PROMPTS, passed(NOW - MFA_PROMPT_GRACE_MS - 1, { wokenAt: NOW - MFA_PROMPT_GRACE_MS }), undefined],
    ['woken before it passed', MFA_PROMPTS, passed(NOW - 2_000, { wokenAt: NOW - 3_000 }), undefined],
    ['woken, not asked to prompt', MFA, passed(NOW - 2_000, { wokenAt: NOW - 1_000 }), undefined],
  ])('%s', (_name, c, f, expected) => {
    expect(nextChangeAt(c, f)).toBe(expected);
  });

  it('checkPasses answers the same until then, and otherwise from then on', () => {
    const cases: [PostureCheck, PostureFacts][] = [
      [MFA_TIMED, passed(NOW - 100_000)],
      [MFA_TIMED, passed(NOW - 10_000, { wokenAt: NOW - 1_000, unlockedAt: NOW - 500 })],
      [check('MFA', { timeoutSeconds: 600, promptOnUnlock: true }), passed(NOW - 10_000, { unlockedAt: NOW - 1_000 })],
      [MFA_PROMPTS, passed(NOW - 10_000, { unlockedAt: NOW - 1_000 })],
      [MFA_TIMED, facts(posture(), { isMfaComplete: false })],
      [MFA_TIMED, passed(NOW - 300_000)],
      // The timeout runs out before the grace would.
      [MFA_TIMED, passed(NOW - 299_000, { wokenAt: NOW - 1_000 })],
      [MFA_PROMPTS, passed(NOW - 10_000)],
    ];
    for (const [c, f] of cases) {
      const at = nextChangeAt(c, f);
      const passesAt = (now: number) => checkPasses(c, { ...f, now });
      const last = at === undefined ? NOW + 86_400_000 : at - 1;
      for (const now of [NOW, NOW + 1, last]) expect(passesAt(now)).toBe(passesAt(NOW));
      if (at !== undefined) expect(passesAt(at)).not.toBe(passesAt(NOW));
    }
  });
});

describe('evaluatePolicy', () => {
  const passing = facts(posture({ domain: reported({ domain: 'corp.example' }) }));
  it.each<[string, PostureCheck[], boolean]>([
    ['no checks', [], true],
    ['all pass', [DOMAIN], true],
    ['one fails', [DOMAIN, MAC], false],
  ])('%s', (_name, checks, expected) => {
    const result = evaluatePolicy(checks, passing);
    expect(result.isPassing).toBe(expected);
    expect(result.results.map((r) => r.id)).toEqual(checks.map((c) => c.id));
  });

  it('answers each check with id, typeId and isPassing', () => {
    expect(evaluatePolicy([DOMAIN, MAC], passing).results).toEqual([
      { id: 'pc-DOMAIN', typeId: 'DOMAIN', isPassing: true },
      { id: 'pc-MAC', typeId: 'MAC', isPassing: false },
    ]);
  });
});

describe('postureQuery', () => {
  it('an MFA asked for again is due within the grace period, when that comes before its timeout', () => {
    const long = check('MFA', { timeoutSeconds: 600, promptOnWake: true });
    const woken = facts(posture({ endpointState: { wokenAt: NOW - 1_000 } }), { isMfaComplete: true, passedAt: NOW - 10_000 });
    expect(postureQuery(long, woken)).toMatchObject({ isPassing: true, timeout: 600, timeoutRemaining: MFA_PROMPT_GRACE_MS / 1000 - 1 });
    expect(postureQuery(long, facts(posture(), { isMfaComplete: true, passedAt: NOW - 10_000 }))).toMatchObject({ timeoutRemaining: 590 });
  });

  it('tells MFA timeouts and prompts, and what processes are asked for', () => {
    expect(postureQuery(MFA_TIMED, facts(posture(), { isMfaComplete: true, passedAt: NOW - 100_000 }))).toEqual({
      id: 'pc-MFA',
      typeId: 'MFA',
      queryType: 'MFA',
      isPassing: true,
      timeout: 300,
      timeoutRemaining: 200,
      promptOnWake: true,
      promptOnUnlock: true,
    });
    expect(postureQuery(MFA, facts(posture()))).toMatchObject({ isPassing: false, timeout: -1, timeoutRemaining: -1, promptOnWake: false, promptOnUnlock: false });
    expect(postureQuery(check('MFA', { timeoutSeconds: 0 }), facts(posture(), { isMfaComplete: true }))).toMatchObject({ isPassing: false, timeout: 0, timeoutRemaining: 0 });
    // Other kinds, and process checks missing their processes, name no process.
    expect(postureQuery(DOMAIN, facts(posture()))).toEqual({ id: 'pc-DOMAIN', typeId: 'DOMAIN', queryType: 'DOMAIN', isPassing: false, timeout: -1, timeoutRemaining: -1 });
    expect(postureQuery(check('PROCESS', {}), facts(posture()))).not.toHaveProperty('process');
    expect(postureQuery(check('MFA', {}), facts(posture()))).toMatchObject({ timeout: -1, timeoutRemaining: -1 });
    // Fields of another kind, had a check kept them, are not shown either.
    const stray = check('DOMAIN', { domains: [], process: PROCESS.process, processes: MULTI_ALL.processes });
    expect(Object.keys(postureQuery(stray, facts(posture()))).sort()).toEqual(['id', 'isPassing', 'queryType', 'timeout', 'timeoutRemaining', 'typeId']);
    expect(postureQuery(check('PROCESS_MULTI', {}), facts(posture()))).not.toHaveProperty('processes');
    expect(postureQuery(PROCESS, facts(posture()))).toEqual({
      id: 'pc-PROCESS',
      typeId: 'PROCESS',
      queryType: 'PROCESS',
      isPassing: false,
      timeout: -1,
      timeoutRemaining: -1,
      process: { osType: 'Windows', path: 'C:\\Agent\\agent.exe' },
    });
    expect(postureQuery(MULTI_ALL, facts(posture())).processes).toEqual([
      { osType: 'Linux', path: '/usr/bin/a' },
      { osType: 'Linux', path: '/usr/bin/b' },
    ]);
  });
});

describe('checkFailureValues', () => {
  const os = reported({ type: 'Windows', version: '10.0.17763', build: '1' });

  it('shows what a DOMAIN, MAC or OS check asked for beside what was reported, empty when nothing was', () => {
    expect(checkFailureValues(DOMAIN, facts(posture({ domain: reported({ domain: 'home' }) })))).toEqual({
      postureCheckType: 'DOMAIN',
      actualValue: 'home',
      expectedValue: ['corp.example', 'lab.example'],
    });
    expect(checkFailureValues(DOMAIN, facts(undefined))).toEqual({ postureCheckType: 'DOMAIN', actualValue: '', expectedValue: ['corp.example', 'lab.example'] });
    expect(checkFailureValues(check('DOMAIN', {}), facts(undefined))).toEqual({ postureCheckType: 'DOMAIN', actualValue: '', expectedValue: [] });
    expect(checkFailureValues(MAC, facts(posture({ mac: reported({ addresses: ['11:22:33:44:55:66'] }) })))).toEqual({
      postureCheckType: 'MAC',
      actualValue: ['11:22:33:44:55:66'],
      expectedValue: ['0a:1b:2c:3d:4e:5f', 'AA-BB-CC-DD-EE-FF'],
    });
    expect(checkFailureValues(check('MAC', {}), facts(undefined))).toEqual({ postureCheckType: 'MAC', actualValue: [], expectedValue: [] });
    expect(checkFailureValues(OS, facts(posture({ os })))).toEqual({
      postureCheckType: 'OS',
      actualValue: { type: 'Windows', version: '10.0.17763' },
      expectedValue: [
        { type: 'Windows', versions: ['>=10.0.19041'] },
        { type: 'macOS', versions: [] },
      ],
    });
    expect(checkFailureValues(check('OS', {}), facts(undefined))).toEqual({ postureCheckType: 'OS', actualValue: { type: '', version: '' }, expectedValue: [] });
    // A posture without the value asked for shows it empty too.
    expect(checkFailureValues(DOMAIN, facts(posture()))).toMatchObject({ actualValue: '' });
    expect(checkFailureValues(MAC, facts(posture()))).toMatchObject({ actualValue: [] });
    expect(checkFailureValues(OS, facts(posture()))).toMatchObject({ actualValue: { type: '', version: '' } });
  });

  it('copies what the check asks, so a record kept cannot change the check', () => {
    const values = checkFailureValues(DOMAIN, facts(undefined)) as { expectedValue: string[] };
    values.expectedValue.push('x');
    expect(DOMAIN.domains).toEqual(['corp.example', 'lab.example']);
    const multi = checkFailureValues(MULTI_ALL, facts(undefined)) as { expectedValue: unknown[] };
    expect(multi.expectedValue).toEqual(MULTI_ALL.processes);
    expect(multi.expectedValue).not.toBe(MULTI_ALL.processes);
    const single = checkFailureValues(PROCESS, facts(undefined)) as { expectedValue: unknown };
    expect(single.expectedValue).toEqual(PROCESS.process);
    expect(single.expectedValue).not.toBe(PROCESS.process);
  });

  it('shows the process a PROCESS check names (without case on Windows), else one reported for the check, else none running', () => {
    const at = (path: string, checkId = 'x') => ({ postureCheckId: checkId, lastUpdatedAt: NOW, value: { path, isRunning: true, hash: 'beef', signerFingerprints: ['cc'] } });
    const withProcesses = (...list: ReturnType<typeof at>[]) => ({ ...posture(), processes: new Map(list.map((r) => [r.value.path, r])) });
    expect(checkFailureValues(PROCESS, facts(withProcesses(at('/other'), at('c:\\AGENT\\agent.exe'))))).toMatchObject({
      postureCheckType: 'PROCESS',
      actualValue: { path: 'c:\\AGENT\\agent.exe', isRunning: true, hash: 'beef', signerFingerprints: ['cc'] },
    });
    // Outside Windows a path of another case is another process; one reported for the check is shown.
    expect(checkFailureValues(PROCESS_PLAIN, facts(withProcesses(at('/usr/bin/Agent'), at('/opt/agent', 'pc-PROCESS'))))).toMatchObject({
      actualValue: { path: '/opt/agent', isRunning: true },
    });
    expect(checkFailureValues(PROCESS_PLAIN, facts(withProcesses(at('/usr/bin/Agent'))))).toMatchObject({
      actualValue: { isRunning: false, hash: '', signerFingerprints: [] },
    });
    expect(checkFailureValues(PROCESS_PLAIN, facts(undefined))).toEqual({
      postureCheckType: 'PROCESS',
      actualValue: { isRunning: false, hash: '', signerFingerprints: [] },
      expectedValue: { osType: 'Linux', path: '/usr/bin/agent' },
    });
    expect(checkFailureValues(check('PROCESS', {}), facts(undefined))).toBeUndefined();
    const server = check('PROCESS', { process: { osType: 'WindowsServer', path: 'C:\\Agent\\agent.exe' } });
    expect(checkFailureValues(server, facts(withProcesses(at('c:\\agent\\AGENT.EXE'))))).toMatchObject({ actualValue: { path: 'c:\\agent\\AGENT.EXE', isRunning: true } });
  });

  it('shows the processes a PROCESS_MULTI check names, each once, with its semantic', () => {
    const same = check('PROCESS_MULTI', {
      semantic: 'AnyOf',
      processes: [
        { osType: 'Linux', path: '/usr/bin/a' },
        { osType: 'Linux', path: '/usr/bin/a', hashes: ['ff'] },
        { osType: 'Linux', path: '/usr/bin/c' },
      ],
    });
    const p = posture({ processes: [['/usr/bin/a', true, 'ab', ['x']], ['/usr/bin/b', false]] });
    expect(checkFailureValues(same, facts(p))).toEqual({
      postureCheckType: 'PROCESS_MULTI',
      actualValue: [{ path: '/usr/bin/a', isRunning: true, hash: 'ab', signerFingerprints: ['x'] }],
      expectedValue: same.processes,
      semantic: 'AnyOf',
    });
    expect(checkFailureValues(MULTI_ALL, facts(p))).toMatchObject({
      actualValue: [{ path: '/usr/bin/a' }, { path: '/usr/bin/b', isRunning: false }],
      semantic: 'AllOf',
    });
    expect(checkFailureValues(check('PROCESS_MULTI', { processes: [] }), facts(undefined))).toMatchObject({ actualValue: [], semantic: 'AllOf' });
    expect(checkFailureValues(check('PROCESS_MULTI', {}), facts(undefined))).toBeUndefined();
  });

  it('shows the conditions of an MFA check with its times', () => {
    const f = facts(posture({ endpointState: { wokenAt: NOW - 1_000, unlockedAt: NOW - 5_000 } }), { isMfaComplete: true, passedAt: NOW - 100_000 });
    expect(checkFailureValues(MFA_TIMED, f)).toEqual({
      postureCheckType: 'MFA',
      // Woken and unlocked since the MFA, both within their grace.
      actualValue: { passedMfa: true, passedOnUnlock: true, passedOnWake: true, timedOut: false },
      expectedValue: { passedMfa: true, passedOnUnlock: true, passedOnWake: true, timedOut: false },
      criteria: {
        passedMfaAt: new Date(NOW - 100_000).toISOString(),
        wokenAt: new Date(NOW - 1_000).toISOString(),
        unlockedAt: new Date(NOW - 5_000).toISOString(),
        timeoutSeconds: 300,
        timeoutRemainingSeconds: 200,
      },
    });
    // Never passed, nothing reported, no timeout: times left out, -1 for the timeout.
    expect(checkFailureValues(MFA, facts(undefined))).toEqual({
      postureCheckType: 'MFA',
      actualValue: { passedMfa: false, passedOnUnlock: true, passedOnWake: true, timedOut: true },
      expectedValue: { passedMfa: true, passedOnUnlock: false, passedOnWake: false, timedOut: false },
      criteria: { timeoutSeconds: -1, timeoutRemainingSeconds: -1 },
    });
    // With a timeout but never passed: none remains. Passed long ago: none remains either.
    expect(checkFailureValues(MFA_TIMED, facts(posture())) as { criteria: unknown }).toMatchObject({ criteria: { timeoutSeconds: 300, timeoutRemainingSeconds: 0 } });
    expect(checkFailureValues(check('MFA', { timeoutSeconds: 0 }), facts(posture(), { isMfaComplete: true, passedAt: NOW - 1_000 }))).toMatchObject({
      criteria: { timeoutSeconds: 0, timeoutRemainingSeconds: 0 },
      actualValue: { timedOut: true },
    });
    expect(checkFailureValues(check('MFA', {}), facts(undefined))).toMatchObject({ criteria: { timeoutSeconds: -1, timeoutRemainingSeconds: -1 } });
    // Any negative timeout is none, shown as -1.
    expect(checkFailureValues(check('MFA', { timeoutSeconds: -5 }), facts(undefined))).toMatchObject({ criteria: { timeoutSeconds: -1, timeoutRemainingSeconds: -1 } });
  });

  it('has nothing to show for a kind it does not know', () => {
    expect(checkFailureValues(check('RETINA', {}), facts(posture()))).toBeUndefined();
  });
});
