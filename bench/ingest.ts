import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Sender } from "@questdb/nodejs-client";
import Fastify from "fastify";
import { buildApp } from "../src/app.js";
import type { Config } from "../src/config.js";
import { closeContext, createContext } from "../src/core/context.js";
import { createKey, createUser } from "../src/identity/accounts.js";
import { createLogger } from "../src/lib/logger.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import { applyQuestdbSchema, createQuestdbSeriesStore, questdbPool } from "../src/stores/series/questdb.js";
import { StoreSupervisor } from "../src/stores/supervisor.js";
import { listenerPid, ownCpuSeconds, postgresCpuSeconds, processCpuSeconds } from "./lib/cpu.js";
import type { LoadResult } from "./lib/load.js";
import { CLI_PATH } from "./lib/cli.js";
import { SERVER_NODE_FLAGS } from "../src/lib/node-flags.js";
import { minimalPipeline } from "./lib/minimal-pipeline.js";
import { benchQuestdb, freePorts, privateQuestdb, type QuestdbTarget } from "./lib/questdb.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { fmt, table, verdict } from "./lib/report.js";

/**
 * `vigil bench ingest`, on the production stack (PostgreSQL + QuestDB):
 *  1. heartbeats/s from many simulated gateways, each with its own key and its own token
 *     periods, against the *minimal pipeline* (bench/lib/minimal-pipeline.ts: a bare Fastify
 *     route writing the same information with the official sender, answering after commit,
 *     grouped like Vigil's group commit) and, as a printed reference, a bare Fastify route that
 *     only parses the same bodies; CPU per heartbeat of the server, QuestDB and the load
 *     generator for each (targets of issue #17: Vigil ≤ 60 µs, QuestDB ≤ 40 µs per heartbeat,
 *     throughput ≥ 0.7 of the minimal pipeline, p99 < 50 ms);
 *  2. usage entries/s in batches of 100 through POST /v1/usage, against the raw
 *     @questdb/nodejs-client sender writing the same rows in batches of 100 with the same
 *     concurrency.
 * The load comes from a separate process (autocannon); each figure is the better of two rounds.
 *
 * `--processes N` measures instead Vigil as it runs in production: one `vigil serve --roles api`
 * process (the baseline), then `vigil serve --workers n --roles api` (src/cluster.ts) for n = 1,
 * 2, 4, … up to N (or the list given, e.g. `2,4`): heartbeats/s, p50/p99, and CPU µs per
 * heartbeat of all Vigil processes summed (primary and workers), QuestDB and the load generator,
 * with the ratios against the one process. From CPU per
 * heartbeat follows what one core carries: heartbeats/s per core = 1e6 / µs, and gateways at a
 * 10 s interval per core = 10 x that.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      seconds: { type: "string", default: "10" },
      gateways: { type: "string", default: "200" },
      // one connection per simulated gateway, as a fleet behaves
      connections: { type: "string" },
      "usage-connections": { type: "string", default: "16" },
      // rounds of each path; throughput is the best round's, CPU per heartbeat the median's
      rounds: { type: "string", default: "3" },
      // one part only, e.g. to profile it: heartbeats or usage
      only: { type: "string" },
      // Vigil as `vigil serve --workers n` for n = 1, 2, 4, … N (or a list: 1,3)
      processes: { type: "string" },
      // with --processes: each request from the next gateway on any connection (default: each
      // connection sends for its own gateways, as a daemon keeps its connection to one node)
      spread: { type: "boolean", default: false },
    },
  });
  if (values.processes !== undefined) {
    if (values.only !== undefined)
      throw new Error("--only does not apply with --processes (heartbeats only)");
    return runProcesses(config, {
      counts: processCounts(values.processes),
      seconds: positiveInt("seconds", values.seconds),
      gateways: positiveInt("gateways", values.gateways),
      connections: positiveInt("connections", values.connections ?? values.gateways),
      spread: values.spread,
    });
  }
  const seconds = positiveInt("seconds", values.seconds);
  const gatewayCount = positiveInt("gateways", values.gateways);
  const connections = positiveInt("connections", values.connections ?? values.gateways);
  const usageConnections = positiveInt("usage-connections", values["usage-connections"]);
  const rounds = positiveInt("rounds", values.rounds);
  if (values.only !== undefined && values.only !== "heartbeats" && values.only !== "usage")
    throw new Error(`--only must be heartbeats or usage, got ${JSON.stringify(values.only)}`);
  const say = (s: string) => process.stderr.write(`${s}\n`);

  const qdb = benchQuestdb(config, say);
  const scratch = await throwawayDatabase(config);
  const db = createPgStore({ connectionString: scratch.url, max: 10 });
  const prefix = `${new URL(scratch.url).pathname.slice(1)}_`;
  const log = createLogger("warn");
  try {
    await migrate(db);
    const pool = questdbPool(qdb.pgUrl, 1);
    await applyQuestdbSchema(pool, prefix);
    const series = await createQuestdbSeriesStore({
      httpUrl: qdb.httpUrl,
      pgUrl: qdb.pgUrl,
      tablePrefix: prefix,
    });
    const benchConfig: Config = {
      ...config,
      logLevel: "warn",
      secret: config.secret ?? "bench-secret-bench-secret-bench-secret!",
    };
    const stores = StoreSupervisor.ready({ db, series }, log, benchConfig);
    const ctx = createContext(benchConfig, log, stores);
    const app = await buildApp(ctx);
    const vigilUrl = await app.listen({ host: "127.0.0.1", port: 0 });

    say(`creating ${gatewayCount} gateway connections, each with its own ingestion key`);
    const user = await createUser(db, { email: `bench-${Date.now()}@x.example`, plan: "enterprise" });
    await db.query("UPDATE users SET rate_limit_per_hour = 1000000000 WHERE id = $1", [user.id]);
    const { key } = await createKey(db, { user: user.id, permissions: ["connections:write", "usage:write"] });
    const ingestKeys: string[] = [];
    for (let g = 0; g < gatewayCount; g++) {
      const r = await app.inject({
        method: "POST",
        url: "/v1/connections",
        headers: { authorization: `Bearer ${key}` },
        payload: { service_type: "gateway", service_name: `gw-${g}` },
      });
      ingestKeys.push((r.json() as { ingest_api_key: string }).ingest_api_key);
    }
    const wf = await app.inject({
      method: "POST",
      url: "/v1/connections",
      headers: { authorization: `Bearer ${key}` },
      payload: {
        service_type: "workflow_a",
        service_name: "wf",
        base_url: "http://127.0.0.1:1",
        api_key: "k",
      },
    });
    const wfId = (wf.json() as { connection: { id: string } }).connection.id;

    // the baseline: a bare Fastify route that only parses the same body
    const bare = Fastify({ logger: false });
    bare.post("/v1/gateway/ingest", async (req, reply) =>
      reply.code(201).send({ message: "ok", heartbeat_id: typeof req.body }),
    );
    const bareUrl = await bare.listen({ host: "127.0.0.1", port: 0 });
    const minimal = await minimalPipeline(pool, qdb.httpUrl, prefix);

    // CPU per request of each process sharing the machine: this one (Vigil or the bare route),
    // QuestDB (when it runs here) and the load generator. Throughput on a shared 2-core host moves
    // ±15% between runs; CPU per request is the steadier figure to compare changes with.
    const qdbPid = listenerPid(qdb.httpUrl);
    const measured = async (run: () => Promise<LoadRun>): Promise<Measured> => {
      const server0 = ownCpuSeconds();
      const store0 = processCpuSeconds(qdbPid);
      const pg0 = postgresCpuSeconds();
      const r = await run();
      const perReq = (s: number) => (s * 1e6) / Math.max(1, r.requests);
      return {
        ...r,
        serverUs: perReq(ownCpuSeconds() - server0),
        storeUs: perReq(processCpuSeconds(qdbPid) - store0),
        pgUs: perReq(postgresCpuSeconds() - pg0),
        loadUs: perReq(r.cpuSeconds),
      };
    };
    const hbLoad = (url: string, secs: number) =>
      loadProcess({
        url: `${url}/v1/gateway/ingest`,
        connections,
        seconds: secs,
        mode: "heartbeat",
        keys: ingestKeys,
      });
    const bareRuns: Measured[] = [];
    const minimalRuns: Measured[] = [];
    const hbRuns: Measured[] = [];
    if (values.only !== "usage") {
      say(`heartbeats: ${connections} concurrent connections, ${seconds} s rounds`);
      await hbLoad(bareUrl, 2);
    }
    for (let round = 1; round <= rounds && values.only !== "usage"; round++) {
      say(`round ${round}: bare route...`);
      bareRuns.push(await measured(() => hbLoad(bareUrl, seconds)));
      say(`round ${round}: minimal pipeline...`);
      minimalRuns.push(await measured(() => hbLoad(minimal.url, seconds)));
      say(`round ${round}: POST /v1/gateway/ingest...`);
      hbRuns.push(await measured(() => hbLoad(vigilUrl, seconds)));
    }

    const batch = JSON.stringify(
      Array.from({ length: 100 }, (_, i) => ({
        connection_id: wfId,
        entity: i % 2 ? "gpt-4o" : "claude-sonnet-4-5",
        usage_amount: 1000 + i,
        cost_cents: 0.4,
        workflow_id: "wf-bench",
        execution_id: `ex-${i % 10}`,
      })),
    );
    say(`usage: batches of 100, ${usageConnections} concurrent connections`);
    const usageRuns: Measured[] = [];
    const rawRates: number[] = [];
    const rawTable = `${prefix}raw_usage`;
    await pool.query(`CREATE TABLE ${rawTable} (LIKE ${prefix}usage_entries)`).catch(async () => {
      // older servers: copy the DDL through a CTAS of zero rows
      await pool.query(
        `CREATE TABLE ${rawTable} AS (SELECT * FROM ${prefix}usage_entries WHERE 1 = 0) TIMESTAMP(ts) PARTITION BY DAY WAL`,
      );
    });
    for (let round = 1; round <= rounds && values.only !== "heartbeats"; round++) {
      say(`round ${round}: raw sender...`);
      rawRates.push(await rawUsage(qdb.httpUrl, rawTable, wfId, usageConnections, seconds));
      say(`round ${round}: POST /v1/usage...`);
      usageRuns.push(
        await measured(() =>
          loadProcess({
            url: `${vigilUrl}/v1/usage`,
            connections: usageConnections,
            seconds,
            mode: "usage",
            keys: [key],
            body: batch,
          }),
        ),
      );
    }

    const none: Measured = {
      rps: Number.NaN,
      p50: Number.NaN,
      p99: Number.NaN,
      requests: 0,
      non2xx: 0,
      errors: 0,
      cpuSeconds: Number.NaN,
      serverUs: Number.NaN,
      storeUs: Number.NaN,
      pgUs: Number.NaN,
      loadUs: Number.NaN,
    };
    const best = (runs: Measured[]) => (runs.length ? runs.reduce((a, b) => (b.rps > a.rps ? b : a)) : none);
    const hb = best(hbRuns);
    const bb = best(bareRuns);
    const mp = best(minimalRuns);
    const us = best(usageRuns);
    const raw = rawRates.length ? Math.max(...rawRates) : Number.NaN;
    const bad = hb.non2xx + us.non2xx + hb.errors + us.errors;
    if (bad > 0) say(`warning: ${bad} non-2xx responses or errors during the Vigil runs`);

    console.log(
      `\ningest: PostgreSQL + QuestDB, ${gatewayCount} gateways with their own keys, ${seconds} s rounds, best of ${rounds}\n`,
    );
    console.log(
      table(
        ["path", "throughput", "p50 ms", "p99 ms", "ratio"],
        [
          [
            "bare Fastify route, parse only (baseline)",
            `${fmt(bb.rps)} req/s`,
            fmt(bb.p50, 1),
            fmt(bb.p99, 1),
            "1.00",
          ],
          [
            "minimal pipeline: bare route + official sender, answer after commit (baseline)",
            `${fmt(mp.rps)} hb/s`,
            fmt(mp.p50, 1),
            fmt(mp.p99, 1),
            fmt(mp.rps / bb.rps, 2),
          ],
          [
            "POST /v1/gateway/ingest",
            `${fmt(hb.rps)} hb/s`,
            fmt(hb.p50, 1),
            fmt(hb.p99, 1),
            fmt(hb.rps / bb.rps, 2),
          ],
          ["raw QuestDB sender, batches of 100 (baseline)", `${fmt(raw)} rows/s`, "", "", "1.00"],
          [
            "POST /v1/usage, batches of 100",
            `${fmt(us.rps * 100)} entries/s`,
            fmt(us.p50, 1),
            fmt(us.p99, 1),
            fmt((us.rps * 100) / raw, 2),
          ],
        ],
      ),
    );
    console.log(
      `\nCPU per request, in microseconds of one core, in the rounds shown above (${qdbPid ? `QuestDB pid ${qdbPid}` : "QuestDB not on this host: n/a"})\n`,
    );
    const cpuRow = (label: string, m: Measured) => [
      label,
      fmt(m.serverUs),
      fmt(m.storeUs),
      fmt(m.loadUs),
      fmt(m.serverUs + (Number.isFinite(m.storeUs) ? m.storeUs : 0) + m.loadUs),
    ];
    console.log(
      table(
        ["path", "server", "QuestDB", "load generator", "total"],
        [
          cpuRow("bare Fastify route", bb),
          cpuRow("minimal pipeline", mp),
          cpuRow("POST /v1/gateway/ingest", hb),
          cpuRow("POST /v1/usage (per batch of 100)", us),
        ],
      ),
    );
    // The whole system's CPU per heartbeat (issue #32): every round printed, the median judged.
    const allInUs = (m: Measured) =>
      m.serverUs + (Number.isFinite(m.storeUs) ? m.storeUs : 0) + (Number.isFinite(m.pgUs) ? m.pgUs : 0);
    const mid = (xs: number[]) => {
      const v = [...xs].sort((a, b) => a - b);
      const m = Math.floor(v.length / 2);
      return v.length % 2 ? (v[m] as number) : ((v[m - 1] as number) + (v[m] as number)) / 2;
    };
    if (hbRuns.length > 0) {
      console.log(
        `\nPOST /v1/gateway/ingest, the whole system's CPU per heartbeat in each round (µs of one core)\n`,
      );
      console.log(
        table(
          ["round", "hb/s", "p99 ms", "Vigil", "QuestDB", "PostgreSQL", "all in"],
          [
            ...hbRuns.map((m, i) => [
              String(i + 1),
              fmt(m.rps),
              fmt(m.p99, 1),
              fmt(m.serverUs),
              fmt(m.storeUs),
              fmt(m.pgUs, 1),
              fmt(allInUs(m)),
            ]),
            [
              "median",
              fmt(mid(hbRuns.map((m) => m.rps))),
              fmt(mid(hbRuns.map((m) => m.p99)), 1),
              fmt(mid(hbRuns.map((m) => m.serverUs))),
              fmt(mid(hbRuns.map((m) => m.storeUs))),
              fmt(mid(hbRuns.map((m) => m.pgUs)), 1),
              fmt(mid(hbRuns.map(allInUs))),
            ],
          ],
        ),
      );
      const med = mid(hbRuns.map(allInUs));
      console.log(
        `\nall in, median of ${hbRuns.length} rounds: ${fmt(med)} µs per heartbeat: ${med <= 75 ? "meets" : "MISSES"} target <= 75 µs (Vigil + QuestDB + PostgreSQL)`,
      );
    }
    console.log(
      `\nheartbeats / minimal pipeline = ${fmt(hb.rps / mp.rps, 2)}: ${verdict(hb.rps / mp.rps, 0.7)}; ` +
        `p99 ${fmt(hb.p99, 1)} ms: ${hb.p99 < 50 ? "meets" : "misses"} target < 50 ms`,
    );
    console.log(
      `Vigil CPU per heartbeat ${fmt(hb.serverUs)} µs: ${hb.serverUs <= 60 ? "meets" : "misses"} target <= 60 µs; ` +
        `QuestDB CPU per heartbeat ${fmt(hb.storeUs)} µs: ${hb.storeUs <= 40 ? "meets" : Number.isFinite(hb.storeUs) ? "misses" : "n/a for"} target <= 40 µs ` +
        `(the minimal pipeline: server ${fmt(mp.serverUs)} µs, QuestDB ${fmt(mp.storeUs)} µs)`,
    );
    console.log(`(reference: heartbeats / parse-only route = ${fmt(hb.rps / bb.rps, 2)})`);
    console.log(
      `usage entries / raw sender = ${fmt((us.rps * 100) / raw, 2)}: ${verdict((us.rps * 100) / raw, 0.3)}`,
    );

    await app.close();
    await bare.close();
    await minimal.close();
    await closeContext(ctx);
    await series.close();
    const tables = await pool.query("SELECT table_name FROM tables() WHERE table_name LIKE $1", [
      `${prefix}%`,
    ]);
    for (const r of tables.rows as { table_name: string }[]) await pool.query(`DROP TABLE ${r.table_name}`);
    await pool.end();
  } finally {
    await db.close();
    await scratch.drop();
    qdb.stop();
  }
}

type LoadRun = LoadResult & { cpuSeconds: number };
type Measured = LoadRun & { serverUs: number; storeUs: number; pgUs: number; loadUs: number };

function loadProcess(opts: Record<string, unknown>): Promise<LoadRun> {
  const script = fileURLToPath(new URL("./lib/ingest-load.js", import.meta.url));
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [script, JSON.stringify(opts)],
      { maxBuffer: 16 * 1024 * 1024 },
      (err, stdout) => (err ? reject(err) : resolve(JSON.parse(stdout) as LoadRun)),
    );
  });
}

/** The same rows as a usage batch, written by `concurrency` raw senders in batches of 100. */
async function rawUsage(
  httpUrl: string,
  tableName: string,
  connectionId: string,
  concurrency: number,
  seconds: number,
): Promise<number> {
  const u = new URL(httpUrl);
  const deadline = Date.now() + seconds * 1000;
  let rows = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      const sender = await Sender.fromConfig(`http::addr=${u.hostname}:${u.port || 9000};auto_flush=off;`);
      let n = 0;
      while (Date.now() < deadline) {
        const now = Date.now();
        for (let i = 0; i < 100; i++) {
          sender
            .table(tableName)
            .symbol("connection_id", connectionId)
            .symbol("usage_entity", "tokens")
            .stringColumn("id", `${w}-${n}-${i}`)
            .stringColumn("entity", i % 2 ? "gpt-4o" : "claude-sonnet-4-5")
            .floatColumn("usage_amount", 1000 + i)
            .floatColumn("cost_cents", 0.4)
            .stringColumn("workflow_id", "wf-bench")
            .stringColumn("execution_id", `ex-${i % 10}`);
          await sender.at(now, "ms");
        }
        await sender.flush();
        rows += 100;
        n++;
      }
      await sender.close();
    }),
  );
  return rows / (Number(process.hrtime.bigint() - started) / 1e9);
}

/** `--processes N`: 1, 2, 4, … up to N and N itself; a comma-separated list as given. */
export function processCounts(value: string): number[] {
  if (value.includes(",")) {
    const list = value.split(",").map((v) => positiveInt("processes", v.trim()));
    return [...new Set(list)];
  }
  const n = positiveInt("processes", value);
  const counts: number[] = [];
  for (let c = 1; c < n; c *= 2) counts.push(c);
  counts.push(n);
  return counts;
}

/** The pids of a process and its children (the primary of `serve --workers` and its workers). */
function processTree(pid: number): number[] {
  try {
    const out = execFileSync("ps", ["-o", "pid=", "--ppid", String(pid)], { encoding: "utf8" });
    return [pid, ...out.split(/\s+/).filter(Boolean).map(Number)];
  } catch {
    return [pid]; // ps exits 1 when there are no children
  }
}

const treeCpuSeconds = (pids: number[]) => pids.reduce((s, p) => s + processCpuSeconds(p), 0);

function uptimeLoad(): string {
  try {
    return execFileSync("uptime", { encoding: "utf8" })
      .trim()
      .replace(/^.*load average/, "load average");
  } catch {
    return "load average n/a";
  }
}

interface ProcessesRun {
  n: number;
  vigilPids: number[];
  best: Measured & { primaryUs: number; vigilCores: number; storeCores: number };
}

/**
 * Heartbeats against `vigil serve --workers n --roles api` on one PostgreSQL database and one
 * QuestDB, for each n: the processes are real (the primary, n workers), started and stopped here.
 */
async function runProcesses(
  config: Config,
  o: { counts: number[]; seconds: number; gateways: number; connections: number; spread: boolean },
): Promise<void> {
  const say = (s: string) => process.stderr.write(`${s}\n`);
  let qdb: QuestdbTarget & { pid?: number };
  if (config.questdb) {
    qdb = { ...config.questdb, stop() {} };
    say(
      `QuestDB: ${config.questdb.httpUrl} from QUESTDB_URL. vigil serve has no table prefix: it writes into ` +
        "that server's unprefixed tables (the benchmark's connections are new, so its rows are its own)",
    );
  } else {
    qdb = await privateQuestdb(say, { label: "ingest" });
  }
  const scratch = await throwawayDatabase(config, "ingest");
  const db = createPgStore({ connectionString: scratch.url, max: 2 });
  const runs: ProcessesRun[] = [];
  let child: ChildProcess | undefined;
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
    const pool = questdbPool(qdb.pgUrl, 1);
    await applyQuestdbSchema(pool, "");
    await pool.end();
    const qdbPid = qdb.pid ?? listenerPid(qdb.httpUrl);
    const user = await createUser(db, { email: `bench-${Date.now()}@x.example`, plan: "enterprise" });
    await db.query("UPDATE users SET rate_limit_per_hour = 1000000000 WHERE id = $1", [user.id]);
    const { key } = await createKey(db, { user: user.id, permissions: ["connections:write"] });
    const secret = config.secret ?? "bench-secret-bench-secret-bench-secret!";
    const ingestKeys: string[] = [];

    // n = 0: the baseline, one plain `vigil serve --roles api` (no primary, no cluster)
    for (const n of [0, ...o.counts]) {
      const args =
        n === 0 ? ["serve", "--roles", "api"] : ["serve", "--workers", String(n), "--roles", "api"];
      const [port] = (await freePorts(1)) as [number];
      const url = `http://127.0.0.1:${port}`;
      say(`vigil ${args.join(" ")} on ${url}`);
      let output = "";
      child = spawn(process.execPath, [...SERVER_NODE_FLAGS, CLI_PATH, ...args], {
        env: {
          PATH: process.env.PATH ?? "",
          HOME: process.env.HOME ?? "",
          DATABASE_URL: scratch.url,
          QUESTDB_URL: qdb.httpUrl,
          QUESTDB_PG_URL: qdb.pgUrl,
          VIGIL_SECRET: secret,
          PORT: String(port),
          HOST: "127.0.0.1",
          // at info every request writes two log lines
          LOG_LEVEL: "warn",
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      const keep = (d: Buffer) => {
        output = (output + d.toString()).slice(-20_000);
      };
      child.stdout?.on("data", keep);
      child.stderr?.on("data", keep);
      const primary = child.pid as number;
      // all workers forked (the first applies the schema alone, then the others start) and answering
      const deadline = Date.now() + 90_000;
      for (;;) {
        if (child.exitCode !== null) throw new Error(`vigil ${args.join(" ")} exited:\n${output}`);
        const ok = await fetch(`${url}/readyz`)
          .then((r) => r.status === 200)
          .catch(() => false);
        if (ok && processTree(primary).length === (n === 0 ? 1 : n + 1)) break;
        if (Date.now() > deadline)
          throw new Error(`vigil ${args.join(" ")} not ready after 90 s:\n${output}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      await new Promise((r) => setTimeout(r, 2_000)); // the last workers' stores

      if (ingestKeys.length === 0) {
        say(`creating ${o.gateways} gateway connections, each with its own ingestion key`);
        for (let g = 0; g < o.gateways; g++) {
          const r = await fetch(`${url}/v1/connections`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body: JSON.stringify({ service_type: "gateway", service_name: `gw-${g}` }),
          });
          if (r.status !== 201) throw new Error(`POST /v1/connections: ${r.status} ${await r.text()}`);
          ingestKeys.push(((await r.json()) as { ingest_api_key: string }).ingest_api_key);
        }
      }
      const pids = processTree(primary);
      const hbLoad = (secs: number) =>
        loadProcess({
          url: `${url}/v1/gateway/ingest`,
          connections: o.connections,
          seconds: secs,
          mode: "heartbeat",
          keys: ingestKeys,
          pinned: !o.spread,
        });
      say(`  warm-up, then 2 rounds of ${o.seconds} s (${o.connections} connections)`);
      await hbLoad(3);
      const rounds: ProcessesRun["best"][] = [];
      for (let round = 1; round <= 2; round++) {
        const vigil0 = treeCpuSeconds(pids);
        const primary0 = processCpuSeconds(primary);
        const store0 = processCpuSeconds(qdbPid);
        const pg0 = postgresCpuSeconds();
        const started = process.hrtime.bigint();
        const r = await hbLoad(o.seconds);
        const wall = Number(process.hrtime.bigint() - started) / 1e9;
        const vigilS = treeCpuSeconds(pids) - vigil0;
        const storeS = processCpuSeconds(qdbPid) - store0;
        const perReq = (sec: number) => (sec * 1e6) / Math.max(1, r.requests);
        rounds.push({
          ...r,
          serverUs: perReq(vigilS),
          primaryUs: n === 0 ? Number.NaN : perReq(processCpuSeconds(primary) - primary0),
          storeUs: perReq(storeS),
          pgUs: perReq(postgresCpuSeconds() - pg0),
          loadUs: perReq(r.cpuSeconds),
          vigilCores: vigilS / wall,
          storeCores: storeS / wall,
        });
        say(`  round ${round}: ${fmt(r.rps)} hb/s, p99 ${fmt(r.p99, 1)} ms`);
        if (r.non2xx + r.errors > 0) say(`  warning: ${r.non2xx} non-2xx responses, ${r.errors} errors`);
      }
      await stopChild();
      runs.push({ n, vigilPids: pids, best: rounds.reduce((a, b) => (b.rps > a.rps ? b : a)) });
    }
  } finally {
    await stopChild();
    await db.close();
    await scratch.drop();
    qdb.stop();
  }

  const base = runs[0] as ProcessesRun;
  const label = (n: number) =>
    n === 0 ? "one process (baseline)" : `--workers ${n}: ${n} worker${n === 1 ? "" : "s"} + primary`;
  console.log(
    `\ningest, many processes: vigil serve --roles api, then --workers n --roles api; PostgreSQL + QuestDB; ${o.gateways} gateways, ` +
      `${o.connections} connections${o.spread ? " (each request from the next gateway, on any connection)" : " (each gateway on one connection)"}, ${o.seconds} s rounds, best of 2; ${os.cpus().length} cores; ${uptimeLoad()} (after the run)\n`,
  );
  console.log(
    table(
      [
        "processes",
        "throughput",
        "p50 ms",
        "p99 ms",
        "ratio to one process",
        "Vigil cores busy",
        "QuestDB cores busy",
      ],
      runs.map((r) => [
        label(r.n),
        `${fmt(r.best.rps)} hb/s`,
        fmt(r.best.p50, 1),
        fmt(r.best.p99, 1),
        fmt(r.best.rps / base.best.rps, 2),
        fmt(r.best.vigilCores, 2),
        fmt(r.best.storeCores, 2),
      ]),
    ),
  );
  console.log("\nCPU per heartbeat, in microseconds of one core (Vigil: all its processes summed)\n");
  console.log(
    table(
      [
        "processes",
        "Vigil",
        "of which primary",
        "QuestDB",
        "load generator",
        "total",
        "Vigil vs one process",
      ],
      runs.map((r) => [
        label(r.n),
        fmt(r.best.serverUs),
        fmt(r.best.primaryUs, 1),
        fmt(r.best.storeUs),
        fmt(r.best.loadUs),
        fmt(r.best.serverUs + (Number.isFinite(r.best.storeUs) ? r.best.storeUs : 0) + r.best.loadUs),
        fmt(r.best.serverUs / base.best.serverUs, 2),
      ]),
    ),
  );
  console.log("\ncapacity per core, from CPU per heartbeat (gateways sending every 10 s)\n");
  console.log(
    table(
      [
        "processes",
        "hb/s per Vigil core",
        "gateways per Vigil core",
        "hb/s per QuestDB core",
        "gateways per QuestDB core",
      ],
      runs.map((r) => [
        label(r.n),
        fmt(1e6 / r.best.serverUs),
        fmt((10 * 1e6) / r.best.serverUs),
        fmt(1e6 / r.best.storeUs),
        fmt((10 * 1e6) / r.best.storeUs),
      ]),
    ),
  );
  console.log(
    `\n(the load generator shares the host: on ${os.cpus().length} cores, throughput stops growing once ` +
      "Vigil, QuestDB and it together use every core; CPU per heartbeat is the figure that carries to a bigger host)",
  );
}
