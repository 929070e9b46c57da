// Key generation and certificate issuing for the controller's own PKI: root CA, signing
// (intermediate) CA and the server certificate of its listeners. ECDSA P-256 with SHA-256.

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { X509Certificate, createPrivateKey, randomBytes, webcrypto, type KeyObject } from 'node:crypto';
import { ipToBytes, ipv6Groups, type ServerNames } from './hosts.js';
import { toPem } from './pem.js';

// WebCrypto is passed explicitly to every @peculiar/x509 call instead of registering it in the
// library's process-wide cryptoProvider.
const crypto = webcrypto;
type CryptoKey = webcrypto.CryptoKey;

const EC_KEY = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-256' } as const;

export const ROOT_VALIDITY_YEARS = 10;
export const SIGNING_CA_VALIDITY_YEARS = 5;
export const SERVER_VALIDITY_YEARS = 1;
/** notBefore is backdated by this much so peers with a slightly slow clock accept new certificates. */
export const CLOCK_SKEW_MS = 60_000;

export interface KeyPair {
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  /** PKCS#8 PEM of the private key. */
  privateKeyPem: string;
}

/** The certificate and private key of a CA that signs certificates. */
export interface Issuer {
  cert: X509Certificate;
  key: CryptoKey;
}

export interface IssuedCertificate {
  cert: X509Certificate;
  certPem: string;
  keyPem: string;
}

export async function generateKeyPair(): Promise<KeyPair> {
  const { privateKey, publicKey } = (await crypto.subtle.generateKey(EC_KEY, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey('pkcs8', privateKey));
  return { privateKey, publicKey, privateKeyPem: toPem('PRIVATE KEY', pkcs8) };
}

/** Parses a private key PEM (PKCS#8 or SEC1) and checks it is an ECDSA P-256 key. */
export function parseEcPrivateKey(pem: string): KeyObject {
  const key = createPrivateKey(pem);
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new Error(`expected an ECDSA P-256 private key, got ${key.asymmetricKeyType ?? 'unknown'} ${key.asymmetricKeyDetails?.namedCurve ?? ''}`.trimEnd());
  }
  return key;
}

/** PKCS#8 PEM of a private key. */
export function privateKeyToPkcs8Pem(key: KeyObject): string {
  return key.export({ type: 'pkcs8', format: 'pem' }).toString();
}

/** Imports an ECDSA P-256 private key PEM as a WebCrypto signing key (e.g. the signing CA's key). */
export async function importSigningKey(pem: string): Promise<CryptoKey> {
  const der = parseEcPrivateKey(pem).export({ type: 'pkcs8', format: 'der' });
  return crypto.subtle.importKey('pkcs8', der, EC_KEY, false, ['sign']);
}

/** 16 random bytes as hex, first byte in 0x01..0x7f: a positive, minimally encoded DER INTEGER. */
export function randomSerialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) || 0x01;
  return bytes.toString('hex');
}

function addYears(date: Date, years: number): Date {
  const d = new Date(date.getTime());
  d.setUTCFullYear(d.getUTCFullYear() + years);
  return d;
}

/** Whole seconds: X.509 times carry no fractions, so what is computed matches what is encoded. */
function truncateToSecond(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

function validity(now: Date, years: number, notAfterCap?: Date): { notBefore: Date; notAfter: Date } {
  const notBefore = truncateToSecond(new Date(now.getTime() - CLOCK_SKEW_MS));
  let notAfter = truncateToSecond(addYears(now, years));
  if (notAfterCap && notAfter > notAfterCap) notAfter = notAfterCap;
  return { notBefore, notAfter };
}

/** The issuer's subject exactly as encoded in its certificate, so issuer names match byte for byte. */
function subjectNameOf(cert: X509Certificate): x509.Name {
  return new x509.X509Certificate(cert.raw).subjectName;
}

function subjectKeyId(cert: X509Certificate): string {
  const ext = new x509.X509Certificate(cert.raw).getExtension(x509.SubjectKeyIdentifierExtension);
  if (!ext) throw new Error(`certificate ${cert.subject} has no subject key identifier`);
  return ext.keyId;
}

function notAfterOf(cert: X509Certificate): Date {
  return new x509.X509Certificate(cert.raw).notAfter;
}

function toNodeCertificate(cert: x509.X509Certificate): X509Certificate {
  return new X509Certificate(Buffer.from(cert.rawData));
}

const CA_KEY_USAGE = x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign;

/** The SPIFFE id of a trust domain (empty path), carried as URI SAN by both CA certificates. */
export function trustDomainUri(trustDomain: string): string {
  return `spiffe://${trustDomain}`;
}

export async function createRootCa(trustDomain: string, now: Date): Promise<IssuedCertificate> {
  const keys = await generateKeyPair();
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerialNumber(),
      subject: `CN=overlay root CA ${trustDomain}`,
      issuer: `CN=overlay root CA ${trustDomain}`,
      ...validity(now, ROOT_VALIDITY_YEARS),
      publicKey: keys.publicKey,
      signingKey: keys.privateKey,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(CA_KEY_USAGE, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
        new x509.SubjectAlternativeNameExtension([{ type: 'url', value: trustDomainUri(trustDomain) }]),
      ],
    },
    crypto,
  );
  const node = toNodeCertificate(cert);
  return { cert: node, certPem: toPem('CERTIFICATE', node.raw), keyPem: keys.privateKeyPem };
}

export async function createSigningCa(trustDomain: string, root: Issuer, now: Date): Promise<IssuedCertificate> {
  const keys = await generateKeyPair();
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerialNumber(),
      subject: `CN=overlay signing CA ${trustDomain}`,
      issuer: subjectNameOf(root.cert),
      ...validity(now, SIGNING_CA_VALIDITY_YEARS, notAfterOf(root.cert)),
      publicKey: keys.publicKey,
      signingKey: root.key,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(CA_KEY_USAGE, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
        new x509.AuthorityKeyIdentifierExtension(subjectKeyId(root.cert)),
        new x509.SubjectAlternativeNameExtension([{ type: 'url', value: trustDomainUri(trustDomain) }]),
      ],
    },
    crypto,
  );
  const node = toNodeCertificate(cert);
  return { cert: node, certPem: toPem('CERTIFICATE', node.raw), keyPem: keys.privateKeyPem };
}

/**
 * A TLS server (and client) certificate for the controller's listeners, with a new key, signed by the
 * signing CA and never outliving it.
 */
export async function createServerCertificate(names: ServerNames, issuer: Issuer, now: Date): Promise<IssuedCertificate> {
  const keys = await generateKeyPair();
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerialNumber(),
      subject: 'CN=overlay controller',
      issuer: subjectNameOf(issuer.cert),
      ...validity(now, SERVER_VALIDITY_YEARS, notAfterOf(issuer.cert)),
      publicKey: keys.publicKey,
      signingKey: issuer.key,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
        new x509.AuthorityKeyIdentifierExtension(subjectKeyId(issuer.cert)),
        new x509.SubjectAlternativeNameExtension([
          ...names.dns.map((value) => ({ type: 'dns' as const, value })),
          ...names.ips.map((ip) => {
            const bytes = ipToBytes(ip);
            // Handed over as dotted quad or as eight full groups, the two forms the library parses exactly.
            return { type: 'ip' as const, value: bytes.length === 4 ? [...bytes].join('.') : ipv6Groups(bytes) };
          }),
        ]),
      ],
    },
    crypto,
  );
  const node = toNodeCertificate(cert);
  return { cert: node, certPem: toPem('CERTIFICATE', node.raw), keyPem: keys.privateKeyPem };
}

export const CLIENT_VALIDITY_YEARS = 1;

/** The SPIFFE id an identity's client certificate carries: what names the identity in the trust domain. */
export function identitySpiffeId(trustDomain: string, identityId: string): string {
  return `${trustDomainUri(trustDomain)}/identity/${encodeURIComponent(identityId)}`;
}

/** The SPIFFE id an edge router's client certificate carries. */
export function routerSpiffeId(trustDomain: string, routerId: string): string {
  return `${trustDomainUri(trustDomain)}/router/${encodeURIComponent(routerId)}`;
}

/**
 * The SPIFFE id of a certificate an API session had signed: it names the identity, the session and
 * the certificate, so a peer can tell it from the identity's own long-lived one.
 */
export function apiSessionCertificateSpiffeId(trustDomain: string, identityId: string, apiSessionId: string, certificateId: string): string {
  const part = encodeURIComponent;
  return `${identitySpiffeId(trustDomain, identityId)}/apiSession/${part(apiSessionId)}/apiSessionCertificate/${part(certificateId)}`;
}

export interface ClientCertificateOptions {
  /** How long it is valid from now, ms; CLIENT_VALIDITY_YEARS without it. */
  lifetimeMs?: number;
  /** The SPIFFE id it carries; the identity's without it. */
  spiffeId?: string;
}

/**
 * A client certificate for an identity, for a public key the identity holds (from its CSR): not a CA,
 * for signatures and TLS client authentication only, naming the identity by its SPIFFE id, and
 * never outliving the signing CA.
 */
export async function createClientCertificate(
  publicKey: x509.PublicKey,
  trustDomain: string,
  identityId: string,
  issuer: Issuer,
  now: Date,
  options: ClientCertificateOptions = {},
): Promise<{ cert: X509Certificate; certPem: string }> {
  return signLeaf({
    publicKey,
    commonName: identityId,
    usage: x509.ExtendedKeyUsage.clientAuth,
    altNames: new x509.SubjectAlternativeNameExtension([{ type: 'url', value: options.spiffeId ?? identitySpiffeId(trustDomain, identityId) }]),
    issuer,
    now,
    ...(options.lifetimeMs !== undefined ? { lifetimeMs: options.lifetimeMs } : {}),
  });
}

/** An edge router's client certificate: as an identity's, named by the router's SPIFFE id. */
export async function createRouterClientCertificate(
  publicKey: x509.PublicKey,
  trustDomain: string,
  routerId: string,
  issuer: Issuer,
  now: Date,
): Promise<{ cert: X509Certificate; certPem: string }> {
  return signLeaf({
    publicKey,
    commonName: routerId,
    usage: x509.ExtendedKeyUsage.clientAuth,
    altNames: new x509.SubjectAlternativeNameExtension([{ type: 'url', value: routerSpiffeId(trustDomain, routerId) }]),
    issuer,
    now,
  });
}

/**
 * An edge router's TLS server certificate: not a CA, for TLS server authentication only, covering
 * the names its CSR asks for (`altNamesDer`, the DER value of the CSR's subject alternative name
 * extension, copied as it is; the caller has judged the names).
 */
export async function createRouterServerCertificate(
  publicKey: x509.PublicKey,
  routerId: string,
  altNamesDer: ArrayBuffer | undefined,
  issuer: Issuer,
  now: Date,
): Promise<{ cert: X509Certificate; certPem: string }> {
  return signLeaf({
    publicKey,
    commonName: routerId,
    usage: x509.ExtendedKeyUsage.serverAuth,
    altNames: altNamesDer === undefined ? undefined : new x509.Extension(SUBJECT_ALT_NAME_OID, false, altNamesDer),
    issuer,
    now,
  });
}

const SUBJECT_ALT_NAME_OID = '2.5.29.17';

/** A leaf certificate for a key someone else holds, signed by `issuer` and never outliving it. */
async function signLeaf(o: {
  publicKey: x509.PublicKey;
  commonName: string;
  usage: string;
  altNames: x509.Extension | undefined;
  issuer: Issuer;
  now: Date;
  /** How long it is valid from now, ms; CLIENT_VALIDITY_YEARS without it. */
  lifetimeMs?: number;
}): Promise<{ cert: X509Certificate; certPem: string }> {
  const cap = notAfterOf(o.issuer.cert);
  const times =
    o.lifetimeMs === undefined
      ? validity(o.now, CLIENT_VALIDITY_YEARS, cap)
      : { notBefore: truncateToSecond(new Date(o.now.getTime() - CLOCK_SKEW_MS)), notAfter: earlier(truncateToSecond(new Date(o.now.getTime() + o.lifetimeMs)), cap) };
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerialNumber(),
      subject: new x509.Name([{ '2.5.4.3': [o.commonName] }]),
      issuer: subjectNameOf(o.issuer.cert),
      ...times,
      publicKey: o.publicKey,
      signingKey: o.issuer.key,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([o.usage]),
        await x509.SubjectKeyIdentifierExtension.create(o.publicKey, false, crypto),
        new x509.AuthorityKeyIdentifierExtension(subjectKeyId(o.issuer.cert)),
        ...(o.altNames ? [o.altNames] : []),
      ],
    },
    crypto,
  );
  const node = toNodeCertificate(cert);
  return { cert: node, certPem: toPem('CERTIFICATE', node.raw) };
}

function earlier(a: Date, b: Date): Date {
  return a < b ? a : b;
}
