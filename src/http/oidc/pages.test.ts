// Unit tests of the login pages' pure parts: which requests get a page, the escaping of what a page
// shows, the Content-Security-Policy and the words of a throttled retry.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { contentSecurityPolicy, enrollPage, escapeHtml, formActionSources, passwordPage, totpPage, tryAgainIn, wantsHtml } from './pages.js';

const accept = (value?: string) => ({ headers: value === undefined ? {} : { accept: value } });
const request = { id: 'req-1', redirectUri: 'http://127.0.0.1:43210/callback?x=1' };

describe('wantsHtml', () => {
  it('is true for what browsers send on navigations and form posts', () => {
    expect(wantsHtml(accept('text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8'))).toBe(true);
    expect(wantsHtml(accept('application/xhtml+xml'))).toBe(true);
    expect(wantsHtml(accept('TEXT/HTML; charset=utf-8'))).toBe(true);
  });

  it('is false for API clients: no Accept, JSON, anything, or JSON preferred', () => {
    expect(wantsHtml(accept())).toBe(false);
    expect(wantsHtml(accept('application/json'))).toBe(false);
    expect(wantsHtml(accept('*/*'))).toBe(false);
    expect(wantsHtml(accept('application/json, text/html;q=0.5'))).toBe(false);
    expect(wantsHtml(accept('text/html, application/json'))).toBe(false);
    expect(wantsHtml(accept('text/html;q=0'))).toBe(false);
    expect(wantsHtml(accept('text/html;q=abc'))).toBe(false);
  });
});

describe('the pages', () => {
  it('escape every value they show', () => {
    expect(escapeHtml(`<a href="x" onclick='y'>&</a>`)).toBe('&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
    const page = passwordPage({ id: '"><script>1</script>', redirectUri: request.redirectUri }, { error: '<b>no</b>', username: '"><img src=x>' });
    expect(page.body).not.toMatch(/<script|<img|<b>/);
    expect(page.body).toContain('value="&quot;&gt;&lt;script&gt;1&lt;/script&gt;"');
    expect(page.body).toContain('value="&quot;&gt;&lt;img src=x&gt;"');
    expect(page.body).toContain('role="alert" id="error">&lt;b&gt;no&lt;/b&gt;');
  });

  it('focus the field to retry: the password after a wrong one, else the first field', () => {
    expect(passwordPage(request).body).toMatch(/id="username"[^>]* autofocus/);
    const retry = passwordPage(request, { error: 'wrong', username: 'alice' }).body;
    expect(retry).toMatch(/id="password"[^>]* autofocus aria-invalid="true" aria-describedby="error"/);
    expect(retry).not.toMatch(/id="username"[^>]* autofocus/);
    expect(totpPage(request, { error: 'wrong' }).body).toMatch(/id="code"[^>]*autocomplete="one-time-code" inputmode="numeric"[^>]* autofocus aria-invalid="true"/);
  });

  it('show an enrollment as a data: QR image, the key in groups, the provisioning URL and every recovery code', () => {
    const codes = Array.from({ length: 20 }, (_, i) => `CODE${String(i).padStart(2, '0')}`);
    const page = enrollPage(request, {
      provisioningUrl: 'otpauth://totp/a%3Cb?issuer=overlay&secret=ABCDEFGHIJKLMNOP',
      recoveryCodes: codes,
      qrPng: Buffer.from([0x89, 0x50, 0x4e, 0x47]),
    });
    expect(page.body).toContain('src="data:image/png;base64,iVBORw=="');
    expect(page.body).toContain('<code class="secret" id="secret">ABCD EFGH IJKL MNOP</code>');
    expect(page.body).toContain('otpauth://totp/a%3Cb?issuer=overlay&amp;secret=ABCDEFGHIJKLMNOP');
    expect(page.body.match(/<li><code>CODE\d\d<\/code><\/li>/g)).toHaveLength(20);
    expect(page.body).toContain('action="/oidc/login/totp/enroll/verify"');
    expect(page.body).toContain('action="/oidc/login/totp/enroll/cancel"');
  });
});

describe('the Content-Security-Policy', () => {
  it('allows nothing but its own style (by hash), data: images, and posts to here and the client', () => {
    const csp = contentSecurityPolicy(formActionSources(request));
    expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; img-src data:; form-action 'self' http:\/\/127\.0\.0\.1:43210; base-uri 'none'; frame-ancestors 'none'$/);
    expect(csp).not.toContain('unsafe');
  });

  it('names the hash of the style the pages carry', async () => {
    const { sendPage } = await import('./pages.js');
    let sent = '';
    const headers: Record<string, string> = {};
    const reply = {
      code: () => reply,
      headers: (h: Record<string, string>) => (Object.assign(headers, h), reply),
      type: () => reply,
      send: (body: string) => ((sent = body), reply),
    };
    sendPage(reply as never, passwordPage(request));
    const style = /<style>([^<]*)<\/style>/.exec(sent)![1]!;
    expect(headers['content-security-policy']).toContain(`'sha256-${createHash('sha256').update(style).digest('base64')}'`);
    expect(headers).toMatchObject({ 'cache-control': 'no-store', 'x-frame-options': 'DENY', 'referrer-policy': 'no-referrer' });
  });

  it('posts only here when the redirect URI is no plain http(s) origin', () => {
    expect(formActionSources(undefined)).toBe("'self'");
    expect(formActionSources({ redirectUri: 'not a url' })).toBe("'self'");
    expect(formActionSources({ redirectUri: 'myapp:callback' })).toBe("'self'");
    expect(formActionSources({ redirectUri: 'https://app.example.com:8443/cb' })).toBe("'self' https://app.example.com:8443");
  });
});

describe('tryAgainIn', () => {
  it('names seconds, then minutes, from Retry-After', () => {
    expect(tryAgainIn('1')).toBe('Try again in 1 second.');
    expect(tryAgainIn('42')).toBe('Try again in 42 seconds.');
    expect(tryAgainIn('300')).toBe('Try again in 5 minutes.');
    expect(tryAgainIn(undefined)).toBe('Wait a moment, then try again.');
    expect(tryAgainIn('soon')).toBe('Wait a moment, then try again.');
  });
});
