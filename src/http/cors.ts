// Cross-origin access to every API of a listener (behaviour.md §9): any origin may call, a browser's
// preflight is answered before routing and credentials, and every other answer — errors included —
// lets any origin read it and names the headers a page may read. Those headers go on every answer,
// not only on answers to requests with an Origin, so a cached answer serves every caller alike.
//
// The answer is `access-control-allow-origin: *`, never the echoed origin, and no
// `access-control-allow-credentials`: callers prove who they are with request headers
// (`overlay-session`, `authorization`), which `*` permits, while cookies are never used. So a page on
// another origin gets nothing a plain script could not, and nothing the browser holds for this
// controller (cookies, HTTP auth) is ever sent on the page's behalf.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Methods a cross-origin page may use; the Edge and OIDC routes use no others. */
export const CORS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** Request headers a page may send beyond the CORS-safelisted ones. */
export const CORS_REQUEST_HEADERS = [
  'content-type',
  'accept',
  'authorization',
  'overlay-session',
  'mfa-validation-code',
  // The edge router list's and the token enrollment's own headers.
  'session-token',
  'overlay-token-issuer-id',
] as const;

/** Response headers a page may read beyond the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS = ['overlay-session', 'expiration-seconds', 'expires-at', 'totp-required', 'www-authenticate'] as const;

/**
 * How long a browser may keep a preflight answer: short enough that a change of the lists above soon
 * reaches browsers, and under every browser's own cap.
 */
export const CORS_MAX_AGE_SECONDS = 600;

const PREFLIGHT = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': CORS_METHODS.join(', '),
  'access-control-allow-headers': CORS_REQUEST_HEADERS.join(', '),
  'access-control-max-age': String(CORS_MAX_AGE_SECONDS),
};

/** The CORS headers of every answer but a preflight's, also those written outside Fastify. */
export const CORS_ANSWER_HEADERS: Readonly<Record<string, string>> = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': CORS_EXPOSED_HEADERS.join(', '),
};

function isPreflight(request: FastifyRequest): boolean {
  return (
    request.method === 'OPTIONS' &&
    request.headers.origin !== undefined &&
    request.headers['access-control-request-method'] !== undefined
  );
}

/**
 * Installs CORS on a server. Call it before any other hook or plugin: its preflight answer then comes
 * before every credential check, and the route need not exist under OPTIONS.
 */
export function installCors(app: FastifyInstance): void {
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (!isPreflight(request)) return;
    // The browser itself holds the actual request to the methods and headers listed here.
    return reply.code(204).headers(PREFLIGHT).send();
  });
  app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply) => {
    if (!isPreflight(request)) reply.headers(CORS_ANSWER_HEADERS);
  });
}
