import { randomBytes } from "node:crypto";
import pg from "pg";
import type { Test } from "tap";
import { migrate } from "../../src/stores/relational/migrate.js";
import { createPgStore } from "../../src/stores/relational/pg.js";
import { createPgliteStore } from "../../src/stores/relational/pglite.js";
import type { RelationalStore } from "../../src/stores/relational/types.js";
import {
  applyQuestdbSchema,
  createQuestdbSeriesStore,
  questdbPool,
} from "../../src/stores/series/questdb.js";
import { createSqlSeriesStore } from "../../src/stores/series/sql.js";
import type { SeriesStore } from "../../src/stores/series/types.js";

/**
 * Real stores for tests. Each call gives the test a private place: a fresh in-memory PGlite,
 * a fresh Postgres database (dropped at teardown), or a fresh QuestDB table prefix (tables
 * dropped at teardown), so tests running in parallel never see each other's rows.
 *
 * Postgres and QuestDB are used when reachable (TEST_DATABASE_URL, TEST_QUESTDB_URL; `npm test`
 * sets them). Under CI=true an unreachable backend fails the test instead of skipping it.
 */
export const TEST_DATABASE_URL =
  process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const TEST_QUESTDB_URL = process.env.TEST_QUESTDB_URL;
export const TEST_QUESTDB_PG_URL =
  process.env.TEST_QUESTDB_PG_URL ??
  (TEST_QUESTDB_URL ? `postgres://admin:quest@${new URL(TEST_QUESTDB_URL).hostname}:8812/qdb` : undefined);
const IN_CI = process.env.CI === "true";

export const uniqueName = (prefix: string) =>
  `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;

async function reachable(connectionString: string | undefined): Promise<string | null> {
  if (!connectionString) return "not configured";
  const c = new pg.Client({ connectionString, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    await c.query("SELECT 1");
    return null;
  } catch (err) {
    return (err as Error).message;
  } finally {
    await c.end().catch(() => {});
  }
}

export const postgresProblem = reachable(TEST_DATABASE_URL);
export const questdbProblem = reachable(TEST_QUESTDB_PG_URL);

export type BackendName = "pglite" | "postgres" | "questdb";

/** Skips (or, in CI, fails) when a backend is missing; returns false when the test should not go on. */
export async function requireBackend(t: Test, name: BackendName): Promise<boolean> {
  if (name === "pglite") return true;
  const problem = await (name === "postgres" ? postgresProblem : questdbProblem);
  if (!problem) return true;
  if (IN_CI) t.fail(`${name} is required under CI=true but unreachable: ${problem}`);
  else t.plan(0, `${name} unreachable (${problem})`);
  return false;
}

/** A migrated relational store of its own for this test. */
export async function freshRelational(t: Test, name: "pglite" | "postgres"): Promise<RelationalStore> {
  if (name === "pglite") {
    const db = await createPgliteStore();
    t.teardown(() => db.close());
    await migrate(db);
    return db;
  }
  const dbName = uniqueName("vigil_test");
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${dbName}`;
  const db = createPgStore({ connectionString: url.toString(), max: 5 });
  t.teardown(async () => {
    await db.close();
    const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await c.end();
  });
  await migrate(db);
  return db;
}

/** The URL of a fresh, empty Postgres database (dropped at teardown), for child processes. */
export async function freshDatabaseUrl(t: Test): Promise<string> {
  const dbName = uniqueName("vigil_test");
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  t.teardown(async () => {
    const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await c.end();
  });
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${dbName}`;
  return url.toString();
}

/**
 * A series store of the given backend, with its own database or table prefix. `questdbHttpUrl`
 * sends the QuestDB store's writes elsewhere (e.g. through a proxy in front of the test server).
 */
export async function freshSeries(
  t: Test,
  name: BackendName,
  opts: { questdbHttpUrl?: string } = {},
): Promise<SeriesStore> {
  if (name !== "questdb") {
    const series = createSqlSeriesStore(await freshRelational(t, name));
    t.teardown(() => series.close());
    return series;
  }
  const prefix = `${uniqueName("t")}_`;
  const pool = questdbPool(TEST_QUESTDB_PG_URL as string, 1);
  await applyQuestdbSchema(pool, prefix);
  const series = await createQuestdbSeriesStore({
    httpUrl: opts.questdbHttpUrl ?? (TEST_QUESTDB_URL as string),
    pgUrl: TEST_QUESTDB_PG_URL as string,
    tablePrefix: prefix,
  });
  t.teardown(async () => {
    await series.close();
    const tables = await pool.query("SELECT table_name FROM tables() WHERE table_name LIKE $1", [
      `${prefix}%`,
    ]);
    for (const r of tables.rows as { table_name: string }[])
      await pool.query(`DROP TABLE IF EXISTS ${r.table_name}`);
    await pool.end();
  });
  return series;
}

export const ALL_BACKENDS: BackendName[] = ["pglite", "postgres", "questdb"];
