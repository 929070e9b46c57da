// Related lists of the management API (`/<collection>/{id}/<related>`), policy advice and the role
// attribute lists.
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../app/core.js';

export function relatedRoutes(app: FastifyInstance, core: Core): void {
  void app;
  void core;
}
