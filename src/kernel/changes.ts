// The change feed: what a committed write moved, told to whoever keeps something derived from the
// store. A change is small and typed — which record of which collection was created, updated or
// deleted, and the identity it belongs to — never the record itself: a listener re-reads what it
// needs, so it sees the store as it is, not as one writer described it.
//
// The feed is an interface, because where changes travel depends on the store:
//   - In process (SQLite, one controller): a write's changes are buffered while its transaction
//     runs and handed to the listeners once it has committed. Nothing is recorded for a write that
//     rolls back.
//   - Across processes (PostgreSQL, several controllers; not built yet): `record` adds an outbox row
//     per change inside the transaction, numbered by a sequence; `seal` sends a notification (pg_notify,
//     delivered at commit) as a wake-up; `deliver` reads the outbox from the last sequence number this
//     process has handled up to the one just written and hands those changes to the listeners — its
//     own and other controllers'. A process that missed notifications (a dropped connection) catches
//     up the same way, by sequence, so no change is lost; rows older than every reader are pruned.
// Either way `deliver` resolves only once every listener has handled the changes, so a write's
// caller hears of success only after caches have dropped what it moved: a revocation, a deleted
// session or a disabled identity stops working before the answer of the write that made it so.
import type { ResourceName } from '../resources/index.js';
import type { Tx } from '../store/store.js';

/** What moves without being a row of a resource. Declared here, the one list of them. */
export const TOPICS = [
  /** Posture data an API session reported; id: the API session. */
  'posture-data',
  /** A refused session request kept for the management API; id: the record. */
  'posture-failures',
  /** An OIDC refresh grant and its refresh tokens; id: the grant. */
  'oidc-grants',
  /** controller_state: what a controller keeps about itself; id: the key. */
  'controller-state',
] as const;

export type Topic = (typeof TOPICS)[number];

/** Everything a change can name: a resource's collection or a declared topic. */
export type Collection = ResourceName | Topic;

export type ChangeKind = 'create' | 'update' | 'delete';

export interface Change {
  collection: Collection;
  kind: ChangeKind;
  id: string;
  /** The identity the record belongs to, for records that belong to one (API sessions, authenticators, ...). */
  ownerId?: string;
}

/** Told of each committed change; may be async (to re-read), the write waits for it. */
export type ChangeListener = (change: Change) => void | Promise<void>;

/** The changes of one write transaction, from its first record to their delivery. */
export interface ChangeRecord {
  /** Notes a change of the transaction (in process: buffered; outbox: a row to insert). */
  record(change: Change): void;
  /** Runs inside the transaction once its work is done, just before the commit. */
  seal(): Promise<void>;
  /** Runs after the commit: hands the changes to every listener and waits for them. */
  deliver(): Promise<void>;
}

export interface ChangeFeed {
  /** Opens the record of the write transaction `tx`. */
  begin(tx: Tx): ChangeRecord;
  subscribe(listener: ChangeListener): () => void;
}

/** Where a listener's failure goes: logged; it never fails the write, which has committed. */
export type ListenerFailure = (err: unknown, change: Change) => void;

/** The feed of one process: changes buffered per transaction, delivered in order after its commit. */
export class InProcessFeed implements ChangeFeed {
  private readonly listeners = new Set<ChangeListener>();

  constructor(private readonly onFailure: ListenerFailure = () => undefined) {}

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  begin(): ChangeRecord {
    const changes: Change[] = [];
    return {
      record: (change) => changes.push(change),
      seal: async () => undefined,
      deliver: () => this.deliver(changes),
    };
  }

  /** Hands changes to every listener, one change after the other, awaiting each listener. */
  async deliver(changes: readonly Change[]): Promise<void> {
    for (const change of changes) {
      for (const listener of [...this.listeners]) {
        try {
          const pending = listener(change);
          if (pending) await pending;
        } catch (err) {
          this.onFailure(err, change);
        }
      }
    }
  }
}
