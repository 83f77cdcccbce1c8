import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { MeterProvider, MetricReader, type ResourceMetrics } from "@opentelemetry/sdk-metrics";
import t from "tap";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/*
 * Two Vigil nodes on the same PostgreSQL (as `--workers N` or several replicas behind a load
 * balancer): a gateway's consecutive cumulative exports land on either node, and a Collector may
 * send the same export to both at once. Each interval is counted exactly once: the series' last
 * point lives in PostgreSQL, locked while a node turns a point into an increment.
 */

class ManualReader extends MetricReader {
  protected override async onShutdown() {}
  protected override async onForceFlush() {}
}

t.test("cumulative exports spread over two nodes are counted once", async (t) => {
  if (!(await requireBackend(t, "postgres"))) return;
  const a = await testApp(t, { relational: "postgres", series: "postgres" });
  const b = await testApp(t, { sameStoresAs: a });
  const w = await seedTenants(a);
  const urls = [
    await a.app.listen({ port: 0, host: "127.0.0.1" }),
    await b.app.listen({ port: 0, host: "127.0.0.1" }),
  ];
  const exporters = urls.map(
    (u) =>
      new OTLPMetricExporter({
        url: `${u}/v1/otlp/v1/metrics`,
        headers: { Authorization: `Bearer ${w.keys.ingest}` },
      }),
  );
  const send = (i: number, rm: ResourceMetrics) =>
    new Promise<number>((resolve) => exporters[i]?.export(rm, (r) => resolve(r.code)));

  const reader = new ManualReader();
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ "service.instance.id": "gw-1" }),
    readers: [reader],
  });
  const tokens = provider.getMeter("t").createHistogram("gen_ai.client.token.usage", { unit: "{token}" });
  let input = 0;
  let output = 0;
  for (let round = 0; round < 12; round++) {
    for (const model of ["gpt-4o", "claude-3-5-sonnet", "gemini-1.5-pro"]) {
      const n = 100 + round * 7 + model.length;
      tokens.record(n, { "gen_ai.request.model": model, "gen_ai.token.type": "input" });
      tokens.record(n >> 2, { "gen_ai.request.model": model, "gen_ai.token.type": "output" });
      input += n;
      output += n >> 2;
    }
    const { resourceMetrics } = await reader.collect();
    if (round % 3 === 2) {
      // the same export to both nodes at once (a retry racing the original)
      const codes = await Promise.all([send(0, resourceMetrics), send(1, resourceMetrics)]);
      t.same(codes, [0, 0], `round ${round}: both copies taken`);
    } else t.equal(await send(round % 2, resourceMetrics), 0, `round ${round}: node ${round % 2}`);
    await new Promise((r) => setTimeout(r, 3));
  }
  const u = await call(a.app, w.keys.bobOrgB, "PUT", `/v1/usage?connection_id=${w.conns.OB}`);
  const g = (u.json() as { gateway: { heartbeats: number; input_tokens: number; output_tokens: number } })
    .gateway;
  t.same(
    { heartbeats: g.heartbeats, input: g.input_tokens, output: g.output_tokens },
    { heartbeats: 12, input, output },
    "every interval once, whichever node took it",
  );
  for (const e of exporters) await e.shutdown();
  await provider.shutdown();
});
