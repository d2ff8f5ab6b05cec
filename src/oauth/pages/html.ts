/** Server-rendered pages of the authorization endpoint: no script at all, one external stylesheet. */

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

export interface HiddenFields {
  [name: string]: string | undefined;
}

function hidden(fields: HiddenFields): string {
  return Object.entries(fields)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('\n      ');
}

function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <meta name="referrer" content="same-origin">
  <title>${escapeHtml(title)} · Atrium</title>
  <link rel="stylesheet" href="oauth/assets/pages.css">
</head>
<body>
  <main class="card" aria-labelledby="title">
    ${body}
  </main>
</body>
</html>
`;
}

function alert(message: string | undefined): string {
  return message ? `<p class="error" role="alert" id="form-error">${escapeHtml(message)}</p>` : '';
}

export function loginPage(input: {
  clientName: string;
  fields: HiddenFields;
  username?: string | undefined;
  error?: string | undefined;
}): string {
  // The error describes each field, not the form: a screen reader reads a field's description as
  // focus enters it, a form's never. Focus starts on the password (the username is kept), so the
  // error is read at once, and the title says there is one, as it is the first thing read.
  const described = input.error ? ' aria-describedby="form-error"' : '';
  const focus = input.error ? ' autofocus' : '';
  return layout(
    input.error ? 'Error: Sign in' : 'Sign in',
    `<h1 id="title">Sign in</h1>
    <p class="lead">to continue to <strong>${escapeHtml(input.clientName)}</strong></p>
    ${alert(input.error)}
    <form method="post" action="authorize">
      ${hidden(input.fields)}
      <div class="field">
        <label for="username">Username or email</label>
        <input id="username" name="username" type="text" autocomplete="username" autocapitalize="none"
          spellcheck="false" required maxlength="320" value="${escapeHtml(input.username ?? '')}"${described}>
      </div>
      <div class="field">
        <label for="password">Password</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024"${described}${focus}>
      </div>
      <button type="submit">Sign in</button>
    </form>`,
  );
}

export function consentPage(input: {
  clientName: string;
  userHandle: string;
  scopes: { name: string; description: string }[];
  fields: HiddenFields;
}): string {
  const items = input.scopes
    .map(
      (s) =>
        `<li><span class="scope">${escapeHtml(s.description)}</span> <code>${escapeHtml(s.name)}</code></li>`,
    )
    .join('\n        ');
  return layout(
    'Allow access',
    `<h1 id="title">Allow ${escapeHtml(input.clientName)} to use your account?</h1>
    <p class="lead">Signed in as <strong>${escapeHtml(input.userHandle)}</strong>. ${escapeHtml(input.clientName)} asks to:</p>
    <ul class="scopes" aria-label="Requested permissions">
        ${items}
    </ul>
    <form method="post" action="authorize">
      ${hidden(input.fields)}
      <div class="actions">
        <button type="submit" name="consent" value="approve">Allow</button>
        <button type="submit" name="consent" value="deny" class="secondary">Deny</button>
      </div>
    </form>`,
  );
}

export function errorPage(message: string): string {
  return layout(
    'Cannot continue',
    `<h1 id="title">This sign-in request cannot continue</h1>
    <p role="alert">${escapeHtml(message)}</p>
    <p class="fine">Return to the application you came from and try again.</p>`,
  );
}

/** The database is unreachable for a moment: nothing is wrong with the request, so reloading will do. */
export function unavailablePage(): string {
  return layout(
    'Temporarily unavailable',
    `<h1 id="title">The service is temporarily unavailable</h1>
    <p role="alert">The sign-in service cannot reach its database right now.</p>
    <p class="fine">Reload this page in a moment to try again.</p>`,
  );
}

/**
 * The one stylesheet, served from this origin so the CSP can stay `style-src 'self'`. Sizes include
 * padding and borders, and the page's one column may shrink below its longest word, so the card fits
 * a 320 px screen without sideways scrolling even under a long client name (WCAG reflow). The focus
 * ring is the text colour, which contrasts with the page in light and dark schemes alike.
 */
export const PAGES_CSS = `:root { color-scheme: light dark; font-family: system-ui, sans-serif; line-height: 1.5; }
*, *::before, *::after { box-sizing: border-box; }
body { margin: 0; min-height: 100vh; display: grid; grid-template-columns: minmax(0, 1fr); place-items: center;
  background: Canvas; color: CanvasText; }
.card { width: min(26rem, 100% - 2rem); padding: clamp(1rem, 5vw, 2rem); border: 1px solid GrayText;
  border-radius: 0.75rem; overflow-wrap: anywhere; }
h1 { font-size: 1.4rem; margin: 0 0 0.5rem; }
.lead { margin: 0 0 1.25rem; }
.field { display: grid; gap: 0.25rem; margin-bottom: 1rem; }
label { font-weight: 600; }
input { font: inherit; padding: 0.6rem; border: 1px solid GrayText; border-radius: 0.4rem; }
button { font: inherit; font-weight: 600; padding: 0.6rem 1.2rem; border-radius: 0.4rem; border: 2px solid #1d4ed8;
  background: #1d4ed8; color: #fff; cursor: pointer; }
button.secondary { background: transparent; color: CanvasText; border-color: GrayText; }
input:focus-visible, button:focus-visible { outline: 3px solid CanvasText; outline-offset: 2px; }
.actions { display: flex; gap: 0.75rem; }
.error { padding: 0.75rem; border: 2px solid #b91c1c; border-radius: 0.4rem; }
.scopes { padding-left: 1.25rem; }
.scope { font-weight: 600; }
.fine { font-size: 0.9rem; }
`;
