import t from "tap";
import { writeSamples, type Sample } from "../../src/availability/samples.js";
import {
  availabilityByDay,
  availabilityTotals,
  type AvailabilityTotals,
} from "../../src/availability/totals.js";
import { expire } from "../../src/retention/job.js";
import { ROLLUP_LATENESS_MS } from "../../src/retention/policy.js";
import { rollUp, rollupState } from "../../src/retention/rollups.js";
import { availabilityPartial, availabilitySamples } from "../../src/stores/series/tables.js";
import type { Filter } from "../../src/stores/series/types.js";
import { testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";

/**
 * The day in progress is read as the last rollup run's partial rows up to its watermark plus the
 * raw samples after it (availability/totals.ts). Whatever arrives when, the answer is the one a
 * scan of every raw sample gives: samples written after the run, in flight while it ran, or so
 * late that they fall before its watermark (they mark the day dirty).
 */
const MIN = 60_000;
const DAY = 86_400_000;
const T0 = Date.parse("2026-11-22T00:00:00Z");
const at = (hh: number, mm: number) => new Date(T0 + hh * 3_600_000 + mm * MIN);
const A = "conn_partial_a";
const B = "conn_partial_b";
const OTHER = "conn_partial_other_tenant";

const sample = (id: string, ts: Date, i: number): Sample => ({
  ts,
  connection_id: id,
  available: i % 7 !== 0,
  response_time_ms: i % 5 === 0 ? null : 50 + (i % 13),
  synthetic: false,
  source: "probe",
});

/** Every minute in [from, to) for each connection. */
const minutes = (ids: string[], from: Date, to: Date) => {
  const rows: Sample[] = [];
  for (let ts = from.getTime(), i = 0; ts < to.getTime(); ts += MIN, i++)
    for (const id of ids) rows.push(sample(id, new Date(ts), i));
  return rows;
};

/** Rows as comparable text, one line per connection and bucket. */
const text = (rows: AvailabilityTotals[]) =>
  rows
    .map(
      (r) =>
        `${r.bucket.toISOString()} ${r.connection_id} checks=${r.checks} up=${r.available} ms=${r.response_ms_sum}/${r.response_ms_count}`,
    )
    .sort();

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(`the day in progress on ${series}: partial rows plus raw samples, exact`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const ta = await testApp(t, { series });
    const ctx = ta.ctx;
    const s = ctx.stores.series;
    let clock = at(15, 0);
    ctx.now = () => clock;
    const scope: Filter = { column: "connection_id", op: "in", value: [A, B] };

    /** What a scan of every raw sample of [from, now) counts, per day. */
    const raw = async (from: Date) => {
      await s.waitVisible();
      return text(await availabilityTotals(ctx, availabilitySamples, scope, from, clock, "day"));
    };
    const read = async (from: Date) => {
      await s.waitVisible();
      return text(await availabilityByDay(ctx, scope, from, clock, "day"));
    };

    // today so far, and another tenant's connection that must never show up
    await writeSamples(ctx, minutes([A, B, OTHER], at(0, 0), at(15, 0)));
    const run1 = await rollUp(ctx);
    const w1 = new Date(clock.getTime() - ROLLUP_LATENESS_MS);
    const state1 = await rollupState(ctx);
    t.same(state1.partialThrough, w1, "the run's watermark: 10 minutes before it started");
    t.same(state1.dirty, [], "the run cleared the marks of the samples it counted");
    t.equal(run1.partial, 3, "one partial row per connection");
    await s.waitVisible();
    const partial1 = text(
      await availabilityTotals(ctx, availabilityPartial, scope, w1, new Date(w1.getTime() + 1), "all"),
    );
    t.same(
      partial1.map((l) => l.split(" ").slice(1, 3).join(" ")),
      [`${A} checks=${14 * 60 + 50}`, `${B} checks=${14 * 60 + 50}`],
      "the partial rows count [midnight, watermark)",
    );
    t.same(await read(at(0, 0)), await raw(at(0, 0)), "right after the run: exact");
    t.equal((await read(at(0, 0))).length, 2, "only the connections asked for");

    // a check in flight while the run started (before it, committed after it) and new ones
    clock = at(15, 4);
    await writeSamples(ctx, [sample(A, at(14, 59), 3), ...minutes([A, B], at(15, 0), at(15, 4))]);
    t.same((await rollupState(ctx)).dirty, [], "samples on time mark nothing");
    t.same(await read(at(0, 0)), await raw(at(0, 0)), "samples after the run: exact");

    // a sample so late that it lies before the watermark: it marks the day, which is read raw
    clock = at(15, 6);
    await writeSamples(ctx, [sample(B, new Date(at(14, 30).getTime() + 30_000), 0)]);
    t.same((await rollupState(ctx)).dirty, [at(0, 0)], "the late sample marked today");
    t.same(await read(at(0, 0)), await raw(at(0, 0)), "a late sample before the watermark: exact");

    // the next run counts it; the rows a reader of the first watermark uses did not change
    await rollUp(ctx);
    const state2 = await rollupState(ctx);
    t.same(state2.partialThrough, new Date(clock.getTime() - ROLLUP_LATENESS_MS), "the new watermark");
    t.same(state2.dirty, [], "the mark is cleared");
    t.same(await read(at(0, 0)), await raw(at(0, 0)), "after the second run: exact");
    t.same(
      text(await availabilityTotals(ctx, availabilityPartial, scope, w1, new Date(w1.getTime() + 1), "all")),
      partial1,
      "the first run's partial rows are as they were",
    );

    // past midnight: the watermark still lies in yesterday, which is read as partial + raw
    clock = at(24, 5);
    await writeSamples(ctx, minutes([A, B], at(15, 4), at(24, 5)));
    await rollUp(ctx);
    const state3 = await rollupState(ctx);
    t.same(state3.partialThrough, at(23, 55), "the watermark: yesterday 23:55");
    const twoDays = await read(at(0, 0));
    t.same(twoDays, await raw(at(0, 0)), "yesterday and today: exact");
    t.equal(twoDays.length, 4, "a row per connection and day");
    const all = text(await availabilityByDay(ctx, scope, at(0, 0), clock, "all"));
    const sum = (lines: string[]) => lines.reduce((n, l) => n + Number(/checks=(\d+)/.exec(l)?.[1] ?? 0), 0);
    t.equal(sum(all), sum(twoDays), "the whole span: the same number of checks");

    // the next day's first run rolls yesterday up whole; partial rows expire after two days
    clock = at(24, 30);
    await rollUp(ctx);
    t.same(await read(at(0, 0)), await raw(at(0, 0)), "yesterday from the daily rollup: exact");
    clock = new Date(at(24, 30).getTime() + 3 * DAY);
    const removed = await expire(ctx);
    t.ok(removed.availability_partial >= 3, `old partial rows removed (${removed.availability_partial})`);
  });
}
