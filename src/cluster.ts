import cluster, { type Worker } from "node:cluster";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import type { Config } from "./config.js";
import type { Role } from "./server.js";
import { clusterMetricsSource } from "./lib/metrics.js";
import { startMetricsListener } from "./metrics-server.js";

/**
 * `vigil serve --workers N`: one host's Vigil as several processes with `node:cluster`.
 *
 * The primary serves nothing itself; it forks and supervises:
 *  - N API workers (`api-1` … `api-N`), each `vigil serve --roles api`, all listening on the one
 *    PORT (the primary accepts connections and hands them to the workers in turn, Node's
 *    round-robin scheduling);
 *  - when the probe or jobs role is asked for too (the default: every role), one more worker,
 *    `background`, with those roles. Probe checks and cluster jobs coordinate across processes
 *    through PostgreSQL (leases, advisory locks), but N copies of them on one host would only add
 *    connection-pool pressure and scheduler work to what one process does well; API work is what
 *    needs more cores.
 *
 * Every worker is a complete `vigil serve` with its own PostgreSQL pool and QuestDB sender, so what
 * holds across separate processes behind a load balancer (shared rate limits, keys re-read within
 * 3 s, heartbeat dedupe in the series store, leases, job locks) holds here. PostgreSQL is needed:
 * the embedded PGlite folder belongs to one process.
 *
 * A worker that exits on its own is forked again after a back-off (1 s, doubling to 30 s; back to
 * 1 s once a worker has run for a minute); one that exits 5 times in a row before it comes up
 * (listening, or its stores ready) stops the whole (exit 1), as a failing `vigil serve` does. SIGTERM or SIGINT to the primary drains every worker
 * (each stops accepting, finishes its requests, flushes series writes, closes its pools) and the
 * primary exits 0 once all have; a second signal, or workers still running after 25 s, ends them
 * with SIGKILL and exit 1. Every log line of a worker carries `worker` (its name) and `pid`.
 */

/** How long a worker waits for the primary's answer to a metrics request (prom-client's own wait is 5 s). */
const METRICS_WAIT_MS = 6_000;
let metricsRequests = 0;
const metricsWaiting = new Map<number, { resolve: (text: string) => void; reject: (err: Error) => void }>();

/**
 * A worker's scrape of `GET /metrics` (METRICS_TOKEN on the API port): the whole group's metrics,
 * asked of the primary, which asks every worker for its text and sums them (clusterMetricsSource).
 */
export function askPrimaryForMetrics(): Promise<string> {
  if (metricsWaiting.size === 0 && metricsRequests === 0)
    process.on("message", (m: { vigil?: string; id?: number; text?: string; error?: string } | null) => {
      if (m?.vigil !== "metrics" || typeof m.id !== "number") return;
      const waiting = metricsWaiting.get(m.id);
      if (!waiting) return;
      metricsWaiting.delete(m.id);
      if (typeof m.text === "string") waiting.resolve(m.text);
      else waiting.reject(new Error(m.error ?? "the primary sent no metrics"));
    });
  const id = ++metricsRequests;
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      metricsWaiting.delete(id);
      reject(new Error("the primary did not answer the metrics request"));
    }, METRICS_WAIT_MS);
    metricsWaiting.set(id, {
      resolve: (text) => {
        clearTimeout(timer);
        resolve(text);
      },
      reject: (err) => {
        clearTimeout(timer);
        reject(err);
      },
    });
    process.send?.({ vigil: "metrics-request", id });
  });
}

export interface WorkerSpec {
  name: string;
  roles: Role[];
}

/** The processes `--workers count` runs for `roles`. */
export function workerPlan(roles: Role[], count: number): WorkerSpec[] {
  if (!roles.includes("api"))
    throw new Error("--workers: the workers serve the API; include the api role (or leave --roles out)");
  const specs: WorkerSpec[] = Array.from({ length: count }, (_, i) => ({
    name: `api-${i + 1}`,
    roles: ["api"] as Role[],
  }));
  const background = roles.filter((r) => r !== "api");
  if (background.length > 0) specs.push({ name: "background", roles: background });
  return specs;
}

/** Parses `--workers`: a whole number from 1 to 64. */
export function parseWorkers(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 64)
    throw new Error(`--workers: must be a whole number from 1 to 64, got ${JSON.stringify(value)}`);
  return n;
}

const BACKOFF_START_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
/** A worker that ran this long before exiting restarts after the shortest back-off again. */
const STABLE_MS = 60_000;
const DRAIN_MS = 25_000;
const FIRST_READY_WAIT_MS = 10_000;
const MAX_FAILED_STARTS = 5;

interface Slot extends WorkerSpec {
  worker?: Worker;
  startedAt: number;
  failures: number;
  /** Exits in a row of workers of this slot that never came up (listening, or stores ready). */
  failedStarts: number;
  up: boolean;
  restartTimer?: NodeJS.Timeout;
}

/** The primary of `vigil serve --workers N`: forks the workers and supervises them until a signal. */
export function servePrimary(config: Config, roles: Role[], count: number, log: Logger): void {
  if (!config.databaseUrl)
    throw new Error(
      "--workers needs PostgreSQL (DATABASE_URL): the embedded PGlite folder can be opened by one process only",
    );
  const plan = workerPlan(roles, count);
  // every worker's metrics summed, for the admin listener (METRICS_PORT) and workers' /metrics
  const groupMetrics = clusterMetricsSource();
  const plog = log.child({ worker: "primary" });
  const cli = fileURLToPath(new URL("./cli.js", import.meta.url));
  const slots: Slot[] = plan.map((s) => ({ ...s, startedAt: 0, failures: 0, failedStarts: 0, up: false }));
  const byWorker = new Map<Worker, Slot>();
  let stopping = false;
  let announced = false;

  const fork = (slot: Slot) => {
    slot.restartTimer = undefined;
    if (stopping) return;
    // settings apply to the next fork: each worker gets its own roles and name on its command line
    cluster.setupPrimary({
      exec: cli,
      args: ["serve", "--roles", slot.roles.join(","), "--worker", slot.name],
    });
    const w = cluster.fork();
    slot.worker = w;
    slot.startedAt = Date.now();
    slot.up = false;
    byWorker.set(w, slot);
    w.on("message", (m: unknown) => {
      const msg = m as { vigil?: string; id?: number } | null;
      if (msg?.vigil === "stores-ready") cameUp(slot);
      if (msg?.vigil === "metrics-request")
        groupMetrics().then(
          (body) =>
            w.isConnected() &&
            w.send({
              vigil: "metrics",
              id: msg.id,
              text: typeof body === "string" ? body : body.toString("utf8"),
            }),
          (err: unknown) =>
            w.isConnected() && w.send({ vigil: "metrics", id: msg.id, error: (err as Error).message }),
        );
    });
    plog.info({ name: slot.name, roles: slot.roles, workerPid: w.process.pid }, "worker started");
  };

  const cameUp = (slot: Slot) => {
    slot.up = true;
    slot.failedStarts = 0;
  };

  cluster.on("listening", (w, address) => {
    const slot = byWorker.get(w);
    if (slot) cameUp(slot);
    if (announced) return;
    announced = true;
    const host = address.address ?? config.host;
    plog.info(
      { workers: count, background: slots.some((s) => s.name === "background") },
      `API workers listening at http://${host.includes(":") ? `[${host}]` : host}:${address.port}`,
    );
  });

  cluster.on("exit", (w, code, signal) => {
    const slot = byWorker.get(w);
    byWorker.delete(w);
    if (!slot) return;
    slot.worker = undefined;
    if (stopping) {
      plog.info({ name: slot.name, workerPid: w.process.pid, code, signal }, "worker stopped");
      if (byWorker.size === 0) finish();
      return;
    }
    if (!slot.up && ++slot.failedStarts >= MAX_FAILED_STARTS) {
      // a configuration or start-up error (e.g. the port is taken, a migration fails): restarting
      // will not help, and a single `vigil serve` would have stopped too
      plog.fatal(
        { name: slot.name, workerPid: w.process.pid, code, signal },
        `worker ${slot.name} exited before it came up ${MAX_FAILED_STARTS} times in a row; stopping`,
      );
      exitCode = 1;
      shutdown("worker start-up failures");
      return;
    }
    if (Date.now() - slot.startedAt >= STABLE_MS) slot.failures = 0;
    slot.failures++;
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_START_MS * 2 ** (slot.failures - 1));
    plog.error(
      { name: slot.name, workerPid: w.process.pid, code, signal, restartInMs: delay },
      `worker ${slot.name} exited; restarting in ${delay / 1000} s`,
    );
    slot.restartTimer = setTimeout(() => fork(slot), delay);
  });

  let exitCode = 0;
  let force: NodeJS.Timeout | undefined;
  const finish = () => {
    if (force) clearTimeout(force);
    plog.info("shutdown complete");
    setImmediate(() => process.exit(exitCode));
  };

  const shutdown = (signal: string) => {
    if (stopping) {
      plog.warn({ signal }, "second signal: killing the workers without waiting");
      for (const w of byWorker.keys()) w.process.kill("SIGKILL");
      exitCode = 1;
      setTimeout(() => process.exit(1), 500).unref();
      return;
    }
    stopping = true;
    plog.info({ signal, workers: byWorker.size }, "shutting down: draining every worker");
    for (const s of slots) if (s.restartTimer) clearTimeout(s.restartTimer);
    if (byWorker.size === 0) return finish();
    // SIGTERM each worker: it drains like a single `vigil serve` (a worker ignores a second signal,
    // e.g. a terminal's Ctrl-C reaching both it and the primary)
    for (const w of byWorker.keys()) w.process.kill("SIGTERM");
    force = setTimeout(() => {
      plog.error(
        { workers: [...byWorker.values()].map((s) => s.name) },
        "workers still running after 25 s; killing them",
      );
      exitCode = 1;
      for (const w of byWorker.keys()) w.process.kill("SIGKILL");
    }, DRAIN_MS);
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
  if (config.metrics.port !== undefined)
    startMetricsListener(config, groupMetrics, plog).catch((err: unknown) => {
      plog.fatal(
        `the metrics listener cannot listen on ${config.metrics.host}:${config.metrics.port} (${(err as Error).message}); choose another METRICS_PORT`,
      );
      exitCode = 1;
      shutdown("metrics listener failed");
    });

  plog.info(
    { workers: plan.map((s) => `${s.name} (${s.roles.join(",")})`) },
    `Vigil primary: ${count} API worker${count === 1 ? "" : "s"}${plan.length > count ? " + one background worker" : ""}`,
  );
  // The first worker applies the migrations and the QuestDB schema alone; the others start once it
  // says its stores are ready (or after 10 s, or if it exits), so no two apply DDL at once.
  const [first, ...rest] = slots as [Slot, ...Slot[]];
  fork(first);
  let restStarted = false;
  const startRest = () => {
    if (restStarted) return;
    restStarted = true;
    clearTimeout(wait);
    for (const slot of rest) fork(slot);
  };
  const wait = setTimeout(startRest, FIRST_READY_WAIT_MS);
  first.worker?.on("message", (m: unknown) => {
    if ((m as { vigil?: string } | null)?.vigil === "stores-ready") startRest();
  });
  first.worker?.on("exit", startRest);
}
