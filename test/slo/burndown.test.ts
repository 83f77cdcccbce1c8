import t from "tap";
import { rollUp } from "../../src/retention/rollups.js";
import { sloBurndown } from "../../src/slo/burndown.js";
import { availabilitySamples } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * The burn-down of an SLO (src/slo/burndown.ts): one point per UTC day of the window, each the
 * share of the budget left at the day's end, counted here independently from the samples written;
 * the line never rises; its last point is GET …/slo's `error_budget.remaining` at the same instant;
 * maintenance and samples before the window are left out; the same once the past days are read
 * from the daily rollups and their raw samples are gone. On PGlite, the sql store on PostgreSQL
 * and QuestDB.
 */

const DAY = 86_400_000;
const MIN = 60_000;
const NOW = Date.parse("2026-11-20T12:00:00.000Z");
const TODAY = Math.floor(NOW / DAY) * DAY;

interface Sample {
  at: number;
  ok: boolean;
  maintenance?: boolean;
}

/**
 * Five days of a check every 5 minutes: failures 3 days ago (12), yesterday (4) and today (4), a
 * failed sample under maintenance today; 20 days ago 2 more (inside every window), and 40 days
 * ago 10 inside a 90-day window only.
 */
function history(): Sample[] {
  const out: Sample[] = [];
  for (let at = TODAY - 4 * DAY + 2 * MIN; at < NOW; at += 5 * MIN) {
    const k = Math.floor((at - TODAY) / DAY); // -4 … 0
    const minute = Math.floor((at - (TODAY + k * DAY)) / MIN);
    const failed =
      (k === -3 && minute >= 600 && minute < 660) || (k === -1 && minute < 20) || (k === 0 && minute >= 700);
    out.push({ at, ok: !failed });
  }
  out.push({ at: NOW - 7 * MIN, ok: false, maintenance: true });
  for (let i = 0; i < 30; i++) out.push({ at: TODAY - 20 * DAY + 3600_000 + i * MIN, ok: i >= 2 });
  for (let i = 0; i < 30; i++) out.push({ at: TODAY - 40 * DAY + i * MIN, ok: i >= 10 });
  return out;
}

/** The expected points, counted from the samples: per day, then the running failures over the window's budget. */
function expected(samples: Sample[], objective: number, windowDays: number) {
  const start = TODAY - (windowDays - 1) * DAY;
  const counted = samples.filter((s) => !s.maintenance && s.at >= start && s.at < NOW);
  const checks = counted.length;
  const budget = (1 - objective) * checks;
  let spent = 0;
  const points = [];
  for (let d = start; d <= TODAY; d += DAY) {
    const day = counted.filter((s) => s.at >= d && s.at < d + DAY);
    const failed = day.filter((s) => !s.ok).length;
    spent += failed;
    points.push({
      day: new Date(d).toISOString().slice(0, 10),
      checks: day.length,
      failed,
      remaining: Math.round((1 - spent / budget) * 1e6) / 1e6,
    });
  }
  return { checks, failed: spent, points };
}

for (const series of ["pglite", "postgres", "questdb"] as BackendName[]) {
  t.test(`burn-down from the samples, ending at GET …/slo's budget, on ${series}`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const ta = await testApp(t, series === "postgres" ? { relational: "postgres" } : { series });
    ta.ctx.now = () => new Date(NOW);
    const w = await seedTenants(ta);
    const id = w.conns.PA;
    const samples = history();
    await ta.ctx.stores.series.append(
      availabilitySamples,
      samples.map((s) => ({
        ts: new Date(s.at),
        connection_id: id,
        available: s.ok,
        response_time_ms: s.ok ? 100 : null,
        status_code: s.ok ? 200 : 503,
        reason: s.ok ? null : "http_status",
        error: null,
        synthetic: false,
        source: "probe",
        maintenance: s.maintenance ?? false,
      })),
    );
    await ta.ctx.stores.series.waitVisible();

    const check = async (label: string, objective: number, windowDays: number) => {
      const put = await call(ta.app, w.keys.alicePersonal, "PUT", `/v1/connections/${id}/slo`, {
        objective,
        window_days: windowDays,
      });
      t.equal(put.statusCode, 200, `${label}: PUT …/slo answers 200`);
      const status = (await call(ta.app, w.keys.alicePersonal, "GET", `/v1/connections/${id}/slo`)).json();
      const b = await sloBurndown(
        ta.ctx,
        { connection_id: id, objective, window_days: windowDays },
        new Date(NOW),
      );
      const want = expected(samples, objective, windowDays);
      t.equal(b.points.length, windowDays, `${label}: one point per UTC day of the window`);
      t.equal(b.window_start, status.window_start, `${label}: the window GET answers`);
      t.equal(b.points[0]?.day, status.window_start.slice(0, 10), `${label}: from window_start`);
      t.equal(b.points.at(-1)?.day, new Date(TODAY).toISOString().slice(0, 10), `${label}: to today`);
      t.same(b.points, want.points, `${label}: each day's checks, failures and budget left, as counted`);
      t.same(
        { checks: b.checks, failed: b.failed },
        { checks: status.sli.checks, failed: status.sli.failed },
      );
      t.equal(
        b.points.at(-1)?.remaining,
        status.error_budget.remaining,
        `${label}: the last point is error_budget.remaining`,
      );
      t.ok(
        b.points.every((p, i) => i === 0 || p.remaining <= (b.points[i - 1]?.remaining ?? 1)),
        `${label}: the line never rises`,
      );
      return b;
    };

    const b30 = await check("99.9 % over 30 days", 0.999, 30);
    t.equal(b30.failed, 12 + 4 + 4 + 2, "the window's failures: maintenance and 40 days ago left out");
    t.ok((b30.points.at(-1)?.remaining ?? 0) < 0, "22 failures of ~1,300 checks overspend 0.1 %");
    t.equal(b30.points[0]?.remaining, 1, "nothing spent before the window's first failure");
    await check("99 % over 90 days", 0.99, 90);
    await check("99.5 % over 28 days", 0.995, 28);

    // past raw retention: the past days from the daily rollup, their raw samples gone
    await rollUp(ta.ctx);
    await ta.ctx.stores.series.expire(availabilitySamples, [{ before: new Date(TODAY), keep: [] }]);
    await ta.ctx.stores.series.waitVisible();
    await check("from the rollups, raw samples expired", 0.999, 30);

    // no samples in the window: nothing consumed, every point 1
    const empty = await sloBurndown(
      ta.ctx,
      { connection_id: w.conns.OA, objective: 0.999, window_days: 28 },
      new Date(NOW),
    );
    t.equal(empty.points.length, 28);
    t.ok(
      empty.points.every((p) => p.remaining === 1 && p.checks === 0),
      "no checks: every point 1",
    );
  });
}
