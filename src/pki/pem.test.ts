import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ipToBytes, serverNames } from './hosts.js';
import { createRootCa, createSigningCa, importSigningKey } from './issue.js';
import { fingerprintOfPem, parsePemBlocks, parsePemCertificates, toPem } from './pem.js';
import { pkcs7CertsOnly } from './pkcs7.js';

const NOW = new Date('2025-03-01T12:00:00Z');

function hasOpenssl(): boolean {
  try {
    execFileSync('which', ['openssl'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

let rootPem: string;
let signingPem: string;
let keyPem: string;

beforeAll(async () => {
  const root = await createRootCa('overlay-test', NOW);
  const signing = await createSigningCa('overlay-test', { cert: root.cert, key: await importSigningKey(root.keyPem) }, NOW);
  rootPem = root.certPem;
  signingPem = signing.certPem;
  keyPem = signing.keyPem;
});

describe('parsePemCertificates', () => {
  it('parses every certificate in order and ignores explanatory text', () => {
    const certs = parsePemCertificates(`subject=CN=root\n${rootPem}\nsome note\r\n${signingPem}`);
    expect(certs.map((c) => c.subject)).toEqual(['CN=overlay root CA overlay-test', 'CN=overlay signing CA overlay-test']);
  });

  it('accepts CRLF line ends and yields [] for text without blocks', () => {
    expect(parsePemCertificates(rootPem.replace(/\n/g, '\r\n'))).toHaveLength(1);
    expect(parsePemCertificates('')).toEqual([]);
  });

  it('rejects a private key block', () => {
    expect(() => parsePemCertificates(rootPem + keyPem)).toThrow(/block 2 is "PRIVATE KEY", expected "CERTIFICATE"/);
  });

  it('rejects a certificate block that is not a certificate, and an unterminated block', () => {
    const bogus = toPem('CERTIFICATE', Buffer.from('not a certificate'));
    expect(() => parsePemCertificates(bogus)).toThrow(/block 1 is not a valid X.509 certificate/);
    expect(() => parsePemCertificates(rootPem.slice(0, 100))).toThrow(/unterminated or malformed/);
    expect(() => parsePemBlocks(rootPem.replace('-----END CERTIFICATE', '-----END PRIVATE KEY'))).toThrow(/ends with/);
  });
});

describe('fingerprintOfPem', () => {
  it('is the lowercase SHA-1 hex of the DER of the first certificate', () => {
    const expected = new X509Certificate(rootPem).fingerprint.replace(/:/g, '').toLowerCase();
    expect(fingerprintOfPem(rootPem)).toBe(expected);
    expect(fingerprintOfPem(rootPem + signingPem)).toBe(expected);
    expect(expected).toMatch(/^[0-9a-f]{40}$/);
  });

  it('throws when there is no certificate', () => {
    expect(() => fingerprintOfPem('')).toThrow(/no certificate/);
  });
});

describe('pkcs7CertsOnly', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pki-p7-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('is a certs-only SignedData that @peculiar/x509 reads back in order', () => {
    const der = pkcs7CertsOnly([rootPem + signingPem]);
    const certs = new x509.X509Certificates(der);
    expect(certs.map((c) => c.subject)).toEqual(['CN=overlay root CA overlay-test', 'CN=overlay signing CA overlay-test']);
    // ContentInfo(id-signedData) ... encapContentInfo is SEQUENCE { id-data } with no eContent
    expect(der.subarray(0, 1)[0]).toBe(0x30);
    // version 1, no digest algorithms, encapContentInfo { id-data } without eContent, then [0] certificates
    expect(der.includes(Buffer.from('020101' + '3100' + '300b06092a864886f70d010701' + 'a082', 'hex'))).toBe(true);
    // and no signerInfos: the message ends with an empty SET
    expect(der.subarray(-2).toString('hex')).toBe('3100');
  });

  it('matches openssl crl2pkcs7 byte for byte and is listed by openssl pkcs7', () => {
    const der = pkcs7CertsOnly([rootPem, signingPem]);
    if (!hasOpenssl()) return; // the only assertion here needs the openssl binary
    const pemFile = join(dir, 'bundle.pem');
    writeFileSync(pemFile, rootPem + signingPem);
    const reference = execFileSync('openssl', ['crl2pkcs7', '-nocrl', '-certfile', pemFile, '-outform', 'DER']);
    expect(der.equals(reference)).toBe(true);
    const derFile = join(dir, 'bundle.p7b');
    writeFileSync(derFile, der);
    const listing = execFileSync('openssl', ['pkcs7', '-inform', 'DER', '-in', derFile, '-print_certs', '-noout']).toString();
    expect(listing).toMatch(/subject=CN\s?=\s?overlay root CA overlay-test/);
    expect(listing).toMatch(/subject=CN\s?=\s?overlay signing CA overlay-test/);
  });

  it('encodes long length forms correctly for many certificates', () => {
    const twenty = pkcs7CertsOnly(Array.from({ length: 20 }, () => rootPem));
    expect(twenty.subarray(0, 2).toString('hex')).toBe('3082');
    expect(twenty.readUInt16BE(2)).toBe(twenty.length - 4);
    expect(new x509.X509Certificates(twenty)).toHaveLength(20);

    const many = pkcs7CertsOnly(Array.from({ length: 200 }, () => rootPem));
    expect(many.subarray(0, 2).toString('hex')).toBe('3083');
    expect(many.readUIntBE(2, 3)).toBe(many.length - 5);
  });

  it('refuses an empty bundle and non-certificate PEM', () => {
    expect(() => pkcs7CertsOnly([])).toThrow(/at least one certificate/);
    expect(() => pkcs7CertsOnly([keyPem])).toThrow(/PRIVATE KEY/);
  });
});

describe('serverNames', () => {
  it('adds the loopback names, normalises and deduplicates', () => {
    expect(serverNames(['Ctrl.Example.COM.', '[::1]', '10.0.0.5', 'localhost', '0:0:0:0:0:0:0:1', '2001:DB8::1'])).toEqual({
      dns: ['ctrl.example.com', 'localhost'],
      ips: ['::1', '10.0.0.5', '2001:db8::1', '127.0.0.1'],
    });
  });

  it('rejects hosts that are neither names nor addresses', () => {
    for (const bad of ['ctrl.example.com:443', 'https://ctrl', '*.example.com', '', 'a..b', '300.1.1.1', 'fe80::1%eth0']) {
      expect(() => serverNames([bad]), bad).toThrow(/invalid advertise host/);
    }
  });

  it('converts addresses to their bytes', () => {
    expect(ipToBytes('::1').toString('hex')).toBe('00000000000000000000000000000001');
    expect(ipToBytes('::ffff:10.1.2.3').toString('hex')).toBe('00000000000000000000ffff0a010203');
    expect(ipToBytes('2001:db8::8:800:200c:417a').toString('hex')).toBe('20010db80000000000080800200c417a');
    expect(ipToBytes('192.168.0.1').toString('hex')).toBe('c0a80001');
    expect(ipToBytes('::').toString('hex')).toBe('0'.repeat(32));
  });
});
