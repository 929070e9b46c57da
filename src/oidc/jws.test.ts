// Compact JWS parsing and checking at its edges: the length bound to the character, where the dots
// may be, each part's alphabet, headers and payloads that are not objects, each header member we
// refuse, and signatures of the wrong size, key or key type (the round trip with jose: oidc.test.ts).
import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { encodeHeader, MAX_JWS_LENGTH, parseCompact, signCompact, verifySignature } from './jws.js';

const b = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const HEADER = b({ alg: 'ES256', kid: 'k1' });
const PAYLOAD = b({ sub: 'x' });
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });

describe('parseCompact', () => {
  it('answers the decoded header and payload, the signing input and the signature bytes', () => {
    expect(parseCompact(`${HEADER}.${PAYLOAD}.c2ln`)).toEqual({
      header: { alg: 'ES256', kid: 'k1' },
      payload: { sub: 'x' },
      signingInput: `${HEADER}.${PAYLOAD}`,
      signature: Buffer.from('sig'),
    });
    expect(parseCompact(`${b({ alg: 'RS256', kid: 'k2', typ: 'JWT' })}.${PAYLOAD}.c2ln`)?.header).toEqual({ alg: 'RS256', kid: 'k2', typ: 'JWT' });
  });

  it(`takes ${MAX_JWS_LENGTH} characters and refuses one more`, () => {
    const at = (n: number) => `${HEADER}.${PAYLOAD}.${'A'.repeat(n - HEADER.length - PAYLOAD.length - 2)}`;
    expect(at(MAX_JWS_LENGTH)).toHaveLength(MAX_JWS_LENGTH);
    expect(parseCompact(at(MAX_JWS_LENGTH))).toBeDefined();
    expect(parseCompact(at(MAX_JWS_LENGTH + 1))).toBeUndefined();
  });

  it.each([
    ['an empty header part', `.${PAYLOAD}.c2ln`],
    ['an empty payload part', `${HEADER}..c2ln`],
    ['an empty signature part', `${HEADER}.${PAYLOAD}.`],
    ['a fourth part', `${HEADER}.${PAYLOAD}.c2ln.c2ln`],
    ['a trailing dot after the signature', `${HEADER}.${PAYLOAD}.c2ln.`],
    ['two parts', `${HEADER}.${PAYLOAD}`],
    // Without a dot the three parts would overlap: header and payload both the token less its last character.
    ['no dot at all', `${HEADER}A`],
    // Padding is not base64url, though a lenient decoder would read the same header or payload.
    ['a header not base64url', `${HEADER}=.${PAYLOAD}.c2ln`],
    ['a payload not base64url', `${HEADER}.${PAYLOAD}=.c2ln`],
    ['a header of the base64 alphabet', `${HEADER}+.${PAYLOAD}.c2ln`],
    ['a signature not base64url', `${HEADER}.${PAYLOAD}.c2ln=`],
    ['a header not JSON', `${Buffer.from('{"alg":').toString('base64url')}.${PAYLOAD}.c2ln`],
    ['a payload not JSON', `${HEADER}.${Buffer.from('{"sub":').toString('base64url')}.c2ln`],
    ['a null header', `${b(null)}.${PAYLOAD}.c2ln`],
    ['an array header', `${b([{ alg: 'ES256', kid: 'k1' }])}.${PAYLOAD}.c2ln`],
    ['a null payload', `${HEADER}.${b(null)}.c2ln`],
    ['an array payload', `${HEADER}.${b([])}.c2ln`],
    ['a string payload', `${HEADER}.${b('x')}.c2ln`],
    ['an algorithm we do not use', `${b({ alg: 'PS256', kid: 'k1' })}.${PAYLOAD}.c2ln`],
    ['a key id that is not a string', `${b({ alg: 'ES256', kid: 1 })}.${PAYLOAD}.c2ln`],
    ...['crit', 'jwk', 'jku', 'x5u', 'x5c', 'b64'].map((member) => [`a header with ${member}`, `${b({ alg: 'ES256', kid: 'k1', [member]: null })}.${PAYLOAD}.c2ln`]),
  ])('refuses %s', (_name, token) => {
    expect(parseCompact(token)).toBeUndefined();
  });
});

describe('verifySignature', () => {
  it('makes and checks ES256 signatures of 64 bytes (r | s), not DER', () => {
    const token = signCompact('ES256', ec.privateKey, encodeHeader({ alg: 'ES256', kid: 'k1' }), { sub: 'x' });
    const parsed = parseCompact(token)!;
    expect(parsed.signature).toHaveLength(64);
    expect(verifySignature(parsed, ec.publicKey)).toBe(true);
    for (const signature of [parsed.signature.subarray(1), Buffer.concat([parsed.signature, Buffer.alloc(1)])]) {
      expect(verifySignature({ ...parsed, signature }, ec.publicKey)).toBe(false);
    }
    expect(verifySignature({ ...parsed, signingInput: `${parsed.signingInput}x` }, ec.publicKey)).toBe(false);
  });

  it('checks RS256 signatures; a wrong key, or a key of another type, is a bad signature', () => {
    const token = signCompact('RS256', rsa.privateKey, encodeHeader({ alg: 'RS256', kid: 'k2' }), { sub: 'x' });
    const parsed = parseCompact(token)!;
    expect(parsed.signature).toHaveLength(256);
    expect(verifySignature(parsed, rsa.publicKey)).toBe(true);
    expect(verifySignature(parsed, generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey)).toBe(false);
    expect(verifySignature(parsed, ec.publicKey)).toBe(false);
    // An ES256 header over an RSA signature, and an RS256 header over an ES256 one.
    expect(verifySignature({ ...parsed, header: { ...parsed.header, alg: 'ES256' } }, ec.publicKey)).toBe(false);
    const es = parseCompact(signCompact('ES256', ec.privateKey, HEADER, { sub: 'x' }))!;
    expect(verifySignature({ ...es, header: { ...es.header, alg: 'RS256' } }, ec.publicKey)).toBe(false);
    // A key the check cannot use at all (node:crypto throws) is a bad signature too.
    expect(verifySignature(es, generateKeyPairSync('x25519').publicKey)).toBe(false);
    expect(verifySignature(es, generateKeyPairSync('ed25519').publicKey)).toBe(false);
  });
});
