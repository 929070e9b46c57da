// Deployment configuration of OIDC: its own listener, auto-binding, redirect URI patterns, token
// durations, and signing keys kept across restarts.
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import {
  ADMIN_ENV,
  ADMIN_PASSWORD,
  ADMIN_USERNAME,
  CLIENT,
  expectError,
  json,
  startTestController,
  tempDir,
  type TestController,
} from './helpers.js';
import { authorizeQuery, bearer, decodeJwt, form, oidcLogin, pkce } from './oidc-helpers.js';
import { KEYS_FILE } from '../src/oidc/keys.js';

const dirs: { remove(): void }[] = [];
afterAll(() => {
  for (const d of dirs) d.remove();
});

async function withConfig(yaml: string): Promise<TestController> {
  const dir = tempDir('overlay-oidc-config-');
  dirs.push(dir);
  const file = join(dir.path, 'config.yml');
  writeFileSync(file, yaml);
  return startTestController({ env: { ...ADMIN_ENV, OVERLAY_CONFIG: file } });
}

function on(t: TestController, server: number, opts: Parameters<TestController['inject']>[0]): Promise<LightMyRequestResponse> {
  return t.app.servers[server]!.app.inject(opts);
}

describe('OIDC on its own listener with redirect URI patterns', () => {
  it('serves OIDC only where bound; its tokens work on the Edge API listener', async () => {
    const t = await withConfig(`
web:
  - name: api
    bindPoints: [{ interface: "127.0.0.1:0" }]
    apis: [{ binding: edge-client }, { binding: edge-management }]
  - name: oidc
    bindPoints: [{ interface: "127.0.0.1:0" }]
    apis:
      - binding: edge-oidc
        options: { redirectURIs: ["https://app.example.com:*/cb", "http://10.0.0.5:9000/exact?x=1"] }
`);
    try {
      expect(t.app.servers.map((s) => s.listener.name)).toEqual(['api', 'oidc']);
      expectError(await on(t, 0, { method: 'GET', url: '/oidc/.well-known/openid-configuration' }), 404, 'NOT_FOUND');
      const oidcAddress = t.app.servers[1]!.bindPoint.address;
      const doc = json(await on(t, 1, { method: 'GET', url: '/.well-known/openid-configuration' }));
      expect(doc.issuer).toBe(`https://${oidcAddress}/oidc`);

      const allowed = async (redirect_uri: string) =>
        (await on(t, 1, { method: 'GET', url: `/oidc/authorization?${authorizeQuery({ redirect_uri })}` })).statusCode;
      expect(await allowed('https://app.example.com:9443/cb')).toBe(302);
      expect(await allowed('https://app.example.com/cb')).toBe(302);
      expect(await allowed('https://APP.example.com:1/cb')).toBe(302);
      expect(await allowed('https://app.example.com:9443/other')).toBe(400);
      expect(await allowed('http://app.example.com:9443/cb')).toBe(400);
      expect(await allowed('https://app.example.com.evil.com:9443/cb')).toBe(400);
      expect(await allowed('http://10.0.0.5:9000/exact?x=1')).toBe(302);
      expect(await allowed('http://10.0.0.5:9000/exact?x=2')).toBe(400);
      expect(await allowed('http://10.0.0.5:9001/exact?x=1')).toBe(400);
      // The defaults stay.
      expect(await allowed('http://localhost:5000/anything')).toBe(302);
      expect(await allowed('http://127.0.0.1:1/')).toBe(302);

      // The flow on the OIDC listener; the token on the API listener.
      const { verifier, challenge } = pkce();
      const started = await on(t, 1, { method: 'GET', url: `/oidc/authorization?${authorizeQuery({ code_challenge: challenge, redirect_uri: 'https://app.example.com:9443/cb' })}` });
      const id = new URL(String(started.headers.location), 'https://x').searchParams.get('authRequestID')!;
      const login = await on(t, 1, { method: 'POST', url: '/oidc/login/password', payload: { authRequestId: id, username: ADMIN_USERNAME, password: ADMIN_PASSWORD } });
      expect(login.statusCode).toBe(302);
      const callback = new URL(String(login.headers.location));
      expect(callback.origin + callback.pathname).toBe('https://app.example.com:9443/cb');
      const tokens = json(
        await on(t, 1, {
          method: 'POST',
          url: '/oidc/token',
          payload: form({ grant_type: 'authorization_code', code: callback.searchParams.get('code')!, redirect_uri: 'https://app.example.com:9443/cb', client_id: 'overlay', code_verifier: verifier }),
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
      );
      expect(decodeJwt(tokens.access_token).payload.iss).toBe(`https://${oidcAddress}/oidc`);
      const me = await on(t, 0, { method: 'GET', url: `${CLIENT}/current-identity`, headers: bearer(tokens.access_token) });
      expect(me.statusCode).toBe(200);

      // post_logout_redirect_uri follows the same patterns.
      const out = await on(t, 1, { method: 'GET', url: `/oidc/end_session?${form({ id_token_hint: tokens.id_token, post_logout_redirect_uri: 'https://app.example.com:1/cb', state: 's' })}` });
      expect(out.statusCode).toBe(302);
      expect(out.headers.location).toBe('https://app.example.com:1/cb?state=s');
    } finally {
      await t.close();
    }
  });

  it('disableOidcAutoBinding without an edge-oidc listener: no OIDC anywhere', async () => {
    const t = await withConfig(`
edge:
  api: { disableOidcAutoBinding: true }
web:
  - name: api
    bindPoints: [{ interface: "127.0.0.1:0" }]
    apis: [{ binding: edge-client }, { binding: edge-management }]
`);
    try {
      expect(t.config.warnings.some((w) => w.includes('no listener serves edge-oidc'))).toBe(true);
      expectError(await t.inject({ method: 'GET', url: '/oidc/.well-known/openid-configuration' }), 404, 'NOT_FOUND');
      expectError(await t.inject({ method: 'GET', url: '/.well-known/openid-configuration' }), 404, 'NOT_FOUND');
      const version = json(await t.inject({ method: 'GET', url: `${CLIENT}/version` })).data;
      expect(version.capabilities).not.toContain('OIDC_AUTH');
      expect(version.apiVersions['edge-oidc']).toBeUndefined();
    } finally {
      await t.close();
    }
  });

  it('auto-binding: a listener hosting edge-client serves OIDC too', async () => {
    const t = await withConfig(`
web:
  - name: client-only
    bindPoints: [{ interface: "127.0.0.1:0" }]
    apis: [{ binding: edge-client }]
`);
    try {
      expect(t.app.servers[0]!.listener.apis.map((a) => a.binding)).toEqual(['edge-client', 'edge-oidc']);
      expect((await t.inject({ method: 'GET', url: '/oidc/.well-known/openid-configuration' })).statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });
});

describe('token durations', () => {
  it('access, ID and refresh durations apply; a refresh not 1m longer than access is adjusted', async () => {
    const t = await withConfig(`
edge:
  oidc: { accessTokenDuration: 2m, idTokenDuration: 5m, refreshTokenDuration: 2m }
`);
    try {
      expect(t.config.edge.oidc).toEqual({ accessTokenDuration: 120_000, idTokenDuration: 300_000, refreshTokenDuration: 180_000 });
      expect(t.config.warnings.some((w) => w.startsWith('edge.oidc.refreshTokenDuration'))).toBe(true);
      const tokens = await oidcLogin(t, ADMIN_USERNAME, ADMIN_PASSWORD);
      expect(tokens.expires_in).toBe(120);
      const access = decodeJwt(tokens.access_token).payload;
      const id = decodeJwt(tokens.id_token).payload;
      expect(access.exp - access.iat).toBe(120);
      expect(id.exp - id.iat).toBe(300);
      const refresh = (token: string) =>
        t.inject({
          method: 'POST',
          url: '/oidc/token',
          payload: form({ grant_type: 'refresh_token', refresh_token: token, client_id: 'overlay' }),
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        });
      t.clock.advance(170_000);
      const next = await refresh(tokens.refresh_token!);
      expect(next.statusCode).toBe(200);
      t.clock.advance(180_000);
      expect(json(await refresh(json(next).refresh_token)).error).toBe('invalid_grant');
    } finally {
      await t.close();
    }
  });
});

describe('signing keys', () => {
  it('are made at first start under <dataDir>/oidc (mode 0600) and kept across restarts', async () => {
    const dir = tempDir('overlay-oidc-keys-');
    dirs.push(dir);
    const first = await startTestController({ env: ADMIN_ENV, dataDir: dir.path });
    const kid = first.app.core.oidc.keys.current.kid;
    const tokens = await oidcLogin(first, ADMIN_USERNAME, ADMIN_PASSWORD);
    await first.close();
    expect(statSync(join(dir.path, 'oidc', KEYS_FILE)).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir.path, 'oidc')).mode & 0o777).toBe(0o700);
    const second = await startTestController({ env: ADMIN_ENV, dataDir: dir.path });
    try {
      expect(second.app.core.oidc.keys.current.kid).toBe(kid);
      expect(decodeJwt(tokens.access_token).header.kid).toBe(kid);
      const keys = json(await second.inject({ method: 'GET', url: '/oidc/keys' }));
      expect(keys.keys.map((k: { kid: string }) => k.kid)).toEqual([kid]);
    } finally {
      await second.close();
    }
  });
});
