import { detectAnomalies } from "../anomalies/detect.js";
import { SETTLE_MS } from "../anomalies/late.js";
import { runBudgetChecks } from "../budgets/job.js";
import { runSloBurnChecks } from "../slo/job.js";
import { drainChannels } from "../channels/delivery.js";
import { runEscalations } from "../channels/escalation.js";
import type { AppContext } from "../core/context.js";
import type { DeliveryJob } from "../notifications/delivery.js";
import { releaseStaleLeases } from "../probes/claim.js";
import { watchHeartbeats } from "../probes/heartbeats.js";
import type { ProbeWorker } from "../probes/worker.js";
import { cleanUp as oauthCleanUp } from "../oauth/service.js";
import { expireJob, rollUpJob } from "../retention/job.js";
import { deliverWebhooks } from "../webhooks/delivery.js";
import { JOB_LOCKS, type Job } from "./runner.js";

/**
 * Every periodic job of Vigil, with its interval and lock (the intervals are those each job had
 * when it kept its own timer). The jobs role runs `clusterJobs`; a probe process runs
 * `probeProcessJobs` for its own worker.
 */
export function clusterJobs(delivery: DeliveryJob): Job[] {
  return [
    {
      name: "heartbeat-monitor",
      intervalMs: 10_000,
      lock: JOB_LOCKS.heartbeatMonitor,
      run: (ctx: AppContext) => watchHeartbeats(ctx),
    },
    rollupsJob,
    expiryJob,
    // no cluster lock: delivery claims each e-mail itself (FOR UPDATE SKIP LOCKED), and a lock held
    // through slow SMTP sends would pin a pool connection for as long
    { name: "delivery", intervalMs: 2_000, lock: null, run: () => delivery.tick() },
    webhookDeliveryJob,
    channelDeliveryJob,
    escalationsJob,
    probeHousekeepingJob,
    oauthHousekeepingJob,
    budgetsJob,
    sloBurnJob,
    anomalyDetectorJob,
  ];
}

/**
 * Outbound webhooks (src/webhooks/delivery.ts): like e-mail delivery, no cluster lock (each
 * notification is claimed with SKIP LOCKED), and a job of its own so a slow receiver never holds
 * up e-mail; runs whether or not SMTP_URL is set.
 */
export const webhookDeliveryJob: Job = {
  name: "webhook-delivery",
  intervalMs: 2_000,
  lock: null,
  run: (ctx) => deliverWebhooks(ctx),
};

/**
 * Channel deliveries (src/channels/delivery.ts: Slack, Teams, Discord, PagerDuty, Opsgenie,
 * Telegram, ntfy): no cluster lock (rows are claimed with SKIP LOCKED), a job of its own so a slow
 * provider never holds up e-mail or webhooks, every second so a page goes out within seconds.
 */
export const channelDeliveryJob: Job = {
  name: "channel-delivery",
  intervalMs: 1_000,
  lock: null,
  run: (ctx) => drainChannels(ctx),
};

/** Escalations and reminders of unacknowledged incidents (src/channels/escalation.ts); rows claimed with SKIP LOCKED. */
export const escalationsJob: Job = {
  name: "escalations",
  intervalMs: 15_000,
  lock: null,
  run: (ctx) => runEscalations(ctx),
};

/**
 * The anomaly detector (src/anomalies/detect.ts): judges every one-minute step since its last
 * run. Runs on a fixed cadence, every ANOMALY_INTERVAL_SECONDS counted from the epoch and 31 s
 * after it (12:00:31, 12:01:31, … with the default 60 s): just after each minute is settled, so a
 * step is judged as soon as it may be, and a slow run does not push the next ones later.
 */
export const anomalyDetectorJob: Job = {
  name: "anomaly-detector",
  intervalMs: (ctx) =>
    untilNextTick(Date.now(), ctx.config.anomalies.intervalSeconds * 1000, SETTLE_MS + 1000),
  lock: JOB_LOCKS.anomalyDetector,
  run: (ctx) => detectAnomalies(ctx),
};

/**
 * OAuth and sign-in housekeeping: expired codes, refresh tokens and sessions, old sign-in
 * counters, registrations nobody approved within a day and clients unused for 90 days.
 */
export const oauthHousekeepingJob: Job = {
  name: "oauth-housekeeping",
  intervalMs: 60 * 60_000,
  lock: JOB_LOCKS.oauthHousekeeping,
  run: async (ctx) => {
    await oauthCleanUp(ctx);
  },
};

/**
 * Monthly spend budgets (src/budgets/job.ts): warnings at 50, 80 and 100% and a projected overrun,
 * the `budget` incident; bounded work per run, the rest next run.
 */
export const budgetsJob: Job = {
  name: "budgets",
  intervalMs: 5 * 60_000,
  lock: JOB_LOCKS.budgets,
  run: (ctx) => runBudgetChecks(ctx),
};

/**
 * SLO burn-rate alerts (src/slo/job.ts): every SLO's burn rates against the SRE workbook's
 * multi-window conditions, the `slo_burn` incident opened and resolved; every minute, so a page
 * condition (1 h and 5 m at 14.4×) is seen within a minute of holding.
 */
export const sloBurnJob: Job = {
  name: "slo-burn",
  intervalMs: 60_000,
  lock: JOB_LOCKS.sloBurn,
  run: (ctx) => runSloBurnChecks(ctx),
};

export const rollupsJob: Job = {
  name: "rollups",
  intervalMs: 5 * 60_000,
  lock: JOB_LOCKS.retention,
  run: rollUpJob,
};

export const expiryJob: Job = {
  name: "expiry",
  intervalMs: 60 * 60_000,
  lock: JOB_LOCKS.retention,
  run: expireJob,
};

/**
 * Probe housekeeping, cluster-wide: clears the leases of probe workers that stopped or died
 * long ago (probes/claim.ts). Claiming takes over a run-out lease by itself; this keeps
 * `lease_owner` truthful for operators.
 */
export const probeHousekeepingJob: Job = {
  name: "probe-housekeeping",
  intervalMs: 60_000,
  lock: JOB_LOCKS.probeHousekeeping,
  run: (ctx) => releaseStaleLeases(ctx),
};

/** A probe process's own: its worker's "probe stats" log line every 10 s (vigil bench probes reads it). */
export function probeProcessJobs(worker: ProbeWorker): Job[] {
  return [{ name: "probe-stats", intervalMs: 10_000, lock: null, run: async () => worker.report() }];
}

/** Milliseconds from `now` to the next instant `offset` past a multiple of `interval` (never 0). */
export function untilNextTick(now: number, interval: number, offset: number): number {
  const wait = (((offset - now) % interval) + interval) % interval;
  return wait === 0 ? interval : wait;
}
