import protojson from "protobufjs/ext/protojson.js";
import { completeOtlpTypes, otlpTypes } from "../../src/otlp/schema.js";
import type { OtlpEncoding } from "../../src/otlp/types.js";

/**
 * OTLP export request bodies written by hand, for what a well-behaved SDK never sends (NaN,
 * negative counters, unspecified temporality, 10,000 series…). A body is written once as
 * OTLP/JSON (the protocol's JSON mapping: int64 as decimal strings, enums as integers, trace and
 * span ids as hex), and encoded as binary protobuf with the OpenTelemetry project's own message
 * types (src/otlp/schema.ts), so both encodings carry the same request.
 */

export type Json = Record<string, unknown>;

export const CONTENT_TYPE: Record<OtlpEncoding, string> = {
  protobuf: "application/x-protobuf",
  json: "application/json",
};

export const ENCODINGS: OtlpEncoding[] = ["protobuf", "json"];

/** Milliseconds since the epoch as OTLP's nanoseconds (a decimal string, as OTLP/JSON writes int64). */
export const ns = (ms: number) => String(BigInt(Math.round(ms)) * 1_000_000n);

/** An attribute value: a string, a whole number (int), another number (double), a boolean, or a raw AnyValue. */
export type Attr = string | number | boolean | { [k: string]: unknown };

function anyValue(v: Attr): Json {
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (typeof v === "number") return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  return v;
}

export const attributes = (rec: Record<string, Attr> = {}) =>
  Object.entries(rec).map(([key, value]) => ({ key, value: anyValue(value) }));

/** OTLP's AggregationTemporality: 0 unspecified, 1 delta, 2 cumulative. */
export const TEMPORALITY = { unspecified: 0, delta: 1, cumulative: 2 } as const;
export type Temporality = keyof typeof TEMPORALITY;

export interface NumberPoint {
  attributes?: Record<string, Attr>;
  /** ms; omitted: unset (0) */
  start?: number;
  /** ms */
  time: number;
  /** as_int: a number or a decimal string (beyond 2^53) */
  asInt?: number | string;
  /** as_double: a number or "NaN", "Infinity", "-Infinity" */
  asDouble?: number | string;
}

function numberPoint(p: NumberPoint): Json {
  const out: Json = { attributes: attributes(p.attributes), timeUnixNano: ns(p.time) };
  if (p.start !== undefined) out.startTimeUnixNano = ns(p.start);
  if (p.asInt !== undefined) out.asInt = String(p.asInt);
  if (p.asDouble !== undefined) out.asDouble = p.asDouble;
  return out;
}

export function sumMetric(name: string, temporality: Temporality, points: NumberPoint[]): Json {
  return {
    name,
    unit: "{token}",
    sum: {
      aggregationTemporality: TEMPORALITY[temporality],
      isMonotonic: true,
      dataPoints: points.map(numberPoint),
    },
  };
}

export interface HistogramPoint {
  attributes?: Record<string, Attr>;
  start?: number;
  time: number;
  count: number;
  /** omitted: no sum (optional in the protocol) */
  sum?: number | string;
}

export function histogramMetric(
  name: string,
  temporality: Temporality,
  points: HistogramPoint[],
  unit = "{token}",
): Json {
  return {
    name,
    unit,
    histogram: {
      aggregationTemporality: TEMPORALITY[temporality],
      dataPoints: points.map((p) => {
        const out: Json = {
          attributes: attributes(p.attributes),
          timeUnixNano: ns(p.time),
          count: String(p.count),
          bucketCounts: [String(p.count)],
          explicitBounds: [],
        };
        if (p.start !== undefined) out.startTimeUnixNano = ns(p.start);
        if (p.sum !== undefined) out.sum = p.sum;
        return out;
      }),
    },
  };
}

export function gaugeMetric(name: string, points: NumberPoint[]): Json {
  return { name, unit: "1", gauge: { dataPoints: points.map(numberPoint) } };
}

/** An ExportMetricsServiceRequest: one resource per entry, its metrics in one scope. */
export function metricsRequest(resources: { resource: Record<string, Attr>; metrics: Json[] }[]): Json {
  return {
    resourceMetrics: resources.map((r) => ({
      resource: { attributes: attributes(r.resource) },
      scopeMetrics: [{ scope: { name: "vigil-bad-input", version: "1.0.0" }, metrics: r.metrics }],
    })),
  };
}

export interface SpanSpec {
  /** 32 hex digits */
  traceId: string;
  /** 16 hex digits */
  spanId: string;
  name?: string;
  /** ms */
  start: number;
  /** ms */
  end: number;
  attributes?: Record<string, Attr>;
  /** 2: ERROR */
  statusCode?: number;
}

/** An ExportTraceServiceRequest: one resource per entry, its spans in one scope. */
export function tracesRequest(resources: { resource: Record<string, Attr>; spans: SpanSpec[] }[]): Json {
  return {
    resourceSpans: resources.map((r) => ({
      resource: { attributes: attributes(r.resource) },
      scopeSpans: [
        {
          scope: { name: "vigil-bad-input", version: "1.0.0" },
          spans: r.spans.map((s) => ({
            traceId: s.traceId,
            spanId: s.spanId,
            name: s.name ?? "chat",
            kind: 3,
            startTimeUnixNano: ns(s.start),
            endTimeUnixNano: ns(s.end),
            attributes: attributes(s.attributes),
            status: { code: s.statusCode ?? 0 },
          })),
        },
      ],
    })),
  };
}

/** Hex ids of span number `n`: distinct, valid (non-zero) and deterministic. */
export const traceIdOf = (n: number) => (n + 1).toString(16).padStart(32, "a");
export const spanIdOf = (n: number) => (n + 1).toString(16).padStart(16, "b");

/** OTLP/JSON ids are hex where ProtoJSON has base64: rewrite them before protojson reads them. */
function hexIdsToBase64(json: Json): Json {
  const copy = structuredClone(json);
  // structuredClone keeps an object listed twice as one object: convert each span once
  const done = new Set<Json>();
  for (const rs of (copy.resourceSpans as Json[] | undefined) ?? [])
    for (const ss of (rs.scopeSpans as Json[] | undefined) ?? [])
      for (const span of (ss.spans as Json[] | undefined) ?? []) {
        if (done.has(span)) continue;
        done.add(span);
        for (const f of ["traceId", "spanId", "parentSpanId"])
          if (typeof span[f] === "string") span[f] = Buffer.from(span[f], "hex").toString("base64");
      }
  return copy;
}

/** The request's body in the encoding: OTLP/JSON text, or binary protobuf of the same message. */
export function encodeRequest(kind: "metrics" | "traces", json: Json, encoding: OtlpEncoding): Buffer {
  if (encoding === "json") return Buffer.from(JSON.stringify(json));
  // every field, buckets and exemplars too, as a sender encodes them
  const types = completeOtlpTypes();
  const type = kind === "metrics" ? types.metricsRequest : types.tracesRequest;
  const checked = protojson.fromJson(type, kind === "traces" ? hexIdsToBase64(json) : json);
  const bytes = type.encode(type.fromObject({ ...checked })).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** What an OTLP/HTTP 200 says, decoded from either encoding. */
export interface ExportAnswer {
  /** partial_success is set (a rejection or a warning) */
  partial: boolean;
  rejected: number;
  message: string;
}

/** Decodes an Export…ServiceResponse body (rejected_data_points or rejected_spans). */
export function decodeExportResponse(
  kind: "metrics" | "traces",
  body: Buffer,
  encoding: OtlpEncoding,
): ExportAnswer {
  const field = kind === "metrics" ? "rejectedDataPoints" : "rejectedSpans";
  let ps: Json | undefined;
  if (encoding === "json") {
    ps = (JSON.parse(body.toString("utf8")) as { partialSuccess?: Json }).partialSuccess;
  } else {
    const types = otlpTypes();
    const type = kind === "metrics" ? types.metricsResponse : types.tracesResponse;
    ps = (type.toObject(type.decode(body), { longs: Number }) as { partialSuccess?: Json }).partialSuccess;
  }
  return {
    partial: ps !== undefined && ps !== null,
    rejected: Number(ps?.[field] ?? 0),
    message: typeof ps?.errorMessage === "string" ? ps.errorMessage : "",
  };
}

/** Decodes a google.rpc.Status body (every OTLP/HTTP error). */
export function decodeStatus(body: Buffer, encoding: OtlpEncoding): { code: number; message: string } {
  const raw =
    encoding === "json"
      ? (JSON.parse(body.toString("utf8")) as Json)
      : (otlpTypes().status.toObject(otlpTypes().status.decode(body), { defaults: true }) as Json);
  return { code: Number(raw.code ?? 0), message: typeof raw.message === "string" ? raw.message : "" };
}
