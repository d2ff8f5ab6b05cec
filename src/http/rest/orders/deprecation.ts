const V1_PREFIX = '/api/v1';
/** Characters that may stand in a Link target as they are; anything else is percent-encoded. */
const URI_SAFE = /[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]/g;

/**
 * The headers every /api/v1 response carries (the deprecation, its sunset, and the v2 path of the
 * same resource), or undefined for any other path.
 */
export function v1DeprecationHeaders(url: string, sunset: Date): Record<string, string> | undefined {
  const path = url.split('?', 1)[0]!;
  if (path !== V1_PREFIX && !path.startsWith(`${V1_PREFIX}/`)) return undefined;
  const successor = `/api/v2${path.slice(V1_PREFIX.length)}`.replace(URI_SAFE, (c) => encodeURIComponent(c));
  return {
    deprecation: 'true',
    sunset: sunset.toUTCString(),
    link: `<${successor}>; rel="successor-version"`,
  };
}
