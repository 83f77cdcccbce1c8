import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { Config } from "../src/config.js";
import { createKey, createUser } from "../src/identity/accounts.js";
import { SERVER_NODE_FLAGS } from "../src/lib/node-flags.js";
import { packageRoot } from "../src/lib/paths.js";
import { decodeMetricsRequest } from "../src/otlp/decode.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import { applyQuestdbSchema, questdbPool } from "../src/stores/series/questdb.js";
import { CLI_PATH } from "./lib/cli.js";
import { ownCpuSeconds, postgresCpuSeconds, processCpuSeconds } from "./lib/cpu.js";
import { minimalOtlpPipeline } from "./lib/minimal-pipeline.js";
import {
  ExportBody,
  intervalTotals,
  REQUESTS_PER_MODEL,
  sdkExport,
  type Temporality,
} from "./lib/otlp-exports.js";
import type { ExporterState, OtlpLoadOptions, OtlpLoadResult } from "./lib/otlp-load.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { freePorts, privateQuestdb, type QuestdbTarget } from "./lib/questdb.js";
import { fmt, table, verdict } from "./lib/report.js";

/**
 * `vigil bench otlp` (issue #35, point 5): OTLP/HTTP metrics ingest from AI gateways, on the
 * production stack (PostgreSQL + QuestDB), against the same data as heartbeats and against a
 * minimal pipeline, in the same run.
 *
 * - The fleet: `--exporters` (100) gateway instances, each its own gateway connection with its own
 *   ingestion key and its own `service.instance.id`, each exporting every `--interval` (10) s the
 *   GenAI metrics of `--models` (20) models: `gen_ai.client.token.usage` (input and output) and
 *   `gen_ai.client.operation.duration` histograms, 3 data points per model, encoded once by the
 *   OpenTelemetry JS SDK's own protobuf serializer and patched per send (bench/lib/otlp-exports.ts).
 *   Cumulative temporality (the SDK's default) unless `--temporality delta`; uncompressed
 *   protobuf (the JS exporter's default) unless `--gzip`.
 * - Vigil runs as `vigil serve --roles api` in its own process; the load comes from another
 *   process (bench/lib/otlp-load.ts); CPU is read from /proc for Vigil's process, QuestDB's and
 *   every PostgreSQL process on the host.
 * - (a) Steady state: the fleet at its real rate (exporters / interval requests per second) for
 *   `--steady-seconds` (60): p50/p99 latency and CPU per export, then the same for the same data as
 *   heartbeats (one heartbeat per exporter per interval with the 20 byModel entries and the period
 *   totals, through POST /v1/gateway/ingest, on gateway connections of their own).
 * - (b) Saturation: `--connections` (= exporters) senders as fast as answers come, `--seconds`
 *   (10) per round, `--rounds` (2) rounds of: the minimal pipeline (bench/lib/minimal-pipeline.ts,
 *   `minimalOtlpPipeline`: a bare Fastify route decoding with src/otlp/decode.ts and writing the
 *   same rows with the official sender, answering after its grouped flush), Vigil's OTLP endpoint,
 *   Vigil's heartbeat endpoint. Throughput is the best round's, CPU per request the median round's.
 * - Correctness: after each steady phase, the tokens stored (PUT /v1/usage for one connection, a
 *   direct QuestDB query for all) against what the acknowledged sends carried; with cumulative
 *   temporality, once more at the very end after one last export per exporter, over the whole run
 *   (a cumulative series' increments add up to its last value, whatever was lost in between).
 */
/** Vigil's /metrics token in the benchmark (its commits per round are read from there). */
const METRICS_TOKEN = "bench-metrics-token-0123456789";

/** Vigil's QuestDB group commits and the rows they carried so far, from its /metrics. */
async function questdbCommits(vigilUrl: string): Promise<{ commits: number; rows: number }> {
  const res = await fetch(`${vigilUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  const text = await res.text();
  const value = (name: string) => {
    const m = new RegExp(`^${name}\\{store="questdb"\\} (\\S+)$`, "m").exec(text);
    return m ? Number(m[1]) : 0;
  };
  return { commits: value("vigil_series_commit_rows_count"), rows: value("vigil_series_commit_rows_sum") };
}

export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      seconds: { type: "string", default: "10" },
      "steady-seconds": { type: "string", default: "60" },
      exporters: { type: "string", default: "100" },
      models: { type: "string", default: "20" },
      interval: { type: "string", default: "10" },
      rounds: { type: "string", default: "3" },
      // exports (and heartbeats) per exporter before the steady phase, 1 s apart
      warmup: { type: "string", default: "5" },
      // Node flags of the vigil serve process, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"
      "node-flags": { type: "string", default: "" },
      connections: { type: "string" },
      temporality: { type: "string", default: "cumulative" },
      gzip: { type: "boolean", default: false },
    },
  });
  const o = {
    seconds: positiveInt("seconds", values.seconds),
    steadySeconds: positiveInt("steady-seconds", values["steady-seconds"]),
    exporters: positiveInt("exporters", values.exporters),
    models: positiveInt("models", values.models),
    interval: positiveInt("interval", values.interval),
    rounds: positiveInt("rounds", values.rounds),
    warmup: positiveInt("warmup", values.warmup),
    nodeFlags: values["node-flags"].split(/\s+/).filter(Boolean),
    connections: positiveInt("connections", values.connections ?? values.exporters),
    temporality: values.temporality as Temporality,
    gzip: values.gzip,
  };
  if (o.temporality !== "cumulative" && o.temporality !== "delta")
    throw new Error(`--temporality must be cumulative or delta, got ${JSON.stringify(values.temporality)}`);
  if (o.connections > o.exporters)
    throw new Error("--connections must be at most --exporters (each exporter sends on one connection)");
  if (!fs.existsSync(CLI_PATH)) throw new Error(`${CLI_PATH} is missing: run \`npm run build\` first`);
  const say = (s: string) => process.stderr.write(`${s}\n`);
  const pointsPerExport = 3 * o.models;

  // the bodies patch and decode as they should: the SDK's points, with the sums of send 3
  const probe = new ExportBody(await sdkExport(1, o.models, o.temporality));
  if (probe.points.length !== pointsPerExport)
    throw new Error(`the SDK's export has ${probe.points.length} histogram points, not ${pointsPerExport}`);
  {
    const now = Date.now();
    const decoded = decodeMetricsRequest(probe.patch(3, now - 30_000, now, o.temporality), "protobuf");
    const k = o.temporality === "cumulative" ? 3 : 1;
    const t = intervalTotals(1, o.models);
    let input = 0;
    let output = 0;
    let requests = 0;
    for (const sm of decoded.resourceMetrics[0]?.scopeMetrics ?? [])
      for (const m of sm.metrics) {
        if (m.type !== "histogram") continue;
        for (const p of m.dataPoints) {
          if (m.name === "gen_ai.client.operation.duration") requests += p.count;
          else if (p.attributes["gen_ai.token.type"] === "input") input += p.sum ?? 0;
          else output += p.sum ?? 0;
        }
      }
    if (input !== k * t.input || output !== k * t.output || requests !== k * t.requests)
      throw new Error("the patched export does not decode to the totals it should carry");
  }
  // what decoding alone costs (src/otlp/decode.ts, shared by Vigil and the minimal pipeline)
  const decodeUs = (() => {
    const body = probe.patch(4, Date.now() - 40_000, Date.now(), o.temporality);
    for (let i = 0; i < 300; i++) decodeMetricsRequest(body, "protobuf");
    const c0 = process.cpuUsage();
    for (let i = 0; i < 1000; i++) decodeMetricsRequest(body, "protobuf");
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / 1000;
  })();
  say(`decodeMetricsRequest of one export (${pointsPerExport} points): ${fmt(decodeUs)} µs of CPU`);

  let qdb: QuestdbTarget & { pid?: number };
  if (config.questdb) {
    qdb = { ...config.questdb, stop() {} };
    say(
      `QuestDB: ${config.questdb.httpUrl} from QUESTDB_URL. vigil serve has no table prefix: it writes into ` +
        "that server's unprefixed tables (the benchmark's connections are new, so its rows are its own)",
    );
  } else {
    qdb = await privateQuestdb(say, { label: "otlp" });
  }
  const scratch = await throwawayDatabase(config, "otlp");
  const db = createPgStore({ connectionString: scratch.url, max: 2 });
  const pool = questdbPool(qdb.pgUrl, 1);
  let child: ChildProcess | undefined;
  let minimal: Awaited<ReturnType<typeof minimalOtlpPipeline>> | undefined;
  const stopChild = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once("exit", r));
    c.kill("SIGTERM");
    const t = setTimeout(() => c.kill("SIGKILL"), 30_000);
    await exited;
    clearTimeout(t);
  };
  try {
    await migrate(db);
    await applyQuestdbSchema(pool, "");
    const qdbPid = qdb.pid;
    const user = await createUser(db, { email: `bench-${Date.now()}@x.example`, plan: "enterprise" });
    await db.query("UPDATE users SET rate_limit_per_hour = 1000000000 WHERE id = $1", [user.id]);
    const { key } = await createKey(db, {
      user: user.id,
      permissions: ["connections:write", "connections:read", "usage:read"],
    });

    const [port] = (await freePorts(1)) as [number];
    const vigilUrl = `http://127.0.0.1:${port}`;
    const logFile = `${os.tmpdir()}/vigil-bench-otlp-${process.pid}.log`;
    say(`vigil serve --roles api on ${vigilUrl} (log ${logFile})`);
    const out = fs.openSync(logFile, "w");
    child = spawn(
      process.execPath,
      [...SERVER_NODE_FLAGS, ...o.nodeFlags, CLI_PATH, "serve", "--roles", "api"],
      {
        env: {
          PATH: process.env.PATH ?? "",
          HOME: process.env.HOME ?? "",
          DATABASE_URL: scratch.url,
          QUESTDB_URL: qdb.httpUrl,
          QUESTDB_PG_URL: qdb.pgUrl,
          VIGIL_SECRET: config.secret ?? "bench-secret-bench-secret-bench-secret!",
          PORT: String(port),
          HOST: "127.0.0.1",
          LOG_LEVEL: "warn",
          METRICS_TOKEN,
        },
        stdio: ["ignore", out, out],
      },
    );
    fs.closeSync(out);
    const vigil = child;
    const vigilPid = vigil.pid as number;
    const deadline = Date.now() + 90_000;
    for (;;) {
      if (vigil.exitCode !== null)
        throw new Error(`vigil serve exited:\n${fs.readFileSync(logFile, "utf8").slice(-3000)}`);
      const ok = await fetch(`${vigilUrl}/readyz`)
        .then((r) => r.status === 200)
        .catch(() => false);
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`vigil serve not ready after 90 s; see ${logFile}`);
      await sleep(200);
    }

    say(
      `creating ${o.exporters} gateway connections for the exporters and ${o.exporters} for the heartbeats`,
    );
    const connect = async (name: string) => {
      const r = await fetch(`${vigilUrl}/v1/connections`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ service_type: "gateway", service_name: name }),
      });
      if (r.status !== 201) throw new Error(`POST /v1/connections: ${r.status} ${await r.text()}`);
      const b = (await r.json()) as { ingest_api_key: string; connection: { id: string } };
      return { id: b.connection.id, key: b.ingest_api_key };
    };
    const otlpConns: { id: string; key: string }[] = [];
    const hbConns: { id: string; key: string }[] = [];
    for (let e = 0; e < o.exporters; e++) otlpConns.push(await connect(`otlp-gw-${e}`));
    for (let e = 0; e < o.exporters; e++) hbConns.push(await connect(`hb-gw-${e}`));

    // Vigil's OTLP endpoint, if this build has it (an empty export: 200 and nothing stored)
    const probeAnswer = await fetch(`${vigilUrl}/v1/otlp/v1/metrics`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${(otlpConns[0] as { key: string }).key}`,
        "content-type": "application/x-protobuf",
      },
      body: new Uint8Array(0),
    });
    const hasOtlp = probeAnswer.status !== 404;
    say(
      hasOtlp
        ? `POST /v1/otlp/v1/metrics answers an empty export with ${probeAnswer.status}`
        : "POST /v1/otlp/v1/metrics: 404, this build has no OTLP endpoint; its rows are n/a",
    );

    // the same rows as Vigil's, the same connection ids in them
    minimal = await minimalOtlpPipeline(
      pool,
      qdb.httpUrl,
      "",
      new Map(otlpConns.map((c) => [`Bearer ${c.key}`, c.id])),
    );
    const t0 = Date.now() - 1000;
    const otlpState: ExporterState[] = otlpConns.map(() => ({ n: 0, startMs: t0, lastMs: t0 }));
    const hbState: ExporterState[] = hbConns.map(() => ({ n: 0, startMs: t0, lastMs: t0 }));
    const mpState: ExporterState[] = otlpConns.map(() => ({ n: 0, startMs: t0, lastMs: t0 }));
    const base = {
      models: o.models,
      temporality: o.temporality,
      gzip: o.gzip,
      connections: o.connections,
      interval: o.interval,
    };
    const otlpLoad = (
      url: string,
      phase: OtlpLoadOptions["phase"],
      seconds: number,
      st: ExporterState[],
      more: Partial<OtlpLoadOptions> = {},
    ) =>
      loadProcess({
        ...base,
        url: `${url}/v1/otlp/v1/metrics`,
        mode: "otlp",
        phase,
        seconds,
        keys: otlpConns.map((c) => c.key),
        state: st,
        ...more,
      });
    const hbLoad = (phase: OtlpLoadOptions["phase"], seconds: number, more: Partial<OtlpLoadOptions> = {}) =>
      loadProcess({
        ...base,
        url: `${vigilUrl}/v1/gateway/ingest`,
        mode: "heartbeat",
        phase,
        seconds,
        keys: hbConns.map((c) => c.key),
        state: hbState,
        ...more,
      });

    const measured = async (
      label: string,
      server: "vigil" | "minimal",
      run: () => Promise<OtlpLoadResult>,
    ): Promise<Measured> => {
      const serverCpu = () => (server === "vigil" ? processCpuSeconds(vigilPid) : ownCpuSeconds());
      const commits = () =>
        server === "vigil"
          ? questdbCommits(vigilUrl)
          : Promise.resolve(minimal?.commits() ?? { commits: 0, rows: 0 });
      const c0 = await commits();
      const s0 = serverCpu();
      const q0 = processCpuSeconds(qdbPid);
      const p0 = postgresCpuSeconds();
      const started = performance.now();
      const r = await run();
      const wall = (performance.now() - started) / 1000;
      const c1 = await commits();
      const perReq = (s: number) => (s * 1e6) / Math.max(1, r.requests);
      const m: Measured = {
        ...r,
        label,
        serverUs: perReq(serverCpu() - s0),
        storeUs: perReq(processCpuSeconds(qdbPid) - q0),
        pgUs: perReq(postgresCpuSeconds() - p0),
        loadUs: perReq(r.cpuSeconds),
        serverCores: (serverCpu() - s0) / wall,
        storeCores: (processCpuSeconds(qdbPid) - q0) / wall,
        commitsPerSecond: (c1.commits - c0.commits) / wall,
        rowsPerCommit: (c1.rows - c0.rows) / Math.max(1, c1.commits - c0.commits),
      };
      const bad = r.non2xx + r.errors;
      say(
        `  ${label}: ${fmt(r.rps, 1)} req/s, p50 ${fmt(r.p50, 1)} ms, p99 ${fmt(r.p99, 1)} ms, ` +
          `server ${fmt(m.serverUs)} µs/request${bad ? `, ${r.non2xx} non-2xx and ${r.errors} errors` : ""}` +
          (r.statuses && Object.keys(r.statuses).length ? ` (statuses ${JSON.stringify(r.statuses)})` : ""),
      );
      return m;
    };
    const load = () =>
      `load average ${fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}`;
    const ticking = async <T>(label: string, seconds: number, p: Promise<T>): Promise<T> => {
      const began = Date.now();
      const timer = setInterval(
        () => say(`  ${label}: ${Math.round((Date.now() - began) / 1000)}/${seconds} s, ${load()}`),
        10_000,
      );
      try {
        return await p;
      } finally {
        clearInterval(timer);
      }
    };
    const adopt = (into: ExporterState[], from: ExporterState[]) =>
      from.forEach((s, i) => Object.assign(into[i] as ExporterState, s));

    const checks: Check[] = [];
    // ---- (a) steady state ----------------------------------------------------------------------
    // Warm-up first (each exporter sends `--warmup` exports 1 s apart, every answer awaited, so the
    // checks still know what was acknowledged): the steady phase measures a warm server.
    const warm = { sendsPerExporter: o.warmup, interval: 1 };
    const ackedSum = (runs: OtlpLoadResult[], e: number) => {
      let count = 0;
      let lastN = 0;
      for (const r of runs) {
        const a = r.acked?.[e];
        if (!a) continue;
        count += a.count;
        if (a.lastN > 0) lastN = a.lastN;
      }
      return { count, lastN };
    };
    let steadyOtlp: Measured | undefined;
    if (hasOtlp) {
      say(`warm-up: ${o.warmup} exports per exporter, 1 s apart`);
      const w = await otlpLoad(vigilUrl, "steady", o.warmup + 5, otlpState, warm);
      adopt(otlpState, w.state);
      say(
        `steady state: ${o.exporters} exporters, one export each every ${o.interval} s ` +
          `(${fmt(o.exporters / o.interval, 1)} req/s, ${fmt((o.exporters / o.interval) * pointsPerExport)} data points/s), ${o.steadySeconds} s`,
      );
      const s = await measured("steady, OTLP", "vigil", () =>
        ticking("steady OTLP", o.steadySeconds, otlpLoad(vigilUrl, "steady", o.steadySeconds, otlpState)),
      );
      adopt(otlpState, s.state);
      steadyOtlp = s;
      checks.push(
        await checkTotals(pool, vigilUrl, key, "OTLP, warm-up + steady phase", otlpConns, o.models, (e) => {
          const a = ackedSum([w, s], e);
          return o.temporality === "cumulative" ? a.lastN : a.count;
        }),
      );
    }
    say(`warm-up, heartbeats: ${o.warmup} per gateway, 1 s apart`);
    const hw = await hbLoad("steady", o.warmup + 5, warm);
    adopt(hbState, hw.state);
    say(`steady state, the same data as heartbeats: ${o.exporters} gateways, one each every ${o.interval} s`);
    const steadyHb = await measured("steady, heartbeats", "vigil", () =>
      ticking("steady heartbeats", o.steadySeconds, hbLoad("steady", o.steadySeconds)),
    );
    adopt(hbState, steadyHb.state);
    checks.push(
      await checkTotals(
        pool,
        vigilUrl,
        key,
        "heartbeats, warm-up + steady phase",
        hbConns,
        o.models,
        (e) => ackedSum([hw, steadyHb], e).count,
      ),
    );

    // ---- (b) saturation ------------------------------------------------------------------------
    say(
      `saturation: ${o.connections} concurrent senders, ${o.seconds} s rounds, ${o.rounds} rounds; warm-up`,
    );
    await otlpLoad(minimal.url, "saturate", 2, mpState).then((r) => adopt(mpState, r.state));
    if (hasOtlp) await otlpLoad(vigilUrl, "saturate", 2, otlpState).then((r) => adopt(otlpState, r.state));
    await hbLoad("saturate", 2).then((r) => adopt(hbState, r.state));
    const mpRuns: Measured[] = [];
    const otlpRuns: Measured[] = [];
    const hbRuns: Measured[] = [];
    for (let round = 1; round <= o.rounds; round++) {
      say(`round ${round}/${o.rounds}, ${load()}`);
      const mpUrl = minimal.url;
      mpRuns.push(
        await measured("minimal pipeline", "minimal", async () => {
          const r = await otlpLoad(mpUrl, "saturate", o.seconds, mpState);
          adopt(mpState, r.state);
          return r;
        }),
      );
      if (hasOtlp)
        otlpRuns.push(
          await measured("POST /v1/otlp/v1/metrics", "vigil", async () => {
            const r = await otlpLoad(vigilUrl, "saturate", o.seconds, otlpState);
            adopt(otlpState, r.state);
            return r;
          }),
        );
      hbRuns.push(
        await measured("POST /v1/gateway/ingest", "vigil", async () => {
          const r = await hbLoad("saturate", o.seconds);
          adopt(hbState, r.state);
          return r;
        }),
      );
    }

    // ---- correctness over the whole run (cumulative: the last export carries the total) ---------
    if (hasOtlp && o.temporality === "cumulative") {
      say("one last export per exporter, then the whole run's totals");
      // spread over 2 s, each answered before the check
      const last = await otlpLoad(vigilUrl, "steady", 30, otlpState, { sendsPerExporter: 1, interval: 2 });
      adopt(otlpState, last.state);
      checks.push(
        await checkTotals(
          pool,
          vigilUrl,
          key,
          "OTLP, whole run (one last export each)",
          otlpConns,
          o.models,
          (e) => last.acked?.[e]?.lastN ?? 0,
        ),
      );
    }

    // ---- report --------------------------------------------------------------------------------
    await stopChild();
    // what every export's state rewrite did to its table (the statistics are flushed by the time
    // Vigil's connections closed)
    const table = await db.query<{ upd: string; hot: string; bytes: string; rows: string; state: string }>(
      `SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot, n_live_tup AS rows,
              pg_total_relation_size('otlp_series') AS bytes,
              (SELECT avg(octet_length(state)) FROM otlp_series) AS state
         FROM pg_stat_user_tables WHERE relname = 'otlp_series'`,
    );
    const stateTable = table.rows[0]
      ? {
          updates: Number(table.rows[0].upd),
          hot: Number(table.rows[0].hot),
          rows: Number(table.rows[0].rows),
          bytes: Number(table.rows[0].bytes),
          stateBytes: Number(table.rows[0].state),
        }
      : undefined;
    const vigilLog = fs.readFileSync(logFile, "utf8");
    const logErrors = vigilLog.split("\n").filter((l) => /"level":(50|60)|Error/.test(l));
    report(o, {
      pointsPerExport,
      decodeUs,
      bodyBytes: otlpRuns[0]?.bodyBytes ?? mpRuns[0]?.bodyBytes ?? Number.NaN,
      hbBytes: hbRuns[0]?.bodyBytes ?? Number.NaN,
      hasOtlp,
      steadyOtlp,
      steadyHb,
      runs: [...mpRuns, ...otlpRuns, ...hbRuns],
      mp: best(mpRuns),
      otlp: otlpRuns.length ? best(otlpRuns) : undefined,
      hb: best(hbRuns),
      mpMid: median(mpRuns),
      otlpMid: otlpRuns.length ? median(otlpRuns) : undefined,
      hbMid: median(hbRuns),
      checks,
      qdbPid,
      stateTable,
    });
    if (logErrors.length > 0) {
      console.log(`\nVigil's log has ${logErrors.length} error lines (${logFile}); the first:`);
      console.log(logErrors.slice(0, 3).join("\n").slice(0, 2000));
    } else if (vigilLog.trim() === "") {
      fs.rmSync(logFile, { force: true }); // nothing logged at warn or above: nothing to keep
    } else {
      console.log(`\nVigil logged warnings: ${logFile}`);
    }
  } finally {
    await stopChild();
    await minimal?.close().catch(() => {});
    await pool.query("DROP TABLE IF EXISTS mpo_gateway_heartbeats").catch(() => {});
    await pool.query("DROP TABLE IF EXISTS mpo_gateway_model_usage").catch(() => {});
    await pool.query("DROP TABLE IF EXISTS mpo_availability_samples").catch(() => {});
    await pool.end().catch(() => {});
    await db.close();
    await scratch.drop();
    qdb.stop();
  }
}

type Measured = OtlpLoadResult & {
  /** QuestDB commits (group commit flushes) per second, and rows per commit. */
  commitsPerSecond: number;
  rowsPerCommit: number;
  label: string;
  serverUs: number;
  storeUs: number;
  pgUs: number;
  loadUs: number;
  serverCores: number;
  storeCores: number;
};

interface Check {
  label: string;
  connections: number;
  expected: { input: number; output: number; requests: number; exports: number };
  stored: { input: number; output: number; requests: number; exports: number };
  one: { expected: number; putUsage: number; connectionId: string };
  ok: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function loadProcess(opts: OtlpLoadOptions): Promise<OtlpLoadResult> {
  const script = fileURLToPath(new URL("./lib/otlp-load.js", import.meta.url));
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [script, JSON.stringify(opts)],
      { maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout) as OtlpLoadResult),
    );
  });
}

const best = (runs: Measured[]) => runs.reduce((a, b) => (b.rps > a.rps ? b : a));

/** The round whose server CPU per request is the median (the lower middle of an even count). */
function median(runs: Measured[]): Measured {
  const sorted = [...runs].sort((a, b) => a.serverUs - b.serverUs);
  return sorted[Math.floor((sorted.length - 1) / 2)] as Measured;
}

/**
 * What the connections hold against what their acknowledged sends carried. `intervalsOf(e)` is
 * how many intervals' worth exporter e's stored data should add up to: for a cumulative series the
 * number of its last acknowledged send (its value counts everything before; the first point of a
 * series started within a day counts in full), else the number of acknowledged sends. Waits for
 * QuestDB's WAL to apply what was committed (up to 30 s).
 */
async function checkTotals(
  pool: ReturnType<typeof questdbPool>,
  vigilUrl: string,
  key: string,
  label: string,
  conns: { id: string; key: string }[],
  models: number,
  intervalsOf: (e: number) => number,
): Promise<Check> {
  const expected = { input: 0, output: 0, requests: 0, exports: 0 };
  conns.forEach((_, e) => {
    const t = intervalTotals(e, models);
    const k = intervalsOf(e);
    expected.input += k * t.input;
    expected.output += k * t.output;
    expected.requests += k * REQUESTS_PER_MODEL * models;
  });
  const ids = conns.map((c) => `'${c.id}'`).join(",");
  const read = async () => {
    const m = await pool.query(
      `SELECT sum(input_tokens) AS input, sum(output_tokens) AS output FROM gateway_model_usage WHERE connection_id IN (${ids})`,
    );
    const h = await pool.query(
      `SELECT count() AS exports, sum(request_count) AS requests FROM gateway_heartbeats WHERE connection_id IN (${ids})`,
    );
    const mr = (m.rows[0] ?? {}) as Record<string, unknown>;
    const hr = (h.rows[0] ?? {}) as Record<string, unknown>;
    return {
      input: Number(mr.input ?? 0),
      output: Number(mr.output ?? 0),
      requests: Number(hr.requests ?? 0),
      exports: Number(hr.exports ?? 0),
    };
  };
  let stored = await read();
  for (let i = 0; i < 60 && (stored.input !== expected.input || stored.output !== expected.output); i++) {
    await sleep(500);
    stored = await read();
  }
  expected.exports = stored.exports; // one row per export (or heartbeat) stored; printed, not judged
  const first = conns[0] as { id: string };
  const t0 = intervalTotals(0, models);
  const oneExpected = intervalsOf(0) * (t0.input + t0.output);
  const r = await fetch(`${vigilUrl}/v1/usage?connection_id=${first.id}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${key}` },
  });
  const body = (await r.json()) as { totals?: { tokens?: number } };
  const putUsage = Number(body.totals?.tokens ?? Number.NaN);
  const ok =
    stored.input === expected.input &&
    stored.output === expected.output &&
    stored.requests === expected.requests &&
    putUsage === oneExpected;
  process.stderr.write(
    `  check ${label}: tokens stored ${fmt(stored.input + stored.output)} of ${fmt(expected.input + expected.output)} sent; ` +
      `PUT /v1/usage of ${first.id}: ${fmt(putUsage)} of ${fmt(oneExpected)}: ${ok ? "equal" : "NOT EQUAL"}\n`,
  );
  return {
    label,
    connections: conns.length,
    expected,
    stored,
    one: { expected: oneExpected, putUsage, connectionId: first.id },
    ok,
  };
}

/** The commit the run is on, and whether src/ differs from it (a run on someone's work in progress). */
function commitOf(): string {
  try {
    const git = (...a: string[]) =>
      execFileSync("git", ["-C", packageRoot, ...a], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
      }).trim();
    const head = git("rev-parse", "--short", "HEAD");
    return git("status", "--porcelain", "src").length > 0 ? `${head} with uncommitted changes in src/` : head;
  } catch {
    return "commit n/a";
  }
}

function uptimeLoad(): string {
  try {
    return execFileSync("uptime", { encoding: "utf8" })
      .trim()
      .replace(/^.*load average/, "load average");
  } catch {
    return "load average n/a";
  }
}

function report(
  o: {
    seconds: number;
    steadySeconds: number;
    exporters: number;
    models: number;
    interval: number;
    rounds: number;
    connections: number;
    temporality: Temporality;
    gzip: boolean;
  },
  r: {
    pointsPerExport: number;
    decodeUs: number;
    bodyBytes: number;
    hbBytes: number;
    hasOtlp: boolean;
    steadyOtlp: Measured | undefined;
    steadyHb: Measured;
    runs: Measured[];
    mp: Measured;
    otlp: Measured | undefined;
    hb: Measured;
    mpMid: Measured;
    otlpMid: Measured | undefined;
    hbMid: Measured;
    checks: Check[];
    qdbPid: number | undefined;
    stateTable: { updates: number; hot: number; rows: number; bytes: number; stateBytes: number } | undefined;
  },
): void {
  const P = r.pointsPerExport;
  const M = o.models;
  console.log(
    `\notlp: PostgreSQL + QuestDB, vigil serve --roles api; ${o.exporters} exporters (each its own gateway connection, key and ` +
      `service.instance.id), ${M} models each: ${P} histogram data points per export (${o.temporality}, ` +
      `${o.gzip ? "gzip" : "uncompressed"} protobuf from the OpenTelemetry JS SDK's serializer, ${fmt(r.bodyBytes)} bytes; ` +
      `the same data as a heartbeat: ${fmt(r.hbBytes)} bytes of JSON, ${M} byModel entries). ` +
      `${commitOf()}, ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${os.cpus().length} cores, ` +
      `Node ${process.version}, ${uptimeLoad()} (after the run)\n`,
  );
  const na = "n/a";
  console.log(
    `(a) steady state: one export (or heartbeat) per exporter every ${o.interval} s, ${o.steadySeconds} s; ` +
      "CPU per request includes Vigil's idle work at this rate\n",
  );
  const steadyRow = (label: string, m: Measured | undefined, perData: number) =>
    m
      ? [
          label,
          fmt(m.rps, 1),
          fmt(m.rps * perData),
          fmt(m.p50, 1),
          fmt(m.p99, 1),
          fmt(m.max, 1),
          `${m.requests - m.non2xx - m.errors}/${m.requests + m.errors}`,
          fmt(m.serverUs),
          fmt(m.serverCores * 100, 1),
        ]
      : [label, na, na, na, na, na, na, na, na];
  console.log(
    table(
      [
        "path",
        "req/s",
        "data points/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "2xx",
        "Vigil µs/request",
        "Vigil % of a core",
      ],
      [
        steadyRow("POST /v1/otlp/v1/metrics", r.steadyOtlp, P),
        steadyRow("POST /v1/gateway/ingest (same data)", r.steadyHb, M),
      ],
    ),
  );

  console.log(
    `\n(b) saturation: ${o.connections} concurrent senders (each exporter on one), ${o.seconds} s rounds, ` +
      `throughput of the best of ${o.rounds}, CPU of the round with the median server CPU per request (of an even number, the lower). "data points" are an export's ${P} ` +
      `OTLP points; a heartbeat carries the same data as ${M} byModel entries (its data points/s counts those). ` +
      `CPU in µs of one core${r.qdbPid ? "" : " (QuestDB not on this host: n/a)"}; PostgreSQL is every postgres process on the host\n`,
  );
  const satRow = (label: string, b: Measured | undefined, mid: Measured | undefined, perData: number) =>
    b && mid
      ? [
          label,
          fmt(b.rps),
          fmt(b.rps * perData),
          fmt(b.p50, 1),
          fmt(b.p99, 1),
          fmt(mid.serverUs),
          fmt(mid.serverUs / perData, 2),
          fmt(mid.serverUs / M, 2),
          fmt(mid.storeUs / perData, 2),
          fmt(mid.pgUs / perData, 2),
          fmt(mid.loadUs),
        ]
      : [label, na, na, na, na, na, na, na, na, na, na];
  console.log(
    table(
      [
        "path",
        "req/s",
        "data points/s",
        "p50 ms",
        "p99 ms",
        "server µs/req",
        "server µs/point",
        "server µs/model",
        "QuestDB µs/point",
        "PostgreSQL µs/point",
        "load gen µs/req",
      ],
      [
        satRow("minimal pipeline (decode + official sender)", r.mp, r.mpMid, P),
        satRow("POST /v1/otlp/v1/metrics", r.otlp, r.otlpMid, P),
        satRow("POST /v1/gateway/ingest (same data)", r.hb, r.hbMid, M),
      ],
    ),
  );
  console.log(
    `(src/otlp/decode.ts's decodeMetricsRequest alone, in the benchmark's process: ${fmt(r.decodeUs)} µs per export, ` +
      `${fmt(r.decodeUs / P, 2)} µs per data point; both OTLP servers pay it)`,
  );
  const nonOk = [r.mp, r.otlp, r.hb].filter((m) => m && m.non2xx + m.errors > 0);
  for (const m of nonOk)
    if (m)
      console.log(
        `warning: ${m.label}: ${m.non2xx} non-2xx answers and ${m.errors} errors in its best round`,
      );

  console.log("\nevery saturation round (CPU in µs of one core per request)\n");
  console.log(
    table(
      [
        "path",
        "req/s",
        "p99 ms",
        "server",
        "QuestDB",
        "PostgreSQL",
        "load generator",
        "server cores",
        "QuestDB cores",
        "QuestDB commits/s",
        "rows a commit",
      ],
      r.runs.map((m) => [
        m.label,
        fmt(m.rps),
        fmt(m.p99, 1),
        fmt(m.serverUs),
        fmt(m.storeUs),
        fmt(m.pgUs),
        fmt(m.loadUs),
        fmt(m.serverCores, 2),
        fmt(m.storeCores, 2),
        fmt(m.commitsPerSecond),
        fmt(m.rowsPerCommit),
      ]),
    ),
  );
  console.log("");
  if (r.checks.length > 0) {
    console.log("correctness: tokens stored against tokens sent (acknowledged sends)\n");
    console.log(
      table(
        [
          "what",
          "connections",
          "tokens sent",
          "tokens stored",
          "requests sent",
          "requests stored",
          "rows",
          "PUT /v1/usage, one connection",
          "result",
        ],
        r.checks.map((c) => [
          c.label,
          String(c.connections),
          fmt(c.expected.input + c.expected.output),
          fmt(c.stored.input + c.stored.output),
          fmt(c.expected.requests),
          fmt(c.stored.requests),
          fmt(c.stored.exports),
          `${fmt(c.one.putUsage)} of ${fmt(c.one.expected)}`,
          c.ok ? "equal" : "NOT EQUAL",
        ]),
      ),
    );
  }

  console.log("");
  if (!r.hasOtlp || !r.otlp || !r.otlpMid || !r.steadyOtlp) {
    console.log("verdicts: n/a, this build has no OTLP endpoint (POST /v1/otlp/v1/metrics answered 404)");
    return;
  }
  const ratio = r.otlp.rps / r.mp.rps;
  const cpuRatio = r.otlpMid.serverUs / r.hbMid.serverUs;
  console.log(
    `OTLP throughput ${fmt(r.otlp.rps * P)} data points/s (${fmt(r.otlp.rps)} exports/s); ` +
      `Vigil CPU ${fmt(r.otlpMid.serverUs / P, 2)} µs per data point, ${fmt(r.otlpMid.serverUs)} µs per export`,
  );
  console.log(
    `OTLP vs heartbeats, Vigil CPU for the same data (per export vs per heartbeat, = per model): ` +
      `${fmt(r.otlpMid.serverUs)} / ${fmt(r.hbMid.serverUs)} µs = ${fmt(cpuRatio, 2)}; ` +
      `QuestDB ${fmt(r.otlpMid.storeUs)} / ${fmt(r.hbMid.storeUs)} µs, PostgreSQL ${fmt(r.otlpMid.pgUs)} / ${fmt(r.hbMid.pgUs)} µs; ` +
      `steady state ${fmt(r.steadyOtlp.serverUs)} / ${fmt(r.steadyHb.serverUs)} µs`,
  );
  console.log(
    `per data point: OTLP ${fmt(r.otlpMid.serverUs / P, 2)} µs per OTLP point (${P} an export) vs heartbeats ` +
      `${fmt(r.hbMid.serverUs / M, 2)} µs per byModel entry (${M} a heartbeat) = ${fmt(r.otlpMid.serverUs / P / (r.hbMid.serverUs / M), 2)}`,
  );
  console.log(
    `OTLP / minimal pipeline = ${fmt(r.otlp.rps)} / ${fmt(r.mp.rps)} exports/s = ${fmt(ratio, 2)}: ${verdict(ratio, 0.7)}`,
  );
  console.log(
    `p99 at the real rate (${o.exporters} exporters every ${o.interval} s) ${fmt(r.steadyOtlp.p99, 1)} ms: ` +
      `${r.steadyOtlp.p99 < 50 ? "meets" : "MISSES"} target < 50 ms ` +
      `(at saturation, ${o.connections} senders: ${fmt(r.otlp.p99, 1)} ms; minimal pipeline ${fmt(r.mp.p99, 1)} ms)`,
  );
  if (r.stateTable) {
    const st = r.stateTable;
    console.log(
      `PostgreSQL otlp_series (the cumulative states): ${fmt(st.updates)} updates, ${fmt((100 * st.hot) / Math.max(1, st.updates), 1)} % of them HOT (on their own page, no index entry); ` +
        `${fmt(st.rows)} rows (states of ${fmt(st.stateBytes)} bytes on average, ${fmt(st.stateBytes / (r.pointsPerExport || 1), 1)} a series) in ${fmt(st.bytes / 1024)} KiB with index and TOAST`,
    );
  }
  const failed = r.checks.filter((c) => !c.ok);
  console.log(
    `stored tokens equal those sent: ${failed.length === 0 ? "yes" : `NO (${failed.map((c) => c.label).join("; ")})`}`,
  );
}
