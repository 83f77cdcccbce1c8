import { randomUUID } from "node:crypto";
import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { conflict, forbidden, invalidInput, notFound } from "../core/errors.js";
import { connectionsAccess, asManager, roleIn } from "../identity/visibility.js";
import { forgetMaintenance } from "./lookup.js";
import {
  countLiveWindows,
  deleteWindow,
  insertMaintenanceWindow,
  lockAccount,
  type MaintenanceAccount,
  type MaintenanceReader,
  type MaintenanceWindowRow,
  recurrenceOf,
  selectConnectionOwners,
  selectVisibleWindow,
  selectVisibleWindows,
} from "./repository.js";
import type { MaintenanceBody } from "./schema.js";
import {
  bounds,
  isTimeZone,
  nextSpan,
  parseRule,
  type Recurrence,
  RuleError,
  RuleTooCostly,
  toWall,
  wallText,
} from "./schedule.js";

/**
 * Maintenance windows (docs/maintenance.md): while one covers a connection, its checks still run
 * and their samples are stored, flagged `maintenance` and left out of uptime, but no incident
 * opens for it (incidents.ts `openIncident`) and nothing is sent. A window belongs to one account,
 * like a webhook: the caller's personal account when it lists personal connections, else the
 * organization whose connections it lists or covers. Changing an organization's windows needs its
 * admin or owner role; every member sees them.
 */

/** How far back a recurring window's starts_at (its rule's DTSTART) may be. */
export const MAX_RECURRING_PAST_DAYS = 366;

/** An account has at most this many windows that have not ended. */
export const MAX_WINDOWS_PER_ACCOUNT = 100;

/** A window as the API answers it. */
export interface MaintenanceWindow {
  id: string;
  /** The organization it belongs to; null for a personal window. */
  organization_id: string | null;
  /** What it covers: the listed connections, or every connection of its organization. */
  covers: "connections" | "organization";
  /** The listed connections; null when it covers its organization. */
  connection_ids: string[] | null;
  /** One-off: its start; recurring: its first occurrence's start. */
  starts_at: string;
  /** One-off: its end; recurring: its last occurrence's end, null while the rule has no end. */
  ends_at: string | null;
  rrule: string | null;
  duration_minutes: number | null;
  timezone: string | null;
  /** True when it covers its connections now. */
  active: boolean;
  /** The occurrence under way or the next one; null when none is left. */
  next: { starts_at: string; ends_at: string } | null;
  created_at: string;
}

const iso = (d: Date | string) => new Date(d).toISOString();

function shown(r: MaintenanceWindowRow, now: Date): MaintenanceWindow {
  const rec = recurrenceOf(r);
  let next: { start: Date; end: Date } | null = null;
  if (rec) next = nextSpan(rec, now);
  else if (r.ends_at && new Date(r.ends_at) > now)
    next = { start: new Date(r.starts_at), end: new Date(r.ends_at) };
  return {
    id: r.id,
    organization_id: r.organization_id,
    covers: r.covers_organization ? "organization" : "connections",
    connection_ids: r.covers_organization ? null : r.connection_ids,
    starts_at: iso(r.starts_at),
    ends_at: r.ends_at ? iso(r.ends_at) : null,
    rrule: r.rrule,
    duration_minutes: r.duration_minutes,
    timezone: r.timezone,
    active: next !== null && next.start <= now && now < next.end,
    next: next ? { starts_at: next.start.toISOString(), ends_at: next.end.toISOString() } : null,
    created_at: iso(r.created_at),
  };
}

/** Who reads: a personal key's (or signed-in) user with their organizations, or an organization key's organization. */
function readerOf(actor: Actor): MaintenanceReader {
  const p = asManager(actor);
  return {
    userId: p.userId,
    organizationKey: p.type === "api_key" && p.scope === "organization" ? p.organizationId : null,
  };
}

/** 403 unless the caller may change the organization's windows (its admin or owner; an organization key only its own). */
async function requireManager(ctx: AppContext, actor: Actor, organizationId: string): Promise<void> {
  const p = asManager(actor);
  if (p.type === "api_key" && p.scope === "organization" && p.organizationId !== organizationId)
    throw forbidden("An organization key can only manage its own organization's maintenance windows");
  const role = await roleIn(ctx.stores.db, p.userId, organizationId);
  if (role !== "admin" && role !== "owner")
    throw forbidden(
      `Only an organization's admins and owners may change its maintenance windows; this key's user is ${role ? `a ${role}` : "not a member"}`,
    );
}

/**
 * The account a new window belongs to, after checking the caller may see every connection it
 * names (404 for one that does not exist, 403 for one it may not see, as elsewhere) and may
 * change the account's windows (403).
 */
async function accountFor(
  ctx: AppContext,
  actor: Actor,
  target: MaintenanceBody["target"],
): Promise<MaintenanceAccount> {
  const p = asManager(actor);
  if ("organizationId" in target) {
    await requireManager(ctx, actor, target.organizationId);
    return { scope: "organization", id: target.organizationId };
  }
  const db = ctx.stores.db;
  const access = await connectionsAccess(db, actor, target.connectionIds);
  for (const id of target.connectionIds)
    if (access.get(id) === "absent") throw notFound(`Connection ${id} not found`);
  for (const id of target.connectionIds)
    if (access.get(id) !== "ok") throw forbidden(`You do not have access to connection ${id}`);
  const owners = await selectConnectionOwners(db, target.connectionIds);
  const orgs = new Set(owners.map((o) => o.organization_id));
  if (orgs.size > 1)
    throw invalidInput(
      "body.connection_ids",
      "must all belong to one account: your personal connections, or one organization's (make one window per account)",
    );
  const org = owners[0]?.organization_id ?? null;
  if (org !== null) {
    await requireManager(ctx, actor, org);
    return { scope: "organization", id: org };
  }
  return { scope: "user", id: p.userId };
}

/**
 * The schedule of a recurring window, checked: a known time zone, a valid rule, an occurrence
 * ending in the future. Each problem is a 400 naming its field.
 */
function recurringSchedule(
  s: Extract<MaintenanceBody["schedule"], { kind: "recurring" }>,
  now: Date,
): { recurrence: Recurrence; startsAt: Date; endsAt: Date | null } {
  if (!isTimeZone(s.timezone))
    throw invalidInput(
      "body.timezone",
      `"${s.timezone}" is not a known IANA time zone, e.g. Europe/Paris or America/New_York`,
    );
  let rrule: string;
  try {
    rrule = parseRule(s.rrule);
  } catch (err) {
    if (err instanceof RuleError) throw invalidInput("body.rrule", err.message);
    throw err;
  }
  // the rule is expanded from its start on every lookup: a start years back costs for nothing
  if (s.startsAt && s.startsAt.getTime() < now.getTime() - MAX_RECURRING_PAST_DAYS * 86_400_000)
    throw invalidInput(
      "body.starts_at",
      `of a recurring window may be at most ${MAX_RECURRING_PAST_DAYS} days in the past: start the schedule later`,
    );
  // DTSTART: starts_at as wall clock in the zone, else today's midnight there
  const wall = s.startsAt
    ? Math.floor(toWall(s.startsAt.getTime(), s.timezone) / 1000) * 1000
    : Math.floor(toWall(now.getTime(), s.timezone) / 86_400_000) * 86_400_000;
  const recurrence: Recurrence = {
    rrule,
    dtstart: wallText(wall),
    timezone: s.timezone,
    durationMinutes: s.durationMinutes,
  };
  let b;
  try {
    b = bounds(recurrence, now);
  } catch (err) {
    if (err instanceof RuleTooCostly)
      throw invalidInput(
        "body.rrule",
        "never occurs (or not within a search Vigil can afford): check that its BYMONTH, BYMONTHDAY, BYDAY and the like can meet",
      );
    throw err;
  }
  if (!b.first)
    throw invalidInput(
      "body.rrule",
      "never occurs: its parts cannot all meet, or its UNTIL or COUNT ends it before it starts",
    );
  if (!b.nextEndingAfterNow)
    throw invalidInput("body.rrule", "has no occurrence ending in the future: its UNTIL or COUNT is past");
  return { recurrence, startsAt: b.first, endsAt: b.lastEnd };
}

/**
 * POST /v1/maintenance-windows: a one-off or recurring window over some connections or a whole
 * organization. Nothing is stored unless every check passes.
 */
export async function createMaintenanceWindow(
  ctx: AppContext,
  actor: Actor,
  body: MaintenanceBody,
): Promise<MaintenanceWindow> {
  const now = ctx.now();
  let startsAt: Date;
  let endsAt: Date | null;
  let recurrence: Recurrence | null = null;
  if (body.schedule.kind === "one_off") {
    if (body.schedule.endsAt <= now) throw invalidInput("body.ends_at", "must be in the future");
    startsAt = body.schedule.startsAt;
    endsAt = body.schedule.endsAt;
  } else {
    ({ recurrence, startsAt, endsAt } = recurringSchedule(body.schedule, now));
  }
  const account = await accountFor(ctx, actor, body.target);
  const p = asManager(actor);
  const id = randomUUID();
  const connectionIds = "connectionIds" in body.target ? body.target.connectionIds : [];
  const row = await ctx.stores.db.transaction(async (tx) => {
    if (!(await lockAccount(tx, account))) throw forbidden("The window's account no longer exists");
    const live = await countLiveWindows(tx, account, now);
    if (live >= MAX_WINDOWS_PER_ACCOUNT)
      throw conflict(
        `An account has at most ${MAX_WINDOWS_PER_ACCOUNT} maintenance windows that have not ended and this one has ${live}; delete one (DELETE /v1/maintenance-windows/{id}) first`,
      );
    await insertMaintenanceWindow(tx, {
      id,
      account,
      coversOrganization: !("connectionIds" in body.target),
      startsAt,
      endsAt,
      recurrence,
      createdBy: p.userId,
      createdAt: now,
      connectionIds,
    });
    return selectVisibleWindow(tx, readerOf(actor), id);
  });
  forgetMaintenance(ctx);
  if (!row) throw new Error("the new maintenance window is not visible to its creator");
  return shown(row, now);
}

/** GET /v1/maintenance-windows: the windows the caller sees, oldest first. */
export async function listMaintenanceWindows(
  ctx: AppContext,
  actor: Actor,
): Promise<{ maintenance_windows: MaintenanceWindow[] }> {
  const now = ctx.now();
  const rows = await selectVisibleWindows(ctx.stores.db, readerOf(actor));
  return { maintenance_windows: rows.map((r) => shown(r, now)) };
}

/** GET /v1/maintenance-windows/{id}: 404 when the caller does not see it (another account's included). */
export async function getMaintenanceWindow(
  ctx: AppContext,
  actor: Actor,
  id: string,
): Promise<MaintenanceWindow> {
  const row = await selectVisibleWindow(ctx.stores.db, readerOf(actor), id);
  if (!row) throw notFound(`Maintenance window ${id} not found`);
  return shown(row, ctx.now());
}

/**
 * DELETE /v1/maintenance-windows/{id}: ends the window's effect at once. 404 when the caller does
 * not see it; 403 for an organization's window unless the caller is its admin or owner. Samples
 * already flagged keep their flag.
 */
export async function deleteMaintenanceWindow(
  ctx: AppContext,
  actor: Actor,
  id: string,
): Promise<{ id: string; deleted: true }> {
  const row = await selectVisibleWindow(ctx.stores.db, readerOf(actor), id);
  if (!row) throw notFound(`Maintenance window ${id} not found`);
  if (row.organization_id) await requireManager(ctx, actor, row.organization_id);
  if (!(await deleteWindow(ctx.stores.db, id))) throw notFound(`Maintenance window ${id} not found`);
  forgetMaintenance(ctx);
  return { id, deleted: true };
}
