// A device enrolls as a device would, over real TLS: its key and CSR made by the openssl command,
// the certificate got with the one-time token, then a certificate login presenting that key and
// certificate in the TLS handshake, and the services listed with the session. Several devices
// racing with one token over real connections get exactly one certificate.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ENV,
  asAdmin,
  call,
  CLIENT,
  json,
  MGMT,
  startTestController,
  tempDir,
  testClock,
  type TestController,
} from './helpers.js';

interface HttpsAnswer {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

let t: TestController;
let port: number;
const work = tempDir('overlay-enroll-');

beforeAll(async () => {
  // The TLS peers check certificates against the real time, so the controller starts at it too.
  t = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
  const [url] = await t.app.listen();
  port = Number(new URL(url!).port);
});
afterAll(async () => {
  await t.close();
  work.remove();
});

function https(
  method: string,
  path: string,
  opts: { body?: string; type?: string; client?: { cert: string; key: string }; headers?: Record<string, string> } = {},
): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        agent: false,
        ca: t.app.core.pki.trustBundlePem,
        ...(opts.client && { cert: opts.client.cert, key: opts.client.key }),
        headers: {
          ...opts.headers,
          ...(opts.body !== undefined && { 'content-type': opts.type ?? 'application/json', 'content-length': Buffer.byteLength(opts.body) }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** A key and CSR made by the openssl command, as a device makes them. */
function opensslKeyAndCsr(name: string): { key: string; csr: string } {
  const key = join(work.path, `${name}.key`);
  const csr = join(work.path, `${name}.csr`);
  execFileSync(
    'openssl',
    ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=${name}`, '-keyout', key, '-out', csr],
    { stdio: 'pipe' },
  );
  return { key: readFileSync(key, 'utf8'), csr: readFileSync(csr, 'utf8') };
}

async function ottToken(name: string): Promise<{ identityId: string; token: string }> {
  const admin = await asAdmin(t);
  const res = await call(t, 'POST', `${MGMT}/identities`, {
    token: admin,
    body: { name, type: 'Device', isAdmin: false, enrollment: { ott: true } },
  });
  expect(res.statusCode, res.body).toBe(201);
  const identityId = json(res).data.id as string;
  const identity = json(await call(t, 'GET', `${MGMT}/identities/${identityId}`, { token: admin })).data;
  return { identityId, token: identity.enrollment.ott.token as string };
}

describe('a device enrolls with an openssl CSR and logs in with its certificate over TLS', () => {
  it('enrolls, authenticates with method=cert presenting the key and certificate, and lists services', async () => {
    const { identityId, token } = await ottToken('openssl-device');
    const device = opensslKeyAndCsr('openssl-device');

    const enrolled = await https('POST', `${CLIENT}/enroll/ott`, { body: JSON.stringify({ token, clientCsr: device.csr }) });
    expect(enrolled.statusCode, enrolled.body).toBe(200);
    expect(enrolled.headers['cache-control']).toBe('no-store');
    const chain = JSON.parse(enrolled.body).data.cert as string;
    // The chain verifies with openssl against the controller's trust bundle.
    const certFile = join(work.path, 'openssl-device.cert.pem');
    const caFile = join(work.path, 'ca.pem');
    writeFileSync(certFile, chain);
    writeFileSync(caFile, t.app.core.pki.trustBundlePem);
    const verified = execFileSync('openssl', ['verify', '-purpose', 'sslclient', '-CAfile', caFile, certFile], { encoding: 'utf8' });
    expect(verified.trim()).toBe(`${certFile}: OK`);

    const login = await https('POST', `${CLIENT}/authenticate?method=cert`, { body: '{}', client: { cert: chain, key: device.key } });
    expect(login.statusCode, login.body).toBe(200);
    const session = JSON.parse(login.body).data;
    expect(session.identityId).toBe(identityId);

    const services = await https('GET', `${CLIENT}/services`, { headers: { 'overlay-session': session.token } });
    expect(services.statusCode, services.body).toBe(200);
    expect(JSON.parse(services.body).data).toEqual([]);

    // Without the certificate the same key gets nowhere.
    const without = await https('POST', `${CLIENT}/authenticate?method=cert`, { body: '{}' });
    expect(without.statusCode).toBe(401);
  });

  it('the generic /enroll takes the openssl CSR as application/x-pem-file', async () => {
    const { token } = await ottToken('openssl-pem-device');
    const device = opensslKeyAndCsr('openssl-pem-device');
    const res = await https('POST', `${CLIENT}/enroll?method=ott&token=${token}`, { body: device.csr, type: 'application/x-pem-file' });
    expect(res.statusCode, res.body).toBe(200);
    const login = await https('POST', `${CLIENT}/authenticate?method=cert`, { body: '{}', client: { cert: JSON.parse(res.body).data.cert, key: device.key } });
    expect(login.statusCode, login.body).toBe(200);
  });

  it('several devices racing with one token over separate connections: exactly one is enrolled', async () => {
    const { identityId, token } = await ottToken('raced-over-tls');
    const devices = Array.from({ length: 5 }, (_, i) => opensslKeyAndCsr(`raced-${i}`));
    const answers = await Promise.all(devices.map((d) => https('POST', `${CLIENT}/enroll/ott`, { body: JSON.stringify({ token, clientCsr: d.csr }) })));
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 410, 410, 410, 410]);
    for (const a of answers.filter((x) => x.statusCode === 410)) expect(JSON.parse(a.body).error.code).toBe('INVALID_ENROLLMENT_ALREADY_ENROLLED');
    const winner = devices[answers.findIndex((a) => a.statusCode === 200)]!;
    const cert = JSON.parse(answers.find((a) => a.statusCode === 200)!.body).data.cert as string;
    const login = await https('POST', `${CLIENT}/authenticate?method=cert`, { body: '{}', client: { cert, key: winner.key } });
    expect(JSON.parse(login.body).data.identityId).toBe(identityId);
    const admin = await asAdmin(t);
    expect(json(await call(t, 'GET', `${MGMT}/identities/${identityId}/authenticators`, { token: admin })).data).toHaveLength(1);
  });
});
