// The OIDC login as a browser drives it, through inject(): pages for requests that accept HTML, the
// JSON answers unchanged for those that do not, each error shown on its form (wrong password,
// unknown request, throttling, wrong codes), the TOTP step and the enrollment in the middle of a
// login, and its cancellation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import {
  ADMIN_ENV,
  asAdmin,
  authenticatorApp,
  createIdentityWithPassword,
  createTotpPolicy,
  expectError,
  json,
  startTestController,
  type TestController,
} from './helpers.js';
import { authorizeQuery, form, REDIRECT_URI, startAuthorization } from './oidc-helpers.js';

const HTML = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
const FORM_HEADERS = { 'content-type': 'application/x-www-form-urlencoded', accept: HTML };

let t: TestController;
let policyId: string;
let n = 0;

beforeAll(async () => {
  t = await startTestController({ env: ADMIN_ENV });
  const admin = await asAdmin(t);
  policyId = await createTotpPolicy(t, admin, 'totp-required');
});
afterAll(async () => {
  await t.close();
});

async function person(opts: { totp?: boolean } = {}) {
  const name = `page-user-${++n}`;
  const admin = await asAdmin(t); // the tests move the clock: a fresh session each time
  await createIdentityWithPassword(t, admin, { name, username: name, password: `${name}-pw`, ...(opts.totp ? { authPolicyId: policyId } : {}) });
  return { username: name, password: `${name}-pw` };
}

function post(url: string, values: Record<string, string>, opts: { html?: boolean; remoteAddress?: string } = {}): Promise<LightMyRequestResponse> {
  return t.inject({
    method: 'POST',
    url,
    payload: form(values),
    headers: opts.html === false ? { 'content-type': 'application/x-www-form-urlencoded' } : FORM_HEADERS,
    ...(opts.remoteAddress ? { remoteAddress: opts.remoteAddress } : {}),
  });
}

function expectPage(res: LightMyRequestResponse, status: number): string {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
  expect(res.headers['cache-control']).toBe('no-store');
  expect(res.headers['x-frame-options']).toBe('DENY');
  expect(res.headers['referrer-policy']).toBe('no-referrer');
  expect(String(res.headers['content-security-policy'])).toMatch(/^default-src 'none'; style-src 'sha256-[^']+'; img-src data:; form-action /);
  expect(res.body).toMatch(/^<!doctype html>\n<html lang="en">/);
  return res.body;
}

const alertOf = (body: string) => /role="alert"[^>]*>([^<]*)</.exec(body)?.[1];

function codeAt(secret: string, at: number): string {
  return authenticatorApp(secret)(at);
}

/** A code no step within the window accepts at `at`. */
function wrongCodeAt(secret: string, at: number): string {
  const accepted = [-30_000, 0, 30_000].map((d) => codeAt(secret, at + d));
  return ['000000', '111111', '222222', '333333'].find((c) => !accepted.includes(c))!;
}

describe('the authorization request', () => {
  it('refused without a redirect is a page for a browser, with the reason and nothing to submit', async () => {
    for (const query of [authorizeQuery({ redirect_uri: 'https://elsewhere.example/cb' }), authorizeQuery({ code_challenge_method: 'plain' }), 'client_id=overlay']) {
      const res = await t.inject({ method: 'GET', url: `/oidc/authorization?${query}`, headers: { accept: HTML } });
      const body = expectPage(res, 400);
      expect(body).toContain('<h1>This sign-in cannot start</h1>');
      expect(body).toContain('Go back to the application');
      expect(body).not.toContain('<form');
      expect(body).not.toContain('elsewhere.example');
      expect(res.headers['content-security-policy']).toContain("form-action 'none'");
    }
    const page = expectPage(await t.inject({ method: 'GET', url: `/oidc/authorization?${authorizeQuery({ code_challenge_method: 'plain' })}`, headers: { accept: HTML } }), 400);
    expect(alertOf(page)).toContain('code_challenge_method must be S256');
    // A parameter's name is quoted in the reason: as text.
    const named = expectPage(await t.inject({ method: 'GET', url: `/oidc/authorization?${authorizeQuery()}&%3Cimg%20src%3Dx%3E=1&%3Cimg%20src%3Dx%3E=2`, headers: { accept: HTML } }), 400);
    expect(named).not.toContain('<img');
    expect(alertOf(named)).toContain('&lt;img src=x&gt; must be given once');
  });

  it('refused for too many pending requests shows when to try again, with Retry-After', async () => {
    const remoteAddress = '10.8.8.8';
    let res!: LightMyRequestResponse;
    for (let i = 0; i <= 100; i++) res = await t.inject({ method: 'GET', url: `/oidc/authorization?${authorizeQuery()}`, headers: { accept: HTML }, remoteAddress });
    const body = expectPage(res, 429);
    const retryAfter = Number(res.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(alertOf(body)).toMatch(/Try again in \d+ (seconds?|minutes)\.$/);
    t.clock.advance(10 * 60_000 + 1000);
  });

  it('keeps its OAuth JSON errors for API clients', async () => {
    const res = await t.inject({ method: 'GET', url: `/oidc/authorization?${authorizeQuery({ code_challenge_method: 'plain' })}` });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(json(res)).toMatchObject({ error: 'invalid_request' });
    const anyType = await t.inject({ method: 'GET', url: '/oidc/authorization?client_id=overlay', headers: { accept: '*/*' } });
    expect(json(anyType)).toMatchObject({ error: 'invalid_request' });
  });
});

describe('the password page', () => {
  it('is answered to a browser, allowing posts here and to the client only', async () => {
    const { id } = await startAuthorization(t);
    const body = expectPage(await t.inject({ method: 'GET', url: `/oidc/login/password?authRequestID=${id}`, headers: { accept: HTML } }), 200);
    expect(body).toContain(`name="authRequestId" value="${id}"`);
    expect(body).toMatch(/<label for="username">Username<\/label>\n<input id="username" name="username" autocomplete="username"/);
    expect(body).toMatch(/<input id="password" name="password" type="password" autocomplete="current-password" required>/);
  });

  it('with a wrong password shows the error on the form, keeps the username, and the right one redirects', async () => {
    const u = await person();
    const { id } = await startAuthorization(t);
    const wrong = expectPage(await post('/oidc/login/password', { authRequestId: id, username: u.username, password: 'wrong-password' }), 401);
    expect(alertOf(wrong)).toBe('The username or password is not right. Check them and try again.');
    // The title, the first thing a screen reader reads of a new page, says there is an error.
    expect(wrong).toContain('<title>Error: Sign in</title>');
    expect(wrong).toContain(`id="username" name="username" autocomplete="username" autocapitalize="none" spellcheck="false" required value="${u.username}"`);
    expect(wrong).toMatch(/id="password"[^>]* autofocus aria-invalid="true"/);
    const right = await post('/oidc/login/password', { authRequestId: id, username: u.username, password: u.password });
    expect(right.statusCode).toBe(302);
    expect(new URL(String(right.headers.location)).searchParams.get('code')).toEqual(expect.any(String));
  });

  it('escapes the username it shows again', async () => {
    const { id } = await startAuthorization(t);
    const body = expectPage(await post('/oidc/login/password', { authRequestId: id, username: '"><script>alert(1)</script>', password: 'x' }), 401);
    expect(body).not.toContain('<script>');
    expect(body).toContain('value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"');
  });

  it('for an unknown or expired request explains to start again, with nothing to submit', async () => {
    const get = expectPage(await t.inject({ method: 'GET', url: '/oidc/login/password?authRequestID=unknown', headers: { accept: HTML } }), 404);
    expect(get).toContain('<h1>This sign-in has expired</h1>');
    expect(get).toContain('Go back to the application and start signing in again.');
    expect(get).not.toContain('<form');
    const u = await person();
    const { id } = await startAuthorization(t);
    t.clock.advance(10 * 60_000);
    const post404 = await post('/oidc/login/password', { authRequestId: id, username: u.username, password: u.password });
    expect(expectPage(post404, 404)).toContain('This sign-in has expired');
    expect(post404.headers['content-security-policy']).toContain("form-action 'none'");
  });

  it('with a field left out shows the form again asking for it', async () => {
    const u = await person();
    const { id } = await startAuthorization(t);
    const noPassword = expectPage(await post('/oidc/login/password', { authRequestId: id, username: u.username }), 400);
    expect(alertOf(noPassword)).toBe('Enter your password.');
    expect(noPassword).toContain(`value="${u.username}"`);
    expect(noPassword).toMatch(/id="password"[^>]* autofocus aria-invalid="true"/);
    const noUsername = expectPage(await post('/oidc/login/password', { authRequestId: id, password: 'x' }), 400);
    expect(alertOf(noUsername)).toBe('Enter your username.');
    expect(noUsername).toMatch(/id="username"[^>]* autofocus aria-invalid="true"/);
    // The request is still there: the right credentials complete it.
    expect((await post('/oidc/login/password', { authRequestId: id, username: u.username, password: u.password })).statusCode).toBe(302);
  });

  it('with a field left out on a request that is over is the expired page, not the field', async () => {
    const { id } = await startAuthorization(t);
    t.clock.advance(10 * 60_000);
    const res = await post('/oidc/login/password', { authRequestId: id, password: 'x' });
    expect(expectPage(res, 404)).toContain('This sign-in has expired');
  });

  it('without a request id explains to start again from the application', async () => {
    for (const res of [
      await t.inject({ method: 'GET', url: '/oidc/login/password', headers: { accept: HTML } }),
      await post('/oidc/login/password', { username: 'someone', password: 'x' }),
      await post('/oidc/login/totp', { code: '123456' }),
    ]) {
      const body = expectPage(res, 400);
      expect(body).toContain('Go back to the application and start signing in again.');
      expect(body).not.toContain('authRequestId');
      expect(body).not.toContain('<form');
    }
  });

  it('when throttled shows when to try again, with Retry-After', async () => {
    const { id } = await startAuthorization(t);
    let last!: LightMyRequestResponse;
    for (let i = 0; i < 22; i++) last = await post('/oidc/login/password', { authRequestId: id, username: `nobody-${i}`, password: 'wrong' }, { remoteAddress: '10.7.7.7' });
    const body = expectPage(last, 429);
    const retryAfter = Number(last.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(alertOf(body)).toBe(`Too many attempts. Try again in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`);
    expect(body).toContain('<form method="post" action="/oidc/login/password">');
    t.clock.advance(11_000);
  });

  it('leaves the JSON answers of API clients as they were', async () => {
    const u = await person();
    const { id } = await startAuthorization(t);
    expectError(await post('/oidc/login/password', { authRequestId: id, username: u.username, password: 'wrong' }, { html: false }), 401, 'INVALID_AUTH');
    const asJson = await t.inject({
      method: 'POST',
      url: '/oidc/login/password',
      payload: { authRequestId: id, username: u.username, password: 'wrong' },
      headers: { accept: 'application/json' },
    });
    expectError(asJson, 401, 'INVALID_AUTH');
    expectError(await t.inject({ method: 'GET', url: '/oidc/login/password?authRequestID=unknown', headers: { accept: '*/*' } }), 404, 'NOT_FOUND');
  });
});

describe('TOTP in a browser login', () => {
  it('enrolls mid-login: the page shows the key, QR code and recovery codes; a wrong code is shown, a live one completes', async () => {
    const u = await person({ totp: true });
    const { id } = await startAuthorization(t);
    const page = expectPage(await post('/oidc/login/password', { authRequestId: id, username: u.username, password: u.password }), 200);
    expect(page).toContain('<h1>Set up two-step verification</h1>');
    expect(page).toMatch(/<img class="qr" src="data:image\/png;base64,iVBORw0KGgo[A-Za-z0-9+/=]+" alt="[^"]+"/);
    expect(page.match(/<li><code>[A-Z2-7]{6}<\/code><\/li>/g)).toHaveLength(20);
    const secret = /id="secret">([A-Z2-7 ]+)</.exec(page)![1]!;
    expect(secret.replace(/ /g, '')).toMatch(/^[A-Z2-7]{32}$/);
    // Nothing takes the focus at first: it would scroll the QR code and the instructions out of view
    // and make a screen reader start past them.
    expect(page).not.toContain('autofocus');

    // Posting the password again shows the same enrollment, not a second one.
    const again = expectPage(await post('/oidc/login/password', { authRequestId: id, username: u.username, password: u.password }), 200);
    expect(/id="secret">([A-Z2-7 ]+)</.exec(again)![1]).toBe(secret);

    const wrong = expectPage(await post('/oidc/login/totp/enroll/verify', { authRequestId: id, code: wrongCodeAt(secret, t.clock()) }), 400);
    expect(alertOf(wrong)).toBe('That code is not right. Check the code your app shows now and try again.');
    expect(/id="secret">([A-Z2-7 ]+)</.exec(wrong)![1]).toBe(secret);
    expect(wrong).toMatch(/id="code"[^>]* autofocus aria-invalid="true" aria-describedby="error"/);
    expect(wrong).toContain('<title>Error: Set up two-step verification</title>');

    const done = await post('/oidc/login/totp/enroll/verify', { authRequestId: id, code: codeAt(secret, t.clock()) });
    expect(done.statusCode, done.body).toBe(302);
    expect(String(done.headers.location)).toMatch(new RegExp(`^${REDIRECT_URI}\\?code=`));

    // The next login asks for a code: a wrong one is shown on the form (400), a live one of a later step completes.
    t.clock.advance(30_000);
    const next = await startAuthorization(t);
    const totp = expectPage(await post('/oidc/login/password', { authRequestId: next.id, username: u.username, password: u.password }), 200);
    expect(totp).toContain('<h1>Two-step verification</h1>');
    expect(totp).toContain(`<form method="post" action="/oidc/login/totp">\n<input type="hidden" name="id" value="${next.id}">`);
    const bad = expectPage(await post('/oidc/login/totp', { id: next.id, code: wrongCodeAt(secret, t.clock()) }), 400);
    expect(alertOf(bad)).toBe('That code is not right. Check the code your app shows now and try again.');
    expect(bad).toContain('<title>Error: Two-step verification</title>');
    expect(totp).toContain('<title>Two-step verification</title>');
    const ok = await post('/oidc/login/totp', { id: next.id, code: codeAt(secret, t.clock()) });
    expect(ok.statusCode, ok.body).toBe(302);
  });

  it('shows a wrong recovery code on the recovery form: open, focused, tied to the error', async () => {
    const u = await person({ totp: true });
    const first = await startAuthorization(t);
    const page = expectPage(await post('/oidc/login/password', { authRequestId: first.id, username: u.username, password: u.password }), 200);
    const secret = /id="secret">([A-Z2-7 ]+)</.exec(page)![1]!;
    expect((await post('/oidc/login/totp/enroll/verify', { authRequestId: first.id, code: codeAt(secret, t.clock()) })).statusCode).toBe(302);
    t.clock.advance(30_000);
    const { id } = await startAuthorization(t);
    const totp = expectPage(await post('/oidc/login/password', { authRequestId: id, username: u.username, password: u.password }), 200);
    const recoveryForm = /<details>[\s\S]*<\/details>/.exec(totp)![0];
    const kind = /<input type="hidden" name="([^"]+)" value="recovery">/.exec(recoveryForm);
    expect(kind, 'the recovery form says it sends a recovery code').not.toBeNull();

    const bad = expectPage(await post('/oidc/login/totp', { id, code: 'AAAAAA', [kind![1]!]: 'recovery' }), 400);
    expect(alertOf(bad)).toBe('That recovery code is not right, or it has been used already. Check it and try again.');
    expect(bad).toContain('<details open>');
    expect(bad).toMatch(/id="recovery-code"[^>]* autofocus aria-invalid="true" aria-describedby="error"/);
    expect(bad).not.toMatch(/id="code"[^>]* autofocus/);
    // The error is inside the open recovery form, not above the app code form.
    expect(/<details open>[\s\S]*role="alert"[\s\S]*<\/details>/.test(bad)).toBe(true);
  });

  it('answers JSON callers as the login endpoints do: queries while TOTP is outstanding, 400 for a wrong code', async () => {
    const u = await person({ totp: true });
    const { id } = await startAuthorization(t);
    const login = await post('/oidc/login/password', { authRequestId: id, username: u.username, password: u.password }, { html: false });
    expect(login.statusCode).toBe(200);
    expect(login.headers['totp-required']).toBe('true');
    expect(json(login).authQueries[0]).toMatchObject({ typeId: 'TOTP', httpUrl: './oidc/login/totp' });
    const res = await t.inject({ method: 'POST', url: '/oidc/login/totp', payload: { id, code: '123456' } });
    // Not enrolled: no code can be right.
    expect(res.statusCode).toBe(409);
    expectError(await t.inject({ method: 'POST', url: '/oidc/login/totp', payload: { id } }), 400, 'COULD_NOT_VALIDATE', 'code');
    expectError(await t.inject({ method: 'POST', url: '/oidc/login/totp', payload: { code: '123456' } }), 400, 'COULD_NOT_VALIDATE', 'id');
  });

  it('shows the throttle after too many wrong codes', async () => {
    const u = await person({ totp: true });
    const { id } = await startAuthorization(t);
    const page = expectPage(await post('/oidc/login/password', { authRequestId: id, username: u.username, password: u.password }), 200);
    const secret = /id="secret">([A-Z2-7 ]+)</.exec(page)![1]!;
    const live = codeAt(secret, t.clock());
    const wrongCode = wrongCodeAt(secret, t.clock());
    for (let i = 0; i < 5; i++) expect((await post('/oidc/login/totp/enroll/verify', { authRequestId: id, code: wrongCode })).statusCode).toBe(400);
    const throttled = await post('/oidc/login/totp/enroll/verify', { authRequestId: id, code: live });
    const body = expectPage(throttled, 429);
    expect(alertOf(body)).toMatch(/^Too many attempts\. Try again in \d+ (seconds?|minutes)\.$/);
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
    expect(body).toContain('<h1>Set up two-step verification</h1>');
    t.clock.advance(5 * 60_000);
  });

  it('cancel removes the unconfirmed enrollment, ends the request and tells the client access_denied', async () => {
    const u = await person({ totp: true });
    const { id } = await startAuthorization(t, { state: 'st-cancel' });
    const page = expectPage(await post('/oidc/login/password', { authRequestId: id, username: u.username, password: u.password }), 200);
    const secret = /id="secret">([A-Z2-7 ]+)</.exec(page)![1]!;
    expect(page).toContain(`<form method="post" action="/oidc/login/totp/enroll/cancel">\n<input type="hidden" name="authRequestId" value="${id}">`);
    const cancel = await post('/oidc/login/totp/enroll/cancel', { authRequestId: id });
    expect(cancel.statusCode).toBe(302);
    const location = new URL(String(cancel.headers.location));
    expect(`${location.origin}${location.pathname}`).toBe(REDIRECT_URI);
    expect(Object.fromEntries(location.searchParams)).toMatchObject({ error: 'access_denied', state: 'st-cancel' });
    expect(expectPage(await post('/oidc/login/totp/enroll/verify', { authRequestId: id, code: codeAt(secret, t.clock()) }), 404)).toContain('This sign-in has expired');
    // A new login starts a new enrollment, with another key.
    const next = await startAuthorization(t);
    const fresh = expectPage(await post('/oidc/login/password', { authRequestId: next.id, username: u.username, password: u.password }), 200);
    expect(/id="secret">([A-Z2-7 ]+)</.exec(fresh)![1]).not.toBe(secret);
  });
});

describe('a login refused for too many authorization codes of its identity', () => {
  it('is a page saying when to start again, with the status and Retry-After kept (not a failure)', async () => {
    const { username, password } = await person();
    const { id } = await startAuthorization(t, { challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM' });
    const identityId = (await t.app.core.store.db.selectFrom('identities').select('id').where('name', '=', username).executeTakeFirstOrThrow()).id;
    // The identity already holds as many codes as it may (other logins of it, not yet exchanged).
    const codes = (t.app.core.oidc as unknown as { codes: { add(key: string, owner: string, value: unknown, bytes: number, expiresAt: number): void } }).codes;
    const expiresAt = t.clock() + 60_000;
    for (let i = 0; i < 1_000; i++) codes.add(`held-${i}`, identityId, { expiresAt, used: false }, 1, expiresAt);
    const refused = await post('/oidc/login/password', { authRequestId: id, username, password });
    const page = expectPage(refused, 429);
    expect(refused.headers['retry-after']).toBe('60');
    expect(page).toContain('<title>This sign-in cannot finish</title>');
    expect(page).toContain('Too many sign-ins of this account are waiting to finish. Try again in 60 seconds.');
    expect(page).not.toContain(password);
    t.clock.advance(60_000);
  });
});
