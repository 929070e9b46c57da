import { describe, expect, it } from 'vitest';
import { canonicalHost, checkRedirectUriPattern, formatHostPort, isWildcardHost, parseHostPort } from './address.js';

describe('parseHostPort', () => {
  it.each([
    ['127.0.0.1:1280', '127.0.0.1', 1280],
    ['0.0.0.0:1', '0.0.0.0', 1],
    ['localhost:65535', 'localhost', 65535],
    ['ctrl.example.com:443', 'ctrl.example.com', 443],
    ['a-b.c1.example:8443', 'a-b.c1.example', 8443],
    ['[::1]:1280', '::1', 1280],
    ['[::]:1280', '::', 1280],
    ['[2001:db8::10]:443', '2001:db8::10', 443],
  ])('%s', (text, host, port) => {
    expect(parseHostPort(text, { allowPortZero: false })).toEqual({ host, port });
  });

  it('accepts port 0 only when allowed', () => {
    expect(parseHostPort('127.0.0.1:0', { allowPortZero: true })).toEqual({ host: '127.0.0.1', port: 0 });
    expect(() => parseHostPort('127.0.0.1:0', { allowPortZero: false })).toThrow(/port must be a number from 1 to 65535/);
  });

  it.each([
    ['', /must not be empty/],
    ['127.0.0.1', /has no port/],
    ['127.0.0.1:', /port must be a number/],
    ['127.0.0.1:65536', /port must be a number from 0 to 65535/],
    ['127.0.0.1:-1', /port must be a number from 0 to 65535/],
    ['127.0.0.1:12a', /port must be a number/],
    ['127.0.0.1:000001', /port must be a number/],
    [':1280', /has no host/],
    ['::1:1280', /must be written in brackets/],
    ['[::1]', /has no port/],
    ['[::1:1280', /no closing/],
    ['[::1]1280', /has no port/],
    ['[1.2.3.4]:80', /not an IPv6 address/],
    ['[fe80::1%eth0]:80', /zone identifiers/],
    ['1.2.3.999:80', /not a valid IPv4 address/],
    ['1.2.3:80', /not a valid IPv4 address/],
    ['-bad.example:80', /not a valid host name/],
    ['bad_name:80', /not a valid host name/],
    ['a..b:80', /not a valid host name/],
    ['http://x:80', /not a valid host name/],
    [`${'a'.repeat(64)}.example:80`, /not a valid host name/],
    [`${'a'.repeat(301)}:80`, /at most 300 characters/],
  ])('rejects %j', (text, message) => {
    expect(() => parseHostPort(text, { allowPortZero: true })).toThrow(message);
  });
});

describe('host helpers', () => {
  it('brackets IPv6 hosts when formatting', () => {
    expect(formatHostPort('::1', 80)).toBe('[::1]:80');
    expect(formatHostPort('localhost', 80)).toBe('localhost:80');
  });

  it.each([
    ['0.0.0.0', true],
    ['::', true],
    ['0:0::0', true],
    ['::1', false],
    ['127.0.0.1', false],
    ['localhost', false],
  ])('isWildcardHost(%s) = %s', (host, wildcard) => {
    expect(isWildcardHost(host)).toBe(wildcard);
  });

  it('compares hosts independently of spelling', () => {
    expect(canonicalHost('0:0:0:0:0:0:0:1')).toBe(canonicalHost('::1'));
    expect(canonicalHost('LocalHost')).toBe('localhost');
  });
});

describe('checkRedirectUriPattern', () => {
  it.each([
    'http://127.0.0.1:*/auth/callback',
    'http://localhost:*/callback',
    'https://app.example.com/oidc/callback',
    'https://app.example.com:8443/cb?x=1',
    'http://[::1]:*/cb',
    'http://127.0.0.1:*',
  ])('accepts %s', (uri) => {
    expect(() => checkRedirectUriPattern(uri)).not.toThrow();
  });

  it.each([
    ['', /must not be empty/],
    ['/callback', /not an absolute URL/],
    ['127.0.0.1:8080/cb', /not an absolute URL/],
    ['ftp://host/cb', /scheme must be http or https/],
    ['javascript://x/%0aalert(1)', /scheme must be http or https/],
    ['http://user:pw@host/cb', /user information/],
    ['http://host/cb#frag', /fragment/],
    ['http://*.example.com/cb', /only allowed as the port/],
    ['http://host:8*/cb', /only allowed as the port/],
    ['http://host/*', /only allowed as the port/],
    ['http://host:99999/cb', /not a valid URL/],
    ['http://:80/cb', /not a valid URL|has no host/],
    [`https://h/${'a'.repeat(2048)}`, /at most 2048 characters/],
  ])('rejects %j', (uri, message) => {
    expect(() => checkRedirectUriPattern(uri)).toThrow(message);
  });
});
