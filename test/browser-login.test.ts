// A person signing in through the OIDC provider with a real browser (the system Chromium, headless,
// driven by playwright-core) against a controller listening on HTTPS, and an application's callback
// served on loopback: a wrong password shown on the page, TOTP enrollment in the middle of the login
// (key read off the page, a live code typed in), the code exchanged for tokens; then a second login
// with the TOTP step, a wrong code shown, the right one completing. Every page is screenshotted to
// reports/screenshots/, no request leaves the controller's and the callback's origins, and no
// Content-Security-Policy violation is reported. Without Chromium the test is skipped, except on CI,
// which installs it (.ci/run): there it fails.
import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import {
  ADMIN_ENV,
  asAdmin,
  authenticatorApp,
  createIdentityWithPassword,
  createTotpPolicy,
  startTestController,
  testClock,
  type TestController,
} from './helpers.js';
import { decodeJwt, httpsFetch, pkce } from './oidc-helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SCREENSHOTS = join(import.meta.dirname, '..', 'reports', 'screenshots');
const hasChromium = existsSync(CHROMIUM);

let t: TestController;
let origin: string;
let ca: string;
let callback: Server;
let callbackOrigin: string;
/** Query strings of the requests the application's callback received. */
const callbacks: URLSearchParams[] = [];
let browser: Browser;
let context: BrowserContext;
/** Every URL the browser requested. */
const requested: string[] = [];
/** Console messages of the pages (a CSP violation is reported there). */
const consoleMessages: string[] = [];

function codeAt(secret: string, at: number): string {
  return authenticatorApp(secret)(at);
}

/** A code no step within the window accepts at `at`. */
function wrongCodeAt(secret: string, at: number): string {
  const accepted = [-30_000, 0, 30_000].map((d) => codeAt(secret, at + d));
  return ['000000', '111111', '222222', '333333'].find((c) => !accepted.includes(c))!;
}

function authorizationUrl(challenge: string, state: string): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: 'overlay',
    redirect_uri: `${callbackOrigin}/callback`,
    scope: 'openid offline_access',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
    nonce: `nonce-${state}`,
  });
  return `${origin}/oidc/authorization?${q}`;
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

async function submit(page: Page, button: string): Promise<void> {
  await Promise.all([page.waitForEvent('framenavigated'), page.getByRole('button', { name: button }).click()]);
  await page.waitForLoadState('load');
}

/** The code the application received with `state`, exchanged at the token endpoint. */
async function exchange(state: string, verifier: string): Promise<{ access_token: string; id_token: string; refresh_token: string; token_type: string }> {
  const received = callbacks.find((q) => q.get('state') === state);
  expect(received, `the callback received state ${state}`).toBeDefined();
  expect(received!.get('iss')).toBe(`${origin}/oidc`);
  const res = await httpsFetch(ca)(`${origin}/oidc/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: received!.get('code')!,
      redirect_uri: `${callbackOrigin}/callback`,
      client_id: 'overlay',
      code_verifier: verifier,
    }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as never;
}

describe('a person signing in with a browser', () => {
  let identityId: string;
  const username = 'browser-user';
  const password = 'browser-user-pw1';

  beforeAll(async () => {
    if (!hasChromium) return;
    mkdirSync(SCREENSHOTS, { recursive: true });
    t = await startTestController({ env: ADMIN_ENV, clock: testClock(Date.now()) });
    const [url] = await t.app.listen();
    origin = new URL(url!).origin;
    ca = t.app.core.pki.trustBundlePem;

    callback = createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://callback');
      if (u.pathname === '/callback') callbacks.push(u.searchParams);
      res.writeHead(u.pathname === '/callback' ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><html lang="en"><title>Application</title><h1>Signed in to the application</h1></html>');
    });
    await new Promise<void>((resolve) => callback.listen(0, '127.0.0.1', resolve));
    callbackOrigin = `http://127.0.0.1:${(callback.address() as AddressInfo).port}`;

    const admin = await asAdmin(t);
    identityId = (await createIdentityWithPassword(t, admin, { name: 'Browser User', username, password, authPolicyId: await createTotpPolicy(t, admin, 'browser-totp') })).id;

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    // The controller's certificate is from its own CA, which this fresh profile does not trust.
    context = await browser.newContext({ ignoreHTTPSErrors: true, locale: 'en-US', viewport: { width: 800, height: 900 } });
    context.on('request', (r) => requested.push(r.url()));
    context.on('console', (m) => consoleMessages.push(m.text()));
  });

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await new Promise((resolve) => (callback ? callback.close(resolve) : resolve(undefined)));
    await t?.close();
  });

  it('enrolls TOTP during the first login and signs in with a code the second time', { timeout: 90_000 }, async (ctx) => {
    if (!hasChromium) {
      if (process.env.CI) throw new Error(`${CHROMIUM} is not installed: CI installs Debian's chromium package before the tests (.ci/run)`);
      const reason = `${CHROMIUM} is not installed (Debian's chromium package)`;
      process.stderr.write(`browser login test skipped: ${reason}\n`);
      ctx.skip(reason);
    }
    const page = await context.newPage();

    // ---- first login: wrong password, then enrollment ----
    const first = pkce();
    const opened = await page.goto(authorizationUrl(first.challenge, 'first'));
    expect(opened!.status()).toBe(200);
    expect(new URL(page.url()).pathname).toBe('/oidc/login/password');
    const csp = opened!.headers()['content-security-policy']!;
    expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; img-src data:; /);
    expect(csp).toContain(`form-action 'self' ${callbackOrigin}`);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(opened!.headers()).toMatchObject({ 'x-frame-options': 'DENY', 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' });
    expect(await page.locator('html').getAttribute('lang')).toBe('en');
    expect(await page.locator('h1').textContent()).toBe('Sign in');
    // The inline style applies: it is allowed by its hash.
    expect(await page.evaluate('getComputedStyle(document.body).maxWidth')).toBe('416px');
    await shoot(page, '1-password');

    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password').fill('not-the-password');
    await submit(page, 'Sign in');
    expect(await page.getByRole('alert').textContent()).toBe('The username or password is not right. Check them and try again.');
    expect(await page.getByLabel('Username').inputValue()).toBe(username);
    expect(await page.locator('#password:focus').count()).toBe(1);
    await shoot(page, '2-wrong-password');

    await page.getByLabel('Password').fill(password);
    await submit(page, 'Sign in');
    expect(await page.locator('h1').textContent()).toBe('Set up two-step verification');
    const qr = page.getByRole('img', { name: /QR code/ });
    expect(await qr.getAttribute('src')).toMatch(/^data:image\/png;base64,/);
    expect(await page.evaluate("(() => { const img = document.querySelector('img.qr'); return img.complete && img.naturalWidth > 0; })()")).toBe(true);
    const codes = await page.locator('#recovery-codes li').allTextContents();
    expect(codes).toHaveLength(20);
    for (const c of codes) expect(c).toMatch(/^[A-Z2-7]{6}$/);
    const secret = (await page.locator('#secret').textContent())!.replace(/\s/g, '');
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    await shoot(page, '3-enroll');

    // On a narrow screen (320 px, or 200% zoom of 640 px) nothing scrolls sideways, and the key for
    // typing by hand wraps between its groups of four, never inside one.
    await page.setViewportSize({ width: 320, height: 900 });
    expect(await page.evaluate('document.documentElement.scrollWidth <= document.documentElement.clientWidth')).toBe(true);
    const keyLines: string[] = await page.evaluate(`(() => {
      const text = document.querySelector('#secret').firstChild;
      const lines = new Map();
      for (let i = 0; i < text.length; i++) {
        const range = document.createRange();
        range.setStart(text, i);
        range.setEnd(text, i + 1);
        const top = Math.round(range.getBoundingClientRect().top);
        lines.set(top, (lines.get(top) ?? '') + text.data[i]);
      }
      return [...lines.values()].map((line) => line.trim());
    })()`);
    expect(keyLines.length).toBeGreaterThan(1);
    for (const line of keyLines) expect(line).toMatch(/^[A-Z2-7]{4}( [A-Z2-7]{4})*$/);
    await shoot(page, '3-enroll-narrow');
    await page.setViewportSize({ width: 800, height: 900 });

    await page.getByLabel('Code the app shows now').fill(wrongCodeAt(secret, t.clock()));
    await submit(page, 'Verify and continue');
    expect(await page.getByRole('alert').textContent()).toBe('That code is not right. Check the code your app shows now and try again.');
    expect((await page.locator('#secret').textContent())!.replace(/\s/g, '')).toBe(secret);
    await shoot(page, '4-enroll-wrong-code');

    await page.getByLabel('Code the app shows now').fill(codeAt(secret, t.clock()));
    await submit(page, 'Verify and continue');
    expect(page.url()).toMatch(new RegExp(`^${callbackOrigin}/callback\\?code=`));
    expect(await page.locator('h1').textContent()).toBe('Signed in to the application');
    const tokens = await exchange('first', first.verifier);
    expect(tokens.token_type).toBe('Bearer');
    expect(tokens.refresh_token).toEqual(expect.any(String));
    const idToken = decodeJwt(tokens.id_token).payload;
    expect(idToken).toMatchObject({ sub: identityId, nonce: 'nonce-first', amr: ['password', 'totp'] });
    const me = await httpsFetch(ca)(`${origin}/edge/client/v1/current-identity`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(me.status).toBe(200);

    // ---- second login: the TOTP step ----
    t.clock.advance(30_000);
    const second = pkce();
    await page.goto(authorizationUrl(second.challenge, 'second'));
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password').fill(password);
    await submit(page, 'Sign in');
    expect(await page.locator('h1').textContent()).toBe('Two-step verification');
    const codeField = page.getByLabel('Code from your authenticator app');
    expect(await codeField.getAttribute('autocomplete')).toBe('one-time-code');
    expect(await codeField.getAttribute('inputmode')).toBe('numeric');
    await shoot(page, '5-totp');

    await codeField.fill(wrongCodeAt(secret, t.clock()));
    await submit(page, 'Verify');
    expect(await page.getByRole('alert').textContent()).toBe('That code is not right. Check the code your app shows now and try again.');
    expect(await page.locator('#code:focus').count()).toBe(1);
    await shoot(page, '6-totp-wrong-code');

    // The code of the next step, as the app shows half a minute later.
    t.clock.advance(30_000);
    await page.getByLabel('Code from your authenticator app').fill(codeAt(secret, t.clock()));
    await submit(page, 'Verify');
    expect(page.url()).toMatch(new RegExp(`^${callbackOrigin}/callback\\?code=`));
    await shoot(page, '7-callback');
    const again = await exchange('second', second.verifier);
    expect(decodeJwt(again.id_token).payload).toMatchObject({ sub: identityId, nonce: 'nonce-second', amr: ['password', 'totp'] });

    // Nothing but the controller and the application's callback was asked for, and nothing was blocked.
    expect(requested.length).toBeGreaterThan(10);
    for (const url of requested) expect([origin, callbackOrigin]).toContain(new URL(url).origin);
    expect(consoleMessages.filter((m) => /Content Security Policy|Refused to/i.test(m))).toEqual([]);
  });
});
