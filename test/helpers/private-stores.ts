import { execFile } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import type { Test } from "tap";
import { packageRoot } from "../../src/lib/paths.js";

/**
 * A PostgreSQL cluster and a QuestDB server of the test's own, on free ports and in temporary
 * folders, that the test may stop and start at will. Fault tests use them because stopping the
 * machine's shared PostgreSQL (5432) or the dev/CI QuestDB (19200/19100) would break every other
 * test running at the same time. Both are stopped and their folders removed at teardown.
 *
 * When one cannot be started (no PostgreSQL binaries, no Java, no QuestDB jar), `privateStores`
 * says why: the caller skips, or fails under CI=true.
 */

const run = promisify(execFile);
const IN_CI = process.env.CI === "true";

/** A TCP port nobody listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Distinct free ports (asked for together, so two of them cannot be the same). */
async function freePorts(n: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      servers.push(s);
      await new Promise<void>((resolve, reject) => {
        s.on("error", reject);
        s.listen(0, "127.0.0.1", () => resolve());
      });
      ports.push((s.address() as net.AddressInfo).port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  }
}

/** Stops and starts a server the test owns; `url` stays valid across restarts. */
export interface PrivateServer {
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Whether it is running (as far as this helper knows). */
  readonly running: boolean;
}

export interface PrivatePostgres extends PrivateServer {
  /** Superuser URL of the cluster's `postgres` database. */
  url: string;
  port: number;
}

export interface PrivateQuestdb extends PrivateServer {
  httpUrl: string;
  pgUrl: string;
}

/** The newest installed PostgreSQL's bin folder, or null. */
function postgresBin(): string | null {
  const candidates: string[] = [];
  const base = "/usr/lib/postgresql";
  if (fs.existsSync(base))
    for (const v of fs.readdirSync(base).sort((a, b) => Number(b) - Number(a)))
      candidates.push(path.join(base, v, "bin"));
  for (const dir of (process.env.PATH ?? "").split(":")) candidates.push(dir);
  return (
    candidates.find((d) => fs.existsSync(path.join(d, "initdb")) && fs.existsSync(path.join(d, "pg_ctl"))) ??
    null
  );
}

/**
 * Runs a PostgreSQL tool. initdb and postgres refuse to run as root, so as root it runs as the
 * `postgres` OS user (runuser, else su); otherwise as the current user.
 */
async function asPgUser(bin: string, args: string[], timeoutMs = 60_000): Promise<string> {
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  if (!isRoot) return (await run(bin, args, { timeout: timeoutMs })).stdout;
  const quoted = [bin, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" ");
  try {
    return (await run("runuser", ["-u", "postgres", "--", bin, ...args], { timeout: timeoutMs })).stdout;
  } catch (err) {
    if ((err as { code?: string }).code !== "ENOENT") throw err;
    return (await run("su", ["postgres", "-s", "/bin/sh", "-c", quoted], { timeout: timeoutMs })).stdout;
  }
}

async function answersSql(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await c.connect();
    await c.query("SELECT 1");
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => {});
  }
}

/** initdb into a temporary folder and start it on a free port; stopped and removed at teardown. */
export async function startPrivatePostgres(t: Test): Promise<PrivatePostgres> {
  const bin = postgresBin();
  if (!bin)
    throw new Error("no PostgreSQL server binaries (initdb, pg_ctl) found under /usr/lib/postgresql or PATH");
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-faults-pg-"));
  const data = path.join(dir, "data");
  const log = path.join(dir, "postgres.log");
  if (isRoot) {
    // the postgres user must own the folder, and reach it through the temporary directory
    fs.chmodSync(dir, 0o755);
    await run("chown", ["postgres", dir]);
  }
  const port = (await freePorts(1))[0] as number;
  let running = false;
  const cleanup = async () => {
    if (running) await pgctl(["-m", "immediate", "stop"]).catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  };
  t.teardown(cleanup);
  const pgctl = (args: string[]) =>
    asPgUser(path.join(bin, "pg_ctl"), ["-D", data, "-l", log, "-w", "-t", "60", ...args], 90_000);

  await asPgUser(path.join(bin, "initdb"), [
    "-D",
    data,
    "-A",
    "trust",
    "-U",
    "postgres",
    "--no-sync",
    "-E",
    "UTF8",
  ]);
  const options = [
    `-p ${port}`,
    "-c listen_addresses=127.0.0.1",
    `-c unix_socket_directories=${dir}`,
    // a throwaway cluster: no need to wait for the disk
    "-c fsync=off",
    "-c synchronous_commit=off",
    "-c full_page_writes=off",
    "-c max_connections=100",
    "-c shared_buffers=32MB",
  ].join(" ");
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const server: PrivatePostgres = {
    url,
    port,
    get running() {
      return running;
    },
    async start() {
      await pgctl(["-o", options, "start"]);
      running = true;
      for (let i = 0; i < 100 && !(await answersSql(url)); i++) await new Promise((r) => setTimeout(r, 100));
    },
    async stop() {
      // fast: active sessions are cut off at once, as when a database server goes away
      await pgctl(["-m", "fast", "stop"]);
      running = false;
    },
  };
  await server.start();
  return server;
}

/** The pinned QuestDB through scripts/questdb.sh, in a temporary folder on free ports. */
export async function startPrivateQuestdb(t: Test): Promise<PrivateQuestdb> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "vigil-faults-qdb-"));
  const [http, httpMin, pgPort, ilp] = (await freePorts(4)) as [number, number, number, number];
  const env = {
    ...process.env,
    QUESTDB_DIR: dir,
    QUESTDB_HTTP_PORT: String(http),
    QUESTDB_HTTP_MIN_PORT: String(httpMin),
    QUESTDB_PG_PORT: String(pgPort),
    QUESTDB_ILP_PORT: String(ilp),
    QUESTDB_HEAP: process.env.QUESTDB_HEAP ?? "512m",
  };
  const script = path.join(packageRoot, "scripts/questdb.sh");
  let running = false;
  const qdb = (cmd: string) => run("bash", [script, cmd], { env, timeout: 120_000 });
  t.teardown(async () => {
    await qdb("stop").catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const pgUrl = `postgres://admin:quest@127.0.0.1:${pgPort}/qdb`;
  const server: PrivateQuestdb = {
    httpUrl: `http://127.0.0.1:${http}`,
    pgUrl,
    get running() {
      return running;
    },
    async start() {
      await qdb("start");
      running = true;
      // the HTTP port answers first; pg-wire follows
      for (let i = 0; i < 200 && !(await answersSql(pgUrl)); i++)
        await new Promise((r) => setTimeout(r, 100));
    },
    async stop() {
      await qdb("stop");
      running = false;
    },
  };
  await server.start();
  return server;
}

/**
 * Starts what `want` names, or returns why it could not: the test then skips (`t.plan(0, …)`),
 * except under CI=true, where a missing private store fails the test.
 */
export async function privateStores<W extends { postgres?: boolean; questdb?: boolean }>(
  t: Test,
  want: W,
): Promise<{ postgres?: PrivatePostgres; questdb?: PrivateQuestdb } | null> {
  const out: { postgres?: PrivatePostgres; questdb?: PrivateQuestdb } = {};
  try {
    if (want.postgres) out.postgres = await startPrivatePostgres(t);
  } catch (err) {
    const why = `a private PostgreSQL cluster could not be started: ${(err as Error).message}`;
    if (IN_CI) t.fail(why);
    else t.plan(0, why);
    return null;
  }
  try {
    if (want.questdb) out.questdb = await startPrivateQuestdb(t);
  } catch (err) {
    const e = err as Error & { stderr?: string };
    const why = `a private QuestDB could not be started: ${(e.stderr || e.message).trim().split("\n").pop()}`;
    if (IN_CI) t.fail(why);
    else t.plan(0, why);
    return null;
  }
  return out;
}
