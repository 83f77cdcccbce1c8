#!/usr/bin/env bash
# Vendors the OpenTelemetry project's own OTLP .proto files into src/otlp/proto (read at run time
# by src/otlp/decode.ts; `npm run build` copies them next to the compiled module in dist/).
#
#   bash scripts/otlp-protos.sh            fetch the pinned jar with Maven (cached), replace src/otlp/proto
#   bash scripts/otlp-protos.sh version    print the pinned version
#
# The .proto files come from Maven Central's io.opentelemetry.proto:opentelemetry-proto jar, which
# the OpenTelemetry Java project publishes from the opentelemetry-proto repository's tagged
# releases (Apache-2.0). Only what metrics and traces export requests and responses need is kept.
# Environment: MAVEN_REPO (the local Maven repository; default ~/.m2/repository).
set -euo pipefail

# The one place the OTLP version is pinned: opentelemetry-proto v1.11.0, as published on Maven.
PROTO_VERSION=1.11.0
ARTIFACT_VERSION=$PROTO_VERSION-alpha

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/src/otlp/proto
M2=${MAVEN_REPO:-$HOME/.m2/repository}
JAR="$M2/io/opentelemetry/proto/opentelemetry-proto/$ARTIFACT_VERSION/opentelemetry-proto-$ARTIFACT_VERSION.jar"

FILES=(
  opentelemetry/proto/common/v1/common.proto
  opentelemetry/proto/resource/v1/resource.proto
  opentelemetry/proto/metrics/v1/metrics.proto
  opentelemetry/proto/trace/v1/trace.proto
  opentelemetry/proto/collector/metrics/v1/metrics_service.proto
  opentelemetry/proto/collector/trace/v1/trace_service.proto
)

case "${1:-fetch}" in
  version) echo "$PROTO_VERSION"; exit 0 ;;
  fetch) ;;
  *) echo "usage: $0 [fetch|version]" >&2; exit 2 ;;
esac

if [ ! -f "$JAR" ]; then
  echo "otlp-protos: fetching io.opentelemetry.proto:opentelemetry-proto:$ARTIFACT_VERSION with Maven (cached in $M2)" >&2
  mvn -q -B dependency:get -Dartifact="io.opentelemetry.proto:opentelemetry-proto:$ARTIFACT_VERSION" -Dtransitive=false >&2
fi
[ -f "$JAR" ] || { echo "otlp-protos: $JAR not found after mvn dependency:get" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unzip -q "$JAR" "${FILES[@]}" -d "$TMP"

# Replace only the vendored tree; README.md (written below) is regenerated too.
rm -rf "$OUT/opentelemetry"
mkdir -p "$OUT"
for f in "${FILES[@]}"; do
  mkdir -p "$OUT/$(dirname "$f")"
  cp "$TMP/$f" "$OUT/$f"
done

SHA256=$(sha256sum "$JAR" | cut -d' ' -f1)
cat >"$OUT/README.md" <<EOF
# Vendored OTLP protocol definitions

The \`.proto\` files under \`opentelemetry/\` are the OpenTelemetry project's own, unmodified:

- Source: opentelemetry-proto v$PROTO_VERSION (https://github.com/open-telemetry/opentelemetry-proto),
  taken from the Maven Central artifact \`io.opentelemetry.proto:opentelemetry-proto:$ARTIFACT_VERSION\`
  (jar sha256 \`$SHA256\`).
- Licence: Apache License 2.0, Copyright The OpenTelemetry Authors (each file keeps its header).
- Kept: what OTLP metrics and traces export requests and responses need (common, resource, metrics,
  trace, collector/metrics, collector/trace).

\`src/otlp/decode.ts\` loads them with protobufjs at first use; \`npm run build\` copies this folder
next to the compiled module (\`dist/src/otlp/proto\`). Do not edit the files by hand: change the
pinned version in \`scripts/otlp-protos.sh\` and run \`bash scripts/otlp-protos.sh\`.
EOF
echo "otlp-protos: wrote ${#FILES[@]} files of opentelemetry-proto v$PROTO_VERSION to ${OUT#"$ROOT"/}" >&2
