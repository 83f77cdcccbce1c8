import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import type { FastifyInstance } from "fastify";
import type pg from "pg";
import type { AnomalyMetric } from "../src/anomalies/baselines.js";
import { type DetectorRun, detectAnomalies } from "../src/anomalies/detect.js";
import { SETTLE_MS } from "../src/anomalies/late.js";
import { saveDetectorProgress } from "../src/anomalies/repository.js";
import { buildApp } from "../src/app.js";
import type { Config } from "../src/config.js";
import { BUDGET_WATCH_DEFAULTS } from "../src/budgets/watch.js";
import { PERMISSIONS } from "../src/core/actor.js";
import { closeContext, createContext } from "../src/core/context.js";
import { createKey, createUser } from "../src/identity/accounts.js";
import { untilNextTick } from "../src/jobs/jobs.js";
import { createLogger } from "../src/lib/logger.js";
import { packageRoot } from "../src/lib/paths.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import type { RelationalStore } from "../src/stores/relational/types.js";
import { applyQuestdbSchema, createQuestdbSeriesStore, questdbPool } from "../src/stores/series/questdb.js";
import {
  anomalyBuckets,
  availabilitySamples,
  executions,
  gatewayHeartbeats,
  type RowOf,
  usageEntries,
} from "../src/stores/series/tables.js";
import type { SeriesStore, TableRows } from "../src/stores/series/types.js";
import { StoreSupervisor } from "../src/stores/supervisor.js";
import { deliverWebhooks } from "../src/webhooks/delivery.js";
import { listenerPid, ownCpuSeconds, processCpuSeconds } from "./lib/cpu.js";
import { HOUR_MS, hourlyReads } from "./lib/hourly.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { benchQuestdb } from "./lib/questdb.js";
import { fmt, table } from "./lib/report.js";

const SECOND = 1000;
const MINUTE = 60_000;
const DAY = 24 * HOUR_MS;
const PREFIX = "bench_detlat_";
/**
 * Connection ids: this prefix and a 12-digit number, the same text in QuestDB and PostgreSQL, and a
 * UUID (version 4 form), as the API's routes require of a connection id.
 */
const ID_PREFIX = "00000000-0000-4000-8000-";
const ID_DIGITS = 12;
const USERS = 10;

/** The stepping starts this long before the test hour H (the deviations start at H + 5 min). */
const LEAD = 10 * MINUTE;
/** The deviations start 5 minutes past the hour (a surge at hh:05, as the hourly detector's case is put). */
const DEVIATE_PAST_HOUR = 5 * MINUTE;
/** The anomaly-detector job runs this long past each interval (`SETTLE_MS + 1000` in src/jobs/jobs.ts). */
const JOB_OFFSET_MS = SETTLE_MS + 1000;
/** The webhook-delivery job's interval (src/jobs/jobs.ts). */
const WEBHOOK_EVERY_MS = 2_000;
/** The hourly detector's schedule: ANOMALY_INTERVAL_SECONDS' default until #30. */
const HOURLY_INTERVAL_MS = 300 * SECOND;
/** The hourly detector judged an hour that ended at least this long before, and needed 2 hours above. */
const HOURLY_SETTLE_MS = 2 * MINUTE;
const HOURLY_WINDOWS = 2;

const TARGET_LATENCY_MS = 10 * MINUTE;
const TARGET_BUDGET_MS = 10 * SECOND;
const TARGET_CPU_SHARE = 0.1;
const TARGET_CPU_CONNECTIONS = 10_000;

/** Budget phase: each budgeted connection gets $10 and ten usage entries of $1.10, one a second. */
const BUDGET_USD = 10;
const ENTRY_CENTS = 110;
const ENTRIES = 10;
const ENTRY_EVERY_MS = 1_000;
/** The entry (0-based) whose spend crosses each threshold: 5 × 1.10 ≥ 5, 8 × 1.10 ≥ 8, 10 × 1.10 ≥ 10. */
const CROSSING: Record<string, number> = { "50": 4, "80": 7, "100": 9 };
const POLL_MS = 25;

const idOf = (i: number) => `${ID_PREFIX}${String(i).padStart(ID_DIGITS, "0")}`;
/** The same id, as a QuestDB expression over an integer column `c`. */
const qdbId = (c: string) => `'${ID_PREFIX}' || lpad(${c}::string, ${ID_DIGITS}, '0')`;
/** Each connection's samples come at its own second of the minute (probes are spread). */
const offsetSec = (c: number) => (c * 37) % 60;
const qdbOffset = (c: string) => `(${c} * 37) % 60`;

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const iso = (ms: number) => new Date(ms).toISOString();
/** A duration as minutes:seconds. */
const mmss = (ms: number) => {
  if (ms === Infinity) return "never";
  if (!Number.isFinite(ms)) return "n/a";
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
};

type Level = "strong" | "moderate";
interface Deviation {
  metric: AnomalyMetric;
  level: Level;
  /** Multiplies latency, tokens or spend. */
  factor: number;
  /** Probability that a check or an execution fails. */
  failP: number;
}

/** What each deviating subset does, from its first deviating minute on, sustained. */
const LEVELS: Record<Level, { factor: number; failP: number; words: (m: AnomalyMetric) => string }> = {
  strong: { factor: 20, failP: 1, words: (m) => (isRate(m) ? "100% failing" : "20× usual") },
  moderate: { factor: 3, failP: 0.5, words: (m) => (isRate(m) ? "50% failing" : "3× usual") },
};
const isRate = (m: AnomalyMetric) => m === "failure_rate" || m === "execution_failure_rate";

/** Which kind of connection deviates in which metric (a gateway's checks are its heartbeats). */
const METRIC_KINDS: [AnomalyMetric, Kind][] = [
  ["response_time", "workflow_a"],
  ["failure_rate", "workflow_b"],
  ["execution_failure_rate", "workflow_a"],
  ["gateway_latency", "gateway"],
  ["token_volume", "gateway"],
  ["token_spend", "gateway"],
];
/** Anomalies a deviation brings along: a gateway's availability sample carries its heartbeat latency. */
const COMPANIONS: Partial<Record<AnomalyMetric, AnomalyMetric[]>> = { gateway_latency: ["response_time"] };

type Kind = "workflow_a" | "workflow_b" | "gateway";

interface Layout {
  nConn: number;
  nWf: number;
  deviations: Map<number, Deviation>;
  deviateFrom: number;
}

interface RunSample {
  /** Simulated time of the run (ctx.now()). */
  simAt: number;
  /** performance.now() at its start. */
  wallStart: number;
  wallMs: number;
  cpuMs: number;
  questdbMs: number;
  statements: number;
  result?: DetectorRun;
  error?: string;
}

interface Receipt {
  at: number;
  kind: string;
  incidentId: string | null;
}

/**
 * `vigil bench detect-latency` (issue #30 item 5): how soon the per-minute anomaly detector finds
 * a deviation, what it costs per minute of evaluation, and how soon a budget warning follows the
 * spend that crosses it; beside it, in the same run, the hourly detector's reads it replaced.
 *
 * Seeds a throwaway PostgreSQL database (users, `--connections` connections: 40% workflow_a, 30%
 * workflow_b, 30% gateway; a webhook per user added through the API; budgets later) and QuestDB
 * tables of their own (prefix `bench_detlat_`), generated on the server with `INSERT … SELECT …
 * FROM long_sequence`: on each of the 7 days before the test hour H, the window from H − 1 h to
 * a few minutes after the last simulated minute, and the recent past from H − 1 h: a check a
 * minute per connection (gateways: the availability sample of their heartbeat), an execution a
 * minute per workflow connection, a heartbeat a minute per gateway (latency, tokens, cost), and a
 * usage entry every 5 minutes for every 4th workflow connection; each connection at its own second
 * of the minute. Not 8 whole days: what both detectors read, so 10,000 connections stay affordable.
 *
 * Then simulated time (`ctx.now`) steps minute by minute from H − 10 min: each minute's rows for
 * every connection go through the series store (`write`), then `detectAnomalies(ctx)` runs at the
 * job's cadence (src/jobs/jobs.ts: every ANOMALY_INTERVAL_SECONDS, 31 s past the minute), or with
 * `--phase random` once a minute at a phase drawn once per benchmark run (a 60 s job whose phase
 * is arbitrary; `--phase S` fixes it). Each connection's samples come at its own second of the
 * minute, so its first deviating sample is anywhere in the minute against the detector's phase.
 * From H + 5 min, `--deviating` connections per metric deviate,
 * sustained: 20× their usual latency, tokens or spend, or 100% failing checks or executions; as
 * many more moderately (3×, 50%). The webhook-delivery job runs every 2 s of real time against a
 * loopback receiver. Latency = simulated time of the run that opened the anomaly + the run's wall
 * time − the first deviating sample's time; for the webhook, the real time from the run's start to
 * the receipt replaces the run's wall time. The first run rolls 8 days of 5-minute buckets up and
 * is reported apart; the others are the steady state, whose CPU (this process and QuestDB) per
 * interval of simulated time is the share of a core evaluation needs. Each run's figures start
 * after the minute's rows are written and visible, so ingest is not counted (it is printed).
 *
 * After the stepping: `--hourly-runs` runs of the hourly detector's reads (bench/lib/hourly.ts)
 * over the same data, and its detection latency computed from its schedule (not run). Last, in
 * real time: `--budgets` new connections with a $10 budget each get usage entries of $1.10 a
 * second through `POST /v1/usage` (app.inject), and `budget_warnings` is polled every 25 ms.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      connections: { type: "string", default: "1000" },
      deviating: { type: "string", default: "10" },
      minutes: { type: "string", default: "30" },
      budgets: { type: "string", default: "100" },
      "hourly-runs": { type: "string", default: "3" },
      phase: { type: "string" },
    },
  });
  const nConn = positiveInt("connections", values.connections);
  const perMetric = positiveInt("deviating", values.deviating);
  const minutesAfter = positiveInt("minutes", values.minutes);
  const nBudgets = positiveInt("budgets", values.budgets);
  const hourlyRuns = positiveInt("hourly-runs", values["hourly-runs"]);
  if (minutesAfter > 120) throw new Error("--minutes: at most 120 (a run stays bounded)");
  // the detector's cadence: the job's own (every ANOMALY_INTERVAL_SECONDS, SETTLE_MS + 1 s past),
  // or every minute at a phase drawn at random or given
  const phase = values.phase ?? "job";
  const jobCadence = phase === "job";
  const intervalMs = jobCadence ? config.anomalies.intervalSeconds * SECOND : MINUTE;
  const offsetMs = jobCadence
    ? JOB_OFFSET_MS
    : phase === "random"
      ? Math.floor(Math.random() * MINUTE)
      : Number(phase) * SECOND;
  if (!(offsetMs >= 0 && offsetMs < MINUTE))
    throw new Error(`--phase: "job", "random" or seconds past the minute (0 to 59.999), got ${phase}`);
  const nextRun = (t: number) => t + untilNextTick(t, intervalMs, offsetMs);
  const cadence = jobCadence
    ? `the job's cadence: every ${intervalMs / SECOND} s, ${offsetMs / SECOND} s past the minute`
    : `every minute at ${fmt(offsetMs / SECOND, 1)} s past it (${phase === "random" ? "drawn at random" : "--phase"})`;
  const hourlyPhaseMs = Math.floor(Math.random() * HOURLY_INTERVAL_MS);
  const say = (s: string) => process.stderr.write(`${s}\n`);
  const log = createLogger("warn");
  const benchConfig: Config = {
    ...config,
    logLevel: "warn",
    secret: config.secret ?? "bench-secret-bench-secret-bench-secret!",
    webhooks: { ...config.webhooks, allowHttpLoopback: true },
  };
  const a = benchConfig.anomalies;

  // kinds by contiguous ranges of the index: [0, nA) workflow_a, [nA, nWf) workflow_b, [nWf, n) gateway
  const nA = Math.round(nConn * 0.4);
  const nWf = nA + Math.round(nConn * 0.3);
  const nGw = nConn - nWf;
  const ranges: Record<Kind, [number, number]> = {
    workflow_a: [0, nA],
    workflow_b: [nA, nWf],
    gateway: [nWf, nConn],
  };

  // the simulated clock: H an hour boundary far enough back that every simulated minute is past
  const H = Math.floor((Date.now() - (minutesAfter + 20) * MINUTE) / HOUR_MS) * HOUR_MS;
  const S = H - LEAD; // the stepping writes minutes from S on
  const D = H + DEVIATE_PAST_HOUR;
  const E = D + minutesAfter * MINUTE; // the last simulated minute boundary
  const seedFrom = H - HOUR_MS;
  const seedDayUntil = Math.ceil((E + 5 * MINUTE) / (5 * MINUTE)) * 5 * MINUTE;

  const deviations = chooseDeviations(ranges, perMetric);
  const layout: Layout = { nConn, nWf, deviations, deviateFrom: D };
  const firstDeviating = (c: number) => D + offsetSec(c) * SECOND;

  const qdb = benchQuestdb(config, say);
  const qdbPid = listenerPid(qdb.pgUrl) ?? listenerPid(qdb.httpUrl);
  const cleanups: (() => Promise<unknown>)[] = [];
  const sayCleanup = (e: unknown) => say(`cleanup: ${(e as Error).message}`);
  const started = Date.now();
  try {
    const scratch = await throwawayDatabase(config, "bench_detlat");
    cleanups.push(scratch.drop);
    const db = createPgStore({ connectionString: scratch.url });
    cleanups.unshift(() => db.close());
    await migrate(db);

    // --- QuestDB: tables of our own, rows generated on the server --------------------------------
    const pool = questdbPool(qdb.pgUrl, 1);
    const dropOurs = async () => {
      for (const r of (
        await pool.query("SELECT table_name FROM tables() WHERE table_name LIKE $1", [`${PREFIX}%`])
      ).rows as { table_name: string }[])
        await pool.query(`DROP TABLE IF EXISTS ${r.table_name}`);
    };
    await dropOurs();
    await applyQuestdbSchema(pool, PREFIX);
    cleanups.push(async () => {
      await dropOurs();
      await pool.end();
      // QuestDB removes a dropped table's files in the background: the private server is stopped
      // only once they are gone, so a run leaves nothing behind
      if (!config.questdb) await waitPurged(path.join(packageRoot, ".questdb/bench/db"), say);
    });
    let statements = 0;
    const series = await createQuestdbSeriesStore({
      httpUrl: qdb.httpUrl,
      pgUrl: qdb.pgUrl,
      tablePrefix: PREFIX,
      onQuery: () => void statements++,
    });
    cleanups.unshift(() => series.close());

    // --- PostgreSQL: users with a key each, the connections round-robin among them ---------------
    say(
      `seeding PostgreSQL: ${fmt(nConn)} connections (${nA} workflow_a, ${nWf - nA} workflow_b, ${nGw} gateway), ${USERS} users`,
    );
    const users: { id: string; key: string }[] = [];
    for (let u = 0; u < USERS; u++) {
      const user = await createUser(db, {
        email: `bench-detlat-${u}-${Date.now()}@x.example`,
        plan: "enterprise",
      });
      const { key } = await createKey(db, { user: user.id, permissions: [...PERMISSIONS] });
      users.push({ id: user.id, key });
    }
    await db.query("UPDATE users SET rate_limit_per_hour = 1000000000");
    await insertConnections(db, users, 0, nConn, nA, nWf);

    // the detector's series store, its calls timed by part while `parts.on` (the steady-state runs);
    // the detector's (simulated) clock and the API's (real) one share the stores
    const parts = new Parts(qdbPid);
    const stores = StoreSupervisor.ready({ db, series: parts.wrap(series) }, log, benchConfig);
    let simNow = S;
    const ctx = createContext(benchConfig, log, stores);
    ctx.now = () => new Date(simNow);
    cleanups.unshift(() => closeContext(ctx));
    const apiCtx = createContext(benchConfig, log, stores);
    cleanups.unshift(() => closeContext(apiCtx));
    const app = await buildApp(apiCtx);
    cleanups.unshift(() => app.close());

    // --- the webhook receiver, and a webhook per account added through the API --------------------
    const receipts: Receipt[] = [];
    const receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const at = performance.now();
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
          receipts.push({
            at,
            kind: String(body.kind),
            incidentId: typeof body.incident_id === "string" ? body.incident_id : null,
          });
        } catch {
          // not ours: counted nowhere
        }
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    cleanups.unshift(
      () =>
        new Promise((r) => {
          receiver.closeAllConnections();
          receiver.close(r);
        }),
    );
    const port = (receiver.address() as { port: number }).port;
    for (const [u, user] of users.entries()) {
      const r = await app.inject({
        method: "POST",
        url: "/v1/webhooks",
        headers: { authorization: `Bearer ${user.key}` },
        payload: { url: `http://127.0.0.1:${port}/hook/${u}` },
      });
      if (r.statusCode !== 201) throw new Error(`POST /v1/webhooks answered ${r.statusCode}: ${r.body}`);
    }

    // --- QuestDB seed --------------------------------------------------------------------------
    const segments: [number, number][] = [];
    for (let d = 7; d >= 1; d--) segments.push([seedFrom - d * DAY, seedDayUntil - d * DAY]);
    segments.push([seedFrom, S]);
    const seeded = await seedQuestdb(pool, { nConn, nWf, segments, say });
    const t0 = Date.now();
    await series.waitVisible(600_000);
    say(`  all rows visible ${fmt((Date.now() - t0) / 1000, 1)} s after the last insert`);

    // QuestDB's own CPU while idle, so the runs' figures can be read against it
    const questdbIdle = [await idleShare(qdbPid)];

    // --- the stepping ---------------------------------------------------------------------------
    const firstRunAt = nextRun(S + MINUTE - 1);
    const settled0 = Math.floor((firstRunAt - SETTLE_MS) / MINUTE) * MINUTE;
    // a detector that judged up to the step before: the first run rolls the buckets up and judges one step
    await saveDetectorProgress(db, { judgedThrough: new Date(settled0 - MINUTE), rolledThrough: null });

    let delivering = false;
    let deliveryErrors = 0;
    const deliveryTimer = setInterval(() => {
      if (delivering) return;
      delivering = true;
      deliverWebhooks(ctx)
        .catch(() => void deliveryErrors++)
        .finally(() => {
          delivering = false;
        });
    }, WEBHOOK_EVERY_MS);
    const stopDelivery = async () => {
      clearInterval(deliveryTimer);
      while (delivering) await sleep(20);
    };
    cleanups.unshift(stopDelivery);

    const runs: RunSample[] = [];
    const ingest: { wallMs: number; cpuMs: number; questdbMs: number; rows: number }[] = [];
    const steps = (E - S) / MINUTE;
    say(
      `stepping ${steps} simulated minutes from ${iso(S)} (deviations from ${iso(D)}), detector ${cadence}`,
    );
    let tick = firstRunAt;
    for (let m = S + MINUTE; m <= E; m += MINUTE) {
      simNow = m;
      const rows = minuteRows(layout, m - MINUTE);
      const w0 = performance.now();
      const wc = ownCpuSeconds();
      const wq = processCpuSeconds(qdbPid);
      await ctx.stores.series.write(rows);
      await ctx.stores.series.waitVisible(60_000);
      ingest.push({
        wallMs: performance.now() - w0,
        cpuMs: (ownCpuSeconds() - wc) * 1000,
        questdbMs: (processCpuSeconds(qdbPid) - wq) * 1000,
        rows: rows.reduce((n, b) => n + b.rows.length, 0),
      });
      // the runs due in this simulated minute (one with the default interval)
      for (; tick < m + MINUTE; tick = nextRun(tick)) {
        simNow = tick;
        const sample: RunSample = {
          simAt: simNow,
          wallStart: performance.now(),
          wallMs: 0,
          cpuMs: 0,
          questdbMs: 0,
          statements: 0,
        };
        const q0 = processCpuSeconds(qdbPid);
        const c0 = ownCpuSeconds();
        statements = 0;
        parts.on = runs.length > 0;
        try {
          sample.result = await detectAnomalies(ctx);
        } catch (err) {
          sample.error = (err as Error).message;
        }
        sample.wallMs = performance.now() - sample.wallStart;
        sample.cpuMs = (ownCpuSeconds() - c0) * 1000;
        sample.questdbMs = (processCpuSeconds(qdbPid) - q0) * 1000;
        sample.statements = statements;
        parts.on = false;
        runs.push(sample);
        const r = sample.result;
        say(
          `  ${iso(simNow).slice(11, 19)} run ${runs.length}/${steps}: ${fmt(sample.wallMs)} ms, CPU ${fmt(sample.cpuMs)} ms ` +
            `+ QuestDB ${fmt(sample.questdbMs)} ms` +
            (r
              ? `; ${r.steps} step(s), judged ${fmt(r.judged)}, opened ${r.opened}, rolled ${fmt(r.rolled)}`
              : `; FAILED: ${sample.error}`),
        );
      }
    }

    // the webhooks of the incidents opened: the delivery job has up to 30 s more
    const opened = await anomalyIncidents(db);
    const waitUntil = Date.now() + 30_000;
    while (Date.now() < waitUntil && opened.some((i) => !receipts.some((r) => r.incidentId === i.id)))
      await sleep(100);
    await stopDelivery();
    questdbIdle.push(await idleShare(qdbPid));

    // --- the hourly detector's reads over the same data -------------------------------------------
    const hourlyWindow = new Date(H - HOUR_MS);
    say(`hourly detector's reads: window ${iso(hourlyWindow.getTime())} and the same hour on 7 days before`);
    const hourly: RunSample[] = [];
    for (let i = 0; i <= hourlyRuns; i++) {
      const q0 = processCpuSeconds(qdbPid);
      const c0 = ownCpuSeconds();
      const w0 = performance.now();
      statements = 0;
      const read = await hourlyReads(ctx.stores.series, hourlyWindow);
      const s: RunSample = {
        simAt: NaN,
        wallStart: w0,
        wallMs: performance.now() - w0,
        cpuMs: (ownCpuSeconds() - c0) * 1000,
        questdbMs: (processCpuSeconds(qdbPid) - q0) * 1000,
        statements,
      };
      const judgeable = read[0]?.get("failure_rate")?.size ?? 0;
      say(
        `  ${i === 0 ? "warm-up" : `run ${i}/${hourlyRuns}`}: ${fmt(s.wallMs)} ms, CPU ${fmt(s.cpuMs)} ms + QuestDB ` +
          `${fmt(s.questdbMs)} ms, ${s.statements} statements; ${fmt(judgeable)} connections with checks in the window`,
      );
      if (i > 0) hourly.push(s);
    }

    // --- budgets, in real time ------------------------------------------------------------------
    const budget = await budgetPhase(db, app, users, { from: nConn + 1, n: nBudgets, say });

    // --- report ---------------------------------------------------------------------------------
    const anomalies = await anomalyRows(db);
    const incidents = new Map(opened.map((i) => [i.id, i]));
    const runAt = new Map(runs.map((r) => [r.simAt, r]));
    const latencyOf = (c: number, sim: number) => {
      const r = runAt.get(sim);
      return r ? r.simAt + r.wallMs - firstDeviating(c) : NaN;
    };
    const nextHourlyRun = (t: number) =>
      t + ((((hourlyPhaseMs - t) % HOURLY_INTERVAL_MS) + HOURLY_INTERVAL_MS) % HOURLY_INTERVAL_MS);
    /** The hourly detector: both the first deviating hour and the next judged above, then its next run. */
    const hourlyLatency = (c: number) => {
      const f = firstDeviating(c);
      const h0 = Math.floor(f / HOUR_MS) * HOUR_MS;
      return nextHourlyRun(h0 + HOURLY_WINDOWS * HOUR_MS + HOURLY_SETTLE_MS) - f;
    };

    const last = runs[runs.length - 1];
    const watchedUntil = last ? last.simAt + last.wallMs : E;
    interface Group {
      metric: AnomalyMetric;
      level: Level;
      n: number;
      /** Anomalies opened; the others count as Infinity in the lists (never within the run). */
      opened: number;
      /** How long the run watched a deviation that opened nothing (the shortest such). */
      censor: number;
      anomaly: number[];
      incident: number[];
      webhook: number[];
      hourly: number[];
      incidentMissing: number;
      webhookMissing: number;
    }
    const groups: Group[] = [];
    for (const level of ["strong", "moderate"] as Level[])
      for (const [metric] of METRIC_KINDS) {
        const g: Group = {
          metric,
          level,
          n: 0,
          opened: 0,
          censor: Infinity,
          anomaly: [],
          incident: [],
          webhook: [],
          hourly: [],
          incidentMissing: 0,
          webhookMissing: 0,
        };
        for (const [c, dev] of deviations) {
          if (dev.metric !== metric || dev.level !== level) continue;
          g.n++;
          g.hourly.push(hourlyLatency(c));
          const an = anomalies.find((x) => x.connection_id === idOf(c) && x.metric === metric);
          if (!an) {
            for (const xs of [g.anomaly, g.incident, g.webhook]) xs.push(Infinity);
            g.censor = Math.min(g.censor, watchedUntil - firstDeviating(c));
            continue;
          }
          g.opened++;
          g.anomaly.push(latencyOf(c, an.detected_at.getTime()));
          const inc = an.incident_id ? incidents.get(an.incident_id) : undefined;
          if (!inc) {
            g.incidentMissing++;
            continue;
          }
          g.incident.push(latencyOf(c, inc.opened_at.getTime()));
          const hook = receipts.find((r) => r.incidentId === inc.id && r.kind === "anomaly");
          const r = runAt.get(inc.opened_at.getTime());
          if (!hook || !r) {
            g.webhookMissing++;
            continue;
          }
          g.webhook.push(r.simAt + (hook.at - r.wallStart) - firstDeviating(c));
        }
        groups.push(g);
      }

    // anomalies that should not be: on connections that do not deviate, or in a metric a deviation does not explain
    const deviatingIds = new Map([...deviations].map(([c, d]) => [idOf(c), d]));
    const falseOnCalm = anomalies.filter((x) => !deviatingIds.has(x.connection_id));
    const companions = anomalies.filter((x) => {
      const d = deviatingIds.get(x.connection_id);
      return d && d.metric !== x.metric && (COMPANIONS[d.metric] ?? []).includes(x.metric as AnomalyMetric);
    });
    const unexplained = anomalies.filter((x) => {
      const d = deviatingIds.get(x.connection_id);
      return d && d.metric !== x.metric && !(COMPANIONS[d.metric] ?? []).includes(x.metric as AnomalyMetric);
    });
    const calmIncidents = opened.filter((i) => !deviatingIds.has(i.connection_id));

    const first = runs[0];
    const steady = runs.slice(1).filter((r) => !r.error);
    const failed = runs.filter((r) => r.error);
    const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);
    const mean = (xs: number[]) => (xs.length ? sum(xs) / xs.length : NaN);
    const sorted = (xs: number[]) => [...xs].sort((x, y) => x - y);
    const steadyVigil = mean(steady.map((r) => r.cpuMs));
    const steadyQdb = mean(steady.map((r) => r.questdbMs));
    const sharePerMinute = (steadyVigil + steadyQdb) / intervalMs;
    // every 5th run rolls the bucket that ended 5 minutes before up and reads the baselines of a new 5-minute slot
    const slotRuns = steady.filter((r) => (r.result?.rolled ?? 0) > 0);
    const otherRuns = steady.filter((r) => (r.result?.rolled ?? 0) === 0);
    const hVigil = mean(hourly.map((r) => r.cpuMs));
    const hQdb = mean(hourly.map((r) => r.questdbMs));
    const hourlyShare = (hVigil + hQdb) / HOURLY_INTERVAL_MS;
    const ing = ingest.slice(1);

    const strongGroups = groups.filter((g) => g.level === "strong");
    const moderateGroups = groups.filter((g) => g.level === "moderate");
    const p99 = (xs: number[]) => percentile(sorted(xs), 99);
    const groupMet = (g: Group) => g.opened === g.n && p99(g.anomaly) <= TARGET_LATENCY_MS;
    const latencyMet = strongGroups.every(groupMet);
    const worstStrong = Math.max(...strongGroups.map((g) => p99(g.anomaly)));
    const budgetAll = [...budget.latencies.values()].flat();
    const budgetP99 = p99(budgetAll);
    const budgetMet = budget.missing === 0 && budgetP99 <= TARGET_BUDGET_MS;
    const cpuMet = sharePerMinute <= TARGET_CPU_SHARE;
    const load = os.loadavg()[0] ?? NaN;
    const totalSeeded = Object.values(seeded).reduce((x, y) => x + y, 0);

    console.log(
      `\ndetect-latency: ${fmt(nConn)} connections (${nA} workflow_a, ${nWf - nA} workflow_b, ${nGw} gateway) on ` +
        `PostgreSQL + QuestDB. Seeded in QuestDB: ${fmt(totalSeeded)} rows (${fmt(seeded.availability)} checks, ` +
        `${fmt(seeded.executions)} executions, ${fmt(seeded.heartbeats)} heartbeats, ${fmt(seeded.usage)} usage entries): ` +
        `${iso(seedFrom).slice(11, 16)}–${iso(seedDayUntil).slice(11, 16)} UTC on each of the 7 days before ` +
        `${iso(H).slice(0, 10)}, and ${iso(seedFrom).slice(11, 16)}–${iso(S).slice(11, 16)} on it; then ${steps} ` +
        `simulated minutes to ${iso(E).slice(11, 16)}, ${fmt(mean(ingest.map((i) => i.rows)))} rows a minute through ` +
        `the series store. Detector ${cadence}; settings: ` +
        `window ${a.windowMinutes} min, short window ${a.shortWindowMinutes} min, ${a.windows} steps to open, ` +
        `threshold ${a.threshold}, ${a.minBaselineDays} of 7 baseline days. Deviations from ${iso(D).slice(11, 16)} ` +
        `(hh:05), ${perMetric} connections per metric and level. Host: ${os.availableParallelism()} cores, load ` +
        `average ${fmt(load, 2)}. ${new Date().toISOString().slice(0, 16)} UTC, ${fmt((Date.now() - started) / 1000)} s.\n`,
    );

    const latencyTable = (gs: Group[]) =>
      table(
        [
          "metric",
          "deviation",
          "opened",
          "anomaly p50",
          "p99",
          "max",
          "incident p99",
          "webhook p50",
          "p99",
          "max",
          "hourly p50 (computed)",
          "max",
        ],
        gs.map((g) => {
          const an = sorted(g.anomaly);
          const wh = sorted(g.webhook);
          const hr = sorted(g.hourly);
          const t = (v: number | undefined) => (v === Infinity ? `>${mmss(g.censor)}` : mmss(v ?? NaN));
          return [
            g.metric,
            LEVELS[g.level].words(g.metric),
            `${g.opened}/${g.n}${g.opened < g.n ? " (MISSING)" : ""}`,
            t(percentile(an, 50)),
            t(percentile(an, 99)),
            t(an[an.length - 1]),
            t(p99(g.incident)),
            t(percentile(wh, 50)),
            t(percentile(wh, 99)),
            t(wh[wh.length - 1]),
            mmss(percentile(hr, 50)),
            mmss(hr[hr.length - 1] ?? NaN),
          ];
        }),
      );
    console.log(
      "time from the first deviating sample to the open anomaly, its incident and its webhook (min:s):",
    );
    console.log(latencyTable(strongGroups));
    console.log(`\nmoderate deviations (the 15-minute window's trade-off):`);
    console.log(latencyTable(moderateGroups));
    const missingIncidents = sum(groups.map((g) => g.incidentMissing));
    const missingHooks = sum(groups.map((g) => g.webhookMissing));
    console.log(
      `\nincident: opened in the anomaly's own transaction (same run), so the same figure unless another metric of ` +
        `the connection opened it earlier; anomalies without an incident: ${missingIncidents}. Webhook: delivered by ` +
        `deliverWebhooks(ctx) every ${WEBHOOK_EVERY_MS / 1000} s of real time (batches of 20) to a loopback receiver, ` +
        `${receipts.filter((r) => r.kind === "anomaly").length} anomaly webhooks received, ${missingHooks} missing, ` +
        `${deliveryErrors} delivery runs failed. Hourly (computed, not run): a deviation from hh:05 makes that hour ` +
        `and the next above the band; the hourly detector judged an hour ${HOURLY_SETTLE_MS / MINUTE} min after it ` +
        `ended, on a ${HOURLY_INTERVAL_MS / 1000} s schedule (phase ${fmt(hourlyPhaseMs / 1000)} s), and opened after ` +
        `${HOURLY_WINDOWS} hours above.`,
    );
    console.log(
      `anomalies on connections that do not deviate: ${falseOnCalm.length} (expected 0; ${calmIncidents.length} ` +
        `incidents)` +
        (falseOnCalm.length
          ? `: ${falseOnCalm
              .slice(0, 10)
              .map(
                (x) =>
                  `${x.connection_id.slice(ID_PREFIX.length)} ${x.metric} ${fmt(Number(x.observed), 3)} ` +
                  `(median ${fmt(Number(x.baseline_median), 3)}, band to ${fmt(Number(x.band_high), 3)}, ` +
                  `from ${iso(x.started_at.getTime()).slice(11, 16)})`,
              )
              .join(", ")}`
          : "") +
        `; companions expected of a deviation (a gateway's checks carry its heartbeat latency: response_time with ` +
        `gateway_latency): ${companions.length}; other metrics of deviating connections: ${unexplained.length}` +
        (unexplained.length
          ? ` (${unexplained
              .slice(0, 10)
              .map((x) => `${x.connection_id}/${x.metric}`)
              .join(", ")})`
          : ""),
    );

    console.log(
      `\nbudget warnings, real time (${nBudgets} connections, $${BUDGET_USD} each, POST /v1/usage via app.inject):`,
    );
    console.log(
      table(
        ["threshold", "warnings", "p50 s", "p99 s", "max s"],
        ["50", "80", "100"].map((level) => {
          const xs = sorted(budget.latencies.get(level) ?? []);
          return [
            `${level}%`,
            `${xs.length}/${nBudgets}`,
            fmt(percentile(xs, 50) / 1000, 2),
            fmt(percentile(xs, 99) / 1000, 2),
            fmt((xs[xs.length - 1] ?? NaN) / 1000, 2),
          ];
        }),
      ),
    );
    console.log(
      `from the request carrying the entry that crosses the threshold to its budget_warnings row (polled every ` +
        `${POLL_MS} ms); entries of $${ENTRY_CENTS / 100}, one a second per connection; ${budget.missing} warnings missing; ` +
        `projected-overrun warnings seen: ${budget.projected}`,
    );

    const cpuRow = (what: string, rs: RunSample[], perMs: number) => {
      const w = sorted(rs.map((r) => r.wallMs));
      const v = mean(rs.map((r) => r.cpuMs));
      const q = mean(rs.map((r) => r.questdbMs));
      return [
        what,
        String(rs.length),
        fmt(percentile(w, 50)),
        fmt(w[w.length - 1] ?? NaN),
        fmt(v),
        fmt(q),
        fmt(mean(rs.map((r) => r.statements))),
        Number.isFinite(perMs) ? `${fmt(((v + q) / perMs) * 100, 2)}%` : "",
      ];
    };
    console.log(`\nCPU of evaluation (this process = Vigil, and QuestDB; ms per run):`);
    console.log(
      table(
        ["runs", "n", "wall p50 ms", "max ms", "Vigil CPU", "QuestDB CPU", "statements", "share of a core"],
        [
          cpuRow(
            `first run (rolls ${fmt(first?.result?.rolled ?? NaN)} bucket rows up)`,
            first ? [first] : [],
            NaN,
          ),
          cpuRow(`steady state, every ${intervalMs / SECOND} s of simulated time`, steady, intervalMs),
          cpuRow(
            "  of which runs that start a 5-minute slot (roll a bucket up, read its baselines)",
            slotRuns,
            NaN,
          ),
          cpuRow("  of which the other runs", otherRuns, NaN),
          cpuRow(
            `hourly detector's reads (8 hours × 4 aggregates), every ${HOURLY_INTERVAL_MS / 1000} s`,
            hourly,
            HOURLY_INTERVAL_MS,
          ),
        ],
      ),
    );
    console.log(
      `share of a core = CPU seconds per ${intervalMs / 1000} s of simulated time (hourly: per ${HOURLY_INTERVAL_MS / 1000} s, its ` +
        `schedule; its reads only, not its judging or writes). QuestDB idle (5 s before the stepping, 5 s after): ` +
        `${questdbIdle.map((x) => `${fmt(x * 100, 1)}%`).join(", ")} of a core. ` +
        `Ingest of one minute's rows (series store write + visible, not counted above): wall p50 ` +
        `${fmt(percentile(sorted(ing.map((i) => i.wallMs)), 50))} ms, Vigil ${fmt(mean(ing.map((i) => i.cpuMs)))} ms, ` +
        `QuestDB ${fmt(mean(ing.map((i) => i.questdbMs)))} ms CPU.` +
        (failed.length ? ` ${failed.length} detector runs FAILED: ${failed[0]?.error}` : ""),
    );
    const ratio = sharePerMinute / hourlyShare;
    const nSteady = runs.length - 1;
    const partRows = [...parts.byPart].map(([what, p]) => [
      what,
      fmt(p.calls / nSteady, 1),
      fmt(p.rows / nSteady),
      fmt(p.wallMs / nSteady),
      fmt(p.cpuMs / nSteady),
      fmt(p.questdbMs / nSteady),
    ]);
    const inParts = (k: "cpuMs" | "questdbMs" | "wallMs") =>
      sum([...parts.byPart.values()].map((p) => p[k])) / nSteady;
    console.log(
      `\nwhere a steady-state run's time goes (means per run over the ${nSteady} runs after the first; CPU while ` +
        `each series store call was awaited, ms):\n` +
        table(
          ["part", "calls", "rows", "wall", "Vigil CPU", "QuestDB CPU"],
          [
            ...partRows,
            [
              "the rest: PostgreSQL, judging, states, incidents",
              "",
              "",
              fmt(mean(runs.slice(1).map((r) => r.wallMs)) - inParts("wallMs")),
              fmt(mean(runs.slice(1).map((r) => r.cpuMs)) - inParts("cpuMs")),
              fmt(mean(runs.slice(1).map((r) => r.questdbMs)) - inParts("questdbMs")),
            ],
          ],
        ),
    );

    console.log(`\nverdict:`);
    console.log(
      `  anomaly latency p99 <= 10 min for every metric (20×, 100% failing): ${latencyMet ? "MET" : "NOT MET"}; ` +
        `worst p99 ${mmss(worstStrong)}` +
        (latencyMet
          ? ""
          : ` (${strongGroups
              .filter((g) => !groupMet(g))
              .map(
                (g) =>
                  `${g.metric} ${g.opened < g.n ? `${g.n - g.opened} never opened` : mmss(p99(g.anomaly))}`,
              )
              .join(", ")})`),
    );
    console.log(
      `  no anomaly on connections that do not deviate: ${falseOnCalm.length === 0 ? "MET" : `NOT MET (${falseOnCalm.length})`}`,
    );
    console.log(
      `  budget warning p99 <= 10 s: ${budgetMet ? "MET" : "NOT MET"} (p99 ${fmt(budgetP99 / 1000, 2)} s, ${budget.missing} missing)`,
    );
    console.log(
      `  Vigil + QuestDB <= 10% of one core at ${fmt(TARGET_CPU_CONNECTIONS)} connections: ` +
        `${fmt(sharePerMinute * 100, 2)}% at ${fmt(nConn)} connections` +
        (nConn >= TARGET_CPU_CONNECTIONS
          ? `: ${cpuMet ? "MET" : "NOT MET"}`
          : ` (the target is for ${fmt(TARGET_CPU_CONNECTIONS)}: run with --connections ${TARGET_CPU_CONNECTIONS})`),
    );

    const byMetric = strongGroups
      .map((g) => `${g.metric} ${mmss(percentile(sorted(g.anomaly), 50))}/${mmss(p99(g.anomaly))}`)
      .join(", ");
    const moderateBy = moderateGroups
      .map(
        (g) =>
          `${g.metric} ${g.opened < g.n ? `>${mmss(g.censor)} (${g.opened}/${g.n} opened)` : mmss(p99(g.anomaly))}`,
      )
      .join(", ");
    const hourlyAll = sorted(groups.flatMap((g) => g.hourly));
    const webhookAll = sorted(strongGroups.flatMap((g) => g.webhook));
    const cmd = `\`npm run bench -- detect-latency --connections ${nConn}\``;
    const row =
      `| detect-latency | ${cmd} | ${fmt(nConn)} connections, PostgreSQL + QuestDB, the detector ${cadence}; ` +
      `${perMetric} connections per metric deviate from hh:05, sustained, 20× ` +
      `(latency, tokens, spend) or 100% failing: first sample to open anomaly p50/p99 (min:s) ${byMetric}; ` +
      `incident in the same transaction; webhook p99 ${mmss(percentile(webhookAll, 99))} (job every 2 s); ` +
      `moderate (3×, 50% failing) p99: ${moderateBy}; ${falseOnCalm.length} ` +
      `anomal${falseOnCalm.length === 1 ? "y" : "ies"} on the ` +
      `${fmt(nConn - deviations.size)} calm connections. Budget warnings (${nBudgets} connections, real time): ` +
      `p50 ${fmt(percentile(sorted(budgetAll), 50) / 1000, 1)} s, **p99 ${fmt(budgetP99 / 1000, 1)} s**. CPU per ` +
      `simulated minute, steady state: **Vigil ${fmt(steadyVigil)} ms + QuestDB ${fmt(steadyQdb)} ms = ` +
      `${fmt(sharePerMinute * 100, 1)}% of a core** (run p50 ${fmt(percentile(sorted(steady.map((r) => r.wallMs)), 50))} ms); ` +
      `first run (rolls 8 days of buckets up) ${fmt((first?.wallMs ?? NaN) / 1000, 1)} s, CPU ` +
      `${fmt((first?.cpuMs ?? NaN) / 1000, 1)} + ${fmt((first?.questdbMs ?? NaN) / 1000, 1)} s. Seeded ` +
      `${fmt(totalSeeded)} rows: the 7 days' windows around the test hour and the recent hour, not 8 whole days. ` +
      `${new Date().toISOString().slice(0, 10)}, ${os.availableParallelism()} cores, load average ${fmt(load, 1)} ` +
      `| the hourly detector (until #30): opens p50 ${mmss(percentile(hourlyAll, 50))}, max ` +
      `${mmss(hourlyAll[hourlyAll.length - 1] ?? NaN)} after the first sample (computed from its schedule, not run); ` +
      `its reads (8 hours × 4 aggregates) ${fmt(hVigil)} + ${fmt(hQdb)} ms CPU a run, every 300 s: ` +
      `${fmt(hourlyShare * 100, 2)}% of a core | ${fmt(ratio, 1)} (CPU share) | anomaly p99 ≤ 10 min ` +
      `(${latencyMet ? "met" : "**not met**"}), budget p99 ≤ 10 s (${budgetMet ? "met" : "**not met**"}), ` +
      `≤ 10% of a core at 10,000 (${nConn >= TARGET_CPU_CONNECTIONS ? (cpuMet ? "met" : "**not met**") : "see the 10,000 row"}) |`;
    console.log(`\ndocs/benchmarks.md row:\n${row}`);
    console.log(
      `\nREADME row:\n| anomaly detection, ${fmt(nConn)} connections | ${cmd} | ` +
        `first sample to open anomaly p99 ≤ ${mmss(worstStrong)} (min:s); budget warning p99 ${fmt(budgetP99 / 1000, 1)} s; ` +
        `${fmt(sharePerMinute * 100, 1)}% of a core (Vigil + QuestDB) |`,
    );
  } finally {
    for (const c of cleanups) await c().catch(sayCleanup);
    qdb.stop();
  }
}

interface Part {
  calls: number;
  rows: number;
  wallMs: number;
  cpuMs: number;
  questdbMs: number;
}

/**
 * Stands between the detector and the series store and, while `on`, adds each call's wall time,
 * rows and CPU (this process and QuestDB, measured around the awaited call: the detector makes
 * one call at a time) to its part: the observed windows (per-minute aggregates of the raw
 * tables), the baselines (anomaly_buckets), the roll-up (5-minute aggregates, and its writes).
 */
class Parts {
  on = false;
  readonly byPart = new Map<string, Part>();

  constructor(private readonly qdbPid: number | undefined) {}

  wrap(inner: SeriesStore): SeriesStore {
    return {
      ...inner,
      aggregate: (table, q) =>
        this.time(
          table.name === anomalyBuckets.name
            ? "baselines: 5-minute buckets, 7 days (anomaly_buckets)"
            : q.bucket === "minute"
              ? "observed windows: per-minute aggregates of the raw rows"
              : q.bucket === "five_minutes"
                ? "roll-up: 5-minute aggregates of the raw rows"
                : `other aggregates (${q.bucket})`,
          () => inner.aggregate(table, q),
          (rows) => rows.length,
        ),
      append: (table, rows) =>
        this.time(
          `roll-up: writes (${table.name})`,
          () => inner.append(table, rows),
          () => rows.length,
        ),
      waitVisible: (timeoutMs) =>
        this.time(
          "waiting until QuestDB has applied the writes (waitVisible)",
          () => inner.waitVisible(timeoutMs),
          () => 0,
        ),
    };
  }

  private async time<T>(what: string, call: () => Promise<T>, rows: (v: T) => number): Promise<T> {
    if (!this.on) return call();
    const c0 = ownCpuSeconds();
    const q0 = processCpuSeconds(this.qdbPid);
    const t0 = performance.now();
    const v = await call();
    const p = this.byPart.get(what) ?? { calls: 0, rows: 0, wallMs: 0, cpuMs: 0, questdbMs: 0 };
    p.calls++;
    p.rows += rows(v);
    p.wallMs += performance.now() - t0;
    p.cpuMs += (ownCpuSeconds() - c0) * 1000;
    p.questdbMs += (processCpuSeconds(this.qdbPid) - q0) * 1000;
    this.byPart.set(what, p);
    return v;
  }
}

/** Waits (at most 2 minutes) until no folder of this benchmark's tables is left in QuestDB's `dir`. */
async function waitPurged(dir: string, say: (s: string) => void): Promise<void> {
  const left = () => {
    try {
      return fs
        .readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory() && e.name.startsWith(PREFIX)).length;
    } catch {
      return 0;
    }
  };
  const t0 = Date.now();
  if (left() > 0) say("waiting for QuestDB to remove the dropped tables' files");
  while (left() > 0 && Date.now() - t0 < 120_000) await sleep(500);
  if (left() > 0)
    say(
      `cleanup: ${left()} dropped tables' folders are still in ${dir}; QuestDB removes them at its next start`,
    );
  else if (Date.now() - t0 > 1_000) say(`  removed in ${fmt((Date.now() - t0) / 1000)} s`);
}

/** QuestDB's CPU over 5 s of doing nothing, as a share of a core. */
async function idleShare(pid: number | undefined): Promise<number> {
  const q0 = processCpuSeconds(pid);
  await sleep(5_000);
  return (processCpuSeconds(pid) - q0) / 5;
}

// --- the fleet ---------------------------------------------------------------------------------------

/** Per metric and level, `n` connections of the metric's kind, spread over its range, none twice. */
function chooseDeviations(ranges: Record<Kind, [number, number]>, n: number): Map<number, Deviation> {
  const out = new Map<number, Deviation>();
  for (const kind of Object.keys(ranges) as Kind[]) {
    const [lo, hi] = ranges[kind];
    const sets = (["strong", "moderate"] as Level[]).flatMap((level) =>
      METRIC_KINDS.filter(([, k]) => k === kind).map(([metric]) => ({ metric, level })),
    );
    const need = sets.length * n;
    if (need > hi - lo)
      throw new Error(
        `--deviating ${n}: ${kind} needs ${need} connections (${sets.length} sets) but has ${hi - lo}; ` +
          "use more --connections or fewer --deviating",
      );
    sets.forEach((s, k) => {
      for (let j = 0; j < n; j++) {
        const c = lo + Math.floor(((j * sets.length + k + 0.5) * (hi - lo)) / need);
        out.set(c, { ...s, factor: LEVELS[s.level].factor, failP: LEVELS[s.level].failP });
      }
    });
  }
  return out;
}

async function insertConnections(
  db: RelationalStore,
  users: { id: string }[],
  from: number,
  to: number,
  nA: number,
  nWf: number,
): Promise<void> {
  await db.query(
    `INSERT INTO connections (id, user_id, service_type, service_name, status, base_url)
     SELECT $1 || lpad(g::text, $2, '0'), ($3::text[])[1 + g % cardinality($3::text[])],
            CASE WHEN g < $4 THEN 'workflow_a' WHEN g < $5 THEN 'workflow_b' ELSE 'gateway' END,
            'bench ' || g, 'active', CASE WHEN g < $5 THEN 'http://127.0.0.1:1' END
       FROM generate_series($6::int, $7::int - 1) g`,
    [ID_PREFIX, ID_DIGITS, users.map((u) => u.id), nA, nWf, from, to],
  );
}

/** One minute's rows of every connection, as probes, syncs and heartbeats would store them. */
function minuteRows(l: Layout, minute: number): TableRows[] {
  const checks: RowOf<typeof availabilitySamples>[] = [];
  const runs: RowOf<typeof executions>[] = [];
  const beats: RowOf<typeof gatewayHeartbeats>[] = [];
  const usage: RowOf<typeof usageEntries>[] = [];
  const index = minute / MINUTE;
  for (let c = 0; c < l.nConn; c++) {
    const ts = new Date(minute + offsetSec(c) * SECOND);
    const dev = minute >= l.deviateFrom ? l.deviations.get(c) : undefined;
    const factor = (m: AnomalyMetric) => (dev?.metric === m ? dev.factor : 1);
    const failP = (m: AnomalyMetric) => (dev?.metric === m ? dev.failP : 0.01);
    const id = idOf(c);
    if (c >= l.nWf) {
      const latency = (50 + Math.random() * 100) * factor("gateway_latency");
      const up = Math.random() >= 0.01;
      checks.push(sample(ts, id, up, latency, "heartbeat"));
      beats.push({
        ts,
        connection_id: id,
        heartbeat_id: `hb_${index}_${c}`,
        status: "healthy",
        healthy: true,
        latency_ms: latency,
        version: "1.0.0",
        pid_alive: true,
        system: null,
        period_start: new Date(ts.getTime() - MINUTE),
        period_end: ts,
        input_tokens: Math.round((1000 + Math.random() * 500) * factor("token_volume")),
        output_tokens: Math.round((200 + Math.random() * 100) * factor("token_volume")),
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        request_count: 10,
        cost_usd: (0.01 + Math.random() * 0.005) * factor("token_spend"),
        received_at: ts,
      });
      continue;
    }
    const up = Math.random() >= failP("failure_rate");
    checks.push(sample(ts, id, up, (20 + Math.random() * 200) * factor("response_time"), "probe"));
    runs.push({
      ts,
      connection_id: id,
      execution_id: `x_${index}_${c}`,
      workflow_id: `wf_${c % 7}`,
      status: Math.random() < failP("execution_failure_rate") ? "error" : "success",
      mode: "trigger",
      stopped_at: new Date(ts.getTime() + 20 * SECOND),
      duration_ms: 20_000,
      error: null,
      updated_at: new Date(ts.getTime() + 20 * SECOND),
      error_node: null,
      last_node: null,
    });
    if (c % 4 === 0 && index % 5 === (c / 4) % 5)
      usage.push({
        ts,
        id: `u_${index}_${c}`,
        connection_id: id,
        entity: "gpt-4o",
        usage_amount: 5000 + Math.random() * 1000,
        usage_entity: "tokens",
        custom_name: null,
        cost_cents: 50 + Math.random() * 10,
        workflow_id: null,
        execution_id: null,
        metadata: null,
      });
  }
  return [
    { table: availabilitySamples, rows: checks },
    { table: executions, rows: runs },
    { table: gatewayHeartbeats, rows: beats },
    { table: usageEntries, rows: usage },
  ];
}

function sample(
  ts: Date,
  id: string,
  up: boolean,
  ms: number,
  source: "probe" | "heartbeat",
): RowOf<typeof availabilitySamples> {
  return {
    ts,
    connection_id: id,
    available: up,
    response_time_ms: ms,
    status_code: up ? 200 : 503,
    reason: up ? null : "http_status",
    error: up ? null : "status 503",
    synthetic: false,
    source,
  };
}

// --- seeding ---------------------------------------------------------------------------------------

/**
 * The same rows as `minuteRows` (without deviations) generated inside QuestDB for each segment
 * [from, to) of whole minutes, one statement per table and segment.
 */
async function seedQuestdb(
  pool: pg.Pool,
  s: { nConn: number; nWf: number; segments: [number, number][]; say: (s: string) => void },
) {
  const { nConn, nWf } = s;
  const nGw = nConn - nWf;
  const usageConns = Math.ceil(nWf / 4);
  const minutes = s.segments.map(([f, t]) => (t - f) / MINUTE);
  const all = minutes.reduce((x, y) => x + y, 0);
  const counts = {
    availability: nConn * all,
    executions: nWf * all,
    heartbeats: nGw * all,
    usage: usageConns * (all / 5),
  };
  const total = Object.values(counts).reduce((x, y) => x + y, 0);
  s.say(
    `seeding QuestDB: ${fmt(total)} rows in ${s.segments.length} windows (${fmt(counts.availability)} checks, ` +
      `${fmt(counts.executions)} executions, ${fmt(counts.heartbeats)} heartbeats, ${fmt(counts.usage)} usage entries)`,
  );
  const t0 = Date.now();
  let done = 0;
  const tick = (label: string, k: number, rows: number) => {
    done += rows;
    process.stderr.write(
      `\r  window ${k + 1}/${s.segments.length} ${label}: ${fmt((done / total) * 100)}% of rows, ${fmt((Date.now() - t0) / 1000)} s     `,
    );
  };
  for (const [k, [from, to]] of s.segments.entries()) {
    const n = (to - from) / MINUTE;
    const base = `'${new Date(from).toISOString()}'::timestamp`;
    const first = from / MINUTE; // the segment's first minute since the epoch (a multiple of 5)
    const at = (m: string, c: string) => `dateadd('s', ${qdbOffset(c)}, dateadd('m', ${m}, ${base}))`;
    await pool.query(
      `INSERT INTO ${PREFIX}availability_samples
         (ts, connection_id, available, response_time_ms, status_code, reason, error, synthetic, source)
       SELECT ${at("m", "c")}, ${qdbId("c")}, rnd_double() >= 0.01,
              CASE WHEN c >= ${nWf} THEN 50 + rnd_double() * 100 ELSE 20 + rnd_double() * 200 END,
              200L, null, null, false, CASE WHEN c >= ${nWf} THEN 'heartbeat' ELSE 'probe' END
         FROM (SELECT ((x - 1) / ${nConn})::int m, ((x - 1) % ${nConn})::int c FROM long_sequence(${nConn * n}))`,
    );
    tick("checks", k, nConn * n);
    if (nWf > 0) {
      await pool.query(
        `INSERT INTO ${PREFIX}executions
           (ts, connection_id, execution_id, workflow_id, status, mode, stopped_at, duration_ms, error,
            updated_at, error_node, last_node)
         SELECT ${at("m", "c")}, ${qdbId("c")}, 'x_' || (${first} + m)::string || '_' || c::string,
                'wf_' || (c % 7)::string, CASE WHEN rnd_double() < 0.01 THEN 'error' ELSE 'success' END, 'trigger',
                dateadd('s', 20, ${at("m", "c")}), 20000.0, null, dateadd('s', 20, ${at("m", "c")}), null, null
           FROM (SELECT ((x - 1) / ${nWf})::int m, ((x - 1) % ${nWf})::int c FROM long_sequence(${nWf * n}))`,
      );
      tick("executions", k, nWf * n);
      await pool.query(
        `INSERT INTO ${PREFIX}usage_entries
           (ts, id, connection_id, entity, usage_amount, usage_entity, custom_name, cost_cents, workflow_id,
            execution_id, metadata)
         SELECT ${at("m", "c")}, 'u_' || (${first} + m)::string || '_' || c::string, ${qdbId("c")}, 'gpt-4o',
                5000 + rnd_double() * 1000, 'tokens', null, 50 + rnd_double() * 10, null, null, null
           FROM (SELECT 5 * ((x - 1) / ${usageConns})::int + ((x - 1) % ${usageConns})::int % 5 m,
                        4 * ((x - 1) % ${usageConns})::int c
                   FROM long_sequence(${usageConns * (n / 5)}))`,
      );
      tick("usage", k, usageConns * (n / 5));
    }
    if (nGw > 0) {
      await pool.query(
        `INSERT INTO ${PREFIX}gateway_heartbeats
           (ts, connection_id, heartbeat_id, status, healthy, latency_ms, version, pid_alive, system,
            period_start, period_end, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
            request_count, cost_usd, received_at)
         SELECT ${at("m", "c")}, ${qdbId("c")}, 'hb_' || (${first} + m)::string || '_' || c::string, 'healthy', true,
                50 + rnd_double() * 100, '1.0.0', true, null,
                dateadd('m', -1, ${at("m", "c")}), ${at("m", "c")},
                round(1000 + rnd_double() * 500)::long, round(200 + rnd_double() * 100)::long, 0L, 0L, 10L,
                0.01 + rnd_double() * 0.005, ${at("m", "c")}
           FROM (SELECT ((x - 1) / ${nGw})::int m, ${nWf} + ((x - 1) % ${nGw})::int c FROM long_sequence(${nGw * n}))`,
      );
      tick("heartbeats", k, nGw * n);
    }
  }
  process.stderr.write("\n");
  s.say(`  inserted in ${fmt((Date.now() - t0) / 1000, 1)} s`);
  return counts;
}

// --- reading back ----------------------------------------------------------------------------------

interface AnomalyRow extends Record<string, unknown> {
  connection_id: string;
  metric: string;
  detected_at: Date;
  started_at: Date;
  incident_id: string | null;
  observed: number | string;
  baseline_median: number | string | null;
  band_high: number | string | null;
}

async function anomalyRows(db: RelationalStore): Promise<AnomalyRow[]> {
  const r = await db.query<AnomalyRow>(
    `SELECT connection_id, metric, detected_at, started_at, incident_id, observed, baseline_median, band_high
       FROM anomalies ORDER BY detected_at`,
  );
  return r.rows.map((x) => ({
    ...x,
    detected_at: new Date(x.detected_at),
    started_at: new Date(x.started_at),
  }));
}

interface IncidentRow extends Record<string, unknown> {
  id: string;
  connection_id: string;
  opened_at: Date;
}

async function anomalyIncidents(db: RelationalStore): Promise<IncidentRow[]> {
  const r = await db.query<IncidentRow>(
    "SELECT id, connection_id, opened_at FROM incidents WHERE kind = 'anomaly' ORDER BY opened_at",
  );
  return r.rows.map((x) => ({ ...x, opened_at: new Date(x.opened_at) }));
}

// --- budgets ---------------------------------------------------------------------------------------

/**
 * `n` new connections (workflow_b, no other data) with a $10 budget each, set through the API;
 * ten usage entries of $1.10 each, one a second, through `POST /v1/usage`; `budget_warnings`
 * polled until each connection has its 50, 80 and 100% rows (or 30 s after the last entry).
 * Answers, per threshold, the time from sending the crossing entry to seeing its row.
 */
async function budgetPhase(
  db: RelationalStore,
  app: FastifyInstance,
  users: { id: string; key: string }[],
  o: { from: number; n: number; say: (s: string) => void },
): Promise<{ latencies: Map<string, number[]>; missing: number; projected: number }> {
  o.say(`budgets: ${o.n} connections with $${BUDGET_USD} each, usage through POST /v1/usage, real time`);
  await insertConnections(db, users, o.from, o.from + o.n, -1, o.from + o.n);
  const conns = Array.from({ length: o.n }, (_, j) => {
    const g = o.from + j;
    return { id: idOf(g), key: (users[g % users.length] as { key: string }).key };
  });
  for (const c of conns) {
    const r = await app.inject({
      method: "PUT",
      url: `/v1/connections/${c.id}/budget`,
      headers: { authorization: `Bearer ${c.key}` },
      payload: { monthly_budget_usd: BUDGET_USD },
    });
    if (r.statusCode !== 200) throw new Error(`PUT budget answered ${r.statusCode}: ${r.body}`);
  }
  const sentAt = new Map<string, number>(); // `${id}/${level}` → when the crossing entry was sent
  const seenAt = new Map<string, number>();
  let failures = 0;
  let sending = true;
  const pollStart = performance.now();
  const poll = (async () => {
    let stopAt = Infinity;
    for (;;) {
      const r = await db.query<{ target_id: string; level: string }>(
        "SELECT target_id, level FROM budget_warnings WHERE scope = 'connection'",
      );
      const now = performance.now();
      for (const w of r.rows) {
        const k = `${w.target_id}/${w.level}`;
        if (!seenAt.has(k)) seenAt.set(k, now);
      }
      const complete = conns.every((c) => ["50", "80", "100"].every((l) => seenAt.has(`${c.id}/${l}`)));
      if (!sending && stopAt === Infinity) stopAt = now + 30_000;
      // bounded: 30 s after the last entry, and 5 minutes in all
      if ((!sending && complete) || now > stopAt || now - pollStart > 300_000) return;
      await sleep(POLL_MS);
    }
  })();
  const t0 = performance.now();
  const senders = Promise.all(
    conns.map(async (c) => {
      await sleep(Math.random() * ENTRY_EVERY_MS);
      const start = performance.now();
      for (let k = 0; k < ENTRIES; k++) {
        const due = start + k * ENTRY_EVERY_MS;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const sent = performance.now();
        const r = await app.inject({
          method: "POST",
          url: "/v1/usage",
          headers: { authorization: `Bearer ${c.key}` },
          payload: { connection_id: c.id, entity: "gpt-4o", usage_amount: 1000, cost_cents: ENTRY_CENTS },
        });
        if (r.statusCode !== 201) failures++;
        for (const [level, entry] of Object.entries(CROSSING))
          if (entry === k) sentAt.set(`${c.id}/${level}`, sent);
      }
    }),
  );
  try {
    await senders;
  } finally {
    sending = false;
    await poll;
  }
  o.say(
    `  sent ${fmt(o.n * ENTRIES)} usage entries in ${fmt((performance.now() - t0) / 1000, 1)} s; ${failures} refused`,
  );
  const latencies = new Map<string, number[]>();
  let missing = 0;
  for (const [k, sent] of sentAt) {
    const level = k.slice(k.lastIndexOf("/") + 1);
    const seen = seenAt.get(k);
    if (seen === undefined) {
      missing++;
      continue;
    }
    latencies.set(level, [...(latencies.get(level) ?? []), seen - sent]);
  }
  // an evaluation the watch still has scheduled (at most one per budget every 2 s) ends before the stores close
  await sleep(BUDGET_WATCH_DEFAULTS.minEvaluationGapMs + 1_000);
  const projected = [...seenAt.keys()].filter((k) => k.endsWith("/projected")).length;
  return { latencies, missing, projected };
}
