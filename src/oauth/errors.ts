/**
 * The OAuth error catalogue (RFC 6749 §4.1.2.1, §5.2; RFC 7662 §2.3). Token-server endpoints answer
 * `{ error, error_description }` instead of the REST error body, so they throw these and the
 * token-server error handler renders them. One class per RFC error keeps every throw site honest
 * about which code the standard asks for.
 */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    description: string,
    readonly status = 400,
    readonly headers: Record<string, string> = {},
  ) {
    super(safeDescription(description));
    this.name = 'OAuthError';
  }

  body(): { error: string; error_description: string } {
    return { error: this.error, error_description: this.message };
  }
}

/** RFC 6749 limits error_description to printable ASCII without `"` and `\`. */
function safeDescription(text: string): string {
  return text.replace(/["\\]/g, "'").replace(/[^\x20-\x7e]/g, '?');
}

export class InvalidRequest extends OAuthError {
  constructor(description: string) {
    super('invalid_request', description);
  }
}

/** Always the same text, so an unknown client and a wrong secret cannot be told apart. */
export class InvalidClient extends OAuthError {
  constructor(description = 'Client authentication failed.') {
    super('invalid_client', description, 401, {
      'WWW-Authenticate': 'Basic realm="atrium", charset="UTF-8"',
    });
  }
}

/**
 * A refused grant. Refresh-token refusals are 401 (the spec's state table), but carry no
 * WWW-Authenticate: on the token endpoint that header belongs to `invalid_client`, in the client's
 * own scheme (RFC 6749 §5.2), and a refresh token is a grant, not an HTTP credential. A Bearer
 * challenge here made standard clients (oauth4webapi) report a challenge instead of `invalid_grant`.
 */
export class InvalidGrant extends OAuthError {
  constructor(description: string, status: 400 | 401 = 400) {
    super('invalid_grant', description, status);
  }
}

export class UnauthorizedClient extends OAuthError {
  constructor(description: string) {
    super('unauthorized_client', description);
  }
}

export class UnsupportedGrantType extends OAuthError {
  constructor(description: string) {
    super('unsupported_grant_type', description);
  }
}

export class UnsupportedResponseType extends OAuthError {
  constructor(description: string) {
    super('unsupported_response_type', description);
  }
}

export class InvalidScope extends OAuthError {
  constructor(description: string) {
    super('invalid_scope', description);
  }
}

export class AccessDenied extends OAuthError {
  constructor(description: string) {
    super('access_denied', description, 403);
  }
}

export class ServerError extends OAuthError {
  constructor(description = 'The authorization server met an unexpected condition.') {
    super('server_error', description, 500);
  }
}

/** Brute-force protection tripped. Not an RFC 6749 code; named as the rest of the API names it. */
export class TooManyAttempts extends OAuthError {
  constructor(readonly retryAfter: number) {
    super('rate_limit_exceeded', 'Too many failed attempts; try again later.', 429, {
      'Retry-After': String(retryAfter),
    });
  }
}
