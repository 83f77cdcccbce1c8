import http from "node:http";
import type { AddressInfo } from "node:net";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import t from "tap";
import { otlpTypes } from "../../src/otlp/schema.js";
import { testApp } from "../helpers/app.js";
import { freshSeries, requireBackend, TEST_QUESTDB_URL } from "../helpers/backends.js";
import { cuttableProxy } from "../helpers/proxy.js";
import { call, seedTenants } from "../helpers/tenants.js";

/*
 * The series store goes away while a gateway exports: Vigil answers 503 with a google.rpc.Status
 * (UNAVAILABLE) and Retry-After, the OpenTelemetry JS SDK's exporter waits and sends again, and
 * once the store is back the export is stored exactly once. The cumulative series' state was
 * already advanced by the refused attempt, so this also shows that a retry of the latest point
 * gives the same increment (not 0, not twice).
 */

class ManualReader extends MetricReader {
  protected override async onShutdown() {}
  protected override async onForceFlush() {}
}

t.test("503 with Retry-After while QuestDB is cut; the SDK's retry is stored once", async (t) => {
  if (!(await requireBackend(t, "questdb"))) return;
  const proxy = await cuttableProxy(new URL(TEST_QUESTDB_URL as string), 9000);
  t.teardown(() => proxy.close());
  const series = await freshSeries(t, "questdb", { questdbHttpUrl: `http://127.0.0.1:${proxy.port}` });
  const ta = await testApp(t, { seriesStore: series });
  const w = await seedTenants(ta);
  const base = await ta.app.listen({ port: 0, host: "127.0.0.1" });

  // between the exporter and Vigil: what each attempt was answered
  const answers: { status: number; retryAfter: string | undefined; body: Buffer }[] = [];
  const target = new URL(base);
  const relay = http.createServer((req, res) => {
    const out = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (r) => {
        const chunks: Buffer[] = [];
        r.on("data", (c: Buffer) => chunks.push(c));
        r.on("end", () => {
          const body = Buffer.concat(chunks);
          const retryAfter = r.headers["retry-after"];
          answers.push({ status: r.statusCode ?? 0, retryAfter, body });
          res.writeHead(r.statusCode ?? 502, r.headers);
          res.end(body);
        });
      },
    );
    req.pipe(out);
  });
  await new Promise<void>((r) => relay.listen(0, "127.0.0.1", r));
  t.teardown(() => new Promise<void>((r) => relay.close(() => r())));
  const relayUrl = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;

  const reader = new ManualReader();
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ "service.instance.id": "gw-retry" }),
    readers: [reader],
  });
  const tokens = provider.getMeter("t").createHistogram("gen_ai.client.token.usage", { unit: "{token}" });
  const attrs = { "gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai" };
  const exporter = new OTLPMetricExporter({
    url: `${relayUrl}/v1/otlp/v1/metrics`,
    headers: { Authorization: `Bearer ${w.keys.ingest}` },
  });
  const exportNow = async () => {
    const { resourceMetrics } = await reader.collect();
    return new Promise<number>((resolve) => exporter.export(resourceMetrics, (r) => resolve(r.code)));
  };

  tokens.record(1000, { ...attrs, "gen_ai.token.type": "input" });
  tokens.record(200, { ...attrs, "gen_ai.token.type": "output" });
  t.equal(await exportNow(), 0, "the first export is taken");

  tokens.record(500, { ...attrs, "gen_ai.token.type": "input" });
  tokens.record(50, { ...attrs, "gen_ai.token.type": "output" });
  proxy.cut();
  const pending = exportNow();
  // the store comes back while the exporter waits out Retry-After
  await new Promise((r) => setTimeout(r, 1500));
  proxy.restore();
  t.equal(await pending, 0, "the exporter's retry succeeds once the store is back");

  const refused = answers.filter((a) => a.status === 503);
  t.ok(refused.length >= 1, `${refused.length} attempt(s) answered 503 while QuestDB was cut`);
  for (const a of refused) {
    t.ok(Number(a.retryAfter) >= 1 && Number(a.retryAfter) <= 5, `Retry-After ${a.retryAfter} s`);
    const status = otlpTypes().status.toObject(otlpTypes().status.decode(a.body)) as {
      code: number;
      message: string;
    };
    t.equal(status.code, 14, "a google.rpc.Status, code UNAVAILABLE");
    t.match(status.message, /nothing was stored/, status.message);
  }
  t.equal(answers.at(-1)?.status, 200, "the last attempt was taken");

  await ta.ctx.stores.series.waitVisible();
  const u = await call(ta.app, w.keys.bobOrgB, "PUT", `/v1/usage?connection_id=${w.conns.OB}`);
  const g = (u.json() as { gateway: { heartbeats: number; input_tokens: number; output_tokens: number } })
    .gateway;
  t.same(
    { heartbeats: g.heartbeats, input: g.input_tokens, output: g.output_tokens },
    { heartbeats: 2, input: 1500, output: 250 },
    "both exports stored, the retried one once, with its whole increment",
  );

  // A longer outage: the exporter gives up on two exports (its timeout is shorter than the
  // Retry-After). Their intervals are not lost: the states they moved went back when their rows
  // could not be stored, so the first export after the outage counts everything since the last
  // stored one (a cumulative counter still holds it).
  const impatient = new OTLPMetricExporter({
    url: `${relayUrl}/v1/otlp/v1/metrics`,
    headers: { Authorization: `Bearer ${w.keys.ingest}` },
    timeoutMillis: 800,
  });
  proxy.cut();
  for (const n of [300, 200]) {
    tokens.record(n, { ...attrs, "gen_ai.token.type": "input" });
    const { resourceMetrics } = await reader.collect();
    const code = await new Promise<number>((resolve) =>
      impatient.export(resourceMetrics, (r) => resolve(r.code)),
    );
    t.not(code, 0, `the export of ${n} more tokens is given up while QuestDB is cut`);
    // Vigil's own attempt at the write goes on after the exporter gave up (about 1 s): until it failed
    await new Promise((r) => setTimeout(r, 1500));
  }
  proxy.restore();
  tokens.record(100, { ...attrs, "gen_ai.token.type": "input" });
  t.equal(await exportNow(), 0, "the first export after the outage is taken");
  await ta.ctx.stores.series.waitVisible();
  const after = await call(ta.app, w.keys.bobOrgB, "PUT", `/v1/usage?connection_id=${w.conns.OB}`);
  const g2 = (after.json() as { gateway: { heartbeats: number; input_tokens: number } }).gateway;
  t.same(
    { heartbeats: g2.heartbeats, input: g2.input_tokens },
    { heartbeats: 3, input: 1500 + 300 + 200 + 100 },
    "every token of the outage counted, once",
  );
  await impatient.shutdown();
  await exporter.shutdown();
  await provider.shutdown();
});
