import { budgetWatch } from "../budgets/watch.js";
import type { AppContext } from "../core/context.js";
import { gatewayHeartbeats, gatewayModelUsage, type RowOf } from "../stores/series/tables.js";
import { heartbeatSample, samplesCommitted, samplesWrite } from "../availability/samples.js";
import { withMaintenanceFlags } from "../maintenance/lookup.js";
import { reportGatewayHealth } from "../probes/heartbeats.js";
import { markLate } from "../anomalies/late.js";

/** One heartbeat of a gateway as stored: its row and its per-model rows. */
export interface GatewayBeat {
  heartbeat: RowOf<typeof gatewayHeartbeats>;
  models: RowOf<typeof gatewayModelUsage>[];
}

/**
 * Stores a gateway's heartbeats (from POST /v1/gateway/ingest, or an OTLP export: otlp/ingest.ts)
 * with their model rows and an availability sample each, in one group commit, then lets the
 * rest of Vigil know: the spend to the budget watch, late rows to the rollups and the anomaly
 * detector, and each heartbeat to the gateway's health (probes/heartbeats.ts: liveness, and a run
 * of unhealthy ones opens an availability incident; a resent old heartbeat counts for nothing).
 * Resolves only after the series store committed all of it.
 */
export async function recordGatewayBeats(ctx: AppContext, beats: readonly GatewayBeat[]): Promise<void> {
  if (beats.length === 0) return;
  const samples = [];
  const models: RowOf<typeof gatewayModelUsage>[] = [];
  for (const b of beats) {
    const h = b.heartbeat;
    const sample = heartbeatSample({
      connectionId: h.connection_id,
      ts: h.ts,
      received: h.received_at,
      status: h.status,
      latencyMs: h.latency_ms ?? null,
      pidAlive: h.pid_alive,
    });
    if (sample) samples.push(sample);
    for (const m of b.models) models.push(m);
  }
  // flagged when a maintenance window covers the connection (docs/maintenance.md)
  const flagged = await withMaintenanceFlags(ctx, samples);
  await ctx.stores.series.write([
    { table: gatewayHeartbeats, rows: beats.map((b) => b.heartbeat) },
    { table: gatewayModelUsage, rows: models },
    // one group commit with the heartbeat: the sample is never stored without it
    samplesWrite(flagged),
  ]);
  // spend a budget counts is noticed now, not at the budget job's next run (budgets/watch.ts)
  for (const b of beats)
    if (b.heartbeat.cost_usd > 0)
      budgetWatch(ctx).spent(b.heartbeat.connection_id, b.heartbeat.cost_usd * 100, b.heartbeat.ts);
  const marking = samplesCommitted(ctx, flagged);
  if (marking) await marking;
  // a heartbeat for a period long past (buffered while its daemon was cut off): the detector judges it again
  const late = markLate(
    ctx,
    beats.map((b) => b.heartbeat),
  );
  if (late) await late;
  for (const b of beats) {
    const h = b.heartbeat;
    const available = h.healthy && h.pid_alive;
    const counted = reportGatewayHealth(ctx, {
      connectionId: h.connection_id,
      heartbeatId: h.heartbeat_id,
      ts: h.ts,
      received: h.received_at,
      available,
      reason: available ? null : h.healthy ? "process_down" : "gateway_unhealthy",
      error: available ? null : h.healthy ? "gateway process is not alive" : `gateway status ${h.status}`,
    });
    if (counted instanceof Promise) await counted;
  }
}
