// Parameters of the OIDC endpoints: query strings, JSON bodies and form bodies read the same way.
// A parameter given twice is refused (RFC 6749 §3.1), every value has a length bound.
import { parse as parseQueryString } from 'node:querystring';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../../errors.js';
import { OAuthError } from '../../oidc/errors.js';

export const FORM = 'application/x-www-form-urlencoded';
/** Form bodies of the OIDC endpoints are small; anything larger is not one. */
export const FORM_BODY_LIMIT = 64 * 1024;
const MAX_VALUE = 4096;

export type Params = Record<string, string | undefined>;

/** Registers the form body parser of the OIDC API (JSON comes with Fastify). */
export function formParser(app: FastifyInstance): void {
  app.addContentTypeParser(FORM, { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT }, (_request, body, done) => {
    done(null, parseQueryString(body as string));
  });
}

/**
 * The string parameters of `sources` (later sources do not override earlier ones). A repeated or
 * non-string value throws `repeated` (an OAuth or an API error, as the endpoint answers).
 */
export function readParams(sources: unknown[], onBad: (name: string) => Error = oauthBad): Params {
  const out: Params = {};
  for (const source of sources) {
    if (typeof source !== 'object' || source === null || Array.isArray(source)) continue;
    for (const [name, value] of Object.entries(source as Record<string, unknown>)) {
      if (out[name] !== undefined || value === undefined || value === null) continue;
      if (typeof value !== 'string' || value.length > MAX_VALUE) throw onBad(name);
      out[name] = value;
    }
  }
  return out;
}

/** Query and body of a request, as parameters. */
export function requestParams(request: FastifyRequest, onBad?: (name: string) => Error): Params {
  return readParams([request.query, request.body], onBad);
}

export function oauthBad(name: string): OAuthError {
  return new OAuthError('invalid_request', `${name} must be given once, as a string of at most ${MAX_VALUE} characters`);
}

export function apiBad(name: string): ApiError {
  return new ApiError('COULD_NOT_VALIDATE', `${name} must be given once, as a string of at most ${MAX_VALUE} characters`, {
    field: name,
    reason: 'must be a single string',
  });
}
