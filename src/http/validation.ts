// Schema validation of requests. Bodies are validated without type coercion (a string is never
// silently a number); path and query parameters arrive as strings and are coerced.
import { Ajv, type Options } from 'ajv';
import formatsPlugin from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

const addFormats = formatsPlugin as unknown as (ajv: Ajv) => Ajv;

const common: Options = { allErrors: false, strict: false, verbose: true, useDefaults: true };

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const body = addFormats(new Ajv({ ...common, coerceTypes: false }));
  const params = addFormats(new Ajv({ ...common, coerceTypes: 'array' }));
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? body : params;
    return ajv.compile(schema as object) as ReturnType<FastifySchemaCompiler<unknown>>;
  };
}
