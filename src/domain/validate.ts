/** Small value checks shared by the services; each returns a message or null. */
// The local part excludes spaces, control characters and the specials RFC 5322 would need quoted.
export const EMAIL =
  // eslint-disable-next-line no-control-regex -- control characters are excluded on purpose
  /^[^\s\u0000-\u001f\u007f@"<>(),;:\\[\]]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
export const HANDLE = /^[a-z0-9][a-z0-9_-]{2,38}$/;

export function checkEmail(value: unknown): string | null {
  if (typeof value !== 'string') return 'must be a string';
  if (value.length > 254 || !EMAIL.test(value)) return 'must be a valid email address';
  return null;
}

// eslint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/** Whether text holds a C0 control character or DEL; no id, name or login of ours does. */
export function hasControlCharacter(value: string): boolean {
  return CONTROL_CHARACTER.test(value);
}

export function checkText(value: unknown, min: number, max: number): string | null {
  if (typeof value !== 'string') return 'must be a string';
  const length = [...value].length;
  if (length < min || length > max) return `must be ${min} to ${max} characters`;
  // eslint-disable-next-line no-control-regex -- rejecting control characters is the point
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/.test(value)) return 'must not contain control characters';
  return null;
}

/** Splits a display name into first and last: "Ada King Lovelace" -> ["Ada", "King Lovelace"]. */
export function splitName(name: string): { firstName: string | null; lastName: string | null } {
  const trimmed = name.trim().replace(/\s+/g, ' ');
  if (trimmed === '') return { firstName: null, lastName: null };
  const space = trimmed.indexOf(' ');
  if (space < 0) return { firstName: trimmed, lastName: null };
  return { firstName: trimmed.slice(0, space), lastName: trimmed.slice(space + 1) };
}

export function joinName(firstName: string | null, lastName: string | null): string {
  return [firstName, lastName].filter((p): p is string => p !== null && p !== '').join(' ');
}
