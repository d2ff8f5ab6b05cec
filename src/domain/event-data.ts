/**
 * The stored (and sent) text of an event's `data`. The spec's convention is that webhook timestamps
 * are integer Unix seconds, while REST's are ISO 8601 strings; events reuse the REST serializers
 * (`orderData`, `publicUserData`), so here every `*_at` member holding an ISO 8601 time becomes
 * whole seconds (rounded down), at any depth. Null stays null. Every event, real or a `send-test`
 * sample, is written through this one function.
 */
export function eventDataText(data: Record<string, unknown>): string {
  return JSON.stringify(data, (key, value: unknown) =>
    key.endsWith('_at') && typeof value === 'string' && ISO_TIME.test(value)
      ? Math.floor(Date.parse(value) / 1000)
      : value,
  );
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
