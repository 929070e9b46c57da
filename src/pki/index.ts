// The controller's own PKI: a root CA, a signing (intermediate) CA that issues the server certificate
// now and identity / router certificates later, and the server certificate of the HTTPS listeners.
//
// Files under the PKI directory (mode 0700 when created here):
//   root-ca.cert.pem     root CA certificate
//   root-ca.key.pem      root CA key, PKCS#8
//   signing-ca.cert.pem  signing CA certificate
//   signing-ca.key.pem   signing CA key, PKCS#8
//   server.cert.pem      server certificate (leaf only)
//   server.key.pem       server key, PKCS#8
// All are 0600: certificates are public, but the data directory is the controller's alone, and one
// rule for every file in it is one that can be checked and repaired at start.
// The trust domain is not a separate file: it is the URI SAN spiffe://<trust-domain> of the root CA.
//
// The CA files are created once, when none of the files exist, and are never regenerated
// automatically: doing so would silently invalidate every certificate issued under them. Only the
// server certificate is reissued (new key, same signing CA) when it no longer fits.

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { randomBytes, type KeyObject, type X509Certificate } from 'node:crypto';
import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ensureDirectory, removeStaleTempFiles, writeFileAtomic } from './files.js';
import { serverNames, type ServerNames } from './hosts.js';
import {
  createRootCa,
  createServerCertificate,
  createSigningCa,
  importSigningKey,
  parseEcPrivateKey,
  privateKeyToPkcs8Pem,
  type IssuedCertificate,
} from './issue.js';
import { parsePemCertificates, toPem } from './pem.js';
import { pkcs7CertsOnly } from './pkcs7.js';

export { fingerprintOfCertificate, fingerprintOfPem, parsePemBlocks, parsePemCertificates, toPem } from './pem.js';
export { pkcs7CertsOnly } from './pkcs7.js';
export { issuedBy, signedBy, validAt, verifyChain, type TrustAnchor, type VerifiedChain } from './chain.js';
export { writeFileAtomic } from './files.js';
export { importSigningKey, parseEcPrivateKey, randomSerialNumber } from './issue.js';
export {
  apiSessionCertificateSpiffeId,
  createClientCertificate,
  identitySpiffeId,
  CLIENT_VALIDITY_YEARS,
  type ClientCertificateOptions,
  type Issuer,
} from './issue.js';
export { createRouterClientCertificate, createRouterServerCertificate, routerSpiffeId } from './issue.js';
export { checkCsrPem, CsrProblem, MAX_CSR_PEM, type CheckedCsr } from './csr.js';
export { LOOPBACK_HOSTS, serverNames, type ServerNames } from './hosts.js';
export { certificateNames, type CertificateNames } from './names.js';

export interface Pki {
  rootCertPem: string;
  /** The signing (intermediate) CA certificate. */
  signingCertPem: string;
  /** PKCS#8 PEM of the signing CA's private key, for CSR signing. Never part of an API answer. */
  signingKeyPem: string;
  /** The server certificate alone. */
  serverCertPem: string;
  /** PKCS#8 PEM. */
  serverKeyPem: string;
  /** Server certificate + signing CA: what the TLS listeners present. */
  serverChainPem: string;
  /** Root + signing CA: the CAs a client should trust. */
  trustBundlePem: string;
  /**
   * Base64 (standard alphabet, padded, one line without line breaks) of the DER of a PKCS#7 certs-only
   * SignedData holding root + signing CA, the body of GET /.well-known/est/cacerts (RFC 7030 §4.1.3).
   */
  cacertsPkcs7Base64: string;
  /** SPIFFE trust domain of this PKI, e.g. "overlay-3f9a0c12de"; stable across restarts. */
  trustDomain: string;
}

export interface EnsurePkiOptions {
  /** PKI directory, e.g. <data-dir>/pki; created with mode 0700 if missing. */
  dir: string;
  /** Advertise hosts (DNS names or IPs); localhost, 127.0.0.1 and ::1 are always added. */
  hosts: string[];
  now?: () => Date;
  /** Told what was created, reused or reissued, and why. */
  log?: (msg: string) => void;
}

export const PKI_FILES = {
  rootCert: 'root-ca.cert.pem',
  rootKey: 'root-ca.key.pem',
  signingCert: 'signing-ca.cert.pem',
  signingKey: 'signing-ca.key.pem',
  serverCert: 'server.cert.pem',
  serverKey: 'server.key.pem',
} as const;

type PkiFile = keyof typeof PKI_FILES;

const DIR_MODE = 0o700;
const KEY_MODE = 0o600;
const CERT_MODE = 0o600;
const DAY_MS = 24 * 60 * 60 * 1000;
/** The server certificate is reissued when it has less than this left. */
export const SERVER_RENEW_BEFORE_MS = 30 * DAY_MS;
/** A CA certificate closer than this to its end is reported at every start. */
const CA_EXPIRY_WARNING_MS = 180 * DAY_MS;

const CA_FILES: readonly PkiFile[] = ['rootCert', 'rootKey', 'signingCert', 'signingKey'];
const TRUST_DOMAIN = /^[a-z0-9._-]{1,255}$/;

/**
 * Creates the PKI in `opts.dir` at first start, loads and checks it on later starts, and reissues the
 * server certificate when it does not cover the required hosts, expires within 30 days, does not
 * chain to the signing CA, or its files are missing or broken. Throws (naming the file) when CA files
 * are missing, unreadable, mismatched or do not verify; never replaces them.
 */
export async function ensurePki(opts: EnsurePkiOptions): Promise<Pki> {
  const now = (opts.now ?? (() => new Date()))();
  const log = opts.log ?? (() => {});
  const names = serverNames(opts.hosts);
  const { dir } = opts;
  const path = (file: PkiFile): string => join(dir, PKI_FILES[file]);

  if (await ensureDirectory(dir, DIR_MODE)) log(`PKI: created directory ${dir}`);
  const stale = await removeStaleTempFiles(dir);
  if (stale.length > 0) log(`PKI: removed temp files of an interrupted write: ${stale.join(', ')}`);

  const present = new Set<PkiFile>();
  for (const file of Object.keys(PKI_FILES) as PkiFile[]) {
    if (await exists(path(file))) present.add(file);
  }
  if (present.size === 0) return createPki(dir, names, now, log);

  const missing = CA_FILES.filter((f) => !present.has(f));
  if (missing.length > 0) {
    throw new Error(
      `PKI in ${dir} is incomplete: missing ${missing.map((f) => path(f)).join(', ')}. ` + CA_RECOVERY_HINT,
    );
  }

  const root = await loadCa(path('rootCert'), path('rootKey'), undefined, now, log);
  const signing = await loadCa(path('signingCert'), path('signingKey'), { cert: root.cert, path: path('rootCert') }, now, log);
  const trustDomain = trustDomainOf(root.cert, path('rootCert'));
  log(`PKI: reusing root CA and signing CA in ${dir} (trust domain ${trustDomain})`);

  const server = await currentServer(dir, names, { cert: signing.cert, keyPem: signing.keyPem }, now, log);
  if (!server.issued) log(`PKI: reusing server certificate ${path('serverCert')} (${describeServer(server.cert)})`);
  return assemble({ root: root.cert, signing: signing.cert, signingKeyPem: signing.keyPem, server: server.cert, serverKeyPem: server.keyPem, trustDomain });
}

/**
 * The server certificate of the PKI in `dir` when it still fits (names, signing CA, not within 30 days
 * of its end), else a new one under `signing`, written there and logged (`issued`): what a start and
 * a running controller's renewal both judge.
 */
async function currentServer(
  dir: string,
  names: ServerNames,
  signing: { cert: X509Certificate; keyPem: string },
  now: Date,
  log: (msg: string) => void,
): Promise<{ cert: X509Certificate; keyPem: string; issued: boolean }> {
  const server = await loadServer(join(dir, PKI_FILES.serverCert), join(dir, PKI_FILES.serverKey), signing.cert, names, now);
  if (!('reason' in server)) return { ...server, issued: false };
  const issued = await createServerCertificate(names, { cert: signing.cert, key: await importSigningKey(signing.keyPem) }, now);
  await writeServer(dir, issued);
  log(`PKI: issued a new server certificate (${describeServer(issued.cert)}) because ${server.reason}`);
  return { cert: issued.cert, keyPem: issued.keyPem, issued: true };
}

/**
 * The server certificate of a running controller, judged as a start judges it and reissued under the
 * running signing CA when it must be; undefined when the one on disk is the running one and will do.
 * Unlike ensurePki it never creates a PKI or reads the CAs again: a PKI directory emptied or replaced
 * under a running controller would otherwise give it a new root CA in memory (every enrolled identity
 * and router trusting the old one) and on disk for the next start. What the directory holds then is
 * for a start to judge; here the write fails and the running certificate stays.
 */
export async function renewServerCertificate(opts: EnsurePkiOptions, running: Pki): Promise<Pki | undefined> {
  const now = (opts.now ?? (() => new Date()))();
  const [root, signing] = [running.rootCertPem, running.signingCertPem].map((pem) => parsePemCertificates(pem)[0]!);
  const server = await currentServer(opts.dir, serverNames(opts.hosts), { cert: signing!, keyPem: running.signingKeyPem }, now, opts.log ?? (() => {}));
  if (toPem('CERTIFICATE', server.cert.raw) === running.serverCertPem) return undefined;
  return assemble({ root: root!, signing: signing!, signingKeyPem: running.signingKeyPem, server: server.cert, serverKeyPem: server.keyPem, trustDomain: running.trustDomain });
}

const CA_RECOVERY_HINT =
  'CA files are never regenerated automatically, as that would invalidate every certificate issued ' +
  'under them: restore them from a backup, or move the whole directory away to create a new PKI.';

async function createPki(dir: string, names: ServerNames, now: Date, log: (msg: string) => void): Promise<Pki> {
  const trustDomain = `overlay-${randomBytes(5).toString('hex')}`;
  const root = await createRootCa(trustDomain, now);
  const rootKey = await importSigningKey(root.keyPem);
  const signing = await createSigningCa(trustDomain, { cert: root.cert, key: rootKey }, now);
  const signingKey = await importSigningKey(signing.keyPem);
  const server = await createServerCertificate(names, { cert: signing.cert, key: signingKey }, now);

  // The root certificate goes last: if this is interrupted, the directory is recognisably incomplete.
  await writeServer(dir, server);
  await writeFileAtomic(join(dir, PKI_FILES.signingKey), signing.keyPem, KEY_MODE);
  await writeFileAtomic(join(dir, PKI_FILES.signingCert), signing.certPem, CERT_MODE);
  await writeFileAtomic(join(dir, PKI_FILES.rootKey), root.keyPem, KEY_MODE);
  await writeFileAtomic(join(dir, PKI_FILES.rootCert), root.certPem, CERT_MODE);
  log(
    `PKI: created root CA, signing CA and server certificate (${describeServer(server.cert)}) in ${dir} ` +
      `(trust domain ${trustDomain})`,
  );

  return assemble({
    root: root.cert,
    signing: signing.cert,
    signingKeyPem: signing.keyPem,
    server: server.cert,
    serverKeyPem: server.keyPem,
    trustDomain,
  });
}

async function writeServer(dir: string, server: IssuedCertificate): Promise<void> {
  // Key first: interrupted in between, the old certificate no longer matches the key and is reissued.
  await writeFileAtomic(join(dir, PKI_FILES.serverKey), server.keyPem, KEY_MODE);
  await writeFileAtomic(join(dir, PKI_FILES.serverCert), server.certPem, CERT_MODE);
}

function assemble(parts: {
  root: X509Certificate;
  signing: X509Certificate;
  signingKeyPem: string;
  server: X509Certificate;
  serverKeyPem: string;
  trustDomain: string;
}): Pki {
  const rootCertPem = toPem('CERTIFICATE', parts.root.raw);
  const signingCertPem = toPem('CERTIFICATE', parts.signing.raw);
  const serverCertPem = toPem('CERTIFICATE', parts.server.raw);
  const trustBundlePem = rootCertPem + signingCertPem;
  return {
    rootCertPem,
    signingCertPem,
    signingKeyPem: parts.signingKeyPem,
    serverCertPem,
    serverKeyPem: parts.serverKeyPem,
    serverChainPem: serverCertPem + signingCertPem,
    trustBundlePem,
    cacertsPkcs7Base64: pkcs7CertsOnly([trustBundlePem]).toString('base64'),
    trustDomain: parts.trustDomain,
  };
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

function validityOf(cert: X509Certificate): { notBefore: Date; notAfter: Date } {
  const parsed = new x509.X509Certificate(cert.raw);
  return { notBefore: parsed.notBefore, notAfter: parsed.notAfter };
}

/** Exactly one certificate from a PEM file; throws a message naming the file. */
async function readSingleCertificate(path: string): Promise<X509Certificate> {
  const certs = parsePemCertificates(await readFile(path, 'utf8'));
  if (certs.length !== 1 || !certs[0]) {
    throw new Error(`expected exactly one certificate, found ${certs.length}`);
  }
  return certs[0];
}

async function readPrivateKey(path: string): Promise<KeyObject> {
  return parseEcPrivateKey(await readFile(path, 'utf8'));
}

interface LoadedCa {
  cert: X509Certificate;
  keyPem: string;
}

/** Loads and checks a CA: readable, key matches, CA:true, signed by `issuer` (or self-signed), not expired. */
async function loadCa(
  certPath: string,
  keyPath: string,
  issuer: { cert: X509Certificate; path: string } | undefined,
  now: Date,
  log: (msg: string) => void,
): Promise<LoadedCa> {
  const fail = (path: string, problem: string): Error =>
    new Error(`PKI file ${path} is unusable: ${problem}. ${CA_RECOVERY_HINT}`);

  let cert: X509Certificate;
  try {
    cert = await readSingleCertificate(certPath);
  } catch (err) {
    throw fail(certPath, (err as Error).message);
  }
  let key: KeyObject;
  try {
    key = await readPrivateKey(keyPath);
  } catch (err) {
    throw fail(keyPath, (err as Error).message);
  }
  if (!cert.checkPrivateKey(key)) throw fail(keyPath, `it is not the private key of ${certPath}`);
  if (!cert.ca) throw fail(certPath, 'it is not a CA certificate');
  const signer = issuer?.cert ?? cert;
  if (!cert.checkIssued(signer) || !cert.verify(signer.publicKey)) {
    throw fail(certPath, issuer ? `it is not signed by ${issuer.path}` : 'it is not a self-signed certificate');
  }
  const { notAfter } = validityOf(cert);
  if (notAfter.getTime() <= now.getTime()) {
    throw fail(certPath, `it expired on ${notAfter.toISOString()}`);
  }
  if (notAfter.getTime() - now.getTime() < CA_EXPIRY_WARNING_MS) {
    log(`PKI: warning: CA certificate ${certPath} expires on ${notAfter.toISOString()}`);
  }
  return { cert, keyPem: privateKeyToPkcs8Pem(key) };
}

function trustDomainOf(root: X509Certificate, path: string): string {
  const san = new x509.X509Certificate(root.raw).getExtension(x509.SubjectAlternativeNameExtension);
  const uri = san?.names.items.find((n) => n.type === 'url' && n.value.startsWith('spiffe://'))?.value;
  const trustDomain = uri?.slice('spiffe://'.length);
  if (!trustDomain || !TRUST_DOMAIN.test(trustDomain)) {
    throw new Error(`PKI file ${path} is unusable: it carries no spiffe://<trust-domain> URI SAN. ${CA_RECOVERY_HINT}`);
  }
  return trustDomain;
}

/** The server certificate and key if they can be kept, else why not. */
async function loadServer(
  certPath: string,
  keyPath: string,
  signing: X509Certificate,
  names: ServerNames,
  now: Date,
): Promise<{ cert: X509Certificate; keyPem: string } | { reason: string }> {
  for (const path of [certPath, keyPath]) {
    if (!(await exists(path))) return { reason: `${path} is missing` };
  }
  let cert: X509Certificate;
  try {
    cert = await readSingleCertificate(certPath);
  } catch (err) {
    return { reason: `${certPath} is unusable: ${(err as Error).message}` };
  }
  let key: KeyObject;
  try {
    key = await readPrivateKey(keyPath);
  } catch (err) {
    return { reason: `${keyPath} is unusable: ${(err as Error).message}` };
  }
  if (!cert.checkPrivateKey(key)) return { reason: `${keyPath} is not the private key of ${certPath}` };
  if (!cert.checkIssued(signing) || !cert.verify(signing.publicKey)) {
    return { reason: 'the current certificate is not signed by the signing CA' };
  }
  if (cert.ca) return { reason: 'the current certificate is a CA certificate' };

  const { notBefore, notAfter } = validityOf(cert);
  if (notBefore.getTime() > now.getTime()) {
    return { reason: `the current certificate is not valid before ${notBefore.toISOString()}` };
  }
  if (notAfter.getTime() - now.getTime() <= SERVER_RENEW_BEFORE_MS) {
    return { reason: `the current certificate expires on ${notAfter.toISOString()}, within 30 days` };
  }
  const uncovered = [
    ...names.dns.filter((host) => cert.checkHost(host, { subject: 'never' }) === undefined),
    ...names.ips.filter((ip) => cert.checkIP(ip) === undefined),
  ];
  if (uncovered.length > 0) {
    return { reason: `the current certificate does not cover ${uncovered.join(', ')}` };
  }
  return { cert, keyPem: privateKeyToPkcs8Pem(key) };
}

function describeServer(cert: X509Certificate): string {
  return `SANs ${cert.subjectAltName ?? 'none'}, expires ${validityOf(cert).notAfter.toISOString()}`;
}
