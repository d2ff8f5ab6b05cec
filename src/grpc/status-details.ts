import { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire';

/**
 * The `grpc-status-details-bin` trailer: a `google.rpc.Status` whose details hold a
 * `google.rpc.BadRequest` (field violations), the rich error model stock clients (grpcurl, buf curl,
 * grpc-status libraries) decode. Four small messages, written by hand with the protobuf wire runtime
 * instead of generating google/rpc into the contract's module.
 *
 *   Status     { int32 code = 1; string message = 2; repeated Any details = 3; }
 *   Any        { string type_url = 1; bytes value = 2; }
 *   BadRequest { repeated FieldViolation field_violations = 1; }
 *   FieldViolation { string field = 1; string description = 2; string reason = 3; }
 */
export const STATUS_DETAILS_KEY = 'grpc-status-details-bin';
export const BAD_REQUEST_TYPE_URL = 'type.googleapis.com/google.rpc.BadRequest';

export interface FieldViolation {
  field: string;
  description: string;
  /** Atrium's detail code (`range_error`, `invalid_enum`, ...), the same as REST's `details[].code`. */
  reason: string;
}

export interface RichStatus {
  code: number;
  message: string;
  fieldViolations: FieldViolation[];
}

export function encodeStatus(status: RichStatus): Buffer {
  const badRequest = new BinaryWriter();
  for (const v of status.fieldViolations) {
    badRequest.uint32(10).fork();
    badRequest.uint32(10).string(v.field);
    badRequest.uint32(18).string(v.description);
    if (v.reason) badRequest.uint32(26).string(v.reason);
    badRequest.join();
  }
  const w = new BinaryWriter();
  if (status.code !== 0) w.uint32(8).int32(status.code);
  if (status.message) w.uint32(18).string(status.message);
  if (status.fieldViolations.length > 0) {
    w.uint32(26).fork();
    w.uint32(10).string(BAD_REQUEST_TYPE_URL);
    w.uint32(18).bytes(badRequest.finish());
    w.join();
  }
  return Buffer.from(w.finish());
}

/** Reads what encodeStatus writes (and any Status with BadRequest details); other details are skipped. */
export function decodeStatus(bytes: Uint8Array): RichStatus {
  const status: RichStatus = { code: 0, message: '', fieldViolations: [] };
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [field, wireType] = r.tag();
    if (field === 1 && wireType === 0) status.code = r.int32();
    else if (field === 2 && wireType === 2) status.message = r.string();
    else if (field === 3 && wireType === 2) {
      const any = new BinaryReader(r.bytes());
      let typeUrl = '';
      let value: Uint8Array = new Uint8Array();
      while (any.pos < any.len) {
        const [f, t] = any.tag();
        if (f === 1 && t === 2) typeUrl = any.string();
        else if (f === 2 && t === 2) value = any.bytes();
        else any.skip(t);
      }
      if (typeUrl === BAD_REQUEST_TYPE_URL) status.fieldViolations.push(...decodeBadRequest(value));
    } else r.skip(wireType);
  }
  return status;
}

function decodeBadRequest(bytes: Uint8Array): FieldViolation[] {
  const out: FieldViolation[] = [];
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [field, wireType] = r.tag();
    if (field !== 1 || wireType !== 2) {
      r.skip(wireType);
      continue;
    }
    const v = new BinaryReader(r.bytes());
    const violation: FieldViolation = { field: '', description: '', reason: '' };
    while (v.pos < v.len) {
      const [f, t] = v.tag();
      if (f === 1 && t === 2) violation.field = v.string();
      else if (f === 2 && t === 2) violation.description = v.string();
      else if (f === 3 && t === 2) violation.reason = v.string();
      else v.skip(t);
    }
    out.push(violation);
  }
  return out;
}
