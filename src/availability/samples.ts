import type { AppContext } from "../core/context.js";
import { markLate } from "../anomalies/late.js";
import { withMaintenanceFlags } from "../maintenance/lookup.js";
import { markDaysDirty } from "../retention/repository.js";
import { ROLLUP_LATENESS_MS } from "../retention/policy.js";
import { availabilitySamples, type RowOf } from "../stores/series/tables.js";
import type { TableRows } from "../stores/series/types.js";

/**
 * The one writer of availability samples: rows from probes, from heartbeats, and the synthetic
 * gap-fill of slots in which no sample could come. Every write marks the past days it touches
 * (late samples) so reads take those days from raw samples until the rollup has redone them.
 */
export type Sample = RowOf<typeof availabilitySamples>;

const DAY_MS = 86_400_000;
/** Start of the UTC day, in ms (retention/rollups.ts has the Date form; this one runs per sample without allocating). */
const dayStart = (t: number) => Math.floor(t / DAY_MS) * DAY_MS;

/** What one availability check found (the shape of probes/platforms.ts `CheckResult`, declared here so availability does not import probes). */
export interface CheckOutcome {
  available: boolean;
  responseTimeMs: number | null;
  statusCode?: number;
  reason?: string;
  error?: string;
}

export function probeSample(connectionId: string, r: CheckOutcome, at: Date): Sample {
  return {
    ts: at,
    connection_id: connectionId,
    available: r.available,
    response_time_ms: r.responseTimeMs,
    status_code: r.statusCode ?? null,
    reason: r.reason ?? null,
    error: r.error ?? null,
    synthetic: false,
    source: "probe",
  };
}

/** At most a day of probe slots is filled, whatever the interval. */
const MAX_PROBE_GAP_SLOTS = 2880;

/**
 * Synthetic samples for the probe slots missed while no check could run (Vigil stopped, every
 * worker down): one per missed slot from the slot that was due until now, at most a day's
 * worth. They carry the last known state (available when the connection was active) with reason
 * `not_checked`, so Vigil's own outage does not count against the platform. Nothing for a
 * check less than one and a half intervals late, or for an inactive connection.
 */
export function probeGapFill(g: {
  connectionId: string;
  status: string;
  dueAt: Date;
  intervalMs: number;
  at: Date;
}): Sample[] {
  const due = g.dueAt.getTime();
  const now = g.at.getTime();
  if (g.status === "inactive" || now - due < 1.5 * g.intervalMs) return [];
  const rows: Sample[] = [];
  const first = Math.max(due, now - DAY_MS);
  for (let t = first; t <= now - g.intervalMs / 2 && rows.length < MAX_PROBE_GAP_SLOTS; t += g.intervalMs) {
    rows.push({
      ts: new Date(t),
      connection_id: g.connectionId,
      available: g.status === "active",
      response_time_ms: null,
      reason: "not_checked",
      error: "no check ran in this slot (Vigil was not running)",
      synthetic: true,
      source: "gap_fill",
    });
  }
  return rows;
}

/** At most this many synthetic samples are written for one silent gateway in one run. */
const MAX_HEARTBEAT_GAP_SLOTS = 1440;

/**
 * Synthetic samples for the slots a silent gateway missed, up to now: unavailable, reason
 * `missed_heartbeat`. Slot times derive from the last heartbeat, so writing them again is
 * idempotent (same keys).
 */
export function heartbeatGapFill(g: {
  connectionId: string;
  lastHeartbeatAt: Date;
  intervalMs: number;
  at: Date;
}): Sample[] {
  const interval = g.intervalMs;
  const last = g.lastHeartbeatAt.getTime();
  const now = g.at.getTime();
  const rows: Sample[] = [];
  const first = Math.max(last + interval, now - MAX_HEARTBEAT_GAP_SLOTS * interval);
  for (let t = first; t <= now; t += interval) {
    const slot = last + Math.round((t - last) / interval) * interval;
    rows.push({
      ts: new Date(slot),
      connection_id: g.connectionId,
      available: false,
      response_time_ms: null,
      reason: "missed_heartbeat",
      error: "no heartbeat from the gateway in this slot",
      synthetic: true,
      source: "gap_fill",
    });
  }
  return rows;
}

/** How old a heartbeat's time may be and still add an availability sample. */
const MAX_HEARTBEAT_SAMPLE_AGE_MS = DAY_MS;

/**
 * The sample of one heartbeat at `ts` (its period's end, or its arrival), or none: a heartbeat
 * for a period that ended over a day ago still counts its tokens, but adds no availability
 * sample, since days before yesterday are already rolled up and final (docs/operations.md: Retention and rollups).
 */
export function heartbeatSample(h: {
  connectionId: string;
  ts: Date;
  received: Date;
  status: string;
  latencyMs: number | null;
  pidAlive: boolean;
}): Sample | null {
  if (h.ts.getTime() < h.received.getTime() - MAX_HEARTBEAT_SAMPLE_AGE_MS) return null;
  const healthy = h.status === "healthy";
  const available = healthy && h.pidAlive;
  return {
    ts: h.ts,
    connection_id: h.connectionId,
    available,
    response_time_ms: h.latencyMs,
    reason: available ? null : healthy ? "process_down" : "gateway_unhealthy",
    error: available ? null : healthy ? "gateway process is not alive" : `gateway status ${h.status}`,
    synthetic: false,
    source: "heartbeat",
  };
}

/**
 * Writes samples and marks the late ones; resolves once the series store committed them. Each
 * sample taken while a maintenance window covered its connection is flagged `maintenance`
 * (docs/maintenance.md).
 */
export async function writeSamples(ctx: AppContext, samples: readonly Sample[]): Promise<void> {
  if (samples.length === 0) return;
  const rows = await withMaintenanceFlags(ctx, samples);
  await ctx.stores.series.append(availabilitySamples, rows);
  await samplesCommitted(ctx, rows);
  // a slow check: the anomaly detector judges its minute again (gap-fill is synthetic: not judged)
  const late = markLate(
    ctx,
    rows.filter((r) => !r.synthetic),
  );
  if (late) await late;
}

/**
 * For a caller that commits samples together with other tables in one `series.write` (heartbeat
 * ingest): the table write to include, the rows flagged first (maintenance/lookup.ts
 * `withMaintenanceFlags`). Call
 * `samplesCommitted` once the write resolved.
 */
export function samplesWrite(rows: readonly Sample[]): TableRows {
  return { table: availabilitySamples, rows };
}

const MARK_EVERY_MS = 1000;
const markedAt = new WeakMap<AppContext, Map<number, number>>();

/**
 * Marks the days of committed samples that came late, more than ROLLUP_LATENESS_MS after their
 * own time (gap-fill, a resent heartbeat), so reads take those days from raw samples until the
 * next rollup run has redone them (retention/rollups.ts: a run counts only samples that old, so
 * a sample committed sooner is counted by the run after it). Called only after the write is
 * acknowledged: a mark before it could be cleared by a rollup that ran before the sample was
 * visible. Null when there is nothing to mark, else the marking to wait for.
 */
export function samplesCommitted(ctx: AppContext, rows: readonly { ts: Date }[]): Promise<void> | null {
  const now = ctx.now();
  const late = now.getTime() - ROLLUP_LATENESS_MS;
  // nearly every call (live heartbeats, checks): nothing late, nothing to mark, no promise
  if (rows.every((r) => r.ts.getTime() >= late)) return null;
  const today = dayStart(now.getTime());
  const recent = markedAt.get(ctx) ?? new Map<number, number>();
  markedAt.set(ctx, recent);
  const days = new Set<number>();
  for (const r of rows) {
    if (r.ts.getTime() >= late) continue;
    const day = dayStart(r.ts.getTime());
    // a flood of late samples (a fleet reconnecting after midnight) refreshes a day's mark at
    // most once a second; the rollup run redoes yesterday every time anyway
    if (now.getTime() - (recent.get(day) ?? -Infinity) >= MARK_EVERY_MS) days.add(day);
  }
  if (days.size === 0) return null;
  for (const d of days) recent.set(d, now.getTime());
  for (const d of recent.keys()) if (d < today - DAY_MS) recent.delete(d);
  return markDaysDirty(
    ctx.stores.db,
    [...days].map((d) => new Date(d)),
    now,
  );
}
