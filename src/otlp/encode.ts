import type protobuf from "protobufjs";
import protojson from "protobufjs/ext/protojson.js";
import { otlpTypes } from "./schema.js";
import type { OtlpEncoding } from "./types.js";

/**
 * The bodies an OTLP/HTTP endpoint answers with, in the encoding of the request (OTLP: "MUST use
 * the same Content-Type in the response as it received in the request").
 */

/** What was not accepted of an export: the points (or spans) rejected, and why or what to fix. */
export interface ExportOutcome {
  rejected: number;
  message?: string;
}

/**
 * A 200 body. A full success (nothing rejected, no message) leaves partial_success unset, as OTLP
 * requires: 0 bytes in protobuf, `{}` in JSON. Rejected points, or a warning (0 rejected with a
 * message), set it; the client must not retry either.
 */
export function encodeMetricsResponse(outcome: ExportOutcome, encoding: OtlpEncoding): Buffer {
  return encodeResponse(otlpTypes().metricsResponse, "rejectedDataPoints", outcome, encoding);
}

/** As encodeMetricsResponse, with rejected_spans. */
export function encodeTracesResponse(outcome: ExportOutcome, encoding: OtlpEncoding): Buffer {
  return encodeResponse(otlpTypes().tracesResponse, "rejectedSpans", outcome, encoding);
}

function encodeResponse(
  type: protobuf.Type,
  rejectedField: "rejectedDataPoints" | "rejectedSpans",
  { rejected, message = "" }: ExportOutcome,
  encoding: OtlpEncoding,
): Buffer {
  if (!Number.isSafeInteger(rejected) || rejected < 0) {
    throw new RangeError(`rejected must be a whole number ≥ 0, got ${rejected}`);
  }
  const body =
    rejected === 0 && message === ""
      ? {}
      : { partialSuccess: { [rejectedField]: rejected, errorMessage: message } };
  return serialize(type, body, encoding);
}

/** google.rpc.Code values an OTLP endpoint answers with (https://grpc.io/docs/guides/status-codes/). */
export const RpcCode = {
  INVALID_ARGUMENT: 3,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/** A google.rpc.Status: the body of every OTLP/HTTP 4xx and 5xx response. */
export function encodeStatus(code: number, message: string, encoding: OtlpEncoding): Buffer {
  return serialize(otlpTypes().status, { code, message }, encoding);
}

function serialize(type: protobuf.Type, body: Record<string, unknown>, encoding: OtlpEncoding): Buffer {
  const message = type.fromObject(body);
  if (encoding === "json") return Buffer.from(protojson.toJsonString(type, message));
  const bytes = type.encode(message).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
