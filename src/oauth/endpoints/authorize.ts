import { createHmac } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../../compose.js';
import type { User } from '../../domain/users.js';
import { hasControlCharacter, normaliseEmail } from '../../domain/validate.js';
import {
  checkAuthorizationRequest,
  redirectTo,
  type AuthorizationRequest,
} from '../authorization-request.js';
import { OAuthError, TooManyAttempts } from '../errors.js';
import { Params, sourceAddress } from '../http.js';
import { CSRF_FIELD, CsrfProtection } from '../pages/csrf.js';
import { consentPage, errorPage, loginPage, PAGES_CSS } from '../pages/html.js';
import { LoginTickets, requestBinding } from '../pages/login-ticket.js';
import { guarded, redirect, sendPage } from '../pages/respond.js';
import { grantableBy } from '../scope.js';
import { SCOPE_DESCRIPTIONS, type Scope } from '../../auth/scopes.js';
import type { OAuth } from '../service.js';
import { sharedSecret } from '../settings.js';

const PAGES_SECRET_SETTING = 'oauth_pages_secret';
const TICKET_FIELD = 'login_ticket';

/** One POST /authorize in progress: the validated request and what the browser sent. */
interface Submission {
  request: FastifyRequest;
  reply: FastifyReply;
  authz: AuthorizationRequest;
  params: Params;
  /** The browser's CSRF cookie ('' for a non-browser client), which login tickets are bound to. */
  csrfCookie: string;
  /** What a login ticket must have been issued for. */
  binding: string;
}

/** A step either yields its value or has already answered the request. */
type Step<T> = { value: T } | { answered: FastifyReply };

/**
 * GET and POST /authorize (RFC 6749 §4.1.1, decisions §4). GET validates the request and shows
 * the login page. POST runs: validate → CSRF → deny? → sign in (password, or the consent page's
 * login ticket) → scope the user may grant → consent (unless first-party or already approved) →
 * 302 to the registered redirect URI with `code`, `state` and `iss`.
 */
class AuthorizationFlow {
  constructor(
    private readonly services: Services,
    private readonly oauth: OAuth,
    private readonly csrf: CsrfProtection,
    private readonly tickets: LoginTickets,
  ) {}

  private get authOrigin(): string {
    return new URL(this.oauth.config.authUrl).origin;
  }

  async show(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const params = Params.fromSearch(new URL(request.url, 'http://localhost').searchParams);
    const checked = await this.validate(params, reply);
    if ('answered' in checked) return checked.answered;
    return this.loginPage(request, reply, checked.value, 200);
  }

  async submit(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    if (typeof request.body !== 'string') {
      return sendPage(reply, 400, errorPage('The form must be sent as application/x-www-form-urlencoded.'));
    }
    const params = Params.fromSearch(postedParams(request.body, request.url));
    const checked = await this.validate(params, reply);
    if ('answered' in checked) return checked.answered;
    const authz = checked.value;

    const csrf = this.csrf.verify(request, params.get(CSRF_FIELD));
    if (!csrf.ok && csrf.reason === 'other_address') {
      // The page was opened at another name for this server: the same request at AUTH_URL, where
      // the form can be sent (otherwise every sign-in there failed, and said "another site").
      const canonical = new URL(`${this.oauth.config.authUrl}/authorize`);
      for (const [name, value] of Object.entries(authz.carried)) {
        if (value !== undefined) canonical.searchParams.set(name, value);
      }
      return redirect(reply, canonical.href);
    }
    if (!csrf.ok) {
      const error = 'This form expired or was sent from another site. Please sign in again.';
      return this.loginPage(request, reply, authz, 403, { error });
    }
    const binding = requestBinding([
      authz.client.id,
      authz.redirectUri,
      params.get('scope'),
      authz.state,
      authz.codeChallenge,
    ]);
    const submission: Submission = { request, reply, authz, params, csrfCookie: csrf.cookie, binding };
    const consent = params.get('consent');
    if (consent === 'deny') {
      // A deny from the consent page uses its ticket up too, so the same form cannot approve later.
      // A deny is answered the same whatever the ticket: it only sends the user back to the client.
      const ticket = params.get(TICKET_FIELD);
      if (ticket !== undefined)
        await this.tickets.consume(ticket, { requestBinding: binding, csrfCookie: csrf.cookie });
      return this.back(submission, {
        error: 'access_denied',
        error_description: 'The user denied the request.',
      });
    }
    const signedIn =
      params.get(TICKET_FIELD) !== undefined && params.get('username') === undefined
        ? await this.fromTicket(submission)
        : await this.withPassword(submission);
    if ('answered' in signedIn) return signedIn.answered;
    const user = signedIn.value;

    const scope = grantableBy(user.role, authz.scope);
    if (scope.length === 0) {
      const error_description = 'None of the requested scopes is available to this user.';
      return this.back(submission, { error: 'invalid_scope', error_description });
    }
    if (authz.client.firstParty || consent === 'approve') {
      const code = await this.oauth.codes.issue({
        clientId: authz.client.id,
        userId: user.id,
        redirectUri: authz.redirectUri,
        scope,
        codeChallenge: authz.codeChallenge,
      });
      return this.back(submission, { code });
    }
    return this.consentPage(submission, user, scope);
  }

  private async validate(params: Params, reply: FastifyReply): Promise<Step<AuthorizationRequest>> {
    const checked = await checkAuthorizationRequest(params, this.oauth.clients, this.oauth.config.authUrl);
    if (checked.kind === 'page') return { answered: sendPage(reply, 400, errorPage(checked.message)) };
    if (checked.kind === 'redirect') return { answered: redirect(reply, checked.location) };
    return { value: checked.request };
  }

  /** Username (handle or email) and password, within the account's and the address's failure budgets. */
  private async withPassword(s: Submission): Promise<Step<User>> {
    const username = s.params.get('username');
    const password = s.params.get('password');
    const page = (status: number, error: string) => ({
      answered: this.loginPage(s.request, s.reply, s.authz, status, { error, username }),
    });
    if (username === undefined || password === undefined)
      return page(400, 'Enter your username and password.');
    const users = this.services.core.users;
    const address = sourceAddress(s.request);
    // No account name or password of a real user is that long or holds a control character.
    const plausible = username.length <= 320 && password.length <= 1024 && !hasControlCharacter(username);
    // One budget per account, whether it is named by handle or by email.
    const account = plausible ? await users.findForLogin(username) : undefined;
    const identifier = account ? `user:${account.id}` : `login:${normaliseEmail(username)}`;
    try {
      await this.oauth.loginGuard.check(identifier, address);
    } catch (err) {
      if (!(err instanceof TooManyAttempts)) throw err;
      s.reply.header('Retry-After', String(err.retryAfter));
      return page(429, `Too many failed sign-in attempts. Try again in ${err.retryAfter} seconds.`);
    }
    const user = plausible ? await users.authenticate(username, password) : undefined;
    if (!user) {
      await this.oauth.loginGuard.failed(identifier, address);
      return page(400, 'The username or password is incorrect.');
    }
    await this.oauth.loginGuard.succeeded(identifier);
    return { value: user };
  }

  /**
   * The consent page's proof of the sign-in, bound to this request and this browser, and used up
   * here: a used ticket gets the same page as an expired one.
   */
  private async fromTicket(s: Submission): Promise<Step<User>> {
    const ticket = s.params.get(TICKET_FIELD)!;
    const userId = await this.tickets.consume(ticket, {
      requestBinding: s.binding,
      csrfCookie: s.csrfCookie,
    });
    const user = userId ? (await this.services.core.users.getMany([userId])).get(userId) : undefined;
    if (user) return { value: user };
    const error = 'Your sign-in expired. Please sign in again.';
    return { answered: this.loginPage(s.request, s.reply, s.authz, 400, { error }) };
  }

  private loginPage(
    request: FastifyRequest,
    reply: FastifyReply,
    authz: AuthorizationRequest,
    status: number,
    extra: { error?: string; username?: string | undefined } = {},
  ): FastifyReply {
    const { token } = this.csrf.issue(request, reply);
    const html = loginPage({
      clientName: authz.client.name,
      fields: { ...authz.carried, [CSRF_FIELD]: token },
      username: extra.username,
      error: extra.error,
    });
    return sendPage(reply, status, html, authz.redirectUri, this.authOrigin);
  }

  private async consentPage(s: Submission, user: User, scope: string[]): Promise<FastifyReply> {
    const { token } = this.csrf.issue(s.request, s.reply);
    const ticket = await this.tickets.issue({
      userId: user.id,
      requestBinding: s.binding,
      csrfCookie: s.csrfCookie,
    });
    const html = consentPage({
      clientName: s.authz.client.name,
      userHandle: user.handle,
      scopes: scope.map((name) => ({ name, description: SCOPE_DESCRIPTIONS[name as Scope] ?? name })),
      fields: { ...s.authz.carried, [CSRF_FIELD]: token, [TICKET_FIELD]: ticket },
    });
    return sendPage(s.reply, 200, html, s.authz.redirectUri, this.authOrigin);
  }

  /** Back to the client with the response, its `state` and our `iss` (RFC 9207). */
  private back(s: Submission, values: Record<string, string>): FastifyReply {
    const location = redirectTo(s.authz.redirectUri, {
      ...values,
      state: s.authz.state,
      iss: this.oauth.config.authUrl,
    });
    return redirect(s.reply, location);
  }
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

/**
 * A body refused before the handler runs (text/plain, as a cross-site form can send it; too large)
 * still gets a page: a person is looking at this endpoint, not an OAuth client.
 */
function pageForRefusedBody(err: { statusCode?: number }, request: FastifyRequest, reply: FastifyReply) {
  // The form parser's own refusal (bytes that are not UTF-8) says what is wrong with the form.
  if (err instanceof OAuthError && err.status < 500) return sendPage(reply, 400, errorPage(err.message));
  const status = err.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const message =
      status === 413
        ? 'The form is larger than this server accepts.'
        : 'The form must be sent as application/x-www-form-urlencoded.';
    return sendPage(reply, status === 413 ? 413 : 400, errorPage(message));
  }
  request.log.error({ err }, 'authorization page failed');
  return sendPage(reply, 500, errorPage('Something went wrong on our side. Please try again.'));
}

export async function registerAuthorizeEndpoint(
  app: FastifyInstance,
  services: Services,
  oauth: OAuth,
): Promise<void> {
  // CSRF tokens and login tickets are signed with keys every instance shares through the store.
  const secret = await sharedSecret(services.store, PAGES_SECRET_SETTING);
  const derive = (label: string) => createHmac('sha256', secret).update(label).digest();
  const authUrl = new URL(oauth.config.authUrl);
  const flow = new AuthorizationFlow(
    services,
    oauth,
    new CsrfProtection(derive('csrf'), authUrl.origin, authUrl.protocol === 'https:'),
    new LoginTickets(
      derive('login-ticket'),
      services.clock,
      `${oauth.config.authUrl}/authorize`,
      services.store,
    ),
  );

  app.get('/authorize', { schema: { hide: true } }, (request, reply) =>
    guarded(request, reply, () => flow.show(request, reply)),
  );
  app.post('/authorize', { schema: { hide: true }, errorHandler: pageForRefusedBody }, (request, reply) =>
    guarded(request, reply, () => flow.submit(request, reply)),
  );
  app.get('/oauth/assets/pages.css', { schema: { hide: true } }, async (_request, reply) =>
    reply.header('Cache-Control', 'public, max-age=86400').type('text/css; charset=utf-8').send(PAGES_CSS),
  );
}
