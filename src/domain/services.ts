// Services, config types and configs beyond CRUD: config type schemas, config data checked against
// them, the configs of a service, what a service answer carries for its caller, identity
// service-config overrides, and the seeded config types.
import { Type } from '@sinclair/typebox';
import type { ValidateFunction } from 'ajv';
import { sql, type SqlBool } from 'kysely';
import { ApiError, fieldError, notFound } from '../errors.js';
import { entityRef } from '../resources/kit.js';
import type { EntityOf } from '../resources/index.js';
import { linkListOf } from '../resources/relations.js';
import type { configs, configTypes, services } from '../resources/services.js';
import { BoundedMap } from '../kernel/bounded-map.js';
import type { Cache } from '../kernel/caches.js';
import type { Change } from '../kernel/changes.js';
import type { Entity } from '../store/repository.js';
import type { Executor, Tx } from '../store/store.js';
import { SEEDED_CONFIG_TYPE_IDS, SEEDED_CONFIG_TYPES } from './config-type-schemas.js';
import { assertMayManage } from './delegates.js';
import { dataProblem, JsonSchemaCompiler, SchemaProblem } from './json-schema.js';
import type { Caller } from './client/caller.js';
import { ClientServiceFields, configTypeChoice, type CallerServiceFields, type ConfigTypeChoice } from './client/service-list.js';
import { computed, type Actor, type Answer, type ResourceBehaviour, type Resources, type WriteContext } from './resources.js';

/** The terminator strategies a router knows; a typo would leave a service without routing. */
export const TERMINATOR_STRATEGIES = ['smartrouting', 'weighted', 'random', 'sticky'] as const;
const DEFAULT_STRATEGY = 'smartrouting';

/** The link table the `configs` of services are kept in, as the services definition declares it. */
const SERVICE_CONFIGS = linkListOf('services', 'configs');
const SERVICE_ID = SERVICE_CONFIGS.owner.column;
const CONFIG_ID = SERVICE_CONFIGS.member.column;

/** Configs checked per round when a schema change is weighed against the stored configs. */
const CHECK_BATCH = 500;

function json(value: unknown): string {
  return JSON.stringify(value ?? null);
}

function compileOrRefuse(compiler: JsonSchemaCompiler, schema: unknown): ValidateFunction {
  try {
    return compiler.compile(schema ?? {});
  } catch (err) {
    if (err instanceof SchemaProblem) throw fieldError('schema', err.reason);
    throw err;
  }
}

function referencedNotFound(field: string, collection: string, id: unknown): ApiError {
  return new ApiError('REFERENCED_ENTITY_NOT_FOUND', `${field}: no ${collection} with id ${String(id)}`, {
    field,
    reason: `no ${collection} with this id`,
    value: id,
  });
}

// ---- config types --------------------------------------------------------------------------------

/**
 * The seeded config types are protected: tunnelers and SDKs read configs by these names and rely on
 * their shapes, and a controller upgrade re-seeds them. Their name and schema (and target) cannot be
 * changed and they cannot be deleted (their tags can change). An operator who needs another shape
 * creates a config type of its own.
 */
function assertSeededUnchanged(next: EntityOf<'config-types'>, prev: EntityOf<'config-types'>): void {
  if (!SEEDED_CONFIG_TYPE_IDS.has(prev.id)) return;
  for (const field of ['name', 'schema'] as const) {
    if (json(next[field]) !== json(prev[field])) {
      throw new ApiError('ENTITY_CAN_NOT_BE_UPDATED', `the config type ${prev.id} is built in; its ${field} cannot change`, {
        field,
        reason: 'is fixed for a built-in config type',
      });
    }
  }
}

/** Pages through the configs of a type (id order), in the write's transaction. */
async function* configsOfType(tx: Tx, resources: Resources, typeId: string): AsyncGenerator<EntityOf<'configs'>> {
  const repo = resources.get('configs').repo;
  let after = '';
  for (;;) {
    const rows = await tx
      .selectFrom('configs')
      .selectAll()
      .where('config_type_id', '=', typeId)
      .where('id', '>', after)
      .orderBy('id')
      .limit(CHECK_BATCH)
      .execute();
    for (const row of rows) yield repo.fromRow(row);
    if (rows.length < CHECK_BATCH) return;
    after = String((rows[rows.length - 1] as { id: string }).id);
  }
}

/**
 * A schema change that a stored config of the type would fail is refused: clients rely on every
 * config satisfying its type's schema, and re-validating lazily would only move the failure to
 * whoever next reads or writes that config.
 */
async function assertConfigsStillValid(ctx: WriteContext, typeId: string, validate: ValidateFunction): Promise<void> {
  for await (const config of configsOfType(ctx.tx, ctx.resources, typeId)) {
    if (validate(config.data)) continue;
    const problem = dataProblem(validate.errors, 'data');
    throw fieldError(
      'schema',
      `the config ${config.name} (${config.id}) would no longer satisfy it: ${problem.field} ${problem.reason}`,
    );
  }
}

/** Names every config type where config types are asked for (`configTypes`), so no type may take it. */
const ALL_CONFIG_TYPES = 'all';

/**
 * A schema that admits no object is refused (a config's data is an object, so no config of the type
 * could be made): a non-empty schema names type object at its root, as the established controller
 * requires (one naming no root type is refused there too).
 */
function assertAdmitsObjects(schema: Record<string, unknown> | null): void {
  if (schema === null || Object.keys(schema).length === 0 || schema.type === 'object') return;
  throw fieldError('schema', 'must have type object at its root: the data of a config is an object');
}

export function configTypeBehaviour(compiler = new JsonSchemaCompiler()): ResourceBehaviour<typeof configTypes> {
  return {
    async validate(ctx, next, prev) {
      if (prev) assertSeededUnchanged(next, prev);
      if (next.name === ALL_CONFIG_TYPES && next.name !== prev?.name) {
        throw fieldError('name', `${ALL_CONFIG_TYPES} is the keyword for every config type, not a name one may take`, next.name);
      }
      const validate = compileOrRefuse(compiler, next.schema);
      if (!prev || json(next.schema) !== json(prev.schema)) assertAdmitsObjects(next.schema);
      if (!prev) return;
      if (json(next.schema) !== json(prev.schema)) await assertConfigsStillValid(ctx, next.id, validate);
    },
    async beforeDelete(_ctx, prev) {
      if (SEEDED_CONFIG_TYPE_IDS.has(prev.id)) {
        throw new ApiError('ENTITY_CAN_NOT_BE_DELETED', `the config type ${prev.id} is built in and cannot be deleted`);
      }
      // A type that still has configs is refused by the store (configs.config_type_id restricts).
    },
  };
}

// ---- configs -------------------------------------------------------------------------------------

/** Config types whose compiled schemas are kept at most. */
const MAX_CACHED_VALIDATORS = 1000;

/** Compiled config type schemas, by config type id; an entry is used only for the schema it was built from. */
export class ConfigValidators implements Cache {
  readonly name = 'config-validators';
  private readonly cache = new BoundedMap<string, { updatedAt: string; text: string; validate: ValidateFunction }>({
    maxEntries: MAX_CACHED_VALIDATORS,
  });

  constructor(private readonly compiler = new JsonSchemaCompiler()) {}

  onChange(c: Change): void {
    if (c.collection === 'config-types' && c.kind !== 'create') this.drop(c.id);
  }

  reset(): void {
    this.cache.clear();
  }

  /** The validator of a config type's current schema. */
  for(type: Entity): ValidateFunction {
    const text = json(type.schema);
    const hit = this.cache.get(type.id);
    if (hit && hit.updatedAt === type.updatedAt && hit.text === text) return hit.validate;
    const validate = compileOrRefuse(this.compiler, type.schema);
    this.cache.set(type.id, { updatedAt: type.updatedAt, text, validate });
    return validate;
  }

  drop(typeId: string): void {
    this.cache.delete(typeId);
  }

  get size(): number {
    return this.cache.size;
  }
}

/** Identity service-config overrides naming a config. */
async function overridesUsing(ex: Executor, configId: string): Promise<number> {
  const row = await ex
    .selectFrom('identity_service_configs')
    .select(sql<number>`count(*)`.as('n'))
    .where('config_id', '=', configId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Takes a deleted config off the services, edge routers and routers naming it, as the established
 * controller does, each announced as changed so that client service lists, service-update markers
 * and the audit log follow.
 */
async function takeOffUsers(ctx: WriteContext, configId: string): Promise<void> {
  const services = await ctx.tx
    .selectFrom(SERVICE_CONFIGS.table)
    .select(`${SERVICE_ID} as serviceId`)
    .where(CONFIG_ID, '=', configId)
    .orderBy(SERVICE_ID)
    .execute();
  await ctx.tx.deleteFrom(SERVICE_CONFIGS.table).where(CONFIG_ID, '=', configId).execute();
  for (const { serviceId } of services) await ctx.update('services', String(serviceId), { updatedAt: ctx.now });

  // Each kind of router from its own table: the routers collection reads edge routers too.
  for (const collection of ['edge-routers', 'routers'] as const) {
    const routers = ctx.resources.get(collection).repo;
    const rows = await ctx.tx
      .selectFrom(routers.table)
      .selectAll()
      .where(ctx.resources.store.dialect.flavor.arraySome(sql.ref(`${routers.table}.configs`), (element) => sql<SqlBool>`${element} = ${configId}`))
      .orderBy('id')
      .execute();
    for (const router of rows.map((row) => routers.fromRow(row))) {
      const configs = (router.configs as string[]).filter((id) => id !== configId);
      await ctx.update(collection, router.id, { configs, updatedAt: ctx.now });
    }
  }
}

/** `validators` is a cache: register it so that it follows config type changes. */
export function configBehaviour(validators: ConfigValidators): ResourceBehaviour<typeof configs> {
  return {
    async validate(ctx, next, prev) {
      if (prev && json(next.data) === json(prev.data)) return;
      const type = await ctx.resources.get('config-types').repo.get(ctx.tx, next.configTypeId);
      if (!type) throw referencedNotFound('configTypeId', 'config-types', next.configTypeId);
      const validate = validators.for(type);
      if (!validate(next.data)) {
        const problem = dataProblem(validate.errors, 'data');
        throw new ApiError('COULD_NOT_VALIDATE', `${problem.field} ${problem.reason}`, problem);
      }
    },
    /**
     * A config is taken off the services, edge routers and routers using it. One an identity chose
     * for a service (an override) is refused, as the established controller refuses it: the
     * override would silently stop applying.
     */
    async beforeDelete(ctx, prev) {
      const overrides = await overridesUsing(ctx.tx, prev.id);
      if (overrides > 0) {
        const used = `used by ${overrides} identity service-config override(s)`;
        throw new ApiError('CAN_NOT_DELETE_REFERENCED_ENTITY', `the config ${prev.id} is ${used}`, {
          code: 'CONFIG_IN_USE',
          message: used,
          data: { overrides },
        });
      }
      await takeOffUsers(ctx, prev.id);
    },
  };
}

// ---- services ------------------------------------------------------------------------------------

/** What a service or a router (edge router or not) is called in messages about its configs. */
const HOLDER = { service: { one: 'a service', many: 'services' }, router: { one: 'a router', many: 'routers' } } as const;

/**
 * The configs named for a service (target `service`) or a router (target `router`): each
 * existing, of a config type configuring that target, at most one of each type (a client reads one
 * config per type).
 */
export async function checkConfigsFor(tx: Tx, target: keyof typeof HOLDER, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  const rows = await tx
    .selectFrom('configs')
    .innerJoin('config_types', 'config_types.id', 'configs.config_type_id')
    .select(['configs.id as id', 'configs.config_type_id as typeId', 'config_types.name as typeName', 'config_types.target as target'])
    .where('configs.id', 'in', [...ids])
    .execute();
  const byId = new Map(rows.map((r) => [r.id as string, r]));
  const seenTypes = new Map<string, string>();
  const holder = HOLDER[target];
  for (const id of ids) {
    const row = byId.get(id);
    if (!row) throw referencedNotFound('configs', 'configs', id);
    if (row.target !== target) {
      throw fieldError('configs', `the config ${id} is of type ${String(row.typeName)}, which configures ${String(row.target)}s, not ${holder.many}`, id);
    }
    const other = seenTypes.get(row.typeId as string);
    if (other !== undefined) {
      throw fieldError('configs', `the configs ${other} and ${id} are both of type ${String(row.typeName)}; ${holder.one} has at most one config per type`, id);
    }
    seenTypes.set(row.typeId as string, id);
  }
}

/**
 * What a service answer carries for its caller, made by the Client API's read model (the service
 * list): given the caller, services, and the config types to show, each one's fields in order.
 */
export type ServiceFieldsForCaller = (
  caller: Caller,
  entities: readonly Entity[],
  choice: ConfigTypeChoice,
) => Promise<readonly Pick<CallerServiceFields, 'permissions' | 'config' | 'postureQueries'>[]>;

/**
 * `permissions`, `config` and `postureQueries` of a page of services, for the caller of the read (on
 * the Management API, the admin's own identity, as a client of that identity would see them): the
 * config types asked for by `configTypes`, else those of the caller's API session.
 */
function callerServiceFields(forCaller: ServiceFieldsForCaller) {
  return computed(ClientServiceFields, async (_ex, entities, answers, read) => {
    if (entities.length === 0) return;
    // Every route reading services names its caller; a read without one is a programming error.
    if (!read.caller) throw new Error('services are read for a caller');
    const fields = await forCaller(read.caller, entities, configTypeChoice(read.query));
    for (const [i, f] of fields.entries()) {
      Object.assign(answers[i]!, { permissions: f.permissions, config: f.config, postureQueries: f.postureQueries });
    }
  });
}

export function serviceBehaviour(forCaller: ServiceFieldsForCaller): ResourceBehaviour<typeof services> {
  return {
    async validate(ctx, next, prev) {
      if (next.terminatorStrategy === '') next.terminatorStrategy = DEFAULT_STRATEGY;
      const strategyChanged = !prev || next.terminatorStrategy !== prev.terminatorStrategy;
      if (strategyChanged && !(TERMINATOR_STRATEGIES as readonly unknown[]).includes(next.terminatorStrategy)) {
        throw fieldError('terminatorStrategy', `must be one of ${TERMINATOR_STRATEGIES.join(', ')}`, next.terminatorStrategy);
      }
      // configs is absent on a patch that leaves it alone; create and full update always carry it.
      if (Array.isArray(next.configs)) await checkConfigsFor(ctx.tx, 'service', next.configs);
    },
    async afterWrite(ctx, next) {
      if (!Array.isArray(next.configs)) return;
      await ctx.tx.deleteFrom(SERVICE_CONFIGS.table).where(SERVICE_ID, '=', next.id).execute();
      const configs = next.configs;
      if (configs.length > 0) {
        await ctx.tx
          .insertInto(SERVICE_CONFIGS.table)
          .values(configs.map((configId) => ({ [SERVICE_ID]: next.id, [CONFIG_ID]: configId })))
          .execute();
      }
    },
    computed: [serviceConfigIds, callerServiceFields(forCaller)],
  };
}

/** `configs` of a page of services: the ids of each one's configs. */
const serviceConfigIds = computed<typeof services>(
  { configs: Type.Array(Type.String(), { description: 'ids of the configs of the service, at most one per config type' }) },
  async (ex, entities, answers) => {
    if (entities.length === 0) return;
    const rows = await ex
      .selectFrom(SERVICE_CONFIGS.table)
      .select([`${SERVICE_ID} as serviceId`, `${CONFIG_ID} as configId`])
      .where(SERVICE_ID, 'in', entities.map((e) => e.id))
      .orderBy(SERVICE_ID)
      .orderBy(CONFIG_ID)
      .execute();
    const byService = new Map<string, string[]>();
    for (const r of rows) {
      const list = byService.get(r.serviceId as string) ?? [];
      list.push(r.configId as string);
      byService.set(r.serviceId as string, list);
    }
    for (const [i, e] of entities.entries()) answers[i]!.configs = byService.get(e.id) ?? [];
  },
);

// ---- identity service configs --------------------------------------------------------------------

export interface ServiceConfigPair {
  serviceId: string;
  configId: string;
}

export const MAX_SERVICE_CONFIG_PAIRS = 1000;

async function assertIdentity(ex: Executor, resources: Resources, identityId: string): Promise<void> {
  if (!(await resources.get('identities').repo.exists(ex, identityId))) throw notFound('identity', identityId);
}

/** An identity's service-config overrides: pairs with references, by service then config. */
export async function listIdentityServiceConfigs(resources: Resources, identityId: string): Promise<Answer[]> {
  const db = resources.store.db;
  await assertIdentity(db, resources, identityId);
  const rows = await db
    .selectFrom('identity_service_configs as isc')
    .innerJoin('services', 'services.id', 'isc.service_id')
    .innerJoin('configs', 'configs.id', 'isc.config_id')
    .innerJoin('config_types', 'config_types.id', 'configs.config_type_id')
    .select([
      'isc.service_id as serviceId',
      'isc.config_id as configId',
      'services.name as serviceName',
      'configs.name as configName',
      'configs.config_type_id as configTypeId',
      'config_types.name as configTypeName',
    ])
    .where('isc.identity_id', '=', identityId)
    .orderBy('isc.service_id')
    .orderBy('isc.config_id')
    .execute();
  return rows.map((r) => ({
    serviceId: r.serviceId,
    configId: r.configId,
    configTypeId: r.configTypeId,
    service: entityRef('services', r.serviceId as string, r.serviceName as string),
    config: entityRef('configs', r.configId as string, r.configName as string),
    configType: entityRef('config-types', r.configTypeId as string, r.configTypeName as string),
  }));
}

/**
 * Adds overrides: for each pair, the identity gets that config for that service, replacing the one
 * of the same config type it had. Every service and config must exist and the config must
 * configure services; two pairs for the same service and config type are refused.
 */
export async function associateIdentityServiceConfigs(
  resources: Resources,
  identityId: string,
  pairs: readonly ServiceConfigPair[],
  actor?: Actor,
): Promise<void> {
  await resources.write(async (ctx) => {
    await assertIdentity(ctx.tx, resources, identityId);
    await assertMayManage(ctx, identityId);
    if (pairs.length === 0) return;
    const before = await overridesOf(ctx, identityId);
    const serviceIds = [...new Set(pairs.map((p) => p.serviceId))];
    const configIds = [...new Set(pairs.map((p) => p.configId))];
    const services = new Set(
      (await ctx.tx.selectFrom('services').select('id').where('id', 'in', serviceIds).execute()).map((r) => r.id as string),
    );
    const configs = new Map(
      (
        await ctx.tx
          .selectFrom('configs')
          .innerJoin('config_types', 'config_types.id', 'configs.config_type_id')
          .select(['configs.id as id', 'configs.config_type_id as typeId', 'config_types.name as typeName', 'config_types.target as target'])
          .where('configs.id', 'in', configIds)
          .execute()
      ).map((r) => [r.id as string, r]),
    );
    const chosen = new Map<string, { index: number; configId: string }>();
    for (const [index, pair] of pairs.entries()) {
      if (!services.has(pair.serviceId)) throw referencedNotFound(`[${index}].serviceId`, 'services', pair.serviceId);
      const config = configs.get(pair.configId);
      if (!config) throw referencedNotFound(`[${index}].configId`, 'configs', pair.configId);
      if (config.target !== 'service') {
        throw fieldError(`[${index}].configId`, `the config is of type ${String(config.typeName)}, which does not configure services`, pair.configId);
      }
      const key = JSON.stringify([pair.serviceId, config.typeId]);
      const earlier = chosen.get(key);
      if (earlier && earlier.configId !== pair.configId) {
        throw fieldError(
          `[${index}].configId`,
          `item ${earlier.index} already names a config of type ${String(config.typeName)} for this service`,
          pair.configId,
        );
      }
      chosen.set(key, { index, configId: pair.configId });
    }
    for (const [key, { configId }] of chosen) {
      const [serviceId, typeId] = JSON.parse(key) as [string, string];
      await ctx.tx
        .deleteFrom('identity_service_configs')
        .where('identity_id', '=', identityId)
        .where('service_id', '=', serviceId)
        .where('config_id', 'in', ctx.tx.selectFrom('configs').select('id').where('config_type_id', '=', typeId))
        .execute();
      await ctx.tx
        .insertInto('identity_service_configs')
        .values({ identity_id: identityId, service_id: serviceId, config_id: configId })
        .execute();
    }
    await overridesChanged(ctx, identityId, before);
  }, actor);
}

/** Removes the named overrides (pairs that are not there are ignored); none named: all of them. */
export async function disassociateIdentityServiceConfigs(
  resources: Resources,
  identityId: string,
  pairs: readonly ServiceConfigPair[] | undefined,
  actor?: Actor,
): Promise<void> {
  await resources.write(async (ctx) => {
    await assertIdentity(ctx.tx, resources, identityId);
    await assertMayManage(ctx, identityId);
    const before = await overridesOf(ctx, identityId);
    const base = ctx.tx.deleteFrom('identity_service_configs').where('identity_id', '=', identityId);
    if (!pairs || pairs.length === 0) {
      await base.execute();
    } else {
      for (const pair of pairs) {
        await ctx.tx
          .deleteFrom('identity_service_configs')
          .where('identity_id', '=', identityId)
          .where('service_id', '=', pair.serviceId)
          .where('config_id', '=', pair.configId)
          .execute();
      }
    }
    await overridesChanged(ctx, identityId, before);
  }, actor);
}

/** An identity's overrides as pairs, in a stable order (for the audit log). */
async function overridesOf(ctx: WriteContext, identityId: string): Promise<ServiceConfigPair[]> {
  const rows = await ctx.tx
    .selectFrom('identity_service_configs')
    .select(['service_id', 'config_id'])
    .where('identity_id', '=', identityId)
    .orderBy('service_id')
    .orderBy('config_id')
    .execute();
  return rows.map((r) => ({ serviceId: String(r.service_id), configId: String(r.config_id) }));
}

/**
 * Announces a change of an identity's overrides. The identity's record holds none of them, so the
 * audit log gets the overrides themselves, before and after, in place of an image of the record.
 */
async function overridesChanged(ctx: WriteContext, identityId: string, before: ServiceConfigPair[]): Promise<void> {
  ctx.changed({ collection: 'identities', kind: 'update', id: identityId }, { audited: false });
  const identity = await ctx.tx.selectFrom('identities').select('name').where('id', '=', identityId).executeTakeFirst();
  ctx.audit({
    action: 'update',
    entityType: 'identities',
    entityId: identityId,
    entityName: identity ? String(identity.name) : null,
    before: { serviceConfigs: before },
    after: { serviceConfigs: await overridesOf(ctx, identityId) },
  });
}

// ---- seeding -------------------------------------------------------------------------------------

/**
 * The config types every controller starts with, by fixed id. Missing ones are inserted; existing
 * ones are brought to this version's schema (they are protected, so only an upgrade changes them;
 * stored configs are not re-checked then, so a seeded schema only ever grows more permissive).
 * A type an operator created under one of these names before it was seeded is left alone.
 */
export async function seedConfigTypes(ctx: WriteContext): Promise<void> {
  const repo = ctx.resources.get('config-types').repo;
  for (const seeded of SEEDED_CONFIG_TYPES) {
    const existing = await repo.get(ctx.tx, seeded.id);
    if (existing) {
      if (json(existing.schema) !== json(seeded.schema) || existing.name !== seeded.name || existing.target !== seeded.target) {
        await ctx.update('config-types', seeded.id, {
          name: seeded.name,
          schema: seeded.schema,
          target: seeded.target,
          updatedAt: ctx.now,
        });
      }
      continue;
    }
    const sameName = await ctx.tx.selectFrom('config_types').select('id').where('name', '=', seeded.name).executeTakeFirst();
    if (sameName) continue;
    await ctx.insert('config-types', {
      id: seeded.id,
      createdAt: ctx.now,
      updatedAt: ctx.now,
      tags: {},
      name: seeded.name,
      schema: seeded.schema,
      target: seeded.target,
    });
  }
}
