// Third-party CAs beyond CRUD: the certificate must be a CA certificate no other CA has; a new CA is
// unverified with a random verification token, and becomes verified by a certificate it signed that
// names the token; its enrollment JWT; and the cert authenticators it issued, which go with it.
import { randomUUID, type X509Certificate } from 'node:crypto';
import { Value } from '@sinclair/typebox/value';
import { ApiError, fieldError, notFound } from '../errors.js';
import { fingerprintOfCertificate, parsePemBlocks, parsePemCertificates, signedBy, validAt } from '../pki/index.js';
import { signCompact } from '../oidc/jws.js';
import type { SigningKeys } from '../oidc/keys.js';
import { ExternalIdClaimSchema, type cas } from '../resources/cas.js';
import type { EntityOf } from '../resources/index.js';
import type { Executor } from '../store/store.js';
import type { Actor, ResourceBehaviour, Resources, WriteContext } from './resources.js';
import { singleCertificate } from './certificate-field.js';
import { adminOnly, byDelegate, privilegedOthers } from './delegates.js';

type Ca = EntityOf<'cas'>;

/** The certificate of a CA being created: exactly one, and a CA certificate. */
function caCertificate(pem: unknown): X509Certificate {
  if (typeof pem !== 'string') throw fieldError('certPem', 'is required');
  const cert = singleCertificate(pem);
  if (!cert.ca) throw fieldError('certPem', 'must be a CA certificate (basic constraints with CA true)');
  return cert;
}

/**
 * The external id claim as it would be stored: complete, and a combination that can be read from a
 * certificate (the rules of the established controller), so it cannot fail only at enrollment.
 */
function checkExternalIdClaim(claim: unknown): void {
  if (claim === null || claim === undefined) return;
  if (!Value.Check(ExternalIdClaimSchema, claim)) {
    throw fieldError('externalIdClaim', 'must give index, location, matcher, matcherCriteria, parser and parserCriteria');
  }
  const matchers = claim.location === 'SAN_URI' ? ['ALL', 'SCHEME'] : ['ALL', 'PREFIX', 'SUFFIX'];
  if (!matchers.includes(claim.matcher)) {
    throw fieldError('externalIdClaim.matcher', `must be one of ${matchers.join(', ')} for location ${claim.location}`, claim.matcher);
  }
  if (claim.matcher !== 'ALL' && claim.matcherCriteria === '') {
    throw fieldError('externalIdClaim.matcherCriteria', `is required for matcher ${claim.matcher}`, claim.matcherCriteria);
  }
  if (claim.parser === 'SPLIT' && claim.parserCriteria === '') {
    throw fieldError('externalIdClaim.parserCriteria', 'is required for parser SPLIT', claim.parserCriteria);
  }
}

export function caBehaviour(networkCaPems: readonly string[] = []): ResourceBehaviour<typeof cas> {
  const networkCas = new Set(networkCaPems.map((pem) => fingerprintOfCertificate(caCertificate(pem))));
  return {
    async validate(ctx, next, prev) {
      if (!prev) {
        const cert = caCertificate(next.certPem);
        next.fingerprint = fingerprintOfCertificate(cert);
        // Its certificates are the network's own (enrollments, routers): a third-party CA made of it
        // would claim them, and deleting that CA would take their authenticators with it.
        if (networkCas.has(next.fingerprint)) throw fieldError('certPem', 'is a CA of this network itself, not a third-party CA');
        const existing = await ctx.tx.selectFrom('cas').select('id').where('fingerprint', '=', next.fingerprint).executeTakeFirst();
        // Named as the established controller names it; the PEM itself is not echoed back.
        if (existing) throw fieldError('certPem', `the certificate is already the CA ${String(existing.id)}`);
        next.verificationToken = randomUUID();
        next.isVerified = false;
      }
      checkExternalIdClaim(next.externalIdClaim);
      await assertMayWriteCa(ctx, prev, next);
      next.adminWritten = !byDelegate(ctx);
    },
    async afterWrite(ctx, next, prev) {
      if (!prev) await adoptIssuedAuthenticators(ctx, next);
    },
    async beforeDelete(ctx, prev) {
      await assertMayWriteCa(ctx, prev);
      // What the CA's certificates log in or enroll with goes with it.
      const issued = await ctx.tx.selectFrom('authenticators').select('id').where('ca_id', '=', prev.id).execute();
      const authenticators = ctx.resources.get('authenticators');
      for (const row of issued) await authenticators.deleteIn(ctx, String(row.id));
      const pending = await ctx.tx.selectFrom('enrollments').select('id').where('ca_id', '=', prev.id).execute();
      const enrollments = ctx.resources.get('enrollments');
      for (const row of pending) await enrollments.deleteIn(ctx, String(row.id));
    },
  };
}

/**
 * A caller who is not an admin may not write (create, change, verify or delete) a CA that an admin or
 * an identity holding permissions, other than the caller, logs in with, as it may not write the
 * external JWT signers they log in with (delegates.ts): one that issued the cert authenticator of such
 * an identity, or one with an external id claim while such an identity has an external id, since a
 * certificate of the CA naming that id logs in as it. Otherwise `ca` would be a path to their
 * accounts, or a way to lock them out. Judged on the CA as it was and as it would be, whatever its
 * flags: a delegate's CA verified or enabled later is the same path.
 */
async function assertMayWriteCa(ctx: WriteContext, ...states: (Partial<Ca> | undefined)[]): Promise<void> {
  if (!byDelegate(ctx)) return;
  const privileged = await privilegedOthers(ctx);
  if (privileged.length === 0) return;
  const refused = () => adminOnly('write a CA that an admin or an identity holding permissions logs in with');
  const hasExternalId = privileged.some((i) => typeof i.externalId === 'string' && i.externalId !== '');
  for (const ca of states) {
    if (!ca) continue;
    if (hasExternalId && ca.externalIdClaim !== null && ca.externalIdClaim !== undefined) throw refused();
    if (ca.id === undefined) continue;
    const issued = await ctx.tx
      .selectFrom('authenticators')
      .select('id')
      .where('ca_id', '=', ca.id)
      .where('identity_id', 'in', privileged.map((i) => i.id))
      .executeTakeFirst();
    if (issued) throw refused();
  }
}

function certificateOf(pem: unknown): X509Certificate | undefined {
  if (typeof pem !== 'string') return undefined;
  try {
    return parsePemCertificates(pem)[0];
  } catch {
    return undefined;
  }
}

/**
 * Cert authenticators made before their CA was registered become its own when it is; never those of
 * certificates the network issued, which no third-party CA owns.
 */
async function adoptIssuedAuthenticators(ctx: WriteContext, ca: Ca): Promise<void> {
  const caCert = certificateOf(ca.certPem);
  if (!caCert) return;
  const rows = await ctx.tx
    .selectFrom('authenticators')
    .select(['id', 'identity_id', 'cert_pem'])
    .where('method', '=', 'cert')
    .where('ca_id', 'is', null)
    .where('is_issued_by_network', '=', ctx.resources.store.dialect.toDb('boolean', false) as number)
    .execute();
  for (const row of rows) {
    const cert = certificateOf(row.cert_pem);
    if (cert && signedBy(cert, caCert)) {
      await ctx.update('authenticators', String(row.id), { caId: ca.id }, String(row.identity_id));
    }
  }
}

/** The registered CA that signed a certificate (verified or not), if any: what a cert authenticator records. */
export async function issuingCaOf(ex: Executor, cert: X509Certificate): Promise<string | undefined> {
  const rows = await ex.selectFrom('cas').select(['id', 'cert_pem']).execute();
  for (const row of rows) {
    const caCert = certificateOf(row.cert_pem);
    if (caCert && signedBy(cert, caCert)) return String(row.id);
  }
  return undefined;
}

// ---- verification ------------------------------------------------------------------------------

/** The common names of a certificate's subject. */
function commonNames(cert: X509Certificate): string[] {
  return cert.subject
    .split('\n')
    .filter((line) => line.startsWith('CN='))
    .map((line) => line.slice(3));
}

function expectedPem(reason: string): ApiError {
  return new ApiError('EXPECTED_PEM_CERTIFICATE', `the body must be one PEM certificate: ${reason}`);
}

/** The one certificate of a verification body, or EXPECTED_PEM_CERTIFICATE. */
function verificationCertificate(body: string): X509Certificate {
  let certs: X509Certificate[];
  try {
    const blocks = parsePemBlocks(body);
    if (blocks.length === 0) throw expectedPem('it holds no PEM block');
    certs = parsePemCertificates(body);
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw expectedPem((err as Error).message);
  }
  if (certs.length !== 1) throw expectedPem('it holds more than one certificate');
  return certs[0]!;
}

/**
 * Verifies a CA: the certificate must be signed by the CA, valid now, and name the CA's verification
 * token as its common name. Checked and written in one transaction, so of two verifications at once
 * the second finds the CA verified.
 */
export async function verifyCa(resources: Resources, id: string, body: string, actor?: Actor): Promise<void> {
  await resources.write(async (ctx) => {
    const ca = await resources.get('cas').repo.get(ctx.tx, id);
    if (!ca) throw notFound('CA', id);
    if (ca.isVerified) throw new ApiError('CA_ALREADY_VERIFIED', `the CA ${id} is already verified`);
    // Verifying is writing it: trusted from now on.
    await assertMayWriteCa(ctx, ca);
    const cert = verificationCertificate(body);
    const names = commonNames(cert);
    if (names.length !== 1 || names[0] !== ca.verificationToken) {
      throw new ApiError('INVALID_COMMON_NAME', 'the common name of the certificate is not the verification token of the CA');
    }
    const caCert = certificateOf(ca.certPem);
    const now = Date.parse(ctx.now);
    if (!caCert || !validAt(caCert, now) || !validAt(cert, now) || !signedBy(cert, caCert)) {
      throw new ApiError('CERT_FAILED_VALIDATION', 'the certificate is not signed by the CA, or it or the CA is not valid now');
    }
    await ctx.update('cas', id, { isVerified: true, adminWritten: !byDelegate(ctx), updatedAt: ctx.now });
  }, actor);
}

// ---- enrollment JWT ------------------------------------------------------------------------------

/**
 * The CA's enrollment JWT (em `ca`): what a client given it enrolls through the CA with. Like the
 * established controller's it is static, naming the CA as subject and token id, without expiry;
 * signed with the controller's current signing key, so /oidc/keys verifies it.
 */
export async function caEnrollmentJwt(resources: Resources, keys: SigningKeys, id: string, controllerUrl: string, now: number): Promise<string> {
  const ca = await resources.get('cas').repo.get(resources.store.db, id);
  if (!ca) throw notFound('CA', id);
  const key = keys.current;
  return signCompact(key.alg, key.privateKey, key.headers.jwt, {
    iss: controllerUrl,
    sub: ca.id,
    jti: ca.id,
    em: 'ca',
    iat: Math.floor(now / 1000),
    ctrls: [controllerUrl],
  });
}
