import type { DomainError, ErrorDetail } from '../../domain/errors.js';

/**
 * The core names fields by neutral paths in its own (camelCase) names: `shippingAddress.postalCode`,
 * `items[0].productId`. REST's wire names are snake_case: `shipping_address.postal_code`. Header
 * names (`Idempotency-Key`) and names already in snake_case are left as they are.
 */
export function restFieldName(path: string): string {
  return path.replace(/([a-z0-9])([A-Z])/g, (_m, a: string, b: string) => `${a}_${b.toLowerCase()}`);
}

/** A core message that starts with its field's path starts with the REST name instead. */
function renamed(message: string, field: string | null): string {
  if (field === null || !message.startsWith(field)) return message;
  return restFieldName(field) + message.slice(field.length);
}

/** The error's message and details in REST's names, unless they already are (`wireNamed`). */
export function restDetails(err: DomainError): { message: string; details: ErrorDetail[] } {
  if (err.meta.wireNamed === true) return { message: err.message, details: err.details };
  const first = err.details[0]?.field ?? null;
  return {
    message: renamed(err.message, first),
    details: err.details.map((d) => ({
      ...d,
      field: d.field === null ? null : restFieldName(d.field),
      message: renamed(d.message, d.field),
    })),
  };
}
