// Identities beyond CRUD: defaults, the protected default admin, computed read fields, and
// disable / enable taking effect on live sessions at once.
import { Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import { ApiError, fieldError, notFound } from '../errors.js';
import type { Clock } from '../clock.js';
import { markDisabled, resetWrongPasswords } from '../auth/lockout.js';
import { isDisabledAt } from '../auth/identity-directory.js';
import { endMfaPasses } from '../auth/mfa.js';
import { BoundedMap } from '../kernel/bounded-map.js';
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import { entityRef, EntityRefSchema } from '../resources/kit.js';
import { identities } from '../resources/identities.js';
import type { EntityOf } from '../resources/index.js';
import { createIdentityEnrollments, pendingEnrollments, reissueIn, type EnrollmentTokens } from './enrollments.js';
import { assertMayManage, assertMayManageAccess, isPrivileged, maySeeEnrollmentSecrets } from './delegates.js';
import { computed, type Actor, type ResourceBehaviour, type Resources, type WriteContext } from './resources.js';

/** What an identity's `enrollment` reads as: its pending enrollments, by method. */
const PendingEnrollment = {
  id: Type.String(),
  jwt: Type.Union([Type.String(), Type.Null()], { description: 'null to a reader that may not enroll the identity' }),
  token: Type.Union([Type.String(), Type.Null()], { description: 'null to a reader that may not enroll the identity' }),
  expiresAt: Type.String({ format: 'date-time' }),
};
export const IdentityEnrollmentsSchema = Type.Object({
  ott: Type.Optional(Type.Object(PendingEnrollment)),
  ottca: Type.Optional(Type.Object({ ...PendingEnrollment, caId: Type.String(), ca: EntityRefSchema })),
  updb: Type.Optional(Type.Object(PendingEnrollment)),
});

/** Pending enrollments as a reader without their secrets sees them: the token and JWT null. */
/**
 * Read fields of an identity beyond its stored ones: its type as a reference (written as the type's
 * name, read as clients of this interface decode it), its authenticators, API sessions and pending
 * enrollments, and `appData` as an object even where none was given.
 */
const identityReadFields = (tokens: EnrollmentTokens, resources: Resources, clock: Clock) => computed<typeof identities>(
  {
    type: EntityRefSchema,
    typeId: Type.String(),
    appData: { ...identities.fields.appData.schema, description: identities.fields.appData.description },
    enrollment: IdentityEnrollmentsSchema,
    authenticators: Type.Object({
      updb: Type.Optional(Type.Object({ id: Type.String(), username: Type.Union([Type.String(), Type.Null()]) })),
      cert: Type.Optional(Type.Object({ id: Type.String(), fingerprint: Type.Union([Type.String(), Type.Null()]) })),
    }),
    hasApiSession: Type.Boolean(),
    isMfaEnabled: Type.Boolean(),
    hasEdgeRouterConnection: Type.Boolean(),
    edgeRouterConnectionStatus: Type.String(),
  },
  async (ex, entities, answers, read) => {
    const ids = entities.map((e) => e.id);
    if (ids.length === 0) return;
    const auths = await ex
      .selectFrom('authenticators')
      .select(['id', 'identity_id', 'method', 'username', 'fingerprint'])
      .where('identity_id', 'in', ids)
      .execute();
    const sessions = await ex
      .selectFrom('api_sessions')
      .select(['identity_id', sql<number>`count(*)`.as('n')])
      .where('identity_id', 'in', ids)
      .groupBy('identity_id')
      .execute();
    const mfas = await ex.selectFrom('mfas').select(['identity_id', 'is_verified']).where('identity_id', 'in', ids).execute();
    // Booleans come back as the driver stores them (1 in SQLite).
    const withMfa = new Set(mfas.filter((r) => r.is_verified === 1 || r.is_verified === true).map((r) => String(r.identity_id)));
    const typeIds = [...new Set(entities.map((e) => String(e.type)))];
    const types = await ex.selectFrom('identity_types').select(['id', 'name']).where('id', 'in', typeIds).execute();
    const typeNames = new Map(types.map((r) => [String(r.id), String(r.name)]));
    const mayOpen = new Set(entities.filter((e) => maySeeEnrollmentSecrets(read.reader, e)).map((e) => e.id));
    const enrollments = await pendingEnrollments(tokens, resources, ex, ids, (id) => mayOpen.has(id));
    const withSession = new Set(sessions.map((s) => s.identity_id as string));
    for (const [i, e] of entities.entries()) {
      const mine = auths.filter((a) => a.identity_id === e.id);
      const updb = mine.find((a) => a.method === 'updb');
      const cert = mine.find((a) => a.method === 'cert');
      const typeId = String(e.type);
      Object.assign(answers[i]!, {
        // The types are seeded with their names as ids and never removed.
        type: entityRef('identity-types', typeId, typeNames.get(typeId) ?? typeId),
        typeId,
        appData: e.appData ?? {},
        enrollment: enrollments.get(e.id) ?? {},
        authenticators: {
          ...(updb ? { updb: { id: updb.id, username: updb.username } } : {}),
          ...(cert ? { cert: { id: cert.id, fingerprint: cert.fingerprint } } : {}),
        },
        hasApiSession: withSession.has(e.id),
        // Read as it is now: a disablement whose time has passed no longer holds (the stored flag
        // stays until the next write), as in the established controller.
        disabled: isDisabledAt({ disabled: e.disabled === true, disabledUntil: typeof e.disabledUntil === 'string' ? Date.parse(e.disabledUntil) : null }, clock()),
        isMfaEnabled: withMfa.has(e.id),
        hasEdgeRouterConnection: false,
        edgeRouterConnectionStatus: 'offline',
      });
    }
  },
);

/**
 * The behaviour of identities. `tokens` makes the tokens and JWTs of the enrollments an identity is
 * created with and reads with; `resources` is the controller's.
 */
export function identityBehaviour(tokens: EnrollmentTokens, resources: Resources, clock: Clock): ResourceBehaviour<typeof identities> {
  return {
    async validate(ctx, next, prev) {
      if (prev) await assertMayManage(ctx, prev.id);
      // A blank externalId is none, as the established controller stores it: no token names an
      // identity by it, and it takes no place in the unique index.
      if (typeof next.externalId === 'string' && next.externalId.trim() === '') next.externalId = null;
      if (prev?.type === 'Router' && next.type !== 'Router') {
        throw fieldError('type', "a router's identity stays of type Router", next.type);
      }
      await assertHostedServicesExist(ctx, next, prev);
      // Only an admin makes admins or grants permissions; a permission holder cannot raise itself.
      if (ctx.actor && !ctx.actor.isAdmin) {
        const granted = next.permissions.filter((p) => !(prev?.permissions ?? []).includes(p));
        if ((next.isAdmin === true && prev?.isAdmin !== true) || granted.length > 0) {
          throw new ApiError('UNAUTHORIZED', 'only an admin may grant admin or permissions', {
            field: next.isAdmin === true && prev?.isAdmin !== true ? 'isAdmin' : 'permissions',
            reason: 'only an admin may grant this',
          });
        }
        // What another identity may do is an admin's to change: dropping a permission holder's
        // permissions would take its access away (as the established controller refuses any change of
        // them by a non-admin). Dropping its own lends the caller nothing.
        const dropped = (prev?.permissions ?? []).filter((p) => !next.permissions.includes(p));
        if (prev && prev.id !== ctx.actor.id && dropped.length > 0) {
          throw new ApiError('UNAUTHORIZED', "only an admin may take another identity's permissions away", {
            field: 'permissions',
            reason: 'only an admin may change this',
          });
        }
        // What another permission holder logs in with: its auth policy (which signers' tokens it
        // takes) and its externalId (which tokens name it) would open it to the delegate's logins.
        const login = (['authPolicyId', 'externalId'] as const).find((f) => prev && next[f] !== prev[f]);
        if (prev && login && prev.id !== ctx.actor.id && isPrivileged(prev)) {
          throw new ApiError('UNAUTHORIZED', 'only an admin may change how an identity holding permissions logs in', {
            field: login,
            reason: 'only an admin may change this',
          });
        }
      }
      if (prev?.isDefaultAdmin === true && next.isAdmin !== true) {
        throw new ApiError('ENTITY_CAN_NOT_BE_UPDATED', 'the default admin stays an admin', {
          field: 'isAdmin',
          reason: 'the default admin stays an admin',
          value: next.isAdmin,
        });
      }
    },
    async afterWrite(ctx, next, prev) {
      // `enrollment` is accepted on create only: the enrollments the identity starts with.
      if (!prev && next.enrollment) await createIdentityEnrollments(ctx, next.id, next.enrollment, tokens.identityDuration);
      // Made an admin or a permission holder: the tokens of its pending enrollments were readable by
      // delegates until now (maySeeEnrollmentSecrets), and one of them enrolling would hold its
      // credential. They are issued anew, seen from now on by admins only.
      if (prev && !isPrivileged(prev) && isPrivileged(next)) {
        const repo = ctx.resources.get('enrollments').repo;
        const pending = await ctx.tx.selectFrom(repo.table).selectAll().where('identity_id', '=', next.id).execute();
        for (const row of pending) {
          const e = repo.fromRow(row);
          await reissueIn(ctx, tokens, e, e.expiresAt);
        }
      }
    },
    async beforeDelete(ctx, prev) {
      await assertMayManageAccess(ctx, prev.id);
      if (prev.isDefaultAdmin === true) {
        throw new ApiError('ENTITY_CAN_NOT_BE_DELETED', 'the default admin cannot be deleted');
      }
    },
    computed: [identityReadFields(tokens, resources, clock)],
  };
}

/** Disables an identity for `minutes` (0: until enabled); its sessions are refused at once. */
export async function disableIdentity(
  resources: Resources,
  clock: Clock,
  id: string,
  minutes: number,
  actor?: Actor,
): Promise<void> {
  await resources.write(async (ctx) => {
    await assertMayManageAccess(ctx, id);
    if (!(await markDisabled(ctx, id, clock(), minutes))) throw notFound('identity', id);
  }, actor);
}

export async function enableIdentity(resources: Resources, id: string, actor?: Actor): Promise<void> {
  await resources.write(async (ctx) => {
    await assertMayManageAccess(ctx, id);
    const values = { disabled: false, disabledAt: null, disabledUntil: null, updatedAt: ctx.now };
    if (!(await ctx.update('identities', id, values))) throw notFound('identity', id);
    await resetWrongPasswords(ctx, id);
  }, actor);
}

/**
 * An admin removes an identity's TOTP enrollment, confirmed or not (a holder of the identity
 * permission too, but not of an admin's or another permission holder's: it is their second factor,
 * a credential, which a delegate may not change). 404 for an unknown identity or one without MFA.
 */
export async function removeIdentityMfa(resources: Resources, id: string, actor?: Actor): Promise<void> {
  await resources.write(async (ctx) => {
    const identity = await ctx.tx.selectFrom('identities').select('id').where('id', '=', id).executeTakeFirst();
    if (!identity) throw notFound('identity', id);
    await assertMayManageAccess(ctx, id);
    const mfa = await ctx.tx.selectFrom('mfas').select('id').where('identity_id', '=', id).executeTakeFirst();
    if (!mfa) throw new ApiError('NOT_FOUND', 'the identity has no MFA enrollment');
    await ctx.remove('mfas', String(mfa.id), id);
    await endMfaPasses(ctx, id);
  }, actor);
}

/** Identity answers kept at most. */
export const MAX_CACHED_IDENTITY_ANSWERS = 50_000;

/**
 * Presented identities by id, for the hot GET /current-identity. An entry is dropped when anything
 * it shows moves: the identity, its authenticators, its API sessions, or any auth policy or CA.
 */
export class IdentityAnswers implements Cache {
  readonly name = 'identity-answers';
  private readonly cache = new BoundedMap<string, Record<string, unknown>>({ maxEntries: MAX_CACHED_IDENTITY_ANSWERS });

  constructor(private readonly resources: Resources) {}

  onChange(c: Change): void {
    // An answer names its auth policy and the CA of a pending ottca enrollment: a rename shows.
    if (c.collection === 'auth-policies' || (c.collection === 'cas' && c.kind !== 'create')) this.cache.clear();
    else if (c.collection === 'identities') this.cache.delete(c.id);
    else if (c.collection === 'authenticators' || c.collection === 'api-sessions' || c.collection === 'mfas' || c.collection === 'enrollments') {
      if (c.ownerId !== undefined) this.cache.delete(c.ownerId);
      else this.cache.clear();
    }
  }

  reset(): void {
    this.cache.clear();
  }

  async get(id: string): Promise<Record<string, unknown>> {
    const cached = this.cache.get(id);
    if (cached) return cached;
    const seen = this.cache.drops;
    const answer = await this.resources.get('identities').get(id);
    this.cache.setIfUnchanged(id, answer, seen);
    return answer;
  }
}

/**
 * The services an identity's hosting costs and precedences name exist, as the established controller
 * requires: a key naming no service would never apply. Only keys the write adds are looked up, so a
 * key left behind by a deleted service does not block other changes.
 */
async function assertHostedServicesExist(ctx: WriteContext, next: EntityOf<'identities'>, prev: EntityOf<'identities'> | undefined): Promise<void> {
  for (const field of ['serviceHostingCosts', 'serviceHostingPrecedences'] as const) {
    const before = prev?.[field] ?? {};
    const added = Object.keys(next[field] ?? {}).filter((id) => !Object.hasOwn(before, id));
    if (added.length === 0) continue;
    const found = new Set((await ctx.tx.selectFrom('services').select('id').where('id', 'in', added).execute()).map((r) => String(r.id)));
    const missing = added.find((id) => !found.has(id));
    if (missing !== undefined) throw fieldError(field, `names no service with id ${missing}`, missing, 'REFERENCED_ENTITY_NOT_FOUND');
  }
}
