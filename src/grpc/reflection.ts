import { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire';
import type { PackageDefinition } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { FILE_DESCRIPTOR_SET_BASE64 } from './gen/descriptor.gen.js';

/**
 * Server reflection from the descriptors `buf build` compiled (embedded by `npm run proto:gen`).
 *
 * Not from @grpc/proto-loader: it regroups files by package and renames them
 * (`users_v1.proto`, `google_protobuf.proto`) with empty import lists and map entries misnamed, so a
 * reflection client that builds a real descriptor pool (buf curl, grpcurl) cannot resolve
 * `google.protobuf.FieldMask` from UpdateUserRequest, nor the health service. buf's set keeps
 * `users/v1/users.proto` importing `google/protobuf/field_mask.proto`, which is served too.
 * @grpc/reflection lists only the services of the files it is given, so the set carries the
 * reflection protos too: a client's ListServices then names reflection beside the rest.
 */
export function reflectionService(): ReflectionService {
  const definition = {
    'users.v1': { format: 'Protocol Buffer 3 FileDescriptorProto', fileDescriptorProtos: descriptorFiles() },
  } as unknown as PackageDefinition;
  return new ReflectionService(definition);
}

/**
 * Each FileDescriptorProto of the embedded set (`repeated FileDescriptorProto file = 1`). The
 * health file keeps the canonical name clients that link the health protocol in already know.
 */
export function descriptorFiles(): Buffer[] {
  const reader = new BinaryReader(Buffer.from(FILE_DESCRIPTOR_SET_BASE64, 'base64'));
  const files: Buffer[] = [];
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field !== 1 || wireType !== 2) {
      reader.skip(wireType);
      continue;
    }
    const file = reader.bytes();
    files.push(
      fileName(file) === 'health/v1/health.proto'
        ? withFileName(file, 'grpc/health/v1/health.proto')
        : Buffer.from(file),
    );
  }
  return files;
}

function fileName(file: Uint8Array): string | undefined {
  const reader = new BinaryReader(file);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === 2) return reader.string();
    reader.skip(wireType);
  }
  return undefined;
}

/** A FileDescriptorProto with field 1 (`name`) replaced and every other field copied as is. */
function withFileName(file: Uint8Array, name: string): Buffer {
  const reader = new BinaryReader(file);
  const writer = new BinaryWriter();
  writer.uint32(10).string(name);
  const rest: Uint8Array[] = [];
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const [field, wireType] = reader.tag();
    reader.skip(wireType);
    if (field !== 1) rest.push(file.subarray(start, reader.pos));
  }
  return Buffer.concat([writer.finish(), ...rest]);
}
