/**
 * Query parameters whose value is a credential. node-postgres (pg-connection-string) and ioredis
 * both take every query parameter as a connection option, so `?password=...` is the password just
 * as the user part's is; `sslpassword` is libpq's passphrase for the client key. Any name that
 * says password, secret or token is treated alike. `sslkey`, `sslcert` and `sslrootcert` stay: they
 * name files, and which file is what an operator needs to read a TLS failure.
 */
const CREDENTIAL_PARAM = /pass|pwd|secret|token/i;

function maskCredentialParams(raw: string): string {
  const query = raw.indexOf('?');
  if (query === -1) return raw;
  const hash = raw.indexOf('#', query);
  const end = hash === -1 ? raw.length : hash;
  // By hand, not through URLSearchParams: re-serialising would re-encode the other parameters, and
  // the URL shown should be the one given, less its secrets.
  const masked = raw
    .slice(query + 1, end)
    .replace(/(^|&)([^=&]*)=([^&]*)/g, (pair, lead: string, name: string) => {
      let decoded = name;
      try {
        decoded = decodeURIComponent(name.replace(/\+/g, ' '));
      } catch {
        // a malformed escape: judge the name as written
      }
      return CREDENTIAL_PARAM.test(decoded) ? `${lead}${name}=***` : pair;
    });
  // Neither client reads a fragment; one here is most likely the rest of a value with a bare `#`.
  return `${raw.slice(0, query + 1)}${masked}${hash === -1 ? '' : '#***'}`;
}

/**
 * A URL for messages and logs, its password (if any) shown as `***`, whether it is given in the
 * user part or as a query parameter (`?password=`, `?sslpassword=`); the user stays, as README
 * promises. A URL that does not parse (a port over 65535, say) is read the same way by hand: what
 * follows the first `:` of the user part, up to the `@`, is the password.
 */
export function withoutPassword(raw: string): string {
  let shown = raw;
  try {
    const url = new URL(raw);
    if (url.password !== '') {
      url.password = '***';
      shown = url.toString();
    }
  } catch {
    shown = raw.replace(/\/\/([^@/:]*):[^@/]*@/, '//$1:***@');
  }
  return maskCredentialParams(shown);
}
