// Rows of one resource table, derived from its definition: mapping between entity fields and
// columns, and the generic queries (reads from the definition's view when it has one, writes to its
// table). No validation here; that is the domain's job.
import { sql, type Expression, type SqlBool } from 'kysely';
import { COLUMN_TYPE, columnOf, type ColumnType, type ResourceDef } from '../resources/kit.js';
import type { SortKey } from '../query/ast.js';
import type { Dialect } from './dialect.js';
import type { Executor } from './store.js';
import { positional, template, Templates, type PositionalTemplate, type Template } from './template.js';

export type Entity = Record<string, unknown> & {
  id: string;
  createdAt: string;
  updatedAt: string;
  tags: Record<string, string | boolean | null>;
};

export interface ListQuery {
  /** Caller scoping, applied before the filter (never widened by it). */
  scope?: Expression<SqlBool>;
  where?: Expression<SqlBool>;
  sort: readonly SortKey[];
  offset: number;
  /** null: every row. */
  limit: number | null;
}

interface Column {
  field: string;
  column: string;
  type: ColumnType;
}

/** The rows of one table; `E` is the entity type inferred from the definition where the caller knows it. */
export class Repository<E extends Entity = Entity> {
  readonly columns: readonly Column[];
  private readonly byField: ReadonlyMap<string, Column>;
  /** The by-id reads, compiled once (see template.ts). */
  private readonly templates = new Templates<Template>();
  /** The inserts and updates, compiled once per set of columns written (`written`). */
  private readonly writes = new Templates<PositionalTemplate>();
  /** The bit of each column in a set of columns written. */
  private readonly bits: readonly number[];

  constructor(
    readonly def: ResourceDef,
    private readonly dialect: Dialect,
  ) {
    const columns: Column[] = [
      { field: 'id', column: 'id', type: 'text' },
      { field: 'createdAt', column: 'created_at', type: 'text' },
      { field: 'updatedAt', column: 'updated_at', type: 'text' },
      { field: 'tags', column: 'tags', type: 'json' },
    ];
    if (def.system) columns.push({ field: 'isSystem', column: 'is_system', type: 'boolean' });
    for (const [name, f] of Object.entries(def.fields)) {
      if (!f.virtual) columns.push({ field: name, column: columnOf(name, f), type: COLUMN_TYPE[f.kind] });
    }
    // A set of columns is a number with a bit per column: exact up to 53 bits.
    if (columns.length > 53) throw new Error(`${def.name} has more columns than a write's column set can name`);
    this.columns = columns;
    this.bits = columns.map((_, i) => 2 ** i);
    this.byField = new Map(columns.map((c) => [c.field, c]));
  }

  get table(): string {
    return this.def.table;
  }

  /** Where reads come from: the definition's view (records of other tables too) or its table. */
  get source(): string {
    return this.def.readFrom ?? this.def.table;
  }

  columnOf(field: string): string {
    const c = this.byField.get(field);
    if (!c) throw new Error(`${this.def.name} has no field ${field}`);
    return c.column;
  }

  fromRow(row: Record<string, unknown>): E {
    const entity: Record<string, unknown> = {};
    for (const c of this.columns) entity[c.field] = this.dialect.fromDb(c.type, row[c.column]);
    return entity as E;
  }

  toRow(values: Record<string, unknown>): Record<string, unknown> {
    const row: Record<string, unknown> = {};
    for (const [field, value] of Object.entries(values)) {
      const c = this.byField.get(field);
      if (c && value !== undefined) row[c.column] = this.dialect.toDb(c.type, value);
    }
    return row;
  }

  private filtered(ex: Executor, q: Pick<ListQuery, 'scope' | 'where'>) {
    let query = ex.selectFrom(this.source);
    if (q.scope) query = query.where(q.scope);
    if (q.where) query = query.where(q.where);
    return query;
  }

  async list(ex: Executor, q: ListQuery): Promise<{ items: E[]; total: number }> {
    const countRow = await this.filtered(ex, q)
      .select(sql<number>`count(*)`.as('n'))
      .executeTakeFirstOrThrow();
    let query = this.filtered(ex, q).selectAll();
    for (const s of q.sort) query = query.orderBy(sql.ref(this.columnOf(s.field)), s.direction);
    if (!q.sort.some((s) => s.field === 'id')) query = query.orderBy('id', 'asc');
    if (q.limit !== null) query = query.limit(q.limit);
    if (q.offset > 0) query = q.limit === null ? query.limit(-1).offset(q.offset) : query.offset(q.offset);
    const rows = await query.execute();
    return { items: rows.map((r) => this.fromRow(r)), total: Number(countRow.n) };
  }

  async get(ex: Executor, id: string): Promise<E | undefined> {
    const find = this.templates.of('get', () => template(this.dialect.db.selectFrom(this.source).selectAll().where('id', '=', ID).compile(), [ID]));
    const [row] = (await this.dialect.execute(ex, find({ [ID]: id }))).rows as Record<string, unknown>[];
    return row ? this.fromRow(row) : undefined;
  }

  /** The first record whose field holds this value (a field of unique values, say). */
  async findBy(ex: Executor, field: string, value: unknown): Promise<E | undefined> {
    const column = this.columnOf(field);
    const find = this.templates.of(`find ${column}`, () =>
      template(this.dialect.db.selectFrom(this.source).selectAll().where(column, '=', ID).limit(sql.lit(1)).compile(), [ID]),
    );
    const [row] = (await this.dialect.execute(ex, find({ [ID]: value }))).rows as Record<string, unknown>[];
    return row ? this.fromRow(row) : undefined;
  }

  async exists(ex: Executor, id: string): Promise<boolean> {
    return this.existsIn(ex, this.source, id);
  }

  private async existsIn(ex: Executor, table: string, id: string): Promise<boolean> {
    const find = this.templates.of(`exists ${table}`, () => template(this.dialect.db.selectFrom(table).select('id').where('id', '=', ID).compile(), [ID]));
    return (await this.dialect.execute(ex, find({ [ID]: id }))).rows.length > 0;
  }

  /** id → reference name, for entity references in reads. */
  async names(ex: Executor, ids: readonly string[]): Promise<Map<string, string>> {
    const unique = [...new Set(ids)];
    if (unique.length === 0) return new Map();
    const nameColumn = this.columnOf(this.def.nameField ?? 'name');
    const rows = await ex
      .selectFrom(this.source)
      .select(['id', sql.ref<string>(nameColumn).as('name')])
      .where('id', 'in', unique)
      .execute();
    return new Map(rows.map((r) => [r.id as string, r.name]));
  }

  async insert(ex: Executor, entity: Record<string, unknown>): Promise<void> {
    const { set, values } = this.written(entity);
    const insert = this.writes.of(`insert ${set}`, () => {
      const columns = this.columnsIn(set);
      return positional(this.dialect.db.insertInto(this.table).values(placeholders(columns)).compile(), columns.map(placeholder));
    });
    await this.dialect.execute(ex, insert(values));
  }

  async update(ex: Executor, id: string, changes: Record<string, unknown>): Promise<boolean> {
    const { set, values } = this.written(changes);
    if (set === 0) return this.existsIn(ex, this.table, id);
    const update = this.writes.of(`update ${set}`, () => {
      const columns = this.columnsIn(set);
      return positional(this.dialect.db.updateTable(this.table).set(placeholders(columns)).where('id', '=', ID).compile(), [
        ...columns.map(placeholder),
        ID,
      ]);
    });
    values.push(id);
    const result = await this.dialect.execute(ex, update(values));
    return Number(result.numAffectedRows ?? 0) > 0;
  }

  /**
   * The columns a write sets (those of the fields given, not undefined) as a set of bits, and their
   * values as stored, in column order. (Naming the shape by its column names and binding by name
   * cost more than a row insert's SQL.)
   */
  private written(fields: Record<string, unknown>): { set: number; values: unknown[] } {
    let set = 0;
    const values: unknown[] = [];
    for (let i = 0; i < this.columns.length; i++) {
      const c = this.columns[i]!;
      const value = fields[c.field];
      if (value === undefined) continue;
      set += this.bits[i]!;
      values.push(this.dialect.toDb(c.type, value));
    }
    return { set, values };
  }

  /** The column names of a set of columns. */
  private columnsIn(set: number): string[] {
    return this.columns.filter((_, i) => Math.floor(set / this.bits[i]!) % 2 === 1).map((c) => c.column);
  }

  async delete(ex: Executor, id: string): Promise<boolean> {
    const remove = this.templates.of('delete', () => template(this.dialect.db.deleteFrom(this.table).where('id', '=', ID).compile(), [ID]));
    const result = await this.dialect.execute(ex, remove({ [ID]: id }));
    return Number(result.numAffectedRows ?? 0) > 0;
  }
}

/** The placeholder of the id in templates; unlike those of columns, it starts with `=`. */
const ID = '=id';

/** A column's placeholder in templates. */
function placeholder(column: string): string {
  return `:${column}`;
}

/** column → its placeholder, the values a template is compiled with. */
function placeholders(columns: readonly string[]): Record<string, string> {
  return Object.fromEntries(columns.map((c) => [c, placeholder(c)]));
}

