import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import pLimit from "p-limit";
import type { AppContext } from "../context.js";
import type { Plan } from "../identity/plans.js";
import { markLateSamples } from "../retention/rollups.js";
import { availabilitySamples } from "../stores/series/tables.js";
import { type CheckResult, runCheck } from "./checks.js";
import { createProbeAgent } from "./http.js";
import { type SyncState, syncExecutions } from "./sync.js";
import { openIncident, resolveIncident } from "./incidents.js";
import { DEFAULT_FAILURE_THRESHOLD, intervalSeconds, nextSlot, RECOVERY_SUCCESSES } from "./schedule.js";

/**
 * A worker keeps up to CLAIM_AHEAD x concurrency connections claimed (checking, writing, or
 * queued for a request slot), and polls every BACKLOG_POLL_MS while it has a backlog. Measured
 * with `vigil bench probes`: claiming 2x concurrency once a second capped a backlog drain at
 * ~350 checks/s; 8x with a 10 ms poll drains ~780/s. A queue that deep still clears within
 * seconds, far inside the lease.
 */
const CLAIM_AHEAD = 8;
const BACKLOG_POLL_MS = 10;

/** Executions are pulled after a successful check, at most this often per connection. */
export const SYNC_EVERY_MS = 60_000;

export interface ProbeWorkerOptions {
  /** Identifies this worker's leases; unique per process. */
  workerId?: string;
  /** How long a claimed connection stays this worker's; a dead worker's connections return after it. */
  leaseMs?: number;
  /** How often due connections are claimed. */
  tickMs?: number;
  /** Checks running at once (global limit). */
  concurrency?: number;
  timeoutMs?: number;
}

interface Claimed extends Record<string, unknown> {
  id: string;
  user_id: string;
  organization_id: string | null;
  service_type: "workflow_a" | "workflow_b";
  service_name: string;
  status: string;
  base_url: string | null;
  api_key_enc: string | null;
  api_token_enc: string | null;
  region: string | null;
  team_id: string | null;
  sync_state: SyncState;
  last_sync_at: Date | null;
  next_check_at: Date;
  check_interval_seconds: number | null;
  plan: Plan;
}

/**
 * The probe scheduler of one `vigil serve --roles probe` process. Every tick it claims the
 * connections that are due, with a lease in Postgres (FOR UPDATE SKIP LOCKED), so several
 * workers share the connection set and never check one connection twice in a slot; a dead
 * worker's leases expire and another worker picks its connections up. Checks run through one
 * keep-alive agent under a global concurrency limit; each result is a sample, then one
 * transaction updates the connection's status, counters, next slot and incidents.
 */
export class ProbeWorker {
  readonly workerId: string;
  private readonly leaseMs: number;
  private readonly tickMs: number;
  private readonly timeoutMs: number;
  private readonly limit: ReturnType<typeof pLimit>;
  private readonly agent = createProbeAgent();
  private readonly concurrency: number;
  private timer?: NodeJS.Timeout;
  private inFlight = 0;
  private ticking = false;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();
  /** Schedule lag (claim time minus the slot it was due) and checks since the last report. */
  private lags: number[] = [];
  private checks = 0;
  private statsTimer?: NodeJS.Timeout;

  constructor(
    private readonly ctx: AppContext,
    opts: ProbeWorkerOptions = {},
  ) {
    this.workerId = opts.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.tickMs = opts.tickMs ?? 1_000;
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.concurrency = opts.concurrency ?? 200;
    this.limit = pLimit(this.concurrency);
  }

  start(): void {
    this.statsTimer = setInterval(() => this.report(), 10_000);
    this.statsTimer.unref();
    const loop = async () => {
      if (this.stopped) return;
      const claimed = await this.tick();
      // A full claim, or no room to claim, means a backlog: claim again as soon as checks make
      // room, not a whole tick later.
      const backlog = claimed >= this.concurrency || this.inFlight >= this.concurrency * CLAIM_AHEAD;
      if (!this.stopped) this.timer = setTimeout(loop, backlog ? BACKLOG_POLL_MS : this.tickMs);
    };
    void loop();
  }

  /** Claims the due connections and starts their checks; resolves once they are claimed. */
  async tick(): Promise<number> {
    if (this.ticking || this.stopped) return 0;
    this.ticking = true;
    try {
      const room = this.concurrency * CLAIM_AHEAD - this.inFlight;
      if (room <= 0) return 0;
      const claimed = await this.claim(room);
      for (const c of claimed) {
        this.inFlight++;
        const p = this.startAtSlot(c)
          .then(() => this.check(c))
          .catch((err) => this.ctx.log.error({ err, connection: c.id }, "probe failed unexpectedly"))
          .finally(() => {
            this.inFlight--;
            this.running.delete(p);
          });
        this.running.add(p);
      }
      return claimed.length;
    } catch (err) {
      // Postgres unreachable: nothing is claimed, nothing is recorded, no incident opens; try again next tick.
      this.ctx.log.warn(
        { err: (err as Error).message },
        "probe scheduler could not claim connections; retrying",
      );
      return 0;
    } finally {
      this.ticking = false;
    }
  }

  /**
   * Connections due within the next tick are claimed ahead and each waits for its own slot,
   * so a check starts on time instead of up to a tick late. Records the schedule lag.
   */
  private async startAtSlot(c: Claimed): Promise<void> {
    const wait = new Date(c.next_check_at).getTime() - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    if (this.lags.length < 100_000)
      this.lags.push(Math.max(0, Date.now() - new Date(c.next_check_at).getTime()));
  }

  /** Waits for the checks started so far. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }

  private async claim(max: number): Promise<Claimed[]> {
    const r = await this.ctx.stores.db.query<Claimed>(
      `WITH due AS (
         SELECT id FROM connections
          WHERE service_type <> 'gateway' AND next_check_at <= now() + make_interval(secs => $4)
            AND (lease_until IS NULL OR lease_until < now())
          ORDER BY next_check_at
          LIMIT $2
          FOR UPDATE SKIP LOCKED
       )
       UPDATE connections c
          SET lease_owner = $1, lease_until = now() + make_interval(secs => $3)
         FROM due
        WHERE c.id = due.id
       RETURNING c.id, c.user_id, c.organization_id, c.service_type, c.service_name, c.status, c.base_url,
                 c.api_key_enc, c.api_token_enc, c.region, c.team_id, c.sync_state, c.last_sync_at,
                 c.next_check_at, c.check_interval_seconds,
                 (SELECT coalesce(o.plan, u.plan) FROM users u LEFT JOIN organizations o ON o.id = c.organization_id
                   WHERE u.id = c.user_id) AS plan`,
      [this.workerId, max, this.leaseMs / 1000, this.tickMs / 1000],
    );
    return r.rows;
  }

  private async check(c: Claimed): Promise<void> {
    // The concurrency limit bounds the requests to platforms; the writes that follow do not hold a slot.
    const { result, sync } = await this.limit(() => this.probe(c));
    const at = this.ctx.now();
    // The sample first: if the series store cannot take it, the check is not counted and the
    // lease runs out, so the connection is checked again.
    const gap = this.gapFill(c, at);
    await this.ctx.stores.series.append(availabilitySamples, [
      ...gap,
      {
        ts: at,
        connection_id: c.id,
        available: result.available,
        response_time_ms: result.responseTimeMs,
        status_code: result.statusCode ?? null,
        reason: result.reason ?? null,
        error: result.error ?? null,
        synthetic: false,
        source: "probe",
      },
    ]);
    if (gap.length) await markLateSamples(this.ctx, gap);
    await this.record(c, result, at, sync);
    this.checks++;
  }

  /** The platform requests of one check: the availability check, then (at most once a minute) the execution pull. */
  private async probe(c: Claimed): Promise<{ result: CheckResult; sync: SyncState | null }> {
    let result: CheckResult;
    const apiKey = c.api_key_enc ? this.ctx.credentials.decrypt(c.api_key_enc) : null;
    const apiToken = c.api_token_enc ? this.ctx.credentials.decrypt(c.api_token_enc) : null;
    try {
      result = await runCheck(
        this.agent,
        { serviceType: c.service_type, baseUrl: c.base_url, apiKey, apiToken, region: c.region },
        { timeoutMs: this.timeoutMs, workflowBApiTemplate: this.ctx.config.workflowBApiTemplate },
      );
    } catch (err) {
      result = { available: false, responseTimeMs: null, reason: "network", error: (err as Error).message };
    }
    // Executions are pulled after a successful check; a failed pull is retried at the next one.
    let sync: SyncState | null = null;
    const syncDue = !c.last_sync_at || Date.now() - new Date(c.last_sync_at).getTime() >= SYNC_EVERY_MS;
    if (result.available && syncDue) {
      try {
        const out = await syncExecutions(
          this.ctx,
          this.agent,
          {
            id: c.id,
            serviceType: c.service_type,
            baseUrl: c.base_url,
            apiKey,
            apiToken,
            region: c.region,
            teamId: c.team_id,
            state: c.sync_state ?? {},
            lastSyncAt: c.last_sync_at ? new Date(c.last_sync_at) : null,
          },
          this.timeoutMs,
        );
        sync = out.state;
      } catch (err) {
        this.ctx.log.warn(
          { connection: c.id, err: (err as Error).message },
          "execution sync failed; will retry",
        );
      }
    }
    return { result, sync };
  }

  /** Checks and schedule lag since the last call, logged every 10 s ("probe stats"). */
  stats(): { checks: number; lagP50Ms: number; lagP99Ms: number; inFlight: number } {
    const sorted = this.lags.sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
    const out = { checks: this.checks, lagP50Ms: at(0.5), lagP99Ms: at(0.99), inFlight: this.inFlight };
    this.lags = [];
    this.checks = 0;
    return out;
  }

  private report(): void {
    const s = this.stats();
    if (s.checks > 0 || s.inFlight > 0) this.ctx.log.info({ worker: this.workerId, ...s }, "probe stats");
  }

  /**
   * Synthetic samples for the slots missed while no check could run (Vigil stopped, every worker
   * down): one per missed slot between the slot that was due and now, at most a day's worth.
   * They carry the last known state (available when the connection was active) with reason
   * `not_checked`, so Vigil's own outage does not count against the platform.
   */
  private gapFill(c: Claimed, at: Date) {
    const interval = intervalSeconds(c.plan, c.check_interval_seconds) * 1000;
    const due = new Date(c.next_check_at).getTime();
    if (c.status === "inactive" || at.getTime() - due < 1.5 * interval) return [];
    const rows = [];
    const first = Math.max(due, at.getTime() - 86_400_000);
    for (let t = first; t <= at.getTime() - interval / 2 && rows.length < 2880; t += interval) {
      rows.push({
        ts: new Date(t),
        connection_id: c.id,
        available: c.status === "active",
        response_time_ms: null,
        reason: "not_checked",
        error: "no check ran in this slot (Vigil was not running)",
        synthetic: true,
        source: "gap_fill",
      });
    }
    return rows;
  }

  /**
   * Counters, slot and sync state in one statement (the common case); status moves and
   * incidents, when they happen, in one transaction with their timeline events. Both decisions
   * are re-evaluated at every check (a run stays a run), so nothing is lost if a process dies
   * between the two.
   */
  private async record(c: Claimed, result: CheckResult, at: Date, sync: SyncState | null): Promise<void> {
    const next = nextSlot(c.id, intervalSeconds(c.plan, c.check_interval_seconds), at);
    const db = this.ctx.stores.db;
    const r = await db.query<{
      failures: number;
      successes: number;
      status: string;
      threshold: number | null;
      open: boolean;
    }>(
      `UPDATE connections SET
         consecutive_failures = CASE WHEN $2 THEN 0 ELSE consecutive_failures + 1 END,
         consecutive_successes = CASE WHEN $2 THEN consecutive_successes + 1 ELSE 0 END,
         last_check_at = $3, next_check_at = $4, lease_owner = NULL, lease_until = NULL,
         sync_state = coalesce($6::jsonb, sync_state),
         last_sync_at = CASE WHEN $6::jsonb IS NULL THEN last_sync_at ELSE $3::timestamptz END
       WHERE id = $1 AND lease_owner = $5
       RETURNING consecutive_failures AS failures, consecutive_successes AS successes, status,
                 failure_threshold AS threshold,
                 EXISTS (SELECT 1 FROM incidents i WHERE i.connection_id = connections.id
                          AND i.kind = 'availability' AND i.status <> 'resolved') AS open`,
      [
        c.id,
        result.available,
        at.toISOString(),
        next.toISOString(),
        this.workerId,
        sync ? JSON.stringify(sync) : null,
      ],
    );
    const row = r.rows[0];
    if (!row) return; // deleted meanwhile, or the lease was lost: another worker owns it now
    const threshold = row.threshold ?? DEFAULT_FAILURE_THRESHOLD;
    // Status moves: first success -> active; bad credentials -> error at once; a failing run -> error.
    let status = row.status;
    if (result.available) status = "active";
    else if (result.reason === "bad_credentials" || row.failures >= threshold) status = "error";
    const open = !result.available && row.failures >= threshold && !row.open;
    const resolve = result.available && row.successes >= RECOVERY_SUCCESSES && row.open;
    if (status === row.status && !open && !resolve) return;

    await db.transaction(async (tx) => {
      if (status !== row.status)
        await tx.query("UPDATE connections SET status = $2, updated_at = now() WHERE id = $1", [
          c.id,
          status,
        ]);
      const ictx = {
        connectionId: c.id,
        connectionName: c.service_name,
        userId: c.user_id,
        organizationId: c.organization_id,
        at,
        publicUrl: this.ctx.config.publicUrl,
      };
      if (open)
        await openIncident(tx, ictx, "availability", `${c.service_name} is unavailable`, {
          failures: row.failures,
          reason: result.reason,
          error: result.error,
        });
      if (resolve) await resolveIncident(tx, ictx, "availability", { successes: row.successes });
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.statsTimer);
    await this.idle();
    await this.agent.close();
  }
}
