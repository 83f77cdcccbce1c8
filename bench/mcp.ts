import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import { Session } from "node:inspector/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { request } from "undici";
import { buildApp } from "../src/app.js";
import type { Config } from "../src/config.js";
import { READ_PERMISSIONS } from "../src/core/actor.js";
import { closeContext, createContext } from "../src/core/context.js";
import { createKey, createUser } from "../src/identity/accounts.js";
import { createLogger } from "../src/lib/logger.js";
import { exchangeCode, issueCode, mcpResource, registerClient } from "../src/oauth/service.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import { createPgliteStore } from "../src/stores/relational/pglite.js";
import type { RelationalStore } from "../src/stores/relational/types.js";
import { applyQuestdbSchema, createQuestdbSeriesStore, questdbPool } from "../src/stores/series/questdb.js";
import { createSqlSeriesStore } from "../src/stores/series/sql.js";
import type { SeriesStore } from "../src/stores/series/types.js";
import { StoreSupervisor } from "../src/stores/supervisor.js";
import { listenerPid, ownCpuSeconds, processCpuSeconds } from "./lib/cpu.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { dropPrefixed, seedAvailabilitySamples } from "./lib/questdb.js";
import { fmt, table } from "./lib/report.js";

const MINUTE = 60_000;
const DAY = 86_400_000;
const PREFIX = "bench_mcp_";
/** Connection ids are UUIDs (the REST edge checks); the bench's are this prefix and a 12-digit number. */
const ID_PREFIX = "00000000-0000-4000-8000-";
const HEALTH_HOURS = 24;
/** GET /v1/connections pages at most this many rows (connections/schema.ts). */
const REST_PAGE = 100;

/** What the load generator process drives; one of four calls. */
type Kind = "mcp-health" | "rest-summary" | "mcp-list" | "rest-list";

interface LoadSpec {
  kind: Kind;
  base: string;
  token: string;
  ids: string[];
  connections: number;
  seconds: number;
}

interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
  /** 200 answers whose body was not the expected result (a tool error, an empty summary). */
  bad: number;
}

/** A measurement with the CPU that Vigil (this process) and QuestDB spent per request, in microseconds. */
interface Measured extends LoadResult {
  vigilUs: number;
  questdbUs: number;
}

const mcpBody = (name: string, args: Record<string, unknown>) =>
  JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } });

const mcpHeaders = (token: string) => ({
  authorization: `Bearer ${token}`,
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  "mcp-protocol-version": LATEST_PROTOCOL_VERSION,
});

/**
 * `vigil bench mcp` (issue #13): the MCP tool server against REST for the same user, same data,
 * same run. One user owns 200 connections with 7 days of 1-minute availability samples (2 M
 * rows, generated inside QuestDB when QUESTDB_URL is set, else in the `sql` backend). Vigil runs
 * as `buildApp` builds it, listening on loopback; an access token comes from the real
 * authorization server (client registration, a code, the PKCE exchange) and an API key with the
 * same read permissions from `createKey`. For each pair it drives a closed loop of
 * `--connections` concurrent requests for `--seconds` (autocannon, in its own process):
 *
 * - `tools/call get_connection_health {connection_id, hours: 24}` against
 *   `GET /v1/availability/summary?window=day&connection_id=…`, spread over the 200 connections;
 * - `tools/call list_connections` (all 200 connections) against `GET /v1/connections?limit=100`
 *   (the largest REST page, alternating offset 0 and 100: two calls list them all).
 *
 * REST and MCP take turns for `--rounds` rounds; each figure is the best of its rounds. Prints
 * req/s, p50 and p99 of each and the MCP/REST ratios. `--cpu-prof DIR` writes a CPU profile of
 * the Vigil process (the server; the load generator runs apart) for each measurement.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      seconds: { type: "string", default: "10" },
      connections: { type: "string", default: "10" },
      "user-connections": { type: "string", default: "200" },
      days: { type: "string", default: "7" },
      rounds: { type: "string", default: "2" },
      "cpu-prof": { type: "string" },
    },
  });
  const seconds = positiveInt("seconds", values.seconds);
  const concurrency = positiveInt("connections", values.connections);
  const nConn = positiveInt("user-connections", values["user-connections"]);
  const days = positiveInt("days", values.days);
  const rounds = positiveInt("rounds", values.rounds);
  const profDir = values["cpu-prof"];
  const say = (s: string) => process.stderr.write(`${s}\n`);
  const log = createLogger("warn");
  const benchConfig: Config = {
    ...config,
    logLevel: "warn",
    secret: config.secret ?? "bench-secret-bench-secret-bench-secret!",
  };
  const rows = nConn * days * 1440;

  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    // relational: a throwaway PostgreSQL database, else PGlite in memory
    let db: RelationalStore;
    let relational: string;
    try {
      const scratch = await throwawayDatabase(config, "bench_mcp");
      db = createPgStore({ connectionString: scratch.url });
      cleanups.push(scratch.drop);
      relational = "PostgreSQL";
    } catch (err) {
      say(`warning: ${(err as Error).message}; using PGlite in memory`);
      db = await createPgliteStore();
      relational = "PGlite (in memory)";
    }
    cleanups.unshift(() => db.close());
    await migrate(db);

    // the user: 200 connections, no rate limit in the way of the REST side
    const user = await createUser(db, { email: `bench-mcp-${Date.now()}@x.example`, plan: "enterprise" });
    await db.query("UPDATE users SET rate_limit_per_hour = 1000000000 WHERE id = $1", [user.id]);
    const { key } = await createKey(db, { user: user.id, permissions: [...READ_PERMISSIONS] });
    await db.query(
      `INSERT INTO connections (id, user_id, service_type, service_name, status, base_url)
       SELECT '${ID_PREFIX}' || lpad(g::text, 12, '0'), $1, 'workflow_a', 'bench ' || g, 'active', 'http://127.0.0.1:1'
         FROM generate_series(0, $2 - 1) g`,
      [user.id, nConn],
    );
    const ids = Array.from({ length: nConn }, (_, i) => `${ID_PREFIX}${String(i).padStart(12, "0")}`);
    const end = Math.floor(Date.now() / MINUTE) * MINUTE;
    const start = end - days * DAY;

    // series: QuestDB when configured, as in production; else the sql backend
    let series: SeriesStore;
    let seriesName: string;
    const seedStart = Date.now();
    if (config.questdb) {
      const qdb = config.questdb;
      seriesName = "QuestDB";
      const pool = questdbPool(qdb.pgUrl, 1);
      const dropOurs = () => dropPrefixed(pool, PREFIX);
      await dropOurs();
      await applyQuestdbSchema(pool, PREFIX);
      cleanups.push(async () => {
        await dropOurs();
        await pool.end();
      });
      say(`seeding QuestDB: ${fmt(rows)} availability samples (${nConn} connections x ${days} days x 1,440)`);
      await seedAvailabilitySamples(pool, {
        prefix: PREFIX,
        start,
        days,
        connections: nConn,
        everyMinutes: 1,
        idOf: (i) => `'${ID_PREFIX}' || lpad(${i}::string, 12, '0')`,
      });
      series = await createQuestdbSeriesStore({
        httpUrl: qdb.httpUrl,
        pgUrl: qdb.pgUrl,
        tablePrefix: PREFIX,
      });
      cleanups.unshift(() => series.close());
      await series.waitVisible(600_000);
      say("");
    } else {
      seriesName = `sql backend on ${relational}`;
      say(
        `warning: QUESTDB_URL is unset: the series live in the sql backend on ${relational}. ` +
          "The figures issue #13 asks for need QuestDB (QUESTDB_URL, QUESTDB_PG_URL) and PostgreSQL (DATABASE_URL).",
      );
      say(`seeding ${seriesName}: ${fmt(rows)} availability samples`);
      await db.query(
        `INSERT INTO availability_samples (ts, connection_id, available, response_time_ms, status_code, synthetic, source)
         SELECT to_timestamp($1::double precision / 1000) + make_interval(mins => m),
                '${ID_PREFIX}' || lpad(c::text, 12, '0'),
                random() > 0.01, 20 + random() * 200, 200, false, 'probe'
           FROM generate_series(0, $2 - 1) m, generate_series(0, $3 - 1) c`,
        [start, days * 1440, nConn],
      );
      await db.query("ANALYZE availability_samples");
      series = createSqlSeriesStore(db);
    }
    say(`  ${fmt(rows)} rows visible after ${fmt((Date.now() - seedStart) / 1000, 1)} s`);

    const ctx = createContext(benchConfig, log, StoreSupervisor.ready({ db, series }, log, benchConfig));
    const app = await buildApp(ctx);
    cleanups.unshift(async () => {
      await app.close();
      await closeContext(ctx);
    });
    const base = await app.listen({ host: "127.0.0.1", port: 0 });

    // the access token, through the authorization server: register, a code as the consent page
    // issues it for this user, the code for tokens with the PKCE verifier
    const token = await accessTokenFor(ctx, user.id);

    // every call answers as expected before anything is measured
    await verify(base, token, key, ids);
    say("verified: every call answers 200 with its result (MCP: structuredContent, no tool error)");

    const pairs: {
      call: string;
      mcp: Kind;
      rest: Kind;
      restPath: string;
      mcpRows: number;
      restRows: number;
    }[] = [
      {
        call: "get_connection_health",
        mcp: "mcp-health",
        rest: "rest-summary",
        restPath: `GET /v1/availability/summary?window=day&connection_id=…`,
        mcpRows: 1,
        restRows: 1,
      },
      {
        call: "list_connections",
        mcp: "mcp-list",
        rest: "rest-list",
        restPath: `GET /v1/connections?limit=${REST_PAGE}&offset=0|${REST_PAGE}`,
        mcpRows: nConn,
        restRows: Math.min(REST_PAGE, nConn),
      },
    ];
    const qdbPid = config.questdb ? listenerPid(config.questdb.httpUrl) : undefined;
    const measure = async (kind: Kind, round: number): Promise<Measured> => {
      const spec = { kind, base, ids, connections: concurrency, seconds };
      const tok = kind.startsWith("mcp") ? token : key;
      say(`round ${round}: ${kind}, ${concurrency} connections, ${seconds} s`);
      const session = profDir ? await startProfile() : undefined;
      const cpu0 = ownCpuSeconds();
      const q0 = processCpuSeconds(qdbPid);
      const loaded = await load({ ...spec, token: tok });
      const r = {
        ...loaded,
        vigilUs: ((ownCpuSeconds() - cpu0) / loaded.requests) * 1e6,
        questdbUs: ((processCpuSeconds(qdbPid) - q0) / loaded.requests) * 1e6,
      };
      if (session && profDir) await stopProfile(session, profDir, `${kind}-${round}`);
      if (r.non2xx + r.errors + r.bad > 0)
        throw new Error(
          `${kind}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.bad} unexpected bodies of ${r.requests}`,
        );
      return r;
    };

    const load0 = os.loadavg()[0] ?? NaN;
    for (const p of pairs)
      for (const kind of [p.rest, p.mcp])
        await load({
          kind,
          base,
          ids,
          connections: concurrency,
          seconds: 2,
          token: kind.startsWith("mcp") ? token : key,
        }); // warm-up
    // REST and MCP take turns; each figure is the best (highest req/s) of its rounds
    const runs = new Map<Kind, Measured[]>();
    for (let round = 1; round <= rounds; round++)
      for (const p of pairs)
        for (const kind of [p.rest, p.mcp])
          runs.set(kind, [...(runs.get(kind) ?? []), await measure(kind, round)]);
    const best = (kind: Kind) => (runs.get(kind) ?? []).reduce((x, y) => (y.rps > x.rps ? y : x));
    const load1 = os.loadavg()[0] ?? NaN;

    const out: (string | number)[][] = [];
    const summary: string[] = [];
    for (const p of pairs) {
      const rest = best(p.rest);
      const mcp = best(p.mcp);
      const timeRatio = mcp.p50 / rest.p50;
      const costRatio = rest.rps / mcp.rps;
      out.push(
        [
          `REST ${p.restPath}`,
          p.restRows,
          fmt(rest.rps),
          fmt(rest.p50, 1),
          fmt(rest.p99, 1),
          fmt(rest.vigilUs),
          fmt(rest.questdbUs),
          "1.00",
          "1.00",
        ],
        [
          `MCP tools/call ${p.call}`,
          p.mcpRows,
          fmt(mcp.rps),
          fmt(mcp.p50, 1),
          fmt(mcp.p99, 1),
          fmt(mcp.vigilUs),
          fmt(mcp.questdbUs),
          fmt(timeRatio, 2),
          fmt(costRatio, 2),
        ],
      );
      const met = timeRatio <= 2 && costRatio <= 2 && mcp.p99 < 100;
      summary.push(
        `${p.call}: MCP/REST p50 ${fmt(timeRatio, 2)}, per call (REST req/s / MCP req/s) ${fmt(costRatio, 2)}, ` +
          `MCP p99 ${fmt(mcp.p99, 1)} ms: ${met ? "meets" : "MISSES"} target (<= 2, p99 < 100 ms)`,
      );
      if (p.call === "list_connections" && nConn > REST_PAGE)
        summary.push(
          `  (REST lists ${REST_PAGE} per page: the whole list of ${nConn} takes ${Math.ceil(nConn / REST_PAGE)} REST calls, ` +
            `so MCP/REST per whole list = ${fmt(costRatio / Math.ceil(nConn / REST_PAGE), 2)})`,
        );
    }

    console.log(
      `\nmcp: ${fmt(rows)} availability samples (${nConn} connections x ${days} days x 1/min) in ${seriesName}, ` +
        `relational ${relational}; closed loop of ${concurrency} connections, ${seconds} s per figure, ` +
        `best of ${rounds} alternating round(s) after 2 s warm-ups (autocannon in its own process, loopback); ` +
        `MCP protocol ${LATEST_PROTOCOL_VERSION}; host load average ${fmt(load0, 2)} -> ${fmt(load1, 2)} on ${os.availableParallelism()} cores\n`,
    );
    console.log(
      table(
        [
          "request",
          "rows",
          "req/s",
          "p50 ms",
          "p99 ms",
          "Vigil CPU us/call",
          "QuestDB CPU us/call",
          "p50 ratio",
          "per-call ratio",
        ],
        out,
      ),
    );
    console.log(
      "\np50 ratio = MCP p50 / REST p50; per-call ratio = REST req/s / MCP req/s (cost of one call at saturation); " +
        "CPU: this process (Vigil; the load generator runs apart) and QuestDB's (n/a unless QuestDB listens on loopback), per request",
    );
    for (const s of summary) console.log(s);
  } finally {
    // The load generator's last requests may still be answering: let them finish before the
    // stores close under them.
    await new Promise((r) => setTimeout(r, 1000));
    for (const c of cleanups) await c().catch((e) => say(`cleanup: ${(e as Error).message}`));
  }
}

/** An access token for `userId` as an MCP client gets one (see test/helpers/oauth.ts mcpTokenFor). */
async function accessTokenFor(ctx: Parameters<typeof issueCode>[0], userId: string): Promise<string> {
  const redirectUri = "http://127.0.0.1:7777/callback";
  const client = await registerClient(
    ctx,
    { client_name: "bench", redirect_uris: [redirectUri], token_endpoint_auth_method: "none" },
    "127.0.0.1",
  );
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  const code = await issueCode(
    ctx,
    {
      clientId: client.client_id,
      clientName: "bench",
      redirectUri,
      codeChallenge: challenge,
      state: null,
      resource: mcpResource(ctx),
      scope: "read",
    },
    userId,
  );
  const tokens = await exchangeCode(ctx, {
    code,
    redirectUri,
    clientId: client.client_id,
    verifier,
    resource: mcpResource(ctx),
  });
  return tokens.access_token;
}

/** Calls each of the four requests once per connection (list: once) and fails loudly on any surprise. */
async function verify(base: string, token: string, key: string, ids: string[]): Promise<void> {
  const fail = (what: string, status: number, body: string): never => {
    throw new Error(`${what}: HTTP ${status} ${body.slice(0, 400)}`);
  };
  const mcp = async (name: string, args: Record<string, unknown>) => {
    const r = await request(`${base}/mcp`, {
      method: "POST",
      headers: mcpHeaders(token),
      body: mcpBody(name, args),
    });
    const text = await r.body.text();
    if (r.statusCode !== 200) fail(`MCP ${name}`, r.statusCode, text);
    const msg = JSON.parse(text) as {
      result?: { isError?: boolean; structuredContent?: Record<string, unknown> };
    };
    if (!msg.result || msg.result.isError || !msg.result.structuredContent)
      fail(`MCP ${name}`, r.statusCode, text);
    return msg.result?.structuredContent as Record<string, unknown>;
  };
  const rest = async (p: string) => {
    const r = await request(`${base}${p}`, { headers: { authorization: `Bearer ${key}` } });
    const text = await r.body.text();
    if (r.statusCode !== 200) fail(`REST ${p}`, r.statusCode, text);
    return JSON.parse(text) as Record<string, unknown>;
  };
  for (const id of ids) {
    const h = await mcp("get_connection_health", { connection_id: id, hours: HEALTH_HOURS });
    if (!((h.totalChecks as number) > 0))
      fail(`MCP get_connection_health ${id}: no checks`, 200, JSON.stringify(h));
    const s = (await rest(`/v1/availability/summary?window=day&connection_id=${id}`)) as {
      data: { checks: number }[];
    };
    const checks = s.data.length === 1 ? (s.data[0]?.checks ?? 0) : 0;
    if (!(checks > 0)) fail(`REST summary ${id}: expected one row with checks`, 200, JSON.stringify(s));
    // same figures through both doors (a minute's sample may enter or leave the window between calls)
    if (Math.abs(checks - (h.totalChecks as number)) > 1)
      fail(`health ${id}: MCP totalChecks ${h.totalChecks} vs REST checks ${checks}`, 200, "");
  }
  const l = await mcp("list_connections", {});
  if ((l.connections as unknown[]).length !== ids.length || l.truncated)
    fail(`MCP list_connections: expected ${ids.length} connections`, 200, JSON.stringify(l).slice(0, 200));
  const page = (await rest(`/v1/connections?limit=${REST_PAGE}`)) as { connections: unknown[] };
  if (page.connections.length !== Math.min(REST_PAGE, ids.length))
    fail("REST /v1/connections: short page", 200, JSON.stringify(page).slice(0, 200));
}

// --- CPU profile of the Vigil process during one measurement -----------------------------------

async function startProfile(): Promise<Session> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 200 });
  await session.post("Profiler.start");
  return session;
}

async function stopProfile(session: Session, dir: string, kind: string): Promise<void> {
  const { profile } = await session.post("Profiler.stop");
  session.disconnect();
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `mcp-${kind}.cpuprofile`);
  fs.writeFileSync(file, JSON.stringify(profile));
  process.stderr.write(`  CPU profile: ${file}\n`);
}

// --- the load generator: this module run as a script in its own process -----------------------

/** Runs the load generator in a child process, so it does not share Vigil's event loop. */
function load(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [fileURLToPath(import.meta.url), "--load-generator", JSON.stringify(spec)],
      { maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`load generator failed: ${err.message}\n${stderr}`));
        resolve(JSON.parse(stdout) as LoadResult);
      },
    );
  });
}

type Req = { method?: string; path?: string; headers?: Record<string, string>; body?: string };
interface Instance {
  on(event: "response", fn: (client: unknown, status: number, bytes: number, ms: number) => void): void;
}
type Autocannon = (
  opts: Record<string, unknown>,
  done: (
    err: Error | null,
    r: { requests: { total: number }; non2xx: number; errors: number; duration: number },
  ) => void,
) => Instance;

function loadGenerator(spec: LoadSpec): void {
  const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;
  let next = 0;
  let bad = 0;
  const nextId = () => spec.ids[next++ % spec.ids.length] as string;
  const mcpH = mcpHeaders(spec.token);
  const restH = { authorization: `Bearer ${spec.token}` };
  let req: Record<string, unknown>;
  switch (spec.kind) {
    case "mcp-health":
      req = {
        method: "POST",
        path: "/mcp",
        headers: mcpH,
        setupRequest: (r: Req) => ({
          ...r,
          body: mcpBody("get_connection_health", { connection_id: nextId(), hours: HEALTH_HOURS }),
        }),
        onResponse: (status: number, body: string) => {
          if (status === 200 && (!body.includes('"structuredContent"') || body.includes('"isError":true')))
            bad++;
        },
      };
      break;
    case "mcp-list":
      req = {
        method: "POST",
        path: "/mcp",
        headers: mcpH,
        body: mcpBody("list_connections", {}),
        onResponse: (status: number, body: string) => {
          if (status === 200 && (!body.includes('"structuredContent"') || body.includes('"isError":true')))
            bad++;
        },
      };
      break;
    case "rest-summary":
      req = {
        method: "GET",
        headers: restH,
        setupRequest: (r: Req) => ({
          ...r,
          path: `/v1/availability/summary?window=day&connection_id=${nextId()}`,
        }),
        onResponse: (status: number, body: string) => {
          if (status === 200 && !body.includes('"checks"')) bad++;
        },
      };
      break;
    case "rest-list":
      req = {
        method: "GET",
        headers: restH,
        setupRequest: (r: Req) => ({
          ...r,
          path: `/v1/connections?limit=${REST_PAGE}&offset=${(next++ % 2) * REST_PAGE}`,
        }),
        onResponse: (status: number, body: string) => {
          if (status === 200 && !body.includes('"connections"')) bad++;
        },
      };
      break;
  }
  const ms: number[] = [];
  const instance = autocannon(
    { url: spec.base, connections: spec.connections, duration: spec.seconds, requests: [req] },
    (err, r) => {
      if (err) throw err;
      ms.sort((a, b) => a - b);
      const pct = (p: number) => ms[Math.min(ms.length - 1, Math.ceil((p / 100) * ms.length) - 1)] ?? NaN;
      const result: LoadResult = {
        rps: r.requests.total / r.duration,
        p50: pct(50),
        p99: pct(99),
        requests: r.requests.total,
        non2xx: r.non2xx,
        errors: r.errors,
        bad,
      };
      process.stdout.write(JSON.stringify(result));
    },
  );
  // autocannon's own percentiles are whole milliseconds; keep each response's time instead
  instance.on("response", (_c, status, _b, t) => {
    if (status >= 200 && status < 300) ms.push(t);
  });
}

if (process.argv[2] === "--load-generator" && process.argv[1] === fileURLToPath(import.meta.url))
  loadGenerator(JSON.parse(process.argv[3] as string) as LoadSpec);
