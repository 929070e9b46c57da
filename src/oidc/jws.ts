// Compact JWS for the provider's own tokens, signed and checked with node:crypto. jose (WebCrypto)
// costs about 160 µs per ES256 signature on Node 20 against 27 µs here, and the token endpoint signs
// two tokens per grant; jose still makes and publishes the JWKs (keys.ts) and the tests verify every
// token independently with jose and openid-client.
import { sign, verify, type KeyObject } from 'node:crypto';

export type JwsAlgorithm = 'ES256' | 'RS256';
export const JWS_ALGORITHMS: readonly JwsAlgorithm[] = ['ES256', 'RS256'];

export interface JwsHeader {
  alg: JwsAlgorithm;
  kid: string;
  typ?: string;
}

/** A token larger than this is not one of ours; it is refused before any parsing. */
export const MAX_JWS_LENGTH = 8192;

const B64URL = /^[A-Za-z0-9_-]+$/;

function signOptions(alg: JwsAlgorithm, key: KeyObject) {
  return alg === 'ES256' ? { key, dsaEncoding: 'ieee-p1363' as const } : key;
}

/** `header.payload.signature`, the header given already encoded (it is the same for every token of a key). */
export function signCompact(alg: JwsAlgorithm, key: KeyObject, encodedHeader: string, payload: object): string {
  const input = `${encodedHeader}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  const signature = sign('sha256', Buffer.from(input), signOptions(alg, key));
  return `${input}.${signature.toString('base64url')}`;
}

export function encodeHeader(header: JwsHeader): string {
  return Buffer.from(JSON.stringify(header)).toString('base64url');
}

export interface ParsedJws {
  header: JwsHeader & Record<string, unknown>;
  payload: Record<string, unknown>;
  signingInput: string;
  signature: Buffer;
}

/** Splits and decodes a compact JWS; undefined for anything malformed (never throws). */
export function parseCompact(token: string): ParsedJws | undefined {
  if (token.length > MAX_JWS_LENGTH) return undefined;
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  // Stryker: an empty part, or a dot after the second, also fails B64URL below, so only the whole test
  // is seen: it refuses a token without two dots, whose parts would otherwise overlap.
  if (first <= 0 || second <= first + 1 || second === token.length - 1 || token.indexOf('.', second + 1) !== -1) return undefined;
  const h = token.slice(0, first);
  const p = token.slice(first + 1, second);
  const s = token.slice(second + 1);
  if (!B64URL.test(h) || !B64URL.test(p) || !B64URL.test(s)) return undefined;
  let header: unknown;
  let payload: unknown;
  try {
    header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8'));
    payload = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
  } catch {
    // Stryker: falling through leaves the header undefined, which the object test below refuses.
    return undefined;
  }
  if (!isObject(header) || !isObject(payload)) return undefined;
  if (!JWS_ALGORITHMS.includes(header.alg as JwsAlgorithm) || typeof header.kid !== 'string') return undefined;
  // Nothing we issue needs an extension, a key in the header or a detached payload.
  for (const refused of ['crit', 'jwk', 'jku', 'x5u', 'x5c', 'b64']) if (refused in header) return undefined;
  return {
    header: header as ParsedJws['header'],
    payload,
    signingInput: `${h}.${p}`,
    signature: Buffer.from(s, 'base64url'),
  };
}

/** Whether the signature of a parsed JWS is that of `key` under the header's algorithm. */
export function verifySignature(parsed: ParsedJws, key: KeyObject): boolean {
  const alg = parsed.header.alg;
  // Stryker: node:crypto also refuses an r | s signature of another length (false, or a throw caught
  // below); this is the cheaper refusal.
  if (alg === 'ES256' && parsed.signature.length !== 64) return false;
  try {
    return verify('sha256', Buffer.from(parsed.signingInput), signOptions(alg, key), parsed.signature);
  } catch {
    return false;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
