import { z } from "zod";
import { invalidInput } from "../core/errors.js";
import { isoTimestamp } from "../core/limits.js";

/** Connections one window may list. */
export const MAX_WINDOW_CONNECTIONS = 100;
/** The longest occurrence of a recurring window: a week. */
export const MAX_DURATION_MINUTES = 10_080;
const MAX_RRULE_LENGTH = 500;

const SEND =
  'send {"connection_ids": [...], "starts_at", "ends_at"} for a one-off window, or {"connection_ids": [...], ' +
  '"rrule", "duration_minutes", "timezone"} for a recurring one ("organization_id" instead of connection_ids ' +
  "covers all of an organization's connections)";

const uuid = z.uuid({ error: "must be a UUID" });
const timestamp = isoTimestamp("2026-01-05T02:00:00Z");

/**
 * The body of POST /v1/maintenance-windows, as the OpenAPI document describes it (its input);
 * `validateMaintenanceBody` parses it into a MaintenanceBody, the schema's output.
 */
export const maintenanceBody = z
  .strictObject({
    connection_ids: z
      .array(uuid)
      .min(1)
      .max(MAX_WINDOW_CONNECTIONS)
      .optional()
      .describe(
        `the connections the window covers (1 to ${MAX_WINDOW_CONNECTIONS}), all of one account: the caller's ` +
          "personal connections or one organization's; not with organization_id",
      ),
    organization_id: uuid
      .optional()
      .describe("instead of connection_ids: every connection of the organization, those added later too"),
    starts_at: timestamp
      .optional()
      .describe(
        "one-off: when the window starts (may be in the past); recurring: the instant the schedule counts from " +
          "(RRULE DTSTART, read as a wall-clock time in `timezone`, at most 366 days back; default: today's midnight there)",
      ),
    ends_at: timestamp
      .optional()
      .describe("one-off only: when the window ends; after starts_at and in the future"),
    rrule: z
      .string()
      .max(MAX_RRULE_LENGTH)
      .optional()
      .describe(
        "recurring: one RFC 5545 RRULE line, e.g. FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0 (FREQ YEARLY, MONTHLY, " +
          "WEEKLY, DAILY or HOURLY; no DTSTART or TZID in it; UNTIL in UTC or as wall clock). It must occur with an " +
          "occurrence ending in the future",
      ),
    duration_minutes: z
      .number()
      .int()
      .min(1)
      .max(MAX_DURATION_MINUTES)
      .optional()
      .describe(`recurring: how long each occurrence lasts, 1 to ${MAX_DURATION_MINUTES} minutes (a week)`),
    timezone: z
      .string()
      .max(64)
      .optional()
      .describe("recurring: the IANA time zone the rule is read in, e.g. America/New_York (DST followed)"),
  })
  .transform((b): MaintenanceBody => validateMaintenanceBody(b));

/** A checked body: the window's target and its one-off or recurring schedule. */
export interface MaintenanceBody {
  target: { connectionIds: string[] } | { organizationId: string };
  schedule:
    | { kind: "one_off"; startsAt: Date; endsAt: Date }
    | { kind: "recurring"; rrule: string; durationMinutes: number; timezone: string; startsAt: Date | null };
}

const FIELDS = new Set([
  "connection_ids",
  "organization_id",
  "starts_at",
  "ends_at",
  "rrule",
  "duration_minutes",
  "timezone",
]);
const present = (b: Record<string, unknown>, k: string) => b[k] !== undefined && b[k] !== null;

function time(body: Record<string, unknown>, field: string): Date {
  const r = timestamp.safeParse(body[field]);
  if (!r.success)
    throw invalidInput(`body.${field}`, r.error.issues[0]?.message ?? "must be an ISO 8601 timestamp");
  return new Date(Date.parse(r.data));
}

/**
 * Parses the body of POST /v1/maintenance-windows: every problem of its shape is a 400 naming the
 * field. What needs the clock, the rule's expansion or the stores (ends in the future, occurs at
 * all, connections the caller may see) is checked by the verb (windows.ts).
 */
export function validateMaintenanceBody(raw: unknown): MaintenanceBody {
  if (raw === null || raw === undefined || typeof raw !== "object" || Array.isArray(raw))
    throw invalidInput("body", `must be a JSON object: ${SEND}`);
  const body = raw as Record<string, unknown>;
  const unknown = Object.keys(body).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) throw invalidInput(`body.${unknown}`, `is not a known field: ${SEND}`);

  let target: MaintenanceBody["target"];
  if (present(body, "connection_ids") && present(body, "organization_id"))
    throw invalidInput("body.organization_id", "give connection_ids or organization_id, not both");
  if (present(body, "organization_id")) {
    const r = uuid.safeParse(body.organization_id);
    if (!r.success) throw invalidInput("body.organization_id", "must be an organization id (a UUID)");
    target = { organizationId: r.data.toLowerCase() };
  } else {
    if (!present(body, "connection_ids"))
      throw invalidInput(
        "body.connection_ids",
        "is required (or organization_id): the connections the window covers",
      );
    const ids = body.connection_ids;
    if (!Array.isArray(ids)) throw invalidInput("body.connection_ids", "must be an array of connection ids");
    if (ids.length === 0) throw invalidInput("body.connection_ids", "must name at least one connection");
    if (ids.length > MAX_WINDOW_CONNECTIONS)
      throw invalidInput("body.connection_ids", `must name at most ${MAX_WINDOW_CONNECTIONS} connections`);
    ids.forEach((v, i) => {
      if (!uuid.safeParse(v).success)
        throw invalidInput(`body.connection_ids.${i}`, "must be a connection id (a UUID)");
    });
    target = { connectionIds: [...new Set(ids.map((v) => String(v).toLowerCase()))] };
  }

  if (!present(body, "rrule")) {
    for (const f of ["duration_minutes", "timezone"])
      if (present(body, f))
        throw invalidInput(
          `body.${f}`,
          'is only for a recurring window (with "rrule"); a one-off one has starts_at and ends_at',
        );
    if (!present(body, "starts_at")) throw invalidInput("body.starts_at", `is required: ${SEND}`);
    if (!present(body, "ends_at")) throw invalidInput("body.ends_at", `is required: ${SEND}`);
    const startsAt = time(body, "starts_at");
    const endsAt = time(body, "ends_at");
    if (endsAt <= startsAt) throw invalidInput("body.ends_at", "must be after starts_at");
    return { target, schedule: { kind: "one_off", startsAt, endsAt } };
  }

  if (typeof body.rrule !== "string") throw invalidInput("body.rrule", "must be a string (an RRULE)");
  if (body.rrule.length > MAX_RRULE_LENGTH)
    throw invalidInput("body.rrule", `must be at most ${MAX_RRULE_LENGTH} characters`);
  if (present(body, "ends_at"))
    throw invalidInput(
      "body.ends_at",
      "is only for a one-off window: a recurring one ends with its rule's UNTIL or COUNT",
    );
  if (!present(body, "duration_minutes"))
    throw invalidInput("body.duration_minutes", "is required with rrule: how long each occurrence lasts");
  const d = body.duration_minutes;
  if (typeof d !== "number" || !Number.isInteger(d) || d < 1 || d > MAX_DURATION_MINUTES)
    throw invalidInput(
      "body.duration_minutes",
      `must be a whole number of minutes from 1 to ${MAX_DURATION_MINUTES}`,
    );
  if (!present(body, "timezone"))
    throw invalidInput(
      "body.timezone",
      "is required with rrule: the IANA time zone it is read in, e.g. Europe/Paris",
    );
  if (typeof body.timezone !== "string")
    throw invalidInput("body.timezone", "must be an IANA time zone name");
  return {
    target,
    schedule: {
      kind: "recurring",
      rrule: body.rrule,
      durationMinutes: d,
      timezone: body.timezone.trim(),
      startsAt: present(body, "starts_at") ? time(body, "starts_at") : null,
    },
  };
}

/** A maintenance window id in the path. */
export const maintenanceParams = z.strictObject({
  id: z.uuid({ error: "must be a maintenance window id (a UUID)" }).toLowerCase(),
});
