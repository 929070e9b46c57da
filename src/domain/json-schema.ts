// JSON Schemas written by callers (config type schemas) and the data checked against them (config
// data): bounded, checked against their draft's meta-schema, compiled one by one.
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import type { RegExpEngine } from 'ajv/dist/types/index.js';
import { RE2JS } from 're2js';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formatsPlugin from 'ajv-formats';

type AnyAjv = Ajv | Ajv2019 | Ajv2020;
const addFormats = formatsPlugin as unknown as <T extends AnyAjv>(ajv: T) => T;

/**
 * Bounds on a schema, checked before compiling it: the compiler recurses (a deep schema overflows
 * the stack) and its time grows faster than linearly with the size of a schema (about 0.5 s for
 * 2000 nodes of the worst shape). The seeded schemas have about 330 nodes.
 */
export const MAX_SCHEMA_DEPTH = 64;
export const MAX_SCHEMA_NODES = 2000;

/**
 * The patterns of a caller's schema run on a linear-time engine (RE2): on JavaScript's backtracking
 * engine a pattern such as `^(a+)+$` takes time exponential in the data, and one config write held
 * the event loop, and every caller, for minutes. RE2 takes what the established controller's Go
 * validator takes (no lookaround, no backreference); a schema with any other pattern is refused.
 */
const linearRegExp: RegExpEngine = Object.assign(
  (pattern: string) => {
    let compiled: RE2JS;
    try {
      compiled = RE2JS.compile(RE2JS.translateRegExp(pattern));
    } catch (err) {
      throw new Error(`the pattern ${JSON.stringify(pattern.slice(0, 128))} is not a regular expression RE2 runs: ${messageOf(err)}`);
    }
    // Ajv keeps one compiled pattern per distinct toString().
    return { test: (s: string) => compiled.test(s), toString: () => `/${pattern}/` };
  },
  { code: 'linearRegExp' },
);

/** Strict mode off: unknown keywords and formats are ignored, as JSON Schema prescribes. */
const OPTIONS: Options = { strict: false, logger: false, allErrors: false, verbose: true };
/** Compiling skips the code optimiser: several times faster to compile, same results. */
const COMPILE_OPTIONS: Options = { ...OPTIONS, validateSchema: false, code: { optimize: false, regExp: linearRegExp } };

/** A JSON value as text with its object keys sorted: equal JSON values, and only they, read the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const object = value as Record<string, unknown>;
    return `{${Object.keys(object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(object[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * `uniqueItems` in linear time: Ajv compares items pair by pair unless their type is a scalar, and
 * 60,000 small arrays in one config (within the body limit) held the event loop for minutes.
 */
function withLinearUniqueItems<T extends AnyAjv>(ajv: T): T {
  ajv.removeKeyword('uniqueItems');
  ajv.addKeyword({
    keyword: 'uniqueItems',
    type: 'array',
    schemaType: 'boolean',
    error: { message: 'must not have duplicate items' },
    validate: (unique: boolean, data: unknown[]) => !unique || new Set(data.map(canonical)).size === data.length,
  });
  return ajv;
}

type Draft = 'draft-07' | '2019-09' | '2020-12';

const DRAFTS: readonly [RegExp, Draft][] = [
  [/^https?:\/\/json-schema\.org\/draft-07\/schema#?$/, 'draft-07'],
  [/^https?:\/\/json-schema\.org\/draft\/2019-09\/schema#?$/, '2019-09'],
  [/^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/, '2020-12'],
];

/** Why a schema cannot be used; `reason` is meant for the caller. */
export class SchemaProblem extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'SchemaProblem';
  }
}

/** Refuses a schema past the depth or node bound, without recursing itself. */
function assertBounded(value: unknown): void {
  let nodes = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    nodes += 1;
    if (nodes > MAX_SCHEMA_NODES) throw new SchemaProblem(`has more than ${MAX_SCHEMA_NODES} nodes`);
    if (typeof v !== 'object' || v === null) continue;
    if (depth > MAX_SCHEMA_DEPTH) throw new SchemaProblem(`is nested deeper than ${MAX_SCHEMA_DEPTH} levels`);
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
}

function draftOf(schema: Record<string, unknown>): Draft {
  const declared = schema.$schema;
  if (declared === undefined) return 'draft-07';
  if (typeof declared !== 'string') throw new SchemaProblem('$schema must be a string');
  const found = DRAFTS.find(([pattern]) => pattern.test(declared));
  if (!found) {
    throw new SchemaProblem(`$schema ${declared.slice(0, 128)} is not supported (draft-07, 2019-09 and 2020-12 are)`);
  }
  return found[1];
}

function instance(draft: Draft, options: Options): AnyAjv {
  const ajv = draft === '2020-12' ? new Ajv2020(options) : draft === '2019-09' ? new Ajv2019(options) : new Ajv(options);
  return addFormats(ajv);
}

function pointer(path: string): string {
  return path === '' ? '/' : path;
}

function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 512);
}

/**
 * Compiles caller-written schemas. The meta-schema checks run on one instance per draft (checking
 * adds nothing to it); each schema then compiles on an instance of its own, so two schemas may carry
 * the same `$id` and nothing of a replaced schema stays behind.
 */
export class JsonSchemaCompiler {
  private readonly meta = new Map<Draft, AnyAjv>();

  /**
   * Compiles a schema (draft-07 unless `$schema` names 2019-09 or 2020-12); throws SchemaProblem
   * when it is not a valid schema or cannot be compiled (unresolvable `$ref`, bad pattern, too big).
   */
  compile(schema: unknown): ValidateFunction {
    if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
      throw new SchemaProblem('must be an object');
    }
    assertBounded(schema);
    const body: Record<string, unknown> = { ...(schema as Record<string, unknown>) };
    const draft = draftOf(body);
    // The dialect is chosen; the draft's own meta-schema checks the rest.
    delete body.$schema;
    let meta = this.meta.get(draft);
    if (!meta) {
      meta = instance(draft, OPTIONS);
      this.meta.set(draft, meta);
    }
    let valid: boolean;
    try {
      valid = meta.validateSchema(body) as boolean;
    } catch (err) {
      throw new SchemaProblem(messageOf(err));
    }
    if (!valid) {
      const first = meta.errors?.[0];
      throw new SchemaProblem(first ? `${pointer(first.instancePath)} ${first.message ?? 'is invalid'}` : 'is not a valid JSON schema');
    }
    try {
      return withLinearUniqueItems(instance(draft, COMPILE_OPTIONS)).compile(body);
    } catch (err) {
      throw new SchemaProblem(messageOf(err));
    }
  }
}

/** Compiles one schema with a compiler of its own (see JsonSchemaCompiler.compile). */
export function compileJsonSchema(schema: unknown): ValidateFunction {
  return new JsonSchemaCompiler().compile(schema);
}

/** The first problem of a failed validation, named as a client would: `data.portRanges[0].low`. */
export interface DataProblem {
  field: string;
  reason: string;
  value?: unknown;
}

function fieldPath(root: string, instancePath: string, extra?: string): string {
  const parts = instancePath === '' ? [] : instancePath.split('/').slice(1);
  if (extra !== undefined) parts.push(extra);
  return parts
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), root);
}

const COMBINATORS = new Set(['anyOf', 'oneOf']);
/** Keywords whose own message says less than the schema's description. */
const DESCRIBED = new Set(['anyOf', 'oneOf', 'pattern', 'format']);

/**
 * The error to report. Validation stops at the first failing keyword, so the errors are that
 * keyword's (branches of an anyOf first, the anyOf itself last) followed by the conditionals around
 * it: the last error that is not an `if` names the problem at the level a client thinks of it.
 */
function reported(errors: readonly ErrorObject[]): ErrorObject | undefined {
  for (let i = errors.length - 1; i >= 0; i--) if (errors[i]!.keyword !== 'if') return errors[i];
  return errors[0];
}

function echo(value: unknown): unknown {
  if (typeof value === 'string') return value.length > 256 ? `${value.slice(0, 256)}…` : value;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return value;
  return undefined;
}

export function dataProblem(errors: readonly ErrorObject[] | null | undefined, root: string): DataProblem {
  const e = errors ? reported(errors) : undefined;
  if (!e) return { field: root, reason: 'is invalid' };
  const params = e.params as Record<string, unknown>;
  let extra: string | undefined;
  let reason = e.message ?? 'is invalid';
  let value: unknown = echo(e.data);
  if (e.keyword === 'required') {
    extra = String(params.missingProperty);
    reason = 'is required';
    value = undefined;
  } else if (e.keyword === 'additionalProperties') {
    extra = String(params.additionalProperty);
    reason = 'is not a known property here';
    value = undefined;
  } else if (e.keyword === 'false schema') {
    reason = 'is not allowed here';
  } else if (e.keyword === 'enum' && Array.isArray(params.allowedValues)) {
    reason = `must be one of ${params.allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
  } else if (e.keyword === 'const') {
    reason = `must be ${JSON.stringify(params.allowedValue)}`;
  } else if (DESCRIBED.has(e.keyword)) {
    const description = (e.parentSchema as Record<string, unknown> | undefined)?.description;
    if (typeof description === 'string') reason = `must be ${description}`;
    else if (COMBINATORS.has(e.keyword)) reason = 'matches none of the allowed shapes';
  }
  const problem: DataProblem = { field: fieldPath(root, e.instancePath, extra), reason };
  if (value !== undefined) problem.value = value;
  return problem;
}
