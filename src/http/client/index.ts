// The Edge Client API's own routes (beyond the informational ones).
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../app/core.js';
import { edgeAuthRoutes } from '../edge-auth-routes.js';
import { clientControllersRoutes } from './controllers.js';

export function clientRoutes(app: FastifyInstance, core: Core): void {
  edgeAuthRoutes(app, core);
  clientControllersRoutes(app, core);
}
