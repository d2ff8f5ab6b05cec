import type { ServiceDefinition } from '@grpc/grpc-js';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { DomainError } from '../domain/errors.js';
import {
  GetUserRequest,
  ListUsersRequest,
  UpdateUserRequest,
  type UserServiceService,
} from './gen/users/v1/users.gen.js';

/**
 * proto3 requires every `string` field to hold valid UTF-8. The generated decoders read strings with
 * `BinaryReader.string()`, which puts U+FFFD where the bytes are not UTF-8: a name sent as
 * `ab ED A0 80 cd` (a UTF-16 surrogate written as UTF-8, which UTF-8 forbids) was stored as
 * `ab\ufffd\ufffd\ufffdcd`. Requests of users.v1.UserService are decoded with a reader whose
 * string() refuses such bytes, and the call is answered INVALID_ARGUMENT with a google.rpc.BadRequest
 * field violation naming the field (reason `invalid_characters`) before anything runs. Valid UTF-8,
 * U+FFFD itself (EF BF BD) and emoji included, reads as before.
 */

const FATAL = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A string field whose bytes are not UTF-8; `at` is where its length prefix starts. */
class InvalidUtf8 extends Error {
  constructor(readonly at: number) {
    super('A string field is not valid UTF-8.');
  }
}

/** A reader whose string() is strict; nested messages share it, so their strings are strict too. */
class StrictStringReader extends BinaryReader {
  override string(): string {
    const at = this.pos;
    // bytes() reads the length and checks the bounds (a short message stays undecodable).
    const bytes = this.bytes();
    try {
      return FATAL.decode(bytes);
    } catch {
      throw new InvalidUtf8(at);
    }
  }
}

/** A decoded request that is refused as it stands: the call pipeline throws `error` (call.ts). */
export class RefusedRequest {
  constructor(readonly error: DomainError) {}
}

interface RequestType {
  decode(input: BinaryReader): unknown;
}

/**
 * Each method's request message and the proto names of its fields that hold strings (update_mask's
 * paths are strings of a nested FieldMask). Every method of the service must be listed.
 */
const REQUESTS: Record<
  keyof typeof UserServiceService,
  { type: RequestType; fields: Record<number, string> }
> = {
  getUser: { type: GetUserRequest, fields: { 1: 'user_id' } },
  listUsers: { type: ListUsersRequest, fields: { 1: 'role', 3: 'cursor' } },
  updateUser: {
    type: UpdateUserRequest,
    fields: { 1: 'user_id', 2: 'name', 3: 'email', 4: 'role', 5: 'update_mask.paths' },
  },
  streamUserActivity: { type: GetUserRequest, fields: { 1: 'user_id' } },
};

/** The number of the top-level field whose value holds byte `at`, if the message can be walked. */
function topLevelFieldAt(bytes: Uint8Array, at: number): number | undefined {
  try {
    const reader = new BinaryReader(bytes);
    while (reader.pos < reader.len) {
      const [no, wireType] = reader.tag();
      const start = reader.pos;
      reader.skip(wireType, no);
      if (at >= start && at < reader.pos) return no;
    }
  } catch {
    // It decoded up to the bad string, so the walk should not fail; if it does, no field is named.
  }
  return undefined;
}

function invalidText(field: string | null): RefusedRequest {
  const message = `${field ?? 'a string field'} must be valid UTF-8`;
  return new RefusedRequest(
    new DomainError('validation_error', 'The request has invalid fields.', [
      { field, message, code: 'invalid_characters' },
    ]),
  );
}

/**
 * users.v1.UserService with every request decoded strictly: a string field that is not UTF-8
 * decodes to a RefusedRequest naming it. Other decoding failures still throw (markUndecodable).
 */
export function strictStrings<D extends ServiceDefinition>(definition: D): D {
  const wrapped = Object.entries(definition).map(([name, method]) => {
    const request = REQUESTS[name as keyof typeof REQUESTS] as
      (typeof REQUESTS)[keyof typeof REQUESTS] | undefined;
    if (!request) throw new Error(`No strict decoder for ${name}`);
    const requestDeserialize = (bytes: Buffer): unknown => {
      try {
        return request.type.decode(new StrictStringReader(bytes));
      } catch (err) {
        if (!(err instanceof InvalidUtf8)) throw err;
        const no = topLevelFieldAt(bytes, err.at);
        return invalidText(no === undefined ? null : (request.fields[no] ?? null));
      }
    };
    return [name, { ...method, requestDeserialize }] as const;
  });
  return Object.fromEntries(wrapped) as D;
}
