import {
  maintenanceBody,
  maintenanceParams,
  MAX_DURATION_MINUTES,
  validateMaintenanceBody,
} from "../../maintenance/schema.js";
import {
  createMaintenanceWindow,
  deleteMaintenanceWindow,
  getMaintenanceWindow,
  listMaintenanceWindows,
  MAX_WINDOWS_PER_ACCOUNT,
} from "../../maintenance/windows.js";
import { envelopeError } from "../responses/errors.js";
import {
  maintenanceWindow,
  maintenanceWindowDeleted,
  maintenanceWindowList,
} from "../responses/maintenance.js";
import { defineRoute } from "../route.js";

/**
 * Maintenance windows (docs/maintenance.md): while one covers a connection its checks still run
 * and are stored (flagged `maintenance`, left out of uptime), but no incident opens and nothing
 * is sent. The envelope error body, as /v1/webhooks.
 */
const tag = "Maintenance";
const account =
  "A window belongs to the caller's personal account when it lists personal connections, else to the organization " +
  "whose connections it lists or covers; changing an organization's windows needs its admin or owner role (an " +
  "organization key: its own organization only), every member sees them.";

export const maintenanceRoutes = [
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "POST",
    path: "/v1/maintenance-windows",
    summary: "Add a maintenance window: checks go on, but no incident opens and nothing is sent",
    description:
      'One-off: {"connection_ids": [...], "starts_at", "ends_at"} (it may start in the past but must end in the future). ' +
      'Recurring: {"connection_ids": [...], "rrule", "duration_minutes", "timezone"}, e.g. rrule ' +
      '"FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0", duration_minutes 120, timezone "America/New_York" (read in that ' +
      `zone, DST followed; optional starts_at is the schedule's DTSTART; each occurrence 1 to ${MAX_DURATION_MINUTES} ` +
      'minutes; it must have an occurrence ending in the future). "organization_id" instead of connection_ids covers ' +
      `every connection of the organization. ${account} Checks under a window are stored with maintenance: true and ` +
      "left out of uptime. 400 naming the field for a bad rule, a rule that never occurs, an unknown time zone, " +
      "ends_at not after starts_at or past, both or neither of connection_ids and organization_id; 404/403 for a " +
      `connection that does not exist or the key may not see. At most ${MAX_WINDOWS_PER_ACCOUNT} windows that have ` +
      "not ended per account: 409.",
    auth: "connections:write",
    body: maintenanceBody,
    parseBody: validateMaintenanceBody,
    status: 201,
    responses: { 201: maintenanceWindow, 404: envelopeError, 409: envelopeError },
    handler: ({ ctx, actor, body }) => createMaintenanceWindow(ctx, actor, body),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/maintenance-windows",
    summary: "The maintenance windows the key sees",
    description:
      "A personal key sees its personal windows and those of every organization its user belongs to; an organization " +
      "key its organization's. Each says whether it is active now and its next occurrence.",
    auth: "connections:read",
    status: 200,
    responses: { 200: maintenanceWindowList },
    handler: ({ ctx, actor }) => listMaintenanceWindows(ctx, actor),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "GET",
    path: "/v1/maintenance-windows/:id",
    summary: "One maintenance window",
    description: "404 when the key does not see it (another account's is not found either).",
    auth: "connections:read",
    params: maintenanceParams,
    status: 200,
    responses: { 200: maintenanceWindow },
    handler: ({ ctx, actor, params }) => getMaintenanceWindow(ctx, actor, params.id),
  }),
  defineRoute({
    tag,
    errorStyle: "envelope",
    method: "DELETE",
    path: "/v1/maintenance-windows/:id",
    summary: "Remove a maintenance window",
    description:
      `${account} It stops covering its connections at once; checks it covered keep their maintenance flag. 404 ` +
      "when the key does not see it (another account's is not found either).",
    auth: "connections:write",
    params: maintenanceParams,
    status: 200,
    responses: { 200: maintenanceWindowDeleted },
    handler: ({ ctx, actor, params }) => deleteMaintenanceWindow(ctx, actor, params.id),
  }),
];
