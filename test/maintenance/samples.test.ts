import t, { type Test } from "tap";
import { writeSamples, type Sample } from "../../src/availability/samples.js";
import { availabilityByDay, availabilityByMonth } from "../../src/availability/totals.js";
import { uptimeBars } from "../../src/availability/uptime-bars.js";
import { systemActor } from "../../src/core/actor.js";
import { ProbeWorker } from "../../src/probes/worker.js";
import { rollUp } from "../../src/retention/rollups.js";
import { startWorkflowA } from "../../src/sim/workflow-a.js";
import { type TestApp, testApp } from "../helpers/app.js";
import { ALL_BACKENDS, requireBackend } from "../helpers/backends.js";
import { sampleHeartbeat } from "../helpers/route-samples.js";
import { call, seedTenants } from "../helpers/tenants.js";

/**
 * What a maintenance window does to a connection (docs/maintenance.md), on every backend: its
 * checks still run and are stored, flagged maintenance; no incident opens and nothing is sent;
 * uptime leaves those checks out and the summary, the rollups and the uptime bars count them
 * apart. Every backend gives the same numbers.
 */

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

const fault = (url: string, f: string) =>
  fetch(`${url}/__sim/state`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ fault: f }),
  });

/** Runs one scheduling slot: makes the connection due, lets the worker claim and check it. */
async function slot(ta: TestApp, worker: ProbeWorker, id: string) {
  await ta.ctx.stores.db.query("UPDATE connections SET next_check_at = now() WHERE id = $1", [id]);
  await worker.tick();
  await worker.idle();
}

interface Row {
  checked_at: string;
  available: boolean;
  maintenance: boolean;
}

for (const backend of ALL_BACKENDS) {
  const stores = { relational: backend === "postgres" ? "postgres" : "pglite", series: backend } as const;

  t.test(
    `a window stops incidents while checks fail; its checks are flagged and left out of uptime (${backend})`,
    async (t: Test) => {
      if (!(await requireBackend(t, backend))) return;
      const ta = await testApp(t, stores);
      const { app, ctx } = ta;
      const db = ctx.stores.db;
      const w = await seedTenants(ta);
      const alice = w.keys.alicePersonal;
      const sim = await startWorkflowA();
      t.teardown(() => sim.close());
      const worker = new ProbeWorker(ctx, { timeoutMs: 300 });
      t.teardown(() => worker.stop());
      await worker.tick(); // the seeded connections' first checks out of the way
      await worker.idle();

      const made = await call(app, alice, "POST", "/v1/connections", {
        service_type: "workflow_a",
        service_name: "sim n8n",
        base_url: sim.url,
        api_key: "sim-api-key",
      });
      const id = (made.json() as { connection: { id: string } }).connection.id;
      await slot(ta, worker, id);
      const status = async () =>
        (await db.query<{ status: string }>("SELECT status FROM connections WHERE id = $1", [id])).rows[0]
          ?.status;
      t.equal(await status(), "active", "a first successful check, before any window");

      const win = await call(app, alice, "POST", "/v1/maintenance-windows", {
        connection_ids: [id],
        starts_at: new Date(Date.now() - 30 * MIN).toISOString(),
        ends_at: new Date(Date.now() + HOUR).toISOString(),
      });
      t.equal(win.statusCode, 201, win.body);
      const windowId = (win.json() as { id: string }).id;

      await fault(sim.url, "down");
      for (let i = 0; i < 4; i++) await slot(ta, worker, id);
      t.equal(await status(), "error", "the checks ran and failed: the status says so");
      const incidents = async () =>
        (await db.query<{ status: string }>("SELECT status FROM incidents WHERE connection_id = $1", [id]))
          .rows;
      const notifications = async () =>
        (await db.query("SELECT 1 FROM notifications WHERE connection_id = $1", [id])).rows.length;
      t.same(await incidents(), [], "4 failed checks under maintenance: no incident");
      t.equal(await notifications(), 0, "and nothing sent");

      await ctx.stores.series.waitVisible();
      const rows = async () => {
        await ctx.stores.series.waitVisible();
        const res = await call(app, alice, "GET", `/v1/availability?connection_id=${id}&limit=100`);
        t.equal(res.statusCode, 200, res.body);
        return (res.json() as { data: Row[] }).data;
      };
      const samples = await rows();
      t.same(
        samples.map((s) => [s.available, s.maintenance]),
        [
          [false, true],
          [false, true],
          [false, true],
          [false, true],
          [true, false],
        ],
        "every check stored, newest first: those under the window carry maintenance: true",
      );
      const summary = async () => {
        const res = await call(app, alice, "GET", `/v1/availability/summary?window=day&connection_id=${id}`);
        t.equal(res.statusCode, 200, res.body);
        return (res.json() as { data: Record<string, unknown>[] }).data[0];
      };
      t.match(
        await summary(),
        { checks: 1, available_checks: 1, maintenance_checks: 4, uptime_percent: 100 },
        "uptime leaves the checks under maintenance out",
      );
      const bar = (await uptimeBars(ctx, systemActor("test"), [id], 2)).get(id);
      t.match(
        bar,
        { checks: 1, available: 1, maintenance: 4, uptimePercent: 100 },
        "the uptime bar counts them apart",
      );
      t.match(bar?.cells[1], { checks: 1, available: 1, maintenance: 4 }, "in today's cell");

      // the window removed, the run of failures opens the incident at the next failed check
      t.equal((await call(app, alice, "DELETE", `/v1/maintenance-windows/${windowId}`)).statusCode, 200);
      await slot(ta, worker, id);
      t.same(await incidents(), [{ status: "open" }], "once the window is gone, the failing run opens one");
      t.equal(await notifications(), 1, "and its failure e-mail is queued");
      t.same(
        (await rows()).slice(0, 2).map((s) => s.maintenance),
        [false, true],
        "the new check is not under maintenance; those before keep their flag",
      );
      t.match(await summary(), { checks: 2, available_checks: 1, maintenance_checks: 4, uptime_percent: 50 });

      // a heartbeat under maintenance is flagged too (bob's organization gateway)
      const hb = await call(app, w.keys.bobOrgB, "POST", "/v1/maintenance-windows", {
        connection_ids: [w.conns.OB],
        starts_at: new Date(Date.now() - 10 * MIN).toISOString(),
        ends_at: new Date(Date.now() + HOUR).toISOString(),
      });
      t.equal(hb.statusCode, 201, hb.body);
      const beat = await call(app, w.keys.ingest, "POST", "/v1/gateway/ingest", sampleHeartbeat(new Date()));
      t.equal(beat.statusCode, 201, beat.body);
      await ctx.stores.series.waitVisible();
      const gw = await call(
        app,
        w.keys.bobOrgB,
        "GET",
        `/v1/availability?connection_id=${w.conns.OB}&limit=10`,
      );
      t.match(
        (gw.json() as { data: Row[] }).data,
        [{ available: true, maintenance: true }],
        "the heartbeat's sample",
      );
    },
  );

  t.test(
    `rollups, summaries and bars count maintenance apart, the same on every backend (${backend})`,
    async (t: Test) => {
      if (!(await requireBackend(t, backend))) return;
      const ta = await testApp(t, stores);
      const { app, ctx } = ta;
      const w = await seedTenants(ta);
      const id = w.conns.PA;
      const T0 = Date.parse("2026-11-19T00:00:00Z");
      let clock = new Date(T0 + 3 * DAY + 15 * HOUR); // 2026-11-22T15:00Z
      ctx.now = () => clock;

      // Nov 20 12:00 to Nov 23 00:00 UTC: half of the 20th, the whole 21st, the 22nd so far
      const res = await call(app, w.keys.alicePersonal, "POST", "/v1/maintenance-windows", {
        connection_ids: [id],
        starts_at: new Date(T0 + DAY + 12 * HOUR).toISOString(),
        ends_at: new Date(T0 + 4 * DAY).toISOString(),
      });
      t.equal(res.statusCode, 201, res.body);

      // a check every 10 minutes since the 19th: up outside the window, down inside it
      const inWindow = (ts: number) => ts >= T0 + DAY + 12 * HOUR;
      const rows: Sample[] = [];
      for (let ts = T0; ts < clock.getTime(); ts += 10 * MIN)
        rows.push({
          ts: new Date(ts),
          connection_id: id,
          available: !inWindow(ts),
          response_time_ms: inWindow(ts) ? 5000 : 100,
          synthetic: false,
          source: "probe",
        });
      await writeSamples(ctx, rows);
      await ctx.stores.series.waitVisible();
      // the rollup runs an hour later (the samples are then old enough for it)
      clock = new Date(clock.getTime() + HOUR);
      await rollUp(ctx, { since: new Date(T0) });
      clock = new Date(clock.getTime() - HOUR);
      await ctx.stores.series.waitVisible();

      const scope = { column: "connection_id", op: "eq", value: id } as const;
      const days = (await availabilityByDay(ctx, scope, new Date(T0), clock, "day"))
        .sort((a, b) => a.bucket.getTime() - b.bucket.getTime())
        .map((d) => [
          d.bucket.toISOString().slice(0, 10),
          d.checks,
          d.available,
          d.maintenance,
          d.response_ms_sum,
        ]);
      t.same(
        days,
        [
          ["2026-11-19", 144, 144, 0, 14_400],
          ["2026-11-20", 72, 72, 72, 7_200],
          ["2026-11-21", 0, 0, 144, 0],
          ["2026-11-22", 0, 0, 90, 0],
        ],
        "per day: checks, available, maintenance and response times, the window's checks apart",
      );
      const months = (await availabilityByMonth(ctx, scope, new Date(T0), clock)).map((m) => [
        m.bucket.toISOString().slice(0, 7),
        m.checks,
        m.available,
        m.maintenance,
      ]);
      t.same(
        months,
        [["2026-11", 216, 216, 216]],
        "the monthly rollup (days before today) carries the count",
      );

      const summary = await call(
        app,
        w.keys.alicePersonal,
        "GET",
        `/v1/availability/summary?window=week&connection_id=${id}`,
      );
      t.match(
        (summary.json() as { data: unknown[] }).data,
        [
          {
            checks: 216,
            available_checks: 216,
            maintenance_checks: 306,
            uptime_percent: 100,
            avg_response_time_ms: 100,
          },
        ],
        "the week's uptime is 100 %: every failed check was under maintenance",
      );
      const bar = (await uptimeBars(ctx, systemActor("test"), [id], 4)).get(id);
      t.same(
        bar?.cells.map((c) => [c.checks, c.available, c.maintenance]),
        [
          [144, 144, 0],
          [72, 72, 72],
          [0, 0, 144],
          [0, 0, 90],
        ],
        "the uptime bar's cells",
      );
      t.match(bar, { checks: 216, available: 216, maintenance: 306, uptimePercent: 100 });

      const day = await call(
        app,
        w.keys.alicePersonal,
        "GET",
        `/v1/availability/summary?window=day&connection_id=${id}`,
      );
      t.match(
        (day.json() as { data: unknown[] }).data,
        [{ checks: 0, maintenance_checks: 144, uptime_percent: null }],
        "a day spent under maintenance: no uptime, its checks counted",
      );
    },
  );
}
