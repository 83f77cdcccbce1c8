import os from "node:os";
import { parseArgs } from "node:util";
import type { Config } from "../src/config.js";
import { type AppContext, closeContext, createContext } from "../src/core/context.js";
import { createOrg, createUser } from "../src/identity/accounts.js";
import { createLogger } from "../src/lib/logger.js";
import { burnCounts } from "../src/slo/burn.js";
import { runSloBurnChecks, SLO_BURN_LIMITS } from "../src/slo/job.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import { applyQuestdbSchema, createQuestdbSeriesStore, questdbPool } from "../src/stores/series/questdb.js";
import { StoreSupervisor } from "../src/stores/supervisor.js";
import { listenerPid, ownCpuSeconds, processCpuSeconds } from "./lib/cpu.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { benchQuestdb, dropPrefixed, seedAvailabilitySamples } from "./lib/questdb.js";
import { fmt, table } from "./lib/report.js";

const MINUTE = 60_000;
const DAY = 86_400_000;
const PREFIX = "bench_slo_";

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;

interface Timing {
  p50: number;
  p99: number;
  /** CPU seconds per run: this process (Vigil's code, or the direct client) and QuestDB's JVM. */
  ownCpu: number;
  questdbCpu: number;
}

/** Runs `fn` `n` times one after another (after one warm-up) and returns p50/p99 in ms and CPU per run. */
async function time(n: number, questdbPid: number | undefined, fn: () => Promise<unknown>): Promise<Timing> {
  await fn();
  const ms: number[] = [];
  const own0 = ownCpuSeconds();
  const q0 = processCpuSeconds(questdbPid);
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn();
    ms.push(performance.now() - t0);
  }
  const own = (ownCpuSeconds() - own0) / n;
  const q = (processCpuSeconds(questdbPid) - q0) / n;
  ms.sort((a, b) => a - b);
  return { p50: percentile(ms, 50), p99: percentile(ms, 99), ownCpu: own, questdbCpu: q };
}

/**
 * `vigil bench slo` (issue #33 point 5): the burn-rate evaluation of 1,000 connections with SLOs
 * over 30 days of samples.
 *
 * Seeds `--connections` (1,000) connections of one organization, each with an SLO (99.9 % over 30
 * days), and `--days` (30) days of one sample every `--interval-minutes` (1) per connection into
 * QuestDB with a server-side INSERT … SELECT (43.2 million rows; 1 % of checks fail at random, so
 * every SLO burns at about 10x and the ticket condition holds for all of them). Then, `--iterations`
 * times each, sequentially:
 *
 * - **evaluation**: every burn rate of every SLO as the job reads them (burn.ts: one statement per
 *   burn window for each chunk of 500 connections, 10 statements in all), through Vigil's series store;
 * - **direct**: the very statements the evaluation sent, captured and replayed straight to QuestDB
 *   over pg-wire, concurrently as Vigil sends them;
 * - **job run**: the whole SLO job (`runSloBurnChecks`): the evaluation plus each SLO's decision in
 *   its own PostgreSQL transaction. Its first run opens an `slo_burn` incident per SLO and is
 *   reported on its own line; the timed runs are the steady state (nothing changes).
 *
 * For each: p50 and p99 in ms, and CPU seconds per run of this process (Vigil) and of the QuestDB
 * server. Targets: evaluation p50 within 1.5x of direct; a job run under 10 s.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      connections: { type: "string", default: "1000" },
      days: { type: "string", default: "30" },
      iterations: { type: "string", default: "20" },
      "interval-minutes": { type: "string", default: "1" },
    },
  });
  const nConn = positiveInt("connections", values.connections);
  const days = positiveInt("days", values.days);
  const iterations = positiveInt("iterations", values.iterations);
  const every = positiveInt("interval-minutes", values["interval-minutes"]);
  if (1440 % every !== 0) throw new Error("--interval-minutes must divide a day (1440 minutes)");
  const perDay = 1440 / every;
  const rows = nConn * days * perDay;
  const say = (s: string) => process.stderr.write(`${s}\n`);
  const log = createLogger("warn");
  const benchConfig: Config = {
    ...config,
    logLevel: "warn",
    secret: config.secret ?? "bench-secret-bench-secret-bench-secret!",
  };

  const qdb = benchQuestdb(config, say);
  const scratch = await throwawayDatabase(config, "bench_slo");
  const db = createPgStore({ connectionString: scratch.url });
  const pool = questdbPool(qdb.pgUrl, 1);
  const direct = questdbPool(qdb.pgUrl, 5);
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    await migrate(db);
    const end = Math.floor(Date.now() / MINUTE) * MINUTE;
    const start = end - days * DAY;

    const owner = await createUser(db, { email: `bench-slo-${Date.now()}@x.example`, plan: "enterprise" });
    const org = await createOrg(db, { name: "bench slo org", owner: owner.id, plan: "enterprise" });
    await db.query(
      `INSERT INTO connections (id, user_id, organization_id, service_type, service_name, status, base_url)
       SELECT 'bconn_' || g, $1, $3, 'workflow_a', 'bconn ' || g, 'active', 'http://127.0.0.1:1'
         FROM generate_series(0, $2 - 1) g`,
      [owner.id, nConn, org.id],
    );
    await db.query(
      `INSERT INTO connection_slos (connection_id, objective, window_days, created_at, updated_at)
       SELECT 'bconn_' || g, 0.999, 30, now(), now() FROM generate_series(0, $1 - 1) g`,
      [nConn],
    );
    await db.query("ANALYZE connections");

    await dropPrefixed(pool, PREFIX);
    await applyQuestdbSchema(pool, PREFIX);
    cleanups.push(async () => {
      await dropPrefixed(pool, PREFIX);
      await pool.end();
    });
    say(
      `seeding QuestDB: ${fmt(rows)} availability samples (${nConn} connections x ${days} days x ${perDay})`,
    );
    const seedStart = Date.now();
    await seedAvailabilitySamples(pool, {
      prefix: PREFIX,
      start,
      days,
      connections: nConn,
      everyMinutes: every,
      idOf: (i) => `'bconn_' || ${i}`,
    });
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
    await series.waitVisible(600_000);
    say(`\n  ${fmt(rows)} rows visible after ${fmt((Date.now() - seedStart) / 1000, 1)} s`);

    const ctx: AppContext = createContext(
      benchConfig,
      log,
      StoreSupervisor.ready({ db, series }, log, benchConfig),
    );
    cleanups.unshift(() => closeContext(ctx));
    const at = new Date(end);
    ctx.now = () => at;
    const ids = Array.from({ length: nConn }, (_, i) => `bconn_${i}`);
    const evaluate = async () => {
      for (let i = 0; i < ids.length; i += SLO_BURN_LIMITS.chunk)
        await burnCounts(ctx, ids.slice(i, i + SLO_BURN_LIMITS.chunk), at);
    };
    const qPid = listenerPid(qdb.httpUrl);

    say("capturing the evaluation's statements");
    capture = true;
    await evaluate();
    capture = false;
    const statements = [...captured];
    const chunks: (typeof statements)[] = [];
    // the evaluation sends each chunk's statements together, chunk after chunk: replay them so
    const perChunk = Math.ceil(statements.length / Math.ceil(nConn / SLO_BURN_LIMITS.chunk));
    for (let i = 0; i < statements.length; i += perChunk) chunks.push(statements.slice(i, i + perChunk));

    say(`measuring: evaluation through Vigil (${iterations} runs)`);
    const viaVigil = await time(iterations, qPid, evaluate);
    say(`measuring: the same ${statements.length} statements straight to QuestDB`);
    const viaDirect = await time(iterations, qPid, async () => {
      for (const c of chunks) await Promise.all(c.map((s) => direct.query(s.sql, s.params)));
    });

    say("the job's first run (opens an slo_burn incident per SLO that burns)");
    const t0 = performance.now();
    const first = await runSloBurnChecks(ctx);
    const firstMs = performance.now() - t0;
    say(`measuring: the whole job, steady state (${iterations} runs)`);
    const runs: { opened: number; resolved: number }[] = [];
    const job = await time(iterations, qPid, async () => {
      runs.push(await runSloBurnChecks(ctx));
    });

    console.log(
      `\nslo: ${fmt(rows)} availability samples in QuestDB (${nConn} connections with SLOs of 99.9 % over 30 days, ` +
        `${days} days x 1 per ${every} min, 1 % failing at random); ${iterations} sequential runs per figure; ` +
        `${new Date().toISOString()}, ${os.cpus().length} cores, load average ${os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(" ")}\n`,
    );
    const ms = (x: number) => fmt(x * 1000, 1);
    console.log(
      table(
        ["what", "p50 ms", "p99 ms", "Vigil CPU ms/run", "QuestDB CPU ms/run", "ratio"],
        [
          [
            `evaluation through Vigil (${statements.length} statements)`,
            fmt(viaVigil.p50, 1),
            fmt(viaVigil.p99, 1),
            ms(viaVigil.ownCpu),
            ms(viaVigil.questdbCpu),
            "1.00",
          ],
          [
            "the same statements straight to QuestDB",
            fmt(viaDirect.p50, 1),
            fmt(viaDirect.p99, 1),
            ms(viaDirect.ownCpu),
            ms(viaDirect.questdbCpu),
            fmt(viaVigil.p50 / viaDirect.p50, 2),
          ],
          [
            `job run, steady state (${nConn} SLOs judged)`,
            fmt(job.p50, 1),
            fmt(job.p99, 1),
            ms(job.ownCpu),
            ms(job.questdbCpu),
            "",
          ],
          [`job's first run (opened ${first.opened} incidents)`, fmt(firstMs, 1), "", "", "", ""],
        ],
      ),
    );
    console.log(
      "\nratio: evaluation p50 / direct p50 (target <= 1.5). Vigil CPU: this process (the direct row: the pg client only).",
    );
    console.log(
      `evaluation p50 ${fmt(viaVigil.p50, 1)} ms vs direct ${fmt(viaDirect.p50, 1)} ms: ratio ${fmt(viaVigil.p50 / viaDirect.p50, 2)} (target <= 1.5, ${viaVigil.p50 / viaDirect.p50 <= 1.5 ? "met" : "NOT met"}); ` +
        `job run p99 ${fmt(job.p99 / 1000, 2)} s (target < 10 s, ${job.p99 < 10_000 ? "met" : "NOT met"}); ` +
        `steady-state runs opened ${runs.reduce((n, r) => n + r.opened, 0)} and resolved ${runs.reduce((n, r) => n + r.resolved, 0)}`,
    );
  } finally {
    for (const c of cleanups) await c().catch((e) => say(`cleanup: ${(e as Error).message}`));
    await direct.end();
    await db.close();
    await scratch.drop();
    qdb.stop();
  }
}
