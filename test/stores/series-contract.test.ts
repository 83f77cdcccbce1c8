import t from "tap";
import {
  availabilitySamples,
  executions,
  gatewayHeartbeats,
  gatewayModelUsage,
  type RowOf,
  usageEntries,
} from "../../src/stores/series/tables.js";
import { type SeriesStore, SeriesValidationError } from "../../src/stores/series/types.js";
import { AWKWARD_TEXT } from "../helpers/awkward-text.js";
import { ALL_BACKENDS, freshSeries, requireBackend } from "../helpers/backends.js";

type Sample = RowOf<typeof availabilitySamples>;
const DAY = 86_400_000;
const MONDAY = Date.parse("2026-01-05T00:00:00.000Z");

const sample = (
  ts: number,
  connection_id: string,
  available: boolean,
  response_time_ms: number | null,
): Sample => ({
  ts: new Date(ts),
  connection_id,
  available,
  response_time_ms,
  synthetic: false,
  source: "probe",
  ...(available ? {} : { reason: "timeout", error: "no answer within 10000 ms" }),
});

async function allRows(series: SeriesStore, limit: number, where = {}) {
  const seen: Sample[] = [];
  let after: Awaited<ReturnType<typeof series.page>>["next"] = null;
  for (let i = 0; i < 1000; i++) {
    const page = await series.page(availabilitySamples, { ...where, limit, ...(after ? { after } : {}) });
    seen.push(...page.rows);
    if (!page.next) break;
    after = page.next;
  }
  return seen;
}

for (const backend of ALL_BACKENDS) {
  t.test(`series contract: ${backend}`, async (t) => {
    if (!(await requireBackend(t, backend))) return;
    const series = await freshSeries(t, backend);

    await t.test("every column of every table round-trips", async (t) => {
      const ts = new Date(MONDAY + 1234);
      await series.append(availabilitySamples, [
        {
          ...sample(MONDAY + 1234, "c1", false, 812.5),
          status_code: 503,
          reason: "http_status",
          error: "HTTP 503",
          maintenance: true,
        },
        // a row that does not say: maintenance reads false (docs/maintenance.md)
        sample(MONDAY + 1000, "c0", true, 10),
      ]);
      await series.append(executions, [
        {
          ts,
          connection_id: "c1",
          execution_id: "e-1",
          workflow_id: "wf-9",
          status: "error",
          mode: "trigger",
          stopped_at: new Date(MONDAY + 4234),
          duration_ms: 3000,
          error: "node failed",
          updated_at: new Date(MONDAY + 5000),
        },
      ]);
      await series.append(usageEntries, [
        {
          ts,
          id: "u-1",
          connection_id: "c1",
          entity: "gpt-4o",
          usage_amount: 1500,
          usage_entity: "tokens",
          cost_cents: 2.25,
          metadata: '{"k":"v"}',
        },
      ]);
      await series.append(gatewayHeartbeats, [
        {
          ts,
          connection_id: "g1",
          heartbeat_id: "hb-1",
          status: "healthy",
          healthy: true,
          latency_ms: 42,
          version: "1.2.3",
          pid_alive: true,
          period_start: new Date(MONDAY),
          period_end: ts,
          input_tokens: 9_000_000_000,
          output_tokens: 20,
          cache_read_tokens: 0,
          cache_write_tokens: 5,
          request_count: 3,
          cost_usd: 0.0125,
          received_at: new Date(MONDAY + 2000),
        },
      ]);
      await series.append(gatewayModelUsage, [
        {
          ts,
          connection_id: "g1",
          heartbeat_id: "hb-1",
          model: "claude-sonnet-4-5",
          input_tokens: 10,
          output_tokens: 20,
          cost_usd: 0.0003,
          cost_source: "priced",
        },
      ]);
      await series.waitVisible();

      const [s, unflagged] = (await series.page(availabilitySamples, { limit: 10 })).rows;
      t.same(s, {
        ts,
        connection_id: "c1",
        available: false,
        response_time_ms: 812.5,
        status_code: 503,
        reason: "http_status",
        error: "HTTP 503",
        synthetic: false,
        source: "probe",
        maintenance: true,
      });
      t.equal(unflagged?.maintenance, false, "a sample written without the flag reads maintenance: false");
      const e = (await series.page(executions, { limit: 10 })).rows[0];
      t.equal(e?.stopped_at?.toISOString(), new Date(MONDAY + 4234).toISOString());
      t.equal(e?.status, "error");
      t.equal(e?.workflow_id, "wf-9");
      const u = (await series.page(usageEntries, { limit: 10 })).rows[0];
      t.same(u, {
        ts,
        id: "u-1",
        connection_id: "c1",
        entity: "gpt-4o",
        usage_amount: 1500,
        usage_entity: "tokens",
        custom_name: null,
        cost_cents: 2.25,
        workflow_id: null,
        execution_id: null,
        metadata: '{"k":"v"}',
      });
      const h = (await series.page(gatewayHeartbeats, { limit: 10 })).rows[0];
      t.equal(h?.input_tokens, 9_000_000_000, "longs beyond 32 bits survive");
      t.equal(h?.system, null);
      t.equal(h?.period_end?.getTime(), ts.getTime());
      const m = (await series.page(gatewayModelUsage, { limit: 10 })).rows[0];
      t.equal(m?.cost_usd, 0.0003);
      t.equal(m?.cost_source, "priced");
    });

    await t.test("text that needs escaping round-trips in symbols and strings", async (t) => {
      // without the empty string: the store refuses an empty symbol ("must not be empty")
      const tricky = AWKWARD_TEXT.filter((v) => v !== "");
      const base = MONDAY + 70 * DAY;
      await series.append(
        availabilitySamples,
        tricky.map((v, i) => ({
          ts: new Date(base + i),
          connection_id: `conn ${v}`,
          available: false,
          response_time_ms: null,
          reason: v,
          error: v,
          synthetic: false,
          source: "probe",
        })),
      );
      await series.waitVisible();
      const page = await series.page(availabilitySamples, {
        since: new Date(base),
        until: new Date(base + tricky.length),
        limit: 100,
      });
      const got = page.rows.map((r) => [r.connection_id, r.reason, r.error]).reverse();
      t.same(
        got,
        tricky.map((v) => [`conn ${v}`, v, v]),
      );
    });

    await t.test("a write on an existing key replaces the row (idempotent upsert)", async (t) => {
      const at = MONDAY + 7 * DAY;
      await series.append(executions, [
        {
          ts: new Date(at),
          connection_id: "c2",
          execution_id: "run-1",
          status: "running",
          updated_at: new Date(at),
        },
      ]);
      await series.append(executions, [
        {
          ts: new Date(at),
          connection_id: "c2",
          execution_id: "run-1",
          status: "success",
          duration_ms: 1500,
          updated_at: new Date(at + 1500),
        },
        // the same key twice in one batch: the later row wins
        {
          ts: new Date(at),
          connection_id: "c2",
          execution_id: "run-2",
          status: "running",
          updated_at: new Date(at),
        },
        {
          ts: new Date(at),
          connection_id: "c2",
          execution_id: "run-2",
          status: "error",
          updated_at: new Date(at + 1),
        },
      ]);
      await series.waitVisible();
      const rows = (
        await series.page(executions, {
          where: [{ column: "connection_id", op: "eq", value: "c2" }],
          limit: 10,
        })
      ).rows;
      t.equal(rows.length, 2, "one row per key");
      t.same(
        rows.map((r) => [r.execution_id, r.status, r.duration_ms]),
        [
          ["run-2", "error", null],
          ["run-1", "success", 1500],
        ],
      );
    });

    await t.test("keyset pages: newest first, no repeats, no skips, bounds and filters", async (t) => {
      const base = MONDAY + 14 * DAY;
      const rows: Sample[] = [];
      // 3 connections share each timestamp, so the tiebreaker matters.
      for (let i = 0; i < 12; i++)
        for (const c of ["ka", "kb", "kc"]) rows.push(sample(base + i * 60_000, c, i % 4 !== 0, 100 + i));
      await series.append(availabilitySamples, rows);
      await series.waitVisible();
      const range = { since: new Date(base), until: new Date(base + DAY) };

      const seen = await allRows(series, 5, range);
      t.equal(seen.length, 36, "every row once");
      t.equal(new Set(seen.map((r) => `${r.ts.getTime()}/${r.connection_id}`)).size, 36, "no repeats");
      const order = seen.map((r) => [r.ts.getTime(), r.connection_id] as const);
      const sorted = [...order].sort((a, b) => b[0] - a[0] || (a[1] < b[1] ? 1 : a[1] > b[1] ? -1 : 0));
      t.same(order, sorted, "newest first, ties by key descending");

      // rows arriving while a client pages (newer than its first page) neither repeat nor shift the pages
      const first = await series.page(availabilitySamples, { ...range, limit: 10 });
      await series.append(availabilitySamples, [sample(base + 20 * 60_000, "ka", true, 1)]);
      await series.waitVisible();
      const rest: Sample[] = [];
      let after = first.next;
      while (after) {
        const p = await series.page(availabilitySamples, { ...range, limit: 10, after });
        rest.push(...p.rows);
        after = p.next;
      }
      t.equal(
        first.rows.length + rest.length,
        36,
        "paging over a growing table still yields the original rows exactly once",
      );

      const since = new Date(base + 6 * 60_000);
      const until = new Date(base + 9 * 60_000);
      const bounded = await allRows(series, 100, { since, until });
      t.equal(bounded.length, 9, "since inclusive, until exclusive");
      t.ok(bounded.every((r) => r.ts >= since && r.ts < until));

      const down = await allRows(series, 100, {
        ...range,
        where: [{ column: "available", op: "eq", value: false }],
      });
      t.equal(down.length, 9, "boolean filter");
      const two = await allRows(series, 100, {
        ...range,
        where: [{ column: "connection_id", op: "in", value: ["ka", "kc"] }],
      });
      t.equal(two.length, 25, "IN filter (ka includes the row added while paging)");
      const notKa = await allRows(series, 100, {
        ...range,
        where: [{ column: "connection_id", op: "ne", value: "ka" }],
      });
      t.equal(notKa.length, 24, "!= filter");
    });

    await t.test("aggregates by UTC calendar bucket match the rows", async (t) => {
      // 2026-03-01 is a Sunday: the week bucket of the 1st is Monday 2026-02-23.
      const start = Date.parse("2026-02-27T00:00:00.000Z");
      const rows: Sample[] = [];
      for (let d = 0; d < 6; d++) {
        for (let h = 0; h < 4; h++) {
          rows.push(sample(start + d * DAY + h * 3_600_000, "agg1", h !== 0, 10 * (h + 1)));
          if (d % 2 === 0) rows.push(sample(start + d * DAY + h * 3_600_000, "agg2", true, 5));
        }
      }
      await series.append(availabilitySamples, rows);
      await series.waitVisible();
      const where = [{ column: "connection_id", op: "in" as const, value: ["agg1", "agg2"] }];
      const measures = {
        checks: { fn: "count" as const },
        up: { fn: "countTrue" as const, column: "available" },
        avg_ms: { fn: "avg" as const, column: "response_time_ms" },
        max_ms: { fn: "max" as const, column: "response_time_ms" },
      };
      const daily = await series.aggregate(availabilitySamples, {
        bucket: "day",
        where,
        since: new Date(start),
        until: new Date(start + 6 * DAY),
        groupBy: ["connection_id"],
        measures,
      });
      t.equal(daily.length, 9, "6 days for agg1, 3 for agg2");
      const first = daily[0];
      t.equal(first?.bucket?.toISOString(), "2026-02-27T00:00:00.000Z");
      t.same(
        {
          c: first?.connection_id,
          checks: first?.checks,
          up: first?.up,
          avg: first?.avg_ms,
          max: first?.max_ms,
        },
        { c: "agg1", checks: 4, up: 3, avg: 25, max: 40 },
      );

      const weekly = await series.aggregate(availabilitySamples, {
        bucket: "week",
        where,
        measures: { checks: { fn: "count" } },
      });
      t.same(
        weekly.map((r) => [r.bucket?.toISOString(), r.checks]),
        [
          // Fri 27, Sat 28, Sun 1: agg1 3 days x 4, agg2 (27th and 1st) 2 x 4
          ["2026-02-23T00:00:00.000Z", 20],
          // Mon 2, Tue 3, Wed 4: agg1 3 x 4, agg2 (3rd) 1 x 4
          ["2026-03-02T00:00:00.000Z", 16],
        ],
        "weeks start on Monday, UTC",
      );
      const monthly = await series.aggregate(availabilitySamples, {
        bucket: "month",
        where,
        groupBy: ["connection_id"],
        measures: { checks: { fn: "count" }, up: { fn: "countTrue", column: "available" } },
      });
      t.same(
        monthly.map((r) => [r.bucket?.toISOString(), r.connection_id, r.checks, r.up]),
        [
          ["2026-02-01T00:00:00.000Z", "agg1", 8, 6],
          ["2026-02-01T00:00:00.000Z", "agg2", 4, 4],
          ["2026-03-01T00:00:00.000Z", "agg1", 16, 12],
          ["2026-03-01T00:00:00.000Z", "agg2", 8, 8],
        ],
      );
    });

    await t.test("percentiles: nearest rank, exact, nulls ignored, the same on every backend", async (t) => {
      const start = Date.parse("2026-04-06T00:00:00.000Z");
      const rows: Sample[] = [];
      // pct1: 1..100 ms in one hour; pct2: 20 values, 19 of 10 ms and one of 2000 ms, plus nulls
      for (let i = 1; i <= 100; i++) rows.push(sample(start + i * 1000, "pct1", true, i));
      for (let i = 0; i < 20; i++) rows.push(sample(start + i * 1000, "pct2", true, i === 7 ? 2000 : 10));
      for (let i = 0; i < 5; i++) rows.push(sample(start + 50_000 + i, "pct2", false, null));
      await series.append(availabilitySamples, rows);
      await series.waitVisible();
      const out = await series.aggregate(availabilitySamples, {
        bucket: "all",
        since: new Date(start),
        until: new Date(start + 3_600_000),
        where: [{ column: "connection_id", op: "in", value: ["pct1", "pct2"] }],
        groupBy: ["connection_id"],
        measures: {
          p95: { fn: "percentile", column: "response_time_ms", p: 0.95 },
          p50: { fn: "percentile", column: "response_time_ms", p: 0.5 },
          n: { fn: "count" },
        },
      });
      const by = Object.fromEntries(out.map((r) => [r.connection_id, r]));
      t.equal(by.pct1?.p95, 95, "p95 of 1..100 is 95 (nearest rank, exact)");
      t.equal(by.pct1?.p50, 50, "p50 of 1..100 is 50");
      t.equal(by.pct1?.n, 100, "with the other measures of the same groups");
      t.equal(by.pct2?.p95, 10, "one slow check in 20 is the p100, not the p95");
      t.equal(by.pct2?.n, 25, "rows without a value count, and are left out of the percentile");
      await t.rejects(
        async () =>
          series.aggregate(availabilitySamples, {
            bucket: "all",
            measures: { bad: { fn: "percentile", column: "response_time_ms", p: 95 } },
          }),
        /between 0 and 1/,
      );
    });

    await t.test("minute and 5-minute buckets, and logarithmic bins, alike on every backend", async (t) => {
      const start = Date.parse("2026-04-07T10:00:00.000Z");
      const rows: Sample[] = [];
      // bin1: 12 minutes of one check each at second 30, 100 ms, but 600 ms at 10:07; one null
      for (let m = 0; m < 12; m++)
        rows.push(sample(start + m * 60_000 + 30_000, "bin1", true, m === 7 ? 600 : 100));
      rows.push(sample(start + 3 * 60_000 + 40_000, "bin1", false, null));
      await series.append(availabilitySamples, rows);
      await series.waitVisible();
      const q = {
        since: new Date(start),
        until: new Date(start + 3_600_000),
        where: [{ column: "connection_id", op: "eq" as const, value: "bin1" }],
        groupBy: ["connection_id"],
      };
      const minutes = await series.aggregate(availabilitySamples, {
        ...q,
        bucket: "minute",
        measures: { n: { fn: "count" } },
      });
      t.same(
        minutes.map((r) => [(r.bucket as Date).toISOString().slice(11, 16), r.n]),
        [...Array(12).keys()].map((m) => [`10:${String(m).padStart(2, "0")}`, m === 3 ? 2 : 1]),
        "one bucket a minute, at the minute's start",
      );
      const fives = await series.aggregate(availabilitySamples, {
        ...q,
        bucket: "five_minutes",
        measures: { n: { fn: "count" } },
      });
      t.same(
        fives.map((r) => [(r.bucket as Date).toISOString().slice(11, 16), r.n]),
        [
          ["10:00", 6],
          ["10:05", 5],
          ["10:10", 2],
        ],
        "5-minute buckets aligned to :00, :05, :10",
      );
      const bins = await series.aggregate(availabilitySamples, {
        ...q,
        bucket: "all",
        bin: { column: "response_time_ms", perDoubling: 16 },
        measures: {
          n: { fn: "count", column: "response_time_ms" },
          total: { fn: "sum", column: "response_time_ms" },
        },
      });
      const bin = (v: number) => Math.floor(Math.log(v + 1) * (16 / Math.LN2) + 1e-9);
      t.same(
        bins
          .map((r) => [r.bin, r.n, r.total])
          .sort((a, b) => Number(a[0] ?? Infinity) - Number(b[0] ?? Infinity)),
        [
          [bin(100), 11, 1100],
          [bin(600), 1, 600],
          [null, 0, null],
        ],
        "floor(log2(v + 1) · 16) per value, the null value in a bin of its own",
      );
      await t.rejects(
        async () =>
          series.aggregate(availabilitySamples, {
            ...q,
            bucket: "all",
            bin: { column: "response_time_ms", perDoubling: 16 },
            measures: { p: { fn: "percentile", column: "response_time_ms", p: 0.5 } },
          }),
        /cannot be binned/,
      );
    });

    await t.test("bad rows are rejected naming the field, and nothing of the batch is stored", async (t) => {
      const at = MONDAY + 30 * DAY;
      const good = sample(at, "bad1", true, 10);
      const cases: [string, Record<string, unknown>, RegExp][] = [
        [
          "NaN",
          { response_time_ms: Number.NaN },
          /availability_samples\[1\]\.response_time_ms: must be a finite number/,
        ],
        [
          "Infinity",
          { response_time_ms: Number.POSITIVE_INFINITY },
          /response_time_ms: must be a finite number/,
        ],
        ["string for number", { response_time_ms: "12" }, /response_time_ms: must be a finite number/],
        ["invalid date", { ts: new Date("nope") }, /availability_samples\[1\]\.ts: must be a valid date/],
        ["missing required", { available: undefined }, /available: is required/],
        ["unknown column", { colour: "red" }, /colour: is not a column/],
      ];
      for (const [name, patch, message] of cases) {
        const bad = { ...sample(at + 1000, "bad1", true, 5), ...patch } as unknown as Sample;
        await t.rejects(
          series.append(availabilitySamples, [good, bad]),
          { name: SeriesValidationError.name, message },
          name,
        );
      }
      await t.rejects(
        series.append(gatewayHeartbeats, [
          { ts: new Date(at), input_tokens: 1.5 } as unknown as RowOf<typeof gatewayHeartbeats>,
        ]),
        SeriesValidationError,
      );
      await series.waitVisible();
      const stored = await series.page(availabilitySamples, {
        where: [{ column: "connection_id", op: "eq", value: "bad1" }],
        limit: 10,
      });
      t.equal(stored.rows.length, 0, "nothing partial stored");
      await t.rejects(
        series.page(availabilitySamples, { where: [{ column: "nope", op: "eq", value: 1 }], limit: 1 }),
        /nope: is not a column/,
      );
    });

    await t.test("offset pages, counts, whole-range aggregates, multi-table writes", async (t) => {
      const at = MONDAY + 50 * DAY;
      const rows = Array.from({ length: 9 }, (_, i) => sample(at + i * 1000, "off1", i % 3 !== 0, i));
      await series.write([
        { table: availabilitySamples, rows },
        {
          table: usageEntries,
          rows: [
            {
              ts: new Date(at),
              id: "w1",
              connection_id: "off1",
              entity: "m1",
              usage_amount: 10,
              usage_entity: "tokens",
              cost_cents: 1,
            },
            {
              ts: new Date(at + 1),
              id: "w2",
              connection_id: "off1",
              entity: "m1",
              usage_amount: 5,
              usage_entity: "tokens",
              cost_cents: 2,
            },
            {
              ts: new Date(at + 2),
              id: "w3",
              connection_id: "off1",
              entity: "m2",
              usage_amount: 3,
              usage_entity: "custom",
              custom_name: "pages",
              cost_cents: 0,
            },
          ],
        },
      ]);
      await series.waitVisible();
      const where = [{ column: "connection_id", op: "eq" as const, value: "off1" }];
      t.equal(await series.count(availabilitySamples, { where }), 9);
      t.equal(await series.count(availabilitySamples, { where, since: new Date(at + 5000) }), 4);
      const p2 = await series.page(availabilitySamples, { where, limit: 4, offset: 4 });
      t.same(
        p2.rows.map((r) => r.response_time_ms),
        [4, 3, 2, 1],
        "offset skips the newest 4",
      );
      t.ok(p2.next, "more after");
      const p3 = await series.page(availabilitySamples, { where, limit: 4, offset: 8 });
      t.same(
        p3.rows.map((r) => r.response_time_ms),
        [0],
      );
      t.equal(p3.next, null);

      const totals = await series.aggregate(usageEntries, {
        bucket: "all",
        where,
        groupBy: ["entity", "usage_entity"],
        measures: {
          n: { fn: "count" },
          amount: { fn: "sum", column: "usage_amount" },
          cents: { fn: "sum", column: "cost_cents" },
        },
      });
      t.same(
        totals.map((r) => [r.bucket, r.entity, r.usage_entity, r.n, r.amount, r.cents]),
        [
          [null, "m1", "tokens", 2, 15, 3],
          [null, "m2", "custom", 1, 3, 0],
        ],
      );
      const grand = await series.aggregate(usageEntries, {
        bucket: "all",
        where,
        measures: { n: { fn: "count" } },
      });
      t.same(
        grand.map((r) => r.n),
        [3],
      );
      await t.rejects(
        series.write([
          { table: availabilitySamples, rows: [sample(at + 99_000, "off2", true, 1)] },
          { table: usageEntries, rows: [{ ts: new Date(at) } as never] },
        ]),
        SeriesValidationError,
        "a bad row in any table rejects the whole write",
      );
      await series.waitVisible();
      t.equal(
        await series.count(availabilitySamples, {
          where: [{ column: "connection_id", op: "eq", value: "off2" }],
        }),
        0,
      );
    });

    await t.test("concurrent appends all commit, each exactly once", async (t) => {
      const at = MONDAY + 40 * DAY;
      await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          series.append(availabilitySamples, [
            sample(at + i, `cc${i % 4}`, true, i),
            sample(at + i + 100, `cc${i % 4}`, true, i),
          ]),
        ),
      );
      await series.waitVisible();
      const rows = await allRows(series, 1000, { since: new Date(at), until: new Date(at + DAY) });
      t.equal(rows.length, 80);
    });
  });
}
