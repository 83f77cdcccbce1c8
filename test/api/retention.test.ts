import t from "tap";
import { expire } from "../../src/retention/job.js";
import { rollUp } from "../../src/retention/rollups.js";
import {
  availabilityDaily,
  availabilityMonthly,
  availabilitySamples,
} from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

const DAY = 86_400_000;
const NOW = Date.parse("2026-11-22T15:00:00Z");
// one sample a day for 400 days, at 06:00 UTC, the newest this morning
const AGES = Array.from({ length: 400 }, (_, i) => i);
const at = (age: number) => new Date(Date.parse("2026-11-22T06:00:00Z") - age * DAY);

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(`retention on ${series}: raw samples by plan, rollups outlive them`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const ta = await testApp(t, { series });
    ta.ctx.now = () => new Date(NOW);
    const w = await seedTenants(ta);
    const db = ta.ctx.stores.db;
    const s = ta.ctx.stores.series;
    const { PA, OB, PB, PC } = w.conns;
    // PA: alice personal (free); OB: org B (pro); PB: bob personal (scale); PC: carol (enterprise)
    await db.query("UPDATE users SET plan = 'free' WHERE id = $1", [w.users.alice.id]);
    await db.query("UPDATE organizations SET plan = 'pro' WHERE id = $1", [w.orgs.orgB.id]);
    await db.query("UPDATE users SET plan = 'scale' WHERE id = $1", [w.users.bob.id]);
    const GONE = "conn_deleted_long_ago";
    const conns = { [PA]: 7, [OB]: 30, [PB]: 90, [PC]: 365, [GONE]: 7 };
    for (const id of Object.keys(conns))
      await s.append(
        availabilitySamples,
        AGES.map((age) => ({
          ts: at(age),
          connection_id: id,
          available: age % 10 !== 0,
          response_time_ms: 100 + (age % 7),
          synthetic: false,
          source: "probe",
        })),
      );
    await s.waitVisible();

    // the API never shows a sample older than the plan keeps, even before the job ran
    const oldest = async (key: string, id: string) => {
      let cursor: string | null = null;
      let last: string | undefined;
      let n = 0;
      do {
        const r = await call(
          ta.app,
          key,
          "GET",
          `/v1/availability?connection_id=${id}&limit=1000${cursor ? `&cursor=${cursor}` : ""}`,
        );
        t.equal(r.statusCode, 200);
        const body = r.json();
        n += body.data.length;
        last = body.data.at(-1)?.checked_at ?? last;
        cursor = body.pagination.next_cursor;
      } while (cursor);
      return { n, last };
    };
    t.same(await oldest(w.keys.alicePersonal, PA), { n: 7, last: at(6).toISOString() }, "free: 7 days");
    t.same(await oldest(w.keys.bobOrgB, OB), { n: 30, last: at(29).toISOString() }, "pro: 30 days");
    t.same(await oldest(w.keys.bobPersonal, PB), { n: 90, last: at(89).toISOString() }, "scale: 90 days");
    t.same(
      await oldest(w.keys.carolPersonal, PC),
      { n: 365, last: at(364).toISOString() },
      "enterprise: 365",
    );
    const all = await call(ta.app, w.keys.bobPersonal, "GET", "/v1/availability?limit=1000");
    t.ok(
      all.json().data.every((r: { checked_at: string }) => Date.parse(r.checked_at) >= NOW - 90 * DAY),
      "also when reading every visible connection at once",
    );

    // the rollup job, then the expiry job: raw rows are physically gone, rollups stay
    const rolled = await rollUp(ta.ctx);
    t.ok(rolled.days >= 5 * 365, `daily rows rolled up from every sample kept (${rolled.days})`);
    await s.waitVisible();
    const removed = await expire(ta.ctx);
    await s.waitVisible();
    t.ok(removed.availability_samples > 0, `expired samples removed (${removed.availability_samples})`);
    for (const [id, days] of Object.entries(conns)) {
      const left = await s.count(availabilitySamples, {
        where: [{ column: "connection_id", op: "eq", value: id }],
      });
      t.equal(left, days, `${id}: ${days} days of raw samples left on disk`);
    }

    // the summary and analytics still see history from the rollups
    const month = await call(
      ta.app,
      w.keys.alicePersonal,
      "GET",
      `/v1/availability/summary?window=month&connection_id=${PA}`,
    );
    t.equal(month.statusCode, 200, month.body);
    const row = month.json().data[0];
    // 30 days, 3 of them (ages 0, 10, 20) unavailable
    t.match(row, { connection_id: PA, checks: 30, available_checks: 27, uptime_percent: 90 });
    t.equal(row.since, "2026-10-24T00:00:00.000Z", "the last 30 UTC days, today included");
    const daily = await call(
      ta.app,
      w.keys.alicePersonal,
      "GET",
      `/v1/analytics?metric_type=daily_availability&connection_id=${PA}&since=2026-01-01T00:00:00Z&limit=1000`,
    );
    t.equal(
      daily.json().data.length,
      326,
      "a daily row for every day of the year, long after raw samples expired",
    );
    const monthly = await call(
      ta.app,
      w.keys.alicePersonal,
      "GET",
      `/v1/analytics?metric_type=monthly_availability&connection_id=${PA}&since=2025-06-01T00:00:00Z`,
    );
    const months = monthly.json().data as { bucket_start: string; sample_count: number }[];
    // the first rollup went back as far as any plan keeps raw samples (365 days): November 2025
    t.same(months.at(-1)?.bucket_start, "2025-11-01T00:00:00.000Z", "monthly rows back to the first rollup");
    t.equal(months.length, 13);
    t.equal(months.find((m) => m.bucket_start === "2026-10-01T00:00:00.000Z")?.sample_count, 31);

    // a late sample (a heartbeat for a period that ended last night) counts at once, before the
    // next rollup run redoes its day, and after it
    const before = (
      await call(ta.app, w.keys.bobOrgB, "GET", `/v1/availability/summary?window=month&connection_id=${OB}`)
    ).json().data[0];
    const late = await call(ta.app, w.keys.ingest, "POST", "/v1/gateway/ingest", {
      type: "heartbeat",
      gateway: { status: "degraded", latencyMs: 10, version: "1" },
      tokens: {
        period: {
          inputTokens: 1,
          outputTokens: 1,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          requestCount: 1,
          estimatedCostUsd: 0,
          startedAt: "2026-11-21T20:00:00Z",
          endedAt: "2026-11-21T20:01:00Z",
        },
      },
    });
    t.equal(late.statusCode, 201, late.body);
    await s.waitVisible();
    const summaryOB = async () =>
      (
        await call(ta.app, w.keys.bobOrgB, "GET", `/v1/availability/summary?window=month&connection_id=${OB}`)
      ).json().data[0];
    t.match(await summaryOB(), { checks: before.checks + 1, available_checks: before.available_checks });
    await rollUp(ta.ctx);
    await s.waitVisible();
    t.match(await summaryOB(), { checks: before.checks + 1 }, "and the same once its day is rolled up again");
    t.same((await db.query("SELECT day FROM rollup_dirty")).rows, [], "the rollup run cleared the mark");

    // rollups: daily kept 425 days, monthly 6 years
    const rollupRow = (ts: Date) => ({
      ts,
      connection_id: PC,
      checks: 1,
      available: 1,
      response_ms_sum: 1,
      response_ms_count: 1,
    });
    await s.append(availabilityDaily, [
      rollupRow(new Date(NOW - 430 * DAY)),
      rollupRow(new Date(NOW - 410 * DAY)),
    ]);
    await s.append(availabilityMonthly, [
      rollupRow(new Date(Date.UTC(2020, 0, 1))),
      rollupRow(new Date(Date.UTC(2022, 0, 1))),
    ]);
    await s.waitVisible();
    await expire(ta.ctx);
    await s.waitVisible();
    const pc = [{ column: "connection_id", op: "eq" as const, value: PC }];
    t.equal(
      await s.count(availabilityDaily, { where: pc, until: new Date(NOW - 400 * DAY) }),
      1,
      "a daily row 410 days old stays, one 430 days old is gone",
    );
    t.same(
      (
        await s.page(availabilityMonthly, { where: pc, until: new Date(Date.UTC(2023, 0, 1)), limit: 5 })
      ).rows.map((r) => r.ts.toISOString()),
      ["2022-01-01T00:00:00.000Z"],
      "a monthly row under 5 years old stays, one of 2020 is gone",
    );
  });
}
