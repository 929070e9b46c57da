// Tracing of one identity's requests: while a trace is on (until its duration has passed), every
// request of that identity is logged at debug detail with the trace id, whatever the log level.
// Traces live in memory, as in the established controller: a trace is a short diagnostic, not
// configuration, so it needs no migration nor a store write per toggle, and a restart ends it rather
// than leaving a forgotten debug trace behind. (Several controllers on one PostgreSQL store would
// each hold their own; a trace is set on the controller whose logs are read.) The map is bounded by
// the identities that exist: a trace is set only for an existing identity, dropped when it expires
// and when the identity is deleted.
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.js';
import { iso } from '../clock.js';
import { parseDuration } from '../config/duration.js';
import { fieldError } from '../errors.js';
import type { ChangeFeed } from '../kernel/changes.js';

/** What can be traced: the request line, the answer (status, duration). `all` is both. */
export const TRACE_CHANNELS = ['request', 'response'] as const;
export type TraceChannel = (typeof TRACE_CHANNELS)[number];
/** Longest trace: a day, so a trace once forgotten ends. */
export const MAX_TRACE_MS = 24 * 3_600_000;

export interface TraceSpec {
  enabled: boolean;
  duration?: string;
  traceId?: string;
  channels?: string[];
}

export interface TraceDetail {
  enabled: boolean;
  traceId?: string;
  until?: string;
  channels?: TraceChannel[];
}

export interface ActiveTrace {
  traceId: string;
  until: number;
  channels: ReadonlySet<TraceChannel>;
}

export class IdentityTraces {
  private readonly traces = new Map<string, ActiveTrace>();

  constructor(
    private readonly clock: Clock,
    feed: ChangeFeed,
  ) {
    feed.subscribe((c) => {
      if (c.collection === 'identities' && c.kind === 'delete') this.traces.delete(c.id);
    });
  }

  /**
   * Turns the trace of an (existing) identity on or off. On: `duration` (e.g. "10m") is required, the
   * trace id is generated when absent, no channels (or `all`) means every channel.
   */
  set(identityId: string, spec: TraceSpec): TraceDetail {
    if (!spec.enabled) {
      this.traces.delete(identityId);
      return { enabled: false };
    }
    if (spec.duration === undefined) throw fieldError('duration', 'a duration is required to enable a trace, e.g. "10m"');
    let ms: number;
    try {
      ms = parseDuration(spec.duration);
    } catch (err) {
      throw fieldError('duration', (err as Error).message, spec.duration);
    }
    if (ms <= 0) throw fieldError('duration', 'must be longer than zero', spec.duration);
    if (ms > MAX_TRACE_MS) throw fieldError('duration', 'a trace lasts at most 24h', spec.duration);
    const channels = new Set<TraceChannel>();
    for (const channel of spec.channels ?? []) {
      if (channel === 'all') TRACE_CHANNELS.forEach((c) => channels.add(c));
      else if ((TRACE_CHANNELS as readonly string[]).includes(channel)) channels.add(channel as TraceChannel);
      else throw fieldError('channels', `unknown channel; known: all, ${TRACE_CHANNELS.join(', ')}`, channel);
    }
    if (channels.size === 0) TRACE_CHANNELS.forEach((c) => channels.add(c));
    this.prune();
    const trace: ActiveTrace = { traceId: spec.traceId ?? randomUUID(), until: this.clock() + ms, channels };
    this.traces.set(identityId, trace);
    return { enabled: true, traceId: trace.traceId, until: iso(trace.until), channels: [...channels] };
  }

  /** The identity's trace while it is on. */
  active(identityId: string): ActiveTrace | undefined {
    const trace = this.traces.get(identityId);
    if (trace === undefined) return undefined;
    if (this.clock() >= trace.until) {
      this.traces.delete(identityId);
      return undefined;
    }
    return trace;
  }

  /** Drops the traces that have ended. */
  private prune(): void {
    const now = this.clock();
    for (const [id, trace] of this.traces) if (now >= trace.until) this.traces.delete(id);
  }
}
