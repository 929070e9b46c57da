// The OAuth error objects: the status each code answers with unless told, and the RFC 6749 body.
import { describe, expect, it } from 'vitest';
import { OAuthError, type OAuthErrorCode } from './errors.js';

describe('OAuthError', () => {
  it.each<[OAuthErrorCode, number]>([
    ['invalid_request', 400],
    ['invalid_client', 401],
    ['invalid_grant', 400],
    ['unauthorized_client', 400],
    ['unsupported_grant_type', 400],
    ['unsupported_response_type', 400],
    ['invalid_scope', 400],
    ['temporarily_unavailable', 503],
  ])('%s answers %i unless a status is given', (code, status) => {
    expect(new OAuthError(code, 'why').status).toBe(status);
    expect(new OAuthError(code, 'why', 429).status).toBe(429);
  });

  it('renders {error, error_description} and keeps its headers', () => {
    const err = new OAuthError('invalid_client', 'the client is unknown', undefined, { 'www-authenticate': 'Basic realm="oidc"' });
    expect(err.body()).toEqual({ error: 'invalid_client', error_description: 'the client is unknown' });
    expect(err.headers).toEqual({ 'www-authenticate': 'Basic realm="oidc"' });
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('OAuthError');
    expect(err.message).toBe('the client is unknown');
  });
});
