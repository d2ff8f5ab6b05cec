import { DomainError } from '../domain/errors.js';
import { hasControlCharacter } from '../domain/validate.js';
import { allowedAddresses, bareHost, RefusedAddressError, type Resolver } from './address-policy.js';

export const MAX_URL_LENGTH = 2048;

const urlProblem = (message: string, code: string) =>
  new DomainError('validation_error', message, [{ field: 'url', message, code }]);

/**
 * An endpoint URL as stored: absolute http(s), no credentials, no fragment, and, when private
 * targets are not allowed, a host that resolves only to public addresses.
 */
export async function checkTargetUrl(
  raw: string,
  allowPrivate: boolean,
  resolve?: Resolver,
): Promise<string> {
  if (raw.length === 0 || raw.length > MAX_URL_LENGTH || hasControlCharacter(raw)) {
    throw urlProblem(
      `url must be 1 to ${MAX_URL_LENGTH} characters without control characters`,
      'range_error',
    );
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw urlProblem('url must be an absolute http or https URL', 'invalid_format');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw urlProblem('url must use http or https', 'invalid_format');
  }
  if (url.username !== '' || url.password !== '') {
    throw urlProblem(
      'url must not carry credentials; verify deliveries by their signature',
      'invalid_format',
    );
  }
  if (url.hash !== '') throw urlProblem('url must not have a fragment', 'invalid_format');
  if (!allowPrivate) {
    try {
      await allowedAddresses(bareHost(url), false, resolve);
    } catch (err) {
      if (err instanceof RefusedAddressError) {
        throw urlProblem(`url is not allowed: ${err.message}`, 'private_address');
      }
      throw urlProblem(`url host ${url.hostname} does not resolve`, 'unresolvable_host');
    }
  }
  return url.toString();
}
