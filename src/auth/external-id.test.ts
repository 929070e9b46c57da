// The external id claim of a CA, rule by rule (location, matcher, parser, index), against names as a
// certificate carries them; and those names read from a real certificate.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { X509Certificate, webcrypto } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { certificateNames, type CertificateNames } from '../pki/names.js';
import { readExternalId, type ExternalIdClaim, type ExternalIdReading } from './external-id.js';

const names: CertificateNames = {
  commonName: 'device-7.example.org',
  uris: ['https://example.org/x', 'spiffe://example.org/workload/a', 'SPIFFE://example.org/workload/b'],
  emails: ['alice@example.org', 'bob@corp.example', 'carol|ops@example.org'],
};

const claim = (c: Partial<ExternalIdClaim>): ExternalIdClaim => ({
  index: 0,
  location: 'COMMON_NAME',
  matcher: 'ALL',
  matcherCriteria: '',
  parser: 'NONE',
  parserCriteria: '',
  ...c,
});

const found = (externalId: string): ExternalIdReading => ({ kind: 'found', externalId });

describe('readExternalId', () => {
  it.each<[string, Partial<ExternalIdClaim>, ExternalIdReading | 'missing', CertificateNames?]>([
    ['the whole common name', {}, found('device-7.example.org')],
    ['a common name with its prefix cut', { matcher: 'PREFIX', matcherCriteria: 'device-' }, found('7.example.org')],
    ['a common name with its suffix cut', { matcher: 'SUFFIX', matcherCriteria: '.example.org' }, found('device-7')],
    ['a common name without the prefix', { matcher: 'PREFIX', matcherCriteria: 'host-' }, 'missing'],
    ['a common name split, second part', { parser: 'SPLIT', parserCriteria: '.', index: 1 }, found('example')],
    ['a common name split beyond its parts', { parser: 'SPLIT', parserCriteria: '.', index: 3 }, 'missing'],
    ['no common name at all', {}, 'missing', { commonName: '', uris: [], emails: [] }],
    ['the first URI', { location: 'SAN_URI' }, found('https://example.org/x')],
    ['the second URI', { location: 'SAN_URI', index: 1 }, found('spiffe://example.org/workload/a')],
    // The scheme compares as URL parsers keep it, lower-cased; the value stays whole.
    ['URIs of a scheme', { location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe', index: 1 }, found('SPIFFE://example.org/workload/b')],
    ['URIs of a scheme none has', { location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'urn' }, 'missing'],
    ['URIs of a scheme, split', { location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe', parser: 'SPLIT', parserCriteria: '/', index: 4 }, found('a')],
    ['a URI read with a prefix matcher', { location: 'SAN_URI', matcher: 'PREFIX', matcherCriteria: 'spiffe' }, 'missing'],
    ['the first email', { location: 'SAN_EMAIL' }, found('alice@example.org')],
    ['emails of a domain, suffix cut', { location: 'SAN_EMAIL', matcher: 'SUFFIX', matcherCriteria: '@corp.example' }, found('bob')],
    ['emails with a prefix', { location: 'SAN_EMAIL', matcher: 'PREFIX', matcherCriteria: 'carol|' }, found('ops@example.org')],
    ['emails split, across values', { location: 'SAN_EMAIL', parser: 'SPLIT', parserCriteria: '@', index: 3 }, found('corp.example')],
    ['an email read with a scheme matcher', { location: 'SAN_EMAIL', matcher: 'SCHEME', matcherCriteria: 'mailto' }, 'missing'],
    ['an index beyond the emails', { location: 'SAN_EMAIL', index: 3 }, 'missing'],
    ['a value that resolves to nothing', { matcher: 'PREFIX', matcherCriteria: 'device-7.example.org' }, 'missing'],
    ['a split without a separator', { parser: 'SPLIT' }, 'missing'],
    ['a prefix matcher without a prefix', { matcher: 'PREFIX', matcherCriteria: '' }, 'missing'],
    ['a suffix matcher without a suffix', { matcher: 'SUFFIX', matcherCriteria: '' }, 'missing'],
    ['a scheme matcher without a scheme', { location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: '' }, 'missing'],
    ['a scheme is at the start of a URI only', { location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe' }, 'missing', { commonName: 'x', uris: ['/spiffe:a'], emails: [] }],
  ])('%s', (_name, c, expected, from = names) => {
    const reading = readExternalId(claim(c), from);
    if (expected === 'missing') expect(reading.kind).toBe('missing');
    else expect(reading).toEqual(expected);
  });

  // A missing id is logged with its reason, for the operator who set the claim up.
  it.each<[string, Partial<ExternalIdClaim>, RegExp, CertificateNames?]>([
    ['a URI read with a prefix matcher', { location: 'SAN_URI', matcher: 'PREFIX', matcherCriteria: 'spiffe' }, /^matcher PREFIX cannot read location SAN_URI$/],
    ['an email read with a scheme matcher', { location: 'SAN_EMAIL', matcher: 'SCHEME', matcherCriteria: 'mailto' }, /^matcher SCHEME with criteria "mailto" cannot read location SAN_EMAIL$/],
    ['a split without a separator', { parser: 'SPLIT' }, /^parser SPLIT needs a separator$/],
    ['an index beyond the emails', { location: 'SAN_EMAIL', index: 3 }, /^the certificate has no value 3 for the claim \(3 found\)$/],
    ['a value that resolves to nothing', { matcher: 'PREFIX', matcherCriteria: 'device-7.example.org' }, /^the claim resolves to an empty value$/],
  ])('says why it is missing: %s', (_name, c, reason, from = names) => {
    const reading = readExternalId(claim(c), from);
    expect(reading.kind === 'missing' && reading.reason).toMatch(reason);
  });

  it('no claim, or one emptied of its location, asks for nothing', () => {
    expect(readExternalId(null, names)).toEqual({ kind: 'none' });
    expect(readExternalId(undefined, names)).toEqual({ kind: 'none' });
    expect(readExternalId(claim({ location: '' as ExternalIdClaim['location'] }), names)).toEqual({ kind: 'none' });
  });
});

describe('certificateNames', () => {
  it('reads the common name and the URI and email SANs of a certificate, in order', async () => {
    const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
    const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
    const cert = await x509.X509CertificateGenerator.createSelfSigned(
      {
        serialNumber: '01',
        name: 'CN=first, O=org, CN=last\\, with comma',
        notBefore: new Date(Date.now() - 60_000),
        notAfter: new Date(Date.now() + 60_000),
        keys,
        signingAlgorithm: alg,
        extensions: [
          new x509.SubjectAlternativeNameExtension([
            { type: 'url', value: 'spiffe://example.org/a' },
            { type: 'dns', value: 'host.example.org' },
            { type: 'email', value: 'a@example.org' },
            { type: 'url', value: 'urn:uuid:1' },
          ]),
        ],
      },
      webcrypto,
    );
    expect(certificateNames(new X509Certificate(Buffer.from(cert.rawData)))).toEqual({
      commonName: 'last, with comma',
      uris: ['spiffe://example.org/a', 'urn:uuid:1'],
      emails: ['a@example.org'],
    });
  });
});
