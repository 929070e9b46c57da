// The origin of the writes a request makes: its id, its client address and its caller. Entered once
// per request, just before the handler, so every write the handler causes — however deep in the
// domain — carries it into the kernel, which audits it and bounds the queue of such writes. Route
// handlers need not pass anything along.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Kernel } from '../kernel/kernel.js';
import type { WriteOrigin } from '../kernel/audit.js';

export function originOf(request: FastifyRequest): WriteOrigin {
  const principal = request.principal;
  return {
    requestId: request.id,
    ipAddress: request.ip,
    ...(principal
      ? {
          actor: {
            identityId: principal.identity.id,
            name: principal.identity.name,
            apiSessionId: principal.session.id,
            method: principal.bearer ? 'oidc' : principal.session.authMethod,
          },
        }
      : {}),
  };
}

/** Runs every handler of `app` with its request as the origin of its writes. */
export function registerWriteOrigin(app: FastifyInstance, kernel: Kernel): void {
  // A callback hook: the handler runs inside `done`, so inside the origin's async context.
  app.addHook('preHandler', (request, _reply, done) => kernel.withOrigin(originOf(request), done));
}
