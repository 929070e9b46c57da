// Helpers of the OIDC tests: the code flow driven through inject(), PKCE values, and a fetch over
// node:https trusting the controller's CA (what openid-client is given as its customFetch).
import { createHash, randomBytes } from 'node:crypto';
import { request as httpsRequest } from 'node:https';
import type { LightMyRequestResponse } from 'fastify';
import { json, type TestController } from './helpers.js';

export const REDIRECT_URI = 'http://127.0.0.1:8765/callback';

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export function form(values: Record<string, string>): string {
  return new URLSearchParams(values).toString();
}

export function authorizeQuery(values: Record<string, string | undefined> = {}): string {
  const { challenge } = pkce();
  const q: Record<string, string> = {
    response_type: 'code',
    client_id: 'overlay',
    redirect_uri: REDIRECT_URI,
    scope: 'openid offline_access',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'st-1',
    nonce: 'n-1',
  };
  for (const [k, v] of Object.entries(values)) {
    if (v === undefined) delete q[k];
    else q[k] = v;
  }
  return new URLSearchParams(q).toString();
}

/** GET /oidc/authorization; answers the authRequestID of the login redirect. */
export async function startAuthorization(
  t: TestController,
  opts: { scope?: string; challenge?: string; state?: string; nonce?: string; redirectUri?: string; extra?: Record<string, string> } = {},
): Promise<{ id: string; location: string }> {
  const res = await t.inject({
    method: 'GET',
    url: `/oidc/authorization?${authorizeQuery({
      scope: opts.scope ?? 'openid offline_access',
      ...(opts.challenge ? { code_challenge: opts.challenge } : {}),
      ...(opts.state !== undefined ? { state: opts.state } : {}),
      ...(opts.nonce !== undefined ? { nonce: opts.nonce } : {}),
      ...(opts.redirectUri ? { redirect_uri: opts.redirectUri } : {}),
      ...opts.extra,
    })}`,
  });
  if (res.statusCode !== 302) throw new Error(`authorization failed: ${res.statusCode} ${res.body}`);
  const location = String(res.headers.location);
  const id = new URL(location, 'https://x').searchParams.get('authRequestID');
  if (!id) throw new Error(`no authRequestID in ${location}`);
  return { id, location };
}

export function postLogin(
  t: TestController,
  id: string,
  username: string,
  password: string,
  opts: { path?: string; remoteAddress?: string; asForm?: boolean } = {},
): Promise<LightMyRequestResponse> {
  const body = { authRequestId: id, username, password };
  return t.inject({
    method: 'POST',
    url: `/oidc/login/${opts.path ?? 'password'}`,
    ...(opts.asForm
      ? { payload: form(body), headers: { 'content-type': 'application/x-www-form-urlencoded' } }
      : { payload: body }),
    ...(opts.remoteAddress ? { remoteAddress: opts.remoteAddress } : {}),
  });
}

export function postToken(t: TestController, values: Record<string, string>, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return t.inject({
    method: 'POST',
    url: '/oidc/token',
    payload: form(values),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  });
}

export interface Tokens {
  access_token: string;
  id_token: string;
  refresh_token?: string;
  token_type: string;
  expires_in: number;
  scope: string;
}

/** The whole code flow through inject(): answers the token response. */
export async function oidcLogin(
  t: TestController,
  username: string,
  password: string,
  opts: { scope?: string; configTypes?: string } = {},
): Promise<Tokens> {
  const { verifier, challenge } = pkce();
  const { id } = await startAuthorization(t, {
    challenge,
    ...(opts.scope ? { scope: opts.scope } : {}),
    ...(opts.configTypes ? { extra: { configTypes: opts.configTypes } } : {}),
  });
  const login = await postLogin(t, id, username, password);
  if (login.statusCode !== 302) throw new Error(`login failed: ${login.statusCode} ${login.body}`);
  const code = new URL(String(login.headers.location)).searchParams.get('code')!;
  const res = await postToken(t, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT_URI,
    client_id: 'overlay',
    code_verifier: verifier,
  });
  if (res.statusCode !== 200) throw new Error(`token exchange failed: ${res.statusCode} ${res.body}`);
  return json(res) as Tokens;
}

export function decodeJwt(token: string): { header: any; payload: any } {
  const [h, p] = token.split('.');
  return { header: JSON.parse(Buffer.from(h!, 'base64url').toString()), payload: JSON.parse(Buffer.from(p!, 'base64url').toString()) };
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/** A fetch over node:https that trusts `ca` and never follows redirects (openid-client's customFetch). */
export function httpsFetch(ca: string, hostHeader?: string) {
  return (url: string, options: { method?: string; headers?: Record<string, string> | Headers; body?: unknown; redirect?: string }): Promise<Response> =>
    new Promise((resolve, reject) => {
      const u = new URL(url);
      const headers: Record<string, string> = {};
      new Headers(options.headers as ConstructorParameters<typeof Headers>[0]).forEach((v, k) => (headers[k] = v));
      if (hostHeader) headers.host = hostHeader;
      const body =
        options.body === undefined || options.body === null
          ? undefined
          : options.body instanceof URLSearchParams
            ? options.body.toString()
            : String(options.body);
      if (options.body instanceof URLSearchParams && !headers['content-type']) headers['content-type'] = 'application/x-www-form-urlencoded';
      const req = httpsRequest(
        { host: u.hostname, port: u.port, path: u.pathname + u.search, method: options.method ?? 'GET', headers, ca, agent: false, servername: u.hostname === '127.0.0.1' ? undefined : u.hostname },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const h = new Headers();
            for (const [k, v] of Object.entries(res.headers)) {
              if (Array.isArray(v)) for (const x of v) h.append(k, x);
              else if (v !== undefined) h.set(k, v);
            }
            const status = res.statusCode ?? 0;
            const noBody = status === 204 || status === 304 || (status >= 300 && status < 400 && chunks.length === 0);
            resolve(new Response(noBody ? null : Buffer.concat(chunks), { status, headers: h }));
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
}
