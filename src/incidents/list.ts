import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { forbidden, notFound } from "../core/errors.js";
import type { Page, PageRequest, Window } from "../core/page.js";
import { requireReadable } from "../connections/scope.js";
import type { Queryable } from "../stores/relational/types.js";
import {
  type EventKind,
  type IncidentKind,
  type IncidentRow,
  type IncidentStatus,
  selectEvents,
  selectIncident,
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
  status?: IncidentStatus;
  kind?: IncidentKind;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

/** Rows with their timelines, read in one query. */
async function withTimelines(db: Queryable, rows: readonly IncidentRow[]): Promise<Incident[]> {
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
  return rows.map((x) => ({
    id: x.id,
    connection_id: x.connection_id,
    kind: x.kind,
    status: x.status,
    title: x.title,
    opened_at: new Date(x.opened_at).toISOString(),
    acknowledged_at: iso(x.acknowledged_at),
    resolved_at: iso(x.resolved_at),
    events: byIncident.get(x.id) ?? [],
  }));
}

/**
 * Incidents of the connections the actor may see, newest first (by opening time, then id), each
 * with its timeline, optionally of one status and kind. Naming a connection the actor may not see
 * is forbidden; an unknown one is not found. `next` continues after the last row returned.
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
  const last = rows[rows.length - 1];
  return {
    rows: await withTimelines(db, rows),
    next: more && last ? { ts: new Date(last.opened_at), key: [last.id] } : null,
  };
}

/**
 * The incident's row as the actor may see it: 404 when it does not exist, 403 when its connection
 * is not visible to the actor (as the read API answers another tenant's connection).
 */
export async function requireIncident(db: Queryable, actor: Actor, incidentId: string): Promise<IncidentRow> {
  const row = await selectIncident(db, actor, incidentId);
  if (!row) throw notFound(`Incident ${incidentId} not found`);
  if (!row.visible) throw forbidden(`No access to incident ${incidentId}`);
  return row;
}

/** One incident with its whole timeline, in causal order. */
export async function getIncident(ctx: AppContext, actor: Actor, incidentId: string): Promise<Incident> {
  const row = await requireIncident(ctx.stores.db, actor, incidentId);
  const [incident] = await withTimelines(ctx.stores.db, [row]);
  if (!incident) throw notFound(`Incident ${incidentId} not found`);
  return incident;
}
