// JSON bodies of every API on a server, and text ones only where a route takes them (acceptText);
// elsewhere text/plain answers 415, as any other type a route does not take. An empty JSON body is
// no body: clients generated from the established controller's documents send `Content-Type:
// application/json` with nothing after it on every DELETE and on POSTs without a body (logout,
// enable). A route that needs a body then fails its schema (400 naming `body`); one that does not
// runs as if none was sent.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';
import { validationError } from './errors.js';

export const JSON_TYPE = 'application/json';
const TEXT_TYPE = 'text/plain';

export function jsonBodyParser(app: FastifyInstance): void {
  // Fastify's own parser, with its defence against prototype poisoning, parses every non-empty body.
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(JSON_TYPE);
  // Fastify takes text/plain on every route by default; only the routes of `acceptText` take it,
  // and elsewhere an empty one is no body, as an empty JSON body is.
  app.removeContentTypeParser(TEXT_TYPE);
  app.addContentTypeParser(TEXT_TYPE, { parseAs: 'string' }, (_request, body, done) => {
    if ((body as string).trim() === '') done(null, undefined);
    else done(new ApiError('UNSUPPORTED_MEDIA_TYPE', 'this route takes no text/plain body'), undefined);
  });
  app.addContentTypeParser(JSON_TYPE, { parseAs: 'string' }, (request, body, done) => {
    if ((body as string).trim() === '') {
      done(null, undefined);
      return;
    }
    parse(request, body as string, (err, value) => {
      // The parser refuses `__proto__` and `constructor.prototype` keys as it refuses bad JSON; a
      // client is told which object held one instead.
      const issue = err ? forbiddenKey(body as string) : undefined;
      done(issue ? validationError([issue], 'body') : err, value);
    });
  });
}

interface Frame {
  value: unknown;
  parent: Frame | undefined;
  segment: string;
}

/**
 * The first key of a JSON text that could change the objects built from it (`__proto__`, or
 * `constructor` holding `prototype`), as a validation issue naming the object that holds it; undefined
 * when there is none or the text is not JSON. Only called for a body the parser refused.
 */
function forbiddenKey(text: string): { keyword: string; instancePath: string; params: Record<string, unknown>; message: string } | undefined {
  let top: unknown;
  try {
    top = JSON.parse(text);
  } catch {
    return undefined;
  }
  // Iterative: a refused body may nest as deep as its size allows.
  const stack: Frame[] = typeof top === 'object' && top !== null ? [{ value: top, parent: undefined, segment: '' }] : [];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    const value = frame.value as Record<string, unknown>;
    for (const key of Object.keys(value)) {
      const child = value[key];
      const isObject = typeof child === 'object' && child !== null;
      if (key === '__proto__' || (key === 'constructor' && isObject && Object.hasOwn(child, 'prototype'))) {
        const segments: string[] = [];
        for (let f: Frame | undefined = frame; f?.parent; f = f.parent) segments.unshift(f.segment.replace(/~/g, '~0').replace(/\//g, '~1'));
        const named = key === '__proto__' ? 'a key named __proto__' : 'a constructor key holding prototype';
        return { keyword: 'forbiddenKey', instancePath: segments.map((s) => `/${s}`).join(''), params: {}, message: `has ${named}, which is refused` };
      }
      if (isObject) stack.push({ value: child, parent: frame, segment: key });
    }
  }
  return undefined;
}

/** Lets the routes of `scope` take a text/plain body, as a string. */
export function acceptText(scope: FastifyInstance): void {
  scope.removeContentTypeParser(TEXT_TYPE);
  scope.addContentTypeParser(TEXT_TYPE, { parseAs: 'string' }, (_request, body, done) => done(null, body));
}

/**
 * Bodies are taken as sent: one in a content coding (gzip, deflate, br) would be read as if it were
 * not, a compressed one failing as bad JSON and a mislabelled one passing. Refused instead with 415
 * and the coding taken (RFC 9110 §8.4.1, §12.5.3), as no client of these APIs compresses its bodies.
 */
export function refuseContentCoding(request: FastifyRequest): void {
  const coding = request.headers['content-encoding'];
  if (coding === undefined || /^\s*identity\s*$/i.test(coding)) return;
  const hasBody = request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
  if (!hasBody) return;
  throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `a request body in the content coding ${coding.slice(0, 50)} is not taken; send it uncompressed`, undefined, {
    'accept-encoding': 'identity',
  });
}
