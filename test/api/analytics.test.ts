import t from "tap";
import { METRIC_TYPES } from "../../src/http/read-queries.js";
import { rollUp } from "../../src/retention/rollups.js";
import {
  availabilitySamples,
  executions,
  gatewayHeartbeats,
  usageEntries,
} from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

const DAY = 86_400_000;
// Monday 2026-11-09 .. Wednesday 2026-11-18 (UTC)
const base = Date.parse("2026-11-09T06:00:00Z");
const results = new Map<BackendName, Record<string, unknown>>();

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(`analytics on ${series}`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const ta = await testApp(t, { series });
    const w = await seedTenants(ta);
    const { PA, OB, PC } = w.conns;
    const s = ta.ctx.stores.series;
    const execs = [];
    for (let d = 0; d < 10; d++) {
      for (let i = 0; i < 4; i++) {
        const status = i === 3 && d % 2 === 0 ? "error" : "success";
        execs.push({
          ts: new Date(base + d * DAY + i * 60_000),
          connection_id: PA,
          execution_id: `e${d}-${i}`,
          workflow_id: "wf",
          status,
          duration_ms: 1000 * (i + 1),
          updated_at: new Date(),
        });
      }
      for (let i = 0; i < 10; i++)
        await s.append(availabilitySamples, [
          {
            ts: new Date(base + d * DAY + i * 60_000),
            connection_id: PA,
            available: i !== 0 || d % 5 !== 0,
            synthetic: false,
            source: "probe",
          },
        ]);
    }
    execs.push({
      ts: new Date(base),
      connection_id: PC,
      execution_id: "foreign",
      status: "success",
      updated_at: new Date(),
    });
    await s.append(executions, execs);
    await s.append(gatewayHeartbeats, [
      {
        ts: new Date(base),
        connection_id: OB,
        heartbeat_id: "h1",
        status: "healthy",
        healthy: true,
        pid_alive: true,
        input_tokens: 1,
        output_tokens: 1,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        request_count: 1,
        cost_usd: 1.25,
        received_at: new Date(),
      },
    ]);
    await s.append(usageEntries, [
      {
        ts: new Date(base + DAY),
        id: "u1",
        connection_id: OB,
        entity: "m",
        usage_amount: 5,
        usage_entity: "tokens",
        cost_cents: 30,
      },
    ]);
    await s.waitVisible();
    // what the jobs role does every 5 minutes: days before yesterday are read from the rollup
    await rollUp(ta.ctx);
    await s.waitVisible();

    // an explicit window, so the test does not depend on today's date
    const window = "&since=2026-11-01T00:00:00Z&until=2026-12-01T00:00:00Z";
    const get = (metric: string, extra = "") =>
      call(ta.app, w.keys.bobPersonal, "GET", `/v1/analytics?metric_type=${metric}${window}${extra}`);
    const alice = (metric: string, extra = "") =>
      call(ta.app, w.keys.alicePersonal, "GET", `/v1/analytics?metric_type=${metric}${window}${extra}`);

    const daily = (await alice("daily_executions")).json();
    t.equal(daily.data.length, 10, "one row per day");
    t.match(daily.data[0], {
      connection_id: PA,
      metric_type: "daily_executions",
      bucket_start: "2026-11-18T00:00:00.000Z",
      value: 4,
      sample_count: 4,
    });
    t.notOk(
      daily.data.some((r: { connection_id: string }) => r.connection_id === PC),
      "visible connections only",
    );
    const rate = (await alice("weekly_success_rate")).json();
    t.same(
      rate.data.map((r: { bucket_start: string; value: number }) => [r.bucket_start, r.value]),
      [
        ["2026-11-16T00:00:00.000Z", 0.9167], // Mon 16 .. Wed 18: days 7, 8, 9 -> errors on day 8: 11 / 12
        ["2026-11-09T00:00:00.000Z", 0.8571], // days 0..6 -> errors on 0, 2, 4, 6: 24 / 28
      ],
    );
    const dur = (await alice("monthly_avg_duration")).json();
    t.same(
      dur.data.map((r: { value: number }) => r.value),
      [2500],
    );
    const avail = (await alice("daily_availability")).json();
    t.same(
      avail.data
        .filter((r: { value: number }) => r.value < 100)
        .map((r: { bucket_start: string; value: number }) => [r.bucket_start, r.value]),
      [
        ["2026-11-14T00:00:00.000Z", 90],
        ["2026-11-09T00:00:00.000Z", 90],
      ],
    );
    const cost = (await get("monthly_gateway_cost")).json();
    t.same(
      cost.data,
      [
        {
          connection_id: OB,
          metric_type: "monthly_gateway_cost",
          bucket_start: "2026-11-01T00:00:00.000Z",
          value: 155,
          sample_count: 2,
        },
      ],
      "heartbeat dollars and entry cents together, in cents",
    );

    // cursor pages
    const p1 = (await alice("daily_executions", "&limit=4")).json();
    t.equal(p1.data.length, 4);
    const p2 = (await alice("daily_executions", `&limit=4&cursor=${p1.pagination.next_cursor}`)).json();
    const p3 = (await alice("daily_executions", `&limit=4&cursor=${p2.pagination.next_cursor}`)).json();
    t.same([...p1.data, ...p2.data, ...p3.data], daily.data, "pages add up to the whole");
    t.equal(p3.pagination.has_more, false);

    for (const [q, message] of [
      ["", /query\.metric_type: is required; it must be one of daily_executions/],
      ["?metric_type=hourly_executions", /query\.metric_type: must be one of/],
    ] as const) {
      const r = await call(ta.app, w.keys.alicePersonal, "GET", `/v1/analytics${q}`);
      t.equal(r.statusCode, 400);
      t.match(r.json().error.message, message);
    }

    const all: Record<string, unknown> = {};
    for (const m of METRIC_TYPES)
      all[m] = (await alice(m)).json().data.map((r: Record<string, unknown>) => ({
        ...r,
        connection_id: r.connection_id === PA ? "PA" : "other",
      }));
    all.cost = cost.data.map((r: Record<string, unknown>) => ({ ...r, connection_id: "OB" }));
    results.set(series, all);
  });
}

t.test("the same numbers on both backends", async (t) => {
  const sql = results.get("pglite");
  const qdb = results.get("questdb");
  if (!sql || !qdb) {
    if (process.env.CI === "true") t.fail("both backends must have run");
    else t.plan(0, "QuestDB unavailable");
    return;
  }
  for (const m of Object.keys(sql)) t.same(qdb[m], sql[m], m);
});
