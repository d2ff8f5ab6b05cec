/** Where Swagger UI is served. */
export const SWAGGER_UI_PREFIX = '/docs';

/**
 * The redirect URI Swagger UI's "Authorize" (authorization code + PKCE) sends: its page resolves
 * `./static/oauth2-redirect.html` against its own address, so a client must register
 * `{base_url}` + this path for the docs to sign in with it. `atrium seed` registers it for its
 * public client.
 */
export const SWAGGER_OAUTH2_REDIRECT_PATH = `${SWAGGER_UI_PREFIX}/static/oauth2-redirect.html`;
