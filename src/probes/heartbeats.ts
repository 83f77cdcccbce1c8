import { heartbeatGapFill, writeSamples } from "../availability/samples.js";
import { type ConnectionStatus, recordStatus } from "../connections/status.js";
import { type AppContext, perApp } from "../core/context.js";
import { type IncidentTarget, openIncident, resolveIncident } from "../incidents/incidents.js";
import { recordGatewayReport } from "../incidents/repository.js";
import { changesAnything, decide } from "./decide.js";
import { selectGateways } from "./repository.js";
import { DEFAULT_FAILURE_THRESHOLD, RECOVERY_SUCCESSES } from "./schedule.js";

/** A gateway is expected every 60 s; after 120 s more without one it has missed its heartbeat. */
export const HEARTBEAT_INTERVAL_SECONDS = 60;
export const HEARTBEAT_GRACE_SECONDS = 120;

/**
 * The missed-heartbeat detector, one run (the jobs role runs it every 10 s). A gateway silent
 * for longer than its interval plus grace opens a `missed_heartbeat` incident (status `error`)
 * and gets synthetic samples for the slots it missed; once heartbeats arrive again (ingest makes
 * the connection active) the incident is resolved. Gap-fill samples sit at slot times derived
 * from the last heartbeat, so writing them again is idempotent. Time in which Vigil's own store
 * was unavailable does not count as silence (StoreSupervisor.outageWithin): the daemon's
 * heartbeats were refused then, so after the outage it has the rest of its deadline to get through.
 */
export async function watchHeartbeats(ctx: AppContext): Promise<{ missed: number; recovered: number }> {
  // Both stores answer (or the run fails: an outage is no time to judge silence), and an outage
  // this process saw ends here at the latest, even if nothing else has used the store since.
  await ctx.stores.series.ping();
  const now = ctx.now();
  const gateways = await selectGateways(ctx.stores.db, {
    intervalSeconds: HEARTBEAT_INTERVAL_SECONDS,
    graceSeconds: HEARTBEAT_GRACE_SECONDS,
  });
  const publicUrl = ctx.config.publicUrl;
  // While a store of Vigil's own was unavailable, heartbeats were refused (503) or could not be
  // recorded: that silence is Vigil's, not the gateway's, and does not count. The outages are
  // kept in wall-clock time; `skew` maps them onto the context's clock.
  const skew = now.getTime() - Date.now();
  const outage = (since: Date) => ctx.stores.outageWithin(since.getTime() - skew, now.getTime() - skew);
  let missed = 0;
  let recovered = 0;
  for (const g of gateways) {
    const last = new Date(g.last_heartbeat_at);
    const silentMs = now.getTime() - last.getTime();
    const limitMs = (Number(g.interval) + Number(g.grace)) * 1000;
    const target: IncidentTarget = {
      connectionId: g.id,
      connectionName: g.service_name,
      userId: g.user_id,
      organizationId: g.organization_id,
    };
    if (silentMs > limitMs && silentMs - outage(last) > limitMs) {
      await writeSamples(
        ctx,
        heartbeatGapFill({
          connectionId: g.id,
          lastHeartbeatAt: last,
          intervalMs: Number(g.interval) * 1000,
          at: now,
        }),
      );
      if (g.open_incident) continue;
      await ctx.stores.db.transaction(async (tx) => {
        const opened = await openIncident(tx, target, {
          kind: "missed_heartbeat",
          title: `${g.service_name} stopped sending heartbeats`,
          detail: { silentSeconds: Math.round(silentMs / 1000), lastHeartbeatAt: last.toISOString() },
          at: now,
          publicUrl,
          failureMailIntervalSeconds: ctx.config.alerts.failureMailIntervalSeconds,
        });
        if (opened) await recordStatus(tx, g.id, { type: "heartbeat_missed" }, now);
      });
      missed++;
    } else if (g.open_incident && g.opened_at && last > new Date(g.opened_at)) {
      await ctx.stores.db.transaction(async (tx) => {
        await resolveIncident(tx, target, {
          kind: "missed_heartbeat",
          detail: { heartbeatAt: last.toISOString() },
          reason: "a new heartbeat arrived: the daemon is running again",
          at: now,
          publicUrl,
        });
        await recordStatus(tx, g.id, { type: "heartbeat_received" }, now);
      });
      recovered++;
    }
  }
  return { missed, recovered };
}

/**
 * A heartbeat as a check of its gateway: the daemon's own view of the gateway's health
 * (`available` false when `gateway.status` is not `healthy` or `system.gatewayPidAlive` is false).
 */
export interface GatewayReport {
  connectionId: string;
  heartbeatId: string;
  /** The heartbeat's own time: its period's end, or (no period) its arrival's second. */
  ts: Date;
  received: Date;
  available: boolean;
  /** `gateway_unhealthy` or `process_down` when not available. */
  reason: string | null;
  error: string | null;
}

/**
 * In a steady healthy state a gateway's heartbeats are written at most this often per node, and
 * at most every half of its grace: the monitor reads the last-heard time, which lags by up to
 * this much, and a gateway that sends on time must never look silent past its grace.
 */
const STEADY_WRITE_MS = 15_000;
const steadyWriteMs = (graceSeconds: number | null) =>
  Math.min(STEADY_WRITE_MS, ((graceSeconds ?? HEARTBEAT_GRACE_SECONDS) * 1000) / 2);

interface Seen {
  /** The newest heartbeat this node saw from the gateway. */
  ts: number;
  id: string;
  /** After the last write: active, healthy for a while, no failure counted, no incident unresolved. */
  steady: boolean;
  writtenAt: number;
  /** How long after `writtenAt` a steady heartbeat is not written (steadyWriteMs). */
  steadyMs: number;
}

/** What this node knows of each gateway's heartbeats, so a healthy fleet costs no write per heartbeat. */
class GatewayHealth {
  private readonly seen = new Map<string, Seen>();

  get(connectionId: string): Seen | undefined {
    return this.seen.get(connectionId);
  }

  set(connectionId: string, s: Seen): void {
    if (this.seen.size > 100_000) this.seen.clear();
    this.seen.set(connectionId, s);
  }

  forget(connectionId: string): void {
    this.seen.delete(connectionId);
  }
}

/** This app's memory of gateway heartbeats counted as checks. */
export const gatewayHealth = perApp(() => new GatewayHealth());

/**
 * Counts one heartbeat as a check of its gateway connection, with the probes' own decision
 * (decide.ts): an unhealthy heartbeat is a failed check, so a run of `failure_threshold` of them
 * opens an `availability` incident (status `error`), and healthy heartbeats resolve it as two
 * successful checks do. Only a heartbeat newer than every one seen from the gateway counts (its
 * time, then its id): a resent old heartbeat never counts, neither as a check nor as the daemon
 * being back (it does not move `last_heartbeat_at`, which the missed-heartbeat monitor reads).
 *
 * A gateway that is steadily healthy (active, no failure in its run, no incident unresolved) is
 * written at most every 15 s per node (sooner when its grace is under 30 s), as its last-heard
 * time always was: a healthy heartbeat in between changes nothing but a counter already past what
 * any decision reads.
 */
export function reportGatewayHealth(
  ctx: AppContext,
  r: GatewayReport,
): "steady" | "resend" | Promise<"counted" | "steady" | "resend"> {
  // Most heartbeats of a healthy fleet end here, in memory, without a promise.
  const known = gatewayHealth(ctx).get(r.connectionId);
  const t = r.ts.getTime();
  if (known && (t < known.ts || (t === known.ts && r.heartbeatId === known.id))) return "resend";
  if (known?.steady && r.available && r.received.getTime() - known.writtenAt < known.steadyMs) {
    // this node's own entry: moved forward in place
    known.ts = t;
    known.id = r.heartbeatId;
    return "steady";
  }
  return countGatewayReport(ctx, r);
}

/** The part of `reportGatewayHealth` that writes: the heartbeat counted as a check. */
async function countGatewayReport(ctx: AppContext, r: GatewayReport): Promise<"counted" | "resend"> {
  const memory = gatewayHealth(ctx);
  const t = r.ts.getTime();
  const row = await recordGatewayReport(ctx.stores.db, {
    connectionId: r.connectionId,
    heartbeatId: r.heartbeatId,
    ts: r.ts,
    available: r.available,
    at: r.received,
  });
  if (!row) return "resend"; // not newer than the newest stored (another node saw it), or gone
  const current = row.status as ConnectionStatus;
  const decision = decide({
    available: r.available,
    badCredentials: false,
    failures: row.failures,
    successes: row.successes,
    threshold: row.threshold ?? DEFAULT_FAILURE_THRESHOLD,
    incidentOpen: row.availability_open,
    status: current,
  });
  if (changesAnything(decision, current)) {
    const target: IncidentTarget = {
      connectionId: r.connectionId,
      connectionName: row.service_name,
      userId: row.user_id,
      organizationId: row.organization_id,
    };
    const publicUrl = ctx.config.publicUrl;
    await ctx.stores.db.transaction(async (tx) => {
      await recordStatus(tx, r.connectionId, decision.event, r.received);
      if (decision.open)
        await openIncident(tx, target, {
          kind: "availability",
          title: `${row.service_name} reports itself down`,
          detail: {
            failures: row.failures,
            reason: r.reason,
            error: r.error,
            source: "heartbeat",
            heartbeatId: r.heartbeatId,
          },
          at: r.received,
          publicUrl,
          failureMailIntervalSeconds: ctx.config.alerts.failureMailIntervalSeconds,
        });
      if (decision.resolve)
        await resolveIncident(tx, target, {
          kind: "availability",
          detail: { successes: row.successes, source: "heartbeat", heartbeatId: r.heartbeatId },
          reason: `${row.successes} consecutive healthy heartbeats`,
          at: r.received,
          publicUrl,
        });
    });
  }
  const open = decision.resolve ? false : row.availability_open || decision.open;
  memory.set(r.connectionId, {
    ts: t,
    id: r.heartbeatId,
    steady:
      r.available &&
      decision.status === "active" &&
      row.successes >= RECOVERY_SUCCESSES &&
      !open &&
      !row.missed_open,
    writtenAt: r.received.getTime(),
    steadyMs: steadyWriteMs(row.grace),
  });
  return "counted";
}
