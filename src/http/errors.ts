// Renders every failure of a request as the error envelope (behaviour.md §2), once per API.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, type ErrorCode, type StatusOverrides } from '../errors.js';
import { meta } from './envelope.js';
import { requestContext } from './request-log.js';

interface ValidationIssue {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
  data?: unknown;
  /** The schema of the keyword (ajv's verbose errors). */
  schema?: unknown;
}

const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'REQUEST_ENTITY_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'COULD_NOT_PARSE_BODY',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'COULD_NOT_PARSE_BODY',
  FST_ERR_CTP_INVALID_JSON_BODY: 'COULD_NOT_PARSE_BODY',
  FST_ERR_CTP_EMPTY_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_BAD_URL: 'COULD_NOT_VALIDATE',
};

const STATUS_CODES: Record<number, ErrorCode> = {
  400: 'COULD_NOT_VALIDATE',
  401: 'UNAUTHORIZED',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  413: 'REQUEST_ENTITY_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'SERVER_TOO_MANY_REQUESTS',
  503: 'SERVICE_UNAVAILABLE',
};

/** `/a/0/b` → `a[0].b`; the field a client would name. */
function fieldPath(instancePath: string, extra?: string): string {
  const parts = instancePath.split('/').slice(1);
  if (extra !== undefined) parts.push(extra);
  return parts
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

export function validationError(issues: readonly ValidationIssue[], context: string | undefined): ApiError {
  const first = issues[0];
  if (!first) return new ApiError('COULD_NOT_VALIDATE', 'the request is invalid');
  const missing = first.keyword === 'required' ? String(first.params.missingProperty) : undefined;
  const field = fieldPath(first.instancePath, missing) || context || 'body';
  // A query parameter sent more than once arrives as a list, which a single value's type refuses.
  const repeated = context === 'querystring' && first.keyword === 'type' && Array.isArray(first.data) && /^\/[^/]+$/.test(first.instancePath);
  const reason =
    missing !== undefined ? 'is required' : repeated ? 'must be given once' : (oneOfConstants(issues, first) ?? first.message ?? 'is invalid');
  const cause: Record<string, unknown> = { field, reason };
  if (missing === undefined && !SECRET_FIELD.test(field)) {
    const value = echo(first.data);
    if (value !== undefined) cause.value = value;
  }
  return new ApiError('COULD_NOT_VALIDATE', `${field} ${reason}`, cause as { field: string; reason: string });
}

/**
 * A choice among fixed values (a union of literals) fails as its first value's `const`, which ajv
 * words "must be equal to constant": named instead by every value it takes.
 */
function oneOfConstants(issues: readonly ValidationIssue[], first: ValidationIssue): string | undefined {
  if (first.keyword !== 'const') return undefined;
  const choice = issues.find((i) => i.keyword === 'anyOf' && i.instancePath === first.instancePath);
  const branches = Array.isArray(choice?.schema) ? (choice.schema as { const?: unknown }[]) : [];
  if (branches.length === 0 || !branches.every((b) => b !== null && typeof b === 'object' && 'const' in b)) return undefined;
  return `must be one of ${branches.map((b) => String(b.const)).join(', ')}`;
}

/** Fields whose values are never echoed back, even when they are wrong. */
const SECRET_FIELD = /password|secret|token|code/i;

/** What of an offending value goes back to the client: primitives, shortened. */
function echo(value: unknown): unknown {
  if (typeof value === 'string') return value.length > 256 ? `${value.slice(0, 256)}…` : value;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return value;
  return undefined;
}

/**
 * SQLite's refusals that come from the disk under the store, not from the request: nothing was
 * written, and the operator (told by the error log line) has to act before a retry can succeed.
 */
function storeFailure(code: string | undefined): string | undefined {
  if (code === undefined || !code.startsWith('SQLITE_')) return undefined;
  const base = code.split('_').slice(0, 2).join('_');
  switch (base) {
    case 'SQLITE_FULL':
      return 'the store cannot be written: its file system is full; nothing was written';
    case 'SQLITE_READONLY':
      return code === 'SQLITE_READONLY_DBMOVED'
        ? 'the store cannot be written: its file was moved or removed while the controller runs; nothing was written'
        : 'the store cannot be written: it is read-only; nothing was written';
    case 'SQLITE_IOERR':
      return 'the store reported an I/O error; nothing was written';
    case 'SQLITE_CORRUPT':
      return 'the store is damaged; nothing was written';
    default:
      return undefined;
  }
}

/** Maps anything thrown while handling a request to an ApiError. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as Partial<FastifyError> & { validation?: ValidationIssue[]; validationContext?: string };
  if (Array.isArray(e.validation)) return validationError(e.validation, e.validationContext);
  const mapped = (e.code && FASTIFY_CODES[e.code]) ?? undefined;
  if (mapped) return new ApiError(mapped, e.message ?? mapped);
  const store = storeFailure(e.code);
  if (store) return new ApiError('SERVICE_UNAVAILABLE', store);
  const status = typeof e.statusCode === 'number' ? e.statusCode : 500;
  if (status >= 400 && status < 500) {
    return new ApiError(STATUS_CODES[status] ?? 'COULD_NOT_VALIDATE', e.message ?? 'the request is invalid');
  }
  return new ApiError('UNHANDLED', 'the request could not be processed');
}

export function errorBody(err: ApiError, requestId: string): unknown {
  const error: Record<string, unknown> = { code: err.code, message: err.message };
  if (err.cause !== undefined) error.cause = err.cause;
  error.requestId = requestId;
  return { error, meta: meta() };
}

/** Fastify error handler shared by the Edge APIs (and the OIDC API, with its `overrides`). */
export function handleError(err: unknown, request: FastifyRequest, reply: FastifyReply, overrides: StatusOverrides = {}): void {
  const apiError = toApiError(err);
  const status = overrides[apiError.code] ?? apiError.status;
  if (status >= 500) request.log.error({ ...requestContext(request), err, status }, 'request failed');
  else request.log.info({ ...requestContext(request), code: apiError.code, status }, apiError.message);
  if (apiError.headers) reply.headers(apiError.headers);
  // The rest of a body too large is never read, so the connection can carry no further request.
  if (apiError.code === 'REQUEST_ENTITY_TOO_LARGE') reply.header('connection', 'close');
  void reply.code(status).type('application/json; charset=utf-8').send(errorBody(apiError, request.id));
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** The path of a request as an answer names it: never its query, which may carry a token. */
function shownPath(request: FastifyRequest): string {
  return (request.url.split('?')[0] ?? '').slice(0, 200);
}

/**
 * Errors Fastify meets before routing. A path it cannot route (a malformed percent-encoding, a
 * segment over the router's bound) is named by its path alone: Fastify's own message quotes the
 * whole URL, and the answer's message is logged.
 */
export function handleFrameworkError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (err.code === 'FST_ERR_BAD_URL' || err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    const problem = 'a malformed percent-encoding, or a segment over 500 characters';
    handleError(new ApiError('COULD_NOT_VALIDATE', `the path ${shownPath(request)} cannot be routed: ${problem}`), request, reply);
    return;
  }
  handleError(err, request, reply);
}

/** 405 with Allow when the path exists under other methods, else 404. */
export function handleNotFound(request: FastifyRequest, reply: FastifyReply): void {
  const path = request.url.split('?')[0] ?? '';
  const shown = shownPath(request);
  const allowed = METHODS.filter((method) => method !== request.method && request.server.findRoute({ method, url: path })).flatMap(
    // Every GET route answers HEAD as well.
    (method) => (method === 'GET' ? ['GET', 'HEAD'] : [method]),
  );
  if (allowed.length > 0) {
    handleError(
      new ApiError('METHOD_NOT_ALLOWED', `${request.method} is not allowed on ${shown}`, undefined, { allow: allowed.join(', ') }),
      request,
      reply,
    );
    return;
  }
  handleError(new ApiError('NOT_FOUND', `no route ${request.method} ${shown}`), request, reply);
}
