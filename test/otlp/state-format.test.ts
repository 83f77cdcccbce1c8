import t from "tap";
import { decodeMetricsRequest } from "../../src/otlp/decode.js";
import { digest, mapMetrics, stable } from "../../src/otlp/map.js";
import { expire } from "../../src/retention/job.js";
import { testApp } from "../helpers/app.js";
import { requireBackend } from "../helpers/backends.js";
import { MAX_SERIES_PER_INSTANCE } from "../../src/otlp/cumulative.js";
import {
  decodeExportResponse,
  encodeRequest,
  type Json,
  metricsRequest,
  sumMetric,
} from "../helpers/otlp-bodies.js";
import { gatewayConnection, gatewayUsageOf, postExport } from "../helpers/otlp-gateway.js";
import { seedTenants } from "../helpers/tenants.js";

/*
 * The stored state of cumulative series (otlp_series.state) changed format on 2026-11-28 (from a
 * JSON object to compact text, src/otlp/cumulative.ts). A state an earlier Vigil wrote must still
 * be read after an upgrade: otherwise the first export after it takes every series as new and
 * counts each running total in full again (a gateway's whole usage since its start, twice).
 */

const INPUT = "gen_ai.client.inference.usage.input_tokens";
const MINUTE = 60_000;

for (const relational of ["pglite", "postgres"] as const) {
  t.test(`${relational}: a state in the first format is read, then rewritten`, async (t) => {
    if (!(await requireBackend(t, relational))) return;
    const ta = await testApp(t, { relational });
    const w = await seedTenants(ta);
    const owner = w.keys.bobOrgB;
    const gw = await gatewayConnection(ta, owner, "upgraded");
    const resource = { "service.instance.id": "gw-upgraded" };
    const start = Date.now() - 30 * MINUTE;
    const counter = (time: number, value: number, model = "gpt-4o"): Json =>
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
    const send = async (body: Json, app = ta) => {
      const r = await postExport(app, gw.key, body);
      t.equal(r.statusCode, 200, r.body);
    };
    const input = async () => (await gatewayUsageOf(ta, owner, gw.id)).input_tokens;

    // what the earlier Vigil stored after a point of 1,000 tokens ten minutes ago: the series'
    // full digest as key, times as decimal text (this Vigil process has never seen the instance)
    const before = counter(Date.now() - 10 * MINUTE, 1000);
    // the key as the first format's code made it: sha256 of instance, resource, scope, metric,
    // attributes (stable text) and start
    const oldKeyOf = (body: Json) => {
      const decoded = decodeMetricsRequest(encodeRequest("metrics", body, "protobuf"), "protobuf");
      const [point] = mapMetrics(decoded, Date.now()).points;
      const rm = decoded.resourceMetrics[0];
      const sm = rm?.scopeMetrics[0];
      const dp = sm?.metrics[0]?.dataPoints[0];
      if (!point || !rm || !sm || !dp) throw new Error("the request maps to no point");
      const key = digest(
        [
          "gw-upgraded",
          digest(stable(rm.resource.attributes)),
          sm.scope.name,
          sm.scope.version,
          INPUT,
          stable(dp.attributes),
          String(dp.startTimeUnixNano),
        ].join("\n"),
      );
      return { key, point };
    };
    const old = oldKeyOf(before);
    t.not(old.point.seriesKey, old.key, "the series key changed since");
    // a second model the exporter sends only now and then: 300 tokens so far
    const rare = oldKeyOf(counter(Date.now() - 10 * MINUTE, 300, "o3-mini"));
    const times = [String(old.point.startNs), String(old.point.timeNs)];
    const v1 = JSON.stringify({
      [old.key]: [...times, 1000, 0, null, null, null, null],
      [rare.key]: [...times, 300, 0, null, null, null, null],
    });
    await ta.ctx.stores.db.query(
      "INSERT INTO otlp_series (connection_id, instance, version, state, updated_at) VALUES ($1, $2, 7, $3, now())",
      [gw.id, "gw-upgraded", v1],
    );

    const after = counter(Date.now() - MINUTE, 1600);
    await send(after);
    t.equal(await input(), 600, "the point after the upgrade adds its increment (1,600 − 1,000), not 1,600");
    await send(after);
    t.equal(await input(), 600, "its resend is stored once");

    const row = await ta.ctx.stores.db.query<{ version: string | number; state: string }>(
      "SELECT version, state FROM otlp_series WHERE connection_id = $1",
      [gw.id],
    );
    t.equal(Number(row.rows[0]?.version), 8, "written back once, by compare and set on the old version");
    t.match(row.rows[0]?.state ?? "", /^v3\n/, "in the current format");

    // a second process (no memory of the instance) reads the current format
    const other = await testApp(t, { sameStoresAs: ta });
    await send(counter(Date.now(), 1750), other);
    t.equal(await input(), 750, "another process continues from the stored state: + 150");
    await send(counter(Date.now(), 520, "o3-mini"), other);
    t.equal(
      await input(),
      970,
      "a series absent from the exports since the upgrade still continues from its old state: + 220, not 520",
    );

    // the retention job removes states of instances silent for longer than a point may be old
    const db = ta.ctx.stores.db;
    await send(
      metricsRequest([
        {
          resource: { "service.instance.id": "gw-active" },
          metrics: [
            sumMetric(INPUT, "cumulative", [
              { start, time: Date.now(), asInt: 5, attributes: { "gen_ai.request.model": "gpt-4o" } },
            ]),
          ],
        },
      ]),
    );
    await db.query(
      "UPDATE otlp_series SET updated_at = now() - interval '31 days' WHERE connection_id = $1 AND instance = 'gw-upgraded'",
      [gw.id],
    );
    const removed = await expire(ta.ctx);
    t.equal(removed.otlp_series, 1, "one silent instance's state expired");
    const left = await db.query<{ instance: string }>(
      "SELECT instance FROM otlp_series WHERE connection_id = $1",
      [gw.id],
    );
    t.same(
      left.rows.map((r) => r.instance),
      ["gw-active"],
      "the instance that exported a moment ago keeps its state",
    );

    if (relational === "postgres") {
      // an instance of 100 series stays within the row: no TOAST value written per export
      const many = metricsRequest([
        {
          resource: { "service.instance.id": "gw-wide" },
          metrics: [
            sumMetric(
              INPUT,
              "cumulative",
              Array.from({ length: 100 }, (_, i) => ({
                start,
                time: Date.now() - MINUTE,
                asInt: 10 + i,
                attributes: { "gen_ai.request.model": `model-${i}` },
              })),
            ),
          ],
        },
      ]);
      await send(many);
      const size = await ta.ctx.stores.db.query<{ stored: number; toasted: number }>(
        `SELECT pg_column_size(state)::int AS stored,
                (SELECT pg_relation_size(reltoastrelid)::int FROM pg_class WHERE relname = 'otlp_series') AS toasted
           FROM otlp_series WHERE connection_id = $1 AND instance = 'gw-wide'`,
        [gw.id],
      );
      t.ok((size.rows[0]?.stored ?? 0) > 2000, `the state is beyond 2 KB (${size.rows[0]?.stored} bytes)`);
      t.equal(size.rows[0]?.toasted, 0, "and nothing of it is in the TOAST table");
    }
  });
}

for (const relational of ["pglite", "postgres"] as const) {
  t.test(`${relational}: a state in the second format is read, then rewritten`, async (t) => {
    if (!(await requireBackend(t, relational))) return;
    const ta = await testApp(t, { relational });
    const w = await seedTenants(ta);
    const owner = w.keys.bobOrgB;
    const gw = await gatewayConnection(ta, owner, "v2");
    const resource = { "service.instance.id": "gw-v2" };
    const now = Date.now();
    const start = now - 30 * MINUTE;
    const [t1, t2, t3] = [now - 20 * MINUTE, now - 10 * MINUTE, now - MINUTE];
    const counter = (time: number, value: number, model: string): Json =>
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
    const send = async (body: Json) => {
      const r = await postExport(ta, gw.key, body);
      t.equal(r.statusCode, 200, r.body);
    };
    const input = async () => (await gatewayUsageOf(ta, owner, gw.id)).input_tokens;
    const keyOf = (body: Json) => {
      const decoded = decodeMetricsRequest(encodeRequest("metrics", body, "protobuf"), "protobuf");
      const [point] = mapMetrics(decoded, Date.now()).points;
      if (!point) throw new Error("the request maps to no point");
      return point.seriesKey.slice(0, 16); // the second format's keys: 16 characters
    };
    const ns = (ms: number) => `${BigInt(ms) * 1_000_000n}`;
    // what the Vigil of 2026-11-28 stored: gpt-4o at 1,000 then 1,400 (its point before kept),
    // o3-mini with one point of 300
    const v2 = [
      "v2",
      [ns(start), ns(t1), ns(t2)].join(","),
      `${keyOf(counter(t2, 1400, "gpt-4o"))} 0 2 1400 0 0 1 1000 0`,
      `${keyOf(counter(t2, 300, "o3-mini"))} 0 2 300 0`,
    ].join("\n");
    await ta.ctx.stores.db.query(
      "INSERT INTO otlp_series (connection_id, instance, version, state, updated_at) VALUES ($1, $2, 3, $3, now())",
      [gw.id, "gw-v2", v2],
    );

    await send(counter(t2, 1400, "gpt-4o"));
    t.equal(
      await input(),
      400,
      "a resend of the stored point gives the increment it gave then (1,400 − 1,000)",
    );
    await send(counter(t3, 1500, "gpt-4o"));
    await send(counter(t3, 520, "o3-mini"));
    t.equal(await input(), 400 + 100 + 220, "both series continue from their stored points");
    await send(counter(t3, 1500, "gpt-4o"));
    await send(counter(t3, 520, "o3-mini"));
    t.equal(await input(), 720, "their resends are stored once");
    const row = await ta.ctx.stores.db.query<{ state: string }>(
      "SELECT state FROM otlp_series WHERE connection_id = $1",
      [gw.id],
    );
    const lines = (row.rows[0]?.state ?? "").split("\n");
    t.equal(lines[0], "v3", "rewritten in the current format");
    t.same(
      lines.slice(2).map((l) => l.split(" ")[0]?.length),
      [12, 12],
      "with the keys cut to 12 characters",
    );
  });
}

t.test("an instance's cumulative series are capped; points of new series beyond are rejected", async (t) => {
  const ta = await testApp(t);
  const w = await seedTenants(ta);
  const gw = await gatewayConnection(ta, w.keys.bobOrgB, "wide");
  const start = Date.now() - 30 * MINUTE;
  // one model, one metric, a series per server address
  const body = (time: number, from: number, to: number, instance = "gw-wide", begin = start): Json =>
    metricsRequest([
      {
        resource: { "service.instance.id": instance },
        metrics: [
          sumMetric(
            INPUT,
            "cumulative",
            Array.from({ length: to - from }, (_, i) => ({
              start: begin,
              time,
              asInt: 10,
              attributes: { "gen_ai.request.model": "gpt-4o", "server.address": `host-${from + i}` },
            })),
          ),
        ],
      },
    ]);
  const send = async (json: Json) => {
    const r = await postExport(ta, gw.key, json);
    t.equal(r.statusCode, 200, r.body.slice(0, 200));
    return decodeExportResponse("metrics", r.rawPayload, "protobuf");
  };
  const input = async () => (await gatewayUsageOf(ta, w.keys.bobOrgB, gw.id)).input_tokens;
  const first = await send(body(Date.now() - 2 * MINUTE, 0, MAX_SERIES_PER_INSTANCE - 2));
  t.equal(first.rejected, 0, "below the cap: every point taken");
  t.equal(await input(), 10 * (MAX_SERIES_PER_INSTANCE - 2));
  // the known series again, and 7 new ones: 2 fit, 5 are refused
  const second = await send(body(Date.now() - MINUTE, 0, MAX_SERIES_PER_INSTANCE + 5));
  t.equal(second.rejected, 5, "the points of the new series beyond the cap are rejected");
  t.match(
    second.message,
    new RegExp(`instance gw-wide: Vigil already follows ${MAX_SERIES_PER_INSTANCE} cumulative series`),
  );
  t.equal(
    await input(),
    10 * MAX_SERIES_PER_INSTANCE,
    "the known series add nothing (unchanged), the 2 that fit add theirs",
  );

  // another instance, full of series not moved for two days (say, a counter's life before its
  // process restarted): they make room for new ones
  const twoDays = 2 * 86_400_000;
  const old = await send(
    body(Date.now() - twoDays, 0, MAX_SERIES_PER_INSTANCE, "gw-full", Date.now() - twoDays - 30 * MINUTE),
  );
  t.equal(old.rejected, 0);
  const before = await input();
  const fresh = await send(body(Date.now() - MINUTE, 0, 3, "gw-full", Date.now() - 30 * MINUTE));
  t.equal(fresh.rejected, 0, "series not moved for a day leave a full state for new ones");
  t.equal(await input(), before + 30, "the new life's 3 series count (10 each)");
});
