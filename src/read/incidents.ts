import type { z } from "zod";
import type { AppContext } from "../context.js";
import type { Principal } from "../identity/principal.js";
import { relationalPage } from "./relational-page.js";
import type { incidentsQuery } from "./schemas.js";

interface IncidentRow extends Record<string, unknown> {
  id: string;
  connection_id: string;
  kind: string;
  status: string;
  title: string;
  opened_at: Date;
  acknowledged_at: Date | null;
  resolved_at: Date | null;
}

/** Incidents of visible connections, newest first, each with its timeline. */
export async function listIncidents(ctx: AppContext, p: Principal, q: z.output<typeof incidentsQuery>) {
  const { rows, pagination } = await relationalPage<IncidentRow>(
    ctx,
    p,
    { endpoint: "incidents", table: "incidents", timeColumn: "opened_at" },
    q,
  );
  const events = rows.length
    ? await ctx.stores.db.query<{ incident_id: string; at: Date; kind: string; detail: unknown }>(
        "SELECT incident_id, at, kind, detail FROM incident_events WHERE incident_id = ANY($1::text[]) ORDER BY at, kind",
        [rows.map((x) => x.id)],
      )
    : { rows: [] };
  return {
    data: rows.map((x) => ({
      id: x.id,
      connection_id: x.connection_id,
      kind: x.kind,
      status: x.status,
      title: x.title,
      opened_at: new Date(x.opened_at).toISOString(),
      acknowledged_at: x.acknowledged_at ? new Date(x.acknowledged_at).toISOString() : null,
      resolved_at: x.resolved_at ? new Date(x.resolved_at).toISOString() : null,
      events: events.rows
        .filter((e) => e.incident_id === x.id)
        .map((e) => ({ at: new Date(e.at).toISOString(), kind: e.kind, detail: e.detail })),
    })),
    pagination,
  };
}
