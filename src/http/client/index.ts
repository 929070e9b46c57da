// The Edge Client API's own routes (beyond the informational ones), each module given the objects
// it uses: the read model's rooms built by createApp, the answer cache, the resources.
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../core/core.js';
import { edgeAuthRoutes } from '../edge-auth-routes.js';
import { mfaRoutes } from '../mfa-routes.js';
import { apiSessionCertificateRoutes } from './api-session-certificates.js';
import { clientControllersRoutes } from './controllers.js';
import { clientEnrollRoutes } from './enroll.js';
import { clientExternalJwtSignersRoutes } from './external-jwt-signers.js';
import { clientPostureRoutes } from './posture.js';
import { issuerOfRequests } from './request.js';
import { clientServicesRoutes } from './services.js';
import { clientSessionsRoutes } from './sessions.js';

export function clientRoutes(app: FastifyInstance, core: Core): void {
  const flavor = core.resources.flavor;
  const model = core.client;
  edgeAuthRoutes(app, core);
  mfaRoutes(app, core);
  clientControllersRoutes(app, { flavor, controllers: core.resources.get('controllers') });
  clientExternalJwtSignersRoutes(app, core);
  clientServicesRoutes(app, {
    flavor,
    resources: core.resources,
    services: model.services,
    sessions: model.sessions,
    markers: model.markers,
    stamp: (caller) => model.stamp(caller),
    answers: core.clientAnswers,
  });
  clientSessionsRoutes(app, { flavor, sessions: model.sessions, issuerOf: issuerOfRequests(core.config.web, core.oidc.issuers) });
  clientPostureRoutes(app, { responses: model.postureResponses });
  clientEnrollRoutes(app, core);
  apiSessionCertificateRoutes(app, { flavor, certificates: core.apiSessionCertificates, resource: core.resources.get('api-session-certificates') });
}
