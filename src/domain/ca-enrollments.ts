// What enrolling with a certificate of a third-party CA takes beyond the enrollment itself: whether
// the certificate the client presented in the TLS handshake chains to one of some CAs (by the chain
// code certificate logins use, and as a client certificate valid now), and the name an identity
// created through a CA gets: the CA's identityNameFormat filled in, then made unique with a
// six-digit counter, as the established controller names them.
import type { X509Certificate } from 'node:crypto';
import { parsePemCertificates, validAt, verifyChain, type TrustAnchor } from '../pki/index.js';
import { DEFAULT_IDENTITY_NAME_FORMAT } from '../resources/cas.js';
import type { EntityOf } from '../resources/index.js';
import { MAX_NAME } from '../resources/kit.js';
import type { Executor } from '../store/store.js';

type Ca = EntityOf<'cas'>;

/** The certificates a client presented in the TLS handshake: the leaf identifies it. */
export interface PresentedCertificates {
  peerCertificate?: X509Certificate;
  peerChain?: readonly X509Certificate[];
}

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const ANY_EXTENDED_KEY_USAGE = '2.5.29.37.0';

/** Whether a certificate may authenticate a client: no extended key usage says any use. */
function forClientAuth(cert: X509Certificate): boolean {
  const usages = cert.keyUsage as string[] | undefined;
  return usages === undefined || usages.includes(CLIENT_AUTH) || usages.includes(ANY_EXTENDED_KEY_USAGE);
}

/**
 * The CA among `cas` the presented leaf chains to (through the other presented certificates), when
 * the leaf is valid now and meant for client authentication; undefined otherwise. CAs are tried in
 * the order given.
 */
export function issuingCa(presented: PresentedCertificates, cas: readonly Ca[], now: number): Ca | undefined {
  const leaf = presented.peerCertificate;
  if (!leaf || !validAt(leaf, now) || !forClientAuth(leaf)) return undefined;
  const anchors: TrustAnchor<Ca>[] = [];
  for (const ca of cas) {
    let cert: X509Certificate | undefined;
    try {
      [cert] = parsePemCertificates(ca.certPem);
    } catch {
      continue;
    }
    if (cert) anchors.push({ cert, tag: ca });
  }
  return verifyChain(leaf, presented.peerChain ?? [], anchors, now)?.anchor.tag;
}

/** The values an identityNameFormat may name. */
export interface IdentityNameValues {
  caName: string;
  caId: string;
  commonName: string;
  requestedName: string;
  identityId: string;
}

const PLACEHOLDER = /\[(caName|caId|commonName|requestedName|identityId)\]/g;

/**
 * A CA's identityNameFormat with its placeholders replaced, in one pass: a value that itself reads
 * like a placeholder (a common name "[caId]") stays as it is.
 */
export function formatIdentityName(format: string | null | undefined, values: IdentityNameValues): string {
  const pattern = format === null || format === undefined || format === '' ? DEFAULT_IDENTITY_NAME_FORMAT : format;
  return pattern.replace(PLACEHOLDER, (_m, key: keyof IdentityNameValues) => values[key]);
}

/** Counters tried after the name itself before giving up. */
const MAX_NAME_COUNTER = 999_999;
const COUNTER_DIGITS = 6;

/**
 * `base` if no identity has that name, else `base` with the first free six-digit counter appended
 * (`name000001`, `name000002`, ...); cut to fit the name's length limit. Read in the write that
 * creates the identity, so the name is still free when it is taken.
 */
export async function uniqueIdentityName(ex: Executor, base: string): Promise<string> {
  const taken = async (name: string) => (await ex.selectFrom('identities').select('id').where('name', '=', name).executeTakeFirst()) !== undefined;
  const whole = base.slice(0, MAX_NAME);
  if (!(await taken(whole))) return whole;
  const stem = base.slice(0, MAX_NAME - COUNTER_DIGITS);
  for (let n = 1; n <= MAX_NAME_COUNTER; n++) {
    const name = stem + String(n).padStart(COUNTER_DIGITS, '0');
    if (!(await taken(name))) return name;
  }
  throw new Error(`no free identity name is left for ${base}`);
}
