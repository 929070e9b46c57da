// The name of an identity a CA enrolls: its identityNameFormat with the placeholders filled in.
import { describe, expect, it } from 'vitest';
import { formatIdentityName } from './ca-enrollments.js';

const values = { caName: 'acme', caId: 'ca-1', commonName: 'sensor-7', requestedName: 'asked', identityId: 'id-9' };

describe('formatIdentityName', () => {
  it.each<[string | null, string]>([
    [null, 'acme-sensor-7'],
    ['', 'acme-sensor-7'],
    ['[caName]-[commonName]', 'acme-sensor-7'],
    ['[caId]/[identityId]', 'ca-1/id-9'],
    ['[requestedName]', 'asked'],
    ['[commonName][commonName]', 'sensor-7sensor-7'],
    ['fixed', 'fixed'],
    ['[unknown] [caname] [caName', '[unknown] [caname] [caName'],
  ])('%s → %s', (format, expected) => {
    expect(formatIdentityName(format, values)).toBe(expected);
  });

  it('replaces in one pass: a value reading like a placeholder stays as it is', () => {
    expect(formatIdentityName('[commonName]-[caName]', { ...values, commonName: '[caId]' })).toBe('[caId]-acme');
  });
});
