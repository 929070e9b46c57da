// Answers are serialized by Fastify's own compiler (fast-json-stringify, which also drops what a
// response schema does not name), but each schema is compiled at its first use instead of before the
// first answer: with hundreds of routes per listener, compiling them all up front cost about a second
// of start-up. The compiler is taken from Fastify's own dependencies, so it is the version Fastify
// would use by default.
import { createRequire } from 'node:module';
import type { FastifyServerOptions } from 'fastify';

type Serialize = (data: unknown) => string;
type RouteSchema = { schema: unknown; method?: string; url?: string; httpStatus?: string; contentType?: string };
type SerializerFactory = (externalSchemas: unknown, serializerOpts: unknown) => (route: RouteSchema) => Serialize;

const fromFastify = createRequire(createRequire(import.meta.url).resolve('fastify'));
const { SerializerSelector } = fromFastify('@fastify/fast-json-stringify-compiler') as { SerializerSelector: () => SerializerFactory };

/** Fastify's schema controller with its default serializer compiler, made lazy per route and status. */
export function lazySerializers(): NonNullable<FastifyServerOptions['schemaController']> {
  const buildDefault = SerializerSelector();
  const buildSerializer: SerializerFactory = (externalSchemas, serializerOpts) => {
    const compile = buildDefault(externalSchemas, serializerOpts);
    return (route) => {
      let serialize: Serialize | undefined;
      return (data) => (serialize ??= compile(route))(data);
    };
  };
  return { compilersFactory: { buildSerializer } } as NonNullable<FastifyServerOptions['schemaController']>;
}
