import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import type { Page, PageRequest, Window } from "../core/page.js";
import { requireReadable } from "../connections/scope.js";
import {
  type EventKind,
  type IncidentKind,
  type IncidentStatus,
  selectEvents,
  selectIncidentPage,
} from "./repository.js";

/** An incident with its timeline, as every door shows it (the REST row of GET /v1/incidents). */
export interface Incident {
  id: string;
  connection_id: string;
  kind: IncidentKind;
  status: IncidentStatus;
  title: string;
  opened_at: string;
  acknowledged_at: string | null;
  resolved_at: string | null;
  /** Oldest first, in causal order. */
  events: { at: string; kind: EventKind; detail: unknown }[];
}

export interface IncidentQuery extends PageRequest, Window {
  connectionId?: string;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

/**
 * Incidents of the connections the actor may see, newest first (by opening time, then id), each
 * with its timeline. Naming a connection the actor may not see is forbidden; an unknown one is
 * not found. `next` continues after the last row returned.
 */
export async function listIncidents(
  ctx: AppContext,
  actor: Actor,
  q: IncidentQuery,
): Promise<Page<Incident>> {
  const db = ctx.stores.db;
  if (q.connectionId) await requireReadable(ctx, actor, q.connectionId);
  const found = await selectIncidentPage(db, actor, q);
  const more = found.length > q.limit;
  const rows = more ? found.slice(0, q.limit) : found;
  const events = await selectEvents(
    db,
    rows.map((r) => r.id),
  );
  const byIncident = new Map<string, Incident["events"]>();
  for (const e of events) {
    const list = byIncident.get(e.incident_id) ?? [];
    list.push({ at: new Date(e.at).toISOString(), kind: e.kind, detail: e.detail });
    byIncident.set(e.incident_id, list);
  }
  const last = rows[rows.length - 1];
  return {
    rows: rows.map((x) => ({
      id: x.id,
      connection_id: x.connection_id,
      kind: x.kind,
      status: x.status,
      title: x.title,
      opened_at: new Date(x.opened_at).toISOString(),
      acknowledged_at: iso(x.acknowledged_at),
      resolved_at: iso(x.resolved_at),
      events: byIncident.get(x.id) ?? [],
    })),
    next: more && last ? { ts: new Date(last.opened_at), key: [last.id] } : null,
  };
}
