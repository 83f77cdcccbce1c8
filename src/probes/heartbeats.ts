import type { Logger } from "pino";
import type { AppContext } from "../context.js";
import { markLateSamples } from "../retention/rollups.js";
import { availabilitySamples, type RowOf } from "../stores/series/tables.js";
import { type IncidentContext, openIncident, resolveIncident } from "./incidents.js";

/** A gateway is expected every 60 s; after 120 s more without one it has missed its heartbeat. */
export const HEARTBEAT_INTERVAL_SECONDS = 60;
export const HEARTBEAT_GRACE_SECONDS = 120;
/** At most this many synthetic samples are written for one silent gateway in one run. */
const MAX_GAP_SLOTS = 1440;

interface Gateway extends Record<string, unknown> {
  id: string;
  user_id: string;
  organization_id: string | null;
  service_name: string;
  status: string;
  last_heartbeat_at: Date;
  interval: number;
  grace: number;
  open_incident: string | null;
  opened_at: Date | null;
}

/**
 * Watches gateway connections (jobs role). A gateway silent for longer than its interval plus
 * grace opens a `missed_heartbeat` incident (status `error`) and gets synthetic samples for the
 * slots it missed; once heartbeats arrive again the incident is resolved and the connection is
 * active. Samples are written at slot times derived from the last heartbeat, so writing them
 * again is idempotent.
 */
export class HeartbeatMonitor {
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private running?: Promise<void>;
  private readonly log: Logger;

  constructor(
    private readonly ctx: AppContext,
    private readonly tickMs = 10_000,
  ) {
    this.log = ctx.log;
  }

  start(): void {
    const loop = async () => {
      if (this.stopped) return;
      this.running = this.tick().then(
        () => undefined,
        (err) => this.log.warn({ err: (err as Error).message }, "heartbeat monitor tick failed"),
      );
      await this.running;
      if (!this.stopped) this.timer = setTimeout(loop, this.tickMs);
    };
    void loop();
  }

  async tick(): Promise<{ missed: number; recovered: number }> {
    const now = this.ctx.now();
    const r = await this.ctx.stores.db.query<Gateway>(
      `SELECT c.id, c.user_id, c.organization_id, c.service_name, c.status, c.last_heartbeat_at,
              coalesce(c.heartbeat_interval_seconds, $1) AS interval,
              coalesce(c.heartbeat_grace_seconds, $2) AS grace,
              i.id AS open_incident, i.opened_at
         FROM connections c
         LEFT JOIN incidents i ON i.connection_id = c.id AND i.kind = 'missed_heartbeat' AND i.status <> 'resolved'
        WHERE c.service_type = 'gateway' AND c.last_heartbeat_at IS NOT NULL`,
      [HEARTBEAT_INTERVAL_SECONDS, HEARTBEAT_GRACE_SECONDS],
    );
    let missed = 0;
    let recovered = 0;
    for (const g of r.rows) {
      const silentMs = now.getTime() - new Date(g.last_heartbeat_at).getTime();
      const limitMs = (Number(g.interval) + Number(g.grace)) * 1000;
      const ictx: IncidentContext = {
        connectionId: g.id,
        connectionName: g.service_name,
        userId: g.user_id,
        organizationId: g.organization_id,
        at: now,
        publicUrl: this.ctx.config.publicUrl,
      };
      if (silentMs > limitMs) {
        await this.fillGap(g, now);
        if (!g.open_incident) {
          await this.ctx.stores.db.transaction(async (tx) => {
            const opened = await openIncident(
              tx,
              ictx,
              "missed_heartbeat",
              `${g.service_name} stopped sending heartbeats`,
              {
                silentSeconds: Math.round(silentMs / 1000),
                lastHeartbeatAt: new Date(g.last_heartbeat_at).toISOString(),
              },
            );
            if (opened)
              await tx.query("UPDATE connections SET status = 'error', updated_at = now() WHERE id = $1", [
                g.id,
              ]);
          });
          missed++;
        }
      } else if (g.open_incident && g.opened_at && new Date(g.last_heartbeat_at) > new Date(g.opened_at)) {
        await this.ctx.stores.db.transaction(async (tx) => {
          await resolveIncident(tx, ictx, "missed_heartbeat", {
            heartbeatAt: new Date(g.last_heartbeat_at).toISOString(),
          });
          await tx.query("UPDATE connections SET status = 'active', updated_at = now() WHERE id = $1", [
            g.id,
          ]);
        });
        recovered++;
      }
    }
    return { missed, recovered };
  }

  /** Synthetic samples for the slots a silent gateway missed, up to now. */
  private async fillGap(g: Gateway, now: Date): Promise<void> {
    const interval = Number(g.interval) * 1000;
    const last = new Date(g.last_heartbeat_at).getTime();
    const rows: RowOf<typeof availabilitySamples>[] = [];
    const first = Math.max(last + interval, now.getTime() - MAX_GAP_SLOTS * interval);
    for (let t = first; t <= now.getTime(); t += interval) {
      const slot = last + Math.round((t - last) / interval) * interval;
      rows.push({
        ts: new Date(slot),
        connection_id: g.id,
        available: false,
        response_time_ms: null,
        reason: "missed_heartbeat",
        error: "no heartbeat from the gateway in this slot",
        synthetic: true,
        source: "gap_fill",
      });
    }
    if (rows.length) {
      await this.ctx.stores.series.append(availabilitySamples, rows);
      await markLateSamples(this.ctx, rows);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
