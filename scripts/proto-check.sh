#!/usr/bin/env bash
# CI for the gRPC contract: buf lint, the generated TypeScript must match the proto, and no breaking
# change against the previous commit's proto (skipped, and said so, when that commit had none).
set -euo pipefail
cd "$(dirname "$0")/.."
buf=node_modules/.bin/buf

echo "buf lint" >&2
"$buf" lint

echo "generated code up to date" >&2
npm run -s proto:gen
drift=$(git status --porcelain -- src/grpc/gen)
if [ -n "$drift" ]; then
  echo "src/grpc/gen differs from what proto/ generates; run npm run proto:gen and commit:" >&2
  echo "$drift" >&2
  git --no-pager diff --stat -- src/grpc/gen >&2
  exit 1
fi

echo "buf breaking against the previous commit" >&2
previous=${PROTO_BREAKING_AGAINST:-HEAD~1}
if ! git rev-parse --verify -q "$previous^{commit}" >/dev/null; then
  echo "no commit $previous to compare with; breaking check skipped" >&2
  exit 0
fi
if ! git cat-file -e "$previous:proto" 2>/dev/null; then
  echo "$previous has no proto/ directory: nothing to break; breaking check passes" >&2
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# An exported tree rather than buf's .git input: that also works in git worktrees and shallow CI clones
# that still hold the previous commit.
git archive "$previous" proto | tar -x -C "$tmp"
if git cat-file -e "$previous:buf.yaml" 2>/dev/null; then git show "$previous:buf.yaml" >"$tmp/buf.yaml"; else cp buf.yaml "$tmp/buf.yaml"; fi
"$buf" breaking --against "$tmp"
echo "no breaking change" >&2
