import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pLimit from "p-limit";
import { request } from "undici";
import { createChannel, deleteChannel } from "../src/channels/channels.js";
import type { Config } from "../src/config.js";
import { PERMISSIONS, type UserActor } from "../src/core/actor.js";
import { closeContext, createContext } from "../src/core/context.js";
import { createUser } from "../src/identity/accounts.js";
import { openIncident } from "../src/incidents/incidents.js";
import { CredentialBox } from "../src/lib/credentials.js";
import { createLogger } from "../src/lib/logger.js";
import { SERVER_NODE_FLAGS } from "../src/lib/node-flags.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import { createSqlSeriesStore } from "../src/stores/series/sql.js";
import { StoreSupervisor } from "../src/stores/supervisor.js";
import { createWebhook, deleteWebhook } from "../src/webhooks/webhooks.js";
import { CLI_PATH } from "./lib/cli.js";
import { ownCpuSeconds, processCpuSeconds } from "./lib/cpu.js";
import { channelSettings, type Receipt, type ReceiverKind } from "./lib/notify-receivers.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { fmt, table } from "./lib/report.js";

const SECOND = 1000;
/** The channel types of the burst: five providers, one channel of each per account. */
const TYPES = ["slack", "teams", "discord", "pagerduty", "ntfy"] as const;
const TARGET_P99_MS = 30 * SECOND;
const TARGET_LAG_MS = 1000;
/** The probe worker logs its "probe stats" (checks, schedule lag p50/p99) every 10 s. */
const STATS_EVERY_MS = 10 * SECOND;
/** Incidents opened at once by this process: its pool's connections. */
const OPEN_CONCURRENCY = 16;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
const secs = (ms: number, digits = 1) => `${fmt(ms / 1000, digits)} s`;

interface Stats {
  at: number;
  checks: number;
  lagP50Ms: number;
  lagP99Ms: number;
  inFlight: number;
  loopDelayP99Ms?: number;
}

interface Burst {
  label: string;
  expected: number;
  /** first arrival per incident × kind, ms after its incident opened */
  latencies: number[];
  byKind: Map<string, number[]>;
  openMs: number;
  /** burst start to the last first notification */
  allMs: number;
  delivered: number;
  duplicates: number;
  unknown: number;
  vigilCpuS: number;
  vigilNetCpuS: number;
  /** the uncertainty of vigilNetCpuS: probing's CPU rate before and after differed by twice this over the burst */
  vigilNoiseS: number;
  receiversCpuS: number;
  postgresCpuS: number;
  durationMs: number;
  lagP99Ms: number;
  loopDelayP99Ms: number;
  windows: number;
  outbox: { channel: string; status: string; n: number; retried: number; errors: string | null }[];
}

/** CPU seconds of every `postgres` process of this host (the server's backends and workers). */
function postgresCpuSeconds(): number {
  let total = 0;
  for (const pid of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      if (comm !== "postgres") continue;
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      total += (Number(f[11]) + Number(f[12])) / 100;
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** A child process's first stdout line, as JSON (the simulators and receivers print where they listen). */
function firstLine<T>(child: ChildProcess, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    let buf = "";
    const onData = (d: Buffer) => {
      buf += d.toString();
      const i = buf.indexOf("\n");
      if (i < 0) return;
      child.stdout?.off("data", onData);
      try {
        resolve(JSON.parse(buf.slice(0, i)) as T);
      } catch (err) {
        reject(new Error(`${what}: ${(err as Error).message}: ${buf.slice(0, 200)}`));
      }
    };
    child.stdout?.on("data", onData);
    child.once("exit", (code) => reject(new Error(`${what} exited (${code}) before it listened`)));
  });
}

async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  const t = setTimeout(() => child.kill("SIGKILL"), 25_000);
  await exited;
  clearTimeout(t);
}

/**
 * `vigil bench notify` (issue #31's benchmark): `--incidents` incidents (1,000) open at once
 * across five channel types (Slack, Teams, Discord, PagerDuty, ntfy) on loopback receivers that
 * answer as the providers do; how long until every incident's first notification has reached
 * every channel, Vigil's CPU per notification, and the probe schedule's lag meanwhile.
 *
 * Vigil runs as the service does: `vigil serve --roles probe,jobs` (the process `serve --workers`
 * gives the probe and jobs roles), on a throwaway PostgreSQL database (series in PostgreSQL too),
 * WEBHOOK_ALLOW_HTTP_LOOPBACK=true, with its real job runner and intervals (`channel-delivery`
 * every second, `webhook-delivery` every 2 s). Its probe worker checks `--connections` workflow_a
 * connections (1,000) every `--interval` seconds (30) on simulated n8n hosts answering in 50 ms
 * (bench/lib/soak-sims.ts, a process of their own), so its "probe stats" lines give the schedule
 * lag before and during the burst. The receivers run in a process of their own
 * (bench/lib/notify-receivers.ts), so Vigil's CPU is its process's alone.
 *
 * The fleet: `--accounts` personal accounts (20), each with five channels (one per type) and its
 * share of the probed connections and of the incident connections. The incidents are opened by
 * this process through `openIncident`, one transaction each, all at once (a pool of 16
 * connections), on connections of their own that are not probed during the run (their next
 * check is a day away: a probe would otherwise resolve them and add recoveries), as the probe
 * worker opens an availability incident: the same function, title and detail. The clock of each
 * notification starts at its incident's `opened_at` (taken when its transaction starts).
 *
 * The baseline, in the same run, is the same burst as delivered before channels existed: the
 * channels are deleted, each account gets one signed webhook of /v1/webhooks, and another
 * `--incidents` incidents open at once on fresh connections (a connection's second failure alert
 * within ALERT_FAILURE_MAIL_INTERVAL_SECONDS would be deferred), delivered by `webhook-delivery`.
 *
 * Vigil's CPU per notification is its process's CPU over the burst minus probing's share: the
 * rate of a calm stretch of probing alone (`--calm-seconds`) before the bursts and after them,
 * averaged; half their difference is printed as the figure's noise. PostgreSQL's CPU is that of
 * every `postgres` process of the host (shared with anything else using the server), the same way.
 *
 * The receivers answer at once unless `--receiver-latency-ms` delays them (a provider's own time:
 * 100-300 ms for the real ones), and never rate-limit (the printed note says what real providers
 * allow per webhook). `--cpu-prof DIR` writes Vigil's V8 CPU profile there.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      incidents: { type: "string", default: "1000" },
      accounts: { type: "string", default: "20" },
      connections: { type: "string", default: "1000" },
      interval: { type: "string", default: "30" },
      hosts: { type: "string" },
      "latency-ms": { type: "string", default: "50" },
      "receiver-latency-ms": { type: "string", default: "0" },
      "warmup-seconds": { type: "string", default: "70" },
      "calm-seconds": { type: "string", default: "30" },
      "timeout-seconds": { type: "string", default: "600" },
      "skip-baseline": { type: "boolean", default: false },
      "cpu-prof": { type: "string" },
    },
  });
  const nInc = positiveInt("incidents", values.incidents);
  const nAcc = positiveInt("accounts", values.accounts);
  const nConn = positiveInt("connections", values.connections);
  const interval = positiveInt("interval", values.interval);
  const nHosts = positiveInt("hosts", values.hosts ?? String(Math.max(25, Math.ceil(nConn / 500))));
  const simLatency = Number(values["latency-ms"]);
  const receiverLatency = Number(values["receiver-latency-ms"]);
  if (!(simLatency >= 0) || !(receiverLatency >= 0))
    throw new Error("--latency-ms and --receiver-latency-ms must be numbers of milliseconds");
  const warmupMs = positiveInt("warmup-seconds", values["warmup-seconds"]) * SECOND;
  const calmMs = positiveInt("calm-seconds", values["calm-seconds"]) * SECOND;
  const timeoutMs = positiveInt("timeout-seconds", values["timeout-seconds"]) * SECOND;
  if (timeoutMs > 1800 * SECOND) throw new Error("--timeout-seconds: at most 1800 (a run stays bounded)");
  const withBaseline = !values["skip-baseline"];
  const cpuProfDir = values["cpu-prof"] ? path.resolve(values["cpu-prof"]) : undefined;
  const say = (s: string) => process.stderr.write(`${s}\n`);

  const secret = config.secret ?? "bench-notify-secret-bench-notify-secret!";
  const log = createLogger("warn");
  const children: ChildProcess[] = [];
  const cleanups: (() => Promise<unknown>)[] = [];
  const started = Date.now();
  try {
    const scratch = await throwawayDatabase(config, "notify");
    cleanups.push(scratch.drop);
    const db = createPgStore({ connectionString: scratch.url, max: OPEN_CONCURRENCY });
    cleanups.unshift(() => db.close());
    await migrate(db);
    const benchConfig: Config = {
      ...config,
      databaseUrl: scratch.url,
      questdb: undefined,
      logLevel: "warn",
      secret,
      webhooks: { ...config.webhooks, allowHttpLoopback: true },
    };
    const stores = StoreSupervisor.ready({ db, series: createSqlSeriesStore(db) }, log, benchConfig);
    const ctx = createContext(benchConfig, log, stores);
    cleanups.unshift(() => closeContext(ctx));

    // --- the simulated platforms and the receivers, each a process of its own ---------------------
    const sims = spawn(
      process.execPath,
      [
        path.join(path.dirname(fileURLToPath(import.meta.url)), "lib/soak-sims.js"),
        JSON.stringify({
          workflowA: nHosts,
          latencyMs: simLatency,
          runEveryMs: 5_000,
          apiKey: "bench-key",
          apiToken: "bench-token",
        }),
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    children.push(sims);
    const receivers = spawn(
      process.execPath,
      [
        path.join(path.dirname(fileURLToPath(import.meta.url)), "lib/notify-receivers.js"),
        JSON.stringify({ latencyMs: receiverLatency }),
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    children.push(receivers);
    const [{ workflowA: origins }, { ports }] = await Promise.all([
      firstLine<{ workflowA: string[] }>(sims, "the simulators"),
      firstLine<{ ports: Record<ReceiverKind | "control", number> }>(receivers, "the receivers"),
    ]);
    let receiptsSeen = 0;
    let receiversCpu = 0;
    const receipts: Receipt[] = [];
    const pollReceipts = async () => {
      const r = await request(`http://127.0.0.1:${ports.control}/receipts?from=${receiptsSeen}`);
      const j = (await r.body.json()) as { total: number; cpuSeconds: number; receipts: Receipt[] };
      receipts.push(...j.receipts);
      receiptsSeen += j.receipts.length;
      receiversCpu = j.cpuSeconds;
    };

    // --- seeding: accounts, channels, probed connections, incident connections --------------------
    say(
      `seeding: ${nAcc} accounts, ${fmt(nConn)} probed workflow_a connections (${interval} s) on ${nHosts} simulated hosts, ` +
        `${fmt(nInc * (withBaseline ? 2 : 1))} connections for the incidents`,
    );
    const users: { id: string; actor: UserActor }[] = [];
    for (let a = 0; a < nAcc; a++) {
      const u = await createUser(db, { email: `bench-notify-${a}@x.example`, plan: "enterprise" });
      users.push({
        id: u.id,
        actor: { type: "user", userId: u.id, via: "session", permissions: new Set(PERMISSIONS) },
      });
    }
    const userIds = users.map((u) => u.id);
    const enc = new CredentialBox({ current: secret, previous: [] }).encrypt("bench-key");
    await db.query(
      `INSERT INTO connections (id, user_id, service_type, service_name, status, base_url, api_key_enc, api_key_length,
                                check_interval_seconds, next_check_at)
       SELECT gen_random_uuid()::text, ($1::text[])[1 + g % array_length($1::text[], 1)], 'workflow_a', 'probed-' || g, 'active',
              ($2::text[])[1 + g % array_length($2::text[], 1)], $3, 9, $4::int,
              now() + random() * make_interval(secs => $4::int)
         FROM generate_series(0, $5 - 1) g`,
      [userIds, origins, enc, interval, nConn],
    );
    const incidentConnections = async (phase: string) =>
      (
        await db.query<{ id: string; user_id: string; service_name: string; a: number }>(
          `INSERT INTO connections (id, user_id, service_type, service_name, status, base_url, api_key_enc, api_key_length,
                                    check_interval_seconds, next_check_at)
           SELECT gen_random_uuid()::text, ($1::text[])[1 + g % array_length($1::text[], 1)], 'workflow_a',
                  $2::text || '-' || g, 'active', $3, $4, 9, $5::int, now() + interval '1 day'
             FROM generate_series(0, $6 - 1) g
           RETURNING id, user_id, service_name`,
          [userIds, phase, origins[0], enc, interval, nInc],
        )
      ).rows;
    const setChannels = await incidentConnections("n8n-prod");
    const setBaseline = withBaseline ? await incidentConnections("n8n-prod-b") : [];
    const channelIds: { user: number; id: string }[] = [];
    for (const [a, u] of users.entries())
      for (const c of channelSettings(ports, a)) {
        const ch = await createChannel(ctx, u.actor, {
          type: c.type,
          name: `${c.type} #alerts`,
          settings: c.settings,
        });
        channelIds.push({ user: a, id: ch.id });
      }

    // --- Vigil ------------------------------------------------------------------------------------
    if (cpuProfDir) fs.mkdirSync(cpuProfDir, { recursive: true });
    say("vigil serve --roles probe,jobs (PostgreSQL, WEBHOOK_ALLOW_HTTP_LOOPBACK=true)");
    const vigil = spawn(
      process.execPath,
      [
        ...SERVER_NODE_FLAGS,
        ...(cpuProfDir ? ["--cpu-prof", "--cpu-prof-dir", cpuProfDir] : []),
        CLI_PATH,
        "serve",
        "--roles",
        "probe,jobs",
      ],
      {
        env: {
          PATH: process.env.PATH ?? "",
          DATABASE_URL: scratch.url,
          VIGIL_SECRET: secret,
          WEBHOOK_ALLOW_HTTP_LOOPBACK: "true",
          LOG_LEVEL: "info",
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    children.unshift(vigil);
    const stats: Stats[] = [];
    const warnings = new Map<string, number>();
    let buf = "";
    vigil.stdout.on("data", (d: Buffer) => {
      buf += d.toString();
      let i = buf.indexOf("\n");
      while (i >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        i = buf.indexOf("\n");
        if (!line.startsWith("{")) continue;
        try {
          const j = JSON.parse(line) as { level: number; msg: string } & Stats;
          if (j.msg === "probe stats") stats.push({ ...j, at: Date.now() });
          else if (j.level >= 40) warnings.set(j.msg, (warnings.get(j.msg) ?? 0) + 1);
        } catch {
          // not a log line
        }
      }
    });
    let vigilErr = "";
    vigil.stderr.on("data", (d: Buffer) => {
      vigilErr = (vigilErr + d.toString()).slice(-2000);
    });
    const vigilCpu = () => processCpuSeconds(vigil.pid);
    const lastStats = () => stats.at(-1);
    const statsLine = () => {
      const s = lastStats();
      return s ? `lag p99 ${fmt(s.lagP99Ms)} ms, ${fmt(s.checks)} checks/10 s` : "no probe stats yet";
    };

    say(
      `warm-up ${warmupMs / SECOND} s (every connection's first check and execution pull fall in the first interval)`,
    );
    for (let t = 0; t < warmupMs; t += 10 * SECOND) {
      await sleep(Math.min(10 * SECOND, warmupMs - t));
      if (vigil.exitCode !== null) throw new Error(`vigil serve exited (${vigil.exitCode}): ${vigilErr}`);
      say(`  ${Math.round((t + Math.min(10 * SECOND, warmupMs - t)) / SECOND)} s: ${statsLine()}`);
    }
    /** Probing alone for `calm-seconds`: Vigil's and PostgreSQL's CPU rates and the schedule lag. */
    const calm = async (what: string) => {
      const start = Date.now();
      const cpu0 = vigilCpu();
      const pg0 = postgresCpuSeconds();
      say(`calm ${what}: ${calmMs / SECOND} s of probing alone (the lag and CPU baseline)`);
      await sleep(calmMs);
      const end = Date.now();
      const windows = stats.filter((s) => s.at >= start + STATS_EVERY_MS && s.at <= end);
      const c = {
        rate: (vigilCpu() - cpu0) / ((end - start) / SECOND),
        pgRate: (postgresCpuSeconds() - pg0) / ((end - start) / SECOND),
        lag: Math.max(0, ...windows.map((s) => s.lagP99Ms)),
        loop: Math.max(0, ...windows.map((s) => s.loopDelayP99Ms ?? 0)),
        windows: windows.length,
      };
      say(`  Vigil ${fmt(c.rate * 100, 1)} % of a core, lag p99 ${fmt(c.lag)} ms (${c.windows} windows)`);
      return c;
    };
    const calmBefore = await calm("before");
    const calmLag = calmBefore.lag;
    const calmLoop = calmBefore.loop;

    const burst = async (
      label: string,
      conns: { id: string; user_id: string; service_name: string }[],
      kinds: readonly string[],
    ): Promise<Burst> => {
      const expected = conns.length * kinds.length;
      const kindSet = new Set(kinds);
      await pollReceipts();
      const from = receipts.length;
      const cpu0 = vigilCpu();
      const pg0 = postgresCpuSeconds();
      const rc0 = receiversCpu;
      say(
        `${label}: opening ${fmt(conns.length)} incidents at once (parallel transactions through openIncident)`,
      );
      const t0 = Date.now();
      const openedAt = new Map<string, number>();
      // as many transactions at once as the pool has connections (queued on the pool itself, the
      // last would wait longer than its connection timeout)
      const limit = pLimit(OPEN_CONCURRENCY);
      const opening = Promise.all(
        conns.map((c) =>
          limit(() =>
            db.transaction(async (tx) => {
              const at = new Date();
              const id = await openIncident(
                tx,
                {
                  connectionId: c.id,
                  connectionName: c.service_name,
                  userId: c.user_id,
                  organizationId: null,
                },
                {
                  kind: "availability",
                  title: `${c.service_name} is unavailable`,
                  detail: { failures: 2, reason: "http_error", error: "HTTP 502 Bad Gateway" },
                  at,
                  publicUrl: benchConfig.publicUrl,
                  failureMailIntervalSeconds: benchConfig.alerts.failureMailIntervalSeconds,
                },
              );
              if (!id) throw new Error(`no incident opened for ${c.service_name}`);
              openedAt.set(id, at.getTime());
            }),
          ),
        ),
      ).then(() => Date.now() - t0);
      const firsts = new Map<string, number>();
      let duplicates = 0;
      let unknown = 0;
      let openMs = NaN;
      let openFailed = false;
      void opening.then(
        (ms) => {
          openMs = ms;
          say(`  all ${fmt(conns.length)} incidents opened (committed) in ${secs(ms)}`);
        },
        () => void (openFailed = true),
      );
      let lastSay = t0;
      const deadline = t0 + timeoutMs;
      let lastAt = t0;
      let cursor = from;
      for (;;) {
        await sleep(250);
        await pollReceipts();
        // an incident's id is known before its transaction commits, so before any of its alerts can arrive
        for (; cursor < receipts.length; cursor++) {
          const [at, kind, , incident] = receipts[cursor] as Receipt;
          if (!kindSet.has(kind)) continue;
          if (!incident || !openedAt.has(incident)) {
            unknown++;
            continue;
          }
          const key = `${incident}|${kind}`;
          if (firsts.has(key)) duplicates++;
          else {
            firsts.set(key, at);
            lastAt = Math.max(lastAt, at);
          }
        }
        const now = Date.now();
        if (firsts.size >= expected || now > deadline || openFailed) break;
        if (now - lastSay >= 5 * SECOND) {
          lastSay = now;
          const byKind = kinds.map(
            (k) => `${k} ${[...firsts.keys()].filter((x) => x.endsWith(`|${k}`)).length}`,
          );
          say(
            `  ${Math.round((now - t0) / SECOND)} s: ${fmt(firsts.size)}/${fmt(expected)} first notifications (${byKind.join(", ")}); ` +
              `Vigil ${fmt(vigilCpu() - cpu0, 1)} CPU s; ${statsLine()}`,
          );
        }
      }
      await opening;
      await sleep(1000); // the last marks settle
      const doneAt = Date.now();
      const cpuS = vigilCpu() - cpu0;
      const pgS = postgresCpuSeconds() - pg0;
      const durationMs = doneAt - t0;
      say(`  waiting for the probe worker's next stats line (lag during the burst)`);
      const statsBefore = stats.length;
      for (let i = 0; i < 24 && stats.length === statsBefore; i++) await sleep(500);
      const windows = stats.filter((s) => s.at > t0 && s.at <= doneAt + STATS_EVERY_MS);
      const latencies: number[] = [];
      const byKind = new Map<string, number[]>();
      for (const [key, at] of firsts) {
        const [incident, kind] = key.split("|") as [string, string];
        const ms = at - (openedAt.get(incident) ?? NaN);
        latencies.push(ms);
        const l = byKind.get(kind) ?? [];
        l.push(ms);
        byKind.set(kind, l);
      }
      latencies.sort((a, b) => a - b);
      for (const l of byKind.values()) l.sort((a, b) => a - b);
      const outbox = (
        await db.query<{
          channel: string;
          status: string;
          n: number;
          retried: number;
          errors: string | null;
        }>(
          `SELECT channel, status, count(*)::int AS n, count(*) FILTER (WHERE attempts > 1)::int AS retried,
                  string_agg(DISTINCT last_error, '; ') AS errors
             FROM notifications WHERE incident_id = ANY($1::text[]) GROUP BY channel, status ORDER BY channel, status`,
          [[...openedAt.keys()]],
        )
      ).rows;
      await pollReceipts();
      return {
        label,
        expected,
        latencies,
        byKind,
        openMs,
        allMs: lastAt - t0,
        delivered: firsts.size,
        duplicates,
        unknown,
        vigilCpuS: cpuS,
        vigilNetCpuS: NaN,
        vigilNoiseS: NaN,
        receiversCpuS: receiversCpu - rc0,
        postgresCpuS: pgS,
        durationMs,
        lagP99Ms: Math.max(0, ...windows.map((s) => s.lagP99Ms)),
        loopDelayP99Ms: Math.max(0, ...windows.map((s) => s.loopDelayP99Ms ?? 0)),
        windows: windows.length,
        outbox,
      };
    };
    const main = await burst(`channels (${TYPES.join(", ")})`, setChannels, TYPES);
    let base: Burst | undefined;
    if (withBaseline) {
      say(
        "baseline: as before channels existed: the channels deleted, one signed webhook of /v1/webhooks per account",
      );
      for (const c of channelIds) await deleteChannel(ctx, users[c.user]?.actor as UserActor, c.id);
      const hooks: { user: number; id: string }[] = [];
      for (const [a, u] of users.entries()) {
        const w = await createWebhook(ctx, u.actor, { url: `http://127.0.0.1:${ports.webhook}/hook/${a}` });
        hooks.push({ user: a, id: w.id });
      }
      await sleep(5 * SECOND);
      base = await burst("baseline (webhooks of /v1/webhooks)", setBaseline, ["webhook"]);
      for (const h of hooks) await deleteWebhook(ctx, users[h.user]?.actor as UserActor, h.id);
    }

    // probing's own CPU drifts (execution syncs, the host's other work): the calm rate again, after
    // the bursts; the burst's share is its CPU minus the mean rate, ± half their difference
    const calmAfter = await calm("after");
    const calmRate = (calmBefore.rate + calmAfter.rate) / 2;
    const calmPgRate = (calmBefore.pgRate + calmAfter.pgRate) / 2;
    const calmSpread = Math.abs(calmBefore.rate - calmAfter.rate) / 2;
    for (const x of [main, base]) {
      if (!x) continue;
      x.vigilNetCpuS = x.vigilCpuS - calmRate * (x.durationMs / SECOND);
      x.vigilNoiseS = calmSpread * (x.durationMs / SECOND);
      x.postgresCpuS -= calmPgRate * (x.durationMs / SECOND);
    }
    const rssPeakMb =
      Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${vigil.pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
    await stop(vigil);

    // --- report ---------------------------------------------------------------------------------
    const perChannel = Math.ceil(nInc / nAcc);
    const load = os.loadavg();
    console.log(
      `\nnotify: ${fmt(nInc)} incidents at once, ${nAcc} accounts × ${TYPES.length} channels (${TYPES.join(", ")}), ` +
        `~${perChannel} alerts per channel; loopback receivers answering as the providers do` +
        `${receiverLatency ? ` after ${receiverLatency} ms` : " at once"}; Vigil = \`serve --roles probe,jobs\` on PostgreSQL, ` +
        `probing ${fmt(nConn)} workflow_a connections every ${interval} s on ${nHosts} simulated hosts (${simLatency} ms); ` +
        `${new Date().toISOString()}, ${os.availableParallelism()} cores, load average ${load.map((x) => x.toFixed(2)).join(" ")}\n`,
    );
    const row = (b: Burst) => {
      const n = Math.max(1, b.delivered);
      return {
        p50: percentile(b.latencies, 50),
        p95: percentile(b.latencies, 95),
        p99: percentile(b.latencies, 99),
        max: b.latencies.at(-1) ?? NaN,
        cpuUs: (b.vigilNetCpuS / n) * 1e6,
        noiseUs: (b.vigilNoiseS / n) * 1e6,
        grossUs: (b.vigilCpuS / n) * 1e6,
        pgUs: (b.postgresCpuS / n) * 1e6,
        rate: b.delivered / Math.max(0.001, b.allMs / SECOND),
      };
    };
    /** The net figure ± its noise; one the noise swamps is only bounded. */
    const cpuText = (r: { cpuUs: number; noiseUs: number; grossUs: number }) =>
      r.cpuUs > r.noiseUs
        ? `${fmt(r.cpuUs)} ± ${fmt(r.noiseUs)} µs`
        : `≤ ${fmt(Math.max(0, r.cpuUs) + r.noiseUs)} µs (within probing's noise)`;
    const m = row(main);
    const b = base ? row(base) : undefined;
    const rows: (string | number)[][] = [
      [
        "first notifications delivered",
        `${fmt(main.delivered)} / ${fmt(main.expected)}`,
        b ? `${fmt(base?.delivered ?? 0)} / ${fmt(base?.expected ?? 0)}` : "",
        "all",
      ],
      ["opening the incidents (all committed)", secs(main.openMs), b ? secs(base?.openMs ?? NaN) : "", ""],
      ["opening to first notification p50", secs(m.p50), b ? secs(b.p50) : "", ""],
      ["opening to first notification p95", secs(m.p95), b ? secs(b.p95) : "", ""],
      ["opening to first notification p99", secs(m.p99), b ? secs(b.p99) : "", "< 30 s"],
      ["opening to first notification max", secs(m.max), b ? secs(b.max) : "", ""],
      ["burst start to the last first notification", secs(main.allMs), b ? secs(base?.allMs ?? NaN) : "", ""],
      ["notifications/s over the burst", fmt(m.rate), b ? fmt(b.rate) : "", ""],
      ...TYPES.map((k) => {
        const l = main.byKind.get(k) ?? [];
        return [`  ${k}: p50 / p99`, `${secs(percentile(l, 50))} / ${secs(percentile(l, 99))}`, "", ""];
      }),
      [
        "Vigil CPU per notification (burst minus probing at the calm rate)",
        cpuText(m),
        b ? cpuText(b) : "",
        "",
      ],
      [
        "Vigil CPU per notification, gross (probing included)",
        `${fmt(m.grossUs)} µs`,
        b ? `${fmt(b.grossUs)} µs` : "",
        "",
      ],
      [
        "PostgreSQL CPU per notification (all postgres processes, minus calm)",
        `${fmt(m.pgUs)} µs`,
        b ? `${fmt(b.pgUs)} µs` : "",
        "",
      ],
      [
        "receivers' CPU per notification (their own process)",
        `${fmt((main.receiversCpuS / Math.max(1, main.delivered)) * 1e6)} µs`,
        b ? `${fmt(((base?.receiversCpuS ?? 0) / Math.max(1, base?.delivered ?? 1)) * 1e6)} µs` : "",
        "",
      ],
      ["probe schedule lag p99, calm (before the burst, worst 10 s window)", `${fmt(calmLag)} ms`, "", ""],
      [
        "probe schedule lag p99 during the burst (worst 10 s window)",
        `${fmt(main.lagP99Ms)} ms (${main.windows} windows)`,
        b ? `${fmt(base?.lagP99Ms ?? NaN)} ms (${base?.windows} windows)` : "",
        "< 1000 ms",
      ],
      [
        "Vigil event loop delay p99, calm / burst",
        `${fmt(calmLoop)} / ${fmt(main.loopDelayP99Ms)} ms`,
        b ? `${fmt(base?.loopDelayP99Ms ?? NaN)} ms` : "",
        "",
      ],
      [
        "Vigil CPU while calm (probing alone), before / after the bursts",
        `${fmt(calmBefore.rate * 100, 1)} / ${fmt(calmAfter.rate * 100, 1)} % of a core`,
        "",
        "",
      ],
      ["Vigil peak RSS", `${fmt(rssPeakMb)} MB`, "", ""],
      [
        "duplicates / unattributed requests",
        `${main.duplicates} / ${main.unknown}`,
        b ? `${base?.duplicates} / ${base?.unknown}` : "",
        "0",
      ],
    ];
    console.log(table(["figure", "channels", b ? "baseline: webhooks" : "", "target"], rows));
    console.log("\noutbox rows of the burst's incidents (channel, status, rows, retried, errors):");
    for (const x of [...main.outbox, ...(base?.outbox ?? [])])
      console.log(
        `  ${x.channel} ${x.status} ${x.n}${x.retried ? `, ${x.retried} retried` : ""}${x.errors ? `: ${x.errors.slice(0, 200)}` : ""}`,
      );
    if (warnings.size > 0) {
      console.log("Vigil warnings:");
      for (const [msg, n] of warnings) console.log(`  ${n} × ${msg}`);
    }
    const p99Met = m.p99 < TARGET_P99_MS && main.delivered === main.expected;
    const lagMet = main.lagP99Ms < TARGET_LAG_MS && main.windows > 0;
    console.log(
      `\np99 ${secs(m.p99)}: ${p99Met ? "PASS" : "FAIL"} (< 30 s, every notification delivered); ` +
        `probe lag p99 during the burst ${fmt(main.lagP99Ms)} ms: ${lagMet ? "PASS" : "FAIL"} (< 1 s; calm ${fmt(calmLag)} ms)` +
        (b
          ? `; baseline (signed webhooks, ${fmt(nInc)} notifications, one per incident): p99 ${secs(b.p99)}, all in ${secs(base?.allMs ?? NaN)}; ` +
            `p99 baseline/channels ${fmt(b.p99 / m.p99, 2)}, notifications/s channels/baseline ${fmt(m.rate / b.rate, 2)}`
          : ""),
    );
    console.log(
      `Incidents opened through openIncident by the benchmark (${fmt(nInc)} parallel transactions, a pool of 16), ` +
        "not by probes failing: their CPU is the benchmark's, not Vigil's. The receivers never rate-limit: a real Slack " +
        `incoming webhook accepts about 1 message/s (short bursts allowed, then 429 Retry-After), so its ~${perChannel} ` +
        `alerts of this burst would take ~${perChannel} s at Slack whatever Vigil does; Discord allows ~5 per 2 s per webhook.`,
    );
    const given = [
      ["incidents", nInc, 1000],
      ["accounts", nAcc, 20],
      ["connections", nConn, 1000],
      ["interval", interval, 30],
      ["receiver-latency-ms", receiverLatency, 0],
    ] as const;
    const cmd = `\`npm run bench -- notify${given
      .filter(([, v, d]) => v !== d)
      .map(([k, v]) => ` --${k} ${v}`)
      .join("")}\``;
    console.log(
      `\nREADME row:\n| notifications, ${fmt(nInc)} incidents at once | ${cmd} | ${fmt(nInc * TYPES.length)} first notifications ` +
        `on ${TYPES.length} channel types: p99 ${secs(m.p99)}, all in ${secs(main.allMs)}; Vigil ${cpuText(m)} of CPU per ` +
        `notification; probe lag p99 ${fmt(main.lagP99Ms)} ms meanwhile |`,
    );
    if (b)
      console.log(
        `\ndocs/benchmarks.md row:\n| notify | ${cmd} | ${fmt(nInc)} incidents opened at once, ${nAcc} accounts × ${TYPES.length} channels ` +
          `(${TYPES.join(", ")}) on loopback receivers, ${fmt(nConn)} connections probed meanwhile: first notification p50/p99 ` +
          `${secs(m.p50)}/${secs(m.p99)}, all ${fmt(main.delivered)} in ${secs(main.allMs)}; Vigil ${cpuText(m)} CPU per ` +
          `notification; probe lag p99 ${fmt(main.lagP99Ms)} ms (calm ${fmt(calmLag)} ms) | signed webhooks of /v1/webhooks ` +
          `(one per account, \`webhook-delivery\`): p99 ${secs(b.p99)}, all ${fmt(base?.delivered ?? 0)} in ${secs(base?.allMs ?? NaN)}; ` +
          `${cpuText(b)} of Vigil CPU per notification | ${fmt(b.p99 / m.p99, 2)} (p99) | p99 < 30 s (${p99Met ? "met" : "**not met**"}), ` +
          `lag p99 < 1 s (${lagMet ? "met" : "**not met**"}) |`,
      );
    say(`(run took ${fmt((Date.now() - started) / 1000)} s; this process ${fmt(ownCpuSeconds(), 1)} CPU s)`);
  } finally {
    for (const c of children) await stop(c).catch(() => undefined);
    for (const c of cleanups) await c().catch((e: unknown) => say(`cleanup: ${(e as Error).message}`));
  }
}
