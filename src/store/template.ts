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

/** Binds a query's values by position: `values[i]` is the value of `names[i]`. */
export type PositionalTemplate = (values: readonly unknown[]) => CompiledQuery;

export function positional(compiled: CompiledQuery, names: readonly string[]): PositionalTemplate {
  const order = compiled.parameters.map((p) => {
    const at = names.indexOf(p as string);
    if (at < 0) throw new Error(`unexpected parameter ${String(p)} in ${compiled.sql}`);
    return at;
  });
  return (values) => ({ ...compiled, parameters: order.map((at) => values[at]) });
}

/** Templates kept per repository at most: updates from PATCHes come in many column sets. */
const MAX_SHAPES = 256;

/** Templates by a key saying their shape, made on first use; the oldest goes beyond MAX_SHAPES. */
export class Templates<T = Template> {
  private readonly byKey = new Map<string, T>();

  of(key: string, make: () => T): T {
    let t = this.byKey.get(key);
    if (!t) {
      if (this.byKey.size >= MAX_SHAPES) this.byKey.delete(this.byKey.keys().next().value!);
      t = make();
      this.byKey.set(key, t);
    }
    return t;
  }
}
