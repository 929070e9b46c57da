// Revocations, controller settings and the controllers list beyond CRUD.
import { sql } from 'kysely';
import { iso } from '../clock.js';
import { checkRedirectUriPattern } from '../config/address.js';
import type { ApiBinding, ListenerConfig } from '../config/index.js';
import { fieldError, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { endApiSessions } from '../auth/lockout.js';
import { fingerprintOfPem } from '../pki/index.js';
import type { Entity } from '../store/repository.js';
import type { Executor } from '../store/store.js';
import { CONTROLLER_ID_KEY, controllerIdOf as storedControllerId } from '../store/controller-state.js';
import { GLOBAL_SETTING_ID, type controllerSettings, type revocations } from '../resources/operations.js';
import { adminOnly, byDelegate, isAdminIdentity } from './delegates.js';
import type { Actor, Answer, ResourceBehaviour, Resources, WriteContext } from './resources.js';

// ---- revocations -----------------------------------------------------------------------------

/** The lifetimes (ms) of what a revocation can revoke: the `edge.oidc` durations of the config. */
export interface TokenLifetimes {
  accessTokenDuration: number;
  refreshTokenDuration: number;
}

/** How long a revocation must be kept: past it, everything it could revoke has expired anyway. */
export function revocationKeepMs(lifetimes: TokenLifetimes): number {
  return Math.max(lifetimes.accessTokenDuration, lifetimes.refreshTokenDuration);
}

/**
 * Revoking an admin or one of its API sessions ends the admin's access, so only an admin may do it,
 * as only an admin may change an admin (a JTI names one token, not anyone's access).
 */
async function assertMayRevoke(ctx: WriteContext, type: unknown, id: string): Promise<void> {
  if (!byDelegate(ctx)) return;
  let identityId: string | undefined;
  if (type === 'IDENTITY') identityId = id;
  else if (type === 'API_SESSION') {
    const row = await ctx.tx.selectFrom('api_sessions').select('identity_id').where('id', '=', id).executeTakeFirst();
    identityId = row ? String(row.identity_id) : undefined;
  }
  if (identityId !== undefined && (await isAdminIdentity(ctx, identityId))) throw adminOnly('revoke an admin or its API sessions');
}

/**
 * Ends the API sessions a revocation reaches (behaviour.md §6), legacy and OIDC alike, in the
 * revocation's own transaction: API_SESSION the one it names, IDENTITY every one of that identity
 * created at or before the revocation, so a later login works. Ending them, rather than checking each
 * legacy token against the revocations, leaves nothing of them behind to be checked.
 */
async function endRevokedApiSessions(ctx: WriteContext, type: unknown, id: string): Promise<void> {
  if (type === 'API_SESSION') await endApiSessions(ctx, { id });
  else if (type === 'IDENTITY') await endApiSessions(ctx, { identityId: id, madeBy: ctx.now });
}

/** A new revocation is stamped with the moment it may be forgotten, and ends what it revokes. */
export function revocationBehaviour(lifetimes: TokenLifetimes): ResourceBehaviour<typeof revocations> {
  return {
    async validate(ctx, next, prev) {
      if (prev) return;
      await assertMayRevoke(ctx, next.type, next.id);
      next.expiresAt = iso(Date.parse(ctx.now) + revocationKeepMs(lifetimes));
    },
    async afterWrite(ctx, next, prev) {
      if (!prev) await endRevokedApiSessions(ctx, next.type, next.id);
    },
  };
}

/**
 * Creates a revocation, or renews the one that already holds this id: revoking an identity or an
 * API session again must also catch the tokens issued since the first time. A renewal is made anew,
 * as the established controller replaces a revocation: it takes effect at its write time (createdAt
 * and updatedAt, the moment tokens issued until then are revoked), is kept the full lifetime from
 * then, and ends the API sessions created since; it keeps its tags unless others are given. Named
 * with another type, or expired, it keeps nothing of the old one: a JTI revocation a caller made of
 * its own identity's id once stood in the way of revoking that identity.
 */
export async function revoke(
  resources: Resources,
  lifetimes: TokenLifetimes,
  body: Record<string, unknown>,
  actor?: Actor,
): Promise<Entity> {
  const service = resources.get('revocations');
  const id = body.id as string;
  if (!(await service.repo.exists(resources.store.db, id))) return service.create(body, actor);
  return resources.write(async (ctx) => {
    const prev = await service.repo.get(ctx.tx, id);
    if (!prev) throw fieldError('id', 'was revoked and removed while this revocation was written', id);
    await assertMayRevoke(ctx, body.type, id);
    const replaced = (typeof prev.expiresAt === 'string' && prev.expiresAt <= ctx.now) || prev.type !== body.type;
    const values: Record<string, unknown> = {
      type: body.type,
      tags: body.tags === undefined ? (replaced ? {} : prev.tags) : (body.tags ?? {}),
      createdAt: ctx.now,
      updatedAt: ctx.now,
      expiresAt: iso(Date.parse(ctx.now) + revocationKeepMs(lifetimes)),
    };
    await ctx.update('revocations', id, values);
    await endRevokedApiSessions(ctx, body.type, id);
    return { ...prev, ...values };
  }, actor);
}

// ---- controller settings ---------------------------------------------------------------------

export { GLOBAL_SETTING_ID } from '../resources/operations.js';

/**
 * Redirect URI patterns the OIDC client always allows (behaviour.md §6): loopback callbacks on any
 * port. A pattern without a path stands for any path on that host and port.
 */
export const DEFAULT_REDIRECT_URIS: readonly string[] = ['http://127.0.0.1:*', 'http://localhost:*'];

export interface OidcSettings {
  redirectUris: string[];
  postLogoutUris: string[];
}

export interface ControllerSettingValues {
  oidc: OidcSettings;
}

const OIDC_URI_LISTS = ['redirectUris', 'postLogoutUris'] as const;

/**
 * What a controller uses when no setting says otherwise: the default redirect URIs plus those the
 * configuration lists on its edge-oidc APIs; post-logout URIs default to the same list.
 */
export function builtInControllerSettings(web: readonly ListenerConfig[]): ControllerSettingValues {
  const configured = web.flatMap((l) => l.apis.flatMap((a) => (a.binding === 'edge-oidc' ? (a.options.redirectURIs ?? []) : [])));
  const uris = [...new Set([...DEFAULT_REDIRECT_URIS, ...configured])];
  return { oidc: { redirectUris: uris, postLogoutUris: [...uris] } };
}

/** Redirect and post-logout URIs are absolute http(s) URL patterns, `*` allowed only as the port. */
export function controllerSettingBehaviour(): ResourceBehaviour<typeof controllerSettings> {
  return {
    async validate(_ctx, next) {
      const oidc = next.oidc;
      if (!isObject(oidc)) return;
      for (const key of OIDC_URI_LISTS) {
        const list = oidc[key];
        if (!Array.isArray(list)) continue;
        for (const [i, uri] of list.entries()) {
          try {
            checkRedirectUriPattern(uri);
          } catch (err) {
            throw fieldError(`oidc.${key}[${i}]`, (err as Error).message, uri);
          }
        }
      }
    },
  };
}

/** The built-in layer of the effective settings: the values, and when they were taken from the configuration. */
export interface BuiltInLayer {
  values: ControllerSettingValues;
  /** When this controller read its configuration (its start). */
  at: string;
}

/**
 * The setting a controller runs with: the built-in values, overlaid by the `global` setting, then by
 * the controller's own setting; each layer replaces the fields it sets, and adds to the lists below
 * it: the OIDC provider takes the redirect and post-logout patterns of every layer (oidc/settings.ts).
 * Answers for `global`, for any id that has a setting and for any controller in the controllers
 * list (even without settings); any other id is unknown (404). The answer is an entity of its own:
 * `effective` is the merged values, `instance` what the id's own setting says (nothing without
 * one), `sources` the layers merged; it came into being with its oldest layer and changed when its
 * newest one did.
 */
export async function effectiveControllerSetting(resources: Resources, builtIn: BuiltInLayer, id: string): Promise<Answer> {
  const ex = resources.store.db;
  const settings = resources.get('controller-settings').repo;
  const own = await settings.get(ex, id);
  const global = id === GLOBAL_SETTING_ID ? undefined : await settings.get(ex, GLOBAL_SETTING_ID);
  if (id !== GLOBAL_SETTING_ID && !own && !(await resources.get('controllers').repo.exists(ex, id))) {
    throw notFound('controller setting', id);
  }
  const sources = ['built-in'];
  let values: Record<string, unknown> = structuredClone(builtIn.values) as unknown as Record<string, unknown>;
  let createdAt = builtIn.at;
  let updatedAt = builtIn.at;
  for (const layer of [global, own]) {
    if (!layer) continue;
    values = overlay(values, { oidc: layer.oidc ?? {} });
    sources.push(layer.id);
    if (layer.createdAt < createdAt) createdAt = layer.createdAt;
    if (layer.updatedAt > updatedAt) updatedAt = layer.updatedAt;
  }
  return {
    _links: { self: { href: `./controller-settings/${id}/effective` } },
    id,
    createdAt,
    updatedAt,
    tags: own?.tags ?? {},
    controllerId: id,
    effective: values,
    instance: { oidc: structuredClone(own?.oidc ?? {}) },
    sources,
  };
}

/** Objects merge key by key; lists add what they do not hold yet; anything else replaces; null and absent keep the base. */
function overlay(base: Record<string, unknown>, top: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(top)) {
    if (v === undefined || v === null) continue;
    const b = out[k];
    if (isObject(b) && isObject(v)) out[k] = overlay(b, v);
    else if (Array.isArray(b) && Array.isArray(v)) out[k] = [...new Set([...(b as unknown[]), ...structuredClone(v as unknown[])])];
    else out[k] = structuredClone(v);
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---- controllers -----------------------------------------------------------------------------

/** API name → the base URLs serving it, as the controllers list shows them. */
export type ApiAddresses = Record<string, { url: string; version: string }[]>;

const API_PATHS: Record<ApiBinding, string> = {
  'edge-client': '/edge/client/v1',
  'edge-management': '/edge/management/v1',
  'edge-oidc': '/oidc',
};

/** The base URL of every bind point serving each of `bindings`, from the listener configuration. */
export function apiAddressesOf(
  web: readonly Pick<ListenerConfig, 'name' | 'bindPoints' | 'apis'>[],
  bindings: readonly ApiBinding[] = ['edge-client', 'edge-management'],
): ApiAddresses {
  const out: ApiAddresses = {};
  for (const binding of bindings) {
    const urls = web
      .filter((l) => l.apis.some((a) => a.binding === binding))
      .flatMap((l) => l.bindPoints.map((b) => ({ url: `https://${b.address}${API_PATHS[binding]}`, version: 'v1' })));
    if (urls.length > 0) out[binding] = urls;
  }
  return out;
}

/** Both Edge APIs at one address: the default listener's shape. */
function edgeApisAt(address: string): ApiAddresses {
  const bindPoints = [{ interface: address, address }];
  const apis = [
    { binding: 'edge-client' as const, options: {} },
    { binding: 'edge-management' as const, options: {} },
  ];
  return apiAddressesOf([{ name: 'self', bindPoints, apis }]);
}

export interface ControllerSelf {
  name: string;
  address: string;
  certPem: string;
  /** What this controller serves where; without it, both Edge APIs at `address`. */
  apiAddresses?: ApiAddresses;
}

export { CONTROLLER_ID_KEY } from '../store/controller-state.js';

/** This controller's id, or undefined before it first registered. */
export function controllerIdOf(ex: Executor, resources: Resources): Promise<string | undefined> {
  return storedControllerId(ex, resources.store.dialect);
}

async function ensureControllerId(ctx: WriteContext): Promise<string> {
  const existing = await controllerIdOf(ctx.tx, ctx.resources);
  if (existing) return existing;
  const id = newId();
  const value = ctx.resources.store.dialect.toDb('json', id);
  await ctx.tx.deleteFrom('controller_state').where('key', '=', CONTROLLER_ID_KEY).execute();
  await ctx.tx.insertInto('controller_state').values({ key: CONTROLLER_ID_KEY, value, updated_at: ctx.now }).execute();
  ctx.changed({ collection: 'controller-state', kind: 'create', id: CONTROLLER_ID_KEY });
  return id;
}

/** Records this controller in the controllers list at start (and marks it online). */
export async function registerController(ctx: WriteContext, self: ControllerSelf): Promise<void> {
  const id = await ensureControllerId(ctx);
  const repo = ctx.resources.get('controllers').repo;
  const prev = await repo.get(ctx.tx, id);
  // Names are unique: should another record hold this one, ours says which controller it is.
  const taken = await ctx.tx
    .selectFrom('controllers')
    .select('id')
    .where('name', '=', self.name)
    .where('id', '!=', id)
    .executeTakeFirst();
  const values = {
    name: taken ? `${self.name} (${id})` : self.name,
    address: self.address,
    ctrlAddress: self.address,
    certPem: self.certPem,
    fingerprint: fingerprintOfPem(self.certPem),
    isOnline: true,
    lastJoinedAt: ctx.now,
    apiAddresses: self.apiAddresses ?? edgeApisAt(self.address),
    updatedAt: ctx.now,
  };
  if (prev) await ctx.update('controllers', id, values);
  else await ctx.insert('controllers', { id, createdAt: ctx.now, tags: {}, ...values });
}

/** Marks this controller offline in the controllers list (a clean stop). */
export async function markControllerOffline(resources: Resources): Promise<void> {
  await resources.write(async (ctx) => {
    const id = await controllerIdOf(ctx.tx, resources);
    if (!id) return;
    await ctx.update('controllers', id, { isOnline: false, updatedAt: ctx.now });
  });
}

// ---- resource counts -------------------------------------------------------------------------

/**
 * Records per collection, keyed by collection name, in one statement: what each collection lists
 * (its table, or the view it reads from); collections reading the same one (routers and
 * transit-routers) share its count.
 */
export async function countRecords(resources: Resources): Promise<Record<string, number>> {
  const services = [...resources.all()].sort((a, b) => a.def.name.localeCompare(b.def.name));
  const sources = [...new Set(services.map((s) => s.repo.source))];
  if (sources.length === 0) return {};
  const parts = sources.map((t) => sql`select ${t} as t, count(*) as n from ${sql.table(t)}`);
  const { rows } = await sql<{ t: string; n: number | string }>`${sql.join(parts, sql` union all `)}`.execute(resources.store.db);
  const bySource = new Map(rows.map((row) => [row.t, Number(row.n)]));
  return Object.fromEntries(services.map((s) => [s.def.name, bySource.get(s.repo.source) ?? 0]));
}
