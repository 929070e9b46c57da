// The OpenAPI documents of both Edge APIs are fit for code generators: each passes an OpenAPI
// validator (@readme/openapi-parser) and a generator (openapi-typescript), whose TypeScript compiles
// and has a named type for every resource shape; every resource operation refers to its named
// schemas; every operation declares its success and error answers; and the security each operation
// declares is what the server asks for (an operation answers 401 without a credential exactly when
// it declares one). The YAML form is the same document.
import { validate, compileErrors } from '@readme/openapi-parser';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_OPERATIONS, schemaNames, type Operation } from '../src/resources/kit.js';
import { operationId } from '../src/http/resource-routes.js';
import type { ResourceService } from '../src/domain/resources.js';
import { ADMIN_ENV, CLIENT, MGMT, startTestController, type TestController } from './helpers.js';

type Json = Record<string, any>;

const APIS = [
  { name: 'client', base: CLIENT, spec: 'edge-client' },
  { name: 'management', base: MGMT, spec: 'edge-management' },
] as const;

let t: TestController;
const documents: Record<string, Json> = {};

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  for (const api of APIS) {
    const res = await t.inject({ method: 'GET', url: `${api.base}/specs/${api.spec}/spec` });
    expect(res.statusCode, res.body).toBe(200);
    documents[api.name] = JSON.parse(res.body);
  }
});
afterAll(async () => {
  await t.close();
});

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

function operations(doc: Json): { path: string; method: string; op: Json }[] {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ path, method, op: item[method] as Json })),
  );
}

function byOperationId(doc: Json, id: string): { path: string; method: string; op: Json } | undefined {
  return operations(doc).find((o) => o.op.operationId === id);
}

const ref = (name: string) => `#/components/schemas/${name}`;
const successOf = (op: Json): [string, Json] => Object.entries(op.responses as Record<string, Json>).find(([status]) => /^2/.test(status))!;
const jsonSchemaOf = (answer: Json | undefined) => answer?.content?.['application/json']?.schema as Json | undefined;

/** The generic operations of a resource an API serves, found by their operation ids. */
/**
 * Resources the Client API shows in a narrower shape of their own (a view for clients, not the
 * resource's detail): external JWT signers show only what starts a login at the provider.
 */
const CLIENT_VIEWS = new Set(['external-jwt-signers']);

function servedOperations(doc: Json, service: ResourceService): Operation[] {
  if (CLIENT_VIEWS.has(service.def.name) && isClientDocument(doc)) return [];
  return ALL_OPERATIONS.filter((op) => (service.def.operations ?? ALL_OPERATIONS).includes(op)).filter((op) => {
    const found = byOperationId(doc, operationId(service, op));
    return found !== undefined && found.path.endsWith(op === 'list' || op === 'create' ? `/${service.def.name}` : `/${service.def.name}/{id}`);
  });
}

function isClientDocument(doc: Json): boolean {
  return Object.keys(doc.paths as Json).some((path) => path.startsWith('/edge/client/'));
}

describe.each(APIS)('the $name API document', (api) => {
  const doc = () => documents[api.name]!;

  it('is valid OpenAPI 3 for @readme/openapi-parser', async () => {
    const result = await validate(structuredClone(doc()) as never);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    expect(result.specification).toBe('OpenAPI');
    expect(result.warnings).toEqual([]);
  });

  it('is served as the same document in YAML', async () => {
    const res = await t.inject({ method: 'GET', url: `${api.base}/specs/${api.spec}/spec`, headers: { accept: 'text/yaml' } });
    expect(res.headers['content-type']).toMatch(/^text\/yaml/);
    expect(parseYaml(res.body)).toEqual(doc());
  });

  it('declares the security schemes: the overlay-session header and OIDC bearer tokens', () => {
    expect(doc().components.securitySchemes).toEqual({
      overlaySession: expect.objectContaining({ type: 'apiKey', in: 'header', name: 'overlay-session' }),
      bearer: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    });
  });

  it('gives every operation a unique id, a success answer with its schema and the error answers it can give', () => {
    const ids = operations(doc()).map((o) => o.op.operationId);
    expect(ids.every((id) => typeof id === 'string' && id !== '')).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, method, op } of operations(doc())) {
      const what = `${method} ${path}`;
      const [, success] = successOf(op);
      const content = Object.values(success.content ?? {}) as Json[];
      expect(content.length, what).toBeGreaterThan(0);
      for (const media of content) expect(media.schema, what).toBeDefined();
      const error = { $ref: ref('apiErrorEnvelope') };
      expect(jsonSchemaOf(op.responses.default), what).toEqual(error);
      if (op.parameters?.length || op.requestBody) expect(jsonSchemaOf(op.responses['400']), what).toEqual(error);
      if (op.security.length > 0) expect(jsonSchemaOf(op.responses['401']), what).toEqual(error);
      if (path.includes('{')) expect(jsonSchemaOf(op.responses['404']), what).toEqual(error);
    }
  });

  it('names operations as the interface does: an acronym is a word (ExternalJwtSigner), but where it names one otherwise', () => {
    const ids = operations(doc()).map((o) => o.op.operationId as string);
    const asNamed = ['getCurrentAPISession', 'listNetworkJWTs', 'listAPISessions', 'detailAPISessions', 'deleteAPISessions'];
    expect(ids.filter((id) => /[A-Z]{2}/.test(id) && !asNamed.includes(id))).toEqual([]);
    if (api.name === 'management') {
      expect(ids).toEqual(expect.arrayContaining(['createExternalJwtSigner', 'detailExternalJwtSigner', 'updateExternalJwtSigner', 'patchExternalJwtSigner', 'deleteExternalJwtSigner']));
    }
  });

  it('declares security on exactly the operations that refuse a caller without a credential', async () => {
    const expected = { overlaySession: [], bearer: [] };
    for (const { path, method, op } of operations(doc())) {
      const url = path.replace(/\{[^}]+\}/g, 'openapi-no-such-id');
      const res = await t.inject({ method: method.toUpperCase() as 'GET', url });
      const what = `${method} ${path}: ${res.statusCode}`;
      // authenticate and token enrollment take their own credentials (a password, an external JWT).
      if (res.statusCode === 401 && op.operationId !== 'authenticate' && op.operationId !== 'enrollToken') {
        expect(op.security, what).toEqual([{ overlaySession: [] }, { bearer: [] }]);
        expect(Object.assign({}, ...op.security), what).toEqual(expected);
      } else {
        expect(op.security, what).toEqual([]);
      }
    }
  });

  it('refers every generic operation of a resource to its named schemas', () => {
    let checked = 0;
    for (const service of t.app.core.resources.all()) {
      const names = schemaNames(service.def);
      for (const op of servedOperations(doc(), service)) {
        const found = byOperationId(doc(), operationId(service, op))!;
        const what = `${found.method} ${found.path}`;
        const body = jsonSchemaOf(found.op.requestBody);
        const [, success] = successOf(found.op);
        const answer = jsonSchemaOf(success);
        const expected: Record<Operation, [string | undefined, string]> = {
          list: [undefined, names.listEnvelope],
          get: [undefined, names.detailEnvelope],
          create: [names.create, 'createEnvelope'],
          update: [names.update, 'emptyEnvelope'],
          patch: [names.patch, 'emptyEnvelope'],
          delete: [undefined, 'emptyEnvelope'],
        };
        const [bodyName, answerName] = expected[op];
        if (bodyName !== undefined) expect(body, what).toEqual({ $ref: ref(bodyName) });
        expect(answer, what).toEqual({ $ref: ref(answerName) });
        checked++;
      }
      // The detail and the list of a resource are components whenever one of its reads is served.
      const schemas = doc().components.schemas as Json;
      if (servedOperations(doc(), service).some((op) => op === 'list')) {
        expect(schemas[names.listEnvelope].properties.data, names.listEnvelope).toEqual({ $ref: ref(names.list) });
        expect(schemas[names.list].items, names.list).toEqual({ $ref: ref(names.detail) });
      }
    }
    expect(checked).toBeGreaterThan(api.name === 'client' ? 2 : 80);
  });

  it('is read by openapi-typescript into TypeScript that compiles and names every resource shape', async () => {
    const source = astToString(await openapiTS(structuredClone(doc()) as never, { rootTypes: true, rootTypesNoSchemaPrefix: true, silent: true }));
    expect(compileErrors_(source)).toEqual([]);
    const exported = exportedTypes(source);
    const schemas = Object.keys(doc().components.schemas as Json);
    // Every component is a root type of the generated code (named in PascalCase).
    for (const name of schemas) expect(exported, name).toContain(name.charAt(0).toUpperCase() + name.slice(1));
    for (const service of t.app.core.resources.all()) {
      const names = schemaNames(service.def);
      const served = servedOperations(doc(), service);
      const wanted: string[] = [];
      if (served.includes('list')) wanted.push(names.listEnvelope, names.list, names.detail);
      if (served.includes('get')) wanted.push(names.detailEnvelope, names.detail);
      if (served.includes('create')) wanted.push(names.create);
      if (served.includes('update')) wanted.push(names.update);
      if (served.includes('patch')) wanted.push(names.patch);
      for (const name of wanted) expect(schemas, `${service.def.name}: ${name}`).toContain(name);
    }
  });
});

/** Type errors of a TypeScript module compiled on its own (with the standard library). */
function compileErrors_(source: string): string[] {
  const file = '/generated/api.d.ts';
  const options: ts.CompilerOptions = { strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, lib: ['lib.es2022.d.ts'], types: [] };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, onError, create) =>
    name === file ? ts.createSourceFile(file, source, version) : getSourceFile(name, version, onError, create);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

/** Names of the type aliases and interfaces a module exports. */
function exportedTypes(source: string): string[] {
  const sf = ts.createSourceFile('api.d.ts', source, ts.ScriptTarget.ES2022);
  const exported = (node: ts.Node) => ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  return sf.statements
    .filter((s): s is ts.TypeAliasDeclaration | ts.InterfaceDeclaration => (ts.isTypeAliasDeclaration(s) || ts.isInterfaceDeclaration(s)) && exported(s))
    .map((s) => s.name.text);
}
