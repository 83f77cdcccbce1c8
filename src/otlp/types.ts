/**
 * What Vigil reads of an OTLP export request, as plain objects: the subset of the OpenTelemetry
 * protocol (opentelemetry-proto v1.11.0, vendored in ./proto) that usage, latency and health need.
 * Times are nanoseconds since the epoch as bigint (they do not fit a double); unset times are 0n.
 * Field names follow the protocol's lowerCamelCase JSON names.
 */

/**
 * An attribute's value (OTLP AnyValue). An int64 within ±(2^53 − 1) is a number, beyond that a
 * bigint; bytes are a Uint8Array (a copy, never a view of the request body); an AnyValue with no
 * value set is null; an array is an array, a key-value list a nested record.
 */
export type AttributeValue =
  | string
  | number
  | boolean
  | bigint
  | Uint8Array
  | null
  | AttributeValue[]
  | { [key: string]: AttributeValue };

/** Key-value pairs as a record (null prototype; a repeated key keeps its last value). */
export type Attributes = Record<string, AttributeValue>;

export interface OtlpResource {
  attributes: Attributes;
}

export interface OtlpScope {
  name: string;
  version: string;
  attributes: Attributes;
}

/** A point's start and time, its attributes, and its flags (bit 0: no recorded value). */
interface DataPointBase {
  attributes: Attributes;
  startTimeUnixNano: bigint;
  timeUnixNano: bigint;
  flags: number;
  /**
   * An integer of this point (an int value or a count) is beyond
   * Number.MAX_SAFE_INTEGER, so its number here is rounded: a consumer should reject the point.
   */
  unsafeInteger: boolean;
}

export interface NumberDataPoint extends DataPointBase {
  /** as_int or as_double; null when the sender set neither. Doubles may be NaN or ±Infinity. */
  value: number | null;
}

export interface HistogramDataPoint extends DataPointBase {
  count: number;
  /** Optional in the protocol (absent when the values can be negative, e.g. a gauge histogram). */
  sum: number | null;
  min: number | null;
  max: number | null;
  // bucket counts and bounds are not decoded: Vigil reads a histogram's sum and count (schema.ts)
}

export interface ExponentialBuckets {
  offset: number;
  bucketCounts: number[];
}

export interface ExponentialHistogramDataPoint extends DataPointBase {
  count: number;
  sum: number | null;
  min: number | null;
  max: number | null;
  scale: number;
  zeroCount: number;
  zeroThreshold: number;
  positive: ExponentialBuckets;
  negative: ExponentialBuckets;
}

export interface SummaryDataPoint extends DataPointBase {
  count: number;
  sum: number;
  quantileValues: { quantile: number; value: number }[];
}

/** "unspecified" also stands for a value this version of the protocol does not define. */
export type AggregationTemporality = "unspecified" | "delta" | "cumulative";

interface MetricBase {
  name: string;
  description: string;
  unit: string;
}

export type OtlpMetric = MetricBase &
  (
    | { type: "gauge"; dataPoints: NumberDataPoint[] }
    | {
        type: "sum";
        aggregationTemporality: AggregationTemporality;
        isMonotonic: boolean;
        dataPoints: NumberDataPoint[];
      }
    | { type: "histogram"; aggregationTemporality: AggregationTemporality; dataPoints: HistogramDataPoint[] }
    | {
        type: "exponentialHistogram";
        aggregationTemporality: AggregationTemporality;
        dataPoints: ExponentialHistogramDataPoint[];
      }
    | { type: "summary"; dataPoints: SummaryDataPoint[] }
    /** A metric whose data field is unset (or of a kind this version does not define). */
    | { type: "empty"; dataPoints: [] }
  );

export interface OtlpScopeMetrics {
  scope: OtlpScope;
  schemaUrl: string;
  metrics: OtlpMetric[];
}

export interface OtlpResourceMetrics {
  resource: OtlpResource;
  schemaUrl: string;
  scopeMetrics: OtlpScopeMetrics[];
}

export interface OtlpMetricsRequest {
  resourceMetrics: OtlpResourceMetrics[];
  /** All data points of the request: the denominator of a partial success's rejected_data_points. */
  dataPointCount: number;
}

/** "unspecified" also stands for a value this version of the protocol does not define. */
export type SpanKind = "unspecified" | "internal" | "server" | "client" | "producer" | "consumer";
/** "unset" also stands for a value this version of the protocol does not define. */
export type SpanStatusCode = "unset" | "ok" | "error";

export interface OtlpSpanEvent {
  name: string;
  timeUnixNano: bigint;
  attributes: Attributes;
}

export interface OtlpSpan {
  /** Lowercase hex (32 digits for a valid id; "" when unset). */
  traceId: string;
  /** Lowercase hex (16 digits for a valid id; "" when unset). */
  spanId: string;
  /** Lowercase hex; "" for a root span. */
  parentSpanId: string;
  traceState: string;
  name: string;
  kind: SpanKind;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: Attributes;
  events: OtlpSpanEvent[];
  status: { code: SpanStatusCode; message: string };
  flags: number;
}

export interface OtlpScopeSpans {
  scope: OtlpScope;
  schemaUrl: string;
  spans: OtlpSpan[];
}

export interface OtlpResourceSpans {
  resource: OtlpResource;
  schemaUrl: string;
  scopeSpans: OtlpScopeSpans[];
}

export interface OtlpTracesRequest {
  resourceSpans: OtlpResourceSpans[];
  /** All spans of the request: the denominator of a partial success's rejected_spans. */
  spanCount: number;
}

/** The two OTLP/HTTP encodings: `application/x-protobuf` and `application/json`. */
export type OtlpEncoding = "protobuf" | "json";
