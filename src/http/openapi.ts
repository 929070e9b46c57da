// The OpenAPI document of an Edge API: @fastify/swagger generates it from the route schemas, and this
// completes it so that code generators can use it.
// - Every schema carrying a `title` (the resources' create, update, patch, detail, list and their
//   envelopes, named in kit.ts; the shared shapes) is a named component, referenced with `$ref` from
//   the operations; an answer or body without a name takes its operation's. Two different schemas
//   under one name fail the document, loudly.
// - Every operation declares its error answers (the error envelope): 400 when it takes input, 401 when
//   it takes a credential, 404 when its path names something, and a default for anything else.
// - The security schemes — the `overlay-session` header and OIDC bearer access tokens — are declared
//   and applied per operation as its route's requirement says; public operations have none.
import { Type, type TSchema } from '@sinclair/typebox';
import type { FastifyDynamicSwaggerOptions, SwaggerTransform } from '@fastify/swagger';
import { SESSION, type RouteAuth } from './auth-requirements.js';
import { MetaSchema } from './resource-routes.js';

type Json = Record<string, unknown>;

export const SECURITY_SCHEMES = {
  overlaySession: {
    type: 'apiKey',
    in: 'header',
    name: 'overlay-session',
    description: 'the token of an API session, answered by authenticate (header and body)',
  },
  bearer: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'an OIDC access token issued by this controller',
  },
} as const;

/** Either credential admits a caller. */
const CREDENTIALS = [{ overlaySession: [] }, { bearer: [] }];

export const ErrorEnvelopeSchema = Type.Object(
  {
    error: Type.Object(
      {
        code: Type.String({ description: 'the error code (behaviour.md §2)' }),
        message: Type.String(),
        cause: Type.Optional(
          Type.Object(
            {
              field: Type.Optional(Type.String()),
              reason: Type.Optional(Type.String()),
              value: Type.Optional(Type.Unknown()),
              code: Type.Optional(Type.String()),
              message: Type.Optional(Type.String()),
            },
            { additionalProperties: true, title: 'apiErrorCause' },
          ),
        ),
        requestId: Type.String(),
      },
      { title: 'apiError' },
    ),
    meta: MetaSchema,
  },
  { title: 'apiErrorEnvelope' },
);

/** A copy of `schema` named `title` in the documents. */
export function named<T extends TSchema>(schema: T, title: string): T {
  return { ...schema, title };
}

function errorAnswer(description: string): Json {
  return { ...ErrorEnvelopeSchema, 'x-response-description': description };
}

/** A body that may be absent: `anyOf [body, null]`; answers the body's own schema. */
function optionalBody(body: unknown): Json | undefined {
  const anyOf = (body as Json | undefined)?.anyOf;
  if (!Array.isArray(anyOf) || anyOf.length !== 2) return undefined;
  const rest = (anyOf as Json[]).filter((s) => s.type !== 'null');
  return rest.length === 1 ? rest[0] : undefined;
}

/** The @fastify/swagger options of one Edge API's document. */
export function documentOptions(title: string, version: string, address: string): FastifyDynamicSwaggerOptions {
  // Operations whose body may be absent: @fastify/swagger marks every body required.
  const optionalBodies = new Set<string>();

  const transform: SwaggerTransform = ({ schema, url, route }) => {
    if (!schema) return { schema, url };
    const auth: RouteAuth = route.config?.auth ?? SESSION;
    const out: Json = { ...schema };
    out.security = auth.kind === 'none' ? [] : CREDENTIALS;
    const response: Json = { ...(schema.response as Json | undefined) };
    if (schema.body !== undefined || schema.querystring !== undefined || schema.params !== undefined || schema.headers !== undefined) {
      response['400'] ??= errorAnswer('the request is invalid: a field, a parameter or the body (COULD_NOT_VALIDATE, COULD_NOT_PARSE_BODY, ...)');
    }
    if (auth.kind !== 'none' || schema.operationId === 'authenticate') {
      response['401'] ??= errorAnswer('no valid credential, or one not permitted this operation (UNAUTHORIZED, INVALID_AUTH)');
    }
    if (url.includes(':')) response['404'] ??= errorAnswer('nothing with this id (NOT_FOUND)');
    response.default ??= errorAnswer('any other failure, with its code');
    out.response = response;
    const body = optionalBody(schema.body);
    if (body !== undefined) {
      out.body = body;
      if (schema.operationId !== undefined) optionalBodies.add(schema.operationId);
    }
    return { schema: out, url };
  };

  return {
    openapi: {
      openapi: '3.0.3',
      info: { title, version },
      servers: [{ url: `https://${address}` }],
      components: { securitySchemes: SECURITY_SCHEMES },
    },
    transform,
    // A tree without shared parts, so its YAML form has no anchors and aliases (which YAML readers
    // refuse in numbers, as a defence against alias bombs).
    transformObject: ({ openapiObject }: { openapiObject: Json }) =>
      JSON.parse(JSON.stringify(completeDocument(openapiObject as Json, optionalBodies))) as Json,
  } as unknown as FastifyDynamicSwaggerOptions;
}

/** Names the schemas of the document (see the header) and marks the bodies that may be absent. */
export function completeDocument(document: Json, optionalBodies: ReadonlySet<string> = new Set()): Json {
  const components = new SchemaComponents();
  for (const { operation } of operationsOf(document)) {
    const id = typeof operation.operationId === 'string' ? operation.operationId : undefined;
    for (const slot of schemaSlots(operation)) {
      const fallback = id === undefined ? undefined : slot.kind === 'response' ? `${id}Envelope` : slot.kind === 'body' ? `${id}Body` : undefined;
      slot.set(components.reference(slot.schema, fallback));
    }
    const requestBody = operation.requestBody as Json | undefined;
    if (requestBody && id !== undefined && optionalBodies.has(id)) requestBody.required = false;
  }
  const existing = ((document.components as Json | undefined) ?? {}) as Json;
  document.components = { ...existing, schemas: { ...(existing.schemas as Json | undefined), ...components.schemas } };
  return document;
}

interface OperationEntry {
  path: string;
  method: string;
  operation: Json;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

export function operationsOf(document: Json): OperationEntry[] {
  const out: OperationEntry[] = [];
  for (const [path, item] of Object.entries((document.paths ?? {}) as Record<string, Json>)) {
    for (const method of METHODS) {
      const operation = item[method] as Json | undefined;
      if (operation) out.push({ path, method, operation });
    }
  }
  return out;
}

interface Slot {
  kind: 'body' | 'response' | 'other';
  schema: Json;
  set(schema: Json): void;
}

/** Where an operation holds schemas: its body, its answers, its parameters. */
function schemaSlots(operation: Json): Slot[] {
  const slots: Slot[] = [];
  const media = (kind: Slot['kind'], content: unknown) => {
    for (const m of Object.values((content ?? {}) as Record<string, Json>)) {
      if (m.schema) slots.push({ kind, schema: m.schema as Json, set: (s) => (m.schema = s) });
    }
  };
  media('body', (operation.requestBody as Json | undefined)?.content);
  for (const [status, answer] of Object.entries((operation.responses ?? {}) as Record<string, Json>)) {
    // Only success answers take the operation's name; errors are the error envelope, always JSON
    // (whatever the operation's success answers are).
    if (/^2/.test(status)) media('response', answer.content);
    else {
      const json = (answer.content as Record<string, Json> | undefined)?.['application/json'] ?? Object.values((answer.content ?? {}) as Record<string, Json>)[0];
      if (json) answer.content = { 'application/json': json };
      media('other', answer.content);
    }
  }
  for (const p of (operation.parameters ?? []) as Json[]) {
    if (p.schema) slots.push({ kind: 'other', schema: p.schema as Json, set: (s) => (p.schema = s) });
  }
  return slots;
}

const SCHEMA_MAPS = ['properties', 'patternProperties'];
const SCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf'];
const SCHEMA_ONES = ['items', 'additionalProperties', 'not'];

/** Each sub-schema of a schema, and how to replace it. */
function subSchemas(schema: Json): { schema: Json; set(s: Json): void }[] {
  const out: { schema: Json; set(s: Json): void }[] = [];
  for (const key of SCHEMA_MAPS) {
    const map = schema[key] as Record<string, Json> | undefined;
    if (map && typeof map === 'object') {
      for (const name of Object.keys(map)) out.push({ schema: map[name]!, set: (s) => (map[name] = s) });
    }
  }
  for (const key of SCHEMA_LISTS) {
    const list = schema[key] as Json[] | undefined;
    if (Array.isArray(list)) list.forEach((s, i) => out.push({ schema: s, set: (n) => (list[i] = n) }));
  }
  for (const key of SCHEMA_ONES) {
    const one = schema[key];
    if (one && typeof one === 'object' && !Array.isArray(one)) out.push({ schema: one as Json, set: (s) => (schema[key] = s) });
  }
  return out;
}

/**
 * A union of single-value enums of one type (TypeBox's union of literals) as the one enum it is,
 * which generators turn into an enum type.
 */
function enumOfLiterals(schema: Json): void {
  const members = schema.anyOf;
  if (!Array.isArray(members) || members.length === 0 || schema.type !== undefined || schema.enum !== undefined) return;
  const type = (members[0] as Json).type;
  const literal = (m: Json) => m.type === type && Array.isArray(m.enum) && m.enum.length === 1 && Object.keys(m).every((k) => k === 'type' || k === 'enum' || k === 'description');
  if (typeof type !== 'string' || !(members as Json[]).every(literal)) return;
  delete schema.anyOf;
  schema.type = type;
  schema.enum = (members as Json[]).map((m) => (m.enum as unknown[])[0]);
}

/** JSON with sorted keys: equal schemas, equal text. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as Json)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Json)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** What a schema accepts: itself without its name and description. */
function content(schema: Json): Json {
  const { title: _title, description: _description, ...rest } = schema;
  return rest;
}

const COMPONENT_NAME = /^[a-zA-Z0-9._-]+$/;

class SchemaComponents {
  readonly schemas: Record<string, Json> = {};

  /** `schema` with every named part replaced by its `$ref`; itself too when named, or given a fallback name. */
  reference(schema: Json, fallback?: string): Json {
    if (typeof schema.$ref === 'string') return schema;
    for (const sub of subSchemas(schema)) sub.set(this.reference(sub.schema));
    enumOfLiterals(schema);
    const name = typeof schema.title === 'string' ? schema.title : schema.type === 'object' ? fallback : undefined;
    if (name === undefined) return schema;
    // `anyOf [named, null]` arrives merged into one nullable schema: the component is the named
    // schema, the place that also takes null says so beside the reference.
    const { nullable, ...own } = schema;
    this.add(name, own);
    const ref = { $ref: `#/components/schemas/${name}` };
    return nullable === true ? { anyOf: [ref, { type: 'object', nullable: true, enum: [null] }] } : ref;
  }

  /**
   * Adds a component, or checks that it is the one already under this name. A description is the
   * place's (a field described where it is used): the component keeps it only where every use agrees.
   */
  private add(name: string, schema: Json): void {
    if (!COMPONENT_NAME.test(name)) throw new Error(`OpenAPI: ${name} is not a component name`);
    const known = this.schemas[name];
    if (known === undefined) {
      this.schemas[name] = { ...schema, title: name };
      return;
    }
    if (canonical(content(known)) !== canonical(content(schema))) {
      throw new Error(`OpenAPI: two different schemas are named ${name}: ${canonical(known)} and ${canonical(schema)}`);
    }
    if (known.description !== schema.description) delete known.description;
  }
}
