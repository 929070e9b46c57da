// The server certificate lasts a year. A start reissues it within 30 days of its end, and so must a
// controller that keeps running: one started 40 days before the end would otherwise present an
// expired certificate to every client until someone restarts it.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_ENV, startTestController, type TestController } from './helpers.js';

const DAY_MS = 24 * 60 * 60 * 1000;

/** The certificate the listener on `port` presents in its TLS handshake. */
function presented(port: number): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false }, () => {
      const cert = socket.getPeerX509Certificate();
      socket.end();
      if (cert) resolve(cert);
      else reject(new Error('no certificate presented'));
    });
    socket.on('error', reject);
  });
}

let t: TestController | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe('server certificate renewal while running', () => {
  it('reissues the certificate within 30 days of its end and presents it without a restart', async () => {
    t = await startTestController({ env: ADMIN_ENV });
    const [url] = await t.app.listen();
    const port = Number(new URL(url!).port);
    const first = await presented(port);
    const firstEnd = Date.parse(first.validTo);

    // Still more than 30 days left: nothing changes.
    t.clock.set(firstEnd - 40 * DAY_MS);
    await t.app.renewServerCertificate();
    expect((await presented(port)).fingerprint256).toBe(first.fingerprint256);

    // 20 days left: a new certificate, presented by the running listener and kept for the next start.
    t.clock.set(firstEnd - 20 * DAY_MS);
    await t.app.renewServerCertificate();
    const renewed = await presented(port);
    expect(renewed.fingerprint256).not.toBe(first.fingerprint256);
    expect(Date.parse(renewed.validTo)).toBeGreaterThan(firstEnd + 300 * DAY_MS);
    expect(renewed.checkIssued(new X509Certificate(t.app.core.pki.signingCertPem))).toBe(true);
    const onDisk = new X509Certificate(readFileSync(join(t.dataDir, 'pki', 'server.cert.pem')));
    expect(onDisk.fingerprint256).toBe(renewed.fingerprint256);
    expect(new X509Certificate(t.app.core.pki.serverCertPem).fingerprint256).toBe(renewed.fingerprint256);
  });
});

describe('server certificate renewal with the PKI directory gone', () => {
  it('never makes a new PKI for a running controller: its CAs stay, and the disk is left for a start to judge', async () => {
    t = await startTestController({ env: ADMIN_ENV });
    const [url] = await t.app.listen();
    const port = Number(new URL(url!).port);
    const { rootCertPem, signingCertPem } = t.app.core.pki;
    const first = await presented(port);
    const pkiDir = join(t.dataDir, 'pki');
    rmSync(pkiDir, { recursive: true, force: true });

    await expect(t.app.renewServerCertificate()).rejects.toThrow(/pki/);
    expect(t.app.core.pki.rootCertPem).toBe(rootCertPem);
    expect(t.app.core.pki.signingCertPem).toBe(signingCertPem);
    expect((await presented(port)).fingerprint256).toBe(first.fingerprint256);
    expect(existsSync(join(pkiDir, 'root-ca.cert.pem'))).toBe(false);
  });
});
