import t from "tap";
import { testApp } from "../helpers/app.js";
import {
  decodeExportResponse,
  histogramMetric,
  type Json,
  metricsRequest,
  sumMetric,
} from "../helpers/otlp-bodies.js";
import { gatewayConnection, gatewayUsageOf, postExport } from "../helpers/otlp-gateway.js";
import { seedTenants } from "../helpers/tenants.js";

/*
 * An instrumentation migrating between generations of the GenAI conventions may emit both (the
 * semantic-conventions "dual emission" of a migration): `gen_ai.client.token.usage` and
 * `gen_ai.client.inference.usage.*_tokens` for the same tokens, `gen_ai.client.operation.duration`
 * and `gen_ai.client.inference.duration` for the same operations. Each is counted once.
 */

t.test("both generations of GenAI metric names for the same usage count once", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const owner = w.keys.bobOrgB;
  const gw = await gatewayConnection(ta, owner, "dual");
  const time = Date.now() - 60_000;
  const start = time - 10_000;
  const model = (name: string, type?: string) => ({
    "gen_ai.request.model": name,
    "gen_ai.operation.name": "chat",
    ...(type ? { "gen_ai.token.type": type } : {}),
  });
  const body: Json = metricsRequest([
    {
      resource: { "service.instance.id": "gw-dual" },
      metrics: [
        // gpt-4o: both generations (3 operations, 1,200 input and 300 output tokens)
        histogramMetric("gen_ai.client.token.usage", "delta", [
          { start, time, count: 3, sum: 1200, attributes: model("gpt-4o", "input") },
          { start, time, count: 3, sum: 300, attributes: model("gpt-4o", "output") },
          // claude: the older names only (2 operations, 500 + 80 tokens)
          { start, time, count: 2, sum: 500, attributes: model("claude-sonnet-4-5", "input") },
          { start, time, count: 2, sum: 80, attributes: model("claude-sonnet-4-5", "output") },
        ]),
        sumMetric("gen_ai.client.inference.usage.input_tokens", "delta", [
          { start, time, asInt: 1200, attributes: model("gpt-4o") },
        ]),
        sumMetric("gen_ai.client.inference.usage.output_tokens", "delta", [
          { start, time, asInt: 300, attributes: model("gpt-4o") },
        ]),
        histogramMetric(
          "gen_ai.client.operation.duration",
          "delta",
          [
            { start, time, count: 3, sum: 1.5, attributes: model("gpt-4o") },
            { start, time, count: 2, sum: 1.0, attributes: model("claude-sonnet-4-5") },
          ],
          "s",
        ),
        histogramMetric(
          "gen_ai.client.inference.duration",
          "delta",
          [{ start, time, count: 3, sum: 1.5, attributes: model("gpt-4o") }],
          "s",
        ),
      ],
    },
  ]);
  const r = await postExport(ta, gw.key, body);
  t.equal(r.statusCode, 200, r.body);
  t.equal(decodeExportResponse("metrics", r.rawPayload, "protobuf").rejected, 0);
  const g = await gatewayUsageOf(ta, owner, gw.id);
  t.equal(g.heartbeats, 1);
  t.equal(g.input_tokens, 1200 + 500, "gpt-4o's input once, claude's (older names only) counted");
  t.equal(g.output_tokens, 300 + 80);
  t.equal(g.requests, 3 + 2, "operations once each");
});

t.test(
  "dual emission keeps other instrumentations' usage, and the operations without durations",
  async (t) => {
    const ta = await testApp(t);
    const w = await seedTenants(ta);
    const owner = w.keys.bobOrgB;
    const gw = await gatewayConnection(ta, owner, "two-libraries");
    const time = Date.now() - 60_000;
    const start = time - 10_000;
    const attrs = (type?: string) => ({
      "gen_ai.request.model": "gpt-4o",
      ...(type ? { "gen_ai.token.type": type } : {}),
    });
    const r = await postExport(
      ta,
      gw.key,
      {
        resourceMetrics: [
          {
            resource: { attributes: [{ key: "service.instance.id", value: { stringValue: "gw-two" } }] },
            scopeMetrics: [
              {
                // library A, dual emission, no duration metric: 4 operations, 1,000 input tokens
                scope: { name: "library-a", version: "2.0" },
                metrics: [
                  histogramMetric("gen_ai.client.token.usage", "delta", [
                    { start, time, count: 4, sum: 1000, attributes: attrs("input") },
                  ]),
                  sumMetric("gen_ai.client.inference.usage.input_tokens", "delta", [
                    { start, time, asInt: 1000, attributes: attrs() },
                  ]),
                ],
              },
              {
                // library B, older names only, same model and time: 1 operation, 70 input tokens
                scope: { name: "library-b", version: "0.9" },
                metrics: [
                  histogramMetric("gen_ai.client.token.usage", "delta", [
                    { start, time, count: 1, sum: 70, attributes: attrs("input") },
                  ]),
                ],
              },
            ],
          },
        ],
      },
      { encoding: "json" },
    );
    t.equal(r.statusCode, 200, r.body);
    const g = await gatewayUsageOf(ta, owner, gw.id);
    t.equal(g.input_tokens, 1000 + 70, "library A's tokens once, library B's counted");
    t.equal(g.requests, 4 + 1, "operations from the older token histograms, each library's once");
  },
);
