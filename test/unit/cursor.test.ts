import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CursorCodec } from '../../src/domain/cursor.js';
import { lazyEdge, pageInfoOf } from '../../src/domain/connection.js';
import { DomainError } from '../../src/domain/errors.js';

const key = randomBytes(32);
const codec = new CursorCodec(key);
const position = { id: 'ord_01hzzzzzzzzzzzzzzzzzzzzzzz', createdAt: '2026-01-02T03:04:05.678Z' };

function decodeError(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return err as DomainError;
  }
  throw new Error('expected the cursor to be refused');
}

/** A cursor signed with the real key around an arbitrary payload: what only a key holder could make. */
function signed(payload: string): string {
  const body = Buffer.from(payload, 'utf8');
  const mac = createHmac('sha256', key).update(body).digest().subarray(0, 16);
  return Buffer.concat([mac, body]).toString('base64url');
}

describe('CursorCodec', () => {
  it('round-trips a position within its scope, as a URL-safe string', () => {
    const cursor = codec.encode('orders:usr_1', position);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(codec.decode('orders:usr_1', cursor)).toEqual(position);
  });

  it('is accepted by another codec holding the same key (another instance)', () => {
    const cursor = codec.encode('posts', position);
    expect(new CursorCodec(Buffer.from(key)).decode('posts', cursor)).toEqual(position);
  });

  it('refuses a cursor made for another scope', () => {
    const cursor = codec.encode('orders:usr_1', position);
    const err = decodeError(() => codec.decode('orders:usr_2', cursor));
    expect(err.code).toBe('validation_error');
    expect(err.details).toEqual([{ field: 'cursor', message: expect.any(String), code: 'invalid_cursor' }]);
  });

  it('refuses any tampering, byte by byte', () => {
    const cursor = codec.encode('posts', position);
    const raw = Buffer.from(cursor, 'base64url');
    for (let i = 0; i < raw.length; i++) {
      const changed = Buffer.from(raw);
      changed[i] = changed[i]! ^ 0x01;
      const err = decodeError(() => codec.decode('posts', changed.toString('base64url')));
      expect(err.details[0]!.code).toBe('invalid_cursor');
    }
  });

  it('refuses a cursor signed with another key', () => {
    const foreign = new CursorCodec(randomBytes(32)).encode('posts', position);
    expect(decodeError(() => codec.decode('posts', foreign)).details[0]!.code).toBe('invalid_cursor');
  });

  it('turns garbage into validation_error invalid_cursor, never another error', () => {
    const garbage = [
      '',
      ' ',
      '!!!',
      'abc',
      'a'.repeat(2000),
      '%2F%2F',
      'eyJzIjoicG9zdHMifQ',
      'AAAAAAAAAAAAAAAAAAAAAAAA',
    ];
    for (const g of garbage) {
      const err = decodeError(() => codec.decode('posts', g, 'after'));
      expect(err.code).toBe('validation_error');
      expect(err.details[0]).toMatchObject({ field: 'after', code: 'invalid_cursor' });
    }
  });

  it('refuses well-signed payloads that are not positions', () => {
    for (const payload of ['not json', '[]', '{"s":"posts"}', '{"s":"posts","i":1,"t":"x"}', 'null']) {
      expect(decodeError(() => codec.decode('posts', signed(payload))).details[0]!.code).toBe(
        'invalid_cursor',
      );
    }
    expect(codec.decode('posts', signed('{"s":"posts","i":"a","t":"b"}'))).toEqual({
      id: 'a',
      createdAt: 'b',
    });
  });
});

describe('edges sign their cursor only when it is read', () => {
  /** The real codec, counting how often it signs. */
  class CountingCodec extends CursorCodec {
    signed = 0;
    override encode(scope: string, at: typeof position): string {
      this.signed += 1;
      return super.encode(scope, at);
    }
  }

  it('signs nothing for a page whose cursors nobody asks for', () => {
    const counting = new CountingCodec(key);
    const edges = [1, 2, 3].map((n) => lazyEdge({ n }, counting, 'posts', { ...position, id: `p${n}` }));
    const info = pageInfoOf(edges, true, false);
    expect(edges.map((e) => e.node.n)).toEqual([1, 2, 3]);
    expect(info.hasNextPage).toBe(true);
    expect(counting.signed).toBe(0);
  });

  it('gives the same valid cursor on every read, signed once, and JSON and spreads carry it', () => {
    const counting = new CountingCodec(key);
    const edge = lazyEdge('node', counting, 'posts', position);
    const first = edge.cursor;
    expect(edge.cursor).toBe(first);
    expect(counting.signed).toBe(1);
    expect(counting.decode('posts', first)).toEqual(position);
    expect(JSON.parse(JSON.stringify(edge))).toEqual({ node: 'node', cursor: first });
    expect({ ...edge }.cursor).toBe(first);
  });

  it('page info names the first and last edges, and null for an empty page', () => {
    const edges = ['a', 'b'].map((id) => lazyEdge(id, codec, 'posts', { ...position, id }));
    const info = pageInfoOf(edges, false, true);
    expect(codec.decode('posts', info.startCursor!).id).toBe('a');
    expect(codec.decode('posts', info.endCursor!).id).toBe('b');
    expect(info.hasPreviousPage).toBe(true);
    const empty = pageInfoOf([], false, false);
    expect([empty.startCursor, empty.endCursor]).toEqual([null, null]);
  });
});
