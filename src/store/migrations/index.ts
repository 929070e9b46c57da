// The append-only list of migrations. Never edit or reorder an entry that has shipped; add one.
import type { StoreMigration } from '../store.js';
import { m0001Base } from './0001-base.js';
import { m0002Identities } from './0002-identities.js';
import { m0003Network } from './0003-network.js';
import { m0004Oidc } from './0004-oidc.js';
import { m0005SystemIdentities } from './0005-system-identities.js';
import { m0006Sessions } from './0006-sessions.js';
import { m0007EdgeRouterSyncStatus } from './0007-edge-router-sync-status.js';
import { m0008AllRouters } from './0008-all-routers.js';
import { m0009PostureCheckVersions } from './0009-posture-check-versions.js';
import { m0010Mfa } from './0010-mfa.js';
import { m0011Enrollments } from './0011-enrollments.js';
import { m0012Cas } from './0012-cas.js';
import { m0014CertificateExtension } from './0014-certificate-extension.js';
import { m0015EdgeRouterEnrollment } from './0015-edge-router-enrollment.js';
import { m0016ExternalJwtSigners } from './0016-external-jwt-signers.js';
import { m0017AuditEvents } from './0017-audit-events.js';
import { m0018SpentEnrollmentTokens } from './0018-spent-enrollment-tokens.js';
import { m0019TransitRouterEnrollment } from './0019-transit-router-enrollment.js';
import { m0020RouterConfigs } from './0020-router-configs.js';
import { m0021AdminWritten } from './0021-admin-written.js';

export const migrations: readonly StoreMigration[] = [
  m0001Base,
  m0002Identities,
  m0003Network,
  m0004Oidc,
  m0005SystemIdentities,
  m0006Sessions,
  m0007EdgeRouterSyncStatus,
  m0008AllRouters,
  m0009PostureCheckVersions,
  m0010Mfa,
  m0011Enrollments,
  m0012Cas,
  m0014CertificateExtension,
  m0015EdgeRouterEnrollment,
  m0016ExternalJwtSigners,
  m0017AuditEvents,
  m0018SpentEnrollmentTokens,
  m0019TransitRouterEnrollment,
  m0020RouterConfigs,
  m0021AdminWritten,
];
