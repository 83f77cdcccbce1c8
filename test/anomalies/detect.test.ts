import t from "tap";
import { detectAnomalies } from "../../src/anomalies/detect.js";
import { anomalyDetectorJob } from "../../src/jobs/jobs.js";
import { JOB_LOCKS, runJob } from "../../src/jobs/runner.js";
import { call } from "../helpers/tenants.js";
import { type AnomalySnapshot, anomalyWorld } from "./fixtures/world.js";

/**
 * The detector with the clock from the context, over the seeded world (world.ts), on every
 * backend: a latency step, a failure-rate spike, an execution failure spike, a spend surge, a
 * gateway's p95 latency step and a token-volume surge each open one anomaly after 2 hourly windows and resolve after 2 back to normal; the nightly
 * batch is not an anomaly; the flapping signal opens once; the new connection never alarms; the
 * same data gives the same anomalies on PGlite, PostgreSQL and QuestDB.
 */
const BACKENDS: ["pglite" | "postgres", "pglite" | "postgres" | "questdb"][] = [
  ["pglite", "pglite"],
  ["postgres", "postgres"],
  ["pglite", "questdb"],
];

const day = (hhmm: string) => `2026-11-10T${hhmm}:00.000Z`;

/** What every backend must find. */
const EXPECTED = [
  {
    connection: "FL",
    metric: "response_time",
    observed: 600,
    started: "02:00",
    detected: "04:05",
    ended: "10:00",
    resolved: "12:05",
  },
  {
    connection: "OA",
    metric: "failure_rate",
    observed: 8 / 12,
    started: "04:00",
    detected: "06:05",
    ended: "06:00",
    resolved: "08:05",
  },
  {
    connection: "OB",
    metric: "gateway_latency",
    observed: 2000,
    started: "07:00",
    detected: "09:05",
    ended: "09:00",
    resolved: "11:05",
  },
  {
    connection: "OB",
    metric: "token_spend",
    observed: 6.25,
    started: "02:00",
    detected: "04:05",
    ended: "05:00",
    resolved: "07:05",
  },
  {
    connection: "OB",
    metric: "token_volume",
    observed: 64_000,
    started: "08:00",
    detected: "10:05",
    ended: "10:00",
    resolved: "12:05",
  },
  {
    connection: "PA",
    metric: "response_time",
    observed: 600,
    started: "03:00",
    detected: "05:05",
    ended: "06:00",
    resolved: "08:05",
  },
  {
    connection: "PB",
    metric: "execution_failure_rate",
    observed: 0.6,
    started: "05:00",
    detected: "07:05",
    ended: "07:00",
    resolved: "09:05",
  },
];

/** Per judged hour of the 10th (run at the next hour + 5 min): anomalies opened and resolved. */
const PER_RUN: Record<number, { opened: number; resolved: number }> = {
  3: { opened: 2, resolved: 0 }, // OB spend (02, 03), FL flaps (02, 03)
  4: { opened: 1, resolved: 0 }, // PA latency (03, 04)
  5: { opened: 1, resolved: 0 }, // OA failures (04, 05)
  6: { opened: 1, resolved: 1 }, // PB executions (05, 06); OB back (05, 06)
  7: { opened: 0, resolved: 2 }, // PA, OA back
  8: { opened: 1, resolved: 1 }, // OB's p95 latency (07, 08); PB back
  9: { opened: 1, resolved: 0 }, // OB's tokens (08, 09), joining OB's open incident
  10: { opened: 0, resolved: 1 }, // OB's latency back; its incident waits for the tokens
  11: { opened: 0, resolved: 2 }, // FL back for two hours at last; OB's tokens back
};

const snapshots = new Map<string, AnomalySnapshot[]>();

for (const [relational, series] of BACKENDS) {
  t.test(`seeded series through a day (${relational}, ${series})`, async (t) => {
    const aw = await anomalyWorld(t, relational, series);
    if (!aw) return;
    const { ctx } = aw;

    for (let hour = 0; hour < 12; hour++) {
      aw.at(hour + 1);
      const run = await detectAnomalies(ctx);
      t.equal(run.window.start, day(`${String(hour).padStart(2, "0")}:00`), `judges ${hour}:00`);
      t.same(
        { opened: run.opened, resolved: run.resolved },
        PER_RUN[hour] ?? { opened: 0, resolved: 0 },
        `hour ${hour}: anomalies opened and resolved`,
      );
      const again = await detectAnomalies(ctx);
      t.same(
        [again.judged, again.opened, again.resolved],
        [0, 0, 0],
        `hour ${hour}: a second run judges nothing`,
      );

      if (hour === 4) {
        const open = await aw.incidents();
        t.same(
          open.map((i) => [i.connection, i.status]),
          [
            ["FL", "open"],
            ["OB", "open"],
            ["PA", "open"],
          ],
          "sustained anomalies opened their connections' incidents",
        );
        const res = await call(
          aw.app,
          aw.w.keys.alicePersonal,
          "GET",
          `/v1/anomalies?connection_id=${aw.conns.PA}`,
        );
        t.equal(res.statusCode, 200);
        t.match(res.json(), {
          data: [
            {
              metric: "response_time",
              status: "open",
              observed: 600,
              baseline_median: Number,
              band_high: Number,
              started_at: day("03:00"),
              ended_at: null,
            },
          ],
        });
      }
    }

    const rows = await aw.rows();
    snapshots.set(`${relational}/${series}`, rows);
    t.same(
      rows.map((r) => ({
        connection: r.connection,
        metric: r.metric,
        observed: r.observed,
        started: r.started_at,
        detected: r.detected_at,
        ended: r.ended_at,
        resolved: r.resolved_at,
      })),
      EXPECTED.map((e) => ({
        connection: e.connection,
        metric: e.metric,
        observed: e.observed,
        started: day(e.started),
        detected: day(e.detected),
        ended: day(e.ended),
        resolved: day(e.resolved),
      })),
      "exactly the expected anomalies: none for PB's nightly batch, none for the new PC, one for flapping FL",
    );
    for (const r of rows) {
      t.equal(r.status, "resolved");
      t.ok(r.has_incident, `${r.connection} ${r.metric} is tied to its incident`);
      t.ok(r.observed > r.band_high && r.z_score > 3.5, `${r.connection} ${r.metric} was above its band`);
    }
    const pa = rows.find((r) => r.connection === "PA");
    t.equal(pa?.baseline_median, 108, "PA's baseline: the median of the same hour over 7 days");
    t.equal(pa?.band_high, 108 + 3.5 * 10.8, "band: median + 3.5 · max(1.4826 · MAD, 10% of the median)");

    const incidents = await aw.incidents();
    t.same(
      incidents.map((i) => [i.connection, i.status]),
      [
        ["FL", "resolved"],
        ["OB", "resolved"],
        ["PA", "resolved"],
        ["OA", "resolved"],
        ["PB", "resolved"],
        ["OB", "resolved"],
      ],
      "one anomaly incident per affected connection at a time, each resolved with its last anomaly",
    );
    t.match(incidents[2]?.title, "alice n8n: unusual p95 response time");
    t.match(incidents[5]?.title, "unusual p95 gateway latency");
  });
}

t.test("the same seeded data gives the same anomalies on every backend", async (t) => {
  const [first, ...rest] = [...snapshots.entries()];
  if (!first || rest.length === 0) return t.plan(0, "fewer than two backends ran");
  for (const [name, rows] of rest) t.same(rows, first[1], `${name} = ${first[0]}`);
});

t.test("the job: its lock, its configured interval, and ANOMALY_WINDOWS", async (t) => {
  const aw = await anomalyWorld(t, "pglite", "pglite", {
    ANOMALY_WINDOWS: "1",
    ANOMALY_INTERVAL_SECONDS: "60",
  });
  if (!aw) return;
  t.equal(anomalyDetectorJob.lock, JOB_LOCKS.anomalyDetector);
  t.equal(JOB_LOCKS.anomalyDetector, 0x76676c07);
  const interval = anomalyDetectorJob.intervalMs;
  t.equal(typeof interval === "function" ? interval(aw.ctx) : interval, 60_000);
  aw.at(3); // judges 02:00: with one window, OB's surge and FL's first flap open at once
  t.equal(await runJob(aw.ctx, anomalyDetectorJob), true);
  t.same(
    (await aw.rows()).map((r) => [r.connection, r.metric, r.status]),
    [
      ["FL", "response_time", "open"],
      ["OB", "token_spend", "open"],
    ],
  );
});
