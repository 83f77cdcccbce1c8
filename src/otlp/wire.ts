/**
 * The shapes protobufjs gives a decoded OTLP message (from the wire or from OTLP/JSON): what
 * src/otlp/decode.ts reads and turns into the plain objects of ./types.ts. Unset scalars read as
 * their defaults (0, "", false, empty arrays, a zero Long); unset messages and proto3 `optional`
 * fields read as null; a oneof's virtual property names the member that is set.
 */

/** An int64 as protobufjs' Long (a number only where the `long` package is missing). */
export type PbInt64 = number | { low: number; high: number; unsigned: boolean };

export interface PbAnyValue {
  value?:
    | "stringValue"
    | "boolValue"
    | "intValue"
    | "doubleValue"
    | "arrayValue"
    | "kvlistValue"
    | "bytesValue"
    | string;
  stringValue: string;
  boolValue: boolean;
  intValue: PbInt64;
  doubleValue: number;
  arrayValue: { values: PbAnyValue[] } | null;
  kvlistValue: { values: PbKeyValue[] } | null;
  bytesValue: PbBytes;
}

export interface PbKeyValue {
  key: string;
  value: PbAnyValue | null;
}

export interface PbResource {
  attributes: PbKeyValue[];
}

export interface PbScope {
  name: string;
  version: string;
  attributes: PbKeyValue[];
}

interface PbPointBase {
  attributes: PbKeyValue[];
  startTimeUnixNano: PbInt64;
  timeUnixNano: PbInt64;
  flags: number;
}

export interface PbNumberDataPoint extends PbPointBase {
  value?: "asInt" | "asDouble" | string;
  asInt: PbInt64;
  asDouble: number;
}

export interface PbHistogramDataPoint extends PbPointBase {
  count: PbInt64;
  sum: number | null;
  min: number | null;
  max: number | null;
  // bucketCounts, explicitBounds, exemplars: removed from the type before decoding (schema.ts)
}

export interface PbBuckets {
  offset: number;
  bucketCounts: PbInt64[];
}

export interface PbExponentialHistogramDataPoint extends PbPointBase {
  count: PbInt64;
  sum: number | null;
  min: number | null;
  max: number | null;
  scale: number;
  zeroCount: PbInt64;
  zeroThreshold: number;
  positive: PbBuckets | null;
  negative: PbBuckets | null;
}

export interface PbSummaryDataPoint extends PbPointBase {
  count: PbInt64;
  sum: number;
  quantileValues: { quantile: number; value: number }[];
}

export interface PbMetric {
  name: string;
  description: string;
  unit: string;
  data?: "gauge" | "sum" | "histogram" | "exponentialHistogram" | "summary" | string;
  gauge: { dataPoints: PbNumberDataPoint[] } | null;
  sum: { dataPoints: PbNumberDataPoint[]; aggregationTemporality: number; isMonotonic: boolean } | null;
  histogram: { dataPoints: PbHistogramDataPoint[]; aggregationTemporality: number } | null;
  exponentialHistogram: {
    dataPoints: PbExponentialHistogramDataPoint[];
    aggregationTemporality: number;
  } | null;
  summary: { dataPoints: PbSummaryDataPoint[] } | null;
}

export interface PbMetricsRequest {
  resourceMetrics: {
    resource: PbResource | null;
    schemaUrl: string;
    scopeMetrics: { scope: PbScope | null; schemaUrl: string; metrics: PbMetric[] }[];
  }[];
}

/** Bytes: a Buffer when set, protobufjs' default (an empty array) when not. */
export type PbBytes = Uint8Array | number[];

export interface PbSpan {
  traceId: PbBytes;
  spanId: PbBytes;
  parentSpanId: PbBytes;
  traceState: string;
  name: string;
  kind: number;
  startTimeUnixNano: PbInt64;
  endTimeUnixNano: PbInt64;
  attributes: PbKeyValue[];
  events: { name: string; timeUnixNano: PbInt64; attributes: PbKeyValue[] }[];
  status: { code: number; message: string } | null;
  flags: number;
}

export interface PbTracesRequest {
  resourceSpans: {
    resource: PbResource | null;
    schemaUrl: string;
    scopeSpans: { scope: PbScope | null; schemaUrl: string; spans: PbSpan[] }[];
  }[];
}
