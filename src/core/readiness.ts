// Whether this controller should get traffic: its store answers from the file it opened, every
// migration it knows is applied, and it is not shutting down. Asked by GET /ready (a load balancer's
// probe, every few seconds), so it costs a stat and one small indexed read; a shutdown turns it off
// before the listeners close.
import type { Store } from '../store/store.js';

/** Kysely's record of applied migrations. */
const MIGRATION_TABLE = 'kysely_migration';

export class Readiness {
  private stopping = false;

  constructor(
    private readonly store: Store,
    private readonly migrations: readonly string[],
  ) {}

  /** From now on the controller is not ready: it is shutting down. */
  stop(): void {
    this.stopping = true;
  }

  /** Why the controller is not ready, or undefined when it is. */
  async problem(): Promise<string | undefined> {
    if (this.stopping) return 'shutting down';
    const file = this.store.dialect.fileProblem();
    if (file) return file;
    let applied: Set<string>;
    try {
      const rows = await this.store.db.selectFrom(MIGRATION_TABLE).select('name').execute();
      applied = new Set(rows.map((row) => String(row.name)));
    } catch {
      return 'store unreachable';
    }
    const missing = this.migrations.filter((name) => !applied.has(name));
    return missing.length > 0 ? `migrations not applied: ${missing.join(', ')}` : undefined;
  }
}
