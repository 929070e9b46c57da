// JSON bodies of every API on a server. An empty body is no body, whatever its content type: clients
// generated from the established controller's documents send `Content-Type: application/json` with
// nothing after it on every DELETE and on POSTs without a body (logout, enable). A route that needs a
// body then fails its schema (400 naming `body`); one that does not runs as if none was sent.
import type { FastifyInstance } from 'fastify';

export const JSON_TYPE = 'application/json';

export function jsonBodyParser(app: FastifyInstance): void {
  // Fastify's own parser, with its defence against prototype poisoning, parses every non-empty body.
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(JSON_TYPE);
  app.addContentTypeParser(JSON_TYPE, { parseAs: 'string' }, (request, body, done) => {
    if ((body as string).trim() === '') {
      done(null, undefined);
      return;
    }
    parse(request, body as string, done);
  });
}
