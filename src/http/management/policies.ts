// Management routes of the policies area: the generic routes of every policy kind.
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../core/core.js';
import { POLICY_COLLECTIONS } from '../../resources/relations.js';
import { registerResourceRoutes } from '../resource-routes.js';

export function policiesRoutes(app: FastifyInstance, core: Core): void {
  for (const collection of POLICY_COLLECTIONS) {
    registerResourceRoutes(app, core.resources.get(collection), core.resources.flavor);
  }
}
