/**
 * A URL for messages and logs, its password (if any) shown as `***`. A URL that does not parse
 * keeps its scheme and loses its whole user part, so nothing after `//` and before `@` is shown.
 */
export function withoutPassword(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password === '') return raw;
    url.password = '***';
    return url.toString();
  } catch {
    return raw.replace(/\/\/[^@/]*@/, '//***@');
  }
}
