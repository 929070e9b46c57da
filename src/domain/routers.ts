// Edge routers, routers and terminators beyond CRUD: router names unique across every router, edge
// routers read and deleted (not changed) as routers, an edge router created with its enrollment,
// router configs, the system identity and system edge router policy of a tunneler-enabled edge
// router, terminators bound to an existing router, and terminator secrets kept only as a hash.
import { createHash } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { ApiError, fieldError } from '../errors.js';
import { newId } from '../ids.js';
import type { PolicyLinks } from '../policy/links.js';
import { dropIdRoles } from './policies.js';
import { DEFAULT_AUTH_POLICY_ID } from '../resources/auth-policies.js';
import type { EntityOf } from '../resources/index.js';
import { EntityRefSchema, entityRef, type ResourceDef } from '../resources/kit.js';
import { edgeRouters as edgeRoutersDef, type edgeRouters, type routers, type transitRouters } from '../resources/routers.js';
import type { terminators } from '../resources/services.js';
import type { Entity, Repository } from '../store/repository.js';
import type { Executor } from '../store/store.js';
import { computed, type ResourceBehaviour, type WriteContext } from './resources.js';
import { checkConfigsFor } from './services.js';
import type { EnrollmentTokens } from './enrollments.js';
import { newRouterEnrollment, routerEnrollmentReadFields, TRANSIT_ROUTER_ENROLLMENT_METHOD } from './router-enrollment.js';

/** Name of the system edge router policy of a tunneler-enabled edge router. */
export function systemPolicyName(routerId: string): string {
  return `edge-router-${routerId}-system`;
}

/** `tokens` make the enrollment a new edge router is created with (domain/router-enrollment.ts). */
export function edgeRouterBehaviour(links: PolicyLinks, tokens: EnrollmentTokens): ResourceBehaviour<typeof edgeRouters> {
  return {
    async validate(ctx, next, prev) {
      await assertRouterNameFree(ctx, next, prev);
      await checkRouterConfigs(ctx, next.configs, prev?.configs);
      if (!prev) Object.assign(next, await newRouterEnrollment(ctx, tokens, next.id));
    },
    async afterWrite(ctx, next, prev) {
      if (next.isTunnelerEnabled === true) await ensureTunneler(ctx, links, next);
      else if (prev?.isTunnelerEnabled === true) await removeTunneler(ctx, links, next.id);
    },
    async afterDelete(ctx, prev) {
      await removeTunneler(ctx, links, prev.id);
      await removeTerminatorsOf(ctx, prev.id);
    },
    computed: [routerEnrollmentReadFields(tokens), edgeRouterAppData],
  };
}

/** `appData` reads as an object even where none was given (null), as the established controller reads it. */
const edgeRouterAppData = computed<typeof edgeRouters>(
  { appData: { ...edgeRoutersDef.fields.appData.schema, description: edgeRoutersDef.fields.appData.description } },
  (_ex, entities, answers) => {
    for (const [i, e] of entities.entries()) answers[i]!.appData = e.appData ?? {};
    return Promise.resolve();
  },
);

/**
 * Routers: the routers collection lists edge routers too (resources/routers.ts). One of those is
 * changed at /edge-routers only (409 here, as the established controller answers), and deleting it
 * here deletes it as /edge-routers would, with everything that goes with it.
 */
export function routerBehaviour(tokens: EnrollmentTokens): ResourceBehaviour<typeof routers | typeof transitRouters> {
  return {
    async validate(ctx, next, prev) {
      if (prev && (await isEdgeRouter(ctx, prev.id))) {
        throw new ApiError('CAN_NOT_UPDATE_ROUTER', `the router ${prev.id} is an edge router; it is changed at ./edge-routers/${prev.id}`);
      }
      await assertRouterNameFree(ctx, next, prev);
      await checkRouterConfigs(ctx, next.configs, prev?.configs);
      // A transit router is made with an enrollment (trott), as an edge router is with its own.
      if (!prev) Object.assign(next, await newRouterEnrollment(ctx, tokens, next.id, TRANSIT_ROUTER_ENROLLMENT_METHOD));
    },
    async beforeDelete(ctx, prev) {
      if (await isEdgeRouter(ctx, prev.id)) await ctx.resources.get('edge-routers').deleteIn(ctx, prev.id);
    },
    async afterDelete(ctx, prev) {
      await removeTerminatorsOf(ctx, prev.id);
    },
    computed: [routerEnrollmentReadFields(tokens)],
  };
}

function isEdgeRouter(ctx: WriteContext, id: string): Promise<boolean> {
  return ctx.resources.get('edge-routers').repo.exists(ctx.tx, id);
}

/**
 * Router names are unique across every router, edge routers included, as /routers lists them all.
 * Each table's unique index keeps its own rows apart; this looks across both (writes are serial).
 */
async function assertRouterNameFree(ctx: WriteContext, next: Entity, prev: Entity | undefined): Promise<void> {
  if (prev?.name === next.name) return;
  const routers = ctx.resources.get('routers').repo;
  const taken = await ctx.tx
    .selectFrom(routers.source)
    .select('id')
    .where('name', '=', next.name as string)
    .where('id', '!=', next.id)
    .executeTakeFirst();
  if (taken) throw fieldError('name', 'another router (edge router or router) already has this name', next.name);
}

// ---- router configs ------------------------------------------------------------------------

/** The configs of a router or an edge router, when they change: as a service's, of router config types (domain/services.ts). */
async function checkRouterConfigs(ctx: WriteContext, ids: readonly string[], before: readonly string[] | undefined): Promise<void> {
  if (JSON.stringify(ids) === JSON.stringify(before)) return;
  await checkConfigsFor(ctx.tx, 'router', ids);
}

// ---- tunneler-enabled edge routers ----------------------------------------------------------

/** Every non-virtual field of a definition at its default (null without one). */
function defaults(def: ResourceDef): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(def.fields)) {
    if (f.virtual) continue;
    out[name] = f.default === undefined ? null : structuredClone(f.default);
  }
  return out;
}

/** Inserts a record, turning a unique-constraint failure into a 400 naming `field`. */
async function insertUnique(
  ctx: WriteContext,
  collection: 'identities' | 'edge-router-policies',
  entity: Record<string, unknown>,
  field: string,
  reason: string,
): Promise<void> {
  try {
    await ctx.insert(collection, entity);
  } catch (err) {
    if (ctx.resources.store.dialect.uniqueViolation(err, ctx.resources.get(collection).repo.table) === undefined) throw err;
    throw fieldError(field, reason, entity.name);
  }
}

async function findSystemPolicy(
  ex: Executor,
  repo: Repository<EntityOf<'edge-router-policies'>>,
  routerId: string,
): Promise<EntityOf<'edge-router-policies'> | undefined> {
  const row = await ex
    .selectFrom(repo.table)
    .selectAll()
    .where('name', '=', systemPolicyName(routerId))
    .executeTakeFirst();
  const policy = row ? repo.fromRow(row) : undefined;
  return policy?.isSystem === true ? policy : undefined;
}

/**
 * The system identity (id and name of the router, type Router) and the system edge router policy
 * (`edge-router-<id>-system`, AnyOf, both roles `@<id>`) exist; the identity carries the router's
 * current name. Idempotent: a missing piece is created, an existing one kept.
 */
async function ensureTunneler(ctx: WriteContext, links: PolicyLinks, router: EntityOf<'edge-routers'>): Promise<void> {
  const identities = ctx.resources.get('identities');
  const name = router.name;
  const identity = await identities.repo.get(ctx.tx, router.id);
  if (!identity) {
    const created: Entity = {
      ...defaults(identities.def),
      id: router.id,
      createdAt: ctx.now,
      updatedAt: ctx.now,
      tags: {},
      // Kept only when the identities table has the column (see the identities definition).
      isSystem: true,
      name,
      type: 'Router',
      isAdmin: false,
      authPolicyId: DEFAULT_AUTH_POLICY_ID,
    };
    await insertUnique(ctx, 'identities', created, 'name', 'an identity already has this name; a tunneler-enabled edge router needs it for its identity');
    await links.refreshEntityLinks(ctx, 'identity', created);
  } else if (identity.name !== name) {
    try {
      await ctx.update('identities', identity.id, { name, updatedAt: ctx.now });
    } catch (err) {
      if (ctx.resources.store.dialect.uniqueViolation(err, identities.repo.table) === undefined) throw err;
      throw fieldError('name', 'an identity already has this name; the identity of this tunneler-enabled edge router takes it', name);
    }
  }

  const policies = ctx.resources.get('edge-router-policies');
  if (await findSystemPolicy(ctx.tx, policies.repo, router.id)) return;
  const role = `@${router.id}`;
  const policy: EntityOf<'edge-router-policies'> = {
    ...defaults(policies.def),
    id: newId(),
    createdAt: ctx.now,
    updatedAt: ctx.now,
    tags: {},
    isSystem: true,
    name: systemPolicyName(router.id),
    semantic: 'AnyOf',
    identityRoles: [role],
    edgeRouterRoles: [role],
  };
  await insertUnique(ctx, 'edge-router-policies', policy, 'isTunnelerEnabled', `an edge router policy named ${policy.name} already exists`);
  await links.refreshPolicyLinks(ctx, 'edge-router-policies', policy);
}

/** Removes the system edge router policy and the system identity of a router, if there are any. */
async function removeTunneler(ctx: WriteContext, links: PolicyLinks, routerId: string): Promise<void> {
  const policies = ctx.resources.get('edge-router-policies');
  const policy = await findSystemPolicy(ctx.tx, policies.repo, routerId);
  if (policy) {
    await ctx.remove('edge-router-policies', policy.id);
    await links.forgetPolicy(ctx, 'edge-router-policies', policy.id);
  }
  const identity = await ctx.resources.get('identities').repo.get(ctx.tx, routerId);
  if (identity && identity.type === 'Router') {
    await ctx.remove('identities', identity.id);
    await links.forgetEntity(ctx, 'identity', identity.id);
    // As for any deleted identity: a policy naming it by id must not select the identity made
    // again with the same id when tunneling is turned back on.
    await dropIdRoles(ctx, links, 'identity', identity.id);
  }
}

/** A deleted router takes its terminators with it. */
async function removeTerminatorsOf(ctx: WriteContext, routerId: string): Promise<void> {
  const rows = await ctx.tx.deleteFrom('terminators').where('router_id', '=', routerId).returning('id').execute();
  for (const r of rows) ctx.changed({ collection: 'terminators', kind: 'delete', id: r.id as string });
}

// ---- terminators ---------------------------------------------------------------------------

/**
 * Read fields of a terminator beyond its definition's: the ids beside the references, and its
 * dynamic cost — what the terminator strategy adds to the static cost from the outcomes of the
 * circuits routed to it. This controller routes no circuits, so it adds nothing.
 */
const terminatorReadFields = computed<typeof terminators>(
  {
    serviceId: Type.String({ description: 'id of the service' }),
    routerId: Type.String({ description: 'id of the edge router or router hosting it' }),
    router: Type.Union([EntityRefSchema, Type.Null()], { description: 'the edge router or router hosting it' }),
    dynamicCost: Type.Integer({ minimum: 0, maximum: 65535, description: 'cost the terminator strategy adds from circuit outcomes' }),
  },
  async (ex, entities, answers) => {
    const refs = await routerRefs(ex, entities.map((e) => e.router));
    for (const [i, e] of entities.entries()) {
      const answer = answers[i]!;
      answer.serviceId = e.service;
      answer.routerId = e.router;
      answer.dynamicCost = 0;
      answer.router = refs.get(e.router) ?? null;
    }
  },
);

/** References to the routers of `ids` that exist: an edge router as one, any other as a router. */
export async function routerRefs(ex: Executor, ids: readonly string[]): Promise<Map<string, ReturnType<typeof entityRef>>> {
  const [edge, fabric] = [await routerNames(ex, 'edge_routers', ids), await routerNames(ex, 'routers', ids)];
  const refs = new Map<string, ReturnType<typeof entityRef>>();
  for (const id of ids) {
    const edgeName = edge.get(id);
    const name = edgeName ?? fabric.get(id);
    if (name !== undefined) refs.set(id, entityRef(edgeName !== undefined ? 'edge-routers' : 'routers', id, name));
  }
  return refs;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export function terminatorBehaviour(): ResourceBehaviour<typeof terminators> {
  return {
    async validate(ctx, next, prev) {
      const router = next.router;
      if (router !== prev?.router) {
        const found =
          (await ctx.resources.get('edge-routers').repo.exists(ctx.tx, router)) ||
          (await ctx.resources.get('routers').repo.exists(ctx.tx, router));
        if (!found) {
          throw new ApiError('REFERENCED_ENTITY_NOT_FOUND', `router: no edge router or router with id ${router}`, {
            field: 'router',
            reason: 'no edge router or router with this id',
            value: router,
          });
        }
      }
      const secret = next.identitySecret;
      delete next.identitySecret;
      if (!prev && typeof secret === 'string' && secret !== '') {
        // The secret itself is never echoed, not even in an error.
        if (!BASE64.test(secret)) throw fieldError('identitySecret', 'must be base64');
        next.identitySecretHash = createHash('sha256').update(Buffer.from(secret, 'base64')).digest('hex');
      }
    },
    computed: [terminatorReadFields],
  };
}

async function routerNames(ex: Executor, table: string, ids: readonly string[]): Promise<Map<string, string>> {
  const unique = [...new Set(ids)];
  if (unique.length === 0) return new Map();
  const rows = await ex.selectFrom(table).select(['id', 'name']).where('id', 'in', unique).execute();
  return new Map(rows.map((r) => [r.id as string, r.name as string]));
}
