// An external identity provider for tests: oidc-provider (a widely used OpenID provider) on a free
// loopback port over http, with its real JWKS endpoint. Clients get JWT access tokens from it with
// the client credentials grant (audience AUDIENCE, `sub` the client id): what an organisation's
// identity provider hands its users and devices.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import Provider from 'oidc-provider';

export const AUDIENCE = 'overlay-controller';

export interface ExternalIdp {
  issuer: string;
  jwksUrl: string;
  /** How many times its JWKS has been asked for. */
  jwksFetches(): number;
  /** A fresh JWT access token of a client (its `sub` is the client id). */
  token(clientId: string): Promise<string>;
  close(): Promise<void>;
}

/** Starts the provider with one confidential client per id given. */
export async function startExternalIdp(clientIds: readonly string[]): Promise<ExternalIdp> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const issuer = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const secret = randomBytes(24).toString('base64url');
  const signing = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
  const provider = new Provider(issuer, {
    clients: clientIds.map((id) => ({
      client_id: id,
      client_secret: secret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_post',
      id_token_signed_response_alg: 'ES256',
    })),
    jwks: { keys: [{ ...signing, kid: 'idp-key-1', alg: 'ES256', use: 'sig' }] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => 'urn:overlay:controller',
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: 'overlay',
          audience: AUDIENCE,
          accessTokenFormat: 'jwt',
          accessTokenTTL: 600,
          jwt: { sign: { alg: 'ES256' } },
        }),
      },
    },
  });
  const callback = provider.callback();
  let jwksFetches = 0;
  server.on('request', (req, res) => {
    if (req.url === '/jwks') jwksFetches++;
    void callback(req, res);
  });
  return {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    jwksFetches: () => jwksFetches,
    async token(clientId) {
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret, scope: 'overlay' }).toString(),
      });
      const body = (await res.json()) as { access_token?: string };
      if (res.status !== 200 || !body.access_token) throw new Error(`the identity provider refused a token: ${res.status} ${JSON.stringify(body)}`);
      return body.access_token;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A config file allowing JWKS fetches over http from loopback (the provider above); answers its path. */
export function configAllowingLoopbackJwks(dir: string): string {
  const path = join(dir, 'overlay-ext-jwt.yml');
  writeFileSync(path, 'edge:\n  externalJwtSigners:\n    allowHttpLoopback: true\n');
  return path;
}
