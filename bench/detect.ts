import pLimit from "p-limit";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Session } from "node:inspector/promises";
import { parseArgs } from "node:util";
import pg from "pg";
import { type DetectorRun, detectAnomalies, windowStart } from "../src/anomalies/detect.js";
import { HOUR_MS } from "../src/anomalies/baselines.js";
import type { Config } from "../src/config.js";
import { type AppContext, closeContext, createContext } from "../src/core/context.js";
import { createUser } from "../src/identity/accounts.js";
import { createLogger } from "../src/lib/logger.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import type { Queryable, RelationalStore, Row } from "../src/stores/relational/types.js";
import { applyQuestdbSchema, createQuestdbSeriesStore, questdbPool } from "../src/stores/series/questdb.js";
import type { SeriesTable } from "../src/stores/series/tables.js";
import type { AggregateQuery, AggregateRow, SeriesStore } from "../src/stores/series/types.js";
import { StoreSupervisor } from "../src/stores/supervisor.js";
import { listenerPid, processCpuSeconds } from "./lib/cpu.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { benchQuestdb } from "./lib/questdb.js";
import { fmt, table } from "./lib/report.js";

const MINUTE = 60_000;
const DAY = 86_400_000;
const PREFIX = "bench_detect_";
/** Connection ids: this prefix and a 6-digit number (the same text in QuestDB and PostgreSQL). */
const ID_PREFIX = "bdet_";
const ID_DIGITS = 6;
/** The store's QuestDB pool (questdbPool's default): the direct replay uses as many connections. */
const STORE_POOL = 4;
/** The detector's 4 aggregates for the window hour and the same hour on each of the 7 days before. */
/** Per hour: checks (counts, then the p95 by window functions), executions, heartbeats (sums, then the p95), usage. */
const EXPECTED_STATEMENTS = 6 * 8;
/** Hours the detector reads at once, each one statement at a time (src/anomalies/detect.ts). */
const DETECTOR_STREAMS = 2;
const TARGET_RATIO = 1.5;
const TARGET_WALL_MS = 60_000;

const idOf = (i: number) => `${ID_PREFIX}${String(i).padStart(ID_DIGITS, "0")}`;
/** The same id, as a QuestDB expression over an integer column `c`. */
const qdbId = (c: string) => `'${ID_PREFIX}' || lpad(${c}::string, ${ID_DIGITS}, '0')`;

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;

interface Sample {
  wallMs: number;
  /** This process's CPU (user + system, all threads), ms. */
  cpuMs: number;
  /** QuestDB's CPU, ms (NaN unless QuestDB listens on loopback). */
  questdbMs: number;
  rows: number;
}

/**
 * `vigil bench detect` (issue #14, Benchmark): one anomaly-detector run over 1,000 connections
 * with 7 days of 1-minute samples and hourly usage in QuestDB, against the same baseline
 * statements sent straight to QuestDB in the same run.
 *
 * Seeds, in a throwaway PostgreSQL database, `--connections` connections (40% workflow_a, 30%
 * workflow_b, 30% gateway) and, in QuestDB tables of their own (prefix `bench_detect_`), generated
 * on the server with `INSERT … SELECT … FROM long_sequence`, `--days` days ending at an hour
 * boundary of: one availability sample a minute for every connection, an execution every 10
 * minutes for the workflow connections, a heartbeat a minute (latency, tokens, cost) for the
 * gateways and a usage entry an hour for every connection. `--anomalous` connections (spread
 * over the kinds) have a step in response time (gateways: also in heartbeat latency) over the last
 * two hours.
 *
 * The clock is fixed 5 minutes after that boundary, so the window is the last seeded hour. Before
 * each run the detector's memory is put back to what the previous hour's run would have left
 * (every connection judged up to the hour before; the anomalous ones one window outside the
 * band), and its anomalies, incidents and notifications are emptied: each run is the steady-state
 * run of a live system, judging every connection and opening the anomalies (after 2 windows, the
 * default ANOMALY_WINDOWS) and incidents of the anomalous ones. The first run is a warm-up; its
 * statements to QuestDB are captured.
 *
 * `--runs` times, alternating: `detectAnomalies(ctx)` (wall time, this process's CPU, QuestDB's
 * CPU; a run that throws is reported with its time to failure, and the statements it left running
 * on QuestDB are waited for), then the captured 48 statements straight to QuestDB over pg-wire
 * through a pool of as many connections as the store's (4), sent as the detector sends them (two
 * hours at a time, each hour's statements one after another), without a client-side acquire
 * timeout. Then,
 * to say where the time goes: each statement alone (QuestDB's cost per table); one instrumented
 * detector run with at most 4 aggregates in flight (none waits in the pool's queue), timing
 * QuestDB, PostgreSQL and the rest, its answers recorded; and `--runs` detector runs answered from
 * those recordings (Vigil's own work: PostgreSQL, judging, incidents). `--cpu-prof DIR` adds a CPU
 * profile of one such run and its heaviest functions. Prints a row for the table of docs/benchmarks.md.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      connections: { type: "string", default: "1000" },
      days: { type: "string", default: "8" },
      runs: { type: "string", default: "5" },
      anomalous: { type: "string", default: "10" },
      "cpu-prof": { type: "string" },
    },
  });
  const nConn = positiveInt("connections", values.connections);
  const days = positiveInt("days", values.days);
  const runs = positiveInt("runs", values.runs);
  const nAnomalous = Math.min(nConn, positiveInt("anomalous", values.anomalous));
  const profDir = values["cpu-prof"];
  const say = (s: string) => process.stderr.write(`${s}\n`);
  if (days < 8)
    say(`warning: --days ${days}: the window and its 7 baseline days need 8; baselines will be short`);
  const log = createLogger("warn");
  const benchConfig: Config = {
    ...config,
    logLevel: "warn",
    secret: config.secret ?? "bench-secret-bench-secret-bench-secret!",
  };

  // kinds by contiguous ranges of the index: [0, nA) workflow_a, [nA, nWf) workflow_b, [nWf, n) gateway
  const nA = Math.round(nConn * 0.4);
  const nWf = nA + Math.round(nConn * 0.3);
  const nGw = nConn - nWf;
  const anomalous = Array.from({ length: nAnomalous }, (_, k) =>
    Math.floor(((k + 0.5) * nConn) / nAnomalous),
  );
  const anomalousGw = anomalous.filter((i) => i >= nWf);

  // the clock: 5 minutes past the hour; the window is the last full hour, which the seed ends with
  const end = Math.floor(Date.now() / HOUR_MS) * HOUR_MS;
  const now = new Date(end + 5 * MINUTE);
  const window = windowStart(now);
  if (window.getTime() !== end - HOUR_MS) throw new Error("bench: the window is not the last seeded hour");
  const start = end - days * DAY;
  const stepFrom = end - 2 * HOUR_MS; // the anomalous connections' step: the window and the hour before

  const qdb = benchQuestdb(config, say);
  const qdbPid = listenerPid(qdb.pgUrl) ?? listenerPid(qdb.httpUrl);
  const cleanups: (() => Promise<unknown>)[] = [];
  const say2 = (e: unknown) => say(`cleanup: ${(e as Error).message}`);
  try {
    const scratch = await throwawayDatabase(config, "bench_detect");
    cleanups.push(scratch.drop);
    const db = createPgStore({ connectionString: scratch.url });
    cleanups.unshift(() => db.close());
    await migrate(db);

    // --- PostgreSQL: 10 users, the connections round-robin among them ---------------------------
    say(
      `seeding PostgreSQL: ${fmt(nConn)} connections (${nA} workflow_a, ${nWf - nA} workflow_b, ${nGw} gateway)`,
    );
    const users: string[] = [];
    for (let u = 0; u < Math.min(10, nConn); u++)
      users.push(
        (await createUser(db, { email: `bench-detect-${u}-${Date.now()}@x.example`, plan: "enterprise" })).id,
      );
    await db.query(
      `INSERT INTO connections (id, user_id, service_type, service_name, status, base_url)
       SELECT $1 || lpad(g::text, $2, '0'), ($3::text[])[1 + g % cardinality($3::text[])],
              CASE WHEN g < $4 THEN 'workflow_a' WHEN g < $5 THEN 'workflow_b' ELSE 'gateway' END,
              'bench ' || g, 'active', CASE WHEN g < $5 THEN 'http://127.0.0.1:1' END
         FROM generate_series(0, $6 - 1) g`,
      [ID_PREFIX, ID_DIGITS, users, nA, nWf, nConn],
    );

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
    });
    const counts = await seedQuestdb(pool, { nConn, nWf, nGw, days, start, stepFrom, anomalous, say });
    const totalRows = Object.values(counts).reduce((a, b) => a + b, 0);

    const captured: { sql: string; params: unknown[] }[] = [];
    let capture = false;
    const series = await createQuestdbSeriesStore({
      httpUrl: qdb.httpUrl,
      pgUrl: qdb.pgUrl,
      tablePrefix: PREFIX,
      onQuery: (sql, params) => {
        if (capture) captured.push({ sql, params });
      },
    });
    cleanups.unshift(() => series.close());
    const visibleStart = Date.now();
    await series.waitVisible(600_000);
    say(`  all rows visible ${fmt((Date.now() - visibleStart) / 1000, 1)} s after the last insert`);

    // The detector gets the store through a probe that only tracks its calls (so a failed run's
    // statements still running on QuestDB are waited for before anything else is timed); the
    // diagnostic runs below switch it to limit, record or replay them.
    const probe = new SeriesProbe(series);
    const ctx = context(benchConfig, log, db, probe.store(), now);
    cleanups.unshift(() => closeContext(ctx));
    // The baseline: the same statements over as many connections as the store's pool, all sent at
    // once as the detector sends them (no acquire timeout: the database's own time, queueing included).
    const direct = new pg.Pool({ connectionString: qdb.pgUrl, max: STORE_POOL });
    direct.on("error", () => {});
    cleanups.unshift(() => direct.end());

    const reset = () => resetDetector(db, { previous: new Date(window.getTime() - HOUR_MS), anomalous });
    const expectedOpened = anomalous.length + anomalousGw.length;
    const detect = async (c: AppContext): Promise<Attempt> => {
      await reset();
      let result: DetectorRun | undefined;
      let error: string | undefined;
      const sample = await measure(qdbPid, async () => {
        try {
          result = await detectAnomalies(c);
        } catch (err) {
          error = (err as Error).message;
        }
        return 0;
      });
      const t0 = performance.now();
      await probe.settle();
      const straggling = performance.now() - t0;
      return { sample, result, error, straggling, outcome: result ? await countOutcome(db) : undefined };
    };

    // warm-up run, capturing the statements the detector sends to QuestDB
    say("warm-up run (capturing the statements sent to QuestDB)");
    captured.length = 0;
    capture = true;
    const warm = await detect(ctx);
    capture = false;
    say(`  ${describe(warm)}`);
    const statements = [...captured];
    if (statements.length === 0)
      throw new Error(`the detector sent no statement to QuestDB: ${warm.error ?? ""}`);
    if (statements.length !== EXPECTED_STATEMENTS)
      say(`warning: captured ${statements.length} statements, expected ${EXPECTED_STATEMENTS}`);
    // as the detector sends them: in capture order, two at a time
    const streams = pLimit(DETECTOR_STREAMS);
    const sendDirect = async () =>
      (await Promise.all(statements.map((s) => streams(() => direct.query(s.sql, s.params))))).reduce(
        (n, r) => n + r.rows.length,
        0,
      );
    await Promise.all(Array.from({ length: STORE_POOL }, () => direct.query("SELECT 1"))); // open the connections

    // measured runs: the detector as built and the direct statements alternate, so host drift hits both
    const vigil: Attempt[] = [];
    const straight: Sample[] = [];
    for (let i = 0; i < runs; i++) {
      const v = await detect(ctx);
      vigil.push(v);
      const d = await measure(qdbPid, sendDirect);
      straight.push(d);
      say(`run ${i + 1}/${runs}: detector ${describe(v)}; direct ${fmt(d.wallMs)} ms (${fmt(d.rows)} rows)`);
    }

    // the direct statements one at a time: what each costs QuestDB
    say("direct statements one at a time");
    const perTable = new Map<string, { n: number; ms: number; max: number; rows: number }>();
    for (const s of statements) {
      const t0 = performance.now();
      const r = await direct.query(s.sql, s.params);
      const ms = performance.now() - t0;
      const name = /FROM\s+(\w+)/i.exec(s.sql)?.[1]?.replace(PREFIX, "") ?? "?";
      const e = perTable.get(name) ?? { n: 0, ms: 0, max: 0, rows: 0 };
      perTable.set(name, {
        n: e.n + 1,
        ms: e.ms + ms,
        max: Math.max(e.max, ms),
        rows: e.rows + r.rows.length,
      });
    }

    // diagnostic 1: the detector with its aggregates kept to the pool's size (none waits for a
    // connection), instrumented, its answers recorded
    say(`diagnostic: detector with at most ${STORE_POOL} aggregates in flight, instrumented`);
    const inst = instrument(db);
    probe.mode = { limit: STORE_POOL, record: true };
    probe.resetTimes();
    const limited = await detect(context(benchConfig, log, inst.db, probe.store(), now));
    say(`  ${describe(limited)}`);
    const br = { ...inst.t, seriesCalls: probe.calls, seriesMs: probe.spanMs() };

    // diagnostic 2: the detector with every aggregate answered from memory: Vigil's own work
    // (PostgreSQL, judging, the incidents domain), without QuestDB
    const replayed: Attempt[] = [];
    let hot: string[] = [];
    // one aggregate() call per table and hour (32); the store may send two statements for one
    if (probe.recorded.size === 32) {
      probe.mode = { replay: true };
      say(`diagnostic: detector with the ${statements.length} aggregates answered from memory, ${runs} runs`);
      for (let i = 0; i < runs; i++) replayed.push(await detect(ctx));
      if (profDir) {
        const session = await startProfile();
        const prof = await detect(ctx);
        const { profile } = await session.post("Profiler.stop");
        session.disconnect();
        fs.mkdirSync(profDir, { recursive: true });
        const file = path.join(profDir, `detect-own-work-${Date.now()}.cpuprofile`);
        fs.writeFileSync(file, JSON.stringify(profile));
        say(`  CPU profile (${fmt(prof.sample.wallMs)} ms run): ${file}`);
        hot = heaviest(profile as unknown as CpuProfile, 15);
      }
    } else say(`  skipped: ${probe.recorded.size} of 32 aggregates were recorded`);
    probe.mode = {};

    // --- report -----------------------------------------------------------------------------------
    const stats = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return { p50: percentile(s, 50), max: s[s.length - 1] ?? NaN };
    };
    const ok = vigil.filter((v) => !v.error);
    const failed = vigil.filter((v) => v.error);
    const vW = stats(vigil.map((v) => v.sample.wallMs));
    const vC = stats(vigil.map((v) => v.sample.cpuMs));
    const vQ = stats(vigil.map((v) => v.sample.questdbMs));
    const dW = stats(straight.map((d) => d.wallMs));
    const dC = stats(straight.map((d) => d.cpuMs));
    const dQ = stats(straight.map((d) => d.questdbMs));
    const oW = stats(replayed.map((v) => v.sample.wallMs));
    const oC = stats(replayed.map((v) => v.sample.cpuMs));
    const rowsBack = straight[0]?.rows ?? 0;
    const allOk = failed.length === 0;
    const ratio = allOk ? vW.p50 / dW.p50 : NaN;
    const ratioMet = allOk && ratio <= TARGET_RATIO;
    const wallMet = allOk && vW.max < TARGET_WALL_MS;
    const lastGood = [...ok, ...(limited.error ? [] : [limited]), ...replayed.filter((r) => !r.error)].at(-1);
    const firstError = failed[0]?.error;

    console.log(
      `\ndetect: ${fmt(nConn)} connections (${nA} workflow_a, ${nWf - nA} workflow_b, ${nGw} gateway), ` +
        `${days} days to ${new Date(end).toISOString()} in QuestDB: ${fmt(counts.availability)} availability samples (1/min), ` +
        `${fmt(counts.executions)} executions (workflow kinds, 1/10 min), ${fmt(counts.heartbeats)} gateway heartbeats (1/min), ` +
        `${fmt(counts.usage)} usage entries (1/h); ${fmt(totalRows)} rows. ` +
        `Relational store: PostgreSQL. Clock ${now.toISOString()}, window ${window.toISOString()} + 1 h. ` +
        `${runs} runs after a warm-up, detector and direct alternating; ` +
        `host: ${os.availableParallelism()} cores, load average ${fmt(os.loadavg()[0] ?? NaN, 2)}\n`,
    );
    const rowsOut: (string | number)[][] = [
      [
        `detectAnomalies(ctx)${allOk ? "" : ` FAILED ${failed.length}/${vigil.length} (time to failure)`}`,
        fmt(vW.p50, 1),
        fmt(vW.max, 1),
        fmt(vC.p50),
        fmt(vQ.p50),
        allOk ? fmt(rowsBack) : "",
        allOk ? fmt(ratio, 2) : "n/a",
      ],
      [
        `same ${statements.length} statements straight to QuestDB (${DETECTOR_STREAMS} at a time, as the detector)`,
        fmt(dW.p50, 1),
        fmt(dW.max, 1),
        fmt(dC.p50),
        fmt(dQ.p50),
        fmt(rowsBack),
        "1.00",
      ],
      [
        `diagnostic: detector, at most ${STORE_POOL} aggregates in flight (1 run)${limited.error ? " FAILED" : ""}`,
        fmt(limited.sample.wallMs, 1),
        "",
        fmt(limited.sample.cpuMs),
        fmt(limited.sample.questdbMs),
        "",
        fmt(limited.sample.wallMs / dW.p50, 2),
      ],
    ];
    if (replayed.length)
      rowsOut.push([
        "diagnostic: detector, aggregates answered from memory (Vigil's own work)",
        fmt(oW.p50, 1),
        fmt(oW.max, 1),
        fmt(oC.p50),
        "",
        "",
        fmt(oW.p50 / dW.p50, 2),
      ]);
    console.log(
      table(["what", "p50 ms", "max ms", "Vigil CPU ms/run", "QuestDB CPU ms/run", "rows", "ratio"], rowsOut),
    );
    console.log(
      "\nratio = row's p50 / direct p50. CPU: this process (user + system, all threads) and QuestDB's " +
        "(n/a unless it listens on loopback); the direct row's Vigil CPU is the pg client's.",
    );
    if (!allOk) {
      console.log(
        `\ndetectAnomalies failed in ${failed.length} of ${vigil.length} runs: "${firstError}" ` +
          `(after ${fmt(vW.p50)} ms p50; its statements still running on QuestDB finished ${fmt(
            stats(failed.map((f) => f.straggling)).p50,
          )} ms later)`,
      );
    }
    if (lastGood?.result) {
      const o = lastGood.outcome;
      console.log(
        `per run: judged ${fmt(lastGood.result.judged)} connection-metrics, opened ${lastGood.result.opened} anomalies ` +
          `(expected ${expectedOpened}: ${anomalous.length} response_time + ${anomalousGw.length} gateway_latency), ` +
          `resolved ${lastGood.result.resolved}` +
          (o
            ? `; after it: ${o.anomalies} open anomalies, ${o.incidents} anomaly incidents, ` +
              `${o.notifications} notifications queued, ${fmt(o.states)} detector states`
            : ""),
      );
      if (lastGood.result.opened !== expectedOpened)
        console.log(`WARNING: opened ${lastGood.result.opened} anomalies, expected ${expectedOpened}`);
    }
    console.log(
      allOk
        ? `ratio ${fmt(ratio, 2)}: ${ratioMet ? "meets" : "MISSES"} target <= ${TARGET_RATIO}; ` +
            `slowest full run ${fmt(vW.max / 1000, 2)} s: ${wallMet ? "meets" : "MISSES"} target < ${TARGET_WALL_MS / 1000} s`
        : `ratio n/a: the detector did not complete; MISSES target <= ${TARGET_RATIO} and < ${TARGET_WALL_MS / 1000} s`,
    );
    if (replayed.length)
      console.log(
        `if the detector's statements cost what the direct ones do: direct p50 + own work p50 = ` +
          `${fmt(dW.p50 + oW.p50)} ms, ratio ${fmt((dW.p50 + oW.p50) / dW.p50, 2)}` +
          `; direct p50 ${fmt(dW.p50 / 1000, 1)} s is ${dW.p50 < TARGET_WALL_MS ? "under" : "OVER"} ${TARGET_WALL_MS / 1000} s by itself`,
      );

    console.log(
      `\nQuestDB, each statement alone (sequential, one connection):\n` +
        table(
          ["table", "statements", "total ms", "max ms", "rows"],
          [...perTable.entries()].map(([name, e]) => [name, e.n, fmt(e.ms, 1), fmt(e.max, 1), fmt(e.rows)]),
        ),
    );
    const instMs = limited.sample.wallMs;
    const rest = instMs - br.seriesMs - br.dbMs;
    console.log(
      `\nwhere the detector's time goes (the diagnostic run with at most ${STORE_POOL} aggregates in flight, ${fmt(instMs)} ms):\n` +
        table(
          ["part", "ms", "share", "calls"],
          [
            [
              "QuestDB: aggregates, first sent to last answered (incl. row decoding)",
              fmt(br.seriesMs, 1),
              `${fmt((br.seriesMs / instMs) * 100)}%`,
              `${br.seriesCalls}`,
            ],
            [
              `PostgreSQL: ${fmt(br.dbTx)} transactions + statements outside them`,
              fmt(br.dbMs, 1),
              `${fmt((br.dbMs / instMs) * 100)}%`,
              `${fmt(br.dbStatements)} statements + ${fmt(br.dbTx * 2)} BEGIN/COMMIT`,
            ],
            ["the rest (judging in Node, maps)", fmt(rest, 1), `${fmt((rest / instMs) * 100)}%`, ""],
          ],
        ) +
        `\nPostgreSQL statements by kind: ${[...br.byKind.entries()]
          .sort((a, b) => b[1] - a[1])
          .map(([k, n]) => `${k} ${fmt(n)}`)
          .join(", ")}`,
    );
    if (hot.length)
      console.log(`\nheaviest functions by self time (CPU profile of one own-work run):\n${hot.join("\n")}`);

    const o = lastGood?.outcome;
    const readmeRow =
      `| detect | \`npm run bench -- detect\` | one detector run over ${fmt(nConn)} connections ` +
      `(${fmt(totalRows)} rows in QuestDB: ${days} days of 1-minute samples and heartbeats, executions, hourly usage; ` +
      `PostgreSQL): ` +
      (allOk
        ? `p50 ${fmt(vW.p50)} ms, max ${fmt(vW.max)} ms, Vigil CPU ${fmt(vC.p50)} ms per run`
        : `**fails** (${firstError}) after ${fmt(vW.p50)} ms; with at most ${STORE_POOL} aggregates in flight ${fmt(limited.sample.wallMs)} ms`) +
      (lastGood?.result
        ? `; judges ${fmt(lastGood.result.judged)} connection-metrics, opens ${lastGood.result.opened} anomalies and ${o?.incidents ?? "?"} incidents`
        : "") +
      (replayed.length
        ? `; Vigil's own work (PostgreSQL, judging) ${fmt(oW.p50)} ms, ${fmt(oC.p50)} ms CPU`
        : "") +
      ` | the same ${statements.length} baseline statements straight to QuestDB: p50 ${fmt(dW.p50)} ms ` +
      `| ${allOk ? fmt(ratio, 2) : "n/a"} | ≤ ${TARGET_RATIO} (${ratioMet ? "met" : "**not met**"}), ` +
      `< 60 s (${wallMet ? "met" : "**not met**"}) |`;
    console.log(`\ndocs/benchmarks.md row:\n${readmeRow}`);
  } finally {
    for (const c of cleanups) await c().catch(say2);
    qdb.stop();
  }
}

interface Attempt {
  sample: Sample;
  result?: DetectorRun;
  error?: string;
  /** ms until the run's statements still out (after a failure) had all finished. */
  straggling: number;
  outcome?: Outcome;
}

const describe = (a: Attempt) =>
  a.result
    ? `${fmt(a.sample.wallMs)} ms (CPU ${fmt(a.sample.cpuMs)} ms): judged ${fmt(a.result.judged)}, opened ${a.result.opened}`
    : `FAILED after ${fmt(a.sample.wallMs)} ms: ${a.error} (its statements still out took ${fmt(a.straggling)} ms more)`;

function context(
  config: Config,
  log: ReturnType<typeof createLogger>,
  db: RelationalStore,
  series: SeriesStore,
  now: Date,
): AppContext {
  const ctx = createContext(config, log, StoreSupervisor.ready({ db, series }, log, config));
  ctx.now = () => now;
  return ctx;
}

async function measure(qdbPid: number | undefined, fn: () => Promise<number>): Promise<Sample> {
  const q0 = processCpuSeconds(qdbPid);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const rows = await fn();
  const wallMs = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return {
    wallMs,
    cpuMs: (c.user + c.system) / 1000,
    questdbMs: (processCpuSeconds(qdbPid) - q0) * 1000,
    rows,
  };
}

// --- seeding ---------------------------------------------------------------------------------------

interface Seed {
  nConn: number;
  nWf: number;
  nGw: number;
  days: number;
  start: number;
  stepFrom: number;
  anomalous: number[];
  say: (s: string) => void;
}

/** Generates the four tables' rows inside QuestDB, one day per statement. */
async function seedQuestdb(pool: pg.Pool, s: Seed) {
  const { nConn, nWf, nGw, days, start, anomalous } = s;
  const counts = {
    availability: nConn * days * 1440,
    executions: nWf * days * 144,
    heartbeats: nGw * days * 1440,
    usage: nConn * days * 24,
  };
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  s.say(
    `seeding QuestDB: ${fmt(total)} rows (${fmt(counts.availability)} availability samples, ` +
      `${fmt(counts.executions)} executions, ${fmt(counts.heartbeats)} heartbeats, ${fmt(counts.usage)} usage entries)`,
  );
  const t0 = Date.now();
  const stepSet = anomalous.length ? anomalous.join(", ") : "-1";
  let done = 0;
  const tick = (label: string, d: number, rows: number) => {
    done += rows;
    process.stderr.write(
      `\r  ${label} day ${d + 1}/${days}: ${fmt((done / total) * 100)}% of rows, ${fmt((Date.now() - t0) / 1000)} s   `,
    );
  };
  for (let d = 0; d < days; d++) {
    const dayStart = new Date(start + d * DAY).toISOString();
    // minute of the day from which the anomalous connections' step is on (beyond 1440: not today)
    const stepMinute = Math.floor((s.stepFrom - (start + d * DAY)) / MINUTE);

    // one availability sample a minute for every connection; the anomalous ones slow down at the step
    await pool.query(
      `INSERT INTO ${PREFIX}availability_samples
         (ts, connection_id, available, response_time_ms, status_code, reason, error, synthetic, source)
       SELECT dateadd('m', m, '${dayStart}'::timestamp), ${qdbId("c")}, rnd_double() > 0.01,
              CASE WHEN m >= ${stepMinute} AND c IN (${stepSet}) THEN 1500 + rnd_double() * 500
                   ELSE 20 + rnd_double() * 200 END,
              200L, null, null, false, CASE WHEN c >= ${nWf} THEN 'heartbeat' ELSE 'probe' END
         FROM (SELECT ((x - 1) / ${nConn})::int m, ((x - 1) % ${nConn})::int c FROM long_sequence(${nConn * 1440}))`,
    );
    tick("availability", d, nConn * 1440);

    // workflow connections: an execution every 10 minutes, 1% of them failing
    if (nWf > 0) {
      await pool.query(
        `INSERT INTO ${PREFIX}executions
           (ts, connection_id, execution_id, workflow_id, status, mode, stopped_at, duration_ms, error,
            updated_at, error_node, last_node)
         SELECT dateadd('m', m, '${dayStart}'::timestamp), ${qdbId("c")}, 'x${d}_' || c::string || '_' || m::string,
                'wf_' || (c % 7)::string, CASE WHEN rnd_double() < 0.01 THEN 'error' ELSE 'success' END, 'trigger',
                dateadd('s', 30, dateadd('m', m, '${dayStart}'::timestamp)), 30000.0, null,
                dateadd('s', 30, dateadd('m', m, '${dayStart}'::timestamp)), null, null
           FROM (SELECT ((x - 1) / ${nWf})::int * 10 + ((x - 1) % ${nWf})::int % 10 m,
                        ((x - 1) % ${nWf})::int c
                   FROM long_sequence(${nWf * 144}))`,
      );
      tick("executions", d, nWf * 144);
    }

    // gateways: a heartbeat a minute with latency, tokens and cost
    if (nGw > 0) {
      await pool.query(
        `INSERT INTO ${PREFIX}gateway_heartbeats
           (ts, connection_id, heartbeat_id, status, healthy, latency_ms, version, pid_alive, system,
            period_start, period_end, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
            request_count, cost_usd, received_at)
         SELECT dateadd('m', m, '${dayStart}'::timestamp), ${qdbId("c")}, 'hb${d}_' || m::string, 'healthy', true,
                CASE WHEN m >= ${stepMinute} AND c IN (${stepSet}) THEN 1500 + rnd_double() * 500
                     ELSE 50 + rnd_double() * 100 END,
                '1.0.0', true, null,
                dateadd('m', m - 1, '${dayStart}'::timestamp), dateadd('m', m, '${dayStart}'::timestamp),
                (1000 + rnd_double() * 500)::long, (200 + rnd_double() * 100)::long, 0L, 0L, 10L,
                0.01 + rnd_double() * 0.005, dateadd('m', m, '${dayStart}'::timestamp)
           FROM (SELECT ((x - 1) / ${nGw})::int m, ${nWf} + ((x - 1) % ${nGw})::int c
                   FROM long_sequence(${nGw * 1440}))`,
      );
      tick("heartbeats", d, nGw * 1440);
    }

    // every connection: one usage entry an hour (tokens and cents)
    await pool.query(
      `INSERT INTO ${PREFIX}usage_entries
         (ts, id, connection_id, entity, usage_amount, usage_entity, custom_name, cost_cents, workflow_id,
          execution_id, metadata)
       SELECT dateadd('m', h * 60 + 30, '${dayStart}'::timestamp), 'u${d}_' || c::string || '_' || h::string, ${qdbId("c")},
              'llm', 5000 + rnd_double() * 1000, 'tokens', null, 50 + rnd_double() * 10, null, null, null
         FROM (SELECT ((x - 1) / ${nConn})::int h, ((x - 1) % ${nConn})::int c FROM long_sequence(${nConn * 24}))`,
    );
    tick("usage", d, nConn * 24);
  }
  process.stderr.write("\n");
  s.say(`  inserted in ${fmt((Date.now() - t0) / 1000, 1)} s`);
  return counts;
}

/**
 * Puts the detector's memory back to what the run of the previous hour left: every connection's
 * metrics judged up to `previous` (so this run judges all of them), the anomalous connections one
 * window outside the band on response_time (gateways: also gateway_latency); no anomalies,
 * incidents or notifications.
 */
async function resetDetector(db: RelationalStore, o: { previous: Date; anomalous: number[] }): Promise<void> {
  await db.exec(
    "TRUNCATE anomaly_detector_state, anomalies, incident_events, notifications, incidents CASCADE",
  );
  await db.query(
    `INSERT INTO anomaly_detector_state
       (connection_id, metric, last_window, over_streak, under_streak, streak_started_at, anomaly_id)
     SELECT c.id, m.metric, $1::timestamptz, CASE WHEN hit THEN 1 ELSE 0 END, 0,
            CASE WHEN hit THEN $1::timestamptz END, NULL
       FROM connections c
       JOIN (VALUES ('response_time', 'any'), ('failure_rate', 'any'), ('execution_failure_rate', 'workflow'),
                    ('gateway_latency', 'gateway'), ('token_volume', 'any'), ('token_spend', 'any')) m (metric, kinds)
         ON m.kinds = 'any' OR (m.kinds = 'gateway') = (c.service_type = 'gateway'),
       LATERAL (SELECT c.id = ANY($2::text[]) AND m.metric IN ('response_time', 'gateway_latency') AS hit) h`,
    [o.previous.toISOString(), o.anomalous.map(idOf)],
  );
}

interface Outcome {
  anomalies: number;
  incidents: number;
  notifications: number;
  states: number;
}

async function countOutcome(db: RelationalStore): Promise<Outcome> {
  const r = await db.query<{ a: number; i: number; n: number; s: number }>(
    `SELECT (SELECT count(*) FROM anomalies WHERE status = 'open') AS a,
            (SELECT count(*) FROM incidents WHERE kind = 'anomaly') AS i,
            (SELECT count(*) FROM notifications) AS n,
            (SELECT count(*) FROM anomaly_detector_state) AS s`,
  );
  const row = r.rows[0];
  return {
    anomalies: Number(row?.a ?? 0),
    incidents: Number(row?.i ?? 0),
    notifications: Number(row?.n ?? 0),
    states: Number(row?.s ?? 0),
  };
}

// --- instrumentation --------------------------------------------------------------------------------

interface DbBreakdown {
  dbTx: number;
  dbStatements: number;
  /** Wall time inside db.query and db.transaction calls (the detector awaits them one by one). */
  dbMs: number;
  byKind: Map<string, number>;
}

/** Wraps the relational store to count and time what the detector asks of it. */
function instrument(db: RelationalStore) {
  const t: DbBreakdown = { dbTx: 0, dbStatements: 0, dbMs: 0, byKind: new Map() };
  const kindOf = (sql: string) => {
    const m = /^\s*(INSERT INTO|UPDATE|DELETE FROM|SELECT\b.*?\bFROM)\s+(\w+)/is.exec(sql);
    const verb = (m?.[1] ?? sql.trim().split(/\s+/)[0] ?? "?").split(/\s+/)[0]?.toUpperCase();
    return `${verb} ${m?.[2] ?? ""}`.trim();
  };
  const count = (sql: string) => {
    t.dbStatements++;
    const k = kindOf(sql);
    t.byKind.set(k, (t.byKind.get(k) ?? 0) + 1);
  };
  const counted = (q: Queryable): Queryable => ({
    query: <R extends Row = Row>(text: string, params?: unknown[]) => {
      count(text);
      return q.query<R>(text, params);
    },
    exec: (sql: string) => q.exec(sql),
  });
  const wdb: RelationalStore = {
    kind: db.kind,
    async query<R extends Row = Row>(text: string, params?: unknown[]) {
      count(text);
      const t0 = performance.now();
      try {
        return await db.query<R>(text, params);
      } finally {
        t.dbMs += performance.now() - t0;
      }
    },
    exec: (sql) => db.exec(sql),
    async transaction<T>(fn: (tx: Queryable) => Promise<T>) {
      t.dbTx++;
      const t0 = performance.now();
      try {
        return await db.transaction((tx) => fn(counted(tx)));
      } finally {
        t.dbMs += performance.now() - t0;
      }
    },
    ping: () => db.ping(),
    close: () => db.close(),
  };
  return { db: wdb, t };
}

/**
 * Stands between the detector and the series store. By default it only tracks the aggregates in
 * flight (`settle` waits for them). `limit` keeps at most that many in flight (the rest wait here,
 * not in the pool's queue, where waiting counts against its connection timeout); `record` keeps
 * each answer; `replay` answers from what was recorded, without QuestDB.
 */
class SeriesProbe {
  mode: { limit?: number; record?: boolean; replay?: boolean } = {};
  readonly recorded = new Map<string, AggregateRow[]>();
  calls = 0;
  private first = Infinity;
  private lastDone = 0;
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly inflight = new Set<Promise<unknown>>();

  constructor(private readonly inner: SeriesStore) {}

  store(): SeriesStore {
    return { ...this.inner, aggregate: (table, q) => this.aggregate(table, q) };
  }

  resetTimes(): void {
    this.calls = 0;
    this.first = Infinity;
    this.lastDone = 0;
  }

  /** From the first aggregate sent to the last answered, since `resetTimes`. */
  spanMs(): number {
    return this.lastDone > this.first ? this.lastDone - this.first : 0;
  }

  async settle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  private async aggregate(table: SeriesTable, q: AggregateQuery): Promise<AggregateRow[]> {
    const key = `${table.name} ${JSON.stringify(q)}`;
    if (this.mode.replay) {
      const rows = this.recorded.get(key);
      if (!rows) throw new Error(`bench: no recorded answer for ${key}`);
      return rows;
    }
    this.calls++;
    this.first = Math.min(this.first, performance.now());
    const limit = this.mode.limit ?? Infinity;
    while (this.active >= limit) await new Promise<void>((r) => this.waiting.push(r));
    this.active++;
    const p = this.inner.aggregate(table, q);
    this.inflight.add(p);
    try {
      const rows = await p;
      if (this.mode.record) this.recorded.set(key, rows);
      return rows;
    } finally {
      this.inflight.delete(p);
      this.active--;
      this.waiting.shift()?.();
      this.lastDone = Math.max(this.lastDone, performance.now());
    }
  }
}

// --- CPU profile ------------------------------------------------------------------------------------

async function startProfile(): Promise<Session> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 200 });
  await session.post("Profiler.start");
  return session;
}

interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
  }[];
  samples: number[];
  timeDeltas: number[];
}

/** The `n` functions with the most self time, and the share of each package or source area. */
function heaviest(p: CpuProfile, n: number): string[] {
  const byNode = new Map(p.nodes.map((x) => [x.id, x]));
  const self = new Map<string, number>();
  const area = new Map<string, number>();
  let total = 0;
  p.samples.forEach((id, i) => {
    const dt = p.timeDeltas[i] ?? 0;
    const f = byNode.get(id)?.callFrame;
    if (!f) return;
    total += dt;
    const file = f.url.replace(/^file:\/\//, "");
    const short = file.includes("node_modules/")
      ? file.slice(file.lastIndexOf("node_modules/") + 13)
      : path.relative(process.cwd(), file) || file || "(native)";
    const key = `${f.functionName || "(anonymous)"} ${short}:${f.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + dt);
    const pkg = file.includes("node_modules/")
      ? (/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)?.[1] ?? "?")
      : file
        ? (/(dist\/(?:src|bench)\/[^/]+)/.exec(file)?.[1] ?? (file.startsWith("node:") ? "node:*" : file))
        : f.functionName || "(native)";
    area.set(pkg, (area.get(pkg) ?? 0) + dt);
  });
  const pct = (us: number) => `${fmt((us / total) * 100, 1)}%`;
  const top = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, n);
  const areas = [...area.entries()].sort((a, b) => b[1] - a[1]).slice(0, 10);
  return [
    `  total sampled ${fmt(total / 1000)} ms`,
    ...top.map(([k, us]) => `  ${pct(us).padStart(6)}  ${fmt(us / 1000, 1).padStart(8)} ms  ${k}`),
    "  by area:",
    ...areas.map(([k, us]) => `  ${pct(us).padStart(6)}  ${fmt(us / 1000, 1).padStart(8)} ms  ${k}`),
  ];
}
