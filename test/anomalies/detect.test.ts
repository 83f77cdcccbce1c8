import t from "tap";
import { detectAnomalies } from "../../src/anomalies/detect.js";
import { anomalyDetectorJob, untilNextTick } from "../../src/jobs/jobs.js";
import { JOB_LOCKS, runJob } from "../../src/jobs/runner.js";
import { expire } from "../../src/retention/job.js";
import { call } from "../helpers/tenants.js";
import {
  type AnomalySnapshot,
  type AnomalyWorld,
  anomalyWorld,
  SURGE_USD,
  TEST_DAY,
} from "./fixtures/world.js";

/**
 * The detector with the clock from the context, over the seeded world (world.ts), on every
 * backend, with default settings (15-minute window, 5-minute short window, 6 steps of hysteresis):
 * run every minute from 10:00 to 10:45, each sustained deviation that starts at 10:05 opens its
 * anomaly within 10 minutes and resolves within 10 minutes plus the hysteresis after it ends at
 * 10:20; FL's single bad minute opens nothing; PC (no baseline) never alarms; every backend finds
 * the very same anomalies.
 */
const BACKENDS: ["pglite" | "postgres", "pglite" | "postgres" | "questdb"][] = [
  ["pglite", "pglite"],
  ["postgres", "postgres"],
  ["pglite", "questdb"],
];

const MINUTE = 60_000;
const at = (hhmm: string) =>
  new Date(TEST_DAY + Number(hhmm.slice(0, 2)) * 3_600_000 + Number(hhmm.slice(3)) * MINUTE);

/** What every backend must find from 10:00 to 10:45. */
const SURGE = [
  ["OA", "failure_rate"],
  ["OB", "gateway_latency"],
  ["OB", "token_spend"],
  ["OB", "token_volume"],
  ["PA", "response_time"],
  ["PB", "execution_failure_rate"],
];

const snapshots = new Map<string, AnomalySnapshot[]>();

for (const [relational, series] of BACKENDS) {
  t.test(`a surge at 10:05, judged every minute (${relational}, ${series})`, async (t) => {
    // no catch-up: the first run judges 10:00 only
    const aw = await anomalyWorld(t, relational, series, { ANOMALY_CATCH_UP_HOURS: "0" });
    if (!aw) return;
    const { ctx } = aw;
    const openedAt = new Map<string, string>();
    for (let minute = 0; minute <= 45; minute++) {
      aw.at(10, minute, 31);
      const run = await detectAnomalies(ctx);
      t.equal(
        run.judgedThrough,
        at(`10:${String(minute).padStart(2, "0")}`).toISOString(),
        `10:${minute} judged`,
      );
      if (minute === 0) t.ok(run.rolled > 0, "the first run rolls the baseline buckets up");
      const again = await detectAnomalies(ctx);
      t.same(
        [again.steps, again.opened, again.resolved],
        [0, 0, 0],
        `10:${minute}: a second run judges nothing`,
      );
      for (const r of await aw.rows())
        if (!openedAt.has(`${r.connection}/${r.metric}`))
          openedAt.set(`${r.connection}/${r.metric}`, r.detected_at);
      if (minute === 14) {
        const open = await aw.incidents();
        t.same(
          open.map((i) => [i.connection, i.status]),
          [
            ["OB", "open"],
            ["PA", "open"],
            ["OA", "open"],
            ["PB", "open"],
          ],
          "by 10:14 every surge opened its connection's incident (latency and spend first, then the failure rates)",
        );
        const ob = await call(aw.app, aw.w.keys.bobOrgB, "GET", `/v1/anomalies?connection_id=${aw.conns.OB}`);
        t.equal(ob.statusCode, 200, "the API serves every metric's anomalies");
        t.same((ob.json() as { data: { metric: string }[] }).data.map((a) => a.metric).sort(), [
          "gateway_latency",
          "token_spend",
          "token_volume",
        ]);
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
              started_at: at("10:05").toISOString(),
              ended_at: null,
            },
          ],
        });
      }
    }

    const rows = await aw.rows();
    if (process.env.SHOW_ROWS) console.error(rows);
    snapshots.set(`${relational}/${series}`, rows);
    t.same(
      rows.map((r) => [r.connection, r.metric]),
      SURGE,
      "exactly the surges: nothing for FL's single bad minute, nothing for PC without a baseline",
    );
    const first = at("10:05").getTime();
    const last = at("10:20").getTime();
    for (const r of rows) {
      const name = `${r.connection} ${r.metric}`;
      t.equal(r.status, "resolved", `${name} resolved`);
      t.ok(r.has_incident, `${name} is tied to its incident`);
      t.ok(r.observed > r.band_high && r.z_score > 3.5, `${name} was above its band`);
      const opened = Date.parse(r.detected_at) - first;
      t.ok(
        opened > 0 && opened <= 10 * MINUTE,
        `${name} opened ${opened / MINUTE} min after the first deviating sample`,
      );
      t.ok(Date.parse(r.started_at) === first, `${name} started at ${r.started_at}`);
      const back = Date.parse(r.resolved_at as string) - last;
      t.ok(
        back > 6 * MINUTE && back <= 16 * MINUTE,
        `${name} resolved ${back / MINUTE} min after the surge ended`,
      );
      t.ok(
        Date.parse(r.ended_at as string) <= Date.parse(r.resolved_at as string),
        `${name} ended before it resolved`,
      );
    }
    const pa = rows.find((r) => r.connection === "PA");
    t.equal(pa?.observed, 600, "PA's p95 over the window, from the latency bins");
    const spend = rows.find((r) => r.metric === "token_spend");
    t.ok(spend && spend.observed > 5 * SURGE_USD, "spend: the window's dollars");
    t.same(
      (await aw.incidents()).map((i) => [i.connection, i.status]),
      [
        ["OB", "resolved"],
        ["PA", "resolved"],
        ["OA", "resolved"],
        ["PB", "resolved"],
      ],
      "one anomaly incident per affected connection, each resolved with its last anomaly",
    );
    const named = await aw.ctx.stores.db.query<{ anomaly_id: string }>(
      "SELECT DISTINCT anomaly_id FROM notifications WHERE kind = 'anomaly' AND anomaly_id IS NOT NULL",
    );
    const opening = rows.filter((r) => r.has_incident).length;
    t.ok(
      named.rows.length >= 4 && named.rows.length <= opening,
      "alerts name the anomaly that opened their incident",
    );
  });
}

t.test("the same data gives the same anomalies on every backend", async (t) => {
  const [first, ...rest] = [...snapshots.entries()];
  if (!first || rest.length === 0) return t.plan(0, "fewer than two backends ran");
  for (const [name, rows] of rest) t.same(rows, first[1], `${name} = ${first[0]}`);
});

t.test("catch-up: the first run judges the last 24 hours", async (t) => {
  const aw = await anomalyWorld(t, "pglite", "pglite");
  if (!aw) return;
  aw.at(12, 0, 31);
  const run = await detectAnomalies(aw.ctx);
  t.equal(run.steps, 24 * 60, "a day of one-minute steps");
  const rows = await aw.rows();
  const open = rows.filter((r) => r.status === "open");
  t.same(
    open.map((r) => [r.connection, r.metric, r.started_at]),
    [["OB", "token_spend", at("11:00").toISOString()]],
    "the surge under way since 11:00 is open, with its real start",
  );
  t.ok(open[0]?.has_incident, "and it opened its incident");
  const past = rows.filter((r) => r.status === "resolved");
  t.same(
    past.map((r) => [r.connection, r.metric, r.started_at.slice(11, 16)]),
    [
      ["OA", "failure_rate", "10:05"],
      ["OB", "gateway_latency", "10:05"],
      ["OB", "token_spend", "10:05"],
      ["OB", "token_volume", "10:05"],
      ["PA", "response_time", "07:00"],
      ["PA", "response_time", "10:05"],
      ["PB", "execution_failure_rate", "10:05"],
    ],
    "anomalies that began and ended before the run: recorded as resolved",
  );
  for (const r of past) {
    t.notOk(r.has_incident, `${r.connection} ${r.metric} at ${r.started_at}: no incident, no e-mail`);
    t.equal(r.detected_at, at("12:00").toISOString().replace("00.000Z", "31.000Z"));
  }
  t.same(
    (await aw.incidents()).map((i) => [i.connection, i.status]),
    [["OB", "open"]],
    "only the anomaly still under way has an incident (and so an e-mail)",
  );
  const again = await detectAnomalies(aw.ctx);
  t.same([again.steps, again.opened, again.past], [0, 0, 0], "judged already");
});

t.test("late heartbeats hours in the past, a resend and a clock jump: each anomaly once", async (t) => {
  const aw = await anomalyWorld(t, "pglite", "pglite", { ANOMALY_CATCH_UP_HOURS: "6" });
  if (!aw) return;
  aw.at(12, 0, 31);
  await detectAnomalies(aw.ctx);
  t.notOk(
    (await aw.rows()).some((r) => r.connection === "OG"),
    "OG sent nothing today: nothing to judge",
  );

  // OG's daemon was cut off 08:00-08:40 and spent 20 times its usual; its buffered heartbeats arrive now
  const send = async (status: number) => {
    for (let m = 0; m < 40; m++) {
      const res = await surgeHeartbeat(aw, at(`08:${String(m).padStart(2, "0")}`));
      t.equal(res.statusCode, status, `heartbeat 08:${m}: ${res.statusCode}`);
    }
  };
  aw.at(12, 1, 0);
  await send(201);
  const marks = await aw.ctx.stores.db.query("SELECT count(*)::int AS n FROM anomaly_late_minutes");
  t.equal(marks.rows[0]?.n, 40, "each late minute marked once it was committed");
  aw.at(12, 1, 31);
  const run = await detectAnomalies(aw.ctx);
  t.equal(run.past, 1, "judged again: one anomaly for the past");
  const og = (await aw.rows()).filter((r) => r.connection === "OG");
  t.same(
    og.map((r) => [r.metric, r.status, r.started_at, r.has_incident]),
    [["token_spend", "resolved", at("08:00").toISOString(), false]],
    "recorded as resolved, with its real start, without an incident",
  );

  aw.at(12, 2, 31);
  t.equal((await detectAnomalies(aw.ctx)).past, 0, "the next run finds nothing new");
  aw.at(12, 3, 0);
  await send(201); // the daemon resends what it is not sure was stored
  aw.at(12, 3, 31);
  t.equal((await detectAnomalies(aw.ctx)).past, 0, "a resend: still one anomaly");
  aw.at(11, 0, 31); // the clock jumps back an hour
  const back = await detectAnomalies(aw.ctx);
  t.same([back.steps, back.opened, back.past], [0, 0, 0], "a clock jump back judges nothing twice");
  aw.at(12, 4, 31);
  await detectAnomalies(aw.ctx);
  t.equal((await aw.rows()).filter((r) => r.connection === "OG").length, 1, "one anomaly for OG, in the end");
});

t.test("the job: its lock and its configured interval", async (t) => {
  const aw = await anomalyWorld(t, "pglite", "pglite", {
    ANOMALY_INTERVAL_SECONDS: "30",
    ANOMALY_CATCH_UP_HOURS: "0",
  });
  if (!aw) return;
  t.equal(anomalyDetectorJob.lock, JOB_LOCKS.anomalyDetector);
  t.equal(JOB_LOCKS.anomalyDetector, 0x76676c07);
  const interval = anomalyDetectorJob.intervalMs;
  const before = Date.now();
  const wait = typeof interval === "function" ? interval(aw.ctx) : interval;
  t.ok(wait > 0 && wait <= 30_000, "the next run within the configured 30 s");
  t.ok(
    Math.abs(((before + wait) % 30_000) - 1_000) < 100,
    "on the cadence: 31 s past each 30 s tick of the epoch",
  );
  t.equal(untilNextTick(Date.parse("2026-11-10T10:00:00Z"), 60_000, 31_000), 31_000, "10:00:00 → 10:00:31");
  t.equal(untilNextTick(Date.parse("2026-11-10T10:00:31Z"), 60_000, 31_000), 60_000, "10:00:31 → 10:01:31");
  t.equal(untilNextTick(Date.parse("2026-11-10T10:00:45Z"), 60_000, 31_000), 46_000, "10:00:45 → 10:01:31");
  aw.at(10, 30, 31);
  t.equal(await runJob(aw.ctx, anomalyDetectorJob), true);
  const progress = await aw.ctx.stores.db.query<{ judged_through: Date }>(
    "SELECT judged_through FROM anomaly_detector_progress",
  );
  t.equal(new Date(progress.rows[0]?.judged_through as Date).toISOString(), at("10:30").toISOString());

  const buckets = async () =>
    Number(
      (await aw.ctx.stores.db.query<{ n: string }>("SELECT count(*) AS n FROM anomaly_buckets")).rows[0]?.n,
    );
  const rolled = await buckets();
  t.ok(rolled > 0, "the 5-minute buckets of the baseline days are rolled up");
  aw.ctx.now = () => new Date(TEST_DAY + 2 * 86_400_000 + 11 * 3_600_000); // 9 days after 11-03 11:00
  const removed = await expire(aw.ctx);
  t.ok(
    removed.anomaly_buckets > 0 && removed.anomaly_buckets < rolled,
    "retention removes buckets older than 9 days",
  );
  t.equal(await buckets(), rolled - removed.anomaly_buckets);
});

t.test("a catch-up after an open anomaly resolves it and still finds the next one", async (t) => {
  const aw = await anomalyWorld(t, "pglite", "pglite", { ANOMALY_CATCH_UP_HOURS: "24" });
  if (!aw) return;
  aw.at(7, 20, 31);
  await detectAnomalies(aw.ctx);
  t.same(
    (await aw.rows()).filter((r) => r.connection === "PA").map((r) => [r.started_at.slice(11, 16), r.status]),
    [["07:00", "open"]],
    "PA's 07:00 surge is open at 07:20",
  );
  aw.at(12, 0, 31); // nothing ran for four and a half hours
  await detectAnomalies(aw.ctx);
  t.same(
    (await aw.rows()).filter((r) => r.connection === "PA").map((r) => [r.started_at.slice(11, 16), r.status]),
    [
      ["07:00", "resolved"],
      ["10:05", "resolved"],
    ],
    "the catch-up resolves it, and records the 10:05 surge too",
  );
});

t.test("a clock that jumps ahead and back judges nothing twice", async (t) => {
  const aw = await anomalyWorld(t, "pglite", "pglite", { ANOMALY_CATCH_UP_HOURS: "1" });
  if (!aw) return;
  aw.at(10, 0, 31);
  await detectAnomalies(aw.ctx);
  aw.at(10, 45, 31); // an hour's worth of steps judged at once: the surges are found, as past ones
  await detectAnomalies(aw.ctx);
  const found = await aw.rows();
  t.same(
    found.map((r) => [r.connection, r.metric, r.status]),
    SURGE.map(([c, m]) => [c, m, "resolved"]),
  );
  for (let minute = 1; minute <= 50; minute++) {
    aw.at(10, minute, 31); // the clock is put right, and runs on
    await detectAnomalies(aw.ctx);
  }
  t.same(await aw.rows(), found, "each anomaly once, as it was");
});

t.test("late rows that arrive while their minutes are still in the window are judged too", async (t) => {
  const aw = await anomalyWorld(t, "pglite", "pglite", { ANOMALY_CATCH_UP_HOURS: "1" });
  if (!aw) return;
  const send = async (from: number, to: number) => {
    for (let m = from; m < to; m++)
      t.equal((await surgeHeartbeat(aw, at(`11:${String(m).padStart(2, "0")}`))).statusCode, 201);
  };
  for (let minute = 35; minute < 100; minute++) {
    aw.at(11, minute, 31);
    if (minute === 53) await send(40, 50); // 11:40-11:49, buffered, sent at 11:53
    await detectAnomalies(aw.ctx);
  }
  t.same(
    (await aw.rows()).filter((r) => r.connection === "OG").map((r) => [r.metric, r.status, r.started_at]),
    [["token_spend", "resolved", at("11:40").toISOString()]],
    "the burst is one anomaly, with its real start",
  );
  const marks = await aw.ctx.stores.db.query("SELECT count(*)::int AS n FROM anomaly_late_minutes");
  t.equal(marks.rows[0]?.n, 0, "every late mark was judged and cleared");
});

/** One minute of OG's spend at 20 times its usual, sent through the ingest API as its daemon would. */
function surgeHeartbeat(aw: AnomalyWorld, start: Date) {
  return call(aw.app, aw.ogKey, "POST", "/v1/gateway/ingest", {
    type: "heartbeat",
    gateway: { status: "healthy", latencyMs: 55, version: "1.0.0" },
    tokens: {
      period: {
        inputTokens: 1000,
        outputTokens: 500,
        estimatedCostUsd: SURGE_USD,
        startedAt: start.toISOString(),
        endedAt: new Date(start.getTime() + MINUTE - 1000).toISOString(),
      },
    },
  });
}
