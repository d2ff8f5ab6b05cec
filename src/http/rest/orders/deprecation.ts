const V1_PREFIX = '/api/v1';
/** Characters that may stand in a Link target as they are; anything else is percent-encoded. */
const URI_SAFE = /[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]/g;

/** Whether a path (a URL, or an OpenAPI path template) is under /api/v1. */
export function isV1Path(url: string): boolean {
  const path = url.split('?', 1)[0]!;
  return path === V1_PREFIX || path.startsWith(`${V1_PREFIX}/`);
}

/**
 * The headers every /api/v1 response carries (the deprecation, its sunset, and the v2 path of the
 * same resource), or undefined for any other path.
 */
export function v1DeprecationHeaders(url: string, sunset: Date): V1DeprecationHeaders | undefined {
  if (!isV1Path(url)) return undefined;
  const path = url.split('?', 1)[0]!;
  const successor = `/api/v2${path.slice(V1_PREFIX.length)}`.replace(URI_SAFE, (c) => encodeURIComponent(c));
  return {
    deprecation: 'true',
    sunset: sunset.toUTCString(),
    link: `<${successor}>; rel="successor-version"`,
  };
}

type V1DeprecationHeaders = {
  deprecation: string;
  sunset: string;
  link: string;
};

/**
 * The same headers as the OpenAPI document declares them on every response of every /api/v1
 * operation; keyed so that a header added above and not here fails to compile.
 */
export function v1DeprecationHeaderDocs(
  sunset: Date,
): Record<Capitalize<keyof V1DeprecationHeaders>, { description: string; schema: Record<string, unknown> }> {
  return {
    Deprecation: {
      description: '`true`: /api/v1 is deprecated; use /api/v2.',
      schema: { type: 'string', const: 'true' },
    },
    Sunset: {
      description: 'HTTP date after which /api/v1 is withdrawn (`V1_SUNSET`).',
      schema: { type: 'string', examples: [sunset.toUTCString()] },
    },
    Link: {
      description: 'The /api/v2 path of the same resource: `</api/v2/...>; rel="successor-version"`.',
      schema: { type: 'string' },
    },
  };
}
