// The peer of the refresh-grant benchmark: oidc-provider (a widely used Node OpenID provider) with its
// in-memory adapter, configured like overlay's provider (public client `overlay`, PKCE, ES256 ID
// tokens, refresh tokens rotated on every use), over HTTPS with the controller's server certificate.
// Prints one JSON line to stdout when it listens ({"ready":true,"url":...}).
//
//   node dist/bench/peer-server.js --pki-dir <controller data dir>/pki
//
// POST /bench/mint?n=<count> answers `count` fresh refresh tokens, each of its own grant, made with
// the provider's own models (the benchmark measures the refresh grant, not the login).
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Provider from 'oidc-provider';

const ACCOUNT = 'bench-account';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { 'pki-dir': { type: 'string' }, listen: { type: 'string', default: '127.0.0.1' } } });
  const pki = values['pki-dir'];
  if (!pki) throw new Error('--pki-dir is required');
  const key = readFileSync(join(pki, 'server.key.pem'), 'utf8');
  const cert = readFileSync(join(pki, 'server.cert.pem'), 'utf8') + readFileSync(join(pki, 'signing-ca.cert.pem'), 'utf8');

  const server = createServer({ key, cert });
  await new Promise<void>((resolve) => server.listen(0, values.listen, resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const issuer = `https://${values.listen}:${port}`;

  const signing = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'overlay',
        token_endpoint_auth_method: 'none',
        redirect_uris: ['http://127.0.0.1/callback'],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        id_token_signed_response_alg: 'ES256',
      },
    ],
    jwks: { keys: [{ ...signing, kid: 'bench', alg: 'ES256', use: 'sig' }] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id, name: 'bench' }) }),
    features: { devInteractions: { enabled: false } },
    scopes: ['openid', 'offline_access'],
    ttl: { AccessToken: 1800, IdToken: 1800, RefreshToken: 86_400, Grant: 86_400, Session: 86_400, Interaction: 600, AuthorizationCode: 60 },
    rotateRefreshToken: true,
    pkce: { required: () => true },
  });
  provider.on('server_error', (_ctx: unknown, err: Error) => process.stderr.write(`peer: ${err.stack ?? err.message}\n`));

  async function mint(n: number): Promise<string[]> {
    const client = await provider.Client.find('overlay');
    const tokens: string[] = [];
    for (let i = 0; i < n; i++) {
      const grant = new provider.Grant({ accountId: ACCOUNT, clientId: 'overlay' });
      grant.addOIDCScope('openid offline_access');
      const grantId = await grant.save();
      const refresh = new provider.RefreshToken({
        accountId: ACCOUNT,
        client,
        grantId,
        scope: 'openid offline_access',
        gty: 'authorization_code',
        authTime: Math.floor(Date.now() / 1000),
        amr: ['pwd'],
      });
      tokens.push(await refresh.save());
    }
    return tokens;
  }

  const callback = provider.callback();
  server.on('request', (req, res) => {
    if (req.method === 'POST' && req.url?.startsWith('/bench/mint')) {
      const n = Math.min(1000, Math.max(1, Number(new URL(req.url, issuer).searchParams.get('n') ?? 1)));
      mint(n).then(
        (tokens) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ tokens })),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
      return;
    }
    void callback(req, res);
  });

  const stop = (): void => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(JSON.stringify({ ready: true, url: issuer }) + '\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`peer server: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
