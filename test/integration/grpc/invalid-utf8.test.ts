import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeStatus, STATUS_DETAILS_KEY } from '../../../src/grpc/status-details.js';
import { grpc, metadataFor, startGrpcAtrium, type GrpcAtrium } from './support.js';

const { status } = grpc;
const identity = (b: Buffer): Buffer => b;

/** A string field (length-delimited) holding exactly `bytes`, written as a client's encoder would. */
type Field = [number, Uint8Array | string];
const text = (s: string) => new TextEncoder().encode(s);

/** A request message with the given top-level fields; `mask` adds update_mask (5) with those paths. */
function message(fields: Field[], mask?: Array<Uint8Array | string>): Buffer {
  const w = new BinaryWriter();
  for (const [no, value] of fields)
    w.uint32((no << 3) | 2).bytes(typeof value === 'string' ? text(value) : value);
  if (mask) {
    w.uint32((5 << 3) | 2).fork();
    for (const p of mask) w.uint32(10).bytes(typeof p === 'string' ? text(p) : p);
    w.join();
  }
  return Buffer.from(w.finish());
}

interface Result {
  code: number;
  details: string;
  violations: Array<{ field: string; reason: string }>;
  reply: Buffer | undefined;
}

/** One call through grpc-js's client with an identity serializer: the server gets exactly `bytes`. */
function call(
  client: grpc.Client,
  method: string,
  kind: 'unary' | 'server_stream',
  bytes: Buffer,
  headers: Record<string, string>,
): Promise<Result> {
  const path = `/users.v1.UserService/${method}`;
  return new Promise((resolve) => {
    let reply: Buffer | undefined;
    const c =
      kind === 'unary'
        ? client.makeUnaryRequest(path, identity, identity, bytes, metadataFor(headers), (_err, value) => {
            reply = value;
          })
        : client.makeServerStreamRequest(path, identity, identity, bytes, metadataFor(headers), {
            deadline: Date.now() + 1_000,
          });
    if (kind === 'server_stream') {
      (c as grpc.ClientReadableStream<Buffer>).on('data', (b: Buffer) => (reply ??= b));
      (c as grpc.ClientReadableStream<Buffer>).on('error', () => undefined);
    }
    c.on('status', (s: grpc.StatusObject) =>
      setImmediate(() => {
        const bin = s.metadata.get(STATUS_DETAILS_KEY)[0];
        const violations = Buffer.isBuffer(bin)
          ? decodeStatus(bin).fieldViolations.map((v) => ({ field: v.field, reason: v.reason }))
          : [];
        resolve({ code: s.code, details: s.details, violations, reply });
      }),
    );
  });
}

/** `ab`, then U+D800 written as UTF-8 (ED A0 80: a surrogate, which UTF-8 forbids), then `cd`. */
const SURROGATE = Buffer.from([0x61, 0x62, 0xed, 0xa0, 0x80, 0x63, 0x64]);
const NOT_UTF8: Array<[string, Buffer]> = [
  ['an encoded surrogate', SURROGATE],
  ['a lone continuation byte', Buffer.from([0x61, 0x80, 0x62])],
  ['an overlong NUL', Buffer.from([0xc0, 0x80])],
  ['a truncated sequence', Buffer.from([0x41, 0xe2, 0x82])],
  ['a byte UTF-8 never uses', Buffer.from([0xff])],
];

/** Issue: invalid UTF-8 in a proto3 string was taken, and stored with U+FFFD in its place. */
describe('gRPC string fields that are not UTF-8', () => {
  let atrium: GrpcAtrium;
  let raw: grpc.Client;
  let admin: Awaited<ReturnType<GrpcAtrium['caller']>>;
  beforeAll(async () => {
    atrium = await startGrpcAtrium();
    raw = new grpc.Client(atrium.address, grpc.credentials.createInsecure());
    admin = await atrium.caller({ role: 'admin' });
  });
  afterAll(async () => {
    raw?.close();
    await atrium?.stop();
  });

  const nameOf = async (id: string) => (await atrium.services.core.users.get(id)).name;

  it.each(NOT_UTF8)(
    'UpdateUser with %s in name: INVALID_ARGUMENT naming name; nothing stored',
    async (_, bad) => {
      const user = await atrium.caller();
      const before = await nameOf(user.userId);
      const result = await call(
        raw,
        'UpdateUser',
        'unary',
        message(
          [
            [1, user.userId],
            [2, bad],
          ],
          ['name'],
        ),
        admin.headers,
      );
      expect(result).toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: 'The request has invalid fields.',
        violations: [{ field: 'name', reason: 'invalid_characters' }],
        reply: undefined,
      });
      expect(await nameOf(user.userId)).toBe(before);
    },
  );

  it('names whichever field holds the bytes, in every request message of the service', async () => {
    const user = await atrium.caller();
    const before = await nameOf(user.userId);
    const cases: Array<[string, 'unary' | 'server_stream', Buffer, string]> = [
      ['GetUser', 'unary', message([[1, SURROGATE]]), 'user_id'],
      ['StreamUserActivity', 'server_stream', message([[1, SURROGATE]]), 'user_id'],
      ['ListUsers', 'server_stream', message([[1, SURROGATE]]), 'role'],
      ['ListUsers', 'server_stream', message([[3, SURROGATE]]), 'cursor'],
      [
        'UpdateUser',
        'unary',
        message(
          [
            [1, SURROGATE],
            [2, 'Ada'],
          ],
          ['name'],
        ),
        'user_id',
      ],
      [
        'UpdateUser',
        'unary',
        message(
          [
            [1, user.userId],
            [3, SURROGATE],
          ],
          ['email'],
        ),
        'email',
      ],
      [
        'UpdateUser',
        'unary',
        message(
          [
            [1, user.userId],
            [4, SURROGATE],
          ],
          ['role'],
        ),
        'role',
      ],
      [
        'UpdateUser',
        'unary',
        message(
          [
            [1, user.userId],
            [2, 'Ada'],
          ],
          ['name', SURROGATE],
        ),
        'update_mask.paths',
      ],
    ];
    for (const [method, kind, bytes, field] of cases) {
      const result = await call(raw, method, kind, bytes, admin.headers);
      expect(result, `${method} ${field}`).toMatchObject({
        code: status.INVALID_ARGUMENT,
        violations: [{ field, reason: 'invalid_characters' }],
        reply: undefined,
      });
    }
    expect(await nameOf(user.userId)).toBe(before);
  });

  it('takes valid UTF-8 as it is: U+FFFD itself (EF BF BD) and an emoji are stored', async () => {
    const user = await atrium.caller();
    const name = Buffer.from([0x61, 0xef, 0xbf, 0xbd, 0x20, 0xf0, 0x9f, 0x98, 0x80, 0x20, 0xc3, 0xa9]);
    const result = await call(
      raw,
      'UpdateUser',
      'unary',
      message(
        [
          [1, user.userId],
          [2, name],
        ],
        ['name'],
      ),
      admin.headers,
    );
    expect(result.code, result.details).toBe(status.OK);
    expect(await nameOf(user.userId)).toBe('a\ufffd 😀 é');
    const read = await call(raw, 'GetUser', 'unary', message([[1, user.userId]]), admin.headers);
    expect(read.code).toBe(status.OK);
    expect(read.reply!.includes(name)).toBe(true);
  });
});
