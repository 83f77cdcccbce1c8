import { parseArgs } from "node:util";
import { request } from "undici";
import { buildApp } from "../src/app.js";
import type { Config } from "../src/config.js";
import { type AppContext, closeContext, createContext } from "../src/core/context.js";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createKey, createOrg, createUser } from "../src/identity/accounts.js";
import { createLogger } from "../src/lib/logger.js";
import { cursorCodec } from "../src/http/cursor.js";
import { availabilityFilters } from "../src/availability/list.js";
import { readFingerprint } from "../src/http/routes/read.js";
import { rollUp } from "../src/retention/rollups.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import type { RelationalStore } from "../src/stores/relational/types.js";
import { applyQuestdbSchema, createQuestdbSeriesStore, questdbPool } from "../src/stores/series/questdb.js";
import { createSqlSeriesStore } from "../src/stores/series/sql.js";
import type { SeriesStore } from "../src/stores/series/types.js";
import { StoreSupervisor } from "../src/stores/supervisor.js";
import { benchQuestdb, dropPrefixed, seedAvailabilitySamples } from "./lib/questdb.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";
import { fmt, table } from "./lib/report.js";

const MINUTE = 60_000;
const DAY = 86_400_000;
const PREFIX = "bench_read_";

interface Timing {
  p50: number;
  p99: number;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;

/** Runs `fn` `n` times one after another (after 3 warm-up calls) and returns p50 and p99 in ms. */
async function time(n: number, fn: () => Promise<unknown>): Promise<Timing> {
  for (let i = 0; i < 3; i++) await fn();
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn();
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return { p50: percentile(ms, 50), p99: percentile(ms, 99) };
}

/**
 * `vigil bench read`: read-API latency over a month of 1-minute samples.
 *
 * Seeds 30 days of one sample a minute for 1,000 connections (43.2 million rows) into QuestDB with
 * a server-side INSERT … SELECT, and 100 connections (4.3 million rows) into the `sql` backend on
 * PostgreSQL, then rolls both up as the jobs role would. The connections belong to one
 * organization, read with its owner's personal key; another tenant's connections exist beside
 * them. Issue #17's big account is `--connections 10000 --days 7` (100.8 M samples).
 * `--interval-minutes N` seeds a sample every N minutes instead; `--reuse` keeps the QuestDB
 * tables after the run and reuses them in the next while they are as many rows ending less than
 * 6 hours ago (the seed of 100 M rows takes minutes; a figure for docs/benchmarks.md seeds afresh).
 *
 * For each read it prints p50/p99 of the API (HTTP on loopback, with key, rate limit, visibility
 * and JSON) and of the very statements the API sent, replayed straight to QuestDB over pg-wire in
 * the same run, and how many connection ids the largest statement named: a deep page of 1,000
 * availability rows (halfway back, by cursor), the month summary (the first page of 100, and a
 * page of 1,000), daily_availability analytics over the seeded days (a page of 1,000), and the
 * last page of `GET /v1/connections` (PostgreSQL only, no direct row). The `sql` row reads the
 * same paths on the sql backend for a second organization of `--sql-connections`.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      connections: { type: "string", default: "1000" },
      days: { type: "string", default: "30" },
      "sql-connections": { type: "string", default: "100" },
      iterations: { type: "string", default: "200" },
      "interval-minutes": { type: "string", default: "1" },
      reuse: { type: "boolean", default: false },
      /** Measure only the reads whose name contains one of these comma-separated texts (e.g. `summary,analytics`). */
      only: { type: "string" },
    },
  });
  const nConn = positiveInt("connections", values.connections);
  const days = positiveInt("days", values.days);
  const sqlConn = positiveInt("sql-connections", values["sql-connections"]);
  const iterations = positiveInt("iterations", values.iterations);
  const every = positiveInt("interval-minutes", values["interval-minutes"]);
  if (1440 % every !== 0) throw new Error("--interval-minutes must divide a day (1440 minutes)");
  const perDay = 1440 / every;
  const say = (s: string) => process.stderr.write(`${s}\n`);
  const log = createLogger("warn");
  const benchConfig: Config = {
    ...config,
    logLevel: "warn",
    secret: config.secret ?? "bench-secret-bench-secret-bench-secret!",
  };

  const qdb = benchQuestdb(config, say);
  const scratch = await throwawayDatabase(config, "bench_read");
  const db = createPgStore({ connectionString: scratch.url });
  const direct = questdbPool(qdb.pgUrl, 4);
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    await migrate(db);
    const now = new Date();
    let end = Math.floor(now.getTime() / MINUTE) * MINUTE;
    let start = end - days * DAY;
    const rows = nConn * days * perDay;

    // tenants: an enterprise organization owning every seeded connection, read by its owner's
    // personal key (unlimited rate); another tenant's personal connections beside them
    /** An enterprise organization of `n` connections `<prefix>_<i>`, and its owner's personal key (unlimited rate). */
    const orgAccount = async (label: string, prefix: string, n: number) => {
      const owner = await createUser(db, {
        email: `bench-read-${label}-${Date.now()}@x.example`,
        plan: "enterprise",
      });
      await db.query("UPDATE users SET rate_limit_per_hour = 1000000000 WHERE id = $1", [owner.id]);
      const org = await createOrg(db, { name: `bench ${label} org`, owner: owner.id, plan: "enterprise" });
      const { key } = await createKey(db, {
        user: owner.id,
        permissions: ["analytics:read", "connections:read"],
      });
      await db.query(
        `INSERT INTO connections (id, user_id, organization_id, service_type, service_name, status, base_url)
         SELECT $4 || '_' || g, $1, $3, 'workflow_a', $4 || ' ' || g, 'active', 'http://127.0.0.1:1'
           FROM generate_series(0, $2 - 1) g`,
        [owner.id, n, org.id, prefix],
      );
      return key;
    };
    const key = await orgAccount("questdb", "bconn", nConn);
    const other = await createUser(db, { email: `bench-read-other-${Date.now()}@x.example`, plan: "pro" });
    await db.query(
      `INSERT INTO connections (id, user_id, service_type, service_name, status, base_url)
       SELECT 'other_' || g, $1, 'workflow_a', 'other ' || g, 'active', 'http://127.0.0.1:1'
         FROM generate_series(0, 99) g`,
      [other.id],
    );
    // the sql backend's account: a second organization with its own connections and key
    const sqlKey = await orgAccount("sql", "sconn", sqlConn);
    await db.query("ANALYZE connections");

    // QuestDB: 43.2 M rows generated on the server, in time order
    const pool = questdbPool(qdb.pgUrl, 1);
    const dropAll = () => dropPrefixed(pool, PREFIX);
    // --reuse (while developing): the stored samples are kept when they are as many as this run
    // would seed and end less than 6 hours ago (the run then reads them where they are); the
    // rollups are always redone, as PostgreSQL is new every run. A final figure seeds afresh.
    const seedTag = `${nConn}x${days}x${every}`;
    let reused = false;
    if (values.reuse) {
      try {
        const r = await pool.query(
          `SELECT count() AS n, min(ts) AS lo, max(ts) AS hi FROM ${PREFIX}availability_samples`,
        );
        const row = r.rows[0] as { n: number; lo: Date | null; hi: Date | null } | undefined;
        reused =
          Number(row?.n) === rows &&
          row?.lo instanceof Date &&
          (row?.hi?.getTime() ?? 0) >= end - 6 * 3_600_000;
        if (reused) {
          start = (row?.lo as Date).getTime();
          end = start + days * DAY;
        } else say(`--reuse: the stored samples are not ${seedTag} ending now; seeding again`);
      } catch {
        reused = false;
      }
    }
    if (!reused) await dropAll();
    await applyQuestdbSchema(pool, PREFIX);
    cleanups.push(async () => {
      if (!values.reuse) await dropAll();
      await pool.end();
    });
    const seedStart = Date.now();
    if (reused) say(`--reuse: ${fmt(rows)} stored samples (${seedTag}) reused`);
    else
      say(
        `seeding QuestDB: ${fmt(rows)} availability samples (${nConn} connections x ${days} days x ${perDay})`,
      );
    if (!reused)
      await seedAvailabilitySamples(pool, {
        prefix: PREFIX,
        start,
        days,
        connections: nConn,
        everyMinutes: every,
        idOf: (i) => `'bconn_' || ${i}`,
      });
    const series = await createQuestdbSeriesStore({
      httpUrl: qdb.httpUrl,
      pgUrl: qdb.pgUrl,
      tablePrefix: PREFIX,
    });
    cleanups.unshift(() => series.close());
    await series.waitVisible(600_000);
    say(`\n  ${fmt(rows)} rows visible after ${fmt((Date.now() - seedStart) / 1000, 1)} s`);

    // PostgreSQL (sql backend): a smaller set
    const sqlRows = sqlConn * days * perDay;
    say(`seeding PostgreSQL (sql backend): ${fmt(sqlRows)} samples (${sqlConn} connections)`);
    const sqlStart = Date.now();
    await db.query(
      `INSERT INTO availability_samples (ts, connection_id, available, response_time_ms, status_code, synthetic, source)
       SELECT to_timestamp($1::double precision / 1000) + make_interval(mins => m * $4), 'sconn_' || c,
              random() > 0.01, 20 + random() * 200, 200, false, 'probe'
         FROM generate_series(0, $2 - 1) m, generate_series(0, $3 - 1) c`,
      [start, days * perDay, sqlConn, every],
    );
    await db.query("ANALYZE availability_samples");
    say(`  done in ${fmt((Date.now() - sqlStart) / 1000, 1)} s`);

    // rollups, as the jobs role makes them
    const captured: { sql: string; params: unknown[] }[] = [];
    let capture = false;
    const traced = await createQuestdbSeriesStore({
      httpUrl: qdb.httpUrl,
      pgUrl: qdb.pgUrl,
      tablePrefix: PREFIX,
      onQuery: (sql, params) => {
        if (capture) captured.push({ sql, params });
      },
    });
    cleanups.unshift(() => traced.close());
    const qCtx = context(benchConfig, log, db, traced);
    const sqlCtx = context(benchConfig, log, db, createSqlSeriesStore(db));
    // both backends share this PostgreSQL, so one rollup state: both runs at one instant, so that
    // the watermark recorded is the one each backend's partial rows of today carry
    const rollupAt = new Date();
    const clocks = [qCtx.now, sqlCtx.now];
    qCtx.now = sqlCtx.now = () => rollupAt;
    let t0 = Date.now();
    const rolled = await rollUp(qCtx, { since: new Date(start) });
    say(
      `rollup on QuestDB: ${fmt(rolled.days)} daily rows from ${fmt(rows)} samples in ${fmt((Date.now() - t0) / 1000, 1)} s`,
    );
    t0 = Date.now();
    await rollUp(sqlCtx, { since: new Date(start) });
    say(`rollup on PostgreSQL: ${fmt((Date.now() - t0) / 1000, 1)} s`);
    [qCtx.now, sqlCtx.now] = clocks as [typeof qCtx.now, typeof sqlCtx.now];

    const qApp = await buildApp(qCtx);
    const sApp = await buildApp(sqlCtx);
    cleanups.unshift(async () => {
      await qApp.close();
      await sApp.close();
      await closeContext(qCtx);
      await closeContext(sqlCtx);
    });
    const qUrl = await qApp.listen({ host: "127.0.0.1", port: 0 });
    const sUrl = await sApp.listen({ host: "127.0.0.1", port: 0 });
    const headers = { authorization: `Bearer ${key}` };
    const sqlHeaders = { authorization: `Bearer ${sqlKey}` };

    // a cursor halfway back (15 days of 30), as a client paging deep would hold
    const deepCursor = cursorCodec(qCtx).encode(
      { ts: new Date(end - (days / 2) * DAY), key: ["bconn_0"] },
      // bound to the query the request below sends, as the API binds every cursor
      readFingerprint(
        { limit: 1000 },
        { endpoint: "availability", filters: availabilityFilters({ includeSynthetic: true }) },
      ),
    );
    const since30 = new Date(end - days * DAY).toISOString();
    const reads = [
      {
        name: "deep page of 1,000 availability rows",
        path: `/v1/availability?limit=1000&cursor=${deepCursor}`,
        rows: 1000,
      },
      {
        name: "summary?window=month, first page (100)",
        path: "/v1/availability/summary?window=month",
        rows: 100,
      },
      {
        name: "summary?window=month, limit=1000",
        path: "/v1/availability/summary?window=month&limit=1000",
        rows: 1000,
      },
      {
        name: `analytics daily_availability, ${days} days`,
        path: `/v1/analytics?metric_type=daily_availability&limit=1000&since=${since30}`,
        rows: 1000,
      },
      {
        name: "GET /v1/connections, last page of 100",
        path: `/v1/connections?limit=100&offset=${Math.max(0, nConn - 100)}`,
        sqlPath: "/v1/connections?limit=100",
        rows: 100,
      },
    ];
    const get = async (base: string, path: string, expect: number) => {
      const r = await request(`${base}${path}`, { headers: base === sUrl ? sqlHeaders : headers });
      const body = (await r.body.json()) as { data?: unknown[]; connections?: unknown[] };
      const data = body.data ?? body.connections ?? [];
      if (r.statusCode !== 200 || data.length < Math.min(expect, 1))
        throw new Error(`${path}: ${r.statusCode} ${JSON.stringify(body).slice(0, 300)}`);
      return { data };
    };

    const out: (string | number)[][] = [];
    const summary: string[] = [];
    for (const read of reads) {
      if (values.only && !values.only.split(",").some((o) => read.name.includes(o.trim()))) continue;
      say(`measuring: ${read.name}`);
      captured.length = 0;
      capture = true;
      const first = await get(qUrl, read.path, read.rows);
      capture = false;
      const statements = [...captured];
      // BENCH_READ_DUMP=<dir>: the statements of each read, to replay by hand
      if (process.env.BENCH_READ_DUMP)
        fs.writeFileSync(
          path.join(process.env.BENCH_READ_DUMP, `${read.name.replace(/\W+/g, "_")}.json`),
          JSON.stringify(statements),
        );
      const api = await time(iterations, () => get(qUrl, read.path, read.rows));
      // the same statements straight to QuestDB, concurrently as the API sends them
      // (none for the connections list, which reads PostgreSQL only)
      const directT = statements.length
        ? await time(iterations, () => Promise.all(statements.map((s) => direct.query(s.sql, s.params))))
        : { p50: NaN, p99: NaN };
      const sqlT = await time(Math.max(20, Math.floor(iterations / 4)), () =>
        get(sUrl, ("sqlPath" in read && read.sqlPath) || read.path, 1),
      );
      out.push(
        [read.name, "API on QuestDB", fmt(api.p50, 1), fmt(api.p99, 1), String(first.data.length), "1.00"],
        [
          "",
          `same ${statements.length} statement(s) straight to QuestDB`,
          fmt(directT.p50, 1),
          fmt(directT.p99, 1),
          "",
          fmt(api.p50 / directT.p50, 2),
        ],
        [
          "",
          `API on sql backend (${sqlConn} connections)`,
          fmt(sqlT.p50, 1),
          fmt(sqlT.p99, 1),
          "",
          fmt(sqlT.p50 / api.p50, 2),
        ],
      );
      const target = read.name.startsWith("summary")
        ? "p99 < 200 ms"
        : read.name.startsWith("analytics")
          ? "p99 < 500 ms"
          : "printed";
      summary.push(
        `${read.name}: API p50 ${fmt(api.p50, 1)} ms, p99 ${fmt(api.p99, 1)} ms (${target}); ` +
          (statements.length
            ? `${statements.length} series statement(s), largest naming ${maxIds(statements)} id(s); API/direct p50 = ${fmt(api.p50 / directT.p50, 2)} (target <= 2)`
            : "PostgreSQL only"),
      );
    }
    console.log(
      `\nread: ${fmt(rows)} availability samples in QuestDB (${nConn} connections of one organization x ${days} days x 1 per ${every} min), ` +
        `${fmt(sqlRows)} in PostgreSQL (${sqlConn} connections); ${iterations} sequential requests per figure; ` +
        `${new Date().toISOString()}, load average ${os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(" ")}\n`,
    );
    console.log(table(["read", "path", "p50 ms", "p99 ms", "rows", "ratio"], out));
    console.log(
      "\nratio: API row = 1.00; direct row = API p50 / direct p50; sql row = sql-backend p50 / QuestDB API p50",
    );
    for (const s of summary) console.log(s);
  } finally {
    for (const c of cleanups) await c().catch((e) => say(`cleanup: ${(e as Error).message}`));
    await direct.end();
    await db.close();
    await scratch.drop();
    qdb.stop();
  }
}

/** The most bind values any one statement carried (each connection id in a filter is one). */
function maxIds(statements: { params: unknown[] }[]): number {
  return Math.max(
    0,
    ...statements.map((s) => s.params.filter((v) => typeof v === "string" && !/^\d{4}-/.test(v)).length),
  );
}

function context(
  config: Config,
  log: ReturnType<typeof createLogger>,
  db: RelationalStore,
  series: SeriesStore,
): AppContext {
  return createContext(config, log, StoreSupervisor.ready({ db, series }, log, config));
}
