// Management routes of the operations area beyond the generic resource routes.
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../app/core.js';

export function operationsRoutes(app: FastifyInstance, core: Core): void {
  void app;
  void core;
}
