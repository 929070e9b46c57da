// The generic list / detail / create / update / patch / delete routes of a resource, derived from
// its definition. Handlers only translate HTTP to the resource service and back.
import { Type, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  ALL_OPERATIONS,
  createSchema,
  LinksSchema,
  pascalCase,
  patchSchema,
  permissionFor,
  schemaNames,
  updateSchema,
  type FilterSpec,
  type Operation,
  type ResourceDef,
} from '../resources/kit.js';
import type { Actor, ReadOptions, ResourceService } from '../domain/resources.js';
import { callerOf } from './credentials.js';
import type { SqlFlavor } from '../query/flavor.js';
import type { ListQuery } from '../store/repository.js';
import { EMPTY, envelope } from './envelope.js';
import { parseList, listMeta } from './list.js';
import { routeAuth, type Action } from './auth-requirements.js';

/** What a read takes from its request: the query (computed fields may answer what it asks) and the caller. */
export function readOptionsOf(request: FastifyRequest): ReadOptions {
  const query = request.query as Record<string, unknown>;
  const identity = request.principal?.identity;
  return identity ? { query, caller: callerOf(request), reader: identity } : { query };
}

/** What the caller's filters of a list may name. */
export function filterOf(request: FastifyRequest, service: ResourceService): FilterSpec {
  const identity = request.principal?.identity;
  return identity ? service.filterFor(identity) : service.filter;
}

/** The caller of a write, when the route had one. */
export function actorOf(request: FastifyRequest): Actor | undefined {
  const identity = request.principal?.identity;
  return identity ? { id: identity.id, isAdmin: identity.isAdmin } : undefined;
}

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 255 }) });

export const ListQuerySchema = Type.Object(
  {
    limit: Type.Optional(Type.String({ description: 'page size, default 10 (also for 0), at most 500 (larger is 500); -1: every row' })),
    offset: Type.Optional(Type.String({ description: 'rows to skip, default 0, at most 100000 (larger is 100000)' })),
    filter: Type.Optional(Type.String({ description: 'filter expression (see the filter language)' })),
    sort: Type.Optional(Type.String({ description: 'sort, e.g. "name desc,createdAt"' })),
  },
  { additionalProperties: true },
);

/** `meta` of every envelope (behaviour.md §1); open, as later versions may add to it. */
export const MetaSchema = Type.Object(
  {
    apiVersion: Type.String(),
    apiEnrollmentVersion: Type.String(),
    pagination: Type.Optional(Type.Object({ limit: Type.Integer(), offset: Type.Integer(), totalCount: Type.Integer() }, { title: 'pagination' })),
    filterableFields: Type.Optional(Type.Array(Type.String())),
  },
  { additionalProperties: true, title: 'meta' },
);

/** `{data, meta}`; `title` names it in the OpenAPI documents. */
export function dataEnvelopeSchema(data: TSchema, title?: string): TSchema {
  return Type.Object({ data, meta: MetaSchema }, title !== undefined ? { title } : {});
}

/** The answer of a list of a resource (its own list, a related list, ...). */
export function listEnvelopeSchema(def: ResourceDef, read: TSchema): TSchema {
  const names = schemaNames(def);
  return dataEnvelopeSchema(Type.Array(read, { title: names.list }), names.listEnvelope);
}

/** The answer of one record of a resource. */
export function detailEnvelopeSchema(def: ResourceDef, read: TSchema): TSchema {
  return dataEnvelopeSchema(read, schemaNames(def).detailEnvelope);
}

/** The answer of a create: the new record's id and link. */
export const CreatedSchema = dataEnvelopeSchema(Type.Object({ id: Type.String(), _links: LinksSchema }, { title: 'createLocation' }), 'createEnvelope');
/** The answer of a write that returns nothing (delete, patch, full update, ...). */
export const EmptySchema = dataEnvelopeSchema(Type.Object({}, { title: 'empty' }), 'emptyEnvelope');

const ACTION: Record<Operation, Action> = {
  list: 'read',
  get: 'read',
  create: 'create',
  update: 'update',
  patch: 'update',
  delete: 'delete',
};

export function operationId(service: ResourceService, op: Operation): string {
  const def = service.def;
  const custom = def.operationIds?.[op];
  if (custom) return custom;
  const verb = { list: 'list', get: 'detail', create: 'create', update: 'update', patch: 'patch', delete: 'delete' }[
    op
  ];
  return `${verb}${pascalCase(op === 'list' ? def.name : def.label)}`;
}

export interface ResourceRouteOptions {
  operations?: readonly Operation[];
  /** Extra list query parameters (documented), e.g. roleFilter. */
  listQueryExtra?: Record<string, TSchema>;
  /** Narrows a list before the filter from its query (roleFilter and the like); undefined: no narrowing. */
  listScope?: (query: Record<string, unknown>) => Promise<ListQuery['scope']>;
}

export function registerResourceRoutes(
  server: FastifyInstance,
  service: ResourceService,
  flavor: SqlFlavor,
  options: ResourceRouteOptions = {},
): void {
  // Request parts typed by the route schemas, which have checked them before a handler runs.
  const app = server.withTypeProvider<TypeBoxTypeProvider>();
  const def = service.def;
  const ops = new Set(options.operations ?? def.operations ?? ALL_OPERATIONS);
  const base = `/${def.name}`;
  const read = service.read;
  const tags = [def.name];
  const common = (op: Operation) => ({
    config: { auth: routeAuth(permissionFor(def, ACTION[op]), ACTION[op]) },
  });

  if (ops.has('list')) {
    app.get(base, {
      ...common('list'),
      schema: {
        operationId: operationId(service, 'list'),
        tags,
        querystring: options.listQueryExtra
          ? Type.Composite([ListQuerySchema, Type.Object(options.listQueryExtra)], { additionalProperties: true })
          : ListQuerySchema,
        response: { 200: listEnvelopeSchema(def, read) },
      },
      handler: async (request) => {
        const query = request.query;
        const filter = filterOf(request, service);
        const list = parseList(query, filter, flavor);
        const scope = await options.listScope?.(query);
        const { items, total } = await service.list(scope ? { ...list.query, scope } : list.query, undefined, readOptionsOf(request));
        return envelope(items, listMeta(list, total, filter));
      },
    });
  }
  if (ops.has('get')) {
    app.get(`${base}/:id`, {
      ...common('get'),
      schema: {
        operationId: operationId(service, 'get'),
        tags,
        params: IdParams,
        response: { 200: detailEnvelopeSchema(def, read) },
      },
      handler: async (request) => envelope(await service.get(request.params.id, undefined, readOptionsOf(request))),
    });
  }
  if (ops.has('create')) {
    app.post(base, {
      ...common('create'),
      schema: {
        operationId: operationId(service, 'create'),
        tags,
        body: createSchema(def),
        response: { 201: CreatedSchema },
      },
      handler: async (request, reply) => {
        const entity = await service.create(request.body, actorOf(request));
        void reply.code(201);
        return envelope({ id: entity.id, _links: { self: { href: `./${def.name}/${entity.id}` } } });
      },
    });
  }
  if (ops.has('update')) {
    app.put(`${base}/:id`, {
      ...common('update'),
      schema: {
        operationId: operationId(service, 'update'),
        tags,
        params: IdParams,
        body: updateSchema(def),
        response: { 200: EmptySchema },
      },
      handler: async (request) => {
        await service.update(request.params.id, request.body, actorOf(request));
        return envelope(EMPTY);
      },
    });
  }
  if (ops.has('patch')) {
    app.patch(`${base}/:id`, {
      ...common('patch'),
      schema: {
        operationId: operationId(service, 'patch'),
        tags,
        params: IdParams,
        body: patchSchema(def),
        response: { 200: EmptySchema },
      },
      handler: async (request) => {
        await service.patch(request.params.id, request.body, actorOf(request));
        return envelope(EMPTY);
      },
    });
  }
  if (ops.has('delete')) {
    app.delete(`${base}/:id`, {
      ...common('delete'),
      schema: {
        operationId: operationId(service, 'delete'),
        tags,
        params: IdParams,
        response: { 200: EmptySchema },
      },
      handler: async (request) => {
        await service.delete(request.params.id, actorOf(request));
        return envelope(EMPTY);
      },
    });
  }
}
