/**
 * A URL for messages and logs, its password (if any) shown as `***`; the user stays, as README
 * promises. A URL that does not parse (a port over 65535, say) is read the same way by hand: what
 * follows the first `:` of the user part, up to the `@`, is the password.
 */
export function withoutPassword(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password === '') return raw;
    url.password = '***';
    return url.toString();
  } catch {
    return raw.replace(/\/\/([^@/:]*):[^@/]*@/, '//$1:***@');
  }
}
