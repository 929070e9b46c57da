// The controller's core: everything the APIs share, built once by createApp and passed down.
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config/index.js';
import type { Pki } from '../pki/index.js';
import type { Store } from '../store/store.js';
import type { Resources } from '../domain/resources.js';
import type { Kernel } from '../kernel/kernel.js';
import type { CacheRegistry } from '../kernel/caches.js';
import type { PolicyLinks } from '../policy/links.js';
import type { BuildInfo } from '../build-info.js';
import type { ApiSessions } from '../auth/api-sessions.js';
import type { IdentityDirectory } from '../auth/identity-directory.js';
import type { CertificateTrust } from '../auth/cert-trust.js';
import type { ExternalJwtSigners } from '../auth/ext-jwt.js';
import type { AuthPolicyRulesCache } from '../auth/ext-jwt-factor.js';
import type { FailureThrottle } from '../auth/throttle.js';
import type { IdentityAnswers } from '../domain/identities.js';
import type { Revocations } from '../auth/revocations.js';
import type { Mfa } from '../auth/mfa.js';
import type { OidcProvider } from '../oidc/provider.js';
import type { OidcSettingsView } from '../oidc/settings.js';
import type { ClientReadModel } from '../domain/client/read-model.js';
import type { AnswerCache } from './answer-cache.js';
import type { SecretBox } from '../auth/secret-box.js';
import type { Enrollments } from '../domain/enrollments.js';
import type { RouterEnrollments } from '../domain/router-enrollment.js';
import type { CertificateExtension } from '../domain/certificate-extension.js';
import type { ApiSessionCertificates } from '../domain/api-session-certificates.js';
import type { Metrics } from './metrics.js';
import type { Readiness } from './readiness.js';
import type { RequestScope } from './logger.js';
import type { Snapshots } from '../domain/snapshots.js';
import type { DataIntegrity } from '../domain/integrity.js';
import type { IdentityTraces } from '../domain/tracing.js';
import type { AuditLog } from '../domain/audit-events.js';

export interface Core {
  readonly config: Config;
  readonly clock: Clock;
  readonly log: Logger;
  readonly store: Store;
  /** The write pipeline and the change feed. */
  readonly kernel: Kernel;
  /** Every cache, following the change feed; resetAll drops what each keeps. */
  readonly caches: CacheRegistry;
  /** Policy link maintenance over the policy index. */
  readonly links: PolicyLinks;
  readonly pki: Pki;
  readonly resources: Resources;
  readonly build: BuildInfo;
  readonly sessions: ApiSessions;
  readonly identities: IdentityDirectory;
  /** Which client certificates may log in: the network PKI's and those of verified CAs that allow it. */
  readonly certificateTrust: CertificateTrust;
  /** External JWT signers and their keys, in memory: what verifies their JWTs. */
  readonly externalJwtSigners: ExternalJwtSigners;
  /** The rules of auth policies, in memory: what the second external JWT factor is checked by on every request. */
  readonly authPolicyRules: AuthPolicyRulesCache;
  readonly identityAnswers: IdentityAnswers;
  readonly loginThrottle: FailureThrottle;
  /** TOTP enrollments and the checks of their codes. */
  readonly mfa: Mfa;
  /** Seals secrets the controller reads back, under the data directory's key. */
  readonly secrets: SecretBox;
  /** Identity enrollments: refresh, exchange for an authenticator, revert, network JWTs. */
  readonly enrollments: Enrollments;
  /** Edge router enrollment: the erott exchange, certificate extension, re-enrollment. */
  readonly routerEnrollments: RouterEnrollments;
  /** Extension of certificate authenticators: the admin's flag, the new certificate, its verification. */
  readonly certificateExtension: CertificateExtension;
  /** The short-lived client certificates of API sessions. */
  readonly apiSessionCertificates: ApiSessionCertificates;
  /** Revoked tokens, API sessions and identities, in memory. */
  readonly revocations: Revocations;
  /** The OIDC provider: keys, authorization requests, grants, bearer-token checks. */
  readonly oidc: OidcProvider;
  /** OIDC redirect patterns of the controller settings (global and this controller's). */
  readonly oidcSettings: OidcSettingsView;
  /** The Client API's read model: access views, catalogs, service list, markers, posture, sessions. */
  readonly client: ClientReadModel;
  /** Serialized Client API answers per API session, kept while their view stamp holds. */
  readonly clientAnswers: AnswerCache;
  /** Capabilities enabled on this controller. */
  capabilities(): string[];
  /** The metrics this controller records, served by GET /metrics. */
  readonly metrics: Metrics;
  /** What GET /ready answers: store reachable, migrations applied, not shutting down. */
  readonly readiness: Readiness;
  /** The request being handled, for the request id on every log line written on its behalf. */
  readonly requestScope: RequestScope;
  /** Online copies of the store beside it. */
  readonly snapshots: Snapshots;
  /** Data integrity check and fix runs, one at a time. */
  readonly integrity: DataIntegrity;
  /** Identities whose requests are traced, in memory. */
  readonly traces: IdentityTraces;
  /** The audit log, as the Management API reads it. */
  readonly auditLog: AuditLog;
}
