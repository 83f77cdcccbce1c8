import { type AppContext, perApp } from "../core/context.js";
import { jobDuration, jobRuns } from "../lib/metrics.js";
import { claimJobPeriod, tryJobLock } from "./repository.js";

/**
 * A periodic job: what runs, how often, and under which lock. Jobs are plain functions of the
 * context; the runner owns their timers, locking and failure logging.
 */
export interface Job {
  /** For logs (`job: "rollups"`). */
  name: string;
  /**
   * Pause between the end of one run and the start of the next; the first run is at start. A
   * function reads it from the context (a configured interval).
   */
  intervalMs: number | ((ctx: AppContext) => number);
  /**
   * The cluster-wide lock: jobs sharing a key never run at once, on one node or across nodes
   * (on PostgreSQL a transaction-scoped advisory lock, skipped when another node holds it; on
   * PGlite, one process by construction). Null: no cluster lock, for a job that reports on this
   * process's own state (probe stats) or coordinates itself row by row (e-mail delivery claims
   * each e-mail with SKIP LOCKED).
   */
  lock: number | null;
  run(ctx: AppContext): Promise<unknown>;
}

/**
 * Lock keys, any fixed 32-bit numbers distinct from the migration lock. Rollups and expiry
 * share one so two nodes (or two jobs of one node) never rewrite a partition at once.
 */
export const JOB_LOCKS = {
  retention: 0x76676c02,
  heartbeatMonitor: 0x76676c03,
  probeHousekeeping: 0x76676c05,
  oauthHousekeeping: 0x76676c06,
  budgets: 0x76676c0b,
  sloBurn: 0x76676c0c,
  anomalyDetector: 0x76676c07,
} as const;

/** In-process turn-taking per lock key: a job waits for another of this process holding its key. */
const localTurns = perApp(() => new Map<number, Promise<unknown>>());

/**
 * A periodic run (the runner's) may start this much sooner than its interval after another node's
 * run and still count as the next period's: timers drift, and the interval is a pause after a run.
 */
const PERIOD_SLACK = 0.9;

/**
 * Runs one job once under its lock. Resolves with whether it ran (false: another node holds the
 * lock, or, with `oncePerPeriod`, another node ran it within its interval); a job's own failure
 * rejects.
 */
export async function runJob(
  ctx: AppContext,
  job: Job,
  opts: { oncePerPeriod?: boolean } = {},
): Promise<boolean> {
  if (job.lock === null) {
    await job.run(ctx);
    return true;
  }
  const key = job.lock;
  const turns = localTurns(ctx);
  const before = turns.get(key) ?? Promise.resolve();
  const mine = before
    .catch(() => undefined)
    .then(() => underLock(ctx, key, job, opts.oncePerPeriod ?? false));
  turns.set(
    key,
    mine.catch(() => undefined),
  );
  return mine;
}

async function underLock(ctx: AppContext, key: number, job: Job, oncePerPeriod: boolean): Promise<boolean> {
  const db = ctx.stores.db;
  if (db.kind === "pglite") {
    await job.run(ctx);
    return true;
  }
  // The lock lives as long as this transaction; the job's own statements use other connections.
  return db.transaction(async (tx) => {
    if (!(await tryJobLock(tx, key))) return false;
    if (oncePerPeriod) {
      const interval = typeof job.intervalMs === "function" ? job.intervalMs(ctx) : job.intervalMs;
      if (!(await claimJobPeriod(tx, job.name, interval * PERIOD_SLACK))) return false;
    }
    await job.run(ctx);
    return true;
  });
}

/**
 * The one periodic job runner of a process: each job runs at start, then `intervalMs` after its
 * previous run ended; a failed run is logged and retried at the next one. `stop` waits for the
 * runs in progress.
 */
export class JobRunner {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly running = new Set<Promise<unknown>>();
  private stopped = false;

  constructor(
    private readonly ctx: AppContext,
    private readonly jobs: readonly Job[],
  ) {}

  start(): void {
    for (const job of this.jobs) {
      const loop = async () => {
        if (this.stopped) return;
        const timer = jobDuration.startTimer({ job: job.name });
        const run = runJob(this.ctx, job, { oncePerPeriod: true }).then(
          (ran) => {
            timer();
            jobRuns.labels(job.name, ran ? "ran" : "skipped").inc();
          },
          (err: unknown) => {
            timer();
            jobRuns.labels(job.name, "failed").inc();
            this.ctx.log.warn(
              {
                job: job.name,
                err: err instanceof Error ? err.message : String(err),
              },
              "job failed; retrying at the next run",
            );
          },
        );
        this.running.add(run);
        await run;
        this.running.delete(run);
        if (!this.stopped)
          this.timers.set(
            job.name,
            setTimeout(
              loop,
              typeof job.intervalMs === "function" ? job.intervalMs(this.ctx) : job.intervalMs,
            ),
          );
      };
      void loop();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    await Promise.all([...this.running]);
  }
}
