import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import pLimit from "p-limit";
import { linearRegression, rSquared } from "simple-statistics";
import { Agent, request } from "undici";
import type { Config } from "../src/config.js";
import { PERMISSIONS } from "../src/core/actor.js";
import { createKey, createUser } from "../src/identity/accounts.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import { applyQuestdbSchema, questdbPool } from "../src/stores/series/questdb.js";
import { CLI_PATH } from "./lib/cli.js";
import { SERVER_NODE_FLAGS } from "../src/lib/node-flags.js";
import { processCpuSeconds } from "./lib/cpu.js";
import { throwawayDatabase } from "./lib/postgres.js";
import { freePorts, privateQuestdb, type QuestdbTarget } from "./lib/questdb.js";
import { fmt } from "./lib/report.js";

/**
 * `vigil bench soak` (issue #16, point 7): probes, heartbeats, usage and reads together, for
 * `--minutes N` (default 30; fractions such as 0.5 for a smoke run), against PostgreSQL (a
 * throwaway database) and QuestDB (QUESTDB_URL when set, else a private server on free ports in
 * a fresh folder, removed at the end: `vigil serve` has no table prefix, so on a shared QuestDB it
 * would write into everyone's tables).
 *
 * Processes: Vigil as two `vigil serve` children, `--roles api` and `--roles probe,jobs`
 * (`--single`: one process with every role); the monitored platforms in one simulator process
 * (bench/lib/soak-sims.ts: `--hosts` workflow_a hosts and one workflow_b, each answering in
 * `--latency-ms`, each adding a run every 10 s); the load in this process (undici, loopback,
 * paced loops with bounded concurrency).
 *
 * Set-up over the API: `--tenants` enterprise users with a personal key each; `--workflows`
 * connections (half workflow_a spread over the hosts, half workflow_b) checked every
 * `--interval` s; `--gateways` gateway connections with their ingestion keys. Then, until the
 * end: heartbeats from every gateway in turn at `--heartbeat-rate`/s (each reporting the token
 * period since its previous one), usage batches of `--usage-batch` at `--usage-rate`/s, and reads
 * at `--read-rate`/s cycling through availability pages (newest, next by cursor, one
 * connection), summaries, executions, analytics, incidents, alerts, anomalies, usage and
 * connections. Every 6 minutes (from minute 3) one workflow_a host is down for 2 minutes, so
 * incidents open and resolve (`--no-faults` turns that off).
 *
 * Every minute one row: requests/s and p99 per kind, errors (non-2xx and network, by status),
 * probe checks (the worker's "probe stats") and probe samples in QuestDB, schedule lag p99, each
 * process's RSS (mean of 5-s readings over the minute) and CPU, for Vigil also the V8 heap used,
 * external memory and active handles as the process reports them (bench/lib/soak-meter.ts,
 * preloaded with --import; `--gc` forces a full GC before each reading) and its open file
 * descriptors (/proc/<pid>/fd), PostgreSQL's database size, QuestDB's rows and WAL rows pending,
 * and the load average. At the end: totals, per-read latency, RSS/heap/fds/handles at the end of
 * warm-up vs the last minute with least-squares slopes after warm-up, and the verdict: memory is
 * flat when every Vigil process's RSS slope after warm-up is below `--max-slope` MB/min (default
 * 1: 28 MB over minutes 3-30, above the tens of MB RSS moves with GC timing and machine load;
 * 150 bytes kept per request at the default rates, ~125 requests and checks/s, exceed it), or
 * when the slope's 95% confidence interval reaches 0 (growth not told apart from noise; with 28
 * points a steady 1.5 MB/min stands out of ±10 MB of noise). Logs, the
 * meters' readings and any `--heap-snapshots` are kept in a folder it names.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      minutes: { type: "string", default: "30" },
      workflows: { type: "string", default: "200" },
      gateways: { type: "string", default: "100" },
      tenants: { type: "string", default: "4" },
      hosts: { type: "string", default: "5" },
      interval: { type: "string", default: "15" },
      "latency-ms": { type: "string", default: "50" },
      "heartbeat-rate": { type: "string", default: "100" },
      "usage-rate": { type: "string", default: "2" },
      "usage-batch": { type: "string", default: "50" },
      "read-rate": { type: "string", default: "10" },
      "warmup-minutes": { type: "string", default: "2" },
      "max-slope": { type: "string", default: "1" },
      single: { type: "boolean", default: false },
      "no-faults": { type: "boolean", default: false },
      "api-log-level": { type: "string", default: "warn" },
      // e.g. "--inspect=127.0.0.1:9229" to look inside Vigil
      "vigil-node-options": { type: "string" },
      // minutes at whose end each Vigil process writes a heap snapshot into the log folder, e.g. 3,10
      "heap-snapshots": { type: "string" },
      // a full GC before each in-process memory reading, so "heap" is the live heap
      gc: { type: "boolean", default: false },
    },
  });
  const num = (name: string, min: number, whole = true): number => {
    const raw = (values as Record<string, unknown>)[name];
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || (whole && !Number.isInteger(n)))
      throw new Error(
        `--${name} must be ${whole ? "a whole number" : "a number"} of at least ${min}, got ${JSON.stringify(raw)}`,
      );
    return n;
  };
  const minutes = num("minutes", 0.1, false);
  const nWorkflows = num("workflows", 0);
  const nGateways = num("gateways", 1);
  const nTenants = num("tenants", 1);
  const nHosts = num("hosts", 1);
  const interval = num("interval", 10);
  const latencyMs = num("latency-ms", 0);
  const hbRate = num("heartbeat-rate", 0, false);
  const usageRate = num("usage-rate", 0, false);
  const usageBatch = num("usage-batch", 1);
  const readRate = num("read-rate", 0, false);
  const warmup = num("warmup-minutes", 0);
  const maxSlope = num("max-slope", 0, false);
  const snapshotAt = new Set(
    (values["heap-snapshots"] ?? "")
      .split(",")
      .filter((x) => x.trim())
      .map((x) => {
        const m = Number(x);
        if (!Number.isInteger(m) || m < 1)
          throw new Error(`--heap-snapshots: ${JSON.stringify(x)} is not a minute`);
        return m;
      }),
  );
  if (usageBatch > 100) throw new Error("--usage-batch must be at most 100 (POST /v1/usage's limit)");
  const faults = !values["no-faults"];
  const say = (s: string) => process.stderr.write(`${s}\n`);

  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-soak-"));
  say(`logs: ${logDir}`);
  const cleanups: { name: string; fn: () => Promise<unknown> | unknown }[] = [];
  const children: Child[] = [];
  let interrupted = false;
  let stopLoad = false;
  let cutShortBy: string | undefined;
  let stopSignal: string | undefined;
  // SIGINT (Ctrl-C) or SIGTERM: stop the load, then stop the children and remove what was made
  const onSignal = (signal: string) => {
    if (interrupted) return;
    interrupted = true;
    stopSignal = signal;
    say(`\n${signal}: stopping the load and cleaning up (the summary covers the minutes done)`);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  let qdb: (QuestdbTarget & { pid?: number; logFile?: string }) | undefined;
  let qdbPrivate = false;
  try {
    // ---- stores -------------------------------------------------------------------------------
    if (config.questdb) {
      qdb = { ...config.questdb, stop() {} };
      say(
        `QuestDB: ${config.questdb.httpUrl} from QUESTDB_URL. vigil serve has no table prefix: it writes into ` +
          "that server's unprefixed tables, which this benchmark neither empties nor drops; row counts include other writers'",
      );
    } else {
      const p = await privateQuestdb(say, { heap: "1g", label: "soak" });
      qdb = p;
      qdbPrivate = true;
      cleanups.unshift({
        name: "private QuestDB",
        fn: () => {
          if (fs.existsSync(p.logFile)) fs.copyFileSync(p.logFile, path.join(logDir, "questdb.log"));
          p.stop();
        },
      });
    }
    const questdb = qdb;
    const scratch = await throwawayDatabase(config, "soak");
    cleanups.push({ name: "throwaway database", fn: () => scratch.drop() });
    const dbName = new URL(scratch.url).pathname.slice(1);
    const db = createPgStore({ connectionString: scratch.url, max: 4 });
    await migrate(db);
    const qpool = questdbPool(questdb.pgUrl, 1);
    cleanups.unshift({ name: "QuestDB pool", fn: () => qpool.end() });
    await applyQuestdbSchema(qpool, "");

    const tenants: { id: string; key: string }[] = [];
    for (let t = 0; t < nTenants; t++) {
      const u = await createUser(db, { email: `soak-${t}-${Date.now()}@x.example`, plan: "enterprise" });
      await db.query("UPDATE users SET rate_limit_per_hour = 1000000000 WHERE id = $1", [u.id]);
      const { key } = await createKey(db, { user: u.id, permissions: [...PERMISSIONS], name: "soak" });
      tenants.push({ id: u.id, key });
    }
    await db.close();
    const stats = new pg.Client({ connectionString: scratch.url });
    await stats.connect();
    cleanups.unshift({ name: "stats connection", fn: () => stats.end() });

    // ---- simulators ---------------------------------------------------------------------------
    const simKey = "soak-sim-key";
    const simToken = "soak-sim-token";
    const sims = startChild(
      "sims",
      [
        fileURLToPath(new URL("./lib/soak-sims.js", import.meta.url)),
        JSON.stringify({
          workflowA: nHosts,
          latencyMs,
          runEveryMs: 10_000,
          apiKey: simKey,
          apiToken: simToken,
        }),
      ],
      {},
      logDir,
    );
    children.push(sims);
    const simUrls = JSON.parse((await sims.waitFor(/^\{"workflowA".*$/m, 30_000))[0]) as {
      workflowA: string[];
      workflowB: string;
    };

    // ---- Vigil --------------------------------------------------------------------------------
    const [port] = (await freePorts(1)) as [number];
    const baseUrl = `http://127.0.0.1:${port}`;
    const nodeOptions = [
      // the in-process memory and handle meter (bench/lib/soak-meter.ts)
      `--import=${pathToFileURL(fileURLToPath(new URL("./lib/soak-meter.js", import.meta.url))).href}`,
      values.gc ? "--expose-gc" : undefined,
      values["vigil-node-options"],
      snapshotAt.size ? `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${logDir}` : undefined,
    ]
      .filter(Boolean)
      .join(" ");
    const meterFile = (name: string) => path.join(logDir, `${name}.meter.jsonl`);
    const env = (logLevel: string, name: string): Record<string, string> => ({
      VIGIL_SOAK_METER: meterFile(name),
      ...(values.gc ? { VIGIL_SOAK_GC: "1" } : {}),
      DATABASE_URL: scratch.url,
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_PG_URL: questdb.pgUrl,
      VIGIL_SECRET: "soak-secret-soak-secret-soak-secret-soak!",
      VIGIL_DATA_DIR: path.join(logDir, "data"),
      HOST: "127.0.0.1",
      PORT: String(port),
      WORKFLOW_B_API_TEMPLATE: `${simUrls.workflowB}/{region}/api/v2`,
      LOG_LEVEL: logLevel,
      ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}),
    });
    const probeStats: { checks: number; lagP99Ms: number }[] = [];
    const onProbeLine = (line: string) => {
      if (line.includes('"probe stats"')) {
        const s = JSON.parse(line) as { checks: number; lagP99Ms: number };
        probeStats.push({ checks: s.checks, lagP99Ms: s.lagP99Ms });
      }
    };
    let api: Child;
    let worker: Child;
    if (values.single) {
      api = worker = startChild("vigil", [CLI_PATH, "serve"], env("info", "vigil"), logDir, onProbeLine);
      children.push(api);
    } else {
      // the api role logs at warn: at info Fastify writes two lines per request
      api = startChild(
        "api",
        [CLI_PATH, "serve", "--roles", "api"],
        env(values["api-log-level"], "api"),
        logDir,
      );
      worker = startChild(
        "worker",
        [CLI_PATH, "serve", "--roles", "probe,jobs"],
        env("info", "worker"),
        logDir,
        onProbeLine,
      );
      children.push(api, worker);
    }
    cleanups.unshift({ name: "processes", fn: () => stopChildren(children, say) });
    await waitReady(baseUrl, api, 60_000);
    await worker.waitFor(/probe scheduler started/, 60_000);
    say(
      `Vigil: ${values.single ? `one process, every role (pid ${api.pid})` : `api (pid ${api.pid}) + probe,jobs (pid ${worker.pid})`} at ${baseUrl}; simulators pid ${sims.pid}`,
    );

    // ---- connections, over the API -------------------------------------------------------------
    const setupAgent = new Agent({ connections: 8 });
    const post = async (key: string, body: unknown) => {
      const r = await request(`${baseUrl}/v1/connections`, {
        method: "POST",
        dispatcher: setupAgent,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const json = (await r.body.json()) as {
        connection?: { id: string };
        ingest_api_key?: string;
      };
      if (r.statusCode !== 201)
        throw new Error(`POST /v1/connections: ${r.statusCode} ${JSON.stringify(json)}`);
      return json;
    };
    const limit = pLimit(8);
    const wfByTenant: string[][] = tenants.map(() => []);
    const gwByTenant: string[][] = tenants.map(() => []);
    const ingestKeys: string[] = [];
    await Promise.all([
      ...Array.from({ length: nWorkflows }, (_, i) =>
        limit(async () => {
          const t = i % nTenants;
          const tenant = tenants[t] as (typeof tenants)[number];
          const body =
            i % 2 === 0
              ? {
                  service_type: "workflow_a",
                  service_name: `soak-a-${i}`,
                  base_url: simUrls.workflowA[Math.floor(i / 2) % nHosts],
                  api_key: simKey,
                  check_interval_seconds: interval,
                }
              : {
                  service_type: "workflow_b",
                  service_name: `soak-b-${i}`,
                  api_token: simToken,
                  region: "eu1",
                  team_id: "1",
                  check_interval_seconds: interval,
                };
          const r = await post(tenant.key, body);
          (wfByTenant[t] as string[]).push((r.connection as { id: string }).id);
        }),
      ),
      ...Array.from({ length: nGateways }, (_, g) =>
        limit(async () => {
          const t = g % nTenants;
          const r = await post((tenants[t] as (typeof tenants)[number]).key, {
            service_type: "gateway",
            service_name: `soak-gw-${g}`,
          });
          (gwByTenant[t] as string[]).push((r.connection as { id: string }).id);
          ingestKeys.push(r.ingest_api_key as string);
        }),
      ),
    ]);
    await setupAgent.close();
    say(
      `created ${nTenants} tenants, ${nWorkflows} workflow connections (${Math.ceil(nWorkflows / 2)} workflow_a on ${nHosts} hosts, ` +
        `${Math.floor(nWorkflows / 2)} workflow_b) checked every ${interval} s, ${nGateways} gateways`,
    );

    // ---- load -----------------------------------------------------------------------------------
    const meters: Record<Kind, Meter> = { heartbeat: new Meter(), usage: new Meter(), read: new Meter() };
    const readMeters = new Map<string, Meter>();
    const deadline = Date.now() + minutes * 60_000;
    const running = () => !stopLoad && !interrupted && Date.now() < deadline;
    const agents: Agent[] = [];
    const send = (kind: Kind, agent: Agent, label: string) => async (r: Req) => {
      const t0 = performance.now();
      let status: number;
      let text: string;
      try {
        const res = await request(`${baseUrl}${r.path}`, {
          method: r.method ?? "GET",
          dispatcher: agent,
          headers: r.body
            ? { authorization: `Bearer ${r.key}`, "content-type": "application/json" }
            : { authorization: `Bearer ${r.key}` },
          body: r.body,
          headersTimeout: 30_000,
          bodyTimeout: 30_000,
        });
        status = res.statusCode;
        text = await res.body.text();
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? (err as Error).name;
        meters[kind].fail(`net:${code}`, r.name ?? label, (err as Error).message);
        return undefined;
      }
      const ms = performance.now() - t0;
      meters[kind].record(ms);
      const name = r.name ?? label;
      let rm = readMeters.get(name);
      if (kind === "read" && !rm) readMeters.set(name, (rm = new Meter()));
      rm?.record(ms);
      if (status < 200 || status >= 300) {
        meters[kind].fail(String(status), r.name ?? label, text);
        return undefined;
      }
      return text;
    };
    const loop = (
      kind: Kind,
      rate: number,
      concurrency: number,
      next: () => Req,
      onBody?: (r: Req, b: string) => void,
    ) => {
      if (rate <= 0) return Promise.resolve();
      const agent = new Agent({ connections: concurrency, keepAliveTimeout: 30_000 });
      agents.push(agent);
      const go = send(kind, agent, kind);
      return paced(rate, concurrency, running, meters[kind], async () => {
        const r = next();
        const body = await go(r);
        if (body !== undefined) onBody?.(r, body);
      });
    };

    // heartbeats: every gateway in turn, each reporting the period since its previous heartbeat
    const lastEnd = ingestKeys.map(() => Date.now() - 1000);
    let hbNext = 0;
    const heartbeat = (): Req => {
      const g = hbNext++ % ingestKeys.length;
      const begin = lastEnd[g] as number;
      const end = Math.max(Date.now(), begin + 1);
      lastEnd[g] = end;
      return {
        path: "/v1/gateway/ingest",
        method: "POST",
        key: ingestKeys[g] as string,
        body: JSON.stringify({
          type: "heartbeat",
          gateway: { status: "healthy", latencyMs: 10 + (g % 40), version: "2.4.1" },
          system: { gatewayPidAlive: true },
          tokens: {
            period: {
              inputTokens: 1200 + g,
              outputTokens: 300,
              cacheReadTokens: 0,
              cacheWriteTokens: 0,
              requestCount: 4,
              startedAt: new Date(begin).toISOString(),
              endedAt: new Date(end).toISOString(),
            },
            byModel: [
              { model: "claude-sonnet-4-5", inputTokens: 1000 + g, outputTokens: 250 },
              { model: "gpt-4o-mini", inputTokens: 200, outputTokens: 50 },
            ],
          },
        }),
      };
    };

    // usage: batches from each tenant in turn, over its workflow connections
    let usageNext = 0;
    const usage = (): Req => {
      const n = usageNext++;
      const t = n % nTenants;
      const conns = (wfByTenant[t] as string[]).length
        ? (wfByTenant[t] as string[])
        : (gwByTenant[t] as string[]);
      return {
        path: "/v1/usage",
        method: "POST",
        key: (tenants[t] as (typeof tenants)[number]).key,
        body: JSON.stringify(
          Array.from({ length: usageBatch }, (_, i) => ({
            connection_id: conns[(n + i) % conns.length],
            entity: i % 2 ? "gpt-4o" : "claude-sonnet-4-5",
            usage_amount: 1000 + i,
            cost_cents: 0.4,
            workflow_id: `wf-${i % 3}`,
            execution_id: `ex-${n}-${i % 10}`,
          })),
        ),
      };
    };

    // reads: each tenant in turn, cycling through the read endpoints
    const cursors = new Map<number, string>();
    let readNext = 0;
    const read = (): Req => {
      const n = readNext++;
      const t = n % nTenants;
      const key = (tenants[t] as (typeof tenants)[number]).key;
      const wf = wfByTenant[t] as string[];
      const gw = gwByTenant[t] as string[];
      const oneWf = wf[n % Math.max(1, wf.length)] ?? gw[0];
      const oneGw = gw[n % Math.max(1, gw.length)] ?? oneWf;
      const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
      const reads: [string, string, string?][] = [
        ["availability, newest page of 100", "/v1/availability?limit=100"],
        [
          "availability, next page (cursor)",
          cursors.has(t)
            ? `/v1/availability?limit=100&cursor=${encodeURIComponent(cursors.get(t) as string)}`
            : "/v1/availability?limit=100",
        ],
        [
          "availability, one connection, last hour",
          `/v1/availability?connection_id=${oneWf}&since=${encodeURIComponent(hourAgo)}`,
        ],
        ["availability summary, day", "/v1/availability/summary?window=day"],
        [
          "availability summary, month, one connection",
          `/v1/availability/summary?window=month&connection_id=${oneWf}`,
        ],
        ["executions, newest 100", "/v1/executions?limit=100"],
        ["executions by workflow", "/v1/executions?group_by=workflow"],
        ["analytics daily_availability", "/v1/analytics?metric_type=daily_availability"],
        ["analytics daily_executions", "/v1/analytics?metric_type=daily_executions"],
        [
          "analytics monthly_gateway_cost",
          `/v1/analytics?metric_type=monthly_gateway_cost&connection_id=${oneGw}`,
        ],
        ["incidents", "/v1/incidents?limit=100"],
        ["alerts", "/v1/alerts?limit=100"],
        ["anomalies", "/v1/anomalies"],
        ["usage, newest 50", "/v1/usage?limit=50"],
        ["usage totals of a connection (PUT)", `/v1/usage?connection_id=${oneWf}`, "PUT"],
        ["connections", "/v1/connections?limit=100"],
      ];
      const [name, p, method] = reads[Math.floor(n / nTenants) % reads.length] as [string, string, string?];
      return { name, path: p, key, method, tenant: t };
    };
    const rememberCursor = (r: Req, body: string) => {
      if (r.name !== "availability, newest page of 100" && r.name !== "availability, next page (cursor)")
        return;
      const next = (JSON.parse(body) as { pagination?: { next_cursor?: string | null } }).pagination
        ?.next_cursor;
      if (next) cursors.set(r.tenant as number, next);
      else cursors.delete(r.tenant as number);
    };

    // faults: one workflow_a host down for 2 minutes in every 6, from minute 3
    const faultHost = simUrls.workflowA[0] as string;
    const setFault = async (fault: "down" | "none") => {
      const r = await request(`${faultHost}/__sim/state`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ fault }),
      });
      await r.body.dump();
    };
    const faultTimers: NodeJS.Timeout[] = [];
    const t0 = Date.now();
    if (faults)
      for (let m = 3; m + 2 <= minutes; m += 6) {
        const at = (fault: "down" | "none", minute: number, msg: string) =>
          setTimeout(
            () =>
              void setFault(fault)
                .then(() => say(`  minute ${minute}: ${faultHost} ${msg}`))
                .catch((err: unknown) =>
                  say(`  minute ${minute}: fault control failed: ${(err as Error).message}`),
                ),
            minute * 60_000,
          ).unref();
        faultTimers.push(at("down", m, "down for 2 minutes"), at("none", m + 2, "back"));
      }

    const procs: Proc[] = [
      ...(values.single
        ? [{ name: "vigil", pid: api.pid, vigil: true, meter: meterFile("vigil") }]
        : [
            { name: "api", pid: api.pid, vigil: true, meter: meterFile("api") },
            { name: "worker", pid: worker.pid, vigil: true, meter: meterFile("worker") },
          ]),
      { name: "sims", pid: sims.pid, vigil: false },
      { name: "load", pid: process.pid, vigil: false },
      ...(questdb.pid ? [{ name: "qdb", pid: questdb.pid, vigil: false }] : []),
    ];
    // in flight at most a quarter second's worth: the offered rate holds while p99 < 250 ms
    const hbConc = Math.max(8, Math.ceil(hbRate / 4));
    say(
      `load for ${fmt(minutes, minutes % 1 ? 1 : 0)} min: heartbeats ${fmt(hbRate)}/s (concurrency ${hbConc}), usage ${fmt(usageRate, 1)} batches/s of ${usageBatch} ` +
        `(concurrency 2), reads ${fmt(readRate, 1)}/s (concurrency 6); probes ${fmt(nWorkflows / interval, 1)} checks/s scheduled` +
        (faults ? "; fault: one workflow_a host down 2 min in every 6, from minute 3" : ""),
    );
    const loads = Promise.all([
      loop("heartbeat", hbRate, hbConc, heartbeat),
      loop("usage", usageRate, 2, usage),
      loop("read", readRate, 6, read, rememberCursor),
    ]);

    // ---- per-minute rows -------------------------------------------------------------------------
    const header = [
      "min",
      "hb/s",
      "hb p99",
      "use/s",
      "use p99",
      "read/s",
      "rd p99",
      "errors",
      "checks",
      "probe smp",
      "lag p99",
      ...procs.flatMap((p) =>
        p.vigil ? [`${p.name} MB`, "heap", "ext", "fd", "hdl", "cpu"] : [`${p.name} MB`, "cpu"],
      ),
      "pg MB",
      "qdb rows",
      "wal pend",
      "load1",
    ];
    const widths = header.map((h) => Math.max(7, h.length));
    const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i] ?? 7)).join(" ");
    console.log(
      `\nsoak: ${values.single ? "one vigil serve (every role)" : "vigil serve --roles api + --roles probe,jobs"}, PostgreSQL + QuestDB${qdbPrivate ? " (private)" : ""}, ` +
        `${nWorkflows} workflow connections every ${interval} s, ${nGateways} gateways, ${nTenants} tenants; ` +
        `target rates: ${fmt(hbRate)} heartbeats/s, ${fmt(usageRate * usageBatch)} usage entries/s (${fmt(usageRate, 1)} batches), ${fmt(readRate, 1)} reads/s; ${os.cpus().length} cores\n`,
    );
    console.log(line(header));
    console.log(widths.map((w) => "-".repeat(w)).join(" "));

    const rows: MinuteRow[] = [];
    let cpuPrev = new Map(procs.map((p) => [p.name, processCpuSeconds(p.pid)]));
    let qdbPrev = await questdbRows(qpool);
    let probeSeen = 0;
    // RSS every 5 s; a row shows (and the slope uses) the minute's mean, steadier than one reading
    const rssSeen = new Map<string, number[]>(procs.map((p) => [p.name, []]));
    const rssTimer = setInterval(() => {
      for (const p of procs) rssSeen.get(p.name)?.push(rssMb(p.pid));
    }, 5_000).unref();
    let tPrev = t0;
    const sample = async (label: string) => {
      const now = Date.now();
      const secs = (now - tPrev) / 1000;
      tPrev = now;
      const w = Object.fromEntries(
        (Object.keys(meters) as Kind[]).map((k) => [k, meters[k].take()]),
      ) as Record<Kind, Window>;
      const procStats = procs.map((p) => {
        const cpu = processCpuSeconds(p.pid);
        const used = (cpu - (cpuPrev.get(p.name) ?? Number.NaN)) / secs;
        return {
          name: p.name,
          vigil: p.vigil,
          rssMb: meanOf([...(rssSeen.get(p.name) ?? []).splice(0), rssMb(p.pid)]),
          fds: p.vigil ? fdCount(p.pid) : Number.NaN,
          ...readMeter(p.meter),
          cpu: used,
          cpuNow: cpu,
        };
      });
      cpuPrev = new Map(procStats.map((p) => [p.name, p.cpuNow]));
      const pgMb =
        Number(
          (await stats.query<{ s: string }>("SELECT pg_database_size($1) AS s", [dbName])).rows[0]?.s ?? 0,
        ) / 1048576;
      const q = await questdbRows(qpool);
      const samples = (q.probeSamples ?? 0) - (qdbPrev.probeSamples ?? 0);
      qdbPrev = q;
      const ps = probeStats.slice(probeSeen);
      probeSeen = probeStats.length;
      const errors: Record<string, number> = {};
      for (const k of Object.keys(w) as Kind[])
        for (const [s, c] of Object.entries(w[k].errors))
          errors[`${k}:${s}`] = (errors[`${k}:${s}`] ?? 0) + c;
      const errTotal = Object.values(errors).reduce((a, b) => a + b, 0);
      const row: MinuteRow = {
        label,
        secs,
        rps: { heartbeat: w.heartbeat.n / secs, usage: w.usage.n / secs, read: w.read.n / secs },
        p99: { heartbeat: w.heartbeat.p99, usage: w.usage.p99, read: w.read.p99 },
        errors,
        checks: ps.reduce((a, s) => a + s.checks, 0),
        samples,
        lagP99: ps.length ? Math.max(...ps.map((s) => s.lagP99Ms)) : Number.NaN,
        procs: procStats,
        pgMb,
        qdbRows: [...q.rows.values()].reduce((a, b) => a + b, 0),
        qdbTables: Object.fromEntries(q.rows),
        qdbMb: q.diskMb,
        walPending: q.walPending,
        load1: Number(fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]),
      };
      rows.push(row);
      console.log(
        line([
          label,
          fmt(row.rps.heartbeat, 1),
          fmt(row.p99.heartbeat, 1),
          fmt(row.rps.usage, 2),
          fmt(row.p99.usage, 1),
          fmt(row.rps.read, 1),
          fmt(row.p99.read, 1),
          errTotal
            ? Object.entries(errors)
                .map(([k, v]) => `${k}=${v}`)
                .join(",")
            : "0",
          fmt(row.checks),
          fmt(row.samples),
          fmt(row.lagP99),
          ...procStats.flatMap((p) =>
            p.vigil
              ? [
                  fmt(p.rssMb, 1),
                  fmt(p.heapMb, 1),
                  fmt(p.externalMb, 1),
                  fmt(p.fds),
                  fmt(p.handles),
                  `${fmt(p.cpu * 100)}%`,
                ]
              : [fmt(p.rssMb, 1), `${fmt(p.cpu * 100)}%`],
          ),
          fmt(pgMb, 1),
          fmt(row.qdbRows),
          fmt(row.walPending),
          fmt(row.load1, 2),
        ]),
      );
    };
    const full = Math.floor(minutes);
    for (let m = 1; m <= full && !interrupted; m++) {
      await sleepUntil(t0 + m * 60_000, () => interrupted || children.some((c) => c.exited));
      if (children.some((c) => c.exited)) {
        await new Promise((r) => setTimeout(r, 1_000)); // siblings stopped by the same hand
        const dead = children.filter((c) => c.exited);
        cutShortBy = dead
          .map(
            (c) =>
              `${c.name} (pid ${c.pid}) exited at minute ${fmt((c.exitedAt - t0) / 60_000, 1)} (${c.exitInfo})` +
              (c.exitInfo === "code 0"
                ? ": a graceful shutdown, which Vigil does on SIGTERM/SIGINT; this benchmark sent none, so something else on the machine did"
                : ""),
          )
          .join("; ");
        say(`run cut short: ${cutShortBy}; logs in ${logDir}`);
        interrupted = true;
        break;
      }
      if (!interrupted) await sample(String(m));
      if (snapshotAt.has(m))
        for (const p of procs.filter((x) => x.vigil && x.pid)) {
          process.kill(p.pid as number, "SIGUSR2");
          say(`  minute ${m}: heap snapshot of ${p.name} (pid ${p.pid}) requested, into ${logDir}`);
        }
    }
    if (!interrupted && minutes > full) {
      await sleepUntil(deadline, () => interrupted);
      await sample(fmt(minutes, 1));
    }
    clearInterval(rssTimer);
    const cutShort = interrupted;
    stopLoad = true;
    for (const t of faultTimers) clearTimeout(t);
    await loads;
    await Promise.all(agents.map((a) => a.close()));
    // the minutes done when a child died or on SIGINT, and the part-minute since
    if (cutShort && Date.now() - tPrev > 5_000 && children.every((c) => !c.exited)) await sample("end");
    if (faults) await setFault("none").catch(() => {});
    const loadEnd = Date.now();

    // ---- shutdown, then the summary ------------------------------------------------------------
    const shutdown = await stopChildren(children, say);
    cleanups.splice(
      cleanups.findIndex((c) => c.name === "processes"),
      1,
    );
    const logs = children.map((c) => ({ name: c.name, file: c.logFile, ...c.logCounts }));
    summary({
      rows,
      meters,
      readMeters,
      warmup,
      maxSlope,
      minutes: (loadEnd - t0) / 60_000,
      shutdown,
      logs,
      rates: { hbRate, usageRate, usageBatch, readRate, nWorkflows, interval, nGateways },
      split: !values.single,
      gc: Boolean(values.gc),
      cutShortBy: cutShortBy ?? (stopSignal ? `this benchmark received ${stopSignal}` : undefined),
      requested: values.minutes,
    });
  } finally {
    stopLoad = true;
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    for (const c of cleanups) {
      try {
        await c.fn();
      } catch (err) {
        say(`cleanup (${c.name}): ${(err as Error).message}`);
      }
    }
    const done = [
      ...(qdbPrivate ? ["private QuestDB stopped and its folder removed"] : []),
      ...(qdb && !qdbPrivate ? ["QuestDB tables left as they are (shared server, no prefix)"] : []),
      ...(cleanups.some((c) => c.name === "throwaway database") ? ["throwaway database dropped"] : []),
    ];
    say(`cleaned up${done.length ? `: ${done.join(", ")}` : ""}; logs in ${logDir}`);
  }
}

type Kind = "heartbeat" | "usage" | "read";

interface Req {
  path: string;
  key: string;
  method?: string;
  body?: string;
  name?: string;
  tenant?: number;
}

interface Window {
  n: number;
  p50: number;
  p99: number;
  errors: Record<string, number>;
}

const percentile = (sorted: number[], p: number) =>
  sorted.length
    ? (sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number)
    : Number.NaN;

/** Latencies and errors of one kind of request: this minute's (taken by `take`) and the run's. */
class Meter {
  private window: number[] = [];
  private windowErrors: Record<string, number> = {};
  /** The run's latencies as a histogram: bucket i holds [1.02^i, 1.02^(i+1)) × 0.01 ms. */
  private readonly hist = new Map<number, number>();
  total = 0;
  failed = 0;
  missed = 0;
  readonly errors: Record<string, number> = {};
  readonly samples: { status: string; label: string; text: string }[] = [];

  record(ms: number): void {
    this.window.push(ms);
    this.total++;
    const b = Math.max(0, Math.floor(Math.log(ms / 0.01) / Math.log(1.02)));
    this.hist.set(b, (this.hist.get(b) ?? 0) + 1);
  }

  fail(status: string, label: string, text: string): void {
    this.failed++;
    this.windowErrors[status] = (this.windowErrors[status] ?? 0) + 1;
    this.errors[status] = (this.errors[status] ?? 0) + 1;
    if (this.samples.length < 5) this.samples.push({ status, label, text: text.slice(0, 300) });
    if (status.startsWith("net:")) this.total++;
  }

  take(): Window {
    const s = this.window.sort((a, b) => a - b);
    const out = { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), errors: this.windowErrors };
    this.window = [];
    this.windowErrors = {};
    return out;
  }

  /** The run's percentile, from the histogram (within 2%). */
  quantile(p: number): number {
    const n = [...this.hist.values()].reduce((a, b) => a + b, 0);
    if (!n) return Number.NaN;
    let seen = 0;
    for (const b of [...this.hist.keys()].sort((a, c) => a - c)) {
      seen += this.hist.get(b) as number;
      if (seen >= (p / 100) * n) return 0.01 * 1.02 ** (b + 0.5);
    }
    return Number.NaN;
  }
}

/**
 * Calls `fn` `rate` times a second with at most `concurrency` calls at once, until `running()`
 * is false. Slots more than a second late (every call slot busy) are skipped and counted as
 * missed: a sign the load generator or the machine, not Vigil's steady state, is the limit.
 */
async function paced(
  rate: number,
  concurrency: number,
  running: () => boolean,
  meter: Meter,
  fn: () => Promise<void>,
): Promise<void> {
  const step = 1000 / rate;
  let next = performance.now();
  const worker = async () => {
    while (running()) {
      let slot = next;
      next += step;
      const now = performance.now();
      if (now - slot > 1000) {
        const skipped = Math.floor((now - slot) / step);
        meter.missed += skipped;
        next = now + step;
        slot = now;
      }
      if (slot > now) await new Promise((r) => setTimeout(r, slot - now));
      if (!running()) return;
      await fn();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

interface Proc {
  name: string;
  pid: number | undefined;
  vigil: boolean;
  meter?: string;
}

/** The newest line of a soak-meter file: V8 heap used and external memory (MB), active handles. */
function readMeter(file: string | undefined): { heapMb: number; externalMb: number; handles: number } {
  const none = { heapMb: Number.NaN, externalMb: Number.NaN, handles: Number.NaN };
  if (!file) return none;
  try {
    const last = fs.readFileSync(file, "utf8").trimEnd().split("\n").at(-1);
    if (!last) return none;
    const m = JSON.parse(last) as { heapUsed: number; external: number; handles: number };
    return { heapMb: m.heapUsed / 1048576, externalMb: m.external / 1048576, handles: m.handles };
  } catch {
    return none;
  }
}

interface MinuteRow {
  label: string;
  secs: number;
  rps: Record<Kind, number>;
  p99: Record<Kind, number>;
  errors: Record<string, number>;
  checks: number;
  samples: number;
  lagP99: number;
  procs: {
    name: string;
    vigil: boolean;
    rssMb: number;
    fds: number;
    cpu: number;
    heapMb: number;
    externalMb: number;
    handles: number;
  }[];
  pgMb: number;
  qdbRows: number;
  qdbTables: Record<string, number>;
  qdbMb: number;
  walPending: number;
  load1: number;
}

function rssMb(pid: number | undefined): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Two-sided 95% critical values of Student's t by degrees of freedom (1.96 past 30). */
function tCritical95(df: number): number {
  const table = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131,
    2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
  ];
  return df >= 1 && df <= 30 ? (table[df - 1] as number) : df > 30 ? 1.96 : Number.NaN;
}

function meanOf(xs: number[]): number {
  const ok = xs.filter(Number.isFinite);
  return ok.length ? ok.reduce((a, b) => a + b, 0) / ok.length : Number.NaN;
}

function fdCount(pid: number | undefined): number {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
}

/** Rows and disk size of every Vigil table in QuestDB, and rows still waiting in WAL. */
async function questdbRows(
  pool: pg.Pool,
): Promise<{ rows: Map<string, number>; diskMb: number; walPending: number; probeSamples: number }> {
  const names = [
    "availability_samples",
    "executions",
    "usage_entries",
    "gateway_heartbeats",
    "gateway_model_usage",
    "availability_daily",
    "availability_monthly",
  ];
  const rows = new Map<string, number>();
  let disk = 0;
  let walPending = 0;
  try {
    const s = await pool.query<{ tableName: string; rowCount: string; diskSize: string }>(
      'SELECT "tableName", "rowCount", "diskSize" FROM table_storage()',
    );
    for (const r of s.rows)
      if (names.includes(r.tableName)) {
        rows.set(r.tableName, Number(r.rowCount));
        disk += Number(r.diskSize);
      }
    const w = await pool.query<{ table_name: string; p: string }>(
      "SELECT table_name, wal_pending_row_count AS p FROM tables()",
    );
    for (const r of w.rows) if (names.includes(r.table_name)) walPending += Number(r.p);
  } catch {
    // older servers without table_storage(): counts only
    for (const n of names) {
      const r = await pool.query<{ c: string }>(`SELECT count() AS c FROM ${n}`).catch(() => null);
      if (r) rows.set(n, Number(r.rows[0]?.c ?? 0));
    }
    walPending = Number.NaN;
    disk = Number.NaN;
  }
  // probe checks' own samples (not heartbeats' or gap fills')
  const probe = await pool
    .query<{ c: string }>("SELECT count() AS c FROM availability_samples WHERE source = 'probe'")
    .catch(() => null);
  return { rows, diskMb: disk / 1048576, walPending, probeSamples: Number(probe?.rows[0]?.c ?? Number.NaN) };
}

function sleepUntil(at: number, stop: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const tick = () => {
      if (stop() || Date.now() >= at) return resolve();
      setTimeout(tick, Math.min(250, at - Date.now()));
    };
    tick();
  });
}

// ---- child processes ---------------------------------------------------------------------------

interface Child {
  name: string;
  proc: ChildProcess;
  pid: number | undefined;
  logFile: string;
  exited: boolean;
  exitedAt: number;
  exitInfo: string;
  /** Log lines of level warn (40) and error or worse (50+), and the first few of those. */
  logCounts: { warn: number; error: number; firstErrors: string[] };
  waitFor(re: RegExp, ms: number): Promise<RegExpMatchArray>;
  exit: Promise<void>;
}

/** Runs `node args…` with only the environment given (plus PATH and HOME), its output in `<dir>/<name>.log`. */
function startChild(
  name: string,
  args: string[],
  env: Record<string, string>,
  dir: string,
  onLine?: (line: string) => void,
): Child {
  const logFile = path.join(dir, `${name}.log`);
  const out = fs.createWriteStream(logFile);
  // Vigil's processes run with the server's V8 flags, as `npm start` runs them; the simulators not
  const proc = spawn(process.execPath, args[0] === CLI_PATH ? [...SERVER_NODE_FLAGS, ...args] : args, {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let head = "";
  const waiters = new Set<() => void>();
  const logCounts = { warn: 0, error: 0, firstErrors: [] as string[] };
  const child: Child = {
    name,
    proc,
    pid: proc.pid,
    logFile,
    exited: false,
    exitedAt: Number.NaN,
    exitInfo: "",
    logCounts,
    exit: new Promise((resolve) =>
      proc.once("exit", (code, signal) => {
        child.exited = true;
        child.exitedAt = Date.now();
        child.exitInfo = signal ? `signal ${signal}` : `code ${code}`;
        resolve();
      }),
    ),
    waitFor(re, ms) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = head.match(re);
          if (m) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(m);
          } else if (child.exited) {
            waiters.delete(check);
            clearTimeout(timer);
            reject(
              new Error(
                `${name} exited (${child.exitInfo}) before /${re.source}/; see ${logFile}:\n${head.slice(-2000)}`,
              ),
            );
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${name}: no /${re.source}/ within ${ms} ms; see ${logFile}`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
  };
  void child.exit.then(() => {
    for (const w of waiters) w();
  });
  for (const stream of [proc.stdout, proc.stderr]) {
    stream?.pipe(out, { end: false });
    readline.createInterface({ input: stream as NodeJS.ReadableStream }).on("line", (l) => {
      if (head.length < 64_000) {
        head += `${l}\n`;
        for (const w of waiters) w();
      }
      const level = /^\{"level":(\d+)/.exec(l);
      if (level) {
        const lv = Number(level[1]);
        if (lv >= 50) {
          logCounts.error++;
          if (logCounts.firstErrors.length < 5) logCounts.firstErrors.push(l.slice(0, 400));
        } else if (lv >= 40) logCounts.warn++;
      } else if (/^vigil: |Error|error/.test(l)) {
        logCounts.error++;
        if (logCounts.firstErrors.length < 5) logCounts.firstErrors.push(l.slice(0, 400));
      }
      onLine?.(l);
    });
  }
  return child;
}

async function waitReady(baseUrl: string, api: Child, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (api.exited) throw new Error(`api exited (${api.exitInfo}) during start; see ${api.logFile}`);
    const ok = await request(`${baseUrl}/readyz`)
      .then(async (r) => {
        await r.body.dump();
        return r.statusCode === 200;
      })
      .catch(() => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`Vigil at ${baseUrl} not ready within ${ms} ms; see ${api.logFile}`);
}

/** SIGTERM to every child still running, in reverse start order; SIGKILL after 25 s. */
async function stopChildren(
  children: Child[],
  say: (s: string) => void,
): Promise<{ name: string; ms: number; exit: string }[]> {
  const out: { name: string; ms: number; exit: string }[] = [];
  await Promise.all(
    [...children].reverse().map(async (c) => {
      if (c.exited) {
        out.push({ name: c.name, ms: 0, exit: `had exited (${c.exitInfo})` });
        return;
      }
      const t0 = Date.now();
      c.proc.kill("SIGTERM");
      const timer = setTimeout(() => {
        say(`${c.name} (pid ${c.pid}) did not stop within 25 s of SIGTERM; killing it`);
        c.proc.kill("SIGKILL");
      }, 25_000);
      await c.exit;
      clearTimeout(timer);
      out.push({ name: c.name, ms: Date.now() - t0, exit: c.exitInfo });
    }),
  );
  return out;
}

// ---- summary ---------------------------------------------------------------------------------

function summary(s: {
  rows: MinuteRow[];
  meters: Record<Kind, Meter>;
  readMeters: Map<string, Meter>;
  warmup: number;
  maxSlope: number;
  minutes: number;
  shutdown: { name: string; ms: number; exit: string }[];
  logs: { name: string; file: string; warn: number; error: number; firstErrors: string[] }[];
  rates: {
    hbRate: number;
    usageRate: number;
    usageBatch: number;
    readRate: number;
    nWorkflows: number;
    interval: number;
    nGateways: number;
  };
  split: boolean;
  gc: boolean;
  cutShortBy: string | undefined;
  /** --minutes as given */
  requested: string;
}): void {
  const { rows, meters } = s;
  const kinds = Object.keys(meters) as Kind[];
  const total = kinds.reduce((a, k) => a + meters[k].total, 0);
  const errors = kinds.reduce((a, k) => a + meters[k].failed, 0);
  const secs = s.minutes * 60;
  console.log(`\nsummary: ${fmt(s.minutes, 1)} min of load\n`);
  for (const k of kinds) {
    const m = meters[k];
    const target = k === "heartbeat" ? s.rates.hbRate : k === "usage" ? s.rates.usageRate : s.rates.readRate;
    console.log(
      `  ${k.padEnd(9)} ${fmt(m.total)} requests, ${fmt(m.total / secs, 1)}/s (target ${fmt(target, 1)}), p50 ${fmt(m.quantile(50), 1)} ms, p99 ${fmt(m.quantile(99), 1)} ms, ` +
        `errors ${m.failed}${
          m.failed
            ? ` (${Object.entries(m.errors)
                .map(([st, c]) => `${st}: ${c}`)
                .join(", ")})`
            : ""
        }` +
        `${m.missed ? `, ${fmt(m.missed)} slots missed (load generator or machine saturated)` : ""}`,
    );
    for (const e of m.samples) console.log(`      e.g. ${e.status} ${e.label}: ${e.text}`);
  }
  const checks = rows.reduce((a, r) => a + r.checks, 0);
  const samples = rows.reduce((a, r) => a + r.samples, 0);
  console.log(
    `  probes    ${fmt(checks)} checks (${fmt(checks / secs, 1)}/s; schedule ${fmt(s.rates.nWorkflows / s.rates.interval, 1)}/s), ${fmt(samples)} availability samples written, ` +
      `worst minute's schedule lag p99 ${fmt(Math.max(0, ...rows.map((r) => r.lagP99).filter(Number.isFinite)))} ms`,
  );
  console.log(`  total     ${fmt(total)} requests, ${errors} errors${errors ? " (must be 0)" : ""}`);

  if (s.readMeters.size) {
    console.log("\n  reads, whole run:");
    const w = Math.max(...[...s.readMeters.keys()].map((k) => k.length));
    for (const [name, m] of s.readMeters)
      console.log(
        `    ${name.padEnd(w)}  ${fmt(m.total).padStart(6)} x  p50 ${fmt(m.quantile(50), 1).padStart(6)} ms  p99 ${fmt(m.quantile(99), 1).padStart(6)} ms`,
      );
  }

  // memory: least squares over the minutes after warm-up
  const after = rows.filter((r, i) => i + 1 > s.warmup && r.secs > 30);
  const warmRow = rows[Math.min(rows.length, Math.max(1, s.warmup)) - 1];
  const lastRow = rows.at(-1);
  const names = rows[0]?.procs.map((p) => p.name) ?? [];
  const slopes = new Map<string, { slope: number; r2: number; ci: number; heap: number; external: number }>();
  console.log(
    `\n  memory and handles (warm-up: the first ${s.warmup} min; slope: least squares over minutes ${s.warmup + 1}..${rows.length}, ${after.length} points;` +
      ` heap, ext(ernal) and handles as the process itself reports them${s.gc ? ", heap after a full GC" : ", heap without forcing a GC"})`,
  );
  type P = MinuteRow["procs"][number];
  /** Least squares: slope, r² and the half-width of the slope's 95% confidence interval. */
  const fit = (xy: [number, number][]) => {
    if (xy.length < 2) return { m: Number.NaN, r2: Number.NaN, ci: Number.NaN };
    const f = linearRegression(xy);
    if (xy.length < 3) return { m: f.m, r2: Number.NaN, ci: Number.NaN };
    const xMean = xy.reduce((a, [x]) => a + x, 0) / xy.length;
    const sxx = xy.reduce((a, [x]) => a + (x - xMean) ** 2, 0);
    const sse = xy.reduce((a, [x, y]) => a + (y - (f.m * x + f.b)) ** 2, 0);
    const se = Math.sqrt(sse / (xy.length - 2) / sxx);
    return { m: f.m, r2: rSquared(xy, (x) => f.m * x + f.b), ci: tCritical95(xy.length - 2) * se };
  };
  for (const name of names) {
    const at = (r: MinuteRow | undefined) => r?.procs.find((p) => p.name === name);
    const series = (f: (p: P) => number) =>
      after
        .map((r) => [rows.indexOf(r) + 1, f(at(r) as P)] as [number, number])
        .filter(([, v]) => Number.isFinite(v));
    const all = (f: (p: P) => number) => rows.map((r) => f(at(r) as P)).filter(Number.isFinite);
    const warm = at(warmRow);
    const last = at(lastRow);
    const trend = (label: string, f: (p: P) => number, unit: string, digits: number) => {
      const xs = all(f);
      const ft = fit(series(f));
      return (
        `${label} ${fmt(warm ? f(warm) : Number.NaN, digits)} -> ${fmt(last ? f(last) : Number.NaN, digits)}${unit} ` +
        `(min ${fmt(Math.min(...xs), digits)}, max ${fmt(Math.max(...xs), digits)}, slope ${fmt(ft.m, 2)}${label === "RSS" ? ` ± ${fmt(ft.ci, 2)}` : ""}${unit}/min${label === "RSS" ? `, r² ${fmt(ft.r2, 2)}` : ""})`
      );
    };
    const rss = fit(series((p) => p.rssMb));
    slopes.set(name, {
      slope: rss.m,
      r2: rss.r2,
      ci: rss.ci,
      heap: fit(series((p) => p.heapMb)).m,
      external: fit(series((p) => p.externalMb)).m,
    });
    console.log(`    ${name.padEnd(6)} ${trend("RSS", (p) => p.rssMb, " MB", 1)}`);
    if (warm?.vigil)
      console.log(
        `           ${trend("heap", (p) => p.heapMb, " MB", 1)}; ${trend("external", (p) => p.externalMb, " MB", 1)}\n` +
          `           ${trend("fds", (p) => p.fds, "", 0)}; ${trend("handles", (p) => p.handles, "", 0)}`,
      );
  }
  const first = rows[0];
  if (first && lastRow)
    console.log(
      `    stores: PostgreSQL ${fmt(first.pgMb, 1)} -> ${fmt(lastRow.pgMb, 1)} MB; QuestDB ${fmt(first.qdbRows)} -> ${fmt(lastRow.qdbRows)} rows, ${fmt(first.qdbMb)} -> ${fmt(lastRow.qdbMb)} MB on disk, WAL rows pending at the end ${fmt(lastRow.walPending)}`,
      `\n    QuestDB rows at the end: ${Object.entries(lastRow.qdbTables)
        .map(([t, n]) => `${t} ${fmt(n)}`)
        .join(", ")}`,
    );

  console.log("\n  logs:");
  for (const l of s.logs) {
    console.log(`    ${l.name.padEnd(6)} ${l.file}: ${l.error} error line(s), ${l.warn} warning(s)`);
    for (const e of l.firstErrors) console.log(`      ${e}`);
  }
  console.log(`  shutdown: ${s.shutdown.map((x) => `${x.name} ${x.exit} after ${fmt(x.ms)} ms`).join(", ")}`);

  const vigil = names.filter((n) => rows[0]?.procs.find((p) => p.name === n)?.vigil);
  const enough = after.length >= 5;
  // flat: below the threshold, or growth not told apart from noise (the slope's 95% interval reaches 0)
  const within = (n: string) => {
    const x = slopes.get(n);
    return x !== undefined && Number.isFinite(x.slope) && (x.slope < s.maxSlope || x.slope - x.ci <= 0);
  };
  const flat = vigil.every(within);
  const byNoise = vigil.filter((n) => within(n) && (slopes.get(n)?.slope ?? 0) >= s.maxSlope);
  const slopeText = vigil
    .map(
      (n) =>
        `${n} ${fmt(slopes.get(n)?.slope ?? Number.NaN, 2)} ± ${fmt(slopes.get(n)?.ci ?? Number.NaN, 2)}`,
    )
    .join(", ");
  const heapText = vigil
    .map(
      (n) =>
        `${n} heap ${fmt(slopes.get(n)?.heap ?? Number.NaN, 2)}, external ${fmt(slopes.get(n)?.external ?? Number.NaN, 2)}`,
    )
    .join("; ");
  console.log(
    `\nmemory flat: ${enough ? (flat ? "yes" : "no") : "n/a, too short to judge (needs 5 minutes after warm-up)"} ` +
      `(RSS slope ${slopeText} MB/min, 95% interval; flat: slope < ${s.maxSlope} MB/min, or its interval reaching 0, ` +
      `after ${s.warmup} min warm-up${byNoise.length ? `; ${byNoise.join(", ")} flat only as growth within noise` : ""}; ${heapText} MB/min)`,
  );
  const heapFlat = vigil.every(
    (n) =>
      Math.abs(slopes.get(n)?.heap ?? Number.NaN) < 0.25 &&
      Math.abs(slopes.get(n)?.external ?? Number.NaN) < 0.25,
  );
  if (enough && !flat && heapFlat)
    console.log(
      "  the V8 heap and external memory did not grow (< 0.25 MB/min): the RSS growth is heap capacity and allocator " +
        "memory not yet returned, not live objects; a longer run (or --gc) shows whether it levels off",
    );
  console.log(`errors: ${errors}${errors ? " (target 0: NOT met)" : " (target 0: met)"}`);
  if (s.cutShortBy) console.log(`RUN CUT SHORT, figures cover the minutes before it: ${s.cutShortBy}`);

  // a row for the benchmark table of docs/benchmarks.md
  const rssText = vigil
    .map((n) => {
      const warm = warmRow?.procs.find((p) => p.name === n)?.rssMb ?? Number.NaN;
      const last = lastRow?.procs.find((p) => p.name === n)?.rssMb ?? Number.NaN;
      return `${n === "worker" ? "probe,jobs" : n} ${fmt(warm)} -> ${fmt(last)} MB`;
    })
    .join(", ");
  const rate = (k: Kind) => fmt(meters[k].total / secs, k === "heartbeat" ? 0 : 1);
  console.log(
    `\n| soak | \`npm run bench -- soak --minutes ${s.requested}\` | ${fmt(s.minutes, s.minutes % 1 ? 1 : 0)} min on PostgreSQL + QuestDB, ${s.split ? "`--roles api` + `--roles probe,jobs`" : "one process"}: ` +
      `${rate("heartbeat")} heartbeats/s (p99 ${fmt(meters.heartbeat.quantile(99), 1)} ms), ${rate("usage")} usage batches/s of ${s.rates.usageBatch} (p99 ${fmt(meters.usage.quantile(99), 1)} ms), ` +
      `${rate("read")} reads/s (p99 ${fmt(meters.read.quantile(99), 1)} ms), ${fmt(checks / secs, 1)} checks/s of ${s.rates.nWorkflows} connections; ${fmt(total)} requests, ${errors} errors | ` +
      `RSS at minute ${Math.min(rows.length, Math.max(1, s.warmup))} vs last: ${rssText} | slope ${slopeText} MB/min | ` +
      `0 errors; RSS slope after warm-up < ${s.maxSlope} MB/min or within noise (95%) (${s.cutShortBy ? "run cut short" : errors === 0 && flat && enough ? "met" : enough ? "**not met**" : "too short"}) |`,
  );
}
