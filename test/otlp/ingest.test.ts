import { SpanStatusCode } from "@opentelemetry/api";
import { OTLPMetricExporter as JsonMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPMetricExporter as ProtoMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { OTLPTraceExporter as ProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AggregationTemporality,
  MeterProvider,
  MetricReader,
  type ResourceMetrics,
} from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import t, { type Test } from "tap";
import { READ_PERMISSIONS } from "../../src/core/actor.js";
import { gatewayUsage } from "../../src/usage/gateway-usage.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import type { GatewayUsage } from "../helpers/otlp-gateway.js";
import { call, seedTenants } from "../helpers/tenants.js";

/*
 * A gateway fleet's OpenTelemetry, sent by the OpenTelemetry JS SDK's own OTLP/HTTP exporters
 * (protobuf and JSON, cumulative and delta) to a running Vigil, gives the same usage as the same
 * traffic sent as heartbeats: tokens, requests, cost and per-model rows in PUT /v1/usage, one
 * heartbeat per export. An export sent again (an exporter's retry) is stored once. The gateway
 * counts as alive. On PGlite, PostgreSQL, and QuestDB as the series store.
 */

/** A reader that collects when asked (so the test decides each export interval). */
class ManualReader extends MetricReader {
  protected override async onShutdown() {}
  protected override async onForceFlush() {}
}

interface Call {
  model: string;
  response: string;
  provider: string;
  input: number;
  output: number;
  seconds: number;
  failed?: boolean;
}

/** Three export intervals of a gateway's traffic: several models, a failed call, an idle model. */
const ROUNDS: Call[][] = [
  [
    {
      model: "gpt-4o",
      response: "gpt-4o-2024-08-06",
      provider: "openai",
      input: 1200,
      output: 340,
      seconds: 1.25,
    },
    {
      model: "gpt-4o",
      response: "gpt-4o-2024-08-06",
      provider: "openai",
      input: 800,
      output: 120,
      seconds: 0.75,
    },
    {
      model: "claude-3-5-sonnet",
      response: "claude-3-5-sonnet-20241022",
      provider: "anthropic",
      input: 5000,
      output: 900,
      seconds: 3.5,
    },
    {
      model: "mystery-model",
      response: "mystery-model",
      provider: "acme",
      input: 10,
      output: 5,
      seconds: 0.1,
    },
  ],
  [
    {
      model: "gpt-4o",
      response: "gpt-4o-2024-08-06",
      provider: "openai",
      input: 300,
      output: 30,
      seconds: 0.5,
    },
    {
      model: "claude-3-5-sonnet",
      response: "claude-3-5-sonnet-20241022",
      provider: "anthropic",
      input: 0,
      output: 0,
      seconds: 0.2,
      failed: true,
    },
  ],
  [
    {
      model: "claude-3-5-sonnet",
      response: "claude-3-5-sonnet-20241022",
      provider: "anthropic",
      input: 4200,
      output: 610,
      seconds: 2.0,
    },
  ],
];

interface Usage {
  gateway: GatewayUsage | null;
}

async function usageOf(ta: TestApp, key: string, connectionId: string): Promise<Usage> {
  // QuestDB applies its WAL after the commit the write waited for: read once it has
  await ta.ctx.stores.series.waitVisible();
  const res = await call(ta.app, key, "PUT", `/v1/usage?connection_id=${connectionId}`);
  if (res.statusCode !== 200) throw new Error(`usage: ${res.statusCode} ${res.body}`);
  return res.json() as Usage;
}

/** The same traffic as heartbeats: one per interval, its period totals and byModel. */
async function sendHeartbeats(ta: TestApp, key: string, rounds: Call[][]) {
  let start = Date.now() - 60_000;
  for (const calls of rounds) {
    const end = start + 10_000;
    const byModel = new Map<string, { model: string; inputTokens: number; outputTokens: number }>();
    for (const c of calls) {
      const m = byModel.get(c.response) ?? { model: c.response, inputTokens: 0, outputTokens: 0 };
      m.inputTokens += c.input;
      m.outputTokens += c.output;
      byModel.set(c.response, m);
    }
    const body = {
      type: "heartbeat",
      gateway: {
        status: "healthy",
        latencyMs: (calls.reduce((s, c) => s + c.seconds, 0) / calls.length) * 1000,
        version: "1.0.0",
      },
      tokens: {
        period: {
          inputTokens: calls.reduce((s, c) => s + c.input, 0),
          outputTokens: calls.reduce((s, c) => s + c.output, 0),
          requestCount: calls.length,
          startedAt: new Date(start).toISOString(),
          endedAt: new Date(end).toISOString(),
        },
        byModel: [...byModel.values()],
      },
    };
    const res = await call(ta.app, key, "POST", "/v1/gateway/ingest", body);
    if (res.statusCode !== 201) throw new Error(`heartbeat: ${res.statusCode} ${res.body}`);
    start = end;
  }
}

type Exporter = ProtoMetricExporter | JsonMetricExporter;

/** Exports one collection; resolves with the exporter's result code (0: success). */
const exportOnce = (exporter: Exporter, rm: ResourceMetrics) =>
  new Promise<number>((resolve) => exporter.export(rm, (r) => resolve(r.code)));

/** The rounds recorded with the SDK's GenAI instruments and exported, one collection per round. */
async function sendMetrics(
  t: Test,
  exporter: Exporter,
  temporality: AggregationTemporality,
  instance: string,
  opts: { resendEach?: boolean } = {},
) {
  const reader = new ManualReader({ aggregationTemporalitySelector: () => temporality });
  const provider = new MeterProvider({
    resource: resourceFromAttributes({
      "service.name": "llm-gateway",
      "service.instance.id": instance,
      "service.version": "1.0.0",
    }),
    readers: [reader],
  });
  const meter = provider.getMeter("genai-test");
  const tokens = meter.createHistogram("gen_ai.client.token.usage", { unit: "{token}" });
  const duration = meter.createHistogram("gen_ai.client.operation.duration", { unit: "s" });
  for (const calls of ROUNDS) {
    for (const c of calls) {
      const attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": c.model,
        "gen_ai.response.model": c.response,
        "gen_ai.provider.name": c.provider,
      };
      if (!c.failed) {
        tokens.record(c.input, { ...attrs, "gen_ai.token.type": "input" });
        tokens.record(c.output, { ...attrs, "gen_ai.token.type": "output" });
      }
      duration.record(c.seconds, c.failed ? { ...attrs, "error.type": "timeout" } : attrs);
    }
    const { resourceMetrics, errors } = await reader.collect();
    t.same(errors, [], "the SDK collected without errors");
    t.equal(await exportOnce(exporter, resourceMetrics), 0, "the exporter reports success");
    if (opts.resendEach) t.equal(await exportOnce(exporter, resourceMetrics), 0, "the resend succeeds too");
    // one interval later, as a periodic reader exports
    await new Promise((r) => setTimeout(r, 5));
  }
  await provider.shutdown();
}

/** The usage the two doors must agree on (a failed call has no tokens but is a request). */
function comparable(u: Usage) {
  const g = u.gateway;
  if (!g) return null;
  return {
    input_tokens: g.input_tokens,
    output_tokens: g.output_tokens,
    requests: g.requests,
    cost_cents: Math.round(g.cost_cents * 1e6) / 1e6,
    by_model: [...g.by_model]
      .map((m) => ({ ...m, cost_cents: Math.round(m.cost_cents * 1e6) / 1e6 }))
      .filter((m) => m.input_tokens + m.output_tokens > 0)
      .sort((a, b) => a.model.localeCompare(b.model)),
  };
}

const backends: ["pglite" | "postgres", BackendName][] = [
  ["pglite", "pglite"],
  ["postgres", "postgres"],
  ["pglite", "questdb"],
];

for (const [relational, series] of backends) {
  t.test(
    `OTLP from the JS SDK equals the same traffic as heartbeats (${relational}, ${series})`,
    async (t) => {
      if (!(await requireBackend(t, relational)) || !(await requireBackend(t, series))) return;
      const ta = await testApp(t, { relational, series });
      const w = await seedTenants(ta);
      const owner = w.keys.bobOrgB;
      const gateway = async (name: string) => {
        const res = await call(ta.app, owner, "POST", "/v1/connections", {
          service_type: "gateway",
          service_name: name,
        });
        t.equal(res.statusCode, 201, res.body);
        const b = res.json() as { connection: { id: string }; ingest_api_key: string };
        return { id: b.connection.id, key: b.ingest_api_key };
      };
      const base = await ta.app.listen({ port: 0, host: "127.0.0.1" });
      const url = `${base}/v1/otlp/v1/metrics`;

      const beats = await gateway("heartbeats");
      await sendHeartbeats(ta, beats.key, ROUNDS);
      const expected = comparable(await usageOf(ta, owner, beats.id));
      t.ok(expected && expected.input_tokens === 11_510, "the heartbeat side holds the traffic");
      t.ok(expected && expected.cost_cents > 0, "and it is priced");

      const cases = [
        {
          name: "protobuf, cumulative (the SDK's default)",
          exporter: "proto",
          temporality: AggregationTemporality.CUMULATIVE,
        },
        { name: "protobuf, delta", exporter: "proto", temporality: AggregationTemporality.DELTA },
        { name: "JSON, cumulative", exporter: "json", temporality: AggregationTemporality.CUMULATIVE },
        { name: "JSON, delta, gzip", exporter: "json-gzip", temporality: AggregationTemporality.DELTA },
      ] as const;
      for (const c of cases) {
        await t.test(c.name, async (t) => {
          const gw = await gateway(c.name);
          const headers = { Authorization: `Bearer ${gw.key}` };
          const exporter =
            c.exporter === "proto"
              ? new ProtoMetricExporter({ url, headers })
              : new JsonMetricExporter({
                  url,
                  headers,
                  ...(c.exporter === "json-gzip" ? { compression: "gzip" as never } : {}),
                });
          await sendMetrics(t, exporter, c.temporality, `gw-${c.exporter}`, { resendEach: true });
          await exporter.shutdown();
          const got = await usageOf(ta, owner, gw.id);
          t.same(comparable(got), expected, "tokens, requests, cost and models equal the heartbeats'");
          t.equal(
            got.gateway?.heartbeats,
            ROUNDS.length,
            "one heartbeat per export interval, each resend stored once",
          );
          // what an assistant asks over MCP (get_gateway_usage) reads the same rows
          const bob = {
            type: "user",
            userId: w.users.bob.id,
            via: "oauth",
            permissions: new Set(READ_PERMISSIONS),
          } as const;
          const mcp = async (id: string) => {
            const r = await gatewayUsage(ta.ctx, bob, { connectionId: id, period: "day" });
            return {
              spend: r.totalSpendCents,
              input: r.inputTokens,
              output: r.outputTokens,
              requests: r.totalRequests,
              heartbeats: r.heartbeats,
            };
          };
          t.same(
            await mcp(gw.id),
            await mcp(beats.id),
            "get_gateway_usage gives the same as for the heartbeats",
          );
          const conn = await call(ta.app, owner, "GET", `/v1/connections/${gw.id}`);
          t.equal(
            (conn.json() as { status: string }).status,
            "active",
            "the exports count as the gateway's liveness",
          );
        });
      }

      await t.test(
        "a restarted exporter (new start time, counters from 0) counts from its new start",
        async (t) => {
          const gw = await gateway("restarted");
          const headers = { Authorization: `Bearer ${gw.key}` };
          const exporter = new ProtoMetricExporter({ url, headers });
          await sendMetrics(t, exporter, AggregationTemporality.CUMULATIVE, "gw-restart");
          // the process restarts: a new MeterProvider, the same instance and series
          await sendMetrics(t, exporter, AggregationTemporality.CUMULATIVE, "gw-restart");
          await exporter.shutdown();
          const got = comparable(await usageOf(ta, owner, gw.id));
          t.equal(got?.input_tokens, 2 * (expected?.input_tokens ?? 0), "both lives counted, neither twice");
          t.equal(got?.requests, 2 * (expected?.requests ?? 0));
        },
      );

      await t.test("GenAI spans from the SDK's trace exporter", async (t) => {
        const gw = await gateway("spans");
        const exporter = new ProtoTraceExporter({
          url: `${base}/v1/otlp/v1/traces`,
          headers: { Authorization: `Bearer ${gw.key}` },
        });
        const provider = new BasicTracerProvider({
          resource: resourceFromAttributes({ "service.instance.id": "gw-spans", "service.version": "1.0.0" }),
          spanProcessors: [
            new BatchSpanProcessor(exporter, { maxExportBatchSize: 1000, scheduledDelayMillis: 60_000 }),
          ],
        });
        const tracer = provider.getTracer("genai-test");
        const t0 = Date.now() - 5_000;
        let at = t0;
        for (const calls of ROUNDS)
          for (const c of calls) {
            // old attribute names on the failed call, current ones elsewhere: both are read
            const attrs = c.failed
              ? {
                  "gen_ai.system": c.provider,
                  "gen_ai.request.model": c.model,
                  "gen_ai.response.model": c.response,
                  "error.type": "timeout",
                }
              : {
                  "gen_ai.operation.name": "chat",
                  "gen_ai.provider.name": c.provider,
                  "gen_ai.request.model": c.model,
                  "gen_ai.response.model": c.response,
                  "gen_ai.usage.input_tokens": c.input,
                  "gen_ai.usage.output_tokens": c.output,
                };
            const span = tracer.startSpan(`chat ${c.model}`, { attributes: attrs, startTime: at });
            if (c.failed) span.setStatus({ code: SpanStatusCode.ERROR, message: "timeout" });
            span.end(at + c.seconds * 1000);
            at += 100;
          }
        tracer.startSpan("GET /healthz", { startTime: at }).end(at + 1);
        await provider.forceFlush();
        const got = comparable(await usageOf(ta, owner, gw.id));
        t.same(got, expected, "tokens, requests, cost and models equal the heartbeats'");
        await provider.shutdown();
      });
    },
  );
}
