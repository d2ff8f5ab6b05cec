/** Every event type a webhook endpoint can subscribe to (decisions §7). */
export const EVENT_TYPES = [
  'order.created',
  'order.updated',
  'order.cancelled',
  'order.refunded',
  'user.updated',
  'payment.failed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const isEventType = (value: string): value is EventType =>
  (EVENT_TYPES as readonly string[]).includes(value);

/** The stored event as the outbox keeps it. */
export interface StoredEvent {
  id: string;
  type: string;
  api_version: string;
  created: number;
  /** The `data` object as JSON text, exactly as written in the change's transaction. */
  data: string;
}

/**
 * The envelope's raw body. Built by concatenation around the stored JSON so every attempt sends the
 * same bytes (the signature covers the raw body) without parsing and re-serialising `data`.
 */
export function envelopeBody(event: StoredEvent): string {
  return (
    `{"id":${JSON.stringify(event.id)},"type":${JSON.stringify(event.type)},` +
    `"created":${event.created},"data":${event.data},"api_version":${JSON.stringify(event.api_version)}}`
  );
}

export interface Envelope {
  id: string;
  type: string;
  created: number;
  data: Record<string, unknown>;
  api_version: string;
}

export function envelope(event: StoredEvent): Envelope {
  return JSON.parse(envelopeBody(event)) as Envelope;
}
