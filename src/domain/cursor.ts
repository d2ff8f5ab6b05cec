import { createHmac, timingSafeEqual } from 'node:crypto';
import { invalid } from './errors.js';

/**
 * Opaque, tamper-evident page cursors. A cursor holds the position of the last item (id and
 * created_at) and the list it belongs to, signed with HMAC-SHA256 under a key kept in the store,
 * so every instance accepts every other's cursors and a forged or garbled one is a 400.
 */
export interface CursorPosition {
  id: string;
  createdAt: string;
}

const MAC_BYTES = 16;

export class CursorCodec {
  constructor(private readonly key: Buffer) {}

  encode(scope: string, position: CursorPosition): string {
    const payload = Buffer.from(JSON.stringify({ s: scope, i: position.id, t: position.createdAt }), 'utf8');
    const mac = this.mac(payload);
    return Buffer.concat([mac, payload]).toString('base64url');
  }

  /** Decodes a cursor made for `scope`; anything else is a validation error on `field`. */
  decode(scope: string, cursor: string, field = 'cursor'): CursorPosition {
    const bad = () => invalid(field, 'The cursor is not valid for this list.', 'invalid_cursor');
    if (cursor.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad();
    const raw = Buffer.from(cursor, 'base64url');
    if (raw.length <= MAC_BYTES) throw bad();
    const mac = raw.subarray(0, MAC_BYTES);
    const payload = raw.subarray(MAC_BYTES);
    if (!timingSafeEqual(mac, this.mac(payload))) throw bad();
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload.toString('utf8'));
    } catch {
      throw bad();
    }
    if (typeof parsed !== 'object' || parsed === null) throw bad();
    const p = parsed as { s?: unknown; i?: unknown; t?: unknown };
    if (p.s !== scope || typeof p.i !== 'string' || typeof p.t !== 'string') throw bad();
    return { id: p.i, createdAt: p.t };
  }

  private mac(payload: Buffer): Buffer {
    return createHmac('sha256', this.key).update(payload).digest().subarray(0, MAC_BYTES);
  }
}
