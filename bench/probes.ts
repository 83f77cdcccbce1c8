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
import { ownCpuSeconds, processCpuSeconds } from "./lib/cpu.js";
import { fmt, table, verdict } from "./lib/report.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { spawn } from "node:child_process";

/**
 * `vigil bench probes`: N workflow_a connections at a 30 s interval against simulated hosts
 * answering in ~50 ms, checked by a `vigil serve --roles probe` process for the run's length.
 * Prints sustained checks/s, schedule lag p50/p99 (from the worker's "probe stats" log lines),
 * the probe process's CPU per check and peak RSS, and the drain rate of a full backlog (timed from
 * the moment the statement making it returns) against
 * a bare undici + p-limit loop making the same two requests per check at the same concurrency,
 * in a process of its own so its CPU per check is measured the same way.
 *
 * `--cpu-prof DIR` writes the probe process's V8 CPU profile there (node --cpu-prof), and
 * `--heap-prof DIR` its sampled allocations (node --heap-prof).
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
      "cpu-prof": { type: "string" },
      "heap-prof": { type: "string" },
      // extra node flags for the probe process, space-separated (e.g. "--max-semi-space-size=32")
      "node-flags": { type: "string", default: "" },
    },
  });
  const n = positiveInt("connections", values.connections);
  const seconds = positiveInt("seconds", values.seconds);
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
  const cpuProfDir = values["cpu-prof"] ? path.resolve(values["cpu-prof"]) : undefined;
  const heapProfDir = values["heap-prof"] ? path.resolve(values["heap-prof"]) : undefined;
  const say = (s: string) => process.stderr.write(`${s}\n`);

  const sims = await Promise.all(
    Array.from({ length: originCount }, () => startWorkflowA({ latencyMs, apiKey: "bench-key" })),
  );
  const origins = sims.map((x) => x.url);
  const scratch = await throwawayDatabase(config, "probes");
  const db = createPgStore({ connectionString: scratch.url });
  const secret = "bench-probes-secret-bench-probes-secret!";
  let probeProcess: ReturnType<typeof spawn> | undefined;
  try {
    await migrate(db);
    // Baseline: the same two requests per check, at the same concurrency, as fast as they go.
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

    say(`vigil serve --roles probe for ${seconds} s`);
    if (cpuProfDir) fs.mkdirSync(cpuProfDir, { recursive: true });
    if (heapProfDir) fs.mkdirSync(heapProfDir, { recursive: true });
    const nodeArgs = [
      ...SERVER_NODE_FLAGS,
      ...(cpuProfDir ? ["--cpu-prof", "--cpu-prof-dir", cpuProfDir] : []),
      ...(heapProfDir ? ["--heap-prof", "--heap-prof-dir", heapProfDir] : []),
      ...(values["node-flags"] ?? "").split(/\s+/).filter(Boolean),
    ];
    const child = (probeProcess = spawn(
      process.execPath,
      [...nodeArgs, CLI_PATH, "serve", "--roles", "probe"],
      {
        env: {
          PATH: process.env.PATH ?? "",
          DATABASE_URL: scratch.url,
          VIGIL_SECRET: secret,
          PROBE_CONCURRENCY: String(concurrency),
          LOG_LEVEL: "info",
          ...(config.questdb
            ? { QUESTDB_URL: config.questdb.httpUrl, QUESTDB_PG_URL: config.questdb.pgUrl }
            : {}),
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    ));
    const stats: {
      checks: number;
      lagP50Ms: number;
      lagP99Ms: number;
      inFlight: number;
      claimMsMax?: number;
      loopDelayP99Ms?: number;
      at: number;
    }[] = [];
    let buf = "";
    child.stdout.on("data", (d: Buffer) => {
      buf += d.toString();
      let i = buf.indexOf("\n");
      while (i >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.includes('"probe stats"')) stats.push({ ...JSON.parse(line), at: Date.now() });
        i = buf.indexOf("\n");
      }
    });
    child.stderr.on("data", () => {});
    const cpu = () => processCpuSeconds(child.pid);
    await new Promise((r) => setTimeout(r, 3_000));
    const cpu0 = cpu();
    const t0 = Date.now();
    const tick = setInterval(
      () =>
        say(
          `  ${Math.round((Date.now() - t0) / 1000)} s: ${stats.at(-1) ? `${fmt(stats.at(-1)?.checks ?? 0)} checks in the last 10 s, lag p99 ${fmt(stats.at(-1)?.lagP99Ms ?? 0)} ms, ${fmt(stats.at(-1)?.inFlight ?? 0)} in flight, slowest claim ${fmt(stats.at(-1)?.claimMsMax ?? 0)} ms, event loop delay p99 ${fmt(stats.at(-1)?.loopDelayP99Ms ?? 0)} ms; load average ${os.loadavg()[0]?.toFixed(1)}` : "warming up"}`,
        ),
      10_000,
    );
    await new Promise((r) => setTimeout(r, seconds * 1000));
    clearInterval(tick);
    const wall = (Date.now() - t0) / 1000;
    const cpuUsed = cpu() - cpu0;
    const checksInRun = stats.filter((s) => s.at > t0).reduce((a, s) => a + s.checks, 0);
    // The first minute is start-up: every connection's first check falls in the first interval,
    // each with a first execution pull. Steady state is what follows.
    const startup = stats.filter((s) => s.at <= t0 + 60_000);
    const window = stats.filter((s) => s.at > t0 + 60_000);
    const sustained = window.reduce((a, s) => a + s.checks, 0) / (window.length * 10 || 1);
    const lagP50 = median(window.map((s) => s.lagP50Ms));
    const lagP99 = Math.max(0, ...window.map((s) => s.lagP99Ms));
    const startupP99 = Math.max(0, ...startup.map((s) => s.lagP99Ms));

    say("capacity: every connection due at once");
    // in id order, as the worker locks rows when it records checks, so the two cannot deadlock
    const making = Date.now();
    await db.query(
      "UPDATE connections SET next_check_at = now() WHERE id IN (SELECT id FROM connections ORDER BY id FOR UPDATE)",
    );
    // The clock starts once the backlog exists: the statement that made it locked every row for
    // its whole run (about a second at 25,000), so the worker could neither claim nor record
    // meanwhile. That is this benchmark's own work, not the worker's (a real backlog, after an
    // outage, has no such statement).
    const makingMs = Date.now() - making;
    const drainCpu0 = cpu();
    const drainSims0 = ownCpuSeconds();
    const start = new Date();
    // Checked since the statement began (checks in flight when it ran finish meanwhile; a check
    // recorded before it reached the row is due again after it).
    const checkedSince = async () =>
      Number(
        (
          await db.query<{ c: number }>("SELECT count(*) AS c FROM connections WHERE last_check_at >= $1", [
            new Date(making).toISOString(),
          ])
        ).rows[0]?.c ?? 0,
      );
    let done = await checkedSince();
    while (done < n && Date.now() - start.getTime() < 300_000) {
      await new Promise((r) => setTimeout(r, 250));
      done = await checkedSince();
    }
    const elapsed = (Date.now() - start.getTime()) / 1000;
    // Only the checks made after the backlog existed count, over the time they took (a check
    // made while the statement ran and recorded after it is neither).
    const after = Number(
      (
        await db.query<{ c: number }>("SELECT count(*) AS c FROM connections WHERE last_check_at >= $1", [
          start.toISOString(),
        ])
      ).rows[0]?.c ?? 0,
    );
    const doneBefore = done - after;
    const drain = after / elapsed;
    const drainCpuUs = ((cpu() - drainCpu0) / Math.max(1, after)) * 1e6;
    // the simulated hosts run in this process (with its polling, a small share)
    const simsDrainUs = ((ownCpuSeconds() - drainSims0) / Math.max(1, after)) * 1e6;
    const rssPeakMb =
      Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    const steadyCpuUs = (cpuUsed / Math.max(1, checksInRun)) * 1e6;
    // The host's speed drifts (other work shares its cores): the baseline again, right after the drain.
    say(`baseline again, ${baselineSeconds} s`);
    const bareAfterRun = await bareLoopProcess(origins, concurrency, baselineSeconds * 1000);
    const bareAfter = bareAfterRun.checks / bareAfterRun.seconds;

    console.log(
      `\nprobes: ${fmt(n)} workflow_a connections on ${origins.length} simulated hosts, 30 s interval, latency ${latencyMs} ms, concurrency ${concurrency}, ${seconds} s; series store: ${config.questdb ? `QuestDB at ${config.questdb.httpUrl}` : "sql (PostgreSQL)"}; ${new Date().toISOString()}, load average ${os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(" ")}\n`,
    );
    console.log(
      table(
        ["figure", "value", "target"],
        [
          [`checks/s sustained after the first minute (schedule demands ${fmt(n / 30)})`, fmt(sustained), ""],
          ["schedule lag p50 (steady state)", window.length ? `${fmt(lagP50)} ms` : "n/a (run < 70 s)", ""],
          [
            "schedule lag p99 (steady state, worst 10 s window)",
            window.length ? `${fmt(lagP99)} ms` : "n/a (run < 70 s)",
            "< 1000 ms",
          ],
          ["schedule lag p99 during start-up (first minute)", `${fmt(startupP99)} ms`, ""],
          ["probe process CPU", `${fmt((cpuUsed / wall) * 100, 1)} % of a core`, ""],
          ["probe process CPU per check (whole run, incl. start-up and syncs)", `${fmt(steadyCpuUs)} µs`, ""],
          ["probe process CPU per check while draining the backlog", `${fmt(drainCpuUs)} µs`, ""],
          ["bare loop process CPU per check", `${fmt(bareCpuUs)} µs`, ""],
          ["CPU per check, drain / bare", fmt(drainCpuUs / bareCpuUs, 2), "printed"],
          [
            "simulated hosts' CPU per check: Vigil's drain / bare loop",
            `${fmt(simsDrainUs)} / ${fmt(simsBareUs)} µs`,
            "",
          ],
          ["probe process peak RSS", `${fmt(rssPeakMb)} MB`, "< 400 MB"],
          ["backlog drain, checks/s (Vigil; from the backlog made)", fmt(drain), ""],
          [
            "the statement making the backlog (neither counted)",
            `${fmt(makingMs)} ms, ${fmt(doneBefore)} checks made meanwhile`,
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
    console.log(
      `\nlag p99 ${window.length === 0 ? "not measured (no steady state)" : lagP99 < 1000 ? "meets" : "MISSES"} < 1 s; RSS ${rssPeakMb < 400 ? "meets" : "MISSES"} < 400 MB; drain/bare ${fmt(drain / bare, 2)} / ${fmt(drain / bareAfter, 2)}: ${verdict(Math.min(drain / bare, drain / bareAfter), 0.7)}`,
    );
    console.log(
      "(a Vigil check also syncs executions, at most once a minute: its key check is then the run list's first page, and status=running follows: three requests against the loop's two)",
    );
  } finally {
    // a run that failed part-way must not leave its probe process behind
    if (probeProcess && probeProcess.exitCode === null && probeProcess.signalCode === null) {
      const p = probeProcess;
      p.kill("SIGTERM");
      await new Promise((r) => p.once("exit", r));
    }
    await Promise.all(sims.map((x) => x.close()));
    await db.close();
    await scratch.drop();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
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
    const h = await request(`${base}/healthz/readiness`, { dispatcher: agent });
    await h.body.text();
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
