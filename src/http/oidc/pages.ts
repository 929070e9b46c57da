// The pages a person sees who follows the authorization redirect in a browser: the password form, the
// TOTP step, the enrollment of an authenticator app in the middle of a login, and the errors of each
// shown on the page itself with a way to try again. API clients keep their JSON answers: a request
// gets a page only when its Accept header prefers HTML (a browser's navigation and form posts do).
// Nothing on the pages is scripted and nothing is loaded from elsewhere: the style is inline and
// allowed by its hash, the QR code is a data: image, and every interpolated value is escaped.
import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { OIDC_STATUS, type ApiError } from '../../errors.js';
import { OIDC_PATH } from '../../oidc/issuer.js';
import type { AuthRequest } from '../../oidc/flow.js';
import { OAuthError } from '../../oidc/errors.js';
import { toApiError } from '../errors.js';
import { requestContext } from '../request-log.js';

// ---- negotiation --------------------------------------------------------------------------------

/**
 * Whether the client prefers an HTML page to JSON: text/html (or XHTML) is listed with a higher
 * weight than application/json. No Accept, `*\/*` or application/json alone: JSON.
 */
export function wantsHtml(request: Pick<FastifyRequest, 'headers'>): boolean {
  const accept = request.headers.accept;
  if (typeof accept !== 'string') return false;
  let html = 0;
  let json = 0;
  for (const range of accept.split(',')) {
    const [type = '', ...params] = range.split(';').map((s) => s.trim().toLowerCase());
    let q = 1;
    for (const param of params) {
      // A weight that does not parse leaves the range out.
      if (/^q\s*=/.test(param)) q = Number(param.replace(/^q\s*=\s*/, '') || 'x');
    }
    if (!(q >= 0 && q <= 1)) q = 0;
    if (type === 'text/html' || type === 'application/xhtml+xml') html = Math.max(html, q);
    else if (type === 'application/json') json = Math.max(json, q);
  }
  return html > json;
}

// ---- rendering ----------------------------------------------------------------------------------

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

const STYLE =
  'body{font-family:system-ui,sans-serif;line-height:1.4;max-width:26rem;margin:3rem auto;padding:0 1rem;color:#1a1a1a;background:#fff}' +
  'h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.5rem}' +
  'label,input,button{display:block;width:100%;margin:.4rem 0}input,button{padding:.55rem;box-sizing:border-box;font-size:1rem}' +
  'button{cursor:pointer}button.secondary{background:none;border:1px solid #767676}' +
  '.alert{border:2px solid #b00020;background:#fdecee;color:#5c0010;padding:.6rem .8rem;border-radius:4px}' +
  '.note{color:#444}code,.codes{font-family:ui-monospace,monospace}' +
  '.codes{columns:2;padding-left:2rem;margin:.5rem 0}.secret{overflow-wrap:anywhere;font-size:1.05rem}' +
  'img.qr{display:block;margin:1rem auto;width:12rem;height:12rem;image-rendering:pixelated}' +
  'details{margin-top:1.5rem}summary{cursor:pointer}';

/** The page style is allowed by its hash: no inline style other than this one runs. */
const STYLE_SOURCE = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`;

/**
 * The form-action sources of a page whose forms belong to `authRequest`: this origin, and the
 * origin of the client's redirect URI, since browsers apply form-action to the redirect that
 * follows a post too. A redirect URI that is not a plain http(s) origin adds nothing.
 */
export function formActionSources(authRequest?: Pick<AuthRequest, 'redirectUri'>): string {
  if (!authRequest) return "'self'";
  let origin: string;
  try {
    origin = new URL(authRequest.redirectUri).origin;
  } catch {
    return "'self'";
  }
  return /^https?:\/\/[a-z0-9.\-[\]:]+$/i.test(origin) ? `'self' ${origin}` : "'self'";
}

export function contentSecurityPolicy(formAction: string): string {
  return [
    "default-src 'none'",
    `style-src ${STYLE_SOURCE}`,
    'img-src data:',
    `form-action ${formAction}`,
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** A page to send: its status, title, body and the sources its forms may post to. */
export interface Page {
  status: number;
  title: string;
  body: string;
  formAction: string;
  headers?: Record<string, string>;
}

function document(page: Page): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(page.title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${page.body}
</main>
</body>
</html>
`;
}

export function sendPage(reply: FastifyReply, page: Page): FastifyReply {
  return reply
    .code(page.status)
    .headers({
      ...page.headers,
      'cache-control': 'no-store',
      pragma: 'no-cache',
      'content-security-policy': contentSecurityPolicy(page.formAction),
      'x-frame-options': 'DENY',
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    })
    .type('text/html; charset=utf-8')
    .send(document(page));
}

function alert(message: string | undefined): string {
  return message === undefined ? '' : `<p class="alert" role="alert" id="error">${escapeHtml(message)}</p>\n`;
}

/** Attributes of the field a person retries: focused, and tied to the error when there is one. */
function retried(error: string | undefined): string {
  return error === undefined ? ' autofocus' : ' autofocus aria-invalid="true" aria-describedby="error"';
}

/** The same, for a field below content to read first: focused only to retry after an error. */
function retriedAfterError(error: string | undefined): string {
  return error === undefined ? '' : retried(error);
}

/** A form page's title, saying first when the page shows an error (a screen reader reads it on arrival). */
const titled = (title: string, error: string | undefined) => (error === undefined ? title : `Error: ${title}`);

const hidden = (name: string, value: string) => `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`;

// ---- pages --------------------------------------------------------------------------------------

export const PATHS = {
  password: `${OIDC_PATH}/login/password`,
  totp: `${OIDC_PATH}/login/totp`,
  enrollVerify: `${OIDC_PATH}/login/totp/enroll/verify`,
  enrollCancel: `${OIDC_PATH}/login/totp/enroll/cancel`,
} as const;

export interface PasswordPageOptions {
  error?: string;
  status?: number;
  /** The username typed before, kept when the password was wrong. */
  username?: string;
  headers?: Record<string, string>;
}

export function passwordPage(authRequest: Pick<AuthRequest, 'id' | 'redirectUri'>, opts: PasswordPageOptions = {}): Page {
  const focusPassword = opts.error !== undefined && opts.username !== undefined && opts.username !== '';
  const username = opts.username !== undefined ? ` value="${escapeHtml(opts.username)}"` : '';
  return {
    status: opts.status ?? 200,
    title: titled('Sign in', opts.error),
    formAction: formActionSources(authRequest),
    ...(opts.headers ? { headers: opts.headers } : {}),
    body: `<h1>Sign in</h1>
${alert(opts.error)}<form method="post" action="${PATHS.password}">
${hidden('authRequestId', authRequest.id)}
<label for="username">Username</label>
<input id="username" name="username" autocomplete="username" autocapitalize="none" spellcheck="false" required${username}${focusPassword ? '' : retried(opts.error)}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required${focusPassword ? retried(opts.error) : ''}>
<button type="submit">Sign in</button>
</form>`,
  };
}

export interface CodePageOptions {
  error?: string;
  status?: number;
  headers?: Record<string, string>;
}

/** The value of the hidden field `kind` of the form that sends a recovery code in place of an app code. */
export const RECOVERY_KIND = 'recovery';

export interface TotpPageOptions extends CodePageOptions {
  /** The error is of a recovery code: shown on the recovery form, opened, with its field focused. */
  recovery?: boolean;
}

/** The TOTP step: a code from the authenticator app, or a recovery code instead. */
export function totpPage(authRequest: Pick<AuthRequest, 'id' | 'redirectUri'>, opts: TotpPageOptions = {}): Page {
  const appError = opts.recovery === true ? undefined : opts.error;
  const recoveryError = opts.recovery === true ? opts.error : undefined;
  return {
    status: opts.status ?? 200,
    title: titled('Two-step verification', opts.error),
    formAction: formActionSources(authRequest),
    ...(opts.headers ? { headers: opts.headers } : {}),
    body: `<h1>Two-step verification</h1>
${alert(appError)}<form method="post" action="${PATHS.totp}">
${hidden('id', authRequest.id)}
<label for="code">Code from your authenticator app</label>
<input id="code" name="code" autocomplete="one-time-code" inputmode="numeric" pattern="[0-9]{6}" minlength="6" maxlength="6" required${recoveryError === undefined ? retried(appError) : ''}>
<button type="submit">Verify</button>
</form>
<details${recoveryError === undefined ? '' : ' open'}>
<summary>Use a recovery code instead</summary>
${alert(recoveryError)}<form method="post" action="${PATHS.totp}">
${hidden('id', authRequest.id)}
${hidden('kind', RECOVERY_KIND)}
<label for="recovery-code">Recovery code</label>
<input id="recovery-code" name="code" autocomplete="off" autocapitalize="characters" spellcheck="false" minlength="6" maxlength="32" required${recoveryError === undefined ? '' : retried(recoveryError)}>
<p class="note">Each recovery code works once.</p>
<button type="submit">Use recovery code</button>
</form>
</details>`,
  };
}

/** An enrollment as the page shows it: the provisioning URL, its QR code and the recovery codes. */
export interface EnrollmentView {
  provisioningUrl: string;
  recoveryCodes: readonly string[];
  /** The QR code of the provisioning URL (PNG). */
  qrPng: Buffer;
}

/** The secret of a provisioning URL, in groups of four for typing by hand. */
function secretOf(provisioningUrl: string): string {
  let secret = '';
  try {
    secret = new URL(provisioningUrl).searchParams.get('secret') ?? '';
  } catch {
    // Shown without the secret; the URL itself is still on the page.
  }
  return secret.replace(/(.{4})(?=.)/g, '$1 ');
}

/**
 * Mid-login enrollment: the QR code, the key for typing by hand, the recovery codes, the verify form.
 * At first nothing has the focus, so the page opens at its top (the QR code and what to do with it).
 * An error is shown beside the code field, which then has the focus, so it is in view on a small screen.
 */
export function enrollPage(authRequest: Pick<AuthRequest, 'id' | 'redirectUri'>, view: EnrollmentView, opts: CodePageOptions = {}): Page {
  const codes = view.recoveryCodes.map((c) => `<li><code>${escapeHtml(c)}</code></li>`).join('');
  return {
    status: opts.status ?? 200,
    title: titled('Set up two-step verification', opts.error),
    formAction: formActionSources(authRequest),
    ...(opts.headers ? { headers: opts.headers } : {}),
    body: `<h1>Set up two-step verification</h1>
<p>Signing in to this application needs a code from an authenticator app. Scan the QR code with the app, or type the key into it by hand.</p>
<img class="qr" src="data:image/png;base64,${escapeHtml(view.qrPng.toString('base64'))}" alt="QR code of the key for your authenticator app" width="192" height="192">
<h2>Key for typing by hand</h2>
<p><code class="secret" id="secret">${escapeHtml(secretOf(view.provisioningUrl))}</code></p>
<details>
<summary>Provisioning URL</summary>
<p><code class="secret" id="provisioning-url">${escapeHtml(view.provisioningUrl)}</code></p>
</details>
<h2>Recovery codes</h2>
<p>Write these codes down and keep them somewhere safe. If you lose the device with the app, each code signs you in once in place of an app code. Once set-up is confirmed they are not shown again.</p>
<ol class="codes" id="recovery-codes">${codes}</ol>
<h2>Confirm</h2>
${alert(opts.error)}<form method="post" action="${PATHS.enrollVerify}">
${hidden('authRequestId', authRequest.id)}
<label for="code">Code the app shows now</label>
<input id="code" name="code" autocomplete="one-time-code" inputmode="numeric" pattern="[0-9]{6}" minlength="6" maxlength="6" required${retriedAfterError(opts.error)}>
<button type="submit">Verify and continue</button>
</form>
<form method="post" action="${PATHS.enrollCancel}">
${hidden('authRequestId', authRequest.id)}
<button type="submit" class="secondary">Cancel sign-in</button>
</form>`,
  };
}

/** A page with a heading and a message, and nothing to submit. */
export function messagePage(status: number, title: string, message: string, headers?: Record<string, string>): Page {
  return {
    status,
    title,
    formAction: "'none'",
    ...(headers ? { headers } : {}),
    body: `<h1>${escapeHtml(title)}</h1>
<p role="alert">${escapeHtml(message)}</p>`,
  };
}

/** The page for an unknown or expired authorization request: only the application can start anew. */
export function expiredPage(): Page {
  return messagePage(
    404,
    'This sign-in has expired',
    'The sign-in request is unknown or has expired (a request lasts 10 minutes). Go back to the application and start signing in again.',
  );
}

/**
 * The page for an authorization request refused without a redirect (an unknown client or redirect
 * URI, a missing or plain PKCE challenge, too many pending requests): the application sent the person
 * here, so only it can start again. The refusal's status and Retry-After are kept.
 */
export function refusedAuthorizationPage(err: OAuthError): Page {
  const busy = err.status === 429 ? 'Too many sign-ins are waiting from this address.' : 'Too many sign-ins are waiting on this server.';
  const message =
    err.error === 'temporarily_unavailable'
      ? `${busy} ${tryAgainIn(err.headers?.['retry-after'])}`
      : `The application asked to sign in in a way this server does not accept: ${err.description}. Go back to the application and try again; if this keeps happening, tell whoever runs the application.`;
  return messagePage(err.status, 'This sign-in cannot start', message, err.headers);
}

/** The page for a login step without a request id (an address cut short): only the application can start anew. */
export function noRequestPage(): Page {
  return messagePage(400, 'This sign-in cannot continue', 'This address does not say which sign-in it belongs to. Go back to the application and start signing in again.');
}

/** The parameters that name the authorization request of a login step. */
const REQUEST_ID_FIELDS = new Set(['authRequestId', 'authRequestID', 'id']);

// ---- errors -------------------------------------------------------------------------------------

/**
 * A login step whose request was complete but got no authorization code (the identity holds too
 * many not yet exchanged, or the server does in all): the request is over, so the page says when to
 * start again from the application, with the refusal's status and Retry-After.
 */
function refusedCompletionPage(request: FastifyRequest, err: OAuthError): Page {
  request.log.info({ ...requestContext(request), error: err.error, status: err.status }, err.description);
  const busy = err.status === 429 ? 'Too many sign-ins of this account are waiting to finish.' : 'Too many sign-ins are waiting to finish on this server.';
  return messagePage(
    err.status,
    'This sign-in cannot finish',
    `${busy} ${tryAgainIn(err.headers?.['retry-after'])} Then go back to the application and sign in again.`,
    err.headers,
  );
}

/** What a failed step offers to retry: the form of that step, or nothing. */
export type Retry =
  | { step: 'password'; authRequest: AuthRequest; username?: string }
  | { step: 'totp'; authRequest: AuthRequest; recovery?: boolean }
  | { step: 'enroll'; authRequest: AuthRequest; view: EnrollmentView }
  | { step: 'none' };

/** "in 40 seconds", "in 3 minutes": when a throttled person may try again. */
export function tryAgainIn(retryAfter: string | undefined): string {
  const seconds = Number(retryAfter);
  if (!Number.isFinite(seconds) || seconds <= 0) return 'Wait a moment, then try again.';
  if (seconds < 90) return `Try again in ${Math.ceil(seconds)} second${Math.ceil(seconds) === 1 ? '' : 's'}.`;
  return `Try again in ${Math.ceil(seconds / 60)} minutes.`;
}

const WRONG_CODE = 'That code is not right. Check the code your app shows now and try again.';
const WRONG_RECOVERY_CODE = 'That recovery code is not right, or it has been used already. Check it and try again.';

/** The words a person sees for an error of a login step. */
function messageOf(err: ApiError, retry: Retry): string {
  const step = retry.step;
  const wrongCode = retry.step === 'totp' && retry.recovery === true ? WRONG_RECOVERY_CODE : WRONG_CODE;
  switch (err.code) {
    case 'INVALID_AUTH':
      return step === 'password' ? 'The username or password is not right. Check them and try again.' : 'The sign-in was refused. Check your credentials and try again.';
    case 'SERVER_TOO_MANY_REQUESTS':
      return `Too many attempts. ${tryAgainIn(err.headers?.['retry-after'])}`;
    case 'MFA_INVALID_TOKEN':
      return wrongCode;
    case 'COULD_NOT_VALIDATE': {
      const field = (err.cause as { field?: string } | undefined)?.field;
      if (step === 'password' && (field === 'username' || field === 'password') && /required/.test(err.message)) return `Enter your ${field}.`;
      break;
    }
  }
  // A field error of a code (the OIDC TOTP step answers 400 for a wrong code).
  if (step !== 'password' && err.status === 400 && (err.cause as { field?: string } | undefined)?.field === 'code') {
    return wrongCode;
  }
  return `${err.message.charAt(0).toUpperCase()}${err.message.slice(1)}.`;
}

/**
 * Renders the failure of a login step as a page: the step's form again with the error on it, or,
 * for an unknown or expired request or a failure of the controller, a page that offers nothing to
 * retry. The status (and Retry-After) of the error are kept.
 */
export function renderLoginError(request: FastifyRequest, reply: FastifyReply, err: unknown, retry: Retry): FastifyReply {
  if (err instanceof OAuthError) return sendPage(reply, refusedCompletionPage(request, err));
  const apiError = toApiError(err);
  if (apiError.status >= 500) {
    request.log.error({ ...requestContext(request), err }, 'a login page could not be answered');
    return sendPage(reply, messagePage(apiError.status, 'Something went wrong', 'The sign-in could not be completed. Try again later.', apiError.headers));
  }
  request.log.info({ ...requestContext(request), code: apiError.code, status: apiError.status }, apiError.message);
  if (apiError.code === 'NOT_FOUND') return sendPage(reply, expiredPage());
  const field = (apiError.cause as { field?: string } | undefined)?.field;
  if (field !== undefined && REQUEST_ID_FIELDS.has(field)) return sendPage(reply, noRequestPage());
  // The status the OIDC routes answer it with (a wrong code is 400 there).
  const status = OIDC_STATUS[apiError.code] ?? apiError.status;
  const opts = { error: messageOf(apiError, retry), status, ...(apiError.headers ? { headers: apiError.headers } : {}) };
  switch (retry.step) {
    case 'password':
      return sendPage(reply, passwordPage(retry.authRequest, { ...opts, ...(retry.username !== undefined ? { username: retry.username } : {}) }));
    case 'totp':
      return sendPage(reply, totpPage(retry.authRequest, { ...opts, recovery: retry.recovery === true }));
    case 'enroll':
      return sendPage(reply, enrollPage(retry.authRequest, retry.view, opts));
    case 'none':
      return sendPage(reply, messagePage(apiError.status, 'Sign-in failed', opts.error, apiError.headers));
  }
}
