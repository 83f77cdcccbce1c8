import { execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import type { Config } from "../../src/config.js";
import { packageRoot } from "../../src/lib/paths.js";

export interface QuestdbTarget {
  httpUrl: string;
  pgUrl: string;
  stop(): void;
}

/**
 * The QuestDB a benchmark writes to: QUESTDB_URL when set, else a private server started with
 * scripts/questdb.sh on its own ports and folder, and stopped when the benchmark ends.
 */
export function benchQuestdb(config: Config, log: (s: string) => void): QuestdbTarget {
  if (config.questdb) return { ...config.questdb, stop() {} };
  const env = {
    ...process.env,
    QUESTDB_DIR: path.join(packageRoot, ".questdb/bench"),
    QUESTDB_HTTP_PORT: "19200",
    QUESTDB_PG_PORT: "19212",
    QUESTDB_ILP_PORT: "19209",
    QUESTDB_HTTP_MIN_PORT: "19203",
  };
  const script = path.join(packageRoot, "scripts/questdb.sh");
  log("QUESTDB_URL is unset: starting a private QuestDB for this run (scripts/questdb.sh)");
  execFileSync("bash", [script, "start"], { env, stdio: ["ignore", "inherit", "inherit"] });
  return {
    httpUrl: "http://127.0.0.1:19200",
    pgUrl: "postgres://admin:quest@127.0.0.1:19212/qdb",
    stop() {
      execFileSync("bash", [script, "stop"], { env, stdio: ["ignore", "inherit", "inherit"] });
    },
  };
}

export interface PrivateQuestdb extends QuestdbTarget {
  /** The server's data, config and log folder (removed by `stop()` unless `keep`). */
  dir: string;
  /** The JVM's pid, for RSS and CPU. */
  pid: number | undefined;
  /** The server's own log (scripts/questdb.sh writes it in `dir`). */
  logFile: string;
}

/** Distinct free TCP ports on loopback, asked for together so no two are the same. */
export async function freePorts(n: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      servers.push(s);
      await new Promise<void>((resolve, reject) => {
        s.once("error", reject);
        s.listen(0, "127.0.0.1", () => resolve());
      });
      ports.push((s.address() as net.AddressInfo).port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  }
}

/**
 * A QuestDB of this benchmark's own, on free ports and in a fresh temporary folder
 * (scripts/questdb.sh), for benchmarks whose Vigil runs as `vigil serve`: that process has no
 * table prefix, so on a shared server it would write into everyone's tables. `stop()` stops the
 * server and removes the folder (copy `logFile` first to keep it).
 */
export async function privateQuestdb(
  log: (s: string) => void,
  opts: { heap?: string; label?: string } = {},
): Promise<PrivateQuestdb> {
  try {
    return await startPrivateQuestdb(log, opts);
  } catch {
    // another process may have taken a port between freePorts() and the bind: once more, on new ones
    log("the private QuestDB did not start; trying once more on other ports");
    return startPrivateQuestdb(log, opts);
  }
}

async function startPrivateQuestdb(
  log: (s: string) => void,
  opts: { heap?: string; label?: string },
): Promise<PrivateQuestdb> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `vigil-${opts.label ?? "bench"}-qdb-`));
  const [http, httpMin, pgPort, ilp] = (await freePorts(4)) as [number, number, number, number];
  const env = {
    ...process.env,
    QUESTDB_DIR: dir,
    QUESTDB_HTTP_PORT: String(http),
    QUESTDB_HTTP_MIN_PORT: String(httpMin),
    QUESTDB_PG_PORT: String(pgPort),
    QUESTDB_ILP_PORT: String(ilp),
    QUESTDB_HEAP: opts.heap ?? "1g",
  };
  const script = path.join(packageRoot, "scripts/questdb.sh");
  log(`starting a private QuestDB in ${dir} (http ${http}, pg-wire ${pgPort})`);
  try {
    execFileSync("bash", [script, "start"], { env, stdio: ["ignore", "inherit", "inherit"] });
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const pgUrl = `postgres://admin:quest@127.0.0.1:${pgPort}/qdb`;
  // the HTTP port answers first; pg-wire follows
  for (let i = 0; i < 200; i++) {
    const c = new pg.Client({ connectionString: pgUrl, connectionTimeoutMillis: 2000 });
    const ok = await c
      .connect()
      .then(() => c.query("SELECT 1"))
      .then(() => true)
      .catch(() => false);
    await c.end().catch(() => {});
    if (ok) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const pidText = fs.readFileSync(path.join(dir, "questdb.pid"), "utf8").trim();
  let stopped = false;
  return {
    httpUrl: `http://127.0.0.1:${http}`,
    pgUrl,
    dir,
    pid: Number(pidText) || undefined,
    logFile: path.join(dir, "questdb.log"),
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        execFileSync("bash", [script, "stop"], { env, stdio: ["ignore", "inherit", "inherit"] });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Drops every table whose name starts with `prefix` (a benchmark's own tables). */
export async function dropPrefixed(pool: pg.Pool, prefix: string): Promise<void> {
  const r = await pool.query("SELECT table_name FROM tables() WHERE table_name LIKE $1", [`${prefix}%`]);
  for (const t of r.rows as { table_name: string }[])
    await pool.query(`DROP TABLE IF EXISTS ${t.table_name}`);
}

/**
 * Seeds `<prefix>availability_samples` on the server (INSERT … SELECT from long_sequence), one
 * statement per day so progress shows: a sample every `everyMinutes` for each of `connections`
 * connections from `start`, 1 % failing at random. `idOf` is the SQL of a connection's id from the
 * SQL of its index (0 to connections − 1).
 */
export async function seedAvailabilitySamples(
  pool: pg.Pool,
  o: {
    prefix: string;
    start: number;
    days: number;
    connections: number;
    everyMinutes: number;
    idOf: (indexSql: string) => string;
  },
): Promise<void> {
  const n = o.connections;
  for (let d = 0; d < o.days; d++) {
    const dayStart = new Date(o.start + d * 86_400_000).toISOString();
    await pool.query(
      `INSERT INTO ${o.prefix}availability_samples
       SELECT dateadd('m', ((x - 1) / ${n})::int * ${o.everyMinutes}, '${dayStart}'::timestamp) AS ts,
              ${o.idOf(`((x - 1) % ${n})`)} AS connection_id,
              rnd_double() > 0.01 AS available, 20 + rnd_double() * 200 AS response_time_ms,
              200L AS status_code, null AS reason, null AS error, false AS synthetic, 'probe' AS source,
              false AS maintenance
         FROM long_sequence(${(n * 1440) / o.everyMinutes})`,
    );
    process.stderr.write(`\r  day ${d + 1}/${o.days}`);
  }
}
