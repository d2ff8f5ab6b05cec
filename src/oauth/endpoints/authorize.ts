import { createHmac } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../../compose.js';
import type { User } from '../../domain/users.js';
import {
  checkAuthorizationRequest,
  redirectTo,
  type AuthorizationRequest,
} from '../authorization-request.js';
import { TooManyAttempts } from '../errors.js';
import { Params, sourceAddress } from '../http.js';
import { CSRF_FIELD, CsrfProtection } from '../pages/csrf.js';
import { consentPage, errorPage, loginPage, PAGES_CSS } from '../pages/html.js';
import { LoginTickets, requestBinding } from '../pages/login-ticket.js';
import { grantableBy, SCOPE_DESCRIPTIONS } from '../scope.js';
import type { OAuth } from '../service.js';
import { sharedSecret } from '../settings.js';

const PAGES_SECRET_SETTING = 'oauth_pages_secret';
const TICKET_FIELD = 'login_ticket';

/**
 * GET and POST /authorize (RFC 6749 §4.1.1, decisions §4). GET validates the request and shows
 * the login page; POST validates it again, checks the CSRF token, signs the user in (or reads
 * the login ticket of the consent page), asks for consent when the client is not first-party,
 * and answers 302 to the registered redirect URI with `code`, `state` and `iss`.
 */
export async function registerAuthorizeEndpoint(
  app: FastifyInstance,
  services: Services,
  oauth: OAuth,
): Promise<void> {
  const secret = await sharedSecret(services.store, PAGES_SECRET_SETTING);
  const derive = (label: string) => createHmac('sha256', secret).update(label).digest();
  const authUrl = new URL(oauth.config.authUrl);
  const csrf = new CsrfProtection(derive('csrf'), authUrl.origin, authUrl.protocol === 'https:');
  const tickets = new LoginTickets(
    derive('login-ticket'),
    services.clock,
    `${oauth.config.authUrl}/authorize`,
  );
  const issuer = oauth.config.authUrl;

  const validate = (params: Params) => checkAuthorizationRequest(params, oauth.clients, issuer);

  function showLogin(
    request: FastifyRequest,
    reply: FastifyReply,
    authz: AuthorizationRequest,
    status: number,
    extra: { error?: string; username?: string } = {},
  ): FastifyReply {
    const { token } = csrf.issue(request, reply);
    const html = loginPage({
      clientName: authz.client.name,
      fields: { ...authz.carried, [CSRF_FIELD]: token },
      username: extra.username,
      error: extra.error,
    });
    return sendPage(reply, status, html, authz.redirectUri);
  }

  app.get('/authorize', { schema: { hide: true } }, (request, reply) =>
    guarded(request, reply, async () => {
      const params = Params.fromSearch(new URL(request.url, 'http://localhost').searchParams);
      const checked = await validate(params);
      if (checked.kind === 'page') return sendPage(reply, 400, errorPage(checked.message));
      if (checked.kind === 'redirect') return redirect(reply, checked.location);
      return showLogin(request, reply, checked.request, 200);
    }),
  );

  app.post('/authorize', { schema: { hide: true } }, (request, reply) =>
    guarded(request, reply, async () => {
      if (typeof request.body !== 'string') {
        return sendPage(reply, 400, errorPage('The form must be sent as application/x-www-form-urlencoded.'));
      }
      const params = Params.fromSearch(postedParams(request.body, request.url));
      const checked = await validate(params);
      if (checked.kind === 'page') return sendPage(reply, 400, errorPage(checked.message));
      if (checked.kind === 'redirect') return redirect(reply, checked.location);
      const authz = checked.request;
      const back = (values: Record<string, string | undefined>) =>
        redirect(reply, redirectTo(authz.redirectUri, { ...values, state: authz.state, iss: issuer }));

      const csrfCheck = csrf.verify(request, params.get(CSRF_FIELD));
      if (!csrfCheck.ok) {
        return showLogin(request, reply, authz, 403, {
          error: 'This form expired or was sent from another site. Please sign in again.',
        });
      }
      const csrfCookie = csrfCheck.cookie;
      const consent = params.get('consent');
      if (consent === 'deny')
        return back({ error: 'access_denied', error_description: 'The user denied the request.' });

      const binding = requestBinding([
        authz.client.id,
        authz.redirectUri,
        params.get('scope'),
        authz.state,
        authz.codeChallenge,
      ]);
      const username = params.get('username');
      const password = params.get('password');
      const ticket = params.get(TICKET_FIELD);
      let user: User | undefined;
      if (username !== undefined || password !== undefined || ticket === undefined) {
        if (username === undefined || password === undefined) {
          return showLogin(request, reply, authz, 400, {
            error: 'Enter your username and password.',
            username,
          });
        }
        const address = sourceAddress(request);
        // One budget per account, whether it is named by handle or by email.
        const account = username.length <= 320 ? await services.core.users.findForLogin(username) : undefined;
        const identifier = account ? `user:${account.id}` : `login:${username.trim().toLowerCase()}`;
        try {
          await oauth.loginGuard.check(identifier, address);
        } catch (err) {
          if (!(err instanceof TooManyAttempts)) throw err;
          reply.header('Retry-After', String(err.retryAfter));
          return showLogin(request, reply, authz, 429, {
            error: `Too many failed sign-in attempts. Try again in ${err.retryAfter} seconds.`,
            username,
          });
        }
        user =
          username.length <= 320 && password.length <= 1024
            ? await services.core.users.authenticate(username, password)
            : undefined;
        if (!user) {
          await oauth.loginGuard.failed(identifier, address);
          return showLogin(request, reply, authz, 400, {
            error: 'The username or password is incorrect.',
            username,
          });
        }
        await oauth.loginGuard.succeeded(identifier);
      } else {
        const userId = await tickets.verify(ticket, { requestBinding: binding, csrfCookie });
        user = userId ? (await services.core.users.getMany([userId])).get(userId) : undefined;
        if (!user)
          return showLogin(request, reply, authz, 400, {
            error: 'Your sign-in expired. Please sign in again.',
          });
      }

      const scope = grantableBy(user.role, authz.scope);
      if (scope.length === 0) {
        return back({
          error: 'invalid_scope',
          error_description: 'None of the requested scopes is available to this user.',
        });
      }
      if (authz.client.firstParty || consent === 'approve') {
        const code = await oauth.codes.issue({
          clientId: authz.client.id,
          userId: user.id,
          redirectUri: authz.redirectUri,
          scope,
          codeChallenge: authz.codeChallenge,
        });
        return back({ code });
      }
      const { token } = csrf.issue(request, reply);
      const html = consentPage({
        clientName: authz.client.name,
        userHandle: user.handle,
        scopes: scope.map((name) => ({ name, description: SCOPE_DESCRIPTIONS[name] ?? name })),
        fields: {
          ...authz.carried,
          [CSRF_FIELD]: token,
          [TICKET_FIELD]: await tickets.issue({ userId: user.id, requestBinding: binding, csrfCookie }),
        },
      });
      return sendPage(reply, 200, html, authz.redirectUri);
    }),
  );

  app.get('/oauth/assets/pages.css', { schema: { hide: true } }, async (_request, reply) =>
    reply.header('Cache-Control', 'public, max-age=86400').type('text/css; charset=utf-8').send(PAGES_CSS),
  );
}

/**
 * The form's fields; a parameter only in the query string (a client that posts to the URL it
 * was sent to) is taken from there, so both ways of posting the original request work.
 */
function postedParams(body: string, url: string): URLSearchParams {
  const posted = new URLSearchParams(body);
  const query = new URL(url, 'http://localhost').searchParams;
  for (const [name, value] of query) if (!posted.has(name)) posted.append(name, value);
  return posted;
}

/** A page failure is a page too, never a JSON body or a stack trace. */
async function guarded(
  request: FastifyRequest,
  reply: FastifyReply,
  work: () => Promise<FastifyReply>,
): Promise<FastifyReply> {
  try {
    return await work();
  } catch (err) {
    request.log.error({ err }, 'authorization page failed');
    return sendPage(reply, 500, errorPage('Something went wrong on our side. Please try again.'));
  }
}

/**
 * No script anywhere; styles only from this origin; the form may post only here and, because
 * browsers apply form-action to the redirect that follows a submission, to the client's redirect
 * URI; no framing (clickjacking); no <base> tricks.
 */
function contentSecurityPolicy(redirectUri: string | undefined): string {
  const formTargets = ["'self'"];
  if (redirectUri) {
    const url = new URL(redirectUri);
    formTargets.push(url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : url.protocol);
  }
  return [
    "default-src 'none'",
    "style-src 'self'",
    `form-action ${formTargets.join(' ')}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

function sendPage(reply: FastifyReply, status: number, html: string, redirectUri?: string): FastifyReply {
  return reply
    .code(status)
    .header('Content-Security-Policy', contentSecurityPolicy(redirectUri))
    .header('Cache-Control', 'no-store')
    .header('Pragma', 'no-cache')
    .header('Referrer-Policy', 'no-referrer')
    .type('text/html; charset=utf-8')
    .send(html);
}

function redirect(reply: FastifyReply, location: string): FastifyReply {
  return reply
    .code(302)
    .header('Location', location)
    .header('Cache-Control', 'no-store')
    .header('Referrer-Policy', 'no-referrer')
    .send();
}
