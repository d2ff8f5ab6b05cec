import type { Selectable } from 'kysely';
import type { DeliveryAttemptsTable, WebhookDeliveriesTable, WebhookEndpointsTable } from '../store/types.js';

export type EndpointRow = Selectable<WebhookEndpointsTable>;
export type DeliveryRow = Selectable<WebhookDeliveriesTable>;
export type AttemptRow = Selectable<DeliveryAttemptsTable>;

/** An endpoint as the API and the CLI show it; the secret never appears here. */
export interface EndpointView {
  id: string;
  user_id: string;
  url: string;
  events: string[];
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  previous_secret_expires_at: string | null;
  created_at: string;
  updated_at: string;
}

export function endpointView(row: EndpointRow, now: Date): EndpointView {
  const overlap = row.previous_secret_expires_at;
  return {
    id: row.id,
    user_id: row.user_id,
    url: row.url,
    events: JSON.parse(row.events) as string[],
    status: row.disabled_at === null ? 'enabled' : 'disabled',
    disabled_reason: row.disabled_at === null ? null : row.disabled_reason,
    previous_secret_expires_at: overlap !== null && overlap > now.toISOString() ? overlap : null,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export interface DeliveryView {
  id: string;
  event_id: string;
  event_type: string;
  endpoint_id: string;
  status: 'pending' | 'delivered' | 'failed';
  round: number;
  attempt_count: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

export function deliveryView(row: DeliveryRow & { event_type: string }): DeliveryView {
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type,
    endpoint_id: row.endpoint_id,
    status: row.status,
    round: row.round,
    attempt_count: row.attempt_count,
    next_attempt_at: row.status === 'pending' ? row.next_attempt_at : null,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export interface AttemptView {
  id: string;
  delivery_id: string;
  event_id: string;
  endpoint_id: string;
  round: number;
  attempt: number;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  response_excerpt: string | null;
  created_at: string;
}

export function attemptView(row: AttemptRow & { event_id: string; endpoint_id: string }): AttemptView {
  return {
    id: row.id,
    delivery_id: row.delivery_id,
    event_id: row.event_id,
    endpoint_id: row.endpoint_id,
    round: row.round,
    attempt: row.attempt,
    status_code: row.status_code,
    duration_ms: row.duration_ms,
    error: row.error,
    response_excerpt: row.response_excerpt,
    created_at: row.created_at,
  };
}
