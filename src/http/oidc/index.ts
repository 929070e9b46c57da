// The OIDC API (endpoints.md, "OIDC API"), mounted on every listener that binds edge-oidc: discovery
// at the root and under /oidc, authorization, the login endpoints driven by `authRequestId`,
// auth-queries, token, keys, userinfo and end_session. Routes parse and render; src/oidc decides.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, fieldError, OIDC_STATUS } from '../../errors.js';
import type { BindPoint, ListenerConfig } from '../../config/index.js';
import type { Core } from '../../core/core.js';
import { authenticatePrimary, type LoginMethod } from '../../auth/login.js';
import { OAuthError } from '../../oidc/errors.js';
import { EXT_JWT_FACTOR, TOTP_FACTOR, type AuthRequest } from '../../oidc/flow.js';
import { checkSecondToken, extJwtQuery, requiredSigner } from '../../auth/ext-jwt-factor.js';
import { ExtJwtError } from '../../auth/ext-jwt.js';
import { extJwtChallenge } from '../../auth/login.js';
import { OIDC_PATH } from '../../oidc/issuer.js';
import { BoundedMap } from '../../kernel/bounded-map.js';
import { SCOPES_SUPPORTED } from '../../oidc/provider.js';
import { RedirectPolicy, withQuery } from '../../oidc/redirects.js';
import { CLIENT_ID } from '../../oidc/tokens.js';
import { JWS_ALGORITHMS } from '../../oidc/jws.js';
import { bearerToken, checkingBearer, CHALLENGE, peerCertificate, peerCertificates } from '../credentials.js';
import { handleError, handleNotFound } from '../errors.js';
import { requestContext } from '../request-log.js';
import { originOf, registerWriteOrigin } from '../write-origin.js';
import { apiBad, FORM, formParser, readParams, requestParams, type Params } from './params.js';
import {
  enrollPage,
  messagePage,
  passwordPage,
  RECOVERY_KIND,
  refusedAuthorizationPage,
  renderLoginError,
  sendPage,
  totpPage,
  wantsHtml,
  type EnrollmentView,
  type Retry,
} from './pages.js';

export interface OidcApiOptions {
  core: Core;
  listener: ListenerConfig;
  bindPoint: BindPoint;
  /** Redirect URI patterns configured on this listener's edge-oidc API. */
  redirectURIs?: readonly string[];
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Errors of this route are RFC 6749 objects rather than the API error envelope. */
    oauth?: boolean;
    /** A person's browser is sent here: its OAuth errors are a page when the request prefers HTML. */
    page?: boolean;
  }
}

/** What a login step knows so far: whether a browser asked, and which form a failure shows again. */
interface StepContext {
  html: boolean;
  retry: Retry | (() => Retry | Promise<Retry>);
}

const JSON_TYPE = 'application/json; charset=utf-8';
const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
/** A TOTP code has 6 digits and a recovery code 6 characters; room is left for spaces typed around. */
const MAX_CODE = 32;

/** Login paths by method; `username` is an alias of `password`. */
const LOGIN_PATHS: Record<LoginMethod, string> = { password: 'password', cert: 'cert', 'ext-jwt': 'ext-jwt' };
const METHOD_HINTS: Record<string, LoginMethod> = { password: 'password', username: 'password', updb: 'password', cert: 'cert', 'ext-jwt': 'ext-jwt' };

export async function registerOidcApi(server: FastifyInstance, opts: OidcApiOptions): Promise<void> {
  const { core, bindPoint } = opts;
  const redirects = new RedirectPolicy(opts.redirectURIs ?? [], () => core.oidcSettings.patterns.redirectUris);
  const postLogoutRedirects = new RedirectPolicy(opts.redirectURIs ?? [], () => core.oidcSettings.patterns.postLogoutUris);
  const issuerOf = (request: FastifyRequest): string => core.oidc.issuers.forHost(request.headers.host, bindPoint.address);

  // Host spellings (letter case) are many; the documents kept are few. They depend on the
  // configuration alone, so nothing in the store moves them.
  const discoveries = new BoundedMap<string, string>({ maxEntries: 64 });
  const discovery = (request: FastifyRequest, reply: FastifyReply) => {
    const issuer = issuerOf(request);
    let body = discoveries.get(issuer);
    if (body === undefined) {
      body = JSON.stringify(discoveryDocument(issuer));
      discoveries.set(issuer, body);
    }
    return reply.type(JSON_TYPE).header('cache-control', 'public, max-age=300').send(body);
  };
  server.get('/.well-known/openid-configuration', discovery);

  await server.register(
    async (app) => {
      formParser(app);
      registerWriteOrigin(app, core.kernel);
      app.setNotFoundHandler(handleNotFound);
      app.setErrorHandler((err, request, reply) => {
        let oauth = err instanceof OAuthError ? err : undefined;
        // The token endpoint answers every client error as an OAuth error (a body it could not parse too).
        if (!oauth && request.routeOptions.config?.oauth === true) {
          const status = (err as { statusCode?: number }).statusCode ?? 500;
          // A body too large keeps its 413 (behaviour.md §1) and one in a content coding its 415 with
          // Accept-Encoding, as on every other route.
          const keep = (code: number) => (code === 413 || code === 415 ? code : 400);
          if (!(err instanceof ApiError) && status >= 400 && status < 500) oauth = new OAuthError('invalid_request', (err as Error).message, keep(status));
          if (err instanceof ApiError && err.status < 500 && err.code !== 'SERVER_TOO_MANY_REQUESTS') {
            const kept = keep(err.status);
            // Its headers go with a kept status only: a refused credential's challenge is no OAuth answer's.
            oauth = new OAuthError('invalid_request', err.message, kept, kept === 400 ? undefined : err.headers);
          }
        }
        if (!oauth) return handleError(err, request, reply, OIDC_STATUS);
        request.log.info({ ...requestContext(request), error: oauth.error, status: oauth.status }, oauth.description);
        if (oauth.headers) reply.headers(oauth.headers);
        // The rest of a body too large is never read, so the connection can carry no further request.
        if (oauth.status === 413) reply.header('connection', 'close');
        if (request.routeOptions.config?.page === true && wantsHtml(request)) return sendPage(reply, refusedAuthorizationPage(oauth));
        return reply.code(oauth.status).headers(NO_STORE).type(JSON_TYPE).send(oauth.body());
      });

      app.get('/.well-known/openid-configuration', discovery);

      // ---- authorization ----------------------------------------------------------------------
      const authorization = async (request: FastifyRequest, reply: FastifyReply) => {
        const q = requestParams(request);
        const hint = q.method;
        if (hint !== undefined && METHOD_HINTS[hint] === undefined) {
          throw new OAuthError('invalid_request', `method must be one of ${Object.keys(LOGIN_PATHS).join(', ')}`);
        }
        const authRequest = core.oidc.authorize(q, redirects, request.ip);
        // This provider keeps no sign-in of its own to reuse silently: every request needs a login.
        if ((q.prompt ?? '').split(' ').includes('none')) {
          const location = core.oidc.refuse(authRequest, issuerOf(request), 'login_required', 'prompt=none, and a login is required');
          return reply.code(302).header('cache-control', 'no-store').header('location', location).send();
        }
        const method: LoginMethod = hint !== undefined ? METHOD_HINTS[hint]! : peerCertificate(request) ? 'cert' : 'password';
        return reply
          .code(302)
          .header('cache-control', 'no-store')
          .header('location', `${OIDC_PATH}/login/${LOGIN_PATHS[method]}?authRequestID=${encodeURIComponent(authRequest.id)}`)
          .send();
      };
      for (const url of ['/authorization', '/authorize']) app.route({ method: ['GET', 'POST'], url, config: { oauth: true, page: true }, handler: authorization });

      // ---- login ------------------------------------------------------------------------------
      /**
       * Runs a login step. A browser (wantsHtml) is answered with pages: a failure shows the form of
       * the step it happened in, as far as the step had got (`ctx.retry`), with the error on it.
       */
      const loginStep =
        (step: (request: FastifyRequest, reply: FastifyReply, ctx: StepContext) => Promise<unknown>) =>
        async (request: FastifyRequest, reply: FastifyReply) => {
          const ctx: StepContext = { html: wantsHtml(request), retry: { step: 'none' } };
          if (!ctx.html) return step(request, reply, ctx);
          try {
            return await step(request, reply, ctx);
          } catch (err) {
            let retry: Retry = { step: 'none' };
            try {
              retry = typeof ctx.retry === 'function' ? await ctx.retry() : ctx.retry;
            } catch (gone) {
              // A request that is unknown or over is what the person needs to know (the expired page),
              // not a field left out on its form.
              if (gone instanceof ApiError && gone.code === 'NOT_FOUND') return renderLoginError(request, reply, gone, retry);
              // The form cannot be shown again otherwise (its enrollment is gone, say): the error alone is.
            }
            return renderLoginError(request, reply, err, retry);
          }
        };

      const login = (method: LoginMethod) => async (request: FastifyRequest, reply: FastifyReply, ctx: StepContext) => {
        const body = (request.body ?? {}) as Record<string, unknown>;
        const query = (request.query ?? {}) as Record<string, unknown>;
        const { configTypes: bodyConfigTypes, ...bodyRest } = typeof body === 'object' && !Array.isArray(body) ? body : {};
        const { configTypes: queryConfigTypes, ...queryRest } = query;
        // The body's values first, as a form post means them (the redirect's query names the request).
        const p = readParams([bodyRest, queryRest], apiBad);
        const id = p.authRequestId ?? p.authRequestID ?? p.id;
        if (id === undefined) throw fieldError('authRequestId', 'is required');
        // A URL is kept in browser history and proxy logs: a password there is refused, never tried.
        if (queryRest.password !== undefined) throw fieldError('password', 'must be sent in the body of a POST, never in the URL');
        if (method === 'password' && request.method === 'GET') {
          // A browser that followed the authorization redirect, whatever its Accept: the form.
          return sendPage(reply, passwordPage(core.oidc.requests.get(id)));
        }
        if (method === 'password') {
          // A field left out is asked for on the form again, while the request lasts.
          const username = p.username;
          ctx.retry = () => ({ step: 'password', authRequest: core.oidc.requests.get(id), ...(username !== undefined ? { username } : {}) });
          if (p.username === undefined) throw fieldError('username', 'is required');
          if (p.password === undefined) throw fieldError('password', 'is required');
        }
        const authRequest = core.oidc.requests.get(id);
        if (method === 'password') ctx.retry = { step: 'password', authRequest, ...(p.username !== undefined ? { username: p.username } : {}) };
        if (authRequest.status === 'complete') throw new ApiError('COULD_NOT_VALIDATE', 'the authorization request is already complete');
        core.oidc.requests.addConfigTypes(authRequest, [...listOf(bodyConfigTypes), ...listOf(queryConfigTypes)]);
        const bearer = bearerToken(request.headers.authorization);
        // While the second external JWT is outstanding, POST /oidc/login/ext-jwt brings it.
        if (method === 'ext-jwt' && authRequest.status === 'partial' && authRequest.outstanding.includes(EXT_JWT_FACTOR.id)) {
          await satisfyExtJwt(authRequest, bearer);
          return ctx.html ? renderStep(request, reply, authRequest) : answerLogin(request, reply, authRequest);
        }
        let primary;
        try {
          primary = await authenticatePrimary(core, {
            method,
            username: p.username,
            password: p.password,
            ...peerCertificates(request),
            bearer,
            ipAddress: request.ip,
          });
        } catch (err) {
          if (err instanceof ApiError && err.code === 'INVALID_AUTH') core.oidc.requests.primaryFailed(authRequest);
          throw err;
        }
        const secondSigner = await requiredSigner(core, primary.identity);
        core.oidc.requests.primarySucceeded(authRequest, {
          identityId: primary.identity.id,
          authenticatorId: primary.authenticator?.id ?? null,
          method,
          rules: primary.rules,
          isCertExtendable: method === 'cert' && primary.authenticator?.isIssuedByNetwork === true,
          ipAddress: request.ip,
          isTotpEnrolled: primary.isTotpEnrolled,
          improperClientCertChain: primary.improperClientCertChain,
          ...(secondSigner !== null && { extJwtQuery: extJwtQuery(secondSigner, await core.externalJwtSigners.get(secondSigner)) }),
        });
        // The login request may carry the second external JWT too: a primary ext-jwt login's own
        // token when it is of the signer required, else its Authorization bearer.
        if (secondSigner !== null && bearer !== undefined && (method !== 'ext-jwt' || primary.signer?.id === secondSigner)) {
          await satisfyExtJwt(authRequest, bearer);
        }
        return ctx.html ? renderStep(request, reply, authRequest) : answerLogin(request, reply, authRequest);
      };

      /**
       * Meets the outstanding external JWT factor with a token of the required signer naming the
       * request's identity (amr gains ejs:<signerId>); else 401 in realm overlay-secondary-ext-jwt.
       */
      const satisfyExtJwt = async (authRequest: AuthRequest, token: string | undefined) => {
        const primary = authRequest.primary;
        const signerId = primary?.rules.secondary.requireExtJwtSigner;
        const identity = await identityOf(authRequest);
        try {
          // Stryker: outstanding only when the policy names a signer; '' is for the type checker.
          await checkSecondToken(core, signerId ?? '', identity, token);
        } catch (err) {
          if (!(err instanceof ExtJwtError)) throw err;
          core.oidc.requests.factorFailed(authRequest);
          logRefusal(err);
          throw new ApiError('INVALID_AUTH', `the external JWT second factor is not satisfied: ${err.message}`, undefined, {
            'www-authenticate': extJwtChallenge('overlay-secondary-ext-jwt', err),
          });
        }
        core.oidc.requests.satisfy(authRequest, EXT_JWT_FACTOR.id, `ejs:${signerId ?? ''}`, primary);
      };
      const logRefusal = (err: ExtJwtError) => core.log.warn({ signerId: err.signer?.id, reason: err.message }, 'external JWT second factor refused');

      /** 302 to the client with the code when complete; else 200 with what is still asked for. */
      const answerLogin = (request: FastifyRequest, reply: FastifyReply, authRequest: AuthRequest) => {
        if (authRequest.status === 'complete') {
          return reply.code(302).headers(NO_STORE).header('location', core.oidc.complete(authRequest, issuerOf(request))).send();
        }
        return reply
          .code(200)
          .headers({ ...NO_STORE, ...core.oidc.requests.headers(authRequest) })
          .type(JSON_TYPE)
          .send({ authQueries: core.oidc.requests.queries(authRequest) });
      };

      /**
       * The browser's answer to a login step: the redirect to the client when complete, else the page
       * of the factor still outstanding — the TOTP form, or the enrollment of an authenticator app
       * when the identity has none yet (started here as POST /oidc/login/totp/enroll starts it).
       */
      const renderStep = async (request: FastifyRequest, reply: FastifyReply, authRequest: AuthRequest) => {
        if (authRequest.status === 'complete') return answerLogin(request, reply, authRequest);
        if (!authRequest.outstanding.includes(TOTP_FACTOR.id)) {
          return sendPage(
            reply,
            messagePage(200, 'One more step', 'This sign-in needs a further step that only the application can take. Go back to the application to finish signing in.'),
          );
        }
        const identity = await identityOf(authRequest);
        const view = (await core.mfa.isEnrolled(identity.id)) ? undefined : await enrollmentOf(identity);
        return sendPage(reply, view ? enrollPage(authRequest, view) : totpPage(authRequest));
      };

      /** The identity of a request's primary login, while it still exists. */
      const identityOf = async (authRequest: AuthRequest) => {
        const identity = authRequest.primary && (await core.identities.get(authRequest.primary.identityId));
        if (!identity) throw new ApiError('INVALID_AUTH', 'the identity of this sign-in no longer exists');
        return identity;
      };

      /**
       * The unconfirmed enrollment of an identity, started now when it has none (a second start, or
       * one racing this, finds the first); undefined when it has been confirmed meanwhile.
       */
      const enrollmentOf = async (identity: { id: string; name: string }): Promise<EnrollmentView | undefined> => {
        let view;
        try {
          view = await core.mfa.start(identity);
        } catch (err) {
          if (!(err instanceof ApiError && err.code === 'MFA_EXISTS')) throw err;
          view = await core.mfa.detail(identity);
        }
        if (view.isVerified || view.provisioningUrl === undefined) return undefined;
        return { provisioningUrl: view.provisioningUrl, recoveryCodes: view.recoveryCodes ?? [], qrPng: await core.mfa.qrCode(identity) };
      };

      for (const [path, method] of [
        ['password', 'password'],
        ['username', 'password'],
        ['cert', 'cert'],
        ['ext-jwt', 'ext-jwt'],
      ] as const) {
        app.route({ method: ['GET', 'POST'], url: `/login/${path}`, handler: loginStep(login(method)) });
      }

      app.get('/login/auth-queries', async (request, reply) => {
        const p = requestParams(request, apiBad);
        const id = p.id ?? p.authRequestId ?? p.authRequestID;
        if (id === undefined) throw fieldError('id', 'is required');
        const authRequest = core.oidc.requests.get(id);
        return reply
          .headers({ ...NO_STORE, ...core.oidc.requests.headers(authRequest) })
          .type(JSON_TYPE)
          .send({ authQueries: core.oidc.requests.queries(authRequest) });
      });

      // ---- TOTP: the secondary factor, and enrollment while the request waits -------------------
      // A JSON caller gets what the login endpoints answer: the redirect, or the queries still
      // outstanding; a wrong code is 400 (behaviour.md §6). A browser gets the next page, or the form
      // again with the error on it; a form cannot send DELETE, so the enrollment page's cancel button
      // posts to .../enroll/cancel, which also ends the request (the client hears access_denied).

      /** The authorization request a TOTP step names (`id`, `authRequestId` or `authRequestID`). */
      const totpRequest = (p: Params, idField: string): AuthRequest => {
        const id = p.id ?? p.authRequestId ?? p.authRequestID;
        if (id === undefined) throw fieldError(idField, 'is required');
        return core.oidc.requests.get(id);
      };
      /** The code of a TOTP step. */
      const totpCode = (p: Params): string => {
        if (p.code === undefined) throw fieldError('code', 'is required');
        if (p.code.length > MAX_CODE) throw fieldError('code', `must have at most ${MAX_CODE} characters`);
        return p.code;
      };
      const nextStep = (request: FastifyRequest, reply: FastifyReply, ctx: StepContext, authRequest: AuthRequest) =>
        ctx.html ? renderStep(request, reply, authRequest) : answerLogin(request, reply, authRequest);

      app.post(
        '/login/totp',
        loginStep(async (request, reply, ctx) => {
          const p = requestParams(request, apiBad);
          const authRequest = totpRequest(p, 'id');
          // The recovery form says so, for its error to be shown on it.
          ctx.retry = { step: 'totp', authRequest, recovery: p.kind === RECOVERY_KIND };
          return nextStep(request, reply, ctx, await core.oidc.totp.login(authRequest, totpCode(p)));
        }),
      );

      app.post('/login/totp/enroll', async (request, reply) => {
        const authRequest = totpRequest(requestParams(request, apiBad), 'authRequestId');
        const enrollment = await core.oidc.totp.startEnrollment(authRequest);
        return reply.code(201).headers(NO_STORE).type(JSON_TYPE).send(enrollment);
      });

      app.post(
        '/login/totp/enroll/verify',
        loginStep(async (request, reply, ctx) => {
          const p = requestParams(request, apiBad);
          const authRequest = totpRequest(p, 'authRequestId');
          // Shown again only when the check fails, so the enrollment is read again only then.
          ctx.retry = async (): Promise<Retry> => {
            const view = await enrollmentOf(await identityOf(authRequest));
            return view ? { step: 'enroll', authRequest, view } : { step: 'totp', authRequest };
          };
          return nextStep(request, reply, ctx, await core.oidc.totp.verifyEnrollment(authRequest, totpCode(p)));
        }),
      );

      app.delete('/login/totp/enroll', async (request, reply) => {
        const authRequest = totpRequest(requestParams(request, apiBad), 'authRequestId');
        return answerLogin(request, reply, await core.oidc.totp.cancelEnrollment(authRequest));
      });

      app.post(
        '/login/totp/enroll/cancel',
        loginStep(async (request, reply) => {
          const authRequest = totpRequest(requestParams(request, apiBad), 'authRequestId');
          await core.oidc.totp.cancelEnrollment(authRequest);
          const location = core.oidc.refuse(authRequest, issuerOf(request), 'access_denied', 'the sign-in was cancelled');
          return reply.code(302).headers(NO_STORE).header('location', location).send();
        }),
      );

      // ---- token ------------------------------------------------------------------------------
      const token = async (request: FastifyRequest, reply: FastifyReply) => {
        const type = String(request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (type !== FORM) throw new OAuthError('invalid_request', `the token request must be ${FORM}`);
        const p = readParams([request.body]);
        const clientId = clientOf(request, p);
        // RFC 6749 §5.2: a challenge only for a client that authenticated with the Authorization header.
        const challenge = /^basic\s/i.test(String(request.headers.authorization ?? '')) ? { 'www-authenticate': 'Basic realm="overlay-oidc"' } : undefined;
        if (clientId !== CLIENT_ID) throw new OAuthError('invalid_client', 'unknown client', 401, challenge);
        if (p.client_secret !== undefined && p.client_secret !== '') {
          throw new OAuthError('invalid_client', 'the client is public: it has no secret', 401, challenge);
        }
        const issuer = issuerOf(request);
        let answer;
        switch (p.grant_type) {
          case 'authorization_code':
            answer = await core.oidc.exchangeCode(p, issuer);
            break;
          case 'refresh_token':
            answer = await core.oidc.refresh(p, issuer);
            break;
          case undefined:
            throw new OAuthError('invalid_request', 'grant_type is required');
          default:
            throw new OAuthError('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
        }
        return reply.headers(NO_STORE).type(JSON_TYPE).send(answer);
      };
      for (const url of ['/token', '/oauth/token']) app.post(url, { config: { oauth: true } }, token);

      // ---- keys, userinfo, end_session -----------------------------------------------------------
      app.get('/keys', (_request, reply) =>
        reply.type('application/jwk-set+json; charset=utf-8').header('cache-control', 'public, max-age=300').send(JSON.stringify(core.oidc.keys.jwks())),
      );

      app.route({
        method: ['GET', 'POST'],
        url: '/userinfo',
        handler: async (request, reply) => {
          const accessToken = bearerToken(request.headers.authorization);
          if (accessToken === undefined) {
            throw new ApiError('UNAUTHORIZED', 'no bearer access token was provided', undefined, { 'www-authenticate': CHALLENGE.bearerMissing });
          }
          const claims = await checkingBearer(() => core.oidc.userinfo(accessToken));
          return reply.headers(NO_STORE).type(JSON_TYPE).send(claims);
        },
      });

      app.route({
        method: ['GET', 'POST'],
        url: '/end_session',
        config: { oauth: true },
        handler: async (request, reply) => {
          const p = requestParams(request);
          const target = p.post_logout_redirect_uri;
          if (target !== undefined && !postLogoutRedirects.allows(target)) {
            throw new OAuthError('invalid_request', 'post_logout_redirect_uri is not allowed for this client');
          }
          if (p.client_id !== undefined && p.client_id !== CLIENT_ID) throw new OAuthError('invalid_request', 'unknown client_id');
          let ended: { apiSessionId: string; identityId: string };
          if (p.id_token_hint !== undefined) {
            ended = core.oidc.sessionOfIdToken(p.id_token_hint);
          } else {
            const accessToken = bearerToken(request.headers.authorization);
            if (accessToken === undefined) throw new OAuthError('invalid_request', 'id_token_hint (or a bearer access token) is required');
            // A refusal is answered as this OAuth route answers every client error: invalid_request
            // with the refusal's message (see the error handler above).
            const { claims } = await checkingBearer(() => core.oidc.bearer.verify(accessToken));
            ended = { apiSessionId: claims.ov_asid, identityId: claims.sub };
          }
          // The caller the token names ends its own API session: a logout of that caller.
          const actor = { identityId: ended.identityId, apiSessionId: ended.apiSessionId, method: 'oidc' };
          await core.kernel.withOrigin({ ...originOf(request), actor }, () => core.oidc.endSession(ended.apiSessionId, ended.identityId));
          if (target !== undefined) {
            return reply.code(302).headers(NO_STORE).header('location', withQuery(target, { state: p.state })).send();
          }
          return reply.code(200).headers(NO_STORE).type(JSON_TYPE).send({});
        },
      });
    },
    { prefix: OIDC_PATH },
  );
}

/** client_id from the form, or from HTTP Basic (a public client sends an empty secret). */
function clientOf(request: FastifyRequest, p: Params): string | undefined {
  const auth = request.headers.authorization;
  if (typeof auth === 'string' && /^basic\s/i.test(auth)) {
    const decoded = Buffer.from(auth.slice(6).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    const id = percentDecoded(colon < 0 ? decoded : decoded.slice(0, colon));
    const secret = colon < 0 ? '' : percentDecoded(decoded.slice(colon + 1));
    if (id === undefined || secret !== '') return undefined;
    if (p.client_id !== undefined && p.client_id !== id) return undefined;
    return id;
  }
  return p.client_id;
}

/** A percent-encoded value (RFC 6749 §2.3.1); undefined when its encoding is malformed. */
function percentDecoded(value: string): string | undefined {
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

function listOf(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return [];
}

export function discoveryDocument(issuer: string): Record<string, unknown> {
  const at = (path: string) => `${issuer}${path}`;
  return {
    issuer,
    authorization_endpoint: at('/authorization'),
    token_endpoint: at('/token'),
    userinfo_endpoint: at('/userinfo'),
    jwks_uri: at('/keys'),
    end_session_endpoint: at('/end_session'),
    scopes_supported: [...SCOPES_SUPPORTED],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: [...JWS_ALGORITHMS],
    token_endpoint_auth_methods_supported: ['none'],
    code_challenge_methods_supported: ['S256'],
    claims_supported: ['iss', 'sub', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'amr', 'name', 'sid', 'ov_ia', 'ov_eid'],
    claims_parameter_supported: false,
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
    authorization_response_iss_parameter_supported: true,
    // The login steps of this provider (driven by authRequestId, without browser cookies).
    login_password_endpoint: at('/login/password'),
    login_username_endpoint: at('/login/username'),
    login_cert_endpoint: at('/login/cert'),
    login_ext_jwt_endpoint: at('/login/ext-jwt'),
    login_auth_queries_endpoint: at('/login/auth-queries'),
    login_totp_endpoint: at('/login/totp'),
    login_totp_enroll_endpoint: at('/login/totp/enroll'),
    login_totp_enroll_verify_endpoint: at('/login/totp/enroll/verify'),
  };
}
