import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import { AggregationTemporality, MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { ProtobufMetricsSerializer } from "@opentelemetry/otlp-transformer";

/**
 * The exports of `bench otlp`'s simulated gateways (issue #35, point 5): what one OpenTelemetry JS
 * SDK in an AI gateway sends every 10 s with the GenAI semantic conventions, and the same data as
 * one Vigil heartbeat, so both paths carry the same information.
 *
 * Each exporter (one gateway instance, its own `service.instance.id`) sees, per model and per
 * interval, 4 requests: their input and output tokens (histogram `gen_ai.client.token.usage`,
 * unit `{token}`, `gen_ai.token.type` input/output) and their durations (histogram
 * `gen_ai.client.operation.duration`, seconds), with the bucket boundaries the conventions advise.
 * That is 3 data points per model: 60 for 20 models.
 *
 * The body is made once per exporter by the SDK itself (a MeterProvider, a MetricReader's
 * collect(), and the SDK's own ProtobufMetricsSerializer, as its OTLP/HTTP protobuf exporter
 * does), then each send patches the fixed-width fields of every histogram point in place: times
 * (fixed64), count (fixed64), sum (double) and bucket counts (packed fixed64). So a send costs
 * the load generator a few microseconds, not an SDK collection and an encoding.
 *
 * Cumulative (the SDK's default): send n carries n intervals' worth since the exporter started,
 * with the exporter's start as start time. Delta: every send carries one interval, from the
 * previous send's time.
 */

export type Temporality = "cumulative" | "delta";

/** Every model of the pricing table first (sql/postgres/003_pricing.sql), then unpriced names. */
const PRICED = [
  "claude-sonnet-4-5",
  "gpt-4o",
  "gpt-4o-mini",
  "claude-haiku-4-5",
  "gemini-2.5-flash",
  "gpt-4.1",
  "gpt-4.1-mini",
  "claude-opus-4-5",
  "gpt-5",
  "gpt-5-mini",
  "o4-mini",
  "gemini-2.5-pro",
  "claude-sonnet-4",
  "gpt-4.1-nano",
  "gemini-2.0-flash",
  "o3",
  "claude-3-5-haiku",
  "gpt-5-nano",
  "claude-opus-4-1",
  "claude-3-7-sonnet",
  "claude-3-5-sonnet",
  "claude-opus-4",
];

export function modelNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => PRICED[i] ?? `bench-model-${i + 1}`);
}

function providerOf(model: string): string {
  if (model.startsWith("claude")) return "anthropic";
  if (model.startsWith("gemini")) return "gcp.gemini";
  return "openai";
}

export const REQUESTS_PER_MODEL = 4;

/** One interval's requests of one model at one exporter: tokens and durations (seconds). */
export function intervalOf(exporter: number, model: number) {
  return {
    input: [
      400 + 37 * model + 11 * (exporter % 7),
      900 + 13 * model,
      1500 + 29 * (exporter % 5),
      2200 + 3 * model,
    ],
    output: [80 + 5 * model, 150 + 7 * (exporter % 3), 320 + model, 600 + 11 * model],
    seconds: [0.4 + 0.01 * model, 0.8, 1.3, 2.9 + 0.05 * (exporter % 4)],
  };
}

const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);

/** One interval's totals of one exporter, over all its models: what one export (or heartbeat) adds. */
export function intervalTotals(exporter: number, models: number) {
  let input = 0;
  let output = 0;
  let seconds = 0;
  const byModel: { model: string; inputTokens: number; outputTokens: number }[] = [];
  const names = modelNames(models);
  for (let m = 0; m < models; m++) {
    const iv = intervalOf(exporter, m);
    input += sum(iv.input);
    output += sum(iv.output);
    seconds += sum(iv.seconds);
    byModel.push({ model: names[m] as string, inputTokens: sum(iv.input), outputTokens: sum(iv.output) });
  }
  const requests = REQUESTS_PER_MODEL * models;
  return { input, output, requests, meanLatencyMs: (seconds / requests) * 1000, byModel };
}

/** The instance name of an exporter (resource attribute `service.instance.id`). */
export const instanceId = (exporter: number) => `gw-bench-${String(exporter).padStart(4, "0")}`;

// the bucket boundaries the GenAI semantic conventions advise for these two histograms
const TOKEN_BUCKETS = [
  1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
];
const DURATION_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

class CollectingReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

/** One interval of one exporter as the OpenTelemetry JS SDK encodes it (ExportMetricsServiceRequest). */
export async function sdkExport(exporter: number, models: number, temporality: Temporality): Promise<Buffer> {
  const reader = new CollectingReader({
    aggregationTemporalitySelector: () =>
      temporality === "delta" ? AggregationTemporality.DELTA : AggregationTemporality.CUMULATIVE,
  });
  const provider = new MeterProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({
        "service.name": "ai-gateway",
        "service.version": "2.4.1",
        "service.instance.id": instanceId(exporter),
      }),
    ),
    readers: [reader],
  });
  const meter = provider.getMeter("vigil-bench-gateway", "1.0.0");
  const tokens = meter.createHistogram("gen_ai.client.token.usage", {
    unit: "{token}",
    description: "Measures number of input and output tokens used",
    advice: { explicitBucketBoundaries: TOKEN_BUCKETS },
  });
  const duration = meter.createHistogram("gen_ai.client.operation.duration", {
    unit: "s",
    description: "GenAI operation duration",
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  });
  const names = modelNames(models);
  for (let m = 0; m < models; m++) {
    const model = names[m] as string;
    const attrs = {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": providerOf(model),
      "gen_ai.request.model": model,
      "gen_ai.response.model": model,
    };
    const iv = intervalOf(exporter, m);
    for (const v of iv.input) tokens.record(v, { ...attrs, "gen_ai.token.type": "input" });
    for (const v of iv.output) tokens.record(v, { ...attrs, "gen_ai.token.type": "output" });
    for (const v of iv.seconds) duration.record(v, attrs);
  }
  const { resourceMetrics, errors } = await reader.collect();
  if (errors.length > 0) throw new Error(`SDK collect: ${String(errors[0])}`);
  const bytes = ProtobufMetricsSerializer.serializeRequest(resourceMetrics);
  await provider.shutdown();
  if (!bytes) throw new Error("the SDK's serializer returned nothing");
  return Buffer.from(bytes);
}

// ---- the wire walk -----------------------------------------------------------------------------

/** Where one histogram point's fixed-width fields are in the body, and the values found there. */
interface PointSlots {
  start: number;
  time: number;
  count: number;
  sum: number;
  /** the template's non-empty buckets */
  buckets: number[];
  base: { count: number; sum: number; buckets: number[] };
}

function varint(buf: Buffer, pos: number): [number, number] {
  let value = 0;
  let shift = 0;
  for (;;) {
    const b = buf[pos++];
    if (b === undefined) throw new Error("truncated varint");
    value += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) return [value, pos];
    shift += 7;
  }
}

/** Each field of a message between from and to: its number, wire type, and where its value lies. */
function* fields(buf: Buffer, from: number, to: number) {
  let pos = from;
  while (pos < to) {
    const [tag, p] = varint(buf, pos);
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    let start = p;
    let end: number;
    if (wire === 0) end = varint(buf, p)[1];
    else if (wire === 1) end = p + 8;
    else if (wire === 5) end = p + 4;
    else if (wire === 2) {
      const [len, q] = varint(buf, p);
      start = q;
      end = q + len;
    } else throw new Error(`unexpected wire type ${wire}`);
    yield { field, wire, start, end };
    pos = end;
  }
}

const readU64 = (buf: Buffer, at: number) => buf.readUInt32LE(at) + buf.readUInt32LE(at + 4) * 2 ** 32;

/**
 * Every HistogramDataPoint of an ExportMetricsServiceRequest (resource_metrics 1 → scope_metrics 2
 * → metrics 2 → histogram 9 → data_points 1), by the field numbers of opentelemetry-proto.
 */
function histogramPoints(buf: Buffer): PointSlots[] {
  const points: PointSlots[] = [];
  const within = (from: number, to: number, field: number, fn: (s: number, e: number) => void) => {
    for (const f of fields(buf, from, to)) if (f.field === field && f.wire === 2) fn(f.start, f.end);
  };
  within(0, buf.length, 1, (a, b) =>
    within(a, b, 2, (c, d) =>
      within(c, d, 2, (e, g) => {
        for (const m of fields(buf, e, g)) {
          if (m.wire === 2 && [5, 7, 10, 11].includes(m.field))
            throw new Error(`metric data field ${m.field}: only histograms are patched`);
        }
        within(e, g, 9, (h, i) =>
          within(h, i, 1, (j, k) => {
            const slots: Partial<PointSlots> & { buckets: number[] } = { buckets: [] };
            for (const f of fields(buf, j, k)) {
              if (f.field === 2 && f.wire === 1) slots.start = f.start;
              else if (f.field === 3 && f.wire === 1) slots.time = f.start;
              else if (f.field === 4 && f.wire === 1) slots.count = f.start;
              else if (f.field === 5 && f.wire === 1) slots.sum = f.start;
              else if (f.field === 6 && f.wire === 2)
                for (let at = f.start; at < f.end; at += 8) slots.buckets.push(at);
              else if (f.field === 6 && f.wire === 1) slots.buckets.push(f.start);
            }
            const { start, time, count, sum: s } = slots;
            if (start === undefined || time === undefined || count === undefined || s === undefined)
              throw new Error("a histogram point without its start, time, count or sum");
            // a bucket the template left empty stays empty in every send: only the others are patched
            const buckets = slots.buckets.filter((at) => readU64(buf, at) !== 0);
            points.push({
              start,
              time,
              count,
              sum: s,
              buckets,
              base: {
                count: readU64(buf, count),
                sum: buf.readDoubleLE(s),
                buckets: buckets.map((at) => readU64(buf, at)),
              },
            });
          }),
        );
      }),
    ),
  );
  return points;
}

const TWO32 = 2 ** 32;
const writeU64 = (buf: Buffer, at: number, v: number) => {
  buf.writeUInt32LE(v % TWO32, at);
  buf.writeUInt32LE(Math.floor(v / TWO32), at + 4);
};
const splitNs = (ms: number) => {
  const ns = BigInt(ms) * 1_000_000n;
  return [Number(ns & 0xffffffffn), Number(ns >> 32n)] as const;
};

/** An exporter's body, patched in place for each send. */
export class ExportBody {
  readonly body: Buffer;
  readonly points: PointSlots[];

  constructor(template: Buffer) {
    this.body = Buffer.from(template);
    this.points = histogramPoints(this.body);
  }

  /** The body of send number n (1, 2, …), its points from startMs to timeMs (milliseconds). */
  patch(n: number, startMs: number, timeMs: number, temporality: Temporality): Buffer {
    const k = temporality === "cumulative" ? n : 1;
    const [sLo, sHi] = splitNs(startMs);
    const [tLo, tHi] = splitNs(timeMs);
    const b = this.body;
    for (const p of this.points) {
      b.writeUInt32LE(sLo, p.start);
      b.writeUInt32LE(sHi, p.start + 4);
      b.writeUInt32LE(tLo, p.time);
      b.writeUInt32LE(tHi, p.time + 4);
      writeU64(b, p.count, k * p.base.count);
      b.writeDoubleLE(k * p.base.sum, p.sum);
      for (let i = 0; i < p.buckets.length; i++)
        writeU64(b, p.buckets[i] as number, k * (p.base.buckets[i] as number));
    }
    return b;
  }
}

/** The same interval as a Vigil heartbeat body (POST /v1/gateway/ingest), with its period to fill in. */
export function heartbeatTemplate(
  exporter: number,
  models: number,
): (startMs: number, endMs: number) => string {
  const t = intervalTotals(exporter, models);
  const marker = "\u0000PERIOD\u0000";
  const text = JSON.stringify({
    type: "heartbeat",
    gateway: { status: "healthy", latencyMs: Math.round(t.meanLatencyMs * 10) / 10, version: "2.4.1" },
    system: { gatewayPidAlive: true },
    tokens: {
      period: {
        inputTokens: t.input,
        outputTokens: t.output,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        requestCount: t.requests,
        startedAt: marker,
        endedAt: marker,
      },
      byModel: t.byModel,
    },
  });
  const [pre, mid, post] = text.split(JSON.stringify(marker)) as [string, string, string];
  return (startMs, endMs) =>
    `${pre}"${new Date(startMs).toISOString()}"${mid}"${new Date(endMs).toISOString()}"${post}`;
}
