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

/**
 * The start's one warning when V1_SUNSET has passed: every /api/v1 response then announces a
 * withdrawal that should already have happened, which no client can act on. Not a refusal: the
 * spec retires a version only *after* its sunset date, so v1 may go on serving until it is retired
 * (a release without it), and a date set wrong is the operator's to correct. Said once, at start,
 * not per response.
 */
export function warnIfSunsetPassed(
  log: { warn(obj: object, msg: string): void },
  sunset: Date,
  now = new Date(),
): void {
  if (sunset.getTime() > now.getTime()) return;
  log.warn(
    { v1_sunset: sunset.toISOString().slice(0, 10) },
    'V1_SUNSET is in the past: every /api/v1 response announces a Sunset date that has passed; ' +
      'set V1_SUNSET to the real withdrawal date (at least 12 months after it is first announced), ' +
      'or move clients to /api/v2 and retire v1 (docs/rest.md)',
  );
}
