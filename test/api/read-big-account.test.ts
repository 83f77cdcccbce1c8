import t from "tap";
import { metrics } from "../../src/analytics/metrics.js";
import { availabilitySummary } from "../../src/availability/summary.js";
import type { UserActor } from "../../src/core/actor.js";
import type { Position } from "../../src/core/page.js";
import { rollUp } from "../../src/retention/rollups.js";
import { availabilitySamples, executions } from "../../src/stores/series/tables.js";
import { testApp } from "../helpers/app.js";
import { type BackendName, requireBackend } from "../helpers/backends.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * Issue #17, big accounts: the summary and analytics walk the caller's connections in pages of
 * ids (connections/scope.ts, connectionWalk). Checked here with an organization of more
 * connections than a page, some of them without any check, next to another tenant's: every page
 * walked with a small limit adds up to the one big page, the numbers are those of the samples
 * written, no other tenant's connection appears, and a connection moved out of the organization
 * or deleted leaves the members' answers at once. Both series backends, same answers.
 */

const DAY = 86_400_000;
const N = 23; // org connections with checks
const SILENT = 9; // org connections without any check
const results = new Map<BackendName, unknown>();

type Row = Record<string, unknown> & { connection_id: string };

for (const series of ["pglite", "questdb"] as BackendName[]) {
  t.test(`big account reads on ${series}`, async (t) => {
    if (!(await requireBackend(t, series))) return;
    const ta = await testApp(t, { series });
    const w = await seedTenants(ta);
    const db = ta.ctx.stores.db;
    const s = ta.ctx.stores.series;

    // org A gets N + SILENT more connections; ids scrambled, so byte order is not creation order
    // (the same ids on both backends, so their answers can be compared whole)
    const ids = Array.from(
      { length: N + SILENT },
      (_, i) =>
        `${((i * 2654435761) % 2 ** 32).toString(16).padStart(8, "0")}-0000-4000-8000-${String(i).padStart(12, "0")}`,
    );
    for (const [i, id] of ids.entries())
      await db.query(
        `INSERT INTO connections (id, user_id, organization_id, service_type, service_name, status, base_url)
         VALUES ($1, $2, $3, 'workflow_a', $4, 'active', 'http://127.0.0.1:1')`,
        [id, w.users.alice.id, w.orgs.orgA.id, `bulk ${i}`],
      );
    const checked = ids.slice(0, N);
    const now = ta.ctx.now();
    const today = Math.floor(now.getTime() / DAY) * DAY;
    // three days: two days ago and yesterday (rolled up), and today so far (raw); connection i
    // gets 3 + (i % 4) checks a day, the first one down every other day
    const expected = new Map<string, { checks: number; up: number }>();
    const daily = new Map<string, { checks: number; up: number }>();
    const rows = [];
    for (const [i, id] of checked.entries())
      for (let d = 2; d >= 0; d--) {
        const dayStart = today - d * DAY;
        const n = 3 + (i % 4);
        for (let k = 0; k < n; k++) {
          const ts = Math.min(dayStart + (k + 1) * 60_000, now.getTime() - (k + 1) * 1000);
          const available = !(k === 0 && (i + d) % 2 === 0);
          rows.push({
            ts: new Date(ts),
            connection_id: id,
            available,
            response_time_ms: 10 * (k + 1),
            synthetic: false,
            source: "probe",
          });
          const e = expected.get(id) ?? { checks: 0, up: 0 };
          e.checks += 1;
          e.up += available ? 1 : 0;
          expected.set(id, e);
          const dk = `${new Date(Math.floor(ts / DAY) * DAY).toISOString()}|${id}`;
          const de = daily.get(dk) ?? { checks: 0, up: 0 };
          de.checks += 1;
          de.up += available ? 1 : 0;
          daily.set(dk, de);
        }
      }
    // the other tenants' connections have checks too: they must never show
    for (const id of [w.conns.OB, w.conns.PB, w.conns.PC])
      rows.push({
        ts: new Date(now.getTime() - 5_000),
        connection_id: id,
        available: true,
        synthetic: false,
        source: "probe",
      });
    await s.append(availabilitySamples, rows);
    await s.append(
      executions,
      checked.flatMap((id, i) =>
        Array.from({ length: 1 + (i % 3) }, (_, k) => ({
          ts: new Date(today - DAY + k * 60_000),
          connection_id: id,
          execution_id: `e${k}`,
          status: k === 1 ? "error" : "success",
          duration_ms: 100 * (k + 1),
          updated_at: new Date(),
        })),
      ),
    );
    await s.waitVisible();
    await rollUp(ta.ctx);
    await s.waitVisible();

    const get = async (key: string, path: string) => {
      const r = await call(ta.app, key, "GET", path);
      t.equal(r.statusCode, 200, path);
      return r.json() as { data: Row[]; pagination: { next_cursor: string | null; has_more: boolean } };
    };
    /** Every page of a read, `limit` at a time, followed by its cursors. */
    const walk = async (key: string, path: string, limit: number) => {
      const out: Row[] = [];
      let cursor: string | null = null;
      for (let i = 0; i < 200; i++) {
        const page = await get(key, `${path}&limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`);
        t.ok(page.data.length <= limit, "never more than the limit");
        out.push(...page.data);
        cursor = page.pagination.next_cursor;
        if (!cursor) return out;
        t.equal(page.data.length, limit, "a page before the last is full");
      }
      throw new Error("too many pages");
    };
    /** A summary's rows without `until`, which is each request's clock. */
    const bare = (rs: Row[]) => rs.map(({ until: _, ...r }) => r);
    const dave = w.keys.davePersonal; // a plain member of org A
    const mine = new Set([...ids, w.conns.OA]);

    // the summary: one row per org connection with checks, by id, the numbers of the samples
    const summary = (await get(dave, "/v1/availability/summary?window=week&limit=1000")).data;
    t.same(
      summary.map((r) => r.connection_id),
      [...checked].sort(),
      "every org connection with checks, in id order; none without checks, no other tenant's",
    );
    for (const r of summary) {
      const e = expected.get(r.connection_id);
      t.same([r.checks, r.available_checks], [e?.checks, e?.up], `totals of ${r.connection_id.slice(0, 8)}`);
    }
    for (const limit of [1, 4, 7])
      t.same(
        bare(await walk(dave, "/v1/availability/summary?window=week", limit)),
        bare(summary),
        `pages of ${limit}`,
      );
    const dayWindow = (await get(dave, "/v1/availability/summary?window=day&limit=1000")).data;
    t.ok(
      dayWindow.every((r) => mine.has(r.connection_id)),
      "day window: org connections only",
    );
    t.same(
      (await walk(dave, "/v1/availability/summary?window=day", 5)).map((r) => r.connection_id),
      dayWindow.map((r) => r.connection_id),
      "day window pages",
    );

    // analytics: newest day first, then connection id descending, over the two readable days
    const since = new Date(today - 2 * DAY).toISOString();
    const avail = (await get(dave, `/v1/analytics?metric_type=daily_availability&since=${since}&limit=1000`))
      .data;
    const want = [...daily]
      .map(([k, e]) => {
        const [bucket, id] = k.split("|") as [string, string];
        return { bucket, id, value: Math.round((e.up / e.checks) * 100_000) / 1000, n: e.checks };
      })
      .sort((a, b) => (a.bucket !== b.bucket ? (a.bucket < b.bucket ? 1 : -1) : a.id < b.id ? 1 : -1));
    t.same(
      avail.map((r) => [r.bucket_start, r.connection_id, r.value, r.sample_count]),
      want.map((r) => [r.bucket, r.id, r.value, r.n]),
      "daily availability of every org connection and day, as written",
    );
    for (const limit of [1, 6, 50])
      t.same(
        await walk(dave, `/v1/analytics?metric_type=daily_availability&since=${since}`, limit),
        avail,
        `analytics pages of ${limit}`,
      );
    const execs = (await get(dave, `/v1/analytics?metric_type=weekly_executions&since=${since}&limit=1000`))
      .data;
    t.equal(execs.length, N, "one weekly row per connection with runs");
    t.same(
      await walk(dave, `/v1/analytics?metric_type=weekly_executions&since=${since}`, 4),
      execs,
      "weekly executions pages",
    );
    const one = checked[5] as string;
    const single = (
      await get(
        dave,
        `/v1/analytics?metric_type=daily_availability&since=${since}&connection_id=${one}&limit=1000`,
      )
    ).data;
    t.same(
      single,
      avail.filter((r) => r.connection_id === one),
      "one connection: its rows of the whole",
    );
    t.same(
      await walk(dave, `/v1/analytics?metric_type=daily_availability&since=${since}&connection_id=${one}`, 2),
      single,
      "one connection, in pages",
    );

    // the same walks with tiny chunks of ids, so every read crosses many pages of connections
    const daveActor: UserActor = {
      type: "user",
      userId: w.users.dave.id,
      via: "session",
      permissions: new Set(),
    };
    for (const limit of [3, 1000]) {
      const rowsOut: unknown[] = [];
      let after: Position | undefined;
      for (let i = 0; i < 100; i++) {
        const page = await metrics(
          ta.ctx,
          daveActor,
          {
            metricType: "daily_availability",
            since: new Date(since),
            limit,
            ...(after ? { after } : {}),
          },
          { min: 2, max: 3 },
        );
        rowsOut.push(...page.rows);
        if (!page.next) break;
        after = page.next;
      }
      t.same(rowsOut, avail, `analytics in chunks of 2-3 ids, pages of ${limit}`);
      const sums: unknown[] = [];
      after = undefined;
      for (let i = 0; i < 100; i++) {
        const page = await availabilitySummary(
          ta.ctx,
          daveActor,
          { window: "week", limit, ...(after ? { after } : {}) },
          2,
        );
        sums.push(...page.rows);
        if (!page.next) break;
        after = page.next;
      }
      t.same(bare(sums as Row[]), bare(summary), `summary in chunks of 2 ids, pages of ${limit}`);
    }

    // nothing of org A for bob, whose org B connection has checks
    const bobs = (await get(w.keys.bobPersonal, "/v1/availability/summary?window=week&limit=1000")).data;
    t.ok(
      bobs.every((r) => !mine.has(r.connection_id)),
      "bob sees no org A connection",
    );

    // a connection moved out of the organization (made alice's personal) leaves dave's answers at once
    const moved = checked[3] as string;
    const mv = await call(ta.app, w.keys.alicePersonal, "PUT", `/v1/connections/${moved}`, {
      organization_id: null,
    });
    t.equal(mv.statusCode, 200, mv.body);
    const after = (await get(dave, "/v1/availability/summary?window=week&limit=1000")).data;
    t.same(
      after.map((r) => r.connection_id),
      summary.map((r) => r.connection_id).filter((id) => id !== moved),
      "moved out: gone from a member's summary",
    );
    t.notOk(
      (await walk(dave, `/v1/analytics?metric_type=daily_availability&since=${since}`, 7)).some(
        (r) => r.connection_id === moved,
      ),
      "moved out: gone from a member's analytics",
    );
    t.ok(
      (await get(w.keys.alicePersonal, "/v1/availability/summary?window=week&limit=1000")).data.some(
        (r) => r.connection_id === moved,
      ),
      "still the mover's own",
    );
    // a deleted connection leaves everyone's answers
    const gone = checked[7] as string;
    const del = await call(ta.app, w.keys.alicePersonal, "DELETE", `/v1/connections/${gone}`);
    t.ok([200, 204].includes(del.statusCode), del.body);
    for (const key of [dave, w.keys.alicePersonal]) {
      const rowsNow = [
        ...(await walk(key, "/v1/availability/summary?window=week", 6)),
        ...(await walk(key, `/v1/analytics?metric_type=daily_availability&since=${since}`, 9)),
      ];
      t.notOk(
        rowsNow.some((r) => r.connection_id === gone),
        "deleted: gone",
      );
    }

    // the window's bounds follow each run's clock; everything else must match
    results.set(series, {
      summary: summary.map(({ since: _s, until: _u, ...r }) => r),
      avail,
      execs,
    });
  });
}

t.test("the same shape of answers on both backends", async (t) => {
  const sql = results.get("pglite");
  const qdb = results.get("questdb");
  if (!sql || !qdb) {
    if (process.env.CI === "true") t.fail("both backends must have run");
    else t.plan(0, "QuestDB unavailable");
    return;
  }
  t.same(qdb, sql);
});
