// Schema validation of requests. Bodies are validated without type coercion (a string is never
// silently a number); path and query parameters arrive as strings and are coerced. Before any
// schema runs, the input bounds no schema expresses are checked (input-bounds.ts).
import { Ajv, type Options, type ValidateFunction } from 'ajv';
import formatsPlugin from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { inputIssue } from './input-bounds.js';

const addFormats = formatsPlugin as unknown as (ajv: Ajv) => Ajv;

const common: Options = { allErrors: false, strict: false, verbose: true, useDefaults: true };

/** The schema's validator behind the input bounds; keeps what Fastify reads off an ajv validator. */
function bounded(validate: ValidateFunction, keys: boolean): ValidateFunction {
  const wrapped = ((data: unknown, cxt?: Parameters<ValidateFunction>[1]) => {
    const issue = inputIssue(data, { keys });
    if (issue) {
      wrapped.errors = [issue];
      return false;
    }
    const valid = validate(data, cxt);
    wrapped.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  wrapped.schema = validate.schema;
  wrapped.schemaEnv = validate.schemaEnv;
  return wrapped;
}

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  const body = addFormats(new Ajv({ ...common, coerceTypes: false }));
  const params = addFormats(new Ajv({ ...common, coerceTypes: 'array' }));
  return ({ schema, httpPart }) => {
    const compile = (): ValidateFunction => {
      const ajv = httpPart === 'body' ? body : params;
      const validate = ajv.compile(schema as object);
      // Headers are Latin-1 on the wire and named by the client: nothing here applies to them.
      return httpPart === 'headers' ? validate : bounded(validate, httpPart === 'body');
    };
    return lazily(compile) as ReturnType<FastifySchemaCompiler<unknown>>;
  };
}

/**
 * A validator compiled at its first use: the controller has hundreds of route schemas, and compiling
 * them all before the first answer costs about a second of start-up. Fastify reads `errors` off it.
 */
function lazily(compile: () => ValidateFunction): ValidateFunction {
  let compiled: ValidateFunction | undefined;
  const validator = ((data: unknown, cxt?: Parameters<ValidateFunction>[1]) => {
    compiled ??= compile();
    const valid = compiled(data, cxt);
    validator.errors = compiled.errors;
    return valid;
  }) as ValidateFunction;
  return validator;
}
