import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import Fastify from "fastify";
import { request } from "undici";
import type { Config } from "../src/config.js";
import { createKey, createUser } from "../src/identity/accounts.js";
import { CredentialBox } from "../src/lib/credentials.js";
import { SERVER_NODE_FLAGS } from "../src/lib/node-flags.js";
import { startWorkflowA } from "../src/sim/workflow-a.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import { CLI_PATH } from "./lib/cli.js";
import { processCpuSeconds } from "./lib/cpu.js";
import { cuttableProxy } from "./lib/cut-proxy.js";
import { type CountedLoad, countedLoad } from "./lib/header-load.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { counterSum, histogramDelta, histogramOf, histogramQuantile } from "./lib/prom-text.js";
import { freePorts } from "./lib/questdb.js";
import { fmt, table } from "./lib/report.js";

const DAY = 86_400_000;
const MINUTE = 60_000;
const LAG = "vigil_probe_schedule_lag_seconds";
const CHECKS = "vigil_probe_checks_total";
const SECRET = "bench-status-secret-bench-status-secret!";
const SIM_KEY = "bench-key";
/** Targets of issue #34, point 4. */
const TARGET = { pagePerCore: 5_000, badgePerCore: 10_000, p99Ms: 50, lagS: 1 };

/**
 * `vigil bench status-page` (issue #34, point 4): a public status page under load, from its cache.
 *
 * Set-up: a throwaway PostgreSQL database (DATABASE_URL's server, else the local one) holding one
 * enterprise user with `--probes` workflow_a connections checked every 30 s against `--hosts`
 * simulated hosts in this process (`--latency-ms` answers, as bench/probes.ts), and, for the first
 * `--components` of them, `--days` − 1 days of daily rollups plus today's raw samples (a sample a
 * minute since midnight UTC; the sql series store). One `vigil serve` process with every role (api,
 * probe, jobs; LOG_LEVEL=warn, METRICS_PORT for its own metrics) reaches PostgreSQL through a TCP
 * proxy in this process (bench/lib/cut-proxy.ts), so the store can be taken away under it. The page
 * is created through the REST API (`POST /v1/status-pages`: the components in groups of 5,
 * response times shown) with one public incident post and an update.
 *
 * After `--settle` s (every connection's first check, which also makes its first execution sync,
 * is start-up, not measured) and an idle window of `--idle` s (what probes and jobs cost alone),
 * phases of `--seconds` s with `--connections` keep-alive connections of autocannon in a process
 * of its own (bench/lib/header-load.ts), the first round of each after `--warmup` s not measured:
 * the page's HTML (`Accept-Encoding: gzip`, as a browser), its summary.json and one component's
 * SVG status badge. For each: requests/s, p50/p99, non-2xx and errors, and Vigil's CPU from /proc
 * over the phase (requests per CPU-second of the server process: "requests/s per core"; Vigil's
 * probes and jobs included, and net of the idle window's share), with the probes' schedule lag p99
 * over the phase from Vigil's `vigil_probe_schedule_lag_seconds` histogram (its bucket bound, and
 * the linear estimate inside it). Baseline in the same run: a bare Fastify route in a process of
 * its own (this file run as a script) answering from a buffer the very bytes and headers Vigil
 * sent for that URL, right after Vigil's phase of the same URL. `--rounds` rounds of the six
 * phases: the host's speed moves with the other work on it, so each figure is its best round and
 * each ratio the median of the rounds' own.
 *
 * Store down: the proxy resets every connection to PostgreSQL and stops listening, and the page
 * load runs again at once for `--down-seconds`: 200s marked `x-vigil-stale: true`, 200s not (yet)
 * marked (the cache notices at its next check, within 5 s), anything else (target: none) and p99,
 * and whether Vigil kept running (if not, the error it died of, from its log); then the proxy
 * listens again and the time until the page is no longer marked stale is printed.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      seconds: { type: "string", default: "5" },
      rounds: { type: "string", default: "2" },
      "down-seconds": { type: "string", default: "10" },
      warmup: { type: "string", default: "2" },
      idle: { type: "string", default: "5" },
      settle: { type: "string", default: "30" },
      connections: { type: "string", default: "50" },
      probes: { type: "string", default: "1000" },
      components: { type: "string", default: "20" },
      days: { type: "string", default: "90" },
      hosts: { type: "string", default: "5" },
      "latency-ms": { type: "string", default: "50" },
      "accept-encoding": { type: "string", default: "gzip" },
      // niceness of the load generator's process (0: as this one)
      nice: { type: "string", default: "0" },
      // extra node flags for the Vigil process, space-separated (e.g. "--cpu-prof --cpu-prof-dir=/tmp/p")
      "node-flags": { type: "string", default: "" },
    },
  });
  const seconds = positiveInt("seconds", values.seconds);
  const nRounds = positiveInt("rounds", values.rounds);
  const downSeconds = positiveInt("down-seconds", values["down-seconds"]);
  const warmup = positiveInt("warmup", values.warmup);
  const idle = positiveInt("idle", values.idle);
  const settle = positiveInt("settle", values.settle);
  const connections = positiveInt("connections", values.connections);
  const nProbes = positiveInt("probes", values.probes);
  const nComponents = positiveInt("components", values.components);
  const days = positiveInt("days", values.days);
  const nHosts = positiveInt("hosts", values.hosts);
  const latencyMs = Number(values["latency-ms"]);
  const nice = Number(values.nice);
  if (!Number.isFinite(latencyMs) || latencyMs < 0)
    throw new Error(`--latency-ms must be a number of milliseconds, got ${values["latency-ms"]}`);
  if (!Number.isInteger(nice) || nice < 0 || nice > 19)
    throw new Error(`--nice must be a whole number from 0 to 19, got ${values.nice}`);
  if (nComponents > nProbes) throw new Error("--components must be at most --probes");
  if (nComponents > 100) throw new Error("--components must be at most 100 (a page's limit)");
  const acceptEncoding = values["accept-encoding"];
  const nodeFlags = (values["node-flags"] ?? "").split(/\s+/).filter(Boolean);
  const say = (s: string) => process.stderr.write(`${s}\n`);
  if (config.questdb)
    say("note: QUESTDB_URL is set, but this benchmark runs Vigil on PostgreSQL alone (the sql series store)");

  const work = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-bench-status-"));
  const cleanups: (() => Promise<unknown>)[] = [];
  const cleanup = async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn().catch((e: unknown) => say(String(e)));
  };
  try {
    // ---- the stores and the monitored platforms -------------------------------------------------
    const scratch = await throwawayDatabase(config, "status");
    cleanups.push(() => scratch.drop());
    const db = createPgStore({ connectionString: scratch.url });
    cleanups.push(() => db.close());
    await migrate(db);
    const sims = await Promise.all(
      Array.from({ length: nHosts }, () => startWorkflowA({ latencyMs, apiKey: SIM_KEY })),
    );
    cleanups.push(() => Promise.all(sims.map((s) => s.close())));
    const user = await createUser(db, { email: `bench-status-${Date.now()}@x.example`, plan: "enterprise" });
    await db.query("UPDATE users SET rate_limit_per_hour = 1000000000 WHERE id = $1", [user.id]);
    const { key } = await createKey(db, {
      user: user.id,
      permissions: ["connections:read", "connections:write"],
    });

    say(
      `seeding ${fmt(nProbes)} workflow_a connections (30 s) on ${nHosts} simulated hosts, ${days} days of uptime for ${nComponents}`,
    );
    const t0 = Date.now();
    const enc = new CredentialBox({ current: SECRET, previous: [] }).encrypt(SIM_KEY);
    // parked an hour ahead until Vigil listens, then spread over one interval (below)
    await db.query(
      `INSERT INTO connections (id, user_id, service_type, service_name, status, base_url, api_key_enc, api_key_length,
                                check_interval_seconds, next_check_at)
       SELECT gen_random_uuid()::text, $1, 'workflow_a', 'bench-' || lpad(g::text, 5, '0'), 'active',
              ($2::text[])[1 + g % array_length($2::text[], 1)], $3, $4, 30, now() + interval '1 hour'
         FROM generate_series(1, $5) g`,
      [user.id, sims.map((s) => s.url), enc, SIM_KEY.length, nProbes],
    );
    const componentIds = (
      await db.query<{ id: string }>("SELECT id FROM connections ORDER BY service_name LIMIT $1", [
        nComponents,
      ])
    ).rows.map((r) => r.id);
    const today = Math.floor(Date.now() / DAY) * DAY;
    // daily rollups: most days whole, some at 99.x, a few bad (as a fleet looks)
    await db.query(
      `INSERT INTO availability_daily (ts, connection_id, checks, available, response_ms_sum, response_ms_count)
       SELECT to_timestamp($2::double precision / 1000) - make_interval(days => d), c, 2880,
              2880 - CASE WHEN random() < 0.9 THEN 0 WHEN random() < 0.8 THEN 5 ELSE 60 END,
              2880 * (40 + random() * 160), 2880
         FROM unnest($1::text[]) c, generate_series(1, $3 - 1) d`,
      [componentIds, today, days],
    );
    await db.query(
      "INSERT INTO rollup_state (id, rolled_through) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET rolled_through = $1",
      [new Date(today).toISOString()],
    );
    const minutes = Math.max(1, Math.floor((Date.now() - today) / MINUTE));
    await db.query(
      `INSERT INTO availability_samples (ts, connection_id, available, response_time_ms, status_code, synthetic, source)
       SELECT to_timestamp($2::double precision / 1000) + make_interval(mins => m), c,
              random() > 0.002, 40 + random() * 160, 200, false, 'probe'
         FROM unnest($1::text[]) c, generate_series(0, $3 - 1) m`,
      [componentIds, today, minutes],
    );
    await db.query("ANALYZE");
    say(`  done in ${fmt((Date.now() - t0) / 1000, 1)} s`);

    // ---- Vigil, on PostgreSQL through the proxy --------------------------------------------------
    const pgUrl = new URL(scratch.url);
    const proxy = await cuttableProxy(pgUrl.hostname, Number(pgUrl.port || 5432));
    cleanups.push(() => proxy.close());
    const viaProxy = new URL(scratch.url);
    viaProxy.hostname = "127.0.0.1";
    viaProxy.port = String(proxy.port);
    const [port, metricsPort] = (await freePorts(2)) as [number, number];
    const base = `http://127.0.0.1:${port}`;
    const logFile = path.join(work, "vigil.log");
    const vigil = startVigil(
      logFile,
      {
        DATABASE_URL: viaProxy.toString(),
        VIGIL_SECRET: SECRET,
        VIGIL_DATA_DIR: path.join(work, "data"),
        HOST: "127.0.0.1",
        PORT: String(port),
        PUBLIC_URL: base,
        METRICS_PORT: String(metricsPort),
        METRICS_HOST: "127.0.0.1",
        LOG_LEVEL: "warn",
      },
      nodeFlags,
    );
    cleanups.push(() => stop(vigil));
    await waitReady(base, vigil, logFile);
    const pid = vigil.pid;
    say(`vigil serve (every role) pid ${pid} at ${base}, PostgreSQL through the proxy on :${proxy.port}`);
    await db.query(
      "UPDATE connections SET next_check_at = now() + random() * interval '30 seconds', lease_owner = NULL, lease_until = NULL",
    );
    const rescheduledAt = Date.now();

    // ---- the page, through the REST API -----------------------------------------------------------
    const api = async (method: string, p: string, body: unknown) => {
      const r = await request(`${base}${p}`, {
        method: method as "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const json = (await r.body.json()) as Record<string, unknown>;
      if (r.statusCode >= 300) throw new Error(`${method} ${p}: ${r.statusCode} ${JSON.stringify(json)}`);
      return json;
    };
    const groups: { name: string; components: { connection_id: string; display_name: string }[] }[] = [];
    componentIds.forEach((id, i) => {
      if (i % 5 === 0) groups.push({ name: `Region ${groups.length + 1}`, components: [] });
      groups.at(-1)?.components.push({ connection_id: id, display_name: `Service ${i + 1}` });
    });
    const slug = `bench-${Date.now().toString(36)}`;
    const page = await api("POST", "/v1/status-pages", {
      slug,
      title: "Bench status",
      description: "What our customers see during an outage.",
      show_response_times: true,
      groups,
    });
    const pageId = String(page.id);
    const post = await api("POST", `/v1/status-pages/${pageId}/incidents`, {
      title: "Elevated error rates on Region 1",
      status: "investigating",
      message: "We are looking into failed runs on Region 1.",
    });
    await api("POST", `/v1/status-pages/${pageId}/incidents/${String(post.id)}/updates`, {
      status: "identified",
      message: "A bad deploy; rolling back.",
    });

    const pageHeaders = { accept: "text/html", "accept-encoding": acceptEncoding };
    const urls = {
      page: `${base}/status/${slug}`,
      summary: `${base}/status/${slug}/summary.json`,
      badge: "",
    };
    const summary = await getOnce(urls.summary, {});
    const firstBadge = (
      JSON.parse(summary.body.toString()) as { components: { badges: { status: string } }[] }
    ).components[0]?.badges.status;
    if (!firstBadge) throw new Error("summary.json lists no component badge");
    urls.badge = `${base}${new URL(firstBadge).pathname}`;
    const firstPage = await getOnce(urls.page, pageHeaders);
    const encoding = firstPage.headers["content-encoding"];
    const plain = await getOnce(urls.page, { accept: "text/html" });
    const badge = await getOnce(urls.badge, {});
    for (const [what, r] of [
      ["page", firstPage],
      ["summary.json", summary],
      ["badge", badge],
    ] as const)
      if (r.status !== 200) throw new Error(`${what}: ${r.status}`);
    say(
      `page /status/${slug}: ${fmt(plain.body.length / 1024, 1)} KB, ${fmt(firstPage.body.length / 1024, 1)} KB sent (${encoding ?? "identity"}); ` +
        `summary.json ${fmt(summary.body.length / 1024, 1)} KB; badge ${fmt(badge.body.length)} bytes`,
    );

    // ---- the bare route: the same bytes from a buffer ---------------------------------------------
    const bare = await startBare([
      { path: "/page", url: urls.page, headers: pageHeaders },
      { path: "/summary", url: urls.summary, headers: {} },
      { path: "/badge", url: urls.badge, headers: {} },
    ]);
    cleanups.push(() => stop(bare.proc));
    const bareBase = `http://127.0.0.1:${bare.port}`;

    // ---- idle: what probes and jobs cost on their own ----------------------------------------------
    const metrics = async () =>
      (await getOnce(`http://127.0.0.1:${metricsPort}/metrics`, {})).body.toString();
    // Every connection's first check (in the first interval after the reschedule) also makes its
    // first execution sync: a third of a core here for ~20 s, then under a tenth. The phases start after it.
    say(`settling: ${settle} s from the first checks (the start-up interval is not measured)`);
    while (Date.now() - rescheduledAt < settle * 1000) {
      await sleep(Math.min(5_000, Math.max(0, rescheduledAt + settle * 1000 - Date.now())));
      say(
        `  ${Math.round((Date.now() - rescheduledAt) / 1000)} s: ${fmt(counterSum(await metrics(), CHECKS))} checks`,
      );
    }
    say(`idle ${idle} s: probes and jobs alone`);
    const idleRead = await reading(pid, metrics);
    let idleAt = idleRead;
    for (let t = 0; t < idle; t += 5) {
      await sleep(Math.min(5, idle - t) * 1000);
      const now = await reading(pid, metrics);
      const s = (now.at - idleAt.at) / 1000;
      say(
        `  ${Math.round((now.at - idleRead.at) / 1000)} s: Vigil ${fmt(((now.cpu - idleAt.cpu) / s) * 100, 1)} % of a core, ` +
          `${fmt((counterSum(now.text, CHECKS) - counterSum(idleAt.text, CHECKS)) / s, 1)} checks/s`,
      );
      idleAt = now;
    }
    const idleEnd = idleAt;
    const idleCores = (idleEnd.cpu - idleRead.cpu) / ((idleEnd.at - idleRead.at) / 1000);
    const idleLag = lagOf(idleRead.text, idleEnd.text);
    const idleChecks = (counterSum(idleEnd.text, CHECKS) - counterSum(idleRead.text, CHECKS)) / idle;

    // ---- the phases --------------------------------------------------------------------------------
    const load = (url: string, headers: Record<string, string>, expectEncoding?: string, s = seconds) =>
      countedLoad(
        url,
        {
          connections,
          seconds: s,
          headers,
          count: { header: "x-vigil-stale", value: "true" },
          expectEncoding,
        },
        nice,
      );
    const phase = async (
      label: string,
      url: string,
      serverPid: number | undefined,
      headers: Record<string, string>,
      expectEncoding?: string,
      warm = true,
      duration = seconds,
    ): Promise<Phase> => {
      if (warm) {
        say(`${label}: warm-up ${warmup} s`);
        await load(url, headers, expectEncoding, warmup);
      }
      say(`${label}: ${duration} s, ${connections} connections`);
      const vigilSide = serverPid === pid;
      const before = await reading(serverPid, vigilSide ? metrics : undefined);
      const r = await load(url, headers, expectEncoding, duration);
      const after = await reading(serverPid, vigilSide ? metrics : undefined);
      const cpu = after.cpu - before.cpu;
      return {
        label,
        r,
        cpu,
        perCore: r.requests / cpu,
        perCoreNet: vigilSide
          ? r.requests / (cpu - idleCores * ((after.at - before.at) / 1000))
          : r.requests / cpu,
        cores: cpu / r.seconds,
        lag: vigilSide ? lagOf(before.text, after.text) : undefined,
        checksPerS: vigilSide
          ? (counterSum(after.text, CHECKS) - counterSum(before.text, CHECKS)) /
            ((after.at - before.at) / 1000)
          : undefined,
      };
    };
    const expectGzip = encoding === "gzip" || encoding === "br" ? encoding : undefined;
    const targets = [
      { name: "page", vigil: urls.page, bare: `${bareBase}/page`, headers: pageHeaders, enc: expectGzip },
      { name: "summary.json", vigil: urls.summary, bare: `${bareBase}/summary`, headers: {}, enc: undefined },
      { name: "badge", vigil: urls.badge, bare: `${bareBase}/badge`, headers: {}, enc: undefined },
    ];
    // Rounds alternate Vigil and the bare route per target: the host's speed moves (other work
    // shares its cores), so each ratio is taken within a round and each figure is its best round.
    const rounds = targets.map(() => [] as { v: Phase; b: Phase }[]);
    for (let round = 1; round <= nRounds; round++)
      for (const [i, t] of targets.entries()) {
        const of = nRounds > 1 ? `, round ${round}/${nRounds}` : "";
        const v = await phase(`${t.name} (Vigil${of})`, t.vigil, pid, t.headers, t.enc, round === 1);
        const b = await phase(
          `${t.name} (bare route${of})`,
          t.bare,
          bare.proc.pid,
          t.headers,
          t.enc,
          round === 1,
        );
        rounds[i]?.push({ v, b });
      }
    const best = (i: number, side: "v" | "b") =>
      (rounds[i] ?? []).map((r) => r[side]).reduce((a, p) => (p.perCore > a.perCore ? p : a));
    /** Vigil / bare route in requests per CPU-second, the median of the rounds' ratios. */
    const ratioOf = (i: number) => median((rounds[i] ?? []).map((r) => r.v.perCore / r.b.perCore));
    const [pageV, sumV, badgeV] = [0, 1, 2].map((i) => ({
      ...best(i, "v"),
      label: `${targets[i]?.name} (Vigil)`,
    }));
    const [pageB, sumB, badgeB] = [0, 1, 2].map((i) => ({
      ...best(i, "b"),
      label: `${targets[i]?.name} (bare route)`,
    }));
    if (!pageV || !sumV || !badgeV || !pageB || !sumB || !badgeB) throw new Error("no phase ran");

    // ---- the store goes down under the load --------------------------------------------------------
    say("store down: the proxy resets PostgreSQL's connections and stops listening; page load at once");
    await proxy.cut();
    const down = await phase(
      "page, store down (Vigil)",
      urls.page,
      pid,
      pageHeaders,
      expectGzip,
      false,
      downSeconds,
    );
    const stillUp = vigil.exitCode === null && vigil.signalCode === null;
    const exitedWith = stillUp ? "" : crashOf(logFile, vigil);
    await proxy.restore();
    const restoredAt = Date.now();
    let recoveredS = Number.NaN;
    while (stillUp && Date.now() - restoredAt < 60_000) {
      const r = await getOnce(urls.page, pageHeaders);
      if (r.status === 200 && r.headers["x-vigil-stale"] !== "true") {
        recoveredS = (Date.now() - restoredAt) / 1000;
        break;
      }
      await sleep(250);
    }

    // ---- report ------------------------------------------------------------------------------------
    const row = (p: Phase, bytes: number) => [
      p.label,
      fmt(p.r.rps),
      fmt(p.cores * 100, 1),
      fmt(p.perCore),
      p.lag ? fmt(p.perCoreNet) : "",
      fmt(p.r.p50, 1),
      fmt(p.r.p99, 1),
      fmt(errorsOf(p.r)),
      p.lag ? `${fmt(p.lag.estimate * 1000)} (≤ ${fmtBound(p.lag.upTo)})` : "",
      p.checksPerS === undefined ? "" : fmt(p.checksPerS, 1),
      fmt(bytes),
    ];
    const len = (r: { body: Buffer }) => r.body.length;
    console.log(
      `\nstatus-page: /status/${slug}, ${nComponents} components in ${groups.length} groups, ${days} days of uptime, one active post; ` +
        `vigil serve (every role) on PostgreSQL (sql series store), ${fmt(nProbes)} workflow_a connections probed every 30 s on ${nHosts} simulated hosts (${latencyMs} ms); ` +
        `autocannon, ${connections} keep-alive connections, ${seconds} s per phase (store down: ${downSeconds} s), ${nRounds} round${nRounds > 1 ? "s" : ""}, ${warmup} s of warm-up; ` +
        `${new Date().toISOString()}, ${os.cpus().length} cores, load average ${os
          .loadavg()
          .map((x) => x.toFixed(2))
          .join(" ")}\n`,
    );
    console.log(
      table(
        [
          "load",
          "req/s",
          "server CPU %",
          "req/s per core",
          "net of idle",
          "p50 ms",
          "p99 ms",
          "non-2xx + errors",
          "probe lag p99 ms",
          "checks/s",
          "bytes",
        ],
        [
          row(pageV, len(firstPage)),
          row(pageB, len(firstPage)),
          row(sumV, len(summary)),
          row(sumB, len(summary)),
          row(badgeV, len(badge)),
          row(badgeB, len(badge)),
          row(down, len(firstPage)),
        ],
      ),
    );
    console.log(
      `\nidle (probes and jobs alone, ${idle} s): Vigil ${fmt(idleCores * 100, 1)} % of a core, ${fmt(idleChecks, 1)} checks/s, ` +
        `probe lag p99 ${fmt(idleLag.estimate * 1000)} ms (≤ ${fmtBound(idleLag.upTo)}); page ${fmt(len(plain) / 1024, 1)} KB as rendered, ` +
        `${fmt(len(firstPage) / 1024, 1)} KB sent (${encoding ?? "identity"}, Accept-Encoding: ${acceptEncoding})`,
    );
    console.log(
      `rows: each figure's best of ${nRounds} round${nRounds > 1 ? "s" : ""} (req/s per core); every round, Vigil / bare route req/s per core:`,
    );
    targets.forEach((t, i) =>
      console.log(
        `  ${t.name}: ${(rounds[i] ?? []).map((r) => `${fmt(r.v.perCore)} / ${fmt(r.b.perCore)} = ${fmt(r.v.perCore / r.b.perCore, 2)}`).join("; ")}` +
          ` (ratio, median of the rounds: ${fmt(ratioOf(i), 2)})`,
      ),
    );
    if (expectGzip) {
      const pagePhases = [...(rounds[0] ?? []).flatMap((r) => [r.v, r.b]), down];
      const other = pagePhases.reduce((a, p) => a + (p.r.requests - p.r.encoded), 0);
      console.log(
        `page responses not ${expectGzip}-encoded: ${fmt(other)} of ${fmt(pagePhases.reduce((a, p) => a + p.r.requests, 0))}`,
      );
    }
    const marked = down.r.marked;
    const ok = down.r.statuses["200"] ?? 0;
    console.log(
      `store down: ${fmt(down.r.requests)} responses: ${fmt(marked)} 200 marked x-vigil-stale, ${fmt(ok - marked)} 200 not yet marked ` +
        `(served before the first failed refresh, at most 5 s), ${fmt(errorsOf(down.r))} non-200 or errors ` +
        `(${Object.entries(down.r.statuses)
          .map(([c, n]) => `${c}: ${fmt(n)}`)
          .join(", ")}${down.r.errors ? `, ${fmt(down.r.errors)} connection errors` : ""}); ` +
        (stillUp
          ? `Vigil kept running; fresh again ${Number.isNaN(recoveredS) ? "NOT within 60 s" : `${fmt(recoveredS, 1)} s`} after the store came back`
          : `Vigil EXITED during the phase: ${exitedWith}`),
    );

    // ---- verdicts ----------------------------------------------------------------------------------
    console.log("");
    const perCoreVerdict = (what: string, v: Phase, b: Phase, r: number, target: number) => {
      const met = v.perCore >= target;
      console.log(
        `${what}: ${fmt(v.perCore)} req/s per core of Vigil CPU (${fmt(v.r.rps)} req/s at ${fmt(v.cores * 100)} % of a core, ` +
          `its probes and jobs included; ${fmt(v.perCoreNet)} net of the idle share): ` +
          (met
            ? `met (>= ${fmt(target)})`
            : `NOT met (>= ${fmt(target)}): the bare Fastify route answering the same bytes from a buffer does ${fmt(b.perCore)} per core on this host ` +
              `(${fmt(b.r.rps)} req/s at ${fmt(b.cores * 100)} %), Vigil ${fmt(r, 2)} of it; at this ratio ${fmt(target)} needs a host whose bare route does ${fmt(target / r)} per core` +
              (b.perCore < target
                ? `, and the bare route alone is below the target here (${fmt(b.perCore / target, 2)} of it)`
                : "")),
      );
    };
    perCoreVerdict("page", pageV, pageB, ratioOf(0), TARGET.pagePerCore);
    perCoreVerdict("badge", badgeV, badgeB, ratioOf(2), TARGET.badgePerCore);
    for (const [p, b] of [
      [pageV, pageB],
      [sumV, sumB],
      [badgeV, badgeB],
      [down, pageB],
    ] as const)
      console.log(
        `${p.label} p99 ${fmt(p.r.p99, 1)} ms: ${p.r.p99 < TARGET.p99Ms ? "met" : "NOT met"} (< ${TARGET.p99Ms} ms${p === sumV ? ", the page's, for reference" : ""})` +
          (p.r.p99 < TARGET.p99Ms
            ? ""
            : `: the bare route's p99 with the same ${connections} connections was ${fmt(b.r.p99, 1)} ms (at ${fmt(b.r.rps)} req/s; Vigil ${fmt(p.r.rps)})`) +
          (errorsOf(p.r) && p !== down ? `; ${fmt(errorsOf(p.r))} non-2xx or errors` : ""),
      );
    for (const p of [pageV, badgeV]) {
      const lag = p.lag ?? { upTo: Number.NaN, estimate: Number.NaN };
      console.log(
        `probe lag p99 during the ${p.label}: ≤ ${fmtBound(lag.upTo)} (estimate ${fmt(lag.estimate * 1000)} ms), ` +
          `${fmt(p.checksPerS ?? 0, 1)} checks/s: ${lag.upTo <= TARGET.lagS ? "met" : lag.estimate < TARGET.lagS ? "met by the estimate, its bucket reaches past 1 s" : "NOT met"} (< 1 s)`,
      );
    }
    const downOk = errorsOf(down.r) === 0 && marked > 0 && stillUp;
    console.log(
      `store down: ${downOk ? "met" : "NOT met"} (last good page served, marked stale, no non-200): ` +
        `${fmt(marked)} stale 200s, ${fmt(errorsOf(down.r))} non-200 or errors, p99 ${fmt(down.r.p99, 1)} ms` +
        (stillUp ? "" : `; Vigil exited (${exitedWith})`),
    );
    say(`Vigil's log: ${logFile}`);
  } finally {
    await cleanup();
  }
}

interface Phase {
  label: string;
  r: CountedLoad;
  /** server CPU seconds over the phase */
  cpu: number;
  perCore: number;
  /** Vigil: requests per CPU-second left after the idle window's share (probes, jobs) */
  perCoreNet: number;
  cores: number;
  lag?: { upTo: number; estimate: number };
  checksPerS?: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

const errorsOf = (r: CountedLoad) => r.requests - (r.statuses["200"] ?? 0) + r.errors + r.timeouts;
const fmtBound = (s: number) => (Number.isFinite(s) ? `${fmt(s * 1000)} ms` : "∞");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The lag histogram's p99 between two scrapes, in seconds. */
function lagOf(before: string, after: string) {
  return histogramQuantile(histogramDelta(histogramOf(before, LAG), histogramOf(after, LAG)), 0.99);
}

/** A server's CPU seconds and (for Vigil) its metrics, read together. */
async function reading(pid: number | undefined, metrics?: () => Promise<string>) {
  // a server that exited (the store-down phase) answers nothing: its reading is empty
  const text = metrics ? await metrics().catch(() => "") : "";
  return { cpu: processCpuSeconds(pid), text, at: Date.now() };
}

/** Why Vigil exited: its exit, and the error its log ends with (an unhandled 'error' event, say). */
function crashOf(logFile: string, child: ChildProcess): string {
  const log = fs.readFileSync(logFile, "utf8");
  const from = log.lastIndexOf("throw er;");
  const tail = (from >= 0 ? log.slice(from) : log.slice(-1500)).split("\n");
  const error = tail.find((l) => /^\w*Error\b/.test(l)) ?? "";
  const emitted = tail.find((l) => /^Emitted 'error' event/.test(l)) ?? "";
  const at = tail.slice(tail.indexOf(emitted) + 1).find((l) => l.trim().startsWith("at ")) ?? "";
  return [
    child.signalCode ? `signal ${child.signalCode}` : `exit code ${String(child.exitCode)}`,
    error,
    emitted ? `${emitted.replace(/:$/, "")} (${at.trim()})` : "",
  ]
    .filter(Boolean)
    .join("; ");
}

async function getOnce(url: string, headers: Record<string, string>) {
  const r = await request(url, { headers });
  const body = Buffer.from(await r.body.arrayBuffer());
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.headers)) if (typeof v === "string") h[k] = v;
  return { status: r.statusCode, headers: h, body };
}

/** `vigil serve` with only the environment given (plus PATH and HOME), its output in `logFile`. */
function startVigil(logFile: string, env: Record<string, string>, nodeFlags: string[]): ChildProcess {
  const out = fs.openSync(logFile, "a");
  const child = spawn(process.execPath, [...SERVER_NODE_FLAGS, ...nodeFlags, CLI_PATH, "serve"], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", out, out],
  });
  fs.closeSync(out);
  return child;
}

async function waitReady(base: string, child: ChildProcess, logFile: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(
        `vigil serve exited (${child.exitCode}):\n${fs.readFileSync(logFile, "utf8").slice(-2000)}`,
      );
    const ok = await request(`${base}/readyz`)
      .then(async (r) => {
        await r.body.dump();
        return r.statusCode === 200;
      })
      .catch(() => false);
    if (ok) return;
    await sleep(200);
  }
  throw new Error(`vigil serve was not ready within 60 s; see ${logFile}`);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  const t = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(t);
}

// ---- the bare route, in a process of its own ------------------------------------------------------

interface BareRoute {
  path: string;
  /** Vigil's URL whose answer the route repeats, asked with `headers`. */
  url: string;
  headers: Record<string, string>;
}

const BARE_FLAG = "--bare-status-routes";
/** Headers of Vigil's answer not repeated: the connection's and the request's own. */
const NOT_REPEATED = new Set([
  "date",
  "connection",
  "keep-alive",
  "content-length",
  "transfer-encoding",
  "x-request-id",
]);

async function startBare(routes: BareRoute[]): Promise<{ proc: ChildProcess; port: number }> {
  const proc = spawn(
    process.execPath,
    [...SERVER_NODE_FLAGS, fileURLToPath(import.meta.url), BARE_FLAG, JSON.stringify(routes)],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    proc.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /"port":(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.once("exit", (code) => reject(new Error(`the bare route process exited with ${String(code)}`)));
  });
  return { proc, port };
}

/** A Fastify app whose routes answer, from a buffer, the bytes and headers Vigil answered. */
async function bareServer(routes: BareRoute[]): Promise<number> {
  const app = Fastify({ logger: false });
  for (const r of routes) {
    const got = await getOnce(r.url, r.headers);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(got.headers)) if (!NOT_REPEATED.has(k)) headers[k] = v;
    const body = got.body;
    app.get(r.path, (_req, reply) => {
      reply.headers(headers).send(body);
    });
  }
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address();
  return typeof address === "object" && address ? address.port : 0;
}

if (process.argv[2] === BARE_FLAG && process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = await bareServer(JSON.parse(process.argv[3] as string) as BareRoute[]);
  process.stdout.write(`${JSON.stringify({ port })}\n`);
  process.once("SIGTERM", () => process.exit(0));
}
