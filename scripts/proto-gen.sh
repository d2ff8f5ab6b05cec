#!/usr/bin/env bash
# `npm run proto:gen`: everything generated from proto/, committed under src/grpc/gen.
#   1. TypeScript messages and the grpc-js service (ts-proto through buf.gen.yaml; no protoc needed).
#   2. The compiled descriptors for server reflection: the contract with its imports, the health
#      service's proto as grpc-health-check ships it (compiled by buf, not protobufjs, whose map-entry
#      descriptors strict clients refuse), the reflection services' own protos as @grpc/reflection
#      ships them (so reflection lists and describes itself, as grpc-go and grpc-java servers do;
#      only grpc/reflection/, not the package's sample protos), and google.rpc.BadRequest from
#      proto-served/ (the error details Atrium sends, so reflection clients decode them), embedded
#      as a TypeScript module.
set -euo pipefail
cd "$(dirname "$0")/.."
buf=node_modules/.bin/buf
reflection=node_modules/@grpc/reflection/build/proto
"$buf" generate --clean
{
  "$buf" build --exclude-source-info --as-file-descriptor-set -o -
  "$buf" build node_modules/grpc-health-check/proto --exclude-source-info --as-file-descriptor-set -o -
  "$buf" build "$reflection" --path "$reflection/grpc/reflection" --exclude-source-info --as-file-descriptor-set -o -
  "$buf" build proto-served --exclude-source-info --as-file-descriptor-set -o -
} | node scripts/embed-descriptor.mjs src/grpc/gen/descriptor.gen.ts
node_modules/.bin/prettier --log-level warn --write src/grpc/gen
