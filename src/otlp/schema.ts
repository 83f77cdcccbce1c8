import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";

/**
 * The OTLP message types, read from the OpenTelemetry project's own .proto files (vendored by
 * scripts/otlp-protos.sh) through protobufjs' reflection. The folder is found beside this module,
 * so it is src/otlp/proto when running the sources and dist/src/otlp/proto (copied by
 * `npm run build`) when running the build.
 */
export const PROTO_DIR = fileURLToPath(new URL("./proto/", import.meta.url));

const PROTO_FILES = [
  "opentelemetry/proto/collector/metrics/v1/metrics_service.proto",
  "opentelemetry/proto/collector/trace/v1/trace_service.proto",
];

/**
 * google.rpc.Status, the body of every OTLP/HTTP 4xx and 5xx response. It is not among the OTLP
 * files; this is its definition in googleapis' google/rpc/status.proto (Apache-2.0).
 */
const STATUS_PROTO = `syntax = "proto3";
package google.rpc;
import "google/protobuf/any.proto";
message Status { int32 code = 1; string message = 2; repeated google.protobuf.Any details = 3; }`;

/**
 * Fields of the OTLP messages Vigil never reads, taken out of the types before their decoders are
 * built: protobufjs then skips them on the wire (a packed array in one step) instead of building
 * them. A histogram's buckets were a third of the decoding of a GenAI export and most of its
 * garbage (`npm run bench -- otlp`: 157 -> 113 µs per export of 60 points); Vigil reads a
 * histogram's sum and count only, and no exemplar. Both encodings skip them (in JSON they are
 * unknown fields, which OTLP receivers ignore).
 */
const UNREAD: [string, string[]][] = [
  ["opentelemetry.proto.metrics.v1.HistogramDataPoint", ["bucketCounts", "explicitBounds", "exemplars"]],
  ["opentelemetry.proto.metrics.v1.NumberDataPoint", ["exemplars"]],
];

export interface OtlpTypes {
  metricsRequest: protobuf.Type;
  metricsResponse: protobuf.Type;
  tracesRequest: protobuf.Type;
  tracesResponse: protobuf.Type;
  status: protobuf.Type;
}

/**
 * protobufjs' decoders set a oneof's name for every oneof field they read (an attribute's
 * AnyValue, a metric's data, a point's value), and its setter deletes every other member field
 * from the message, including the ones the message never had. Each such `delete` is a runtime
 * call: 6.7 % of the server's CPU in `npm run bench -- otlp`'s profile. This setter deletes only
 * the other members the message holds itself (a field sent twice, or a merge), which gives the
 * same message (test/otlp/decode.test.ts). Decoding an export of 60 histogram points fell from
 * 131 to 91 µs.
 * Set before the types below build their constructors; types built earlier keep the original.
 */
const hasOwn = Object.prototype.hasOwnProperty;
protobuf.util.oneOfSetter = function oneOfSetter(fieldNames: string[]) {
  return function (this: Record<string, unknown>, name: string | undefined) {
    for (let i = 0; i < fieldNames.length; ++i) {
      const field = fieldNames[i] as string;
      if (field !== name && hasOwn.call(this, field)) delete this[field];
    }
  };
};

let types: OtlpTypes | undefined;
let complete: OtlpTypes | undefined;

/** The types, loaded at first use (a few milliseconds), then kept for the life of the process. */
export function otlpTypes(): OtlpTypes {
  types ??= load(UNREAD);
  return types;
}

/** The types with every field, as senders encode them (for building bodies in tests). */
export function completeOtlpTypes(): OtlpTypes {
  complete ??= load([]);
  return complete;
}

function load(unread: typeof UNREAD): OtlpTypes {
  if (!fs.existsSync(path.join(PROTO_DIR, PROTO_FILES[0] ?? ""))) {
    throw new Error(
      `OTLP .proto files not found in ${PROTO_DIR}: run \`npm run build\` (it copies src/otlp/proto)`,
    );
  }
  const root = new protobuf.Root();
  // Every import in the OTLP files is relative to the folder that holds opentelemetry/.
  root.resolvePath = (_origin, target) => path.join(PROTO_DIR, target);
  root.loadSync(PROTO_FILES);
  // protobufjs bundles google/protobuf/any.proto (as JSON): add it, then parse Status into the root.
  const any = protobuf.common.get("google/protobuf/any.proto");
  if (any?.nested) root.addJSON(any.nested);
  protobuf.parse(STATUS_PROTO, root);
  for (const [type, fields] of unread) {
    const t = root.lookupType(type);
    for (const name of fields) {
      const field = t.fields[name];
      if (!field) throw new Error(`OTLP .proto files: ${type} has no field ${name}`);
      t.remove(field);
    }
  }
  root.resolveAll();
  return {
    metricsRequest: root.lookupType("opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest"),
    metricsResponse: root.lookupType("opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceResponse"),
    tracesRequest: root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"),
    tracesResponse: root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse"),
    status: root.lookupType("google.rpc.Status"),
  };
}
