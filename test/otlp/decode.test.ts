import http from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";
import { context, SpanKind, SpanStatusCode, trace, ValueType, type HrTime } from "@opentelemetry/api";
import { OTLPMetricExporter as JsonMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPMetricExporter as ProtoMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { OTLPTraceExporter as JsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AggregationTemporality,
  MeterProvider,
  MetricReader,
  type ResourceMetrics,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import protobuf from "protobufjs";
import t, { type Test } from "tap";
import { decodeMetricsRequest, decodeTracesRequest, OtlpDecodeError } from "../../src/otlp/decode.js";
import { encodeMetricsResponse, encodeStatus, encodeTracesResponse, RpcCode } from "../../src/otlp/encode.js";
import { mapMetrics } from "../../src/otlp/map.js";
import { completeOtlpTypes, otlpTypes } from "../../src/otlp/schema.js";
import { encodeRequest, metricsRequest, sumMetric } from "../helpers/otlp-bodies.js";
import type {
  HistogramDataPoint,
  NumberDataPoint,
  OtlpEncoding,
  OtlpMetric,
  OtlpMetricsRequest,
} from "../../src/otlp/types.js";

/*
 * The decoder reads what the OpenTelemetry JS SDK's own OTLP exporters send (protobuf and JSON),
 * captured by a loopback receiver that answers with Vigil's own response bodies: the values,
 * attributes, times and ids decoded are those the SDK recorded. Then hand-written OTLP/JSON for
 * what the SDK never sends, and bad bodies.
 */

// ---- a loopback OTLP/HTTP receiver -------------------------------------------------------------

interface Captured {
  path: string;
  contentType: string;
  body: Buffer;
}

async function receiver(t: Test) {
  const captured: Captured[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const body = req.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw;
      const contentType = req.headers["content-type"] ?? "";
      captured.push({ path: req.url ?? "", contentType, body });
      const encoding: OtlpEncoding = contentType.startsWith("application/json") ? "json" : "protobuf";
      const reply = req.url?.endsWith("/metrics")
        ? encodeMetricsResponse({ rejected: 0 }, encoding)
        : encodeTracesResponse({ rejected: 0 }, encoding);
      res.writeHead(200, { "content-type": contentType }).end(reply);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  return { base: `http://127.0.0.1:${port}`, captured };
}

/** Sends through a real exporter and returns the body it put on the wire. */
async function send<T>(
  exporter: {
    export(items: T, done: (r: { code: number; error?: Error }) => void): void;
    shutdown(): Promise<void>;
  },
  items: T,
  captured: Captured[],
): Promise<Captured> {
  const before = captured.length;
  const result = await new Promise<{ code: number; error?: Error }>((resolve) =>
    exporter.export(items, resolve),
  );
  await exporter.shutdown();
  if (result.code !== 0) throw result.error ?? new Error("export failed");
  const sent = captured[before];
  if (!sent) throw new Error("the exporter sent nothing");
  return sent;
}

const nanos = (t: HrTime) => BigInt(t[0]) * 1_000_000_000n + BigInt(t[1]);

// ---- metrics from the SDK ----------------------------------------------------------------------

/** A reader that collects when asked, with the temporality under test. */
class ManualReader extends MetricReader {
  protected override async onShutdown() {}
  protected override async onForceFlush() {}
}

const MODEL = { "gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai" };

async function recordAndCollect(temporality: AggregationTemporality) {
  const reader = new ManualReader({ aggregationTemporalitySelector: () => temporality });
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ "service.name": "gateway", "service.instance.id": "gw-1" }),
    readers: [reader],
  });
  const meter = provider.getMeter("vigil-test", "1.2.3");
  const tokens = meter.createHistogram("gen_ai.client.token.usage", {
    unit: "{token}",
    description: "tokens",
  });
  const requests = meter.createCounter("gen_ai.test.requests", { valueType: ValueType.INT });
  const big = meter.createCounter("gen_ai.test.big", { valueType: ValueType.INT });
  const inflight = meter.createUpDownCounter("gen_ai.test.inflight", { valueType: ValueType.INT });
  const latency = meter.createGauge("gen_ai.test.latency", { unit: "s" });
  const idle = meter.createGauge("gen_ai.test.idle", { valueType: ValueType.INT });

  tokens.record(120, { ...MODEL, "gen_ai.token.type": "input" });
  tokens.record(80, { ...MODEL, "gen_ai.token.type": "input" });
  tokens.record(30, { ...MODEL, "gen_ai.token.type": "output" });
  requests.add(3, MODEL);
  big.add(2 ** 60);
  inflight.add(-2);
  latency.record(0.25, MODEL);
  idle.record(0);
  const first = await reader.collect();

  tokens.record(50, { ...MODEL, "gen_ai.token.type": "input" });
  requests.add(2, MODEL);
  const second = await reader.collect();
  await provider.shutdown();
  return [first.resourceMetrics, second.resourceMetrics];
}

function metric(req: OtlpMetricsRequest, name: string): OtlpMetric {
  const found = req.resourceMetrics
    .flatMap((rm) => rm.scopeMetrics.flatMap((sm) => sm.metrics))
    .find((m) => m.name === name);
  if (!found) throw new Error(`no metric ${name}`);
  return found;
}

function tokenPoint(req: OtlpMetricsRequest, type: string): HistogramDataPoint {
  const m = metric(req, "gen_ai.client.token.usage");
  if (m.type !== "histogram") throw new Error(`gen_ai.client.token.usage is a ${m.type}`);
  const p = m.dataPoints.find((d) => d.attributes["gen_ai.token.type"] === type);
  if (!p) throw new Error(`no ${type} point`);
  return p;
}

function onlyNumberPoint(req: OtlpMetricsRequest, name: string): NumberDataPoint {
  const m = metric(req, name);
  if (m.type !== "sum" && m.type !== "gauge") throw new Error(`${name} is a ${m.type}`);
  const [p] = m.dataPoints;
  if (!p || m.dataPoints.length !== 1) throw new Error(`${name} has ${m.dataPoints.length} points`);
  return p;
}

/** The SDK's point for a metric and attribute filter, to compare times with. */
function sdkPoint(rm: ResourceMetrics, name: string, tokenType?: string) {
  const m = rm.scopeMetrics.flatMap((s) => s.metrics).find((x) => x.descriptor.name === name);
  const p = m?.dataPoints.find(
    (d) => tokenType === undefined || d.attributes["gen_ai.token.type"] === tokenType,
  );
  if (!p) throw new Error(`no SDK point ${name}`);
  return p;
}

async function exportMetrics(t: Test, rm: ResourceMetrics) {
  const { base, captured } = await receiver(t);
  const url = `${base}/v1/otlp/v1/metrics`;
  const proto = await send(new ProtoMetricExporter({ url }), rm, captured);
  const json = await send(new JsonMetricExporter({ url }), rm, captured);
  t.equal(proto.contentType, "application/x-protobuf");
  t.equal(json.contentType, "application/json");
  return { proto: proto.body, json: json.body };
}

for (const [label, temporality] of [
  ["cumulative", AggregationTemporality.CUMULATIVE],
  ["delta", AggregationTemporality.DELTA],
] as const) {
  t.test(
    `metrics from the SDK's exporters, ${label}: protobuf and JSON decode to what was recorded`,
    async (t) => {
      const [first, second] = await recordAndCollect(temporality);
      if (!first || !second) throw new Error("nothing collected");
      const expected = label;

      for (const [round, rm] of [
        [1, first],
        [2, second],
      ] as const) {
        const bodies = await exportMetrics(t, rm);
        const decoded = {
          protobuf: decodeMetricsRequest(bodies.proto, "protobuf"),
          json: decodeMetricsRequest(bodies.json, "json"),
        };
        t.same(decoded.json, decoded.protobuf, `round ${round}: both encodings decode to the same request`);

        for (const [encoding, req] of Object.entries(decoded)) {
          const at = `${encoding}, round ${round}`;
          const [resource] = req.resourceMetrics;
          t.equal(resource?.resource.attributes["service.instance.id"], "gw-1", at);
          t.equal(resource?.resource.attributes["service.name"], "gateway", at);
          const scope = resource?.scopeMetrics[0]?.scope;
          t.same(
            scope && { name: scope.name, version: scope.version },
            { name: "vigil-test", version: "1.2.3" },
            at,
          );

          const usage = metric(req, "gen_ai.client.token.usage");
          t.match(
            usage,
            { type: "histogram", unit: "{token}", description: "tokens", aggregationTemporality: expected },
            at,
          );

          const input = tokenPoint(req, "input");
          t.same({ ...input.attributes }, { ...MODEL, "gen_ai.token.type": "input" }, `${at}: attributes`);
          if (round === 1) {
            t.match(input, { count: 2, sum: 200, min: 80, max: 120, unsafeInteger: false }, at);
            t.match(tokenPoint(req, "output"), { count: 1, sum: 30, min: 30, max: 30 }, at);
          } else if (expected === "cumulative") {
            t.match(input, { count: 3, sum: 250, min: 50, max: 120 }, at);
            t.match(
              tokenPoint(req, "output"),
              { count: 1, sum: 30 },
              `${at}: an unchanged series is still reported`,
            );
          } else {
            t.match(input, { count: 1, sum: 50, min: 50, max: 50 }, at);
            t.equal(
              (usage.dataPoints as HistogramDataPoint[]).filter(
                (p) => p.attributes["gen_ai.token.type"] === "output",
              ).length,
              0,
              `${at}: a delta export has no point for a series with no new recording`,
            );
          }
          t.notOk("bucketCounts" in input, `${at}: buckets are skipped (Vigil reads the sum and count)`);

          const sdkInput = sdkPoint(rm, "gen_ai.client.token.usage", "input");
          t.equal(input.startTimeUnixNano, nanos(sdkInput.startTime), `${at}: start time as recorded`);
          t.equal(input.timeUnixNano, nanos(sdkInput.endTime), `${at}: time as recorded`);
          t.ok(input.timeUnixNano > 1_700_000_000_000_000_000n, `${at}: nanoseconds since the epoch`);

          const requests = metric(req, "gen_ai.test.requests");
          t.match(requests, { type: "sum", isMonotonic: true, aggregationTemporality: expected }, at);
          t.equal(
            onlyNumberPoint(req, "gen_ai.test.requests").value,
            round === 2 && expected === "delta" ? 2 : round === 2 ? 5 : 3,
            at,
          );

          if (round === 1) {
            t.match(metric(req, "gen_ai.test.inflight"), { type: "sum", isMonotonic: false }, at);
            t.equal(onlyNumberPoint(req, "gen_ai.test.inflight").value, -2, `${at}: a negative int`);
            t.match(metric(req, "gen_ai.test.latency"), { type: "gauge", unit: "s" }, at);
            t.equal(onlyNumberPoint(req, "gen_ai.test.latency").value, 0.25, `${at}: a double`);
            t.match(
              onlyNumberPoint(req, "gen_ai.test.idle"),
              { value: 0, unsafeInteger: false },
              `${at}: an int 0 is a value, not unset`,
            );
            t.match(
              onlyNumberPoint(req, "gen_ai.test.big"),
              { value: 2 ** 60, unsafeInteger: true },
              `${at}: an int beyond 2^53 is flagged`,
            );
            t.equal(req.dataPointCount, 7, `${at}: every point counted`);
          }
        }
      }

      if (expected === "cumulative") {
        t.equal(
          nanos(sdkPoint(second, "gen_ai.test.requests").startTime),
          nanos(sdkPoint(first, "gen_ai.test.requests").startTime),
          "cumulative: the start stays",
        );
      } else {
        t.equal(
          nanos(sdkPoint(second, "gen_ai.test.requests").startTime),
          nanos(sdkPoint(first, "gen_ai.test.requests").endTime),
          "delta: each start is the previous end",
        );
      }
    },
  );
}

// ---- spans from the SDK ------------------------------------------------------------------------

t.test("spans from the SDK's exporters: protobuf and JSON decode to what was recorded", async (t) => {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.instance.id": "gw-1" }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const tracer = provider.getTracer("gen-ai-gateway", "0.9.0");
  const parent = tracer.startSpan("gateway request", { kind: SpanKind.SERVER });
  const ctx = trace.setSpan(context.active(), parent);
  const chat = tracer.startSpan(
    "chat gpt-4o",
    {
      kind: SpanKind.CLIENT,
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.response.finish_reasons": ["stop", "length"],
        "gen_ai.request.stream": false,
        "vigil.test.big": 2 ** 60,
      },
    },
    ctx,
  );
  chat.addEvent("gen_ai.choice", { index: 0 });
  chat.setStatus({ code: SpanStatusCode.ERROR, message: "rate limited" });
  chat.setAttribute("error.type", "429");
  chat.end();
  parent.end();
  await provider.forceFlush();
  const spans: ReadableSpan[] = memory.getFinishedSpans();
  const sdkChat = spans.find((s) => s.name === "chat gpt-4o");
  if (!sdkChat) throw new Error("no chat span");

  const { base, captured } = await receiver(t);
  const url = `${base}/v1/otlp/v1/traces`;
  const proto = await send(new ProtoTraceExporter({ url }), spans, captured);
  const json = await send(new JsonTraceExporter({ url }), spans, captured);
  await provider.shutdown();

  const decoded = {
    protobuf: decodeTracesRequest(proto.body, "protobuf"),
    json: decodeTracesRequest(json.body, "json"),
  };
  t.same(decoded.json, decoded.protobuf, "both encodings decode to the same request");
  for (const [encoding, req] of Object.entries(decoded)) {
    t.equal(req.spanCount, 2, encoding);
    const [rs] = req.resourceSpans;
    t.equal(rs?.resource.attributes["service.instance.id"], "gw-1", encoding);
    t.match(rs?.scopeSpans[0]?.scope, { name: "gen-ai-gateway", version: "0.9.0" }, encoding);
    const all = req.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
    const span = all.find((s) => s.name === "chat gpt-4o");
    const root = all.find((s) => s.name === "gateway request");
    if (!span || !root) throw new Error("spans missing");
    const sc = sdkChat.spanContext();
    t.equal(span.traceId, sc.traceId, `${encoding}: trace id as lowercase hex`);
    t.match(span.traceId, /^[0-9a-f]{32}$/, encoding);
    t.equal(span.spanId, sc.spanId, `${encoding}: span id`);
    t.equal(span.parentSpanId, parent.spanContext().spanId, `${encoding}: parent span id`);
    t.equal(root.parentSpanId, "", `${encoding}: a root span has no parent`);
    t.equal(span.kind, "client", encoding);
    t.equal(root.kind, "server", encoding);
    t.equal(span.startTimeUnixNano, nanos(sdkChat.startTime), `${encoding}: start as recorded`);
    t.equal(span.endTimeUnixNano, nanos(sdkChat.endTime), `${encoding}: end as recorded`);
    t.same(span.status, { code: "error", message: "rate limited" }, encoding);
    t.same(
      { ...span.attributes },
      {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.response.finish_reasons": ["stop", "length"],
        "gen_ai.request.stream": false,
        "vigil.test.big": 2n ** 60n,
        "error.type": "429",
      },
      `${encoding}: attributes of every type, an int beyond 2^53 as a bigint`,
    );
    t.equal(span.events.length, 1, encoding);
    t.match(span.events[0], { name: "gen_ai.choice" }, encoding);
    t.equal(span.events[0]?.attributes.index, 0, encoding);
    t.equal(
      span.events[0]?.timeUnixNano,
      nanos(sdkChat.events[0]?.time ?? [0, 0]),
      `${encoding}: event time`,
    );
  }
});

// ---- OTLP/JSON the SDK does not send -----------------------------------------------------------

const json = (v: unknown) => Buffer.from(JSON.stringify(v));

t.test(
  "OTLP/JSON: int64 as strings or numbers, enums as numbers or names, unknown fields ignored",
  async (t) => {
    const req = decodeMetricsRequest(
      json({
        resourceMetrics: [
          {
            resource: {
              attributes: [
                { key: "service.instance.id", value: { stringValue: "gw-2" } },
                { key: "k", value: { kvlistValue: { values: [{ key: "a", value: { intValue: "7" } }] } } },
                { key: "b", value: { bytesValue: Buffer.from([0, 1, 255]).toString("base64") } },
                { key: "empty", value: {} },
                { key: "novalue" },
                {
                  key: "nested",
                  value: { arrayValue: { values: [{ arrayValue: { values: [{ boolValue: true }] } }] } },
                },
              ],
              somethingNew: { x: 1 },
            },
            scopeMetrics: [
              {
                metrics: [
                  {
                    name: "m.sum",
                    sum: {
                      aggregationTemporality: 1,
                      isMonotonic: true,
                      dataPoints: [
                        {
                          startTimeUnixNano: "1700000000000000000",
                          timeUnixNano: 1700000010000000000,
                          asInt: "0",
                          exemplars: [
                            {
                              traceId: "5b8efff798038103d269b633813fc60c",
                              spanId: "eee19b7ec3c1b174",
                              asInt: 1,
                            },
                          ],
                        },
                        { timeUnixNano: "1700000010000000000", asDouble: "NaN" },
                        { timeUnixNano: "1700000010000000000", asInt: "-9223372036854775808" },
                        { timeUnixNano: "1700000010000000000", flags: 1 },
                      ],
                    },
                  },
                  {
                    name: "m.hist",
                    histogram: {
                      aggregationTemporality: "AGGREGATION_TEMPORALITY_CUMULATIVE",
                      dataPoints: [{ count: "4", bucketCounts: ["1", 3], explicitBounds: [10] }],
                    },
                  },
                  { name: "m.future", somethingElse: { dataPoints: [] } },
                ],
              },
            ],
          },
        ],
      }),
      "json",
    );
    const attrs = req.resourceMetrics[0]?.resource.attributes ?? {};
    t.equal(attrs["service.instance.id"], "gw-2");
    t.same({ ...(attrs.k as object) }, { a: 7 }, "a kvlist is a nested record");
    t.same(attrs.b, new Uint8Array([0, 1, 255]), "bytes are base64 in OTLP/JSON");
    t.equal(attrs.empty, null, "an empty AnyValue is null");
    t.equal(attrs.novalue, null, "a key without a value is null");
    t.same(attrs.nested, [[true]]);

    const sum = metric(req, "m.sum");
    t.match(sum, { type: "sum", aggregationTemporality: "delta", isMonotonic: true });
    const [zero, nan, min, unset] = sum.dataPoints as NumberDataPoint[];
    t.match(zero, {
      value: 0,
      startTimeUnixNano: 1_700_000_000_000_000_000n,
      timeUnixNano: 1_700_000_010_000_000_000n,
    });
    t.ok(Number.isNaN(nan?.value), "NaN is a double ProtoJSON allows (the mapping rejects it)");
    t.match(min, { unsafeInteger: true }, "int64 minimum flagged");
    t.match(unset, { value: null, flags: 1, startTimeUnixNano: 0n }, "no value: null; an unset time is 0n");

    t.match(metric(req, "m.hist"), {
      type: "histogram",
      aggregationTemporality: "cumulative",
      dataPoints: [{ count: 4, sum: null, min: null, max: null }],
    });
    t.notOk(
      "bucketCounts" in ((metric(req, "m.hist").dataPoints[0] as object | undefined) ?? {}),
      "buckets in JSON are skipped like any field Vigil does not read",
    );
    t.match(metric(req, "m.future"), { type: "empty", dataPoints: [] }, "a metric with an unknown data kind");
    t.equal(req.dataPointCount, 5);
  },
);

t.test("OTLP/JSON spans: hex ids, snake_case names, unknown kinds", async (t) => {
  const req = decodeTracesRequest(
    json({
      resource_spans: [
        {
          scope_spans: [
            {
              spans: [
                {
                  trace_id: "5B8EFFF798038103D269B633813FC60C",
                  span_id: "eee19b7ec3c1b174",
                  name: "x",
                  kind: 9,
                  status: { code: 2 },
                  links: [{ traceId: "00", spanId: "01" }],
                },
              ],
            },
          ],
        },
      ],
    }),
    "json",
  );
  t.match(req.resourceSpans[0]?.scopeSpans[0]?.spans[0], {
    traceId: "5b8efff798038103d269b633813fc60c",
    spanId: "eee19b7ec3c1b174",
    parentSpanId: "",
    kind: "unspecified",
    status: { code: "error", message: "" },
  });
});

// ---- bad bodies --------------------------------------------------------------------------------

/** Deterministic bytes (a linear congruential generator), so the test is the same every run. */
function pseudoRandomBytes(n: number, seed: number) {
  const out = Buffer.alloc(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

async function realMetricsBody(t: Test): Promise<Buffer> {
  const [first] = await recordAndCollect(AggregationTemporality.DELTA);
  if (!first) throw new Error("nothing collected");
  return (await exportMetrics(t, first)).proto;
}

t.test("fields Vigil does not read (buckets, bounds, exemplars) are skipped on the wire", async (t) => {
  // encoded with every field, as a sender (the SDK, a Collector) sends them
  const type = completeOtlpTypes().metricsRequest;
  const exemplar = {
    asInt: 7,
    timeUnixNano: 1_700_000_010_000_000_000,
    spanId: Buffer.alloc(8, 1),
    traceId: Buffer.alloc(16, 2),
  };
  const body = type
    .encode(
      type.fromObject({
        resourceMetrics: [
          {
            scopeMetrics: [
              {
                metrics: [
                  {
                    name: "h",
                    histogram: {
                      aggregationTemporality: 2,
                      dataPoints: [
                        {
                          timeUnixNano: 1_700_000_010_000_000_000,
                          count: 5,
                          sum: 12.5,
                          min: 1,
                          max: 9,
                          bucketCounts: [1, 4, 0],
                          explicitBounds: [1, 10],
                          exemplars: [exemplar],
                        },
                      ],
                    },
                  },
                  {
                    name: "c",
                    sum: { aggregationTemporality: 1, dataPoints: [{ asInt: 3, exemplars: [exemplar] }] },
                  },
                ],
              },
            ],
          },
        ],
      }),
    )
    .finish();
  const req = decodeMetricsRequest(body, "protobuf");
  t.match(metric(req, "h"), {
    type: "histogram",
    aggregationTemporality: "cumulative",
    dataPoints: [{ count: 5, sum: 12.5, min: 1, max: 9, timeUnixNano: 1_700_000_010_000_000_000n }],
  });
  t.notOk("bucketCounts" in ((metric(req, "h").dataPoints[0] as object | undefined) ?? {}));
  t.match(
    metric(req, "c"),
    { type: "sum", dataPoints: [{ value: 3 }] },
    "the point after the skipped exemplar",
  );
  t.equal(req.dataPointCount, 2);
});

t.test("a oneof given twice: the last member read wins, as protobuf says", async (t) => {
  // an attribute's AnyValue is a oneof; a sender may write a field twice, or two of its members
  const types = completeOtlpTypes().metricsRequest;
  const anyValue = types.lookupType("opentelemetry.proto.common.v1.AnyValue");
  const field = (w: protobuf.Writer, n: number) => w.uint32((n << 3) | 2);
  /** A request whose one resource attribute `k` has these AnyValue encodings, one after another. */
  const request = (...values: Record<string, unknown>[]) => {
    const kv = field(protobuf.Writer.create(), 1).string("k");
    for (const v of values) field(kv, 2).bytes(anyValue.encode(anyValue.fromObject(v)).finish());
    const resource = field(protobuf.Writer.create(), 1).bytes(kv.finish()).finish();
    const rm = field(protobuf.Writer.create(), 1).bytes(resource).finish();
    return field(protobuf.Writer.create(), 1).bytes(rm).finish();
  };
  const attributeOf = (body: Uint8Array) =>
    decodeMetricsRequest(body, "protobuf").resourceMetrics[0]?.resource.attributes.k;
  t.equal(attributeOf(request({ stringValue: "first" }, { intValue: 5 })), 5, "string, then int");
  t.equal(attributeOf(request({ intValue: 5 }, { stringValue: "second" })), "second", "int, then string");
  t.equal(attributeOf(request({ boolValue: true }, { doubleValue: 2.5 }, { stringValue: "third" })), "third");
  // a member set again after another: the other one must be gone (the setter deletes it)
  t.equal(
    attributeOf(request({ stringValue: "a" }, { intValue: 5 }, { stringValue: "b" })),
    "b",
    "string, int, string",
  );
  // both members in one AnyValue message: string (field 1), then int (field 3)
  const both = protobuf.Writer.create();
  field(both, 1).string("x");
  both.uint32(3 << 3).int64(7);
  const kv = field(protobuf.Writer.create(), 1).string("k");
  field(kv, 2).bytes(both.finish());
  const resource = field(protobuf.Writer.create(), 1).bytes(kv.finish()).finish();
  const rm = field(protobuf.Writer.create(), 1).bytes(resource).finish();
  t.equal(attributeOf(field(protobuf.Writer.create(), 1).bytes(rm).finish()), 7, "within one message");
  t.equal(attributeOf(request({ stringValue: "only" })), "only", "one member");
});

t.test("attribute keys named like Object's own properties stay attributes", async (t) => {
  // attributes are plain objects (values.ts): `__proto__` must never become their prototype
  const now = Date.now();
  // JSON.parse makes `__proto__` an own key, as a sender's attribute list does
  const attributes = (proto: string) =>
    JSON.parse(
      `{"gen_ai.request.model":"gpt-4o","__proto__":${JSON.stringify(proto)},"constructor":"c","toString":"s"}`,
    ) as Record<string, string>;
  const body = (proto: string) =>
    metricsRequest([
      {
        resource: { "service.instance.id": "gw-proto" },
        metrics: [
          sumMetric("gen_ai.client.inference.usage.input_tokens", "cumulative", [
            { start: now - 60_000, time: now - 1000, asInt: 5, attributes: attributes(proto) },
          ]),
        ],
      },
    ]);
  for (const encoding of ["protobuf", "json"] as const) {
    const req = decodeMetricsRequest(encodeRequest("metrics", body("a"), encoding), encoding);
    const a = req.resourceMetrics[0]?.scopeMetrics[0]?.metrics[0]?.dataPoints[0]?.attributes ?? {};
    t.equal(Object.getPrototypeOf(a), Object.prototype, `${encoding}: the prototype is Object's`);
    t.ok(Object.hasOwn(a, "__proto__"), `${encoding}: __proto__ is an own attribute`);
    t.equal(a.__proto__ as unknown, "a", `${encoding}: with its value`);
    t.same(Object.keys(a).sort(), ["__proto__", "constructor", "gen_ai.request.model", "toString"]);
    t.equal(({} as Record<string, unknown>).a, undefined, "nothing leaked onto Object.prototype");
    // the attribute is part of the series' identity: another value is another series
    const key = (proto: string) => {
      const r = decodeMetricsRequest(encodeRequest("metrics", body(proto), encoding), encoding);
      return mapMetrics(r, now).points[0]?.seriesKey;
    };
    t.not(key("a"), key("b"), `${encoding}: __proto__'s value names the series`);
    t.equal(key("a"), key("a"));
  }
});

t.test("malformed protobuf: OtlpDecodeError with protobufjs' reason", async (t) => {
  const body = await realMetricsBody(t);
  const cases: [string, Buffer, RegExp][] = [
    ["random bytes", pseudoRandomBytes(512, 42), /^malformed protobuf ExportMetricsServiceRequest: /],
    ["text", Buffer.from("not a protobuf, just text"), /invalid wire type 6 at offset 1/],
    ["truncated by one byte", body.subarray(0, body.length - 1), /index out of range/],
    ["cut in half", body.subarray(0, Math.floor(body.length / 2)), /malformed protobuf/],
  ];
  for (const [label, bytes, message] of cases) {
    t.throws(() => decodeMetricsRequest(bytes, "protobuf"), OtlpDecodeError, label);
    t.throws(
      () => decodeMetricsRequest(bytes, "protobuf"),
      { message, code: "invalid_input", name: "OtlpDecodeError" },
      label,
    );
  }
  t.throws(() => decodeTracesRequest(Buffer.from("not a protobuf"), "protobuf"), {
    message: /^malformed protobuf ExportTraceServiceRequest: /,
  });
  t.same(
    decodeMetricsRequest(Buffer.alloc(0), "protobuf"),
    { resourceMetrics: [], dataPointCount: 0 },
    "an empty body is an empty request",
  );
});

t.test("JSON that is not an OTLP request: OtlpDecodeError naming what is wrong", async (t) => {
  const bad: [string, string, RegExp][] = [
    ["not JSON", "{", /^the body is not valid JSON: /],
    ["an array", "[]", /must be a JSON object, got an array/],
    ["a string", '"resourceMetrics"', /must be a JSON object, got a string/],
    ["null", "null", /got null/],
    ["a number", "42", /got a number/],
    [
      "resourceMetrics not an array",
      '{"resourceMetrics":{}}',
      /ExportMetricsServiceRequest\.resourceMetrics: expected array/,
    ],
    ["a null element", '{"resourceMetrics":[null]}', /resourceMetrics: null element/],
    ["a resource that is a number", '{"resourceMetrics":[{"resource":5}]}', /Resource: expected object: 5/],
    [
      "an int64 that is not a number",
      '{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m","sum":{"dataPoints":[{"asInt":"12x"}]}}]}]}]}',
      /NumberDataPoint\.asInt: invalid integer: "12x"/,
    ],
    [
      "a fractional int64",
      '{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m","gauge":{"dataPoints":[{"timeUnixNano":1.5}]}}]}]}]}',
      /NumberDataPoint\.timeUnixNano: not an integer: 1\.5/,
    ],
    [
      "a name that is a number",
      '{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":5}]}]}]}',
      /Metric\.name: expected string/,
    ],
    [
      "two values of a oneof",
      '{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m","gauge":{"dataPoints":[{"asInt":1,"asDouble":2}]}}]}]}]}',
      /multiple values for oneof/,
    ],
  ];
  for (const [label, body, message] of bad) {
    t.throws(() => decodeMetricsRequest(Buffer.from(body), "json"), OtlpDecodeError, label);
    t.throws(() => decodeMetricsRequest(Buffer.from(body), "json"), { message }, label);
  }
  t.throws(() => decodeTracesRequest(Buffer.from('{"resourceSpans":5}'), "json"), {
    message: /ExportTraceServiceRequest\.resourceSpans: expected array/,
  });
  t.throws(
    () =>
      decodeTracesRequest(
        json({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: "W47/95gDgQPSabYzgT/GDA==" }] }] }] }),
        "json",
      ),
    { message: /^resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.traceId: an OTLP\/JSON id must be hex/ },
    "a base64 id is refused, not misread",
  );

  let deep: unknown = { stringValue: "bottom" };
  for (let i = 0; i < 40; i++) deep = { arrayValue: { values: [deep] } };
  t.throws(
    () =>
      decodeMetricsRequest(
        json({ resourceMetrics: [{ resource: { attributes: [{ key: "deep", value: deep }] } }] }),
        "json",
      ),
    { message: /nested more than 32 levels/ },
  );

  // OTLP receivers ignore unknown fields and answer an empty request with success, so an object
  // that names none of the request's fields is an empty request, not an error.
  t.same(decodeMetricsRequest(Buffer.from('{"foo":1}'), "json"), { resourceMetrics: [], dataPointCount: 0 });
  t.same(decodeTracesRequest(Buffer.from("{}"), "json"), { resourceSpans: [], spanCount: 0 });
});

// ---- response bodies ---------------------------------------------------------------------------

t.test("response bodies: success leaves partial_success unset; partial success and Status", async (t) => {
  const types = otlpTypes();
  t.equal(encodeMetricsResponse({ rejected: 0 }, "protobuf").length, 0, "full success: 0 bytes");
  t.equal(encodeMetricsResponse({ rejected: 0, message: "" }, "json").toString(), "{}");
  t.equal(encodeTracesResponse({ rejected: 0 }, "json").toString(), "{}");

  const partial = encodeMetricsResponse({ rejected: 3, message: "3 points of unknown metrics" }, "protobuf");
  t.match(types.metricsResponse.toObject(types.metricsResponse.decode(partial), { longs: Number }), {
    partialSuccess: { rejectedDataPoints: 3, errorMessage: "3 points of unknown metrics" },
  });
  t.same(JSON.parse(encodeMetricsResponse({ rejected: 3, message: "m" }, "json").toString()), {
    partialSuccess: { rejectedDataPoints: "3", errorMessage: "m" },
  });
  t.same(
    JSON.parse(encodeTracesResponse({ rejected: 0, message: "a warning" }, "json").toString()),
    {
      partialSuccess: { errorMessage: "a warning" },
    },
    "a warning: partial_success set with nothing rejected",
  );
  const spans = encodeTracesResponse({ rejected: 2, message: "x" }, "protobuf");
  t.match(types.tracesResponse.toObject(types.tracesResponse.decode(spans), { longs: Number }), {
    partialSuccess: { rejectedSpans: 2, errorMessage: "x" },
  });
  t.throws(() => encodeMetricsResponse({ rejected: -1 }, "json"), RangeError);

  const status = encodeStatus(RpcCode.INVALID_ARGUMENT, "malformed protobuf", "protobuf");
  t.match(types.status.toObject(types.status.decode(status)), { code: 3, message: "malformed protobuf" });
  t.same(JSON.parse(encodeStatus(RpcCode.UNAVAILABLE, "busy", "json").toString()), {
    code: 14,
    message: "busy",
  });
});
