import type { FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../domain/errors.js';
import { loggedAsOutage } from '../../http/errors.js';
import { isStoreUnavailable } from '../../store/errors.js';
import { errorPage, unavailablePage } from './html.js';

/**
 * No script anywhere; styles only from this origin; the form may post only here and, because
 * browsers apply form-action to the redirect that follows a submission, to the client's redirect
 * URI and to AUTH_URL's origin (`authOrigin`: a page opened at another name for this server is sent
 * there); no framing (clickjacking); no <base> tricks.
 */
export function contentSecurityPolicy(redirectUri: string | undefined, authOrigin?: string): string {
  const formTargets = ["'self'"];
  if (authOrigin) formTargets.push(authOrigin);
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

export function sendPage(
  reply: FastifyReply,
  status: number,
  html: string,
  redirectUri?: string,
  authOrigin?: string,
): FastifyReply {
  return (
    reply
      .code(status)
      .header('Content-Security-Policy', contentSecurityPolicy(redirectUri, authOrigin))
      .header('Cache-Control', 'no-store')
      .header('Pragma', 'no-cache')
      // Not no-referrer: under it a browser posts the form with `Origin: null`, which the CSRF check
      // must refuse. same-origin names the origin to this server and nothing to any other.
      .header('Referrer-Policy', 'same-origin')
      .type('text/html; charset=utf-8')
      .send(html)
  );
}

/** The redirect to the client: its Referrer-Policy governs the next request, which gets no Referer. */
export function redirect(reply: FastifyReply, location: string): FastifyReply {
  return reply
    .code(302)
    .header('Location', location)
    .header('Cache-Control', 'no-store')
    .header('Referrer-Policy', 'no-referrer')
    .send();
}

/** A page failure is a page too, never a JSON body or a stack trace. */
export async function guarded(
  request: FastifyRequest,
  reply: FastifyReply,
  work: () => Promise<FastifyReply>,
): Promise<FastifyReply> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof DomainError && err.code === 'validation_error') {
      return sendPage(reply, 400, errorPage('The request holds a value that is not allowed.'));
    }
    // The database is restarting or unreachable: say so, and when to retry, as /oauth/token's 503
    // temporarily_unavailable does; a 500 would tell the person something is broken for good.
    if (isStoreUnavailable(err) || (err instanceof DomainError && err.code === 'unavailable')) {
      // A database outage is logged once for every surface (loggedAsOutage); a deadline each time.
      if (!loggedAsOutage(request, err))
        request.log.warn(
          { err: err instanceof Error ? err.message : String(err) },
          'authorization page answered 503',
        );
      reply.header('Retry-After', '1');
      return sendPage(reply, 503, unavailablePage());
    }
    request.log.error({ err }, 'authorization page failed');
    return sendPage(reply, 500, errorPage('Something went wrong on our side. Please try again.'));
  }
}
