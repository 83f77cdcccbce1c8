import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pLimit from "p-limit";
import { request } from "undici";
import type { Config } from "../src/config.js";
import { CredentialBox } from "../src/lib/credentials.js";
import { createProbeAgent } from "../src/probes/http.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import { startWorkflowA } from "../src/sim/workflow-a.js";
import { CLI_PATH } from "./lib/cli.js";
import { SERVER_NODE_FLAGS } from "../src/lib/node-flags.js";
import { cpuDelta, listenerPid, ownCpuSeconds, type SystemCpu, systemCpu } from "./lib/cpu.js";
import { type StatementCost, StatementMeter, statementsTable } from "./lib/pg-statements.js";
import { benchQuestdb, type QuestdbTarget } from "./lib/questdb.js";
import { fmt, table, verdict } from "./lib/report.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { spawn } from "node:child_process";

/**
 * `vigil bench probes`: N workflow_a connections at a 30 s interval against simulated hosts
 * answering in ~50 ms, checked by a `vigil serve --roles probe` process, with execution sync on
 * (each connection pulls its runs at most once a minute), and the whole system's cost per check:
 *
 *  - steady state: after a first minute of start-up, the CPU of the probe process, of every
 *    PostgreSQL process (backends, WAL writer, checkpointer, autovacuum, and those that exited
 *    meanwhile) and of QuestDB, each per check and summed (targets of issue #32: all in ≤ 300 µs
 *    with QuestDB as the series store, ≤ 400 µs with `--series sql`), schedule lag p50/p99 and
 *    the probe process's peak RSS; with pg_stat_statements loaded, the statements per check and
 *    their time;
 *  - backlog drain: the probe process is stopped, every connection parked an hour ahead, a fresh
 *    probe process started and left idle, then every connection made due by one statement; the
 *    drain is timed from that statement's return until every connection was checked. Nothing is
 *    in flight when the backlog is made, so no result recorded late can move a connection back
 *    to its next slot (before, a check recorded just after the statement re-spread its
 *    connection over the interval, and the drain waited for those slots: 0.18 in some runs, 0.87
 *    in others, same code). Its rate is compared with a bare undici + p-limit loop making the same
 *    request as a check (`/api/v1/executions?limit=1` with the key) at the same concurrency, in a
 *    process of its own, before and after.
 *
 * `--runs N` repeats the whole measurement N times (a new database each time) and prints each
 * run and the medians, which the verdicts use. `--series sql|questdb` picks the series store
 * (default: QuestDB when QUESTDB_URL is set, else sql; `questdb` without QUESTDB_URL starts a
 * private QuestDB). `--cpu-prof DIR` writes the probe process's V8 CPU profile there (node
 * --cpu-prof), and `--heap-prof DIR` its sampled allocations (node --heap-prof).
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      connections: { type: "string", default: "10000" },
      seconds: { type: "string", default: "120" },
      "latency-ms": { type: "string", default: "50" },
      concurrency: { type: "string", default: "200" },
      // A real fleet spans many hosts; the prober allows 8 connections per origin.
      hosts: { type: "string" },
      origins: { type: "string" }, // the older name of --hosts
      "baseline-seconds": { type: "string", default: "20" },
      series: { type: "string" },
      runs: { type: "string", default: "1" },
      "cpu-prof": { type: "string" },
      "heap-prof": { type: "string" },
      // extra node flags for the probe process, space-separated (e.g. "--max-semi-space-size=32")
      "node-flags": { type: "string", default: "" },
    },
  });
  const n = positiveInt("connections", values.connections);
  const seconds = positiveInt("seconds", values.seconds);
  if (seconds < 70)
    throw new Error("--seconds must be at least 70: the first minute is start-up, not measured");
  const latencyMs = Number(values["latency-ms"]);
  if (!Number.isFinite(latencyMs) || latencyMs < 0)
    throw new Error(
      `--latency-ms must be a number of milliseconds, got ${JSON.stringify(values["latency-ms"])}`,
    );
  const concurrency = positiveInt("concurrency", values.concurrency);
  // by default one simulated host per 500 connections, at least 25 (10,000: 25; 25,000: 50)
  const originCount = positiveInt(
    "hosts",
    values.hosts ?? values.origins ?? String(Math.max(25, Math.ceil(n / 500))),
  );
  const baselineSeconds = positiveInt("baseline-seconds", values["baseline-seconds"]);
  const runs = positiveInt("runs", values.runs);
  const series = values.series ?? (config.questdb ? "questdb" : "sql");
  if (series !== "sql" && series !== "questdb")
    throw new Error(`--series must be sql or questdb, got ${JSON.stringify(values.series)}`);
  const say = (s: string) => process.stderr.write(`${s}\n`);
  const qdb: QuestdbTarget | undefined = series === "questdb" ? benchQuestdb(config, say) : undefined;
  const o: RunOptions = {
    n,
    seconds,
    latencyMs,
    concurrency,
    originCount,
    baselineSeconds,
    qdb,
    cpuProfDir: values["cpu-prof"] ? path.resolve(values["cpu-prof"]) : undefined,
    heapProfDir: values["heap-prof"] ? path.resolve(values["heap-prof"]) : undefined,
    nodeFlags: (values["node-flags"] ?? "").split(/\s+/).filter(Boolean),
    say,
  };
  const results: RunResult[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      if (runs > 1) say(`run ${i + 1} of ${runs}`);
      results.push(await runOnce(config, o, i === runs - 1));
    }
  } finally {
    qdb?.stop();
  }
  const target = series === "questdb" ? 300 : 400;
  const med = (f: (r: RunResult) => number) => median(results.map(f));
  if (runs > 1) {
    console.log(
      `\nprobes: ${runs} runs, ${fmt(n)} connections, series store ${series}; each run, then the medians\n`,
    );
    const row = (label: string, r: RunResult) => [
      label,
      fmt(r.perCheck.vigil),
      fmt(r.perCheck.postgres),
      fmt(r.perCheck.questdb),
      fmt(allIn(r.perCheck)),
      r.statementsPerCheck === undefined ? "n/a" : fmt(r.statementsPerCheck, 2),
      `${fmt(r.lagP99)} ms`,
      `${fmt(r.rssPeakMb)} MB`,
      `${fmt(r.drainVsBare, 2)} / ${fmt(r.drainVsBareAfter, 2)}`,
    ];
    console.log(
      table(
        [
          "run",
          "Vigil µs",
          "PostgreSQL µs",
          "QuestDB µs",
          "all in µs",
          "statements/check",
          "lag p99",
          "RSS",
          "drain / bare",
        ],
        [
          ...results.map((r, i) => row(String(i + 1), r)),
          [
            "median",
            fmt(med((r) => r.perCheck.vigil)),
            fmt(med((r) => r.perCheck.postgres)),
            fmt(med((r) => r.perCheck.questdb)),
            fmt(med((r) => allIn(r.perCheck))),
            results.some((r) => r.statementsPerCheck === undefined)
              ? "n/a"
              : fmt(
                  med((r) => r.statementsPerCheck ?? 0),
                  2,
                ),
            `${fmt(med((r) => r.lagP99))} ms`,
            `${fmt(med((r) => r.rssPeakMb))} MB`,
            `${fmt(
              med((r) => r.drainVsBare),
              2,
            )} / ${fmt(
              med((r) => r.drainVsBareAfter),
              2,
            )}`,
          ],
        ],
      ),
    );
  }
  const allInMed = med((r) => allIn(r.perCheck));
  const lagMed = med((r) => r.lagP99);
  const rssMed = med((r) => r.rssPeakMb);
  const drainMed = med((r) => Math.min(r.drainVsBare, r.drainVsBareAfter));
  console.log(
    `\n${runs > 1 ? `medians of ${runs} runs: ` : ""}all in ${fmt(allInMed)} µs per check: ${allInMed <= target ? "meets" : "MISSES"} <= ${target} µs (${series}); ` +
      `lag p99 ${fmt(lagMed)} ms: ${lagMed < 1000 ? "meets" : "MISSES"} < 1 s; RSS ${fmt(rssMed)} MB: ${rssMed < 300 ? "meets" : "MISSES"} < 300 MB; ` +
      `drain/bare ${fmt(drainMed, 2)}: ${verdict(drainMed, 0.7)}`,
  );
}

interface RunOptions {
  n: number;
  seconds: number;
  latencyMs: number;
  concurrency: number;
  originCount: number;
  baselineSeconds: number;
  qdb: QuestdbTarget | undefined;
  cpuProfDir: string | undefined;
  heapProfDir: string | undefined;
  nodeFlags: string[];
  say: (s: string) => void;
}

interface RunResult {
  /** µs of CPU per check in the steady state, by part */
  perCheck: SystemCpu;
  statementsPerCheck: number | undefined;
  lagP99: number;
  rssPeakMb: number;
  drainVsBare: number;
  drainVsBareAfter: number;
}

const allIn = (c: SystemCpu) => c.vigil + c.postgres + c.questdb;

interface StatsLine {
  checks: number;
  lagP50Ms: number;
  lagP99Ms: number;
  inFlight: number;
  claimMsMax?: number;
  loopDelayP99Ms?: number;
  at: number;
  /** the whole system's CPU when the line came */
  cpu: SystemCpu;
}

async function runOnce(config: Config, o: RunOptions, last: boolean): Promise<RunResult> {
  const { n, seconds, latencyMs, concurrency, originCount, baselineSeconds, qdb, say } = o;
  const sims = await Promise.all(
    Array.from({ length: originCount }, () => startWorkflowA({ latencyMs, apiKey: "bench-key" })),
  );
  const origins = sims.map((x) => x.url);
  const scratch = await throwawayDatabase(config, "probes");
  const db = createPgStore({ connectionString: scratch.url });
  const secret = "bench-probes-secret-bench-probes-secret!";
  const qdbPid = qdb ? listenerPid(qdb.httpUrl) : undefined;
  let probeProcess: ReturnType<typeof spawn> | undefined;
  let meter: StatementMeter | string = "not opened";
  try {
    await migrate(db);
    meter = await StatementMeter.open(scratch.url);
    if (typeof meter === "string") say(meter);
    // Baseline: a check's one request, at the same concurrency, as fast as it goes.
    say(
      `baseline: bare undici + p-limit loop in its own process, ${concurrency} at once, ${baselineSeconds} s`,
    );
    const simsCpu0 = ownCpuSeconds();
    const bareRun = await bareLoopProcess(origins, concurrency, baselineSeconds * 1000);
    const simsBareUs = ((ownCpuSeconds() - simsCpu0) / bareRun.checks) * 1e6;
    const bare = bareRun.checks / bareRun.seconds;
    const bareCpuUs = (bareRun.cpuSeconds / bareRun.checks) * 1e6;

    // Seeded after the baseline, so the connections' first slots start when the worker does.
    say(`seeding ${fmt(n)} workflow_a connections (30 s interval, spread over the first interval)`);
    await db.query(
      "INSERT INTO users (id, email, plan) VALUES ('bench-user', 'bench@x.example', 'enterprise')",
    );
    const enc = new CredentialBox({ current: secret, previous: [] }).encrypt("bench-key");
    await db.query(
      `INSERT INTO connections (id, user_id, service_type, service_name, status, base_url, api_key_enc, api_key_length,
                                check_interval_seconds, next_check_at)
       SELECT gen_random_uuid()::text, 'bench-user', 'workflow_a', 'bench-' || g, 'active',
              ($1::text[])[1 + g % array_length($1::text[], 1)], $2, 9, 30,
              now() + random() * interval '30 seconds'
         FROM generate_series(1, $3) g`,
      [origins, enc, n],
    );
    await db.query("VACUUM ANALYZE connections");

    say(
      `vigil serve --roles probe for ${seconds} s (series store: ${qdb ? `QuestDB at ${qdb.httpUrl}` : "sql"})`,
    );
    const stats: StatsLine[] = [];
    let child = startProbeProcess(o, scratch.url, secret, last, (line) =>
      stats.push({ ...line, at: Date.now(), cpu: systemCpu(() => [child.pid], qdbPid) }),
    );
    probeProcess = child;
    await new Promise((r) => setTimeout(r, 3_000));
    const t0 = Date.now();
    const steadyFrom = t0 + 60_000;
    const cpuAtStart = systemCpu(() => [child.pid], qdbPid);
    const tick = setInterval(() => {
      const s = stats.at(-1);
      say(
        `  ${Math.round((Date.now() - t0) / 1000)} s: ${s ? `${fmt(s.checks)} checks in the last 10 s, lag p99 ${fmt(s.lagP99Ms)} ms, ${fmt(s.inFlight)} in flight, slowest claim ${fmt(s.claimMsMax ?? 0)} ms, event loop delay p99 ${fmt(s.loopDelayP99Ms ?? 0)} ms; load average ${os.loadavg()[0]?.toFixed(1)}` : "warming up"}`,
      );
    }, 10_000);
    // The steady state starts at the first stats line after the first minute: the statements'
    // counters start there too, and its CPU reading is the window's start.
    while (!stats.some((s) => s.at >= steadyFrom)) await new Promise((r) => setTimeout(r, 50));
    const startLine = stats.length - 1;
    if (typeof meter !== "string") await meter.reset();
    await new Promise((r) => setTimeout(r, Math.max(0, t0 + seconds * 1000 - Date.now())));
    clearInterval(tick);
    const statements: StatementCost[] = typeof meter !== "string" ? await meter.read() : [];
    const wall = (Date.now() - t0) / 1000;
    const whole = cpuDelta(
      cpuAtStart,
      systemCpu(() => [child.pid], qdbPid),
    );
    const checksInRun = stats.filter((s) => s.at > t0).reduce((a, s) => a + s.checks, 0);
    const startup = stats.filter((s) => s.at <= steadyFrom);
    const window = stats.slice(startLine + 1);
    const windowStart = stats[startLine] as StatsLine;
    const windowEnd = window.at(-1) ?? windowStart;
    const windowChecks = window.reduce((a, s) => a + s.checks, 0);
    const windowSeconds = (windowEnd.at - windowStart.at) / 1000;
    const steady = cpuDelta(windowStart.cpu, windowEnd.cpu);
    const perCheck: SystemCpu = {
      vigil: (steady.vigil / Math.max(1, windowChecks)) * 1e6,
      postgres: (steady.postgres / Math.max(1, windowChecks)) * 1e6,
      questdb: (steady.questdb / Math.max(1, windowChecks)) * 1e6,
    };
    const sustained = windowChecks / (windowSeconds || 1);
    const lagP50 = median(window.map((s) => s.lagP50Ms));
    const lagP99 = Math.max(0, ...window.map((s) => s.lagP99Ms));
    const startupP99 = Math.max(0, ...startup.map((s) => s.lagP99Ms));
    const rssOf = (pid: number | undefined) =>
      Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
    const rssPeakMb = rssOf(child.pid);
    await stopProcess(child);

    // The backlog: nothing in flight when it is made (see the header).
    say("capacity: every connection due at once, for a fresh probe process");
    await db.query(
      "UPDATE connections SET next_check_at = now() + interval '1 hour', lease_owner = NULL, lease_until = NULL",
    );
    child = startProbeProcess(o, scratch.url, secret, false, () => {});
    probeProcess = child;
    await new Promise((r) => setTimeout(r, 3_000));
    const drainCpu0 = systemCpu(() => [child.pid], qdbPid);
    const drainSims0 = ownCpuSeconds();
    await db.query("UPDATE connections SET next_check_at = now()");
    const start = Date.now();
    const checked = async () =>
      Number(
        (
          await db.query<{ c: number }>("SELECT count(*) AS c FROM connections WHERE last_check_at >= $1", [
            new Date(start - 5_000).toISOString(),
          ])
        ).rows[0]?.c ?? 0,
      );
    let done = await checked();
    while (done < n && Date.now() - start < 300_000) {
      await new Promise((r) => setTimeout(r, 100));
      done = await checked();
    }
    const elapsed = (Date.now() - start) / 1000;
    const drain = done / elapsed;
    const drainCpu = cpuDelta(
      drainCpu0,
      systemCpu(() => [child.pid], qdbPid),
    );
    const drainCpuUs = (drainCpu.vigil / Math.max(1, done)) * 1e6;
    const drainAllInUs = (allIn(drainCpu) / Math.max(1, done)) * 1e6;
    // the simulated hosts run in this process (with its polling, a small share)
    const simsDrainUs = ((ownCpuSeconds() - drainSims0) / Math.max(1, done)) * 1e6;
    await stopProcess(child);
    probeProcess = undefined;
    // The host's speed drifts (other work shares its cores): the baseline again, right after the drain.
    say(`baseline again, ${baselineSeconds} s`);
    const bareAfterRun = await bareLoopProcess(origins, concurrency, baselineSeconds * 1000);
    const bareAfter = bareAfterRun.checks / bareAfterRun.seconds;
    const statementsPerCheck =
      typeof meter === "string"
        ? undefined
        : statements.reduce((a, s) => a + s.calls, 0) / Math.max(1, windowChecks);
    const target = qdb ? 300 : 400;

    console.log(
      `\nprobes: ${fmt(n)} workflow_a connections on ${origins.length} simulated hosts, 30 s interval, latency ${latencyMs} ms, concurrency ${concurrency}, ${seconds} s, execution sync on; series store: ${qdb ? `QuestDB at ${qdb.httpUrl}` : "sql (PostgreSQL)"}; ${new Date().toISOString()}, load average ${os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(" ")}\n`,
    );
    console.log(
      table(
        ["figure", "value", "target"],
        [
          [`checks/s sustained after the first minute (schedule demands ${fmt(n / 30)})`, fmt(sustained), ""],
          ["schedule lag p50 (steady state)", `${fmt(lagP50)} ms`, ""],
          ["schedule lag p99 (steady state, worst 10 s window)", `${fmt(lagP99)} ms`, "< 1000 ms"],
          ["schedule lag p99 during start-up (first minute)", `${fmt(startupP99)} ms`, ""],
          [
            `CPU per check, steady state (${fmt(windowSeconds)} s, ${fmt(windowChecks)} checks): Vigil's probe process`,
            `${fmt(perCheck.vigil)} µs`,
            "",
          ],
          ["  PostgreSQL (every process of the server)", `${fmt(perCheck.postgres)} µs`, ""],
          ["  QuestDB", qdb ? `${fmt(perCheck.questdb)} µs` : "not used", ""],
          ["  all in", `${fmt(allIn(perCheck))} µs`, `<= ${target} µs`],
          [
            "whole run incl. start-up (Vigil / PostgreSQL / QuestDB, % of a core)",
            `${fmt((whole.vigil / wall) * 100, 1)} / ${fmt((whole.postgres / wall) * 100, 1)} / ${fmt((whole.questdb / wall) * 100, 1)} %`,
            "",
          ],
          ["whole run: Vigil CPU per check", `${fmt((whole.vigil / Math.max(1, checksInRun)) * 1e6)} µs`, ""],
          ["probe process peak RSS", `${fmt(rssPeakMb)} MB`, "< 300 MB"],
          [
            "backlog drain, checks/s (a fresh probe process; from the backlog made)",
            `${fmt(drain)} (${fmt(done)} in ${fmt(elapsed, 1)} s)`,
            "",
          ],
          [
            "CPU per check while draining: probe process / all in",
            `${fmt(drainCpuUs)} / ${fmt(drainAllInUs)} µs`,
            "",
          ],
          ["bare loop process CPU per check", `${fmt(bareCpuUs)} µs`, ""],
          ["probe process CPU per check, drain / bare", fmt(drainCpuUs / bareCpuUs, 2), "printed"],
          [
            "simulated hosts' CPU per check: Vigil's drain / bare loop",
            `${fmt(simsDrainUs)} / ${fmt(simsBareUs)} µs`,
            "",
          ],
          [
            "bare undici + p-limit loop, checks/s (before the run / after the drain)",
            `${fmt(bare)} / ${fmt(bareAfter)}`,
            "",
          ],
          [
            "drain / bare (before / after)",
            `${fmt(drain / bare, 2)} / ${fmt(drain / bareAfter, 2)}`,
            ">= 0.7",
          ],
        ],
      ),
    );
    if (typeof meter === "string") console.log(`\n${meter}`);
    else {
      console.log(
        `\nPostgreSQL statements in the steady state (pg_stat_statements), per check (${fmt(windowChecks)} checks):\n`,
      );
      console.log(statementsTable(statements, windowChecks));
    }
    console.log(
      `\nall in ${fmt(allIn(perCheck))} µs per check: ${allIn(perCheck) <= target ? "meets" : "MISSES"} <= ${target} µs; lag p99 ${lagP99 < 1000 ? "meets" : "MISSES"} < 1 s; RSS ${rssPeakMb < 300 ? "meets" : "MISSES"} < 300 MB; drain/bare ${fmt(drain / bare, 2)} / ${fmt(drain / bareAfter, 2)}: ${verdict(Math.min(drain / bare, drain / bareAfter), 0.7)}`,
    );
    console.log(
      "(a Vigil check is the loop's one request; at most once a minute it also syncs executions: the run list's first page and status=running follow, three requests)",
    );
    return {
      perCheck,
      statementsPerCheck,
      lagP99,
      rssPeakMb,
      drainVsBare: drain / bare,
      drainVsBareAfter: drain / bareAfter,
    };
  } finally {
    // a run that failed part-way must not leave its probe process behind
    if (probeProcess) await stopProcess(probeProcess);
    if (typeof meter !== "string") await meter.close();
    await Promise.all(sims.map((x) => x.close()));
    await db.close();
    await scratch.drop();
  }
}

/** `vigil serve --roles probe` on the benchmark's database; `onStats` gets each "probe stats" line. */
function startProbeProcess(
  o: RunOptions,
  databaseUrl: string,
  secret: string,
  profile: boolean,
  onStats: (line: Omit<StatsLine, "at" | "cpu">) => void,
): ReturnType<typeof spawn> {
  if (profile && o.cpuProfDir) fs.mkdirSync(o.cpuProfDir, { recursive: true });
  if (profile && o.heapProfDir) fs.mkdirSync(o.heapProfDir, { recursive: true });
  const nodeArgs = [
    ...SERVER_NODE_FLAGS,
    ...(profile && o.cpuProfDir ? ["--cpu-prof", "--cpu-prof-dir", o.cpuProfDir] : []),
    ...(profile && o.heapProfDir ? ["--heap-prof", "--heap-prof-dir", o.heapProfDir] : []),
    ...o.nodeFlags,
  ];
  const child = spawn(process.execPath, [...nodeArgs, CLI_PATH, "serve", "--roles", "probe"], {
    env: {
      PATH: process.env.PATH ?? "",
      DATABASE_URL: databaseUrl,
      VIGIL_SECRET: secret,
      PROBE_CONCURRENCY: String(o.concurrency),
      LOG_LEVEL: "info",
      ...(o.qdb ? { QUESTDB_URL: o.qdb.httpUrl, QUESTDB_PG_URL: o.qdb.pgUrl } : {}),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let buf = "";
  child.stdout?.on("data", (d: Buffer) => {
    buf += d.toString();
    let i = buf.indexOf("\n");
    while (i >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.includes('"probe stats"')) onStats(JSON.parse(line));
      i = buf.indexOf("\n");
    }
  });
  child.stderr?.on("data", () => {});
  return child;
}

async function stopProcess(child: ReturnType<typeof spawn>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  await new Promise((r) => child.once("exit", r));
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/** The bare loop in a process of its own (this file run as a script), with its CPU. */
async function bareLoopProcess(
  origins: string[],
  concurrency: number,
  ms: number,
): Promise<{ checks: number; seconds: number; cpuSeconds: number }> {
  const child = spawn(
    process.execPath,
    [fileURLToPath(import.meta.url), BARE_LOOP_FLAG, JSON.stringify({ origins, concurrency, ms })],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  const code = await new Promise((r) => child.once("exit", r));
  if (code !== 0) throw new Error(`the bare loop process exited with ${String(code)}`);
  return JSON.parse(out.trim().split("\n").at(-1) as string);
}

const BARE_LOOP_FLAG = "--bare-loop";

async function bareLoop(
  origins: string[],
  concurrency: number,
  ms: number,
): Promise<{ checks: number; seconds: number }> {
  const agent = createProbeAgent();
  const limit = pLimit(concurrency);
  const deadline = Date.now() + ms;
  let checks = 0;
  let next = 0;
  const one = async () => {
    const base = origins[next++ % origins.length] as string;
    const w = await request(`${base}/api/v1/executions?limit=1`, {
      dispatcher: agent,
      headers: { "X-N8N-API-KEY": "bench-key" },
    });
    await w.body.json();
    checks++;
  };
  const started = Date.now();
  await Promise.all(
    Array.from({ length: concurrency }, () =>
      limit(async () => {
        while (Date.now() < deadline) await one();
      }),
    ),
  );
  await agent.close();
  return { checks, seconds: (Date.now() - started) / 1000 };
}

if (process.argv[2] === BARE_LOOP_FLAG && process.argv[1] === fileURLToPath(import.meta.url)) {
  const o = JSON.parse(process.argv[3] as string) as { origins: string[]; concurrency: number; ms: number };
  const cpu0 = ownCpuSeconds();
  const r = await bareLoop(o.origins, o.concurrency, o.ms);
  process.stdout.write(`${JSON.stringify({ ...r, cpuSeconds: ownCpuSeconds() - cpu0 })}\n`);
  process.exit(0);
}
