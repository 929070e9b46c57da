// The change feed: after a write commits, what moved. Caches subscribe to it instead of every
// writer knowing every cache.
import type { Entity } from '../store/repository.js';

export interface Change {
  collection: string;
  kind: 'create' | 'update' | 'delete';
  id: string;
  /** The entity after the change (before it, for a delete). */
  entity?: Entity | Record<string, unknown>;
}

export type ChangeListener = (change: Change) => void;

export class ChangeFeed {
  private readonly listeners = new Set<ChangeListener>();

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(change: Change): void {
    for (const l of this.listeners) l(change);
  }
}
