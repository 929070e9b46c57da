// The external id a CA's externalIdClaim reads from a certificate it issued: where to look (the
// common name, URI SANs or email SANs), which values count (all, those with a prefix or suffix —
// which is cut off — or URIs of a scheme), how each is cut (kept whole, or split at a separator),
// and which of the resulting values is the id (index). These are the rules of the established
// controller (its x509-claims definitions): a certificate login of such a CA finds its identity by
// this id rather than by the certificate's fingerprint, so the certificate can be renewed.
// Pure: names in, an answer out.
import type { Static } from '@sinclair/typebox';
import type { ExternalIdClaimSchema } from '../resources/cas.js';
import type { CertificateNames } from '../pki/names.js';

export type ExternalIdClaim = Static<typeof ExternalIdClaimSchema>;

/** What a claim read from a certificate: nothing asked for, the id, or why it is missing. */
export type ExternalIdReading = { kind: 'none' } | { kind: 'found'; externalId: string } | { kind: 'missing'; reason: string };

/** A URI's scheme, lower-cased as URL parsers keep it; undefined when it has none. */
function schemeOf(uri: string): string | undefined {
  // Stryker: group 1 is always there when the expression matches, so `?.` after it changes nothing.
  return /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(uri)?.[1]?.toLowerCase();
}

/** The matched values, as the matcher passes them on: a prefix or suffix it asked for is cut off. */
function matching(claim: ExternalIdClaim, names: CertificateNames): string[] | string {
  const criteria = claim.matcherCriteria;
  if (claim.location === 'SAN_URI') {
    if (claim.matcher === 'ALL') return names.uris;
    // Stryker: no scheme is '' (one starts with a letter), so an empty criteria matches nothing either way.
    if (claim.matcher === 'SCHEME' && criteria !== '') return names.uris.filter((u) => schemeOf(u) === criteria);
    return `matcher ${claim.matcher} cannot read location SAN_URI`;
  }
  const values = claim.location === 'COMMON_NAME' ? [names.commonName] : names.emails;
  if (claim.matcher === 'ALL') return values;
  if (claim.matcher === 'PREFIX' && criteria !== '') return values.filter((v) => v.startsWith(criteria)).map((v) => v.slice(criteria.length));
  if (claim.matcher === 'SUFFIX' && criteria !== '') return values.filter((v) => v.endsWith(criteria)).map((v) => v.slice(0, v.length - criteria.length));
  return `matcher ${claim.matcher} with criteria "${criteria}" cannot read location ${claim.location}`;
}

/**
 * The external id `claim` reads from a certificate's names. No claim (or one without a location,
 * what an emptied claim leaves) asks for none; a claim whose index lies beyond the values found, or
 * that resolves to '', finds it missing.
 */
export function readExternalId(claim: ExternalIdClaim | null | undefined, names: CertificateNames): ExternalIdReading {
  if (!claim || (claim.location as string) === '') return { kind: 'none' };
  const matched = matching(claim, names);
  if (typeof matched === 'string') return { kind: 'missing', reason: matched };
  let values: string[];
  if (claim.parser === 'NONE') values = matched;
  // Stryker: the parser is NONE (above) or SPLIT, the only two the schema takes.
  else if (claim.parser === 'SPLIT' && claim.parserCriteria !== '') values = matched.flatMap((v) => v.split(claim.parserCriteria));
  else return { kind: 'missing', reason: `parser ${claim.parser} needs a separator` };
  const value = values[claim.index];
  if (value === undefined) return { kind: 'missing', reason: `the certificate has no value ${claim.index} for the claim (${values.length} found)` };
  if (value === '') return { kind: 'missing', reason: 'the claim resolves to an empty value' };
  return { kind: 'found', externalId: value };
}
