// Shared test scaffolding: a controller on a temp data dir with an in-memory store, an injected
// clock, and helpers to call it through inject().
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createHash, createPrivateKey, randomBytes, webcrypto } from 'node:crypto';
import { request as httpsRequest } from 'node:https';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { Secret, TOTP } from 'otpauth';
import { pino } from 'pino';
import { createApp, type App, type AppOptions } from '../src/app/app.js';
import { loadConfig, type Config } from '../src/config/index.js';

export interface TestClock {
  (): number;
  advance(ms: number): void;
  set(ms: number): void;
}

export function testClock(start = Date.parse('2026-01-02T03:04:05.678Z')): TestClock {
  let now = start;
  const clock = (() => now) as TestClock;
  clock.advance = (ms) => {
    now += ms;
  };
  clock.set = (ms) => {
    now = ms;
  };
  return clock;
}

export function tempDir(prefix = 'overlay-test-'): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export interface TestController {
  app: App;
  server: FastifyInstance;
  clock: TestClock;
  config: Config;
  dataDir: string;
  inject(opts: InjectOptions): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export async function startTestController(
  options: AppOptions & {
    env?: NodeJS.ProcessEnv;
    clock?: TestClock;
    /** Use this data directory (kept on close) instead of a fresh temporary one. */
    dataDir?: string;
  } = {},
): Promise<TestController> {
  const { env, dataDir, ...appOptions } = options;
  const dir = dataDir !== undefined ? { path: dataDir, remove: () => undefined } : tempDir();
  const clock = options.clock ?? testClock();
  const config = loadConfig({ dataDir: dir.path, listen: '127.0.0.1:0' }, env ?? {});
  const app = await createApp(config, {
    log: pino({ level: 'silent' }),
    memoryStore: true,
    checkAnswers: true,
    ...appOptions,
    clock,
  });
  const server = app.servers[0]!.app;
  await server.ready();
  return {
    app,
    server,
    clock,
    config,
    dataDir: dir.path,
    inject: (opts) => server.inject(opts),
    async close() {
      await app.close();
      dir.remove();
    },
  };
}

export function json(res: LightMyRequestResponse): any {
  return JSON.parse(res.body);
}

// ---- Edge API helpers ------------------------------------------------------------------------

export const CLIENT = '/edge/client/v1';
export const MGMT = '/edge/management/v1';
export const ADMIN_USERNAME = 'admin';
export const ADMIN_PASSWORD = 'admin-password-1';
/** Environment giving the default admin a known password. */
export const ADMIN_ENV: NodeJS.ProcessEnv = {
  OVERLAY_ADMIN_USERNAME: ADMIN_USERNAME,
  OVERLAY_ADMIN_PASSWORD: ADMIN_PASSWORD,
};

/** WWW-Authenticate of a request without any credential (behaviour.md §6). */
export const CHALLENGE_MISSING =
  'overlay-session realm="overlay-session" error="missing" error_description="no matching token was provided", ' +
  'Bearer realm="overlay-oidc" error="missing" error_description="no matching token was provided"';
/** WWW-Authenticate of an unknown or expired legacy session token. */
export const CHALLENGE_SESSION_INVALID =
  'overlay-session realm="overlay-session" error="invalid" error_description="token is invalid"';

export interface CallOptions {
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** Client address as the controller sees it (the throttle counts failures per address). */
  remoteAddress?: string;
}

/** One request; `token` goes in the overlay-session header, `body` as JSON. */
export function call(
  t: TestController,
  method: InjectOptions['method'],
  url: string,
  opts: CallOptions = {},
): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined) headers['overlay-session'] = opts.token;
  const inject: InjectOptions = { method, url, headers };
  if (opts.body !== undefined) inject.payload = opts.body as InjectOptions['payload'];
  if (opts.remoteAddress !== undefined) inject.remoteAddress = opts.remoteAddress;
  return t.inject(inject);
}

/** POST /authenticate?method=password; answers the response. */
export function authenticate(
  t: TestController,
  username: string,
  password: string,
  opts: { api?: string; remoteAddress?: string; body?: Record<string, unknown> } = {},
): Promise<LightMyRequestResponse> {
  return call(t, 'POST', `${opts.api ?? MGMT}/authenticate?method=password`, {
    body: { username, password, ...opts.body },
    ...(opts.remoteAddress !== undefined && { remoteAddress: opts.remoteAddress }),
  });
}

/** Logs in with a password and answers the session token; fails the test on anything but 200. */
export async function login(
  t: TestController,
  username: string,
  password: string,
  api: string = MGMT,
): Promise<string> {
  const res = await authenticate(t, username, password, { api });
  if (res.statusCode !== 200) throw new Error(`login of ${username} failed: ${res.statusCode} ${res.body}`);
  return json(res).data.token as string;
}

/**
 * Holds the controller's writer after a commit (a listener of that commit's change waits), with the
 * store free for reads: writes queue behind it until `release`. For tests of what happens between
 * a request's read and its write, or while the write queue is full.
 */
export async function holdWrites(t: TestController): Promise<{ release: () => Promise<void> }> {
  const kernel = t.app.core.kernel;
  const marker = `held-${Math.random().toString(36).slice(2)}`;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const unsubscribe = kernel.changes.subscribe((c) => (c.id === marker ? gate : undefined));
  const held = kernel.write(async (ctx) => ctx.changed({ collection: 'posture-data', kind: 'update', id: marker }));
  // Past the turns in which the writer gathers a batch: what comes next queues behind it.
  await new Promise((resolve) => setTimeout(resolve, 20));
  return {
    release: async () => {
      open();
      unsubscribe();
      await held;
    },
  };
}

/** A session token of the default admin (the controller must use ADMIN_ENV). */
export function asAdmin(t: TestController): Promise<string> {
  return login(t, ADMIN_USERNAME, ADMIN_PASSWORD);
}

/** Creates an identity as `adminToken`; answers its id. */
export async function createIdentity(
  t: TestController,
  adminToken: string,
  body: Record<string, unknown>,
): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/identities`, {
    token: adminToken,
    body: { type: 'User', isAdmin: false, ...body },
  });
  if (res.statusCode !== 201) throw new Error(`creating identity failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

/** Creates an identity with a updb authenticator; answers both ids. */
export async function createIdentityWithPassword(
  t: TestController,
  adminToken: string,
  opts: { name: string; username: string; password: string } & Record<string, unknown>,
): Promise<{ id: string; authenticatorId: string }> {
  const { username, password, ...identity } = opts;
  const id = await createIdentity(t, adminToken, identity);
  const res = await call(t, 'POST', `${MGMT}/authenticators`, {
    token: adminToken,
    body: { method: 'updb', identityId: id, username, password },
  });
  if (res.statusCode !== 201) throw new Error(`creating authenticator failed: ${res.statusCode} ${res.body}`);
  return { id, authenticatorId: json(res).data.id as string };
}

/** Asserts an error answer: status, code and, when given, the offending field. */
export function expectError(res: LightMyRequestResponse, status: number, code: string, field?: string): any {
  const body = json(res);
  if (res.statusCode !== status || body?.error?.code !== code || (field !== undefined && body.error.cause?.field !== field)) {
    throw new Error(`expected ${status} ${code}${field ? ` (${field})` : ''}, got ${res.statusCode} ${res.body}`);
  }
  return body;
}

/** Asserts the answer to a request without any credential: 401 UNAUTHORIZED with both challenges. */
export function expectMissingCredential(res: LightMyRequestResponse): void {
  expectError(res, 401, 'UNAUTHORIZED');
  if (res.headers['www-authenticate'] !== CHALLENGE_MISSING) {
    throw new Error(`expected the missing-credential challenge, got ${String(res.headers['www-authenticate'])}`);
  }
}

/** SHA-256 hex of a token: what the store keeps of it. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A self-signed ECDSA P-256 client certificate. */
export async function selfSignedCertificate(
  commonName: string,
  validity: { notBefore?: Date; notAfter?: Date } = {},
): Promise<{ certPem: string; keyPem: string; fingerprint: string }> {
  const crypto = webcrypto;
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
  const keys = (await crypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: '01' + randomBytes(8).toString('hex'),
      name: `CN=${commonName}`,
      notBefore: validity.notBefore ?? new Date(Date.now() - 3_600_000),
      notAfter: validity.notAfter ?? new Date(Date.now() + 365 * 86_400_000),
      keys,
      signingAlgorithm: alg,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
      ],
    },
    crypto,
  );
  const der = Buffer.from(cert.rawData);
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey('pkcs8', keys.privateKey));
  const pem = (label: string, data: Buffer) =>
    `-----BEGIN ${label}-----\n${data.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END ${label}-----\n`;
  return {
    certPem: pem('CERTIFICATE', der),
    keyPem: pem('PRIVATE KEY', pkcs8),
    fingerprint: createHash('sha1').update(der).digest('hex'),
  };
}

// ---- MFA helpers ---------------------------------------------------------------------------------

/**
 * What an authenticator app shows: the code at a time (ms) of a base32 secret (spaces allowed, as a
 * page groups it) or of the otpauth provisioning URL that carries one.
 */
export function authenticatorApp(secretOrUrl: string): (at: number) => string {
  const secret = secretOrUrl.startsWith('otpauth:') ? new URL(secretOrUrl).searchParams.get('secret')! : secretOrUrl.replace(/\s/g, '');
  const totp = new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 });
  return (at) => totp.generate({ timestamp: at });
}

/** The primary and secondary sections of an auth policy, each field optional in `authPolicyBody`. */
interface AuthPolicySections {
  primary?: {
    cert?: Partial<{ allowed: boolean; allowExpiredCerts: boolean }>;
    extJwt?: Partial<{ allowed: boolean; allowedSigners: string[] }>;
    updb?: Partial<{
      allowed: boolean;
      minPasswordLength: number;
      maxAttempts: number;
      lockoutDurationMinutes: number;
      requireMixedCase: boolean;
      requireNumberChar: boolean;
      requireSpecialChar: boolean;
    }>;
  };
  secondary?: Partial<{ requireTotp: boolean; requireExtJwtSigner: string | null }>;
}

/** An auth policy body that allows nothing and requires nothing beyond what `over` sets. */
export function authPolicyBody(name: string, over: AuthPolicySections = {}): Record<string, unknown> {
  return {
    name,
    primary: {
      cert: { allowed: false, allowExpiredCerts: false, ...over.primary?.cert },
      extJwt: { allowed: false, allowedSigners: [], ...over.primary?.extJwt },
      updb: {
        allowed: false,
        minPasswordLength: 5,
        maxAttempts: 0,
        lockoutDurationMinutes: 0,
        requireMixedCase: false,
        requireNumberChar: false,
        requireSpecialChar: false,
        ...over.primary?.updb,
      },
    },
    secondary: { requireTotp: false, requireExtJwtSigner: null, ...over.secondary },
  };
}

/** Creates an auth policy that allows passwords and requires TOTP as the second factor; answers its id. */
export async function createTotpPolicy(t: TestController, adminToken: string, name: string): Promise<string> {
  const res = await call(t, 'POST', `${MGMT}/auth-policies`, {
    token: adminToken,
    body: authPolicyBody(name, { primary: { updb: { allowed: true } }, secondary: { requireTotp: true } }),
  });
  if (res.statusCode !== 201) throw new Error(`creating auth policy ${name} failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}

// ---- certificates made for a test: CAs, certificates they issue, the network's own -------------

const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

function pemOf(label: string, data: ArrayBuffer | Buffer): string {
  const b64 = Buffer.from(data as ArrayBuffer).toString('base64');
  return `-----BEGIN ${label}-----\n${b64.replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END ${label}-----\n`;
}

/** A CA that signs certificates in a test: its certificate and private key. */
export interface TestIssuer {
  cert: x509.X509Certificate;
  privateKey: webcrypto.CryptoKey;
  certPem: string;
}

export interface TestCertificate {
  certPem: string;
  keyPem: string;
  /** SHA-1 of the DER, as authenticators record it. */
  fingerprint: string;
  cert: x509.X509Certificate;
  privateKey: webcrypto.CryptoKey;
}

interface CertificateOptions {
  notBefore?: Date;
  notAfter?: Date;
  /** A CA certificate (basic constraints CA true, may sign certificates). */
  ca?: boolean;
  /** The path length constraint of a CA: how many CAs may be below it. */
  pathLength?: number;
  /** Signed by this issuer; self-signed without one. */
  issuer?: TestIssuer;
  /** The issuer name written into the certificate, when it should differ from the signer's (a forgery). */
  issuerName?: string;
  /** Subject alternative names of a client certificate. */
  sans?: { type: 'url' | 'email' | 'dns'; value: string }[];
  /** Extended key usages of a client certificate in place of clientAuth. */
  extendedKeyUsages?: string[];
}

/** An ECDSA P-256 certificate: a client certificate, or a CA (`ca: true`), self-signed or issued. */
export async function testCertificate(commonName: string, o: CertificateOptions = {}): Promise<TestCertificate> {
  const crypto = webcrypto;
  const keys = (await crypto.subtle.generateKey(EC_P256, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const extensions: x509.Extension[] = o.ca
    ? [
        new x509.BasicConstraintsExtension(true, o.pathLength, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ]
    : [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension(o.extendedKeyUsages ?? [x509.ExtendedKeyUsage.clientAuth]),
        ...(o.sans ? [new x509.SubjectAlternativeNameExtension(o.sans)] : []),
      ];
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: '01' + randomBytes(8).toString('hex'),
      subject: `CN=${commonName}`,
      issuer: o.issuerName ?? (o.issuer ? o.issuer.cert.subject : `CN=${commonName}`),
      notBefore: o.notBefore ?? new Date(Date.now() - 3_600_000),
      notAfter: o.notAfter ?? new Date(Date.now() + 365 * 86_400_000),
      publicKey: keys.publicKey,
      signingKey: o.issuer?.privateKey ?? keys.privateKey,
      signingAlgorithm: EC_P256,
      extensions,
    },
    crypto,
  );
  const der = Buffer.from(cert.rawData);
  return {
    certPem: pemOf('CERTIFICATE', der),
    keyPem: pemOf('PRIVATE KEY', await crypto.subtle.exportKey('pkcs8', keys.privateKey)),
    fingerprint: createHash('sha1').update(der).digest('hex'),
    cert,
    privateKey: keys.privateKey,
  };
}

/** A CA certificate made for a test, ready to sign certificates. */
export async function testCa(commonName: string, o: Omit<CertificateOptions, 'ca'> = {}): Promise<TestIssuer & TestCertificate> {
  return testCertificate(commonName, { ...o, ca: true });
}

/** The controller's own signing CA as an issuer: certificates it signs are the network's. */
export async function networkIssuer(t: TestController): Promise<TestIssuer> {
  const { signingCertPem, signingKeyPem } = t.app.core.pki;
  const der = createPrivateKey(signingKeyPem).export({ type: 'pkcs8', format: 'der' });
  const privateKey = await webcrypto.subtle.importKey('pkcs8', der, EC_P256, false, ['sign']);
  return { cert: new x509.X509Certificate(signingCertPem), privateKey, certPem: signingCertPem };
}

// ---- real TLS ------------------------------------------------------------------------------------

export interface HttpsAnswer {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * One request over real TLS to the controller listening on `port`, trusting the network's root and
 * signing CA (or `trust`), presenting `client` (its certPem may be a chain, leaf first) when given.
 * A body is sent as JSON; `token` goes in the overlay-session header.
 */
export function overTls(
  t: TestController,
  port: number,
  method: string,
  path: string,
  opts: { body?: unknown; client?: { certPem: string; keyPem: string }; token?: string; trust?: string; headers?: Record<string, string> } = {},
): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        agent: false,
        ca: opts.trust ?? t.app.core.pki.trustBundlePem,
        ...(opts.client && { cert: opts.client.certPem, key: opts.client.keyPem }),
        headers: {
          ...opts.headers,
          ...(opts.token !== undefined && { 'overlay-session': opts.token }),
          ...(payload !== undefined && { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
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
    req.end(payload);
  });
}

// ---- external JWT signers ----------------------------------------------------------------------

/** Creates an external JWT signer (a JWKS endpoint unless the body gives a certificate); answers its id. */
export async function createSigner(t: TestController, adminToken: string, body: Record<string, unknown> = {}): Promise<string> {
  const name = typeof body.name === 'string' ? body.name : `signer-${randomBytes(4).toString('hex')}`;
  const res = await call(t, 'POST', `${MGMT}/external-jwt-signers`, {
    token: adminToken,
    body: {
      name,
      issuer: `https://${name}.example.com`,
      audience: 'overlay',
      enabled: true,
      ...(body.certPem === undefined ? { jwksEndpoint: `https://${name}.example.com/jwks` } : {}),
      ...body,
    },
  });
  if (res.statusCode !== 201) throw new Error(`creating signer ${name} failed: ${res.statusCode} ${res.body}`);
  return json(res).data.id as string;
}
