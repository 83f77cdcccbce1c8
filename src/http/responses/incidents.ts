import { z } from "zod";
import { EVENT_KINDS, INCIDENT_KINDS, INCIDENT_STATUSES } from "../../incidents/incidents.js";
import { anyJson, cursorPage, oneOf, timestamp } from "./common.js";

/** One event of an incident's timeline. */
export const incidentEvent = z.object({
  at: timestamp,
  kind: oneOf(EVENT_KINDS).describe(
    "opened, acknowledged, resolved; notified (e-mails decided: kind, channel, recipients, notification_ids, " +
      "deferred_until when noise control made a failure e-mail wait); delivered, delivery_failed (error, retry_at), " +
      "delivery_given_up (error): one per delivery attempt; suppressed (withheld by noise control, with the reason)",
  ),
  detail: anyJson.describe(
    "the event's facts: for acknowledged `by` (the actor: type, key_id, user_id) and `note`; for resolved `reason` and `automatic`",
  ),
});

/** An incident with its whole timeline, oldest event first, in causal order. */
export const incident = z.object({
  id: z.string(),
  connection_id: z.string(),
  kind: oneOf(INCIDENT_KINDS),
  status: oneOf(INCIDENT_STATUSES),
  title: z.string(),
  opened_at: timestamp,
  acknowledged_at: timestamp.nullable(),
  resolved_at: timestamp.nullable(),
  events: z.array(incidentEvent),
});

export const incidentPage = cursorPage(incident);
