import fs from "node:fs";
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
import { processCpuSeconds } from "./lib/cpu.js";
import { fmt, table, verdict } from "./lib/report.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { spawn } from "node:child_process";

/**
 * `vigil bench probes`: N workflow_a connections at a 30 s interval against the simulator
 * answering in ~50 ms, checked by a `vigil serve --roles probe` process for the run's length.
 * Prints sustained checks/s, schedule lag p50/p99 (from the worker's "probe stats" log lines),
 * the probe process's CPU and peak RSS, and the drain rate of a full backlog against a bare
 * undici + p-limit loop making the same two requests per check at the same concurrency.
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
      origins: { type: "string", default: "25" },
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
  const originCount = positiveInt("origins", values.origins);
  const say = (s: string) => process.stderr.write(`${s}\n`);

  const sims = await Promise.all(
    Array.from({ length: originCount }, () => startWorkflowA({ latencyMs, apiKey: "bench-key" })),
  );
  const origins = sims.map((x) => x.url);
  const scratch = await throwawayDatabase(config);
  const db = createPgStore({ connectionString: scratch.url });
  const secret = "bench-probes-secret-bench-probes-secret!";
  try {
    await migrate(db);
    // Baseline: the same two requests per check, at the same concurrency, as fast as they go.
    say(`baseline: bare undici + p-limit loop, ${concurrency} at once, 20 s`);
    const bare = await bareLoop(origins, concurrency, 20_000);

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
    const child = spawn(process.execPath, [CLI_PATH, "serve", "--roles", "probe"], {
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
    });
    const stats: { checks: number; lagP50Ms: number; lagP99Ms: number; at: number }[] = [];
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
          `  ${Math.round((Date.now() - t0) / 1000)} s: ${stats.at(-1) ? `${fmt(stats.at(-1)?.checks ?? 0)} checks in the last 10 s, lag p99 ${fmt(stats.at(-1)?.lagP99Ms ?? 0)} ms` : "warming up"}`,
        ),
      10_000,
    );
    await new Promise((r) => setTimeout(r, seconds * 1000));
    clearInterval(tick);
    const wall = (Date.now() - t0) / 1000;
    const cpuUsed = cpu() - cpu0;
    // The first minute is start-up: every connection's first check falls in the first interval,
    // each with a first execution pull. Steady state is what follows.
    const startup = stats.filter((s) => s.at <= t0 + 60_000);
    const window = stats.filter((s) => s.at > t0 + 60_000);
    const sustained = window.reduce((a, s) => a + s.checks, 0) / (window.length * 10 || 1);
    const lagP50 = median(window.map((s) => s.lagP50Ms));
    const lagP99 = Math.max(0, ...window.map((s) => s.lagP99Ms));
    const startupP99 = Math.max(0, ...startup.map((s) => s.lagP99Ms));

    say("capacity: every connection due at once");
    const start = new Date();
    await db.query("UPDATE connections SET next_check_at = now()");
    let done = 0;
    while (done < n && Date.now() - start.getTime() < 300_000) {
      await new Promise((r) => setTimeout(r, 250));
      done = Number(
        (
          await db.query<{ c: number }>("SELECT count(*) AS c FROM connections WHERE last_check_at >= $1", [
            start.toISOString(),
          ])
        ).rows[0]?.c ?? 0,
      );
    }
    const drain = n / ((Date.now() - start.getTime()) / 1000);
    const rssPeakMb =
      Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));

    console.log(
      `\nprobes: ${fmt(n)} workflow_a connections on ${origins.length} simulated hosts, 30 s interval, latency ${latencyMs} ms, concurrency ${concurrency}, ${seconds} s\n`,
    );
    console.log(
      table(
        ["figure", "value", "target"],
        [
          [`checks/s sustained after the first minute (schedule demands ${fmt(n / 30)})`, fmt(sustained), ""],
          ["schedule lag p50 (steady state)", `${fmt(lagP50)} ms`, ""],
          ["schedule lag p99 (steady state, worst 10 s window)", `${fmt(lagP99)} ms`, "< 1000 ms"],
          ["schedule lag p99 during start-up (first minute)", `${fmt(startupP99)} ms`, ""],
          ["probe process CPU", `${fmt((cpuUsed / wall) * 100, 1)} % of a core`, ""],
          ["probe process peak RSS", `${fmt(rssPeakMb)} MB`, "< 300 MB"],
          ["backlog drain, checks/s (Vigil)", fmt(drain), ""],
          ["bare undici + p-limit loop, checks/s", fmt(bare), ""],
          ["drain / bare", fmt(drain / bare, 2), ">= 0.7"],
        ],
      ),
    );
    console.log(
      `\nlag p99 ${lagP99 < 1000 ? "meets" : "MISSES"} < 1 s; RSS ${rssPeakMb < 300 ? "meets" : "MISSES"} < 300 MB; drain/bare ${fmt(drain / bare, 2)}: ${verdict(drain / bare, 0.7)}`,
    );
    console.log(
      "(a Vigil check also syncs executions, at most once a minute: a list page and status=running, four requests against the loop's two)",
    );
  } finally {
    await Promise.all(sims.map((x) => x.close()));
    await db.close();
    await scratch.drop();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

async function bareLoop(origins: string[], concurrency: number, ms: number): Promise<number> {
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
  return checks / ((Date.now() - started) / 1000);
}
