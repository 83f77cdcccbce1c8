import t from "tap";
import { testApp } from "../helpers/app.js";
import {
  type Attr,
  decodeExportResponse,
  encodeRequest,
  histogramMetric,
  type Json,
  metricsRequest,
  sumMetric,
} from "../helpers/otlp-bodies.js";
import { gatewayConnection, gatewayUsageOf, postExport } from "../helpers/otlp-gateway.js";
import { seedTenants } from "../helpers/tenants.js";

/*
 * Cases a review of the OTLP ingest found (each failed before its fix):
 * - two replicas that share a service.instance.id (or fall back to the same service.name) but not
 *   their other resource attributes: their cumulative points alternate start times, and each was
 *   taken for a counter reset, counting the replica's whole running total every export;
 * - a model a long-running exporter starts using days after its start: its series' first point
 *   was a baseline, its usage until then lost;
 * - a NUL in an instance name failed the shared state statement (a 500 for every tenant's export
 *   in it) and the series write;
 * - a duration sum of 1e306 made the heartbeat's latency Infinity: the whole export a 400.
 */

const MINUTE = 60_000;
const INPUT = "gen_ai.client.inference.usage.input_tokens";

t.test("OTLP: the review's cases", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const owner = w.keys.bobOrgB;
  const gateway = (name: string) => gatewayConnection(ta, owner, name);
  const send = async (key: string, body: Json) => {
    const res = await postExport(ta, key, body);
    t.equal(res.statusCode, 200, res.body);
    return decodeExportResponse("metrics", res.rawPayload, "protobuf");
  };
  const usage = async (id: string) => {
    const g = await gatewayUsageOf(ta, owner, id);
    return { heartbeats: g.heartbeats, input: g.input_tokens };
  };
  const counter = (
    resource: Record<string, Attr>,
    start: number,
    time: number,
    value: number,
    model = "gpt-4o",
  ) =>
    metricsRequest([
      {
        resource,
        metrics: [
          sumMetric(INPUT, "cumulative", [
            { start, time, asInt: value, attributes: { "gen_ai.request.model": model } },
          ]),
        ],
      },
    ]);
  const now = Date.now();

  await t.test(
    "two replicas sharing an instance name alternate: each counts its own increments",
    async (t) => {
      const gw = await gateway("replicas");
      const a = { "service.name": "litellm", "process.pid": 101 };
      const b = { "service.name": "litellm", "process.pid": 202 };
      const sa = now - 50 * MINUTE;
      const sb = now - 40 * MINUTE;
      // replica a: 100, 150, 180; replica b: 1000, 1010, 1100, interleaved
      const sends: [Record<string, Attr>, number, number, number][] = [
        [a, sa, now - 30 * MINUTE, 100],
        [b, sb, now - 29 * MINUTE, 1000],
        [a, sa, now - 20 * MINUTE, 150],
        [b, sb, now - 19 * MINUTE, 1010],
        [a, sa, now - 10 * MINUTE, 180],
        [b, sb, now - 9 * MINUTE, 1100],
      ];
      for (const [r, start, time, v] of sends) await send(gw.key, counter(r, start, time, v));
      t.same(await usage(gw.id), { heartbeats: 6, input: 180 + 1100 }, "the two running totals, once each");
    },
  );

  await t.test(
    "a model first used days after the exporter started counts from its first export",
    async (t) => {
      const gw = await gateway("late model");
      const start = now - 3 * 24 * 60 * MINUTE; // the exporter's MeterProvider started 3 days ago
      const r = { "service.instance.id": "gw-old" };
      // the first point Vigil sees of this 3-day-old counter is a baseline: its history is not dumped in
      await send(gw.key, counter(r, start, now - 20 * MINUTE, 5_000));
      await send(gw.key, counter(r, start, now - 10 * MINUTE, 5_200));
      t.same(
        await usage(gw.id),
        { heartbeats: 2, input: 200 },
        "an old counter counts from its second point",
      );
      // a model used for the first time now: same start (the provider's), first point 70
      await send(gw.key, counter(r, start, now - 5 * MINUTE, 70, "claude-3-5-sonnet"));
      t.same(await usage(gw.id), { heartbeats: 3, input: 270 }, "the new model's first point counts in full");
      // the exporter did not get the answer and sends the export again
      await send(gw.key, counter(r, start, now - 5 * MINUTE, 70, "claude-3-5-sonnet"));
      t.same(
        await usage(gw.id),
        { heartbeats: 3, input: 270 },
        "its resend gives the same rows: stored once",
      );
    },
  );

  await t.test("a NUL in an instance name: that point rejected, the rest stored, no 500", async (t) => {
    const gw = await gateway("nul");
    const body = metricsRequest([
      {
        resource: { "service.instance.id": "gw\u0000bad" },
        metrics: [sumMetric(INPUT, "delta", [{ start: now - 2 * MINUTE, time: now - MINUTE, asInt: 5 }])],
      },
      {
        resource: { "service.instance.id": "gw-good" },
        metrics: [
          sumMetric(INPUT, "cumulative", [{ start: now - 2 * MINUTE, time: now - MINUTE, asInt: 7 }]),
        ],
      },
    ]);
    const answer = await send(gw.key, body);
    t.match(answer, { rejected: 1, message: /NUL/ }, "the point with the NUL is rejected, and said why");
    t.same(await usage(gw.id), { heartbeats: 1, input: 7 }, "the other instance's point stored");
  });

  await t.test("the key's connection deleted a moment ago (key still cached): 401, not a 500", async (t) => {
    const gw = await gateway("deleted");
    await send(gw.key, counter({ "service.instance.id": "gw-x" }, now - 5 * MINUTE, now - 4 * MINUTE, 1));
    await ta.ctx.stores.db.query("DELETE FROM connections WHERE id = $1", [gw.id]);
    const res = await ta.app.inject({
      method: "POST",
      url: "/v1/otlp/v1/metrics",
      headers: { authorization: `Bearer ${gw.key}`, "content-type": "application/x-protobuf" },
      payload: encodeRequest(
        "metrics",
        counter({ "service.instance.id": "gw-y" }, now - 3 * MINUTE, now - 2 * MINUTE, 2),
        "protobuf",
      ),
    });
    t.ok(res.statusCode < 500, `answered ${res.statusCode}`);
    t.ok([401, 403].includes(res.statusCode), "refused as a key without its connection");
  });

  await t.test("a duration beyond an hour per operation: rejected, not a 400 for the export", async (t) => {
    const gw = await gateway("huge duration");
    const body = metricsRequest([
      {
        resource: { "service.instance.id": "gw-d" },
        metrics: [
          histogramMetric(
            "gen_ai.client.operation.duration",
            "delta",
            [{ start: now - 2 * MINUTE, time: now - MINUTE, count: 1, sum: 1e306 }],
            "s",
          ),
          sumMetric(INPUT, "delta", [{ start: now - 2 * MINUTE, time: now - MINUTE, asInt: 9 }]),
        ],
      },
    ]);
    const answer = await send(gw.key, body);
    t.match(answer, { rejected: 1, message: /at most 3600 s per operation/ });
    t.same(await usage(gw.id), { heartbeats: 1, input: 9 }, "the token point stored");
  });
});
