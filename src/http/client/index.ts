// The Edge Client API's own routes (beyond the informational ones).
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../app/core.js';
import { edgeAuthRoutes } from '../edge-auth-routes.js';
import { clientControllersRoutes } from './controllers.js';
import { clientExternalJwtSignersRoutes } from './external-jwt-signers.js';
import { clientPostureRoutes } from './posture.js';
import { clientServicesRoutes } from './services.js';
import { clientSessionsRoutes } from './sessions.js';

export function clientRoutes(app: FastifyInstance, core: Core): void {
  edgeAuthRoutes(app, core);
  clientControllersRoutes(app, core);
  clientExternalJwtSignersRoutes(app, core);
  clientServicesRoutes(app, core);
  clientSessionsRoutes(app, core);
  clientPostureRoutes(app, core);
}
