import { parseArgs } from "node:util";
import { Sender } from "@questdb/nodejs-client";
import type { Config } from "../src/config.js";
import { migrate } from "../src/stores/relational/migrate.js";
import { createPgStore } from "../src/stores/relational/pg.js";
import { applyQuestdbSchema, createQuestdbSeriesStore, questdbPool } from "../src/stores/series/questdb.js";
import { createSqlSeriesStore } from "../src/stores/series/sql.js";
import { availabilitySamples, type RowOf } from "../src/stores/series/tables.js";
import type { SeriesStore } from "../src/stores/series/types.js";
import { benchQuestdb } from "./lib/questdb.js";
import { fmt, progress, table, verdict } from "./lib/report.js";
import { positiveInt, throwawayDatabase } from "./lib/postgres.js";

type Sample = RowOf<typeof availabilitySamples>;

/**
 * `vigil bench series-write`: rows per second appended through the SeriesStore interface
 * against the raw @questdb/nodejs-client sender writing the same rows, in the same run, to
 * the same server. Both write batches of the same size and wait for each acknowledgement.
 * Also measures the `sql` backend on PostgreSQL.
 */
export async function run(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      rows: { type: "string", default: "1000000" },
      batch: { type: "string", default: "10000" },
      "pg-rows": { type: "string", default: "200000" },
    },
  });
  const total = positiveInt("rows", values.rows);
  const batch = positiveInt("batch", values.batch);
  const pgRows = positiveInt("pg-rows", values["pg-rows"]);
  if (!(total > 0 && batch > 0 && pgRows >= 0))
    throw new Error("--rows, --batch and --pg-rows must be positive numbers");
  const log = (s: string) => process.stderr.write(`${s}\n`);

  const rows = makeRows(total);
  const qdb = benchQuestdb(config, log);
  const results: { name: string; rate: number }[] = [];
  try {
    const pool = questdbPool(qdb.pgUrl, 1);
    const run = `b${Date.now().toString(36)}`;
    await applyQuestdbSchema(pool, `${run}_raw_`);
    await applyQuestdbSchema(pool, `${run}_api_`);

    // Warm-up for both paths (JIT, connections, table writers), not timed.
    const warm = rows.slice(0, Math.min(batch, total));
    await rawWrite(qdb.httpUrl, `${run}_raw_availability_samples`, warm, batch);
    const store = await createQuestdbSeriesStore({
      httpUrl: qdb.httpUrl,
      pgUrl: qdb.pgUrl,
      tablePrefix: `${run}_api_`,
    });
    await store.append(availabilitySamples, warm);

    // Alternate the two paths and keep each one's best of three, so neither gains from running second.
    const rawRates: number[] = [];
    const apiRates: number[] = [];
    for (let round = 1; round <= 3; round++) {
      rawRates.push(
        await timed(`raw sender, round ${round}`, total, () =>
          rawWrite(qdb.httpUrl, `${run}_raw_availability_samples`, rows, batch),
        ),
      );
      apiRates.push(
        await timed(`SeriesStore (questdb), round ${round}`, total, () => appendAll(store, rows, batch)),
      );
    }
    results.push({ name: "raw @questdb/nodejs-client sender", rate: Math.max(...rawRates) });
    results.push({ name: "SeriesStore.append (questdb)", rate: Math.max(...apiRates) });
    await store.close();

    for (const prefix of [`${run}_raw_`, `${run}_api_`]) {
      const tables = await pool.query("SELECT table_name FROM tables() WHERE table_name LIKE $1", [
        `${prefix}%`,
      ]);
      for (const r of tables.rows as { table_name: string }[]) await pool.query(`DROP TABLE ${r.table_name}`);
    }
    await pool.end();
  } finally {
    qdb.stop();
  }

  if (pgRows > 0) {
    const rate = await postgresRate(config, rows.slice(0, Math.min(pgRows, total)), batch, log);
    if (rate !== null) results.push({ name: "SeriesStore.append (sql on PostgreSQL)", rate });
  }

  const base = results[0]?.rate ?? Number.NaN;
  console.log(
    `\nseries-write: ${fmt(total)} availability samples in batches of ${fmt(batch)} (best of 3; Postgres: ${fmt(pgRows)} rows)\n`,
  );
  console.log(
    table(
      ["path", "rows/s", "ratio vs raw"],
      results.map((r) => [r.name, fmt(r.rate), fmt(r.rate / base, 2)]),
    ),
  );
  const api = results[1];
  if (api)
    console.log(
      `\nSeriesStore (questdb) / raw sender = ${fmt(api.rate / base, 2)}: ${verdict(api.rate / base, 0.8)}`,
    );
}

function makeRows(n: number): Sample[] {
  const start = Date.now() - n * 1000;
  const rows: Sample[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const available = i % 50 !== 0;
    rows[i] = {
      ts: new Date(start + i * 1000),
      connection_id: `conn-${i % 1000}`,
      available,
      response_time_ms: 40 + (i % 200),
      status_code: available ? 200 : 503,
      reason: available ? null : "http_status",
      error: available ? null : "HTTP 503",
      synthetic: false,
      source: "probe",
    };
  }
  return rows;
}

async function timed(label: string, total: number, fn: () => Promise<void>): Promise<number> {
  process.stderr.write(`${label}...\n`);
  const t0 = process.hrtime.bigint();
  await fn();
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  return total / secs;
}

/** What a hand-written ILP writer does: the same columns, one flush per batch. */
async function rawWrite(httpUrl: string, tableName: string, rows: Sample[], batch: number): Promise<void> {
  const u = new URL(httpUrl);
  const sender = await Sender.fromConfig(`http::addr=${u.hostname}:${u.port || 9000};auto_flush=off;`);
  const tick = progress("  raw");
  for (let i = 0; i < rows.length; i += batch) {
    const end = Math.min(i + batch, rows.length);
    for (let j = i; j < end; j++) {
      const r = rows[j] as Sample;
      sender.table(tableName).symbol("connection_id", r.connection_id).symbol("source", r.source);
      if (r.reason) sender.symbol("reason", r.reason);
      sender.booleanColumn("available", r.available);
      if (r.response_time_ms != null) sender.floatColumn("response_time_ms", r.response_time_ms);
      if (r.status_code != null) sender.intColumn("status_code", r.status_code);
      if (r.error) sender.stringColumn("error", r.error);
      sender.booleanColumn("synthetic", r.synthetic);
      await sender.at(r.ts.getTime(), "ms");
    }
    await sender.flush();
    tick(end, rows.length);
  }
  await sender.close();
}

async function appendAll(store: SeriesStore, rows: Sample[], batch: number): Promise<void> {
  const tick = progress("  api");
  for (let i = 0; i < rows.length; i += batch) {
    const end = Math.min(i + batch, rows.length);
    await store.append(availabilitySamples, rows.slice(i, end));
    tick(end, rows.length);
  }
}

async function postgresRate(
  config: Config,
  rows: Sample[],
  batch: number,
  log: (s: string) => void,
): Promise<number | null> {
  let scratch: Awaited<ReturnType<typeof throwawayDatabase>>;
  try {
    scratch = await throwawayDatabase(config);
  } catch (err) {
    log(`${(err as Error).message}: sql backend skipped`);
    return null;
  }
  const db = createPgStore({ connectionString: scratch.url });
  try {
    await migrate(db);
    const store = createSqlSeriesStore(db);
    const rate = await timed("SeriesStore (sql on PostgreSQL)", rows.length, () =>
      appendAll(store, rows, batch),
    );
    await store.close();
    return rate;
  } finally {
    await db.close();
    await scratch.drop();
  }
}
