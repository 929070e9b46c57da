// Certificate path validation in code: whether a leaf chains, through certificates the client
// presented, to one of a set of trust anchors. The TLS layer asks for client certificates but does
// not judge them (its CA list is fixed when the server starts, while third-party CAs come and go at
// runtime), so every certificate login decides here. Each link is checked by signature, not by
// names alone: a certificate whose subject merely matches a trusted CA's name links nothing.
import type { X509Certificate } from 'node:crypto';
import { pathLengthOf } from './names.js';

/** Certificates of a presented chain looked at beyond the leaf; the rest are ignored. */
export const MAX_PRESENTED = 10;
/** Links between the leaf and an anchor at most. */
export const MAX_DEPTH = 8;

export interface TrustAnchor<T> {
  cert: X509Certificate;
  /** What the anchor stands for (the network PKI, a CA's id). */
  tag: T;
}

export interface VerifiedChain<T> {
  anchor: TrustAnchor<T>;
  /** The presented CA certificates between the leaf and the anchor, leaf side first. */
  intermediates: X509Certificate[];
}

export function validAt(cert: X509Certificate, now: number): boolean {
  return Date.parse(cert.validFrom) <= now && now <= Date.parse(cert.validTo);
}

/** Whether `parent` signed `child`: a CA certificate whose name and key identifiers the child names as its issuer, and whose key signed it. */
export function signedBy(child: X509Certificate, parent: X509Certificate): boolean {
  if (!parent.ca || !child.checkIssued(parent)) return false;
  try {
    return child.verify(parent.publicKey);
  } catch {
    return false;
  }
}

/** Path lengths read once per certificate object (a presented chain is parsed once per connection). */
const pathLengths = new WeakMap<X509Certificate, number | undefined>();

/**
 * Whether a CA may have `below` CA certificates under it in a path (RFC 5280 4.2.1.9,
 * pathLenConstraint), as the established controller's Go verifier checks for every CA of a chain.
 */
export function allowsCasBelow(ca: X509Certificate, below: number): boolean {
  if (!pathLengths.has(ca)) pathLengths.set(ca, pathLengthOf(ca));
  const limit = pathLengths.get(ca);
  return limit === undefined || below <= limit;
}

/** signedBy, with the issuer valid at `now`. */
export function issuedBy(child: X509Certificate, parent: X509Certificate, now: number): boolean {
  return validAt(parent, now) && signedBy(child, parent);
}

/**
 * The path from `leaf` to one of `anchors` through the CA certificates of `presented` (in any
 * order), or undefined when there is none. Every CA of the path, the anchor included, allows the CAs
 * below it (path length constraints). The leaf's own validity is not judged here: the auth policy
 * decides whether an expired certificate may log in. Anchors are tried in order at each link.
 */
export function verifyChain<T>(
  leaf: X509Certificate,
  presented: readonly X509Certificate[],
  anchors: readonly TrustAnchor<T>[],
  now: number,
): VerifiedChain<T> | undefined {
  const candidates = presented.slice(0, MAX_PRESENTED).filter((c) => c.ca && c.fingerprint256 !== leaf.fingerprint256);
  const used = new Set<number>();
  const path: X509Certificate[] = [];
  const search = (current: X509Certificate): VerifiedChain<T> | undefined => {
    for (const anchor of anchors) {
      if (issuedBy(current, anchor.cert, now) && allowsCasBelow(anchor.cert, path.length)) return { anchor, intermediates: [...path] };
    }
    if (path.length >= MAX_DEPTH) return undefined;
    for (const [i, candidate] of candidates.entries()) {
      if (used.has(i) || !issuedBy(current, candidate, now) || !allowsCasBelow(candidate, path.length)) continue;
      used.add(i);
      path.push(candidate);
      const found = search(candidate);
      if (found) return found;
      path.pop();
      used.delete(i);
    }
    return undefined;
  };
  return search(leaf);
}
