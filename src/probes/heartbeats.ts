import { heartbeatGapFill, writeSamples } from "../availability/samples.js";
import { recordStatus } from "../connections/status.js";
import type { AppContext } from "../core/context.js";
import { type IncidentTarget, openIncident, resolveIncident } from "../incidents/incidents.js";
import { selectGateways } from "./repository.js";

/** A gateway is expected every 60 s; after 120 s more without one it has missed its heartbeat. */
export const HEARTBEAT_INTERVAL_SECONDS = 60;
export const HEARTBEAT_GRACE_SECONDS = 120;

/**
 * The missed-heartbeat detector, one run (the jobs role runs it every 10 s). A gateway silent
 * for longer than its interval plus grace opens a `missed_heartbeat` incident (status `error`)
 * and gets synthetic samples for the slots it missed; once heartbeats arrive again (ingest makes
 * the connection active) the incident is resolved. Gap-fill samples sit at slot times derived
 * from the last heartbeat, so writing them again is idempotent.
 */
export async function watchHeartbeats(ctx: AppContext): Promise<{ missed: number; recovered: number }> {
  const now = ctx.now();
  const gateways = await selectGateways(ctx.stores.db, {
    intervalSeconds: HEARTBEAT_INTERVAL_SECONDS,
    graceSeconds: HEARTBEAT_GRACE_SECONDS,
  });
  const publicUrl = ctx.config.publicUrl;
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
    if (silentMs > limitMs) {
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
        });
        if (opened) await recordStatus(tx, g.id, { type: "heartbeat_missed" }, now);
      });
      missed++;
    } else if (g.open_incident && g.opened_at && last > new Date(g.opened_at)) {
      await ctx.stores.db.transaction(async (tx) => {
        await resolveIncident(tx, target, {
          kind: "missed_heartbeat",
          detail: { heartbeatAt: last.toISOString() },
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
