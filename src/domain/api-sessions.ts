// API sessions as answered to clients and admins. The token is shown only to the caller holding it
// (the authenticate answer, and its own current API session, echoing what it presented); no other
// answer ever carries it or its hash.
import { Type } from '@sinclair/typebox';
import { iso } from '../clock.js';
import type { ApiSession, ApiSessions } from '../auth/api-sessions.js';
import type { apiSessions } from '../resources/api-sessions.js';
import { entityRef, EntityRefSchema } from '../resources/kit.js';
import type { Executor } from '../store/store.js';
import { computed, type ResourceBehaviour } from './resources.js';
import { adminOnly, byDelegate, isAdminIdentity } from './delegates.js';

/** An authentication query: MFA (TOTP) carries its code's format and length, EXT-JWT its signer's login. */
export const AuthQuerySchema = Type.Object({
  typeId: Type.String(),
  provider: Type.String(),
  format: Type.Optional(Type.String()),
  httpMethod: Type.Optional(Type.String()),
  httpUrl: Type.Optional(Type.String()),
  minLength: Type.Optional(Type.Integer()),
  maxLength: Type.Optional(Type.Integer()),
  isTotpEnrolled: Type.Optional(Type.Boolean()),
  id: Type.Optional(Type.String()),
  clientId: Type.Optional(Type.String()),
  scopes: Type.Optional(Type.Array(Type.String())),
});

/** Computed fields of every API session answer (filled by sessionAnswer and apiSessionBehaviour). */
export const ApiSessionExtra = {
  cachedLastActivityAt: Type.String({ format: 'date-time' }),
  expiresAt: Type.String({ format: 'date-time' }),
  expirationSeconds: Type.Integer(),
  authQueries: Type.Array(AuthQuerySchema),
  isCertExtendRequested: Type.Boolean(),
  isCertKeyRollRequested: Type.Boolean(),
};

export function authQueries(s: Pick<ApiSession, 'isMfaRequired' | 'isMfaComplete'>, isTotpEnrolled: boolean) {
  if (!s.isMfaRequired || s.isMfaComplete) return [];
  return [
    {
      typeId: 'MFA',
      provider: 'overlay',
      format: 'alphaNumeric',
      httpMethod: 'POST',
      httpUrl: './authenticate/mfa',
      minLength: 6,
      maxLength: 6,
      isTotpEnrolled,
    },
  ];
}

/** Whether the certificate authenticator a session was opened with is flagged for extension (and a new key). */
export interface CertExtensionFlags {
  isCertExtendRequested: boolean;
  isCertKeyRollRequested: boolean;
}

const NOT_FLAGGED: CertExtensionFlags = { isCertExtendRequested: false, isCertKeyRollRequested: false };

// Booleans come back as the driver stores them (1 in SQLite).
const isTrue = (v: unknown) => v === 1 || v === true;

/**
 * The extension flags of the authenticators some sessions were opened with, by authenticator id:
 * those of certificate authenticators (a password one is never flagged).
 */
export async function certExtensionFlags(ex: Executor, authenticatorIds: readonly (string | null)[]): Promise<Map<string, CertExtensionFlags>> {
  const ids = [...new Set(authenticatorIds.filter((id): id is string => id !== null))];
  if (ids.length === 0) return new Map();
  const rows = await ex
    .selectFrom('authenticators')
    .select(['id', 'is_extend_requested', 'is_key_roll_requested'])
    .where('id', 'in', ids)
    .where('method', '=', 'cert')
    .execute();
  return new Map(
    rows.map((r) => [String(r.id), { isCertExtendRequested: isTrue(r.is_extend_requested), isCertKeyRollRequested: isTrue(r.is_key_roll_requested) }]),
  );
}

/** The extension flags of one session's authenticator. */
export async function certExtensionFlagsOf(ex: Executor, authenticatorId: string | null): Promise<CertExtensionFlags> {
  return (await certExtensionFlags(ex, [authenticatorId])).get(authenticatorId ?? '') ?? NOT_FLAGGED;
}

function expiry(sessions: ApiSessions, id: string, lastActivityAt: number, now: number) {
  // Held past its idle timeout (an OIDC session lives as long as its refresh grant) it ends later.
  const expiresAt = sessions.expiryOf(id, lastActivityAt);
  return {
    cachedLastActivityAt: iso(lastActivityAt),
    expiresAt: iso(expiresAt),
    expirationSeconds: Math.max(0, Math.floor((expiresAt - now) / 1000)),
  };
}

/** The answer of authenticate and GET /current-api-session. */
export function sessionAnswer(
  sessions: ApiSessions,
  s: ApiSession,
  identityName: string,
  now: number,
  /** The identity has a confirmed TOTP enrollment (what the MFA query tells the client). */
  isTotpEnrolled: boolean,
  /** Whether the session's certificate authenticator is flagged for extension. */
  flags: CertExtensionFlags,
): Record<string, unknown> {
  return {
    _links: { self: { href: `./api-sessions/${s.id}` }, sessions: { href: `./api-sessions/${s.id}/sessions` } },
    id: s.id,
    createdAt: iso(s.createdAt),
    updatedAt: iso(s.lastActivityAt),
    tags: s.tags,
    identityId: s.identityId,
    identity: entityRef('identities', s.identityId, identityName),
    authenticatorId: s.authenticatorId,
    configTypes: s.configTypes,
    ipAddress: s.ipAddress,
    lastActivityAt: iso(s.storedActivityAt),
    isMfaRequired: s.isMfaRequired,
    isMfaComplete: s.isMfaComplete,
    isCertExtendable: s.isCertExtendable,
    ...flags,
    improperClientCertChain: s.improperClientCertChain,
    authQueries: authQueries(s, isTotpEnrolled),
    ...expiry(sessions, s.id, s.lastActivityAt, now),
  };
}

export const SessionAnswerSchema = Type.Object({
  _links: Type.Record(Type.String(), Type.Object({ href: Type.String() })),
  id: Type.String(),
  createdAt: Type.String(),
  updatedAt: Type.String(),
  tags: Type.Record(Type.String(), Type.Union([Type.String(), Type.Boolean(), Type.Null()])),
  token: Type.Optional(
    Type.String({ description: 'the legacy session token, to its holder only; absent for a caller with a bearer access token' }),
  ),
  identityId: Type.String(),
  identity: EntityRefSchema,
  authenticatorId: Type.Union([Type.String(), Type.Null()]),
  configTypes: Type.Array(Type.String()),
  ipAddress: Type.Union([Type.String(), Type.Null()]),
  lastActivityAt: Type.String(),
  isMfaRequired: Type.Boolean(),
  isMfaComplete: Type.Boolean(),
  isCertExtendable: Type.Boolean(),
  improperClientCertChain: Type.Boolean(),
  ...ApiSessionExtra,
});

export function apiSessionBehaviour(sessions: ApiSessions, now: () => number): ResourceBehaviour<typeof apiSessions> {
  const fields = computed<typeof apiSessions>(ApiSessionExtra, async (ex, entities, answers) => {
    const waiting = entities.filter((e) => e.isMfaRequired === true).map((e) => e.identityId);
    const mfas = waiting.length === 0 ? [] : await ex.selectFrom('mfas').select(['identity_id', 'is_verified']).where('identity_id', 'in', waiting).execute();
    const enrolled = new Set(mfas.filter((r) => isTrue(r.is_verified)).map((r) => String(r.identity_id)));
    const flags = await certExtensionFlags(ex, entities.map((e) => e.authenticatorId ?? null));
    for (const [i, e] of entities.entries()) {
      const cached = sessions.cached(e.id);
      const last = sessions.lastActivityOf(e.id, Date.parse(e.lastActivityAt));
      Object.assign(answers[i]!, {
        ...expiry(sessions, e.id, last, now()),
        authQueries: authQueries(
          { isMfaRequired: e.isMfaRequired === true, isMfaComplete: cached?.isMfaComplete ?? e.isMfaComplete === true },
          enrolled.has(e.identityId),
        ),
        ...(flags.get(e.authenticatorId ?? '') ?? NOT_FLAGGED),
      });
    }
  });
  return {
    computed: [fields],
    // Ending an admin's API sessions would lock it out, as a revocation of it would (operations.ts).
    async beforeDelete(ctx, prev) {
      if (byDelegate(ctx) && (await isAdminIdentity(ctx, prev.identityId))) throw adminOnly('end an API session of an admin');
    },
  };
}
