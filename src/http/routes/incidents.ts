import type { Actor } from "../../core/actor.js";
import type { AppContext } from "../../core/context.js";
import type { Page, Position } from "../../core/page.js";
import { requireReadable } from "../../connections/scope.js";
import { acknowledge } from "../../incidents/acknowledge.js";
import { getIncident, listIncidents } from "../../incidents/list.js";
import { decodeCursor, restPage } from "../paging.js";
import { acknowledgeBody, incidentParams, incidentsQuery } from "../read-queries.js";
import { envelopeError } from "../responses/errors.js";
import { incident, incidentPage } from "../responses/incidents.js";
import { defineRoute } from "../route.js";
import { readFingerprint } from "./read.js";

/** The REST parameters of a keyset-paged read (the read API's common ones and connection_id). */
export interface KeysetParams {
  connection_id?: string;
  since?: string;
  until?: string;
  cursor?: string;
  limit: number;
}

export const windowOf = (q: KeysetParams) => ({
  connectionId: q.connection_id,
  since: q.since ? new Date(q.since) : undefined,
  until: q.until ? new Date(q.until) : undefined,
});

/**
 * One keyset page at the REST edge, as the read API pages (routes/read.ts): the cursor is bound
 * to the endpoint, connection, window and the `bound` filters; an unknown or foreign
 * connection_id is answered (404/403) before a refused cursor.
 */
export async function keysetPage<R>(
  ctx: AppContext,
  actor: Actor,
  q: KeysetParams,
  bound: Record<string, unknown>,
  run: (after: Position | undefined) => Promise<Page<R>>,
) {
  const fingerprint = readFingerprint(q, bound);
  let after: Position | undefined;
  try {
    after = decodeCursor(ctx, q.cursor, fingerprint);
  } catch (err) {
    if (q.connection_id) await requireReadable(ctx, actor, q.connection_id);
    throw err;
  }
  return restPage(ctx, await run(after), q.limit, fingerprint);
}

/**
 * Incidents: the read API's list (analytics:read) with status and kind filters, one incident with
 * its whole timeline, and the acknowledgement (connections:write: it changes the monitoring's
 * state; analytics:read is read-only, and MCP tokens carry only read permissions).
 */
export const incidentRoutes = [
  defineRoute({
    tag: "Incidents",
    method: "GET",
    path: "/v1/incidents",
    summary: "Incidents with their timelines",
    description:
      "Newest first (by opened_at). `status` (open, acknowledged, resolved) and `kind` (availability, " +
      "missed_heartbeat, anomaly, budget) filter them; an unknown value is a 400 naming the parameter.",
    auth: "analytics:read",
    errorStyle: "envelope",
    status: 200,
    query: incidentsQuery,
    responses: { 200: incidentPage },
    handler: ({ ctx, actor, query: q }) => {
      // filters are bound only when given, so cursors issued before they existed still continue
      const bound = {
        endpoint: "incidents",
        ...(q.status !== undefined ? { status: q.status } : {}),
        ...(q.kind !== undefined ? { kind: q.kind } : {}),
      };
      return keysetPage(ctx, actor, q, bound, (after) =>
        listIncidents(ctx, actor, { ...windowOf(q), status: q.status, kind: q.kind, limit: q.limit, after }),
      );
    },
  }),
  defineRoute({
    tag: "Incidents",
    method: "GET",
    path: "/v1/incidents/:id",
    summary: "One incident with its whole timeline",
    description:
      "404 when the incident does not exist, 403 when it belongs to a connection the key cannot see.",
    auth: "analytics:read",
    errorStyle: "envelope",
    status: 200,
    params: incidentParams,
    responses: { 200: incident },
    handler: ({ ctx, actor, params }) => getIncident(ctx, actor, params.id),
  }),
  defineRoute({
    tag: "Incidents",
    method: "POST",
    path: "/v1/incidents/:id/acknowledge",
    summary: "Acknowledge an incident",
    description:
      "Moves an open incident to acknowledged and answers the incident with its timeline; the `acknowledged` " +
      "event records who (the API key and its user) and the optional `note` (at most 1000 characters). " +
      "Acknowledging an acknowledged incident changes nothing and answers 200 (a retry is safe; the first " +
      "acknowledgement stands). A resolved incident: 409 CONFLICT. 404 when it does not exist, 403 when it " +
      "belongs to a connection the key cannot see. No e-mail is sent, and a failure e-mail still waiting " +
      "for the noise-control interval is withheld.",
    auth: "connections:write",
    errorStyle: "envelope",
    status: 200,
    params: incidentParams,
    body: acknowledgeBody,
    responses: { 200: incident, 409: envelopeError },
    handler: ({ ctx, actor, params, body }) =>
      acknowledge(ctx, actor, { incidentId: params.id, note: body.note }),
  }),
];
