import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import t, { type Test } from "tap";
import { type TestApp, testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { gatewayConnection, gatewayUsageOf } from "../helpers/otlp-gateway.js";
import { call, seedTenants } from "../helpers/tenants.js";

/*
 * A second real OTLP client, written by other people than the JS SDK: the OpenTelemetry Java SDK
 * (1.68, from Maven Central; test/otlp/java-client), configured by nothing but the variables
 * docs/otlp.md tells users to set (OTEL_EXPORTER_OTLP_ENDPOINT with Vigil's /v1/otlp prefix,
 * OTEL_EXPORTER_OTLP_HEADERS with the ingestion key, OTEL_EXPORTER_OTLP_PROTOCOL,
 * OTEL_RESOURCE_ATTRIBUTES), exporting cumulative histograms over the JDK's HTTP client. Its usage
 * equals the same usage sent as heartbeats, on PGlite, PostgreSQL and QuestDB. (The Collector, a Go
 * program, cannot be installed on this machine: docs/otlp.md.)
 */

const run = promisify(execFile);
const IN_CI = process.env.CI === "true";
const CLIENT = path.join(path.dirname(fileURLToPath(import.meta.url)), "java-client");

/** Three export intervals: model, provider, input and output tokens, seconds per call. */
const INTERVALS: [string, string, number, number, number][][] = [
  [
    ["gpt-4o", "openai", 1200, 340, 1.25],
    ["gpt-4o", "openai", 800, 120, 0.5],
    ["claude-sonnet-4-5", "anthropic", 3000, 900, 2.5],
  ],
  [["gpt-4o", "openai", 50, 10, 0.25]],
  [
    ["claude-sonnet-4-5", "anthropic", 700, 65, 1.0],
    ["gpt-4o-mini", "openai", 4200, 610, 2.0],
  ],
];

/** Builds the Java client once (Maven); null, with the test planned empty, when Java or Maven is missing. */
async function buildClient(t: Test): Promise<string | null> {
  try {
    await run("mvn", ["-v"]);
    await run("java", ["-version"]);
  } catch (err) {
    const why = `java or mvn not found (${(err as Error).message.split("\n")[0]})`;
    if (IN_CI) t.fail(`the Java OTLP client is required under CI=true: ${why}`);
    else t.plan(0, why);
    return null;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-otlp-java-"));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.cpSync(CLIENT, dir, { recursive: true });
  await run(
    "mvn",
    [
      "-q",
      "-B",
      "compile",
      "dependency:copy-dependencies",
      "-DoutputDirectory=target/lib",
      "-DincludeScope=runtime",
    ],
    { cwd: dir, timeout: 300_000 },
  );
  return `${path.join(dir, "target", "classes")}${path.delimiter}${path.join(dir, "target", "lib", "*")}`;
}

/** What the comparison looks at: totals, cost and per-model rows (not the heartbeat count). */
async function usageOf(ta: TestApp, key: string, connectionId: string) {
  const g = await gatewayUsageOf(ta, key, connectionId);
  const round = (n: number) => Math.round(n * 1e6) / 1e6;
  return {
    input_tokens: g.input_tokens,
    output_tokens: g.output_tokens,
    requests: g.requests,
    cost_cents: round(g.cost_cents),
    by_model: g.by_model
      .filter((m) => m.input_tokens + m.output_tokens > 0)
      .map((m) => ({ ...m, cost_cents: round(m.cost_cents) }))
      .sort((a, b) => a.model.localeCompare(b.model)),
  };
}

const backends: ["pglite" | "postgres", BackendName][] = [
  ["pglite", "pglite"],
  ["postgres", "postgres"],
  ["pglite", "questdb"],
];

t.test("the OpenTelemetry Java SDK, configured as docs/otlp.md says, equals heartbeats", async (t) => {
  const classpath = await buildClient(t);
  if (!classpath) return;
  for (const [relational, series] of backends)
    await t.test(`${relational}, ${series}`, async (t) => {
      if (!(await requireBackend(t, relational)) || !(await requireBackend(t, series))) return;
      const ta = await testApp(t, { relational, series });
      const w = await seedTenants(ta);
      const owner = w.keys.bobOrgB;
      const gateway = (name: string) => gatewayConnection(ta, owner, name);
      const base = await ta.app.listen({ port: 0, host: "127.0.0.1" });

      // the same usage as heartbeats, one per interval
      const beats = await gateway("heartbeats");
      let start = Date.now() - 60_000;
      for (const calls of INTERVALS) {
        const byModel = new Map<string, { model: string; inputTokens: number; outputTokens: number }>();
        for (const [model, , input, output] of calls) {
          const m = byModel.get(model) ?? { model, inputTokens: 0, outputTokens: 0 };
          m.inputTokens += input;
          m.outputTokens += output;
          byModel.set(model, m);
        }
        const res = await call(ta.app, beats.key, "POST", "/v1/gateway/ingest", {
          type: "heartbeat",
          gateway: { status: "healthy", latencyMs: 1000, version: "1.0.0" },
          tokens: {
            period: {
              inputTokens: calls.reduce((s, c) => s + c[2], 0),
              outputTokens: calls.reduce((s, c) => s + c[3], 0),
              requestCount: calls.length,
              startedAt: new Date(start).toISOString(),
              endedAt: new Date(start + 10_000).toISOString(),
            },
            byModel: [...byModel.values()],
          },
        });
        t.equal(res.statusCode, 201, res.body);
        start += 10_000;
      }
      const expected = await usageOf(ta, owner, beats.id);
      t.equal(expected.input_tokens, 9950, "the heartbeat side holds the traffic");

      const otlp = await gateway("java-sdk");
      const out = await run(
        "java",
        [
          "-cp",
          classpath,
          "GenAiExport",
          ...INTERVALS.map((calls) => calls.map((c) => c.join(":")).join(",")),
        ],
        {
          timeout: 120_000,
          env: {
            PATH: process.env.PATH ?? "",
            HOME: process.env.HOME ?? "",
            OTEL_EXPORTER_OTLP_ENDPOINT: `${base}/v1/otlp`,
            OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer ${otlp.key}`,
            OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
            OTEL_RESOURCE_ATTRIBUTES: "service.name=litellm,service.instance.id=gateway-java-1",
            OTEL_METRICS_EXPORTER: "otlp",
            OTEL_TRACES_EXPORTER: "none",
            OTEL_LOGS_EXPORTER: "none",
          },
        },
      );
      t.match(out.stdout, /exports failed: 0/, "every export was answered with success");

      const got = await usageOf(ta, owner, otlp.id);
      t.same(got, expected, "tokens, requests, cost and per-model rows equal the heartbeats'");
      const conn = await call(ta.app, owner, "GET", `/v1/connections/${otlp.id}`);
      t.equal(
        (conn.json() as { status: string }).status,
        "active",
        "the exports count as the gateway's liveness",
      );
    });
});
