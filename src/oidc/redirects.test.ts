// Unit tests of the redirect URI guard: the default loopback patterns, configured patterns (ports,
// exact paths, a trailing slash meaning any path), patterns that are not absolute http(s) URLs, the
// URIs refused whatever the patterns (too long, user info, fragments), and patterns that change
// while running.
import { describe, expect, it, vi } from 'vitest';
import { DEFAULT_REDIRECT_PATTERNS, MAX_REDIRECT_URI_LENGTH, RedirectPolicy, withQuery } from './redirects.js';

/** A policy of the defaults and `configured`, without patterns that change. */
const fixed = (configured: readonly string[] = []) => new RedirectPolicy(configured, () => []);

describe('redirect URI patterns', () => {
  const policy = fixed(['https://app.example.com:*/cb', 'http://[::1]:8080', 'https://x.example.com/p?a=1']);
  it.each([
    ['http://127.0.0.1:1234/cb', true],
    ['http://127.0.0.1/', true],
    ['http://localhost:1/a/b?c=d', true],
    ['http://LOCALHOST:1/a', true],
    ['HTTP://127.0.0.1:1/cb', true],
    ['https://127.0.0.1:1234/cb', false],
    ['http://127.0.0.2:1234/cb', false],
    ['http://localhost.evil.com:1/cb', false],
    ['http://user:pw@127.0.0.1:1/cb', false],
    ['http://user@127.0.0.1:1/cb', false],
    ['http://:pw@127.0.0.1:1/cb', false],
    ['http://127.0.0.1:1/cb#frag', false],
    ['http://127.0.0.1:1/cb#', false],
    ['javascript:alert(1)', false],
    ['ftp://127.0.0.1:1/cb', false],
    ['/relative', false],
    ['', false],
    ['https://app.example.com:8443/cb', true],
    ['https://app.example.com/cb', true],
    ['https://app.example.com/cb?x=1', false],
    ['https://app.example.com/cb/', false],
    ['https://app.example.com/other', false],
    ['http://app.example.com:8443/cb', false],
    ['http://[::1]:8080/anything', true],
    ['http://[0:0::1]:8080/x', true],
    ['http://[::1]:8081/anything', false],
    ['http://[::1]/anything', false],
    ['https://x.example.com/p?a=1', true],
    ['https://x.example.com/p?a=2', false],
    ['https://x.example.com/p', false],
    ['https://x.example.com/q?a=1', false],
    ['https://x.example.com:443/p?a=1', true],
    ['https://x.example.com:8443/p?a=1', false],
  ])('%s → %s', (uri, allowed) => {
    expect(policy.allows(uri)).toBe(allowed);
  });

  it('the defaults are the loopback callbacks over http', () => {
    expect(DEFAULT_REDIRECT_PATTERNS).toEqual(['http://127.0.0.1:*', 'http://localhost:*']);
    expect(fixed().allows('http://localhost:65535/x')).toBe(true);
  });

  it(`a URI of ${MAX_REDIRECT_URI_LENGTH} characters is allowed, one more is not`, () => {
    const prefix = 'http://127.0.0.1:1/';
    const longest = prefix + 'a'.repeat(MAX_REDIRECT_URI_LENGTH - prefix.length);
    expect(longest).toHaveLength(2048);
    expect(policy.allows(longest)).toBe(true);
    expect(policy.allows(`${longest}a`)).toBe(false);
  });

  it('refuses what is not a string, even when it reads like an allowed URI', () => {
    const lookalike = { toString: () => 'http://127.0.0.1:1/cb', length: 21 } as unknown as string;
    expect(policy.allows(lookalike)).toBe(false);
    expect(policy.allows(undefined as unknown as string)).toBe(false);
  });

  it('a pattern without a port stands for the default port of its scheme', () => {
    const p = fixed(['http://plain.example.com/cb', 'https://secure.example.com']);
    expect(p.allows('http://plain.example.com/cb')).toBe(true);
    expect(p.allows('http://plain.example.com:80/cb')).toBe(true);
    expect(p.allows('http://plain.example.com:8080/cb')).toBe(false);
    expect(p.allows('http://plain.example.com:443/cb')).toBe(false);
    expect(p.allows('https://secure.example.com:443/any')).toBe(true);
    expect(p.allows('https://secure.example.com:80/any')).toBe(false);
  });

  it('a pattern with a port allows that port only', () => {
    const p = fixed(['https://port.example.com:8443']);
    expect(p.allows('https://port.example.com:8443/cb')).toBe(true);
    expect(p.allows('https://port.example.com/cb')).toBe(false);
    expect(p.allows('https://port.example.com:8444/cb')).toBe(false);
  });

  it('a trailing slash means any path, like no path at all', () => {
    const p = fixed(['https://slash.example.com/', 'https://bare.example.com:*']);
    for (const host of ['slash.example.com', 'bare.example.com']) {
      expect(p.allows(`https://${host}/`)).toBe(true);
      expect(p.allows(`https://${host}/deep/path?q=1`)).toBe(true);
    }
    expect(p.allows('https://bare.example.com:9/x')).toBe(true);
    expect(p.allows('https://slash.example.com:9/x')).toBe(false);
  });

  it('a pattern with a path or a query must be met exactly', () => {
    const p = fixed(['https://exact.example.com/a/', 'https://query.example.com?x=1']);
    expect(p.allows('https://exact.example.com/a/')).toBe(true);
    expect(p.allows('https://exact.example.com/a')).toBe(false);
    expect(p.allows('https://exact.example.com/a/b')).toBe(false);
    expect(p.allows('https://query.example.com/?x=1')).toBe(true);
    expect(p.allows('https://query.example.com/')).toBe(false);
    expect(p.allows('https://query.example.com/y?x=1')).toBe(false);
  });

  it.each([
    ['no scheme', 'one.example.com', 'http://one.example.com/'],
    ['no scheme, wildcard port', 'one.example.com:*', 'http://one.example.com:1/'],
    ['text before the scheme', '1http://one.example.com', 'http://one.example.com/'],
    ['a space before the scheme', ' http://one.example.com', 'http://one.example.com/'],
    ['a scheme not starting with a letter', '+http://one.example.com', 'http://one.example.com/'],
    ['no host', 'http://', 'http://one.example.com/'],
    ['a host that is not one', 'http://exa mple.com', 'http://exa%20mple.com/'],
    ['an unclosed IPv6 host', 'http://[::1:*', 'http://[::1]:1/'],
    ['a port that is not a number', 'http://one.example.com:x', 'http://one.example.com/'],
    ['ftp', 'ftp://one.example.com', 'ftp://one.example.com/'],
    ['ftp with a wildcard port', 'ftp://one.example.com:*', 'ftp://one.example.com:21/'],
    ['a scheme of its own', 'myapp://one.example.com/cb', 'myapp://one.example.com/cb'],
    ['a fragment after the host', 'http://one.example.com#x', 'http://one.example.com/'],
  ])('a pattern with %s (%s) allows nothing, and the others still work', (_what, pattern, uri) => {
    const p = fixed([pattern, 'https://good.example.com/cb']);
    expect(p.allows(uri)).toBe(false);
    expect(p.allows('http://elsewhere.example.com/')).toBe(false);
    expect(p.allows('https://good.example.com/cb')).toBe(true);
    expect(p.allows('http://127.0.0.1:1/cb')).toBe(true);
  });

  it('patterns that change while running: asked for on every check, the current list applies', () => {
    let current: readonly string[] = ['https://live.example.com'];
    const p = new RedirectPolicy(['https://static.example.com'], () => current);
    expect(p.allows('https://live.example.com/cb')).toBe(true);
    expect(p.allows('https://static.example.com/cb')).toBe(true);
    expect(p.allows('https://other.example.com/cb')).toBe(false);
    current = ['https://other.example.com', 'not a pattern'];
    expect(p.allows('https://live.example.com/cb')).toBe(false);
    expect(p.allows('https://other.example.com/cb')).toBe(true);
    expect(p.allows('https://nowhere.example.com/cb')).toBe(false);
    current = [];
    expect(p.allows('https://other.example.com/cb')).toBe(false);
    expect(p.allows('https://static.example.com/cb')).toBe(true);
    expect(p.allows('http://127.0.0.1:1/cb')).toBe(true);
  });

  it('patterns that change are parsed once per new list, not on every check', () => {
    const list = ['https://live.example.com'];
    const parsed = vi.spyOn(list, 'map');
    const p = new RedirectPolicy([], () => list);
    for (let i = 0; i < 3; i++) expect(p.allows('https://live.example.com/cb')).toBe(true);
    expect(parsed).toHaveBeenCalledTimes(1);
  });
});

describe('withQuery', () => {
  it('keeps the existing query and leaves out what is undefined', () => {
    expect(withQuery('http://127.0.0.1:1/cb?a=1', { code: 'c', state: undefined, iss: 'https://h:1/oidc' })).toBe(
      'http://127.0.0.1:1/cb?a=1&code=c&iss=https%3A%2F%2Fh%3A1%2Foidc',
    );
    expect(withQuery('http://127.0.0.1:1/cb', {})).toBe('http://127.0.0.1:1/cb');
  });
});
