// host:port addresses of listeners and redirect URI patterns of the OIDC client. Functions here throw
// a plain Error carrying only the reason; the loader prefixes the configuration key.

import { isIPv4, isIPv6 } from 'node:net';

export interface HostPort {
  /** DNS name, IPv4 address, or IPv6 address without brackets. */
  host: string;
  port: number;
}

const MAX_ADDRESS_LENGTH = 300;
const DNS_LABEL = /^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/;

/**
 * Parses `host:port` where host is a DNS name, an IPv4 address or a bracketed IPv6 address
 * (`[::1]:1280`). Port 0 ("any free port") only when allowPortZero is set.
 */
export function parseHostPort(text: string, options: { allowPortZero: boolean }): HostPort {
  if (typeof text !== 'string') throw new Error('must be a string in the form host:port');
  if (text.length === 0) throw new Error('must not be empty; expected host:port');
  if (text.length > MAX_ADDRESS_LENGTH) throw new Error(`must be at most ${MAX_ADDRESS_LENGTH} characters`);
  const shown = JSON.stringify(text);

  let host: string;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) throw new Error(`${shown} has no closing "]"`);
    host = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (!rest.startsWith(':')) throw new Error(`${shown} has no port; expected e.g. [::1]:1280`);
    portText = rest.slice(1);
    if (host.includes('%')) throw new Error(`${shown}: IPv6 zone identifiers are not supported`);
    if (!isIPv6(host)) throw new Error(`${shown}: "${host}" is not an IPv6 address`);
  } else {
    const colon = text.lastIndexOf(':');
    if (colon < 0) throw new Error(`${shown} has no port; expected host:port, e.g. 127.0.0.1:1280`);
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
    if (isIPv6(host)) throw new Error(`${shown}: an IPv6 address must be written in brackets, e.g. [::1]:1280`);
    if (host.includes(':')) throw new Error(`${shown}: "${host}" is not a valid host name; expected host:port`);
    if (host === '') throw new Error(`${shown} has no host (use 0.0.0.0 or [::] for all interfaces)`);
    checkHostName(host, shown);
  }

  const port = Number(portText);
  if (!/^\d{1,5}$/.test(portText) || port > 65535 || (port === 0 && !options.allowPortZero)) {
    throw new Error(`${shown}: port must be a number from ${options.allowPortZero ? 0 : 1} to 65535`);
  }
  return { host, port };
}

function checkHostName(host: string, shown: string): void {
  // Dotted numbers are only accepted as a valid IPv4 address ("1.2.3.999" is a typo, not a name).
  if (/^[\d.]+$/.test(host)) {
    if (!isIPv4(host)) throw new Error(`${shown}: "${host}" is not a valid IPv4 address`);
    return;
  }
  if (host.length > 253 || !host.split('.').every((label) => DNS_LABEL.test(label))) {
    throw new Error(`${shown}: "${host}" is not a valid host name`);
  }
}

/** host:port with IPv6 hosts in brackets. */
export function formatHostPort(host: string, port: number): string {
  return isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
}

/** 0.0.0.0 or the IPv6 unspecified address in any spelling (::, 0:0::0, ...). */
export function isWildcardHost(host: string): boolean {
  return canonicalHost(host) === '0.0.0.0' || canonicalHost(host) === '[::]';
}

/** A spelling-independent form of a host, for comparing addresses. */
export function canonicalHost(host: string): string {
  if (isIPv6(host)) return new URL(`http://[${host}]/`).hostname;
  return host.toLowerCase();
}

const MAX_REDIRECT_URI_LENGTH = 2048;

/**
 * Checks a redirect URI pattern of the OIDC client: an absolute http or https URL without user info
 * or fragment. `*` is allowed only as the whole port, so a pattern like http://127.0.0.1:* with a
 * path accepts a callback on any port of that host.
 */
export function checkRedirectUriPattern(text: string): void {
  if (typeof text !== 'string') throw new Error('must be a string');
  if (text.length === 0) throw new Error('must not be empty');
  if (text.length > MAX_REDIRECT_URI_LENGTH) throw new Error(`must be at most ${MAX_REDIRECT_URI_LENGTH} characters`);
  const shown = JSON.stringify(text);
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\/([^/?#]*)(.*)$/.exec(text);
  if (!m) throw new Error(`${shown} is not an absolute URL (expected e.g. http://127.0.0.1:*/callback)`);
  const [, scheme = '', authority = '', rest = ''] = m;
  if (!/^https?$/i.test(scheme)) throw new Error(`${shown}: the scheme must be http or https`);
  if (authority.includes('@')) throw new Error(`${shown}: user information is not allowed`);
  if (rest.includes('#')) throw new Error(`${shown}: a fragment is not allowed`);
  // Replace a wildcard port by a real one so the URL parser can check the rest.
  const wildcardPort = /:\*$/.test(authority);
  const checked = wildcardPort ? authority.slice(0, -1) + '1' : authority;
  if (checked.includes('*') || rest.includes('*')) {
    throw new Error(`${shown}: "*" is only allowed as the port, e.g. http://127.0.0.1:*/callback`);
  }
  let url: URL;
  try {
    url = new URL(`${scheme}://${checked}${rest}`);
  } catch {
    throw new Error(`${shown} is not a valid URL`);
  }
  if (url.hostname === '') throw new Error(`${shown} has no host`);
}
