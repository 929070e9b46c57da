// The Edge Management API's own routes (beyond the informational ones).
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../app/core.js';

export function managementRoutes(app: FastifyInstance, core: Core): void {
  void app;
  void core;
}
