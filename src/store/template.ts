// Queries compiled once. A pass through the query builder costs more than running a simple query on
// SQLite, and hot paths ask the same few shapes again and again: compiled with named placeholder
// values, a shape is then bound to new values in the order its SQL wants them.
import type { CompiledQuery } from 'kysely';

/** Binds a query's values by name; compiled with each parameter being its name. */
export type Template = (values: Record<string, unknown>) => CompiledQuery;

export function template(compiled: CompiledQuery, names: readonly string[]): Template {
  const order = compiled.parameters.map((p) => {
    const name = names.find((n) => n === p);
    if (name === undefined) throw new Error(`unexpected parameter ${String(p)} in ${compiled.sql}`);
    return name;
  });
  return (values) => ({ ...compiled, parameters: order.map((name) => values[name]) });
}

/** Templates kept per repository at most: updates from PATCHes come in many column sets. */
const MAX_SHAPES = 256;

/** Templates by a key saying their shape, made on first use; the oldest goes beyond MAX_SHAPES. */
export class Templates {
  private readonly byKey = new Map<string, Template>();

  of(key: string, make: () => Template): Template {
    let t = this.byKey.get(key);
    if (!t) {
      if (this.byKey.size >= MAX_SHAPES) this.byKey.delete(this.byKey.keys().next().value!);
      t = make();
      this.byKey.set(key, t);
    }
    return t;
  }
}
