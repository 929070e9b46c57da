// The controller's ground floor over inject(): informational endpoints, envelopes and errors.
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, startTestController, type TestController } from './helpers.js';

const CLIENT = '/edge/client/v1';
const MGMT = '/edge/management/v1';
const META = { apiVersion: '0.29.0', apiEnrollmentVersion: '0.0.1' };

let t: TestController;
beforeAll(async () => {
  t = await startTestController();
});
afterAll(async () => {
  await t.close();
});

describe.each([CLIENT, MGMT])('informational endpoints of %s', (base) => {
  it('GET /version answers the version record for every bound API', async () => {
    const res = await t.inject({ method: 'GET', url: `${base}/version` });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = json(res);
    expect(body.meta).toEqual(META);
    expect(body.data.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(body.data.runtimeVersion).toBe(process.version);
    expect(Array.isArray(body.data.capabilities)).toBe(true);
    const address = t.config.web[0]!.bindPoints[0]!.address;
    expect(body.data.apiVersions['edge-client'].v1).toEqual({
      path: '/edge/client/v1',
      version: 'v1',
      apiBaseUrls: [`https://${address}/edge/client/v1`],
    });
    expect(body.data.apiVersions['edge-management'].v1.path).toBe('/edge/management/v1');
  });

  it('GET / answers the same version record', async () => {
    const root = json(await t.inject({ method: 'GET', url: `${base}/` }));
    const version = json(await t.inject({ method: 'GET', url: `${base}/version` }));
    expect(root).toEqual(version);
  });

  it('GET /enumerated-capabilities lists the known capabilities', async () => {
    const body = json(await t.inject({ method: 'GET', url: `${base}/enumerated-capabilities` }));
    expect(body.data).toEqual(['OIDC_AUTH', 'HA_CONTROLLER']);
  });

  it('GET /protocols names the https address', async () => {
    const body = json(await t.inject({ method: 'GET', url: `${base}/protocols` }));
    expect(body.data).toEqual({ https: { address: t.config.web[0]!.bindPoints[0]!.address } });
  });

  it('GET /specs lists this API spec and /specs/{id}/spec serves its OpenAPI document', async () => {
    const specs = json(await t.inject({ method: 'GET', url: `${base}/specs` }));
    expect(specs.data).toHaveLength(1);
    const id = specs.data[0].id as string;
    expect(id).toBe(base === CLIENT ? 'edge-client' : 'edge-management');
    const one = json(await t.inject({ method: 'GET', url: `${base}/specs/${id}` }));
    expect(one.data.id).toBe(id);
    // Base entity fields: made by the build, or at start when the build did not say when.
    const built = Date.parse(t.app.core.build.buildDate);
    const madeAt = new Date(Number.isNaN(built) ? t.clock() : built).toISOString();
    expect(one.data).toMatchObject({ createdAt: madeAt, updatedAt: madeAt, tags: {} });
    expect(specs.data[0]).toEqual(one.data);
    const doc = json(await t.inject({ method: 'GET', url: `${base}/specs/${id}/spec` }));
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.paths[`${base}/version`].get.operationId).toBe('listVersion');
    const yaml = await t.inject({ method: 'GET', url: `${base}/specs/${id}/spec`, headers: { accept: 'text/yaml' } });
    expect(yaml.headers['content-type']).toMatch(/^text\/yaml/);
    expect(yaml.body).toMatch(/^openapi: /m);
    // Chosen by Accept: a cache must not answer one form to a client that asked for the other.
    for (const res of [yaml, await t.inject({ method: 'GET', url: `${base}/specs/${id}/spec` })]) {
      expect(res.headers.vary).toMatch(/\baccept\b/i);
    }
  });

  it('GET /specs/{unknown} is 404 with the envelope', async () => {
    const res = await t.inject({ method: 'GET', url: `${base}/specs/nope` });
    expect(res.statusCode).toBe(404);
    expect(json(res).error.code).toBe('NOT_FOUND');
    const res2 = await t.inject({ method: 'GET', url: `${base}/specs/nope/spec` });
    expect(res2.statusCode).toBe(404);
  });

  it('GET /.well-known/est/cacerts answers base64 PKCS#7 of the trust chain', async () => {
    const res = await t.inject({ method: 'GET', url: `${base}/.well-known/est/cacerts` });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/pkcs7-mime/);
    const der = Buffer.from(res.body, 'base64');
    expect(der.toString('base64')).toBe(res.body.trim());
    // Both CA certificates are inside the bundle.
    for (const pem of [t.app.core.pki.rootCertPem, t.app.core.pki.signingCertPem]) {
      const cert = new X509Certificate(pem);
      expect(der.includes(cert.raw)).toBe(true);
    }
  });
});

describe('errors', () => {
  it('unknown routes get 404 with the error envelope and a request id', async () => {
    for (const url of ['/nope', `${CLIENT}/nope`, `${MGMT}/nope/deeper`, '/edge/client/v2/version']) {
      const res = await t.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(404);
      const body = json(res);
      expect(body.error.code).toBe('NOT_FOUND');
      expect(body.error.requestId).toMatch(/^[0-9a-f-]{36}$/);
      expect(res.headers['x-request-id']).toBe(body.error.requestId);
      expect(body.meta).toEqual(META);
    }
  });

  it('every request gets its own request id', async () => {
    const a = json(await t.inject({ method: 'GET', url: '/nope' }));
    const b = json(await t.inject({ method: 'GET', url: '/nope' }));
    expect(a.error.requestId).not.toBe(b.error.requestId);
  });

  it('a body over 1 MiB is refused with 413 from its declared length', async () => {
    const res = await t.inject({
      method: 'POST',
      url: `${CLIENT}/version`,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ pad: 'x'.repeat(1024 * 1024 + 10) }),
    });
    expect(res.statusCode).toBe(413);
    expect(json(res).error.code).toBe('REQUEST_ENTITY_TOO_LARGE');
  });

  it('a method a path does not take is 405 with Allow and the envelope', async () => {
    const res = await t.inject({ method: 'DELETE', url: `${CLIENT}/version` });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    expect(json(res).error.code).toBe('METHOD_NOT_ALLOWED');
    expect(json(res).error.requestId).toBeTruthy();
  });

  it('a query parameter sent twice is a 400 saying it must be given once, not that it must be a string', async () => {
    const res = await t.inject({ method: 'POST', url: `${CLIENT}/authenticate?method=password&method=cert`, payload: {} });
    expect(res.statusCode).toBe(400);
    expect(json(res).error).toMatchObject({ code: 'COULD_NOT_VALIDATE', cause: { field: 'method', reason: 'must be given once' } });
  });

  it('Allow names HEAD wherever GET is served, as HEAD is answered there too', async () => {
    const res = await t.inject({ method: 'DELETE', url: `${MGMT}/identities` });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD, POST');
    expect((await t.inject({ method: 'HEAD', url: `${CLIENT}/version` })).statusCode).toBe(200);
    const post = await t.inject({ method: 'GET', url: `${CLIENT}/authenticate` });
    expect(post.statusCode).toBe(405);
    expect(post.headers.allow).toBe('POST');
  });

  it.each(['gzip', 'deflate', 'br', 'x-gzip, identity'])(
    'a body in the content coding %s is 415 UNSUPPORTED_MEDIA_TYPE with Accept-Encoding: identity, never read as JSON',
    async (coding) => {
      // Plain JSON under the label: taken as sent, it would have been read as if uncompressed.
      const res = await t.inject({
        method: 'POST',
        url: `${CLIENT}/authenticate?method=password`,
        headers: { 'content-type': 'application/json', 'content-encoding': coding },
        payload: '{"username":"nobody","password":"nothing-at-all"}',
      });
      expect(res.statusCode).toBe(415);
      expect(res.headers['accept-encoding']).toBe('identity');
      expect(json(res).error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
      expect(json(res).meta).toEqual(META);
    },
  );

  it('a body labelled with the identity coding, and a request with a coding but no body, are served', async () => {
    const labelled = await t.inject({
      method: 'POST',
      url: `${CLIENT}/authenticate?method=password`,
      headers: { 'content-type': 'application/json', 'content-encoding': 'Identity' },
      payload: '{"username":"nobody","password":"nothing-at-all"}',
    });
    expect(labelled.statusCode).toBe(401);
    const bodiless = await t.inject({ method: 'GET', url: `${CLIENT}/version`, headers: { 'content-encoding': 'gzip' } });
    expect(bodiless.statusCode).toBe(200);
  });
});
