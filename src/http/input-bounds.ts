// Bounds every request input holds whatever its schema says (behaviour.md §1): each field of a body
// nests at most MAX_NESTING levels (so every open object does: appData, config data, a config
// type's schema, tags, ...), object keys are 1–MAX_KEY characters, strings and keys hold no unpaired
// UTF-16 surrogate (two texts differing only there would store and read back as the same text).
// Checked by one iterative walk before schema validation, so nothing that recurses (ajv,
// JSON.stringify into the store, a patch merge) ever sees a value deeper than the bound.
import { MAX_KEY, MAX_NESTING } from '../resources/kit.js';

/** A problem in the shape of an ajv error, so it is reported as every other validation error. */
export interface InputIssue {
  keyword: 'maxNesting' | 'keyLength' | 'unpairedSurrogate';
  /** JSON pointer of the field named in the answer. */
  instancePath: string;
  /** No schema says this: the bound holds for every input. */
  schemaPath: '';
  params: Record<string, unknown>;
  message: string;
  data?: unknown;
}

interface Frame {
  value: unknown;
  /** Containers above this value, the input's top excluded: a top-level field of a body is at 1. */
  depth: number;
  parent: Frame | undefined;
  segment: string;
}

/** In unicode mode a well-formed pair is one code point; only a lone half is a Cs code point. */
const LONE_SURROGATE = /\p{Cs}/u;

/** The frames from the input's top (excluded) down to `frame`. */
function lineOf(frame: Frame): Frame[] {
  const line: Frame[] = [];
  for (let f: Frame | undefined = frame; f?.parent; f = f.parent) line.push(f);
  return line.reverse();
}

function pointer(line: readonly Frame[]): string {
  return line.map((f) => `/${f.segment.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

/** The path down to the first object key: the field a client sent (`appData`, `[2].data`). */
function fieldOf(frame: Frame): string {
  const line = lineOf(frame);
  const first = line.findIndex((f) => !Array.isArray(f.parent?.value));
  return pointer(line.slice(0, first === -1 ? 1 : first + 1));
}

/** Code points of a key, counted no further than one past the bound. */
function keyTooLong(key: string): boolean {
  if (key.length <= MAX_KEY) return false;
  let n = 0;
  for (const _ of key) if (++n > MAX_KEY) return true;
  return false;
}

/**
 * The first problem of an input, or undefined. `keys: false` skips the key bounds (query strings
 * and path parameters, whose unknown names are ignored, not refused).
 */
export function inputIssue(input: unknown, opts: { keys: boolean } = { keys: true }): InputIssue | undefined {
  const top: Frame = { value: input, depth: 0, parent: undefined, segment: '' };
  if (typeof input === 'string') return LONE_SURROGATE.test(input) ? surrogateIn(top) : undefined;
  // Only containers become frames; strings are checked as they are met, other scalars pass.
  const stack: Frame[] = typeof input === 'object' && input !== null ? [top] : [];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    if (frame.depth > MAX_NESTING) {
      return {
        keyword: 'maxNesting',
        instancePath: fieldOf(frame),
        schemaPath: '',
        params: { limit: MAX_NESTING },
        message: `nests deeper than ${MAX_NESTING} levels`,
      };
    }
    const value = frame.value as Record<string, unknown> | unknown[];
    const isArray = Array.isArray(value);
    const keys = isArray ? undefined : Object.keys(value);
    // Taken last first, so the walk meets fields in the order they were sent.
    for (let i = (keys ?? (value as unknown[])).length - 1; i >= 0; i--) {
      const key = keys ? keys[i]! : String(i);
      if (keys) {
        if (LONE_SURROGATE.test(key)) {
          return { keyword: 'unpairedSurrogate', instancePath: pointer(lineOf(frame)), schemaPath: '', params: {}, message: 'has a key holding an unpaired UTF-16 surrogate' };
        }
        if (opts.keys && (key.length === 0 || keyTooLong(key))) {
          return {
            keyword: 'keyLength',
            instancePath: pointer(lineOf(frame)),
            schemaPath: '',
            params: { limit: MAX_KEY },
            message: `has a key that is not 1 to ${MAX_KEY} characters long`,
            data: key,
          };
        }
      }
      const child = keys ? (value as Record<string, unknown>)[key] : (value as unknown[])[i];
      if (typeof child === 'string') {
        if (LONE_SURROGATE.test(child)) return surrogateIn({ value: child, depth: frame.depth + 1, parent: frame, segment: key });
      } else if (typeof child === 'object' && child !== null) {
        stack.push({ value: child, depth: frame.depth + 1, parent: frame, segment: key });
      }
    }
  }
  return undefined;
}

function surrogateIn(frame: Frame): InputIssue {
  return { keyword: 'unpairedSurrogate', instancePath: pointer(lineOf(frame)), schemaPath: '', params: {}, message: 'holds an unpaired UTF-16 surrogate' };
}
