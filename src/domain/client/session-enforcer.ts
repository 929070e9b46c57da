// Sessions end when their access does, as the established controller's policy enforcer ends them: a
// session whose identity may no longer Dial or Bind its service (a policy, an attribute, a service or
// a posture check changed) or whose posture no longer passes (a posture response, an MFA removed, an
// MFA check's timeout run out) is deleted, and the routers learn of it from the deletion. Changes
// that may end access mark what to look at; one check runs after them, off the write that made them.
// Every minute all sessions are looked at, for what time alone ends.
import type { Logger } from 'pino';
import type { ApiSessions } from '../../auth/api-sessions.js';
import type { Cache } from '../../kernel/caches.js';
import type { Change } from '../../kernel/changes.js';
import type { Kernel } from '../../kernel/kernel.js';
import type { Store } from '../../store/store.js';
import type { Repository } from '../../store/repository.js';
import type { SessionRecord, Sessions } from './sessions.js';

/** Changes that may take access from any identity's sessions. */
const ACCESS_COLLECTIONS: ReadonlySet<string> = new Set(['services', 'service-policies', 'posture-checks']);
/** Sessions read per statement; identity and API session ids per `in` list. */
const PAGE = 1000;
/** How often every session is looked at. */
export const SWEEP_INTERVAL_MS = 60_000;

export interface SessionEnforcerDeps {
  store: Store;
  kernel: Kernel;
  repo: Repository<SessionRecord>;
  sessions: Pick<Sessions, 'allows'>;
  apiSessions: Pick<ApiSessions, 'load'>;
  log?: Pick<Logger, 'error'>;
}

/** What to look at next: every session, or those of some identities and API sessions. */
interface Marks {
  all: boolean;
  identities: Set<string>;
  apiSessions: Set<string>;
}

const noMarks = (): Marks => ({ all: false, identities: new Set(), apiSessions: new Set() });

export class SessionEnforcer implements Cache {
  readonly name = 'session-enforcer';
  private marks = noMarks();
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly d: SessionEnforcerDeps) {}

  onChange(c: Change): void {
    if (ACCESS_COLLECTIONS.has(c.collection)) this.marks.all = true;
    // An identity's attributes move its policy links; without its MFA, MFA checks fail.
    else if (c.collection === 'identities' && c.kind === 'update') this.marks.identities.add(c.id);
    else if (c.collection === 'mfas' && c.kind === 'delete' && c.ownerId !== undefined) this.marks.identities.add(c.ownerId);
    else if (c.collection === 'posture-data') this.marks.apiSessions.add(c.id);
    else return;
    this.schedule();
  }

  reset(): void {
    this.marks.all = true;
    this.schedule();
  }

  /** Looks at every session every SWEEP_INTERVAL_MS from now on. */
  start(): void {
    this.timer ??= setInterval(() => this.reset(), SWEEP_INTERVAL_MS).unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.idle();
  }

  /** Resolves once nothing marked is left to look at. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private schedule(): void {
    this.running ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.drain());
  }

  private async drain(): Promise<void> {
    try {
      while (this.marks.all || this.marks.identities.size > 0 || this.marks.apiSessions.size > 0) {
        const marks = this.marks;
        this.marks = noMarks();
        await this.enforce(marks).catch((err: unknown) => this.d.log?.error({ err }, 'could not end the sessions that lost their access'));
      }
    } finally {
      this.running = undefined;
    }
  }

  private async enforce(marks: Marks): Promise<void> {
    const ended: SessionRecord[] = [];
    for await (const page of this.pages(marks)) {
      for (const s of page) if (!(await this.allowed(s))) ended.push(s);
    }
    if (ended.length === 0) return;
    await this.d.kernel.write(async (ctx) => {
      for (const s of ended) await ctx.remove('sessions', s.id, s.identityId);
    });
  }

  private async allowed(s: SessionRecord): Promise<boolean> {
    const apiSession = await this.d.apiSessions.load(s.apiSessionId);
    // An ended API session takes its sessions with it.
    if (!apiSession) return true;
    const caller = {
      identityId: s.identityId,
      identityName: '',
      apiSessionId: apiSession.id,
      configTypes: apiSession.configTypes,
      isMfaComplete: apiSession.isMfaComplete,
      mfaPassedAt: apiSession.mfaPassedAt,
      sessionCreatedAt: apiSession.createdAt,
    };
    return this.d.sessions.allows(caller, s.serviceId, s.type);
  }

  /** The sessions marked, a page at a time. */
  private async *pages(marks: Marks): AsyncGenerator<SessionRecord[]> {
    const db = this.d.store.db;
    const read = async (rows: Promise<Record<string, unknown>[]>) => (await rows).map((r) => this.d.repo.fromRow(r) as SessionRecord);
    if (marks.all) {
      let after = '';
      for (;;) {
        const page = await read(db.selectFrom('sessions').selectAll().where('id', '>', after).orderBy('id').limit(PAGE).execute());
        if (page.length > 0) yield page;
        if (page.length < PAGE) return;
        after = page[page.length - 1]!.id;
      }
    }
    for (const [column, ids] of [
      ['identity_id', [...marks.identities]],
      ['api_session_id', [...marks.apiSessions]],
    ] as const) {
      for (let i = 0; i < ids.length; i += PAGE) {
        yield await read(db.selectFrom('sessions').selectAll().where(column, 'in', ids.slice(i, i + PAGE)).execute());
      }
    }
  }
}
