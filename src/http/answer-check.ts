// Where answers are checked (tests; AppOptions.checkAnswers), each JSON answer of an Edge API route is
// held to the response schema the route declares for its status before it is serialized: a field
// the schema does not declare (the serializer would drop it silently), one it requires that is
// missing, or a value of another type fails the request loudly, naming the route and the field. A
// controller in service does not pay for the check nor fail an answer on it.
import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyReply, FastifyRequest } from 'fastify';

type Json = Record<string, unknown>;

declare module 'fastify' {
  interface FastifyReply {
    /** reply.serialize, after the answer check where answers are checked. */
    serializeAnswer(payload: unknown): string;
  }
}

/** `schema` with every object that does not say otherwise closed to fields it does not declare. */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    out[key] = key === 'properties' || key === 'patternProperties' ? mapValues(value as Json, closed) : key === 'enum' || key === 'const' ? value : closed(value);
  }
  if (out.type === 'object' && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

function mapValues(map: Json, fn: (v: unknown) => unknown): Json {
  return Object.fromEntries(Object.entries(map).map(([k, v]) => [k, fn(v)]));
}

/** The schema a route declares for an answer of this status. */
function declared(request: FastifyRequest, status: number): object | undefined {
  const response = request.routeOptions.schema?.response as Record<string, object> | undefined;
  if (!response) return undefined;
  return response[status] ?? response[`${String(status)[0]}xx`] ?? response.default;
}

export type AnswerCheck = (request: FastifyRequest, reply: FastifyReply, payload: unknown) => void;

export function answerCheck(): AnswerCheck {
  // Formats are the serializer's business as much as types are not: it writes any string.
  const ajv = new Ajv({ strict: false, allErrors: false, validateFormats: false });
  const validators = new WeakMap<object, ValidateFunction>();
  return (request, reply, payload) => {
    if (!payload || typeof payload !== 'object' || Buffer.isBuffer(payload)) return;
    const schema = declared(request, reply.statusCode);
    if (!schema) return;
    let validate = validators.get(schema);
    if (!validate) validators.set(schema, (validate = ajv.compile(closed(JSON.parse(JSON.stringify(schema))) as Json)));
    if (validate(payload)) return;
    const e = validate.errors?.[0];
    const field = e?.keyword === 'additionalProperties' ? `${e.instancePath}/${String(e.params.additionalProperty)}` : (e?.instancePath ?? '');
    throw new Error(
      `${request.method} ${request.routeOptions.url ?? request.url} ${reply.statusCode}: the answer does not match its schema at ${field || '(root)'}: ${e?.message ?? 'invalid'}`,
    );
  };
}
