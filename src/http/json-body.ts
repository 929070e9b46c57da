// JSON bodies of every API on a server, and text ones only where a route takes them (acceptText);
// elsewhere text/plain answers 415, as any other type a route does not take. An empty JSON body is
// no body: clients generated from the established controller's documents send `Content-Type:
// application/json` with nothing after it on every DELETE and on POSTs without a body (logout,
// enable). A route that needs a body then fails its schema (400 naming `body`); one that does not
// runs as if none was sent.
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors.js';

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
    parse(request, body as string, done);
  });
}

/** Lets the routes of `scope` take a text/plain body, as a string. */
export function acceptText(scope: FastifyInstance): void {
  scope.removeContentTypeParser(TEXT_TYPE);
  scope.addContentTypeParser(TEXT_TYPE, { parseAs: 'string' }, (_request, body, done) => done(null, body));
}
