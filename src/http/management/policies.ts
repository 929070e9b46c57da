// Management routes of the policies area: the generic routes of every policy kind, whose reads add
// the `*RolesDisplay` fields.
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../app/core.js';
import { policyReadExtra } from '../../domain/policies.js';
import { POLICY_COLLECTIONS } from '../../resources/relations.js';
import { registerResourceRoutes } from '../resource-routes.js';

export function policiesRoutes(app: FastifyInstance, core: Core): void {
  for (const collection of POLICY_COLLECTIONS) {
    registerResourceRoutes(app, core.resources.get(collection), core.store.dialect.flavor, {
      readExtra: policyReadExtra(collection),
    });
  }
}
