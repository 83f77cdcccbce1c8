import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { monitorEventLoopDelay } from "node:perf_hooks";
import type { Agent } from "undici";
import { probeGapFill, probeSample, type Sample, writeSamples } from "../availability/samples.js";
import { type ConnectionStatus, recordStatus } from "../connections/status.js";
import type { AppContext } from "../core/context.js";
import { StoreNotReadyError } from "../stores/errors.js";
import { SeriesUnavailableError } from "../stores/series/types.js";
import { openIncident, resolveIncident } from "../incidents/incidents.js";
import { checkConnection } from "./check.js";
import { type CheckResult, platformOrigin } from "./platforms.js";
import { type Claimed, claim } from "./claim.js";
import { changesAnything, decide } from "./decide.js";
import { createProbeAgent, PROBE_CONNECTIONS_PER_ORIGIN } from "./http.js";
import { Batcher } from "./batch.js";
import { type CheckRecord, type CheckedRow, recordChecks, releaseLeases, renewLeases } from "./repository.js";
import { DEFAULT_FAILURE_THRESHOLD, intervalSeconds, nextSlot } from "./schedule.js";
import { ProbeSlots } from "./slots.js";
import type { SyncState } from "./sync.js";
import { probeChecks, probeScheduleLag } from "../lib/metrics.js";

/**
 * A worker keeps up to CLAIM_AHEAD x concurrency connections claimed (checking, writing, or
 * queued for a request slot), and polls every BACKLOG_POLL_MS while it has a backlog. Measured
 * with `vigil bench probes`: claiming 2x concurrency once a second capped a backlog drain at
 * ~350 checks/s; 8x with a 10 ms poll drains ~780/s. A queue that deep still clears within
 * seconds, far inside the lease.
 */
const CLAIM_AHEAD = 8;
const BACKLOG_POLL_MS = 10;
/**
 * While there is a backlog, a claim waits until at least this share of the claim-ahead room is
 * free: the polls every BACKLOG_POLL_MS then make a few claims of hundreds of rows a second
 * rather than a hundred claims of a few rows.
 */
const BACKLOG_MIN_CLAIM = 1 / 16;
/**
 * A tick claims the connections due before its next tick plus this share of a tick: the next
 * claim starts a tick after this one returned, so claiming only one tick ahead left the
 * connections due while a claim ran to start late by the claim's own time (hundreds of ms at
 * 25,000 connections on a busy host).
 */
const CLAIM_MARGIN = 0.7;
/**
 * Ticks come every tickMs ± this share, at random: several probe processes started together would
 * otherwise tick in step, and the first claim of every tick would take every connection due (the
 * others skip the rows it locked), so one process did all the work. Drifting phases share it.
 * CLAIM_MARGIN covers the longer gaps this makes (and the claim's own time).
 */
const TICK_JITTER = 0.2;
/**
 * Check results recorded per statement at most, such statements in flight at once, and how long
 * a result waits for others to share its statement (a check's lease ends when it is recorded; an
 * incident opens this much later at most). The long linger applies while at least
 * BATCH_MIN_RATE checks a second finish (a fleet of some 1,500 connections at 30 s and more); a
 * smaller worker records within 20 ms, as before, since few results would share a statement.
 * Measured with `vigil bench probes` at 10,000 connections (333 checks/s, docs/benchmarks.md):
 * 20 ms made statements of 9 results; 500 ms makes them of ~165 (or RECORD_BATCH, in a backlog).
 * Longer pays less and less, and the last results of a backlog wait for it.
 */
const RECORD_BATCH = 500;
const RECORD_IN_FLIGHT = 2;
const RECORD_LINGER_MS = 500;
const SLOW_LINGER_MS = 20;
const BATCH_MIN_RATE = 50;
/**
 * Samples of checks written together the same way: two series writes a second instead of one per
 * check (at 333 checks/s each write carried 1.4 samples, three statements each with the `sql`
 * series store; every QuestDB commit costs it several ms of CPU whatever its size: QuestDB 756 ->
 * 301 us per check with a 100 ms linger, 177-230 us with 1 s).
 */
const SAMPLE_BATCH = 500;
const SAMPLE_IN_FLIGHT = 2;
const SAMPLE_LINGER_MS = 500;
const WRITE_ROOM = 2 * (RECORD_BATCH + SAMPLE_BATCH);

export interface ProbeWorkerOptions {
  /** Identifies this worker's leases; unique per process. */
  workerId?: string;
  /** How long a claimed connection stays this worker's; a dead worker's connections return after it. */
  leaseMs?: number;
  /** How often due connections are claimed. */
  tickMs?: number;
  /** Checks running at once (global limit). */
  concurrency?: number;
  /** Each platform request's deadline; default PROBE_TIMEOUT_MS. */
  timeoutMs?: number;
}

/**
 * The probe scheduler of one `vigil serve --roles probe` process. It orchestrates the parts:
 * every tick it claims the connections that are due (claim.ts: leases in Postgres, FOR UPDATE
 * SKIP LOCKED, so several workers share the connection set and never check one connection twice
 * in a slot; a dead worker's leases expire and another worker picks its connections up); each
 * check (check.ts) runs through one keep-alive agent under a global concurrency limit; its
 * result is a sample (availability/samples.ts), then the counters are recorded and the pure
 * decision (decide.ts) says whether the status moves (connections/status.ts) and whether an
 * incident opens or resolves (incidents/), all in one transaction.
 */
export class ProbeWorker {
  readonly workerId: string;
  private readonly leaseMs: number;
  private readonly tickMs: number;
  private readonly timeoutMs: number;
  private readonly slots: ProbeSlots;
  private readonly agent: Agent;
  private readonly concurrency: number;
  private timer?: NodeJS.Timeout;
  private inFlight = 0;
  /** Of those, checks whose requests are done, waiting for their sample and result to be written. */
  private writing = 0;
  private ticking = false;
  private stopping: Promise<void> | undefined;
  /** Waits for slots not yet come (ended early by stop), and the connections stop left unchecked. */
  private readonly slotWaits = new Set<() => void>();
  private readonly abandoned: string[] = [];
  /** The last claim got as many connections as it asked for: more may be due. */
  private backlog = false;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();
  /**
   * Connections claimed and not yet finished, with when their leases end (this process's clock,
   * from the claim's answer or the last renewal): a lease is renewed only once it is a third
   * spent, so the checks that finish in seconds (nearly all) cost no renewal.
   */
  private readonly held = new Map<string, number>();
  private renewTimer?: NodeJS.Timeout;
  private renewing = false;
  /** Schedule lag (claim time minus the slot it was due) and checks since the last report. */
  private lags: number[] = [];
  private checks = 0;
  /** The longest claim statement since the last report, in ms. */
  private claimMsMax = 0;
  /** Check results, recorded together (one statement for the checks that finish meanwhile). */
  private readonly records: Batcher<CheckRecord, CheckedRow | null>;
  /** The samples of checks, written together (one series write for the checks that finish meanwhile). */
  private readonly samples: Batcher<{ id: string; rows: Sample[] }, undefined>;
  /** How late the event loop runs callbacks: every request's answer waits behind it. */
  private readonly loopDelay = monitorEventLoopDelay({ resolution: 10 });

  constructor(
    private readonly ctx: AppContext,
    opts: ProbeWorkerOptions = {},
  ) {
    this.workerId = opts.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.tickMs = opts.tickMs ?? 1_000;
    this.timeoutMs = opts.timeoutMs ?? ctx.config.probe.timeoutMs;
    this.concurrency = opts.concurrency ?? 200;
    this.slots = new ProbeSlots(this.concurrency, PROBE_CONNECTIONS_PER_ORIGIN);
    this.records = new Batcher({
      run: (items) => recordChecks(this.ctx.stores.db, this.workerId, items),
      key: (c) => c.id,
      maxInFlight: RECORD_IN_FLIGHT,
      maxItems: RECORD_BATCH,
      lingerMs: RECORD_LINGER_MS,
      lingerMinRate: BATCH_MIN_RATE,
      slowLingerMs: SLOW_LINGER_MS,
      unreachable: (err) => err instanceof StoreNotReadyError,
    });
    this.samples = new Batcher({
      run: async (items) => {
        await writeSamples(
          this.ctx,
          items.flatMap((i) => i.rows),
        );
        return items.map(() => undefined);
      },
      key: (c) => c.id,
      maxInFlight: SAMPLE_IN_FLIGHT,
      maxItems: SAMPLE_BATCH,
      lingerMs: SAMPLE_LINGER_MS,
      lingerMinRate: BATCH_MIN_RATE,
      slowLingerMs: SLOW_LINGER_MS,
      unreachable: (err) => err instanceof StoreNotReadyError || err instanceof SeriesUnavailableError,
    });
    // PROBE_DENY_PRIVATE applies to the checks and the syncs alike: both go through this agent.
    this.agent = createProbeAgent({
      denyPrivate: ctx.config.outbound.denyPrivate,
      connectTimeoutMs: this.timeoutMs,
    });
  }

  start(): void {
    this.loopDelay.enable();
    const loop = async () => {
      if (this.stopped) return;
      await this.tick();
      // A claim that got all it asked for, or no room to claim, means a backlog: claim again as
      // soon as checks make room, not a whole tick later. (Judged by the claim's own size alone,
      // a big claim was followed by a small one into the little room left, taken for the end of
      // the backlog: the worker then waited a tick while its queue ran dry.)
      const backlog = this.backlog || this.busy() >= this.concurrency * CLAIM_AHEAD;
      const next = backlog
        ? BACKLOG_POLL_MS
        : this.tickMs * (1 - TICK_JITTER + 2 * TICK_JITTER * Math.random());
      if (!this.stopped) this.timer = setTimeout(loop, next);
    };
    void loop();
  }

  /**
   * Checks that take claim room: those waiting only for their batched writes do not (a backlog
   * keeps its pace while a second's results wait to share a statement), up to WRITE_ROOM of them,
   * so a slow store still holds the claims back.
   */
  private busy(): number {
    return this.inFlight - Math.min(this.writing, WRITE_ROOM);
  }

  /** Claims the due connections and starts their checks; resolves once they are claimed. */
  async tick(): Promise<number> {
    if (this.ticking || this.stopped) return 0;
    this.ticking = true;
    try {
      const room = this.concurrency * CLAIM_AHEAD - this.busy();
      if (room <= 0) return 0;
      if (this.backlog && room < this.concurrency * CLAIM_AHEAD * BACKLOG_MIN_CLAIM) return 0;
      const claimStarted = Date.now();
      const claimed = await this.claim(room);
      this.backlog = claimed.length >= room;
      this.claimMsMax = Math.max(this.claimMsMax, Date.now() - claimStarted);
      for (const c of claimed) {
        this.inFlight++;
        this.hold(c.id);
        const p = this.startAtSlot(c)
          .then((due) => (due ? this.check(c) : undefined))
          .catch((err: unknown) =>
            err instanceof StoreNotReadyError || err instanceof SeriesUnavailableError
              ? // Vigil's own store is down: nothing is recorded, the lease runs out, it is checked again
                this.ctx.log.warn(
                  { connection: c.id, err: err.message },
                  "check not recorded: a store is unavailable; the connection is checked again after its lease",
                )
              : this.ctx.log.error({ err, connection: c.id }, "probe failed unexpectedly"),
          )
          .finally(() => {
            this.inFlight--;
            this.release(c.id);
            this.running.delete(p);
          });
        this.running.add(p);
      }
      return claimed.length;
    } catch (err) {
      // Postgres unreachable: nothing is claimed, nothing is recorded, no incident opens; try again next tick.
      this.backlog = false;
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
  private async startAtSlot(c: Claimed): Promise<boolean> {
    const wait = new Date(c.next_check_at).getTime() - this.ctx.now().getTime();
    if (wait > 0)
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.slotWaits.delete(done);
          resolve();
        };
        const timer = setTimeout(done, wait);
        this.slotWaits.add(done);
      });
    // Stopped before its slot came: not started, so not checked; its lease is given back.
    if (this.stopped) {
      this.abandoned.push(c.id);
      return false;
    }
    const lagMs = Math.max(0, this.ctx.now().getTime() - new Date(c.next_check_at).getTime());
    if (this.lags.length < 100_000) this.lags.push(lagMs);
    probeScheduleLag.observe(lagMs / 1000);
    return true;
  }

  /**
   * Leases are renewed every third of a lease while this worker holds any: a check may outlast
   * its lease (waiting for a slot behind a backlog, platform requests up to their timeouts, a
   * sync), and another worker must not take the connection and check it again in the same slot
   * meanwhile. A dead worker renews nothing, so its connections still return after one lease.
   */
  private hold(id: string): void {
    this.held.set(id, Date.now() + this.leaseMs);
    if (this.renewTimer) return;
    this.renewTimer = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.leaseMs / 3)));
    this.renewTimer.unref();
  }

  private release(id: string): void {
    this.held.delete(id);
    if (this.held.size === 0 && this.renewTimer) {
      clearInterval(this.renewTimer);
      this.renewTimer = undefined;
    }
  }

  private async renew(): Promise<void> {
    if (this.renewing || this.held.size === 0) return;
    // Leases with less than two thirds left: the next renewal comes a third of a lease later.
    const now = Date.now();
    const due = [...this.held].filter(([, ends]) => ends - now < (this.leaseMs * 2) / 3).map(([id]) => id);
    if (due.length === 0) return;
    this.renewing = true;
    try {
      await renewLeases(this.ctx.stores.db, this.workerId, due, this.leaseMs);
      for (const id of due) if (this.held.has(id)) this.held.set(id, now + this.leaseMs);
    } catch (err) {
      // PostgreSQL unreachable: the leases may run out; the next renewal tries again
      this.ctx.log.warn({ err: (err as Error).message }, "probe leases could not be renewed; retrying");
    } finally {
      this.renewing = false;
    }
  }

  /** Waits for the checks started so far. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }

  protected claim(max: number): Promise<Claimed[]> {
    return claim(this.ctx, {
      workerId: this.workerId,
      max,
      leaseMs: this.leaseMs,
      aheadMs: this.tickMs * (1 + CLAIM_MARGIN),
    });
  }

  private async check(c: Claimed): Promise<void> {
    // The concurrency limit bounds the requests to platforms; the writes that follow do not hold a
    // slot. A connection whose last check failed waits in its own lane (slots.ts), so targets that
    // hang cannot hold every slot while the others are due.
    const { result, sync } = await this.slots.run(
      c.consecutive_failures > 0,
      () => checkConnection(this.ctx, this.agent, c, this.timeoutMs),
      platformOrigin(
        { serviceType: c.service_type, baseUrl: c.base_url, region: c.region },
        this.ctx.config.workflowBApiTemplate,
      ),
    );
    this.writing++;
    try {
      await this.write(c, result, sync);
    } finally {
      this.writing--;
    }
  }

  private async write(c: Claimed, result: CheckResult, sync: SyncState | null): Promise<void> {
    const at = this.ctx.now();
    // The sample first: if the series store cannot take it, the check is not counted and the
    // lease runs out, so the connection is checked again.
    const gap = probeGapFill({
      connectionId: c.id,
      status: c.status,
      dueAt: new Date(c.next_check_at),
      intervalMs: intervalSeconds(c.plan, c.check_interval_seconds) * 1000,
      at,
    });
    await this.samples.submit({ id: c.id, rows: [...gap, probeSample(c.id, result, at)] });
    await this.record(c, result, at, sync);
    this.checks++;
    probeChecks.labels(c.service_type, result.available ? "up" : (result.reason ?? "down")).inc();
  }

  /** Checks and schedule lag since the last call, logged every 10 s ("probe stats"). */
  stats(): {
    checks: number;
    lagP50Ms: number;
    lagP99Ms: number;
    inFlight: number;
    claimMsMax: number;
    loopDelayP99Ms: number;
  } {
    const loopDelayP99Ms = Math.round(this.loopDelay.percentile(99) / 1e6);
    this.loopDelay.reset();
    const sorted = this.lags.sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
    const out = {
      checks: this.checks,
      lagP50Ms: at(0.5),
      lagP99Ms: at(0.99),
      inFlight: this.inFlight,
      claimMsMax: this.claimMsMax,
      loopDelayP99Ms,
    };
    this.lags = [];
    this.checks = 0;
    this.claimMsMax = 0;
    return out;
  }

  /** Logs the stats since the last report; a probe process runs it every 10 s (jobs/jobs.ts probeProcessJobs). */
  report(): void {
    const s = this.stats();
    if (s.checks > 0 || s.inFlight > 0)
      this.ctx.log.info({ probeWorker: this.workerId, ...s }, "probe stats");
  }

  /**
   * Counters, slot and sync state in one statement shared with the checks that finish meanwhile
   * (the common case); status moves and incidents, when the decision asks for them, in one
   * transaction with their timeline events.
   */
  private async record(c: Claimed, result: CheckResult, at: Date, sync: SyncState | null): Promise<void> {
    const row = await this.records.submit({
      id: c.id,
      available: result.available,
      at,
      nextCheckAt: nextSlot(c.id, intervalSeconds(c.plan, c.check_interval_seconds), at),
      sync,
    });
    if (!row) return; // deleted meanwhile, or the lease was lost: another worker owns it now
    const current = row.status as ConnectionStatus;
    const decision = decide({
      available: result.available,
      badCredentials: result.reason === "bad_credentials",
      failures: row.failures,
      successes: row.successes,
      threshold: row.threshold ?? DEFAULT_FAILURE_THRESHOLD,
      incidentOpen: row.open,
      status: current,
    });
    if (!changesAnything(decision, current)) return;

    const target = {
      connectionId: c.id,
      connectionName: c.service_name,
      userId: c.user_id,
      organizationId: c.organization_id,
    };
    const publicUrl = this.ctx.config.publicUrl;
    await this.ctx.stores.db.transaction(async (tx) => {
      await recordStatus(tx, c.id, decision.event, at);
      if (decision.open)
        await openIncident(tx, target, {
          kind: "availability",
          title: `${c.service_name} is unavailable`,
          detail: { failures: row.failures, reason: result.reason, error: result.error },
          at,
          publicUrl,
          failureMailIntervalSeconds: this.ctx.config.alerts.failureMailIntervalSeconds,
        });
      if (decision.resolve)
        await resolveIncident(tx, target, {
          kind: "availability",
          detail: { successes: row.successes },
          reason: `${row.successes} consecutive successful checks`,
          at,
          publicUrl,
        });
    });
  }

  /** Stops claiming, gives back what waits for a slot, and waits for the checks under way. Once. */
  stop(): Promise<void> {
    this.stopping ??= this.shutDown();
    return this.stopping;
  }

  private async shutDown(): Promise<void> {
    this.stopped = true;
    this.loopDelay.disable();
    clearTimeout(this.timer);
    // A claim under way finishes first, so the leases it took are given back below with the rest
    // (not longer than a few seconds: a claim stuck on an unreachable PostgreSQL holds no rows).
    for (const until = Date.now() + 5_000; this.ticking && Date.now() < until;)
      await new Promise((r) => setTimeout(r, 5));
    // Connections claimed ahead and still waiting for their slot are not started.
    for (const done of [...this.slotWaits]) done();
    await this.idle();
    if (this.abandoned.length > 0)
      await releaseLeases(this.ctx.stores.db, this.workerId, this.abandoned.splice(0)).catch((err: unknown) =>
        // PostgreSQL unreachable: the leases run out by themselves
        this.ctx.log.warn({ err: (err as Error).message }, "probe leases could not be given back on stop"),
      );
    clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    await this.agent.close();
  }
}
