import { fileURLToPath } from 'node:url';
import { create, createFileRegistry, fromBinary, toJson } from '@bufbuild/protobuf';
import {
  FileDescriptorProtoSchema,
  FileDescriptorSetSchema,
  type FileDescriptorProto,
} from '@bufbuild/protobuf/wkt';
import { loadSync } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STATUS_DETAILS_KEY } from '../../../src/grpc/status-details.js';
import { grpc, startGrpcAtrium, unary, type GrpcAtrium } from './support.js';

/**
 * A reflection client (grpcurl, Postman, Kreya) that meets an error with details learns their types
 * from the server, as it learns the service's: it asks for the file that declares the trailer's
 * `google.rpc.Status` and the `google.rpc.BadRequest` inside it, then decodes the trailer with what
 * it was given. This one is built from @grpc/reflection's own proto with grpc-js, and decodes with
 * @bufbuild/protobuf's dynamic registry: nothing of the server's encoder is used to read its output.
 */
const reflectionProto = fileURLToPath(
  new URL(
    '../../../node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto',
    import.meta.url,
  ),
);
type ReflectionRequest = { file_containing_symbol?: string; file_by_filename?: string };
type ReflectionResponse = {
  file_descriptor_response?: { file_descriptor_proto: Buffer[] };
  error_response?: { error_code: number; error_message: string };
};
type ReflectionClient = grpc.Client & {
  ServerReflectionInfo(): grpc.ClientDuplexStream<ReflectionRequest, ReflectionResponse>;
};
const { ServerReflection } = (
  grpc.loadPackageDefinition(loadSync(reflectionProto, { keepCase: true, oneofs: true })) as unknown as {
    grpc: {
      reflection: {
        v1: { ServerReflection: new (a: string, c: grpc.ChannelCredentials) => ReflectionClient };
      };
    };
  }
).grpc.reflection.v1;

/** One reflection request on its own stream: the files it answers with, or the error it answers. */
async function ask(address: string, request: ReflectionRequest): Promise<ReflectionResponse> {
  const client = new ServerReflection(address, grpc.credentials.createInsecure());
  try {
    return await new Promise((resolve, reject) => {
      const call = client.ServerReflectionInfo();
      call.on('data', (response: ReflectionResponse) => {
        resolve(response);
        call.end();
      });
      call.on('error', reject);
      call.write(request);
    });
  } finally {
    client.close();
  }
}

/** The files declaring `symbol` and every file they import, fetched by name as a client does. */
async function filesFor(address: string, symbol: string): Promise<FileDescriptorProto[]> {
  const files = new Map<string, FileDescriptorProto>();
  const add = (response: ReflectionResponse) => {
    if (!response.file_descriptor_response) throw new Error(JSON.stringify(response.error_response));
    for (const bytes of response.file_descriptor_response.file_descriptor_proto) {
      const file = fromBinary(FileDescriptorProtoSchema, bytes);
      files.set(file.name, file);
    }
  };
  add(await ask(address, { file_containing_symbol: symbol }));
  for (let missing = missingImports(files); missing.length > 0; missing = missingImports(files))
    for (const name of missing) add(await ask(address, { file_by_filename: name }));
  return [...files.values()];
}

const missingImports = (files: Map<string, FileDescriptorProto>): string[] => [
  ...new Set([...files.values()].flatMap((f) => f.dependency).filter((name) => !files.has(name))),
];

describe('error details through server reflection', () => {
  let atrium: GrpcAtrium;
  let member: Awaited<ReturnType<GrpcAtrium['caller']>>;
  beforeAll(async () => {
    atrium = await startGrpcAtrium();
    member = await atrium.caller({ role: 'member' });
  });
  afterAll(async () => {
    await atrium?.stop();
  });

  it('serves google.rpc.Status and google.rpc.BadRequest, and they decode the INVALID_ARGUMENT trailer', async () => {
    const { error } = await unary(
      atrium.client(),
      'UpdateUser',
      { user_id: member.userId, email: 'not an address', update_mask: { paths: ['email', 'nickname'] } },
      { 'x-api-key': member.key },
    );
    expect(error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    const trailer = error!.metadata.get(STATUS_DETAILS_KEY)[0];
    expect(Buffer.isBuffer(trailer)).toBe(true);

    const files = [
      ...(await filesFor(atrium.address, 'google.rpc.Status')),
      ...(await filesFor(atrium.address, 'google.rpc.BadRequest')),
    ];
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: inImportOrder(files) }));
    const statusType = registry.getMessage('google.rpc.Status');
    expect(statusType, 'google.rpc.Status from reflection').toBeDefined();
    const status = toJson(statusType!, fromBinary(statusType!, trailer as Buffer), { registry });

    expect(status).toEqual({
      code: grpc.status.INVALID_ARGUMENT,
      message: error!.details,
      details: [
        {
          '@type': 'type.googleapis.com/google.rpc.BadRequest',
          fieldViolations: expect.arrayContaining([
            expect.objectContaining({ field: 'email', reason: expect.any(String) }),
            expect.objectContaining({ field: 'update_mask.paths', reason: 'unknown_field' }),
          ]),
        },
      ],
    });
  });

  it('answers NOT_FOUND for a symbol it does not have, as before', async () => {
    const response = await ask(atrium.address, { file_containing_symbol: 'google.rpc.DebugInfo' });
    expect(response.error_response?.error_code).toBe(grpc.status.NOT_FOUND);
  });
});

/** Each file once, every file after the ones it imports (as a FileDescriptorSet must list them). */
function inImportOrder(files: FileDescriptorProto[]): FileDescriptorProto[] {
  const byName = new Map(files.map((f) => [f.name, f]));
  const ordered = new Map<string, FileDescriptorProto>();
  const visit = (file: FileDescriptorProto) => {
    if (ordered.has(file.name)) return;
    for (const name of file.dependency) visit(byName.get(name)!);
    ordered.set(file.name, file);
  };
  for (const file of byName.values()) visit(file);
  return [...ordered.values()];
}
