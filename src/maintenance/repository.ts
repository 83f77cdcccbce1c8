import type { Queryable } from "../stores/relational/types.js";
import { occurrences, type Recurrence, recurrenceCovers, type Span } from "./schedule.js";

/**
 * Every statement on the maintenance tables (sql/postgres/025_maintenance.sql), and the questions
 * the rest of Vigil asks them: is a connection under maintenance at an instant
 * (`underMaintenance`), and when is it in the next stretch of time (`maintenanceSpans`).
 */

/** An account as maintenance windows name it: a user's personal account or an organization. */
export type MaintenanceAccount = { scope: "user" | "organization"; id: string };

export interface MaintenanceWindowRow extends Record<string, unknown> {
  id: string;
  user_id: string | null;
  organization_id: string | null;
  covers_organization: boolean;
  starts_at: Date;
  ends_at: Date | null;
  rrule: string | null;
  dtstart: string | null;
  duration_minutes: number | null;
  timezone: string | null;
  created_at: Date;
  /** The connections it lists, sorted; empty when it covers its organization. */
  connection_ids: string[];
}

function binder() {
  const params: unknown[] = [];
  return { params, param: (v: unknown) => `$${params.push(v)}` };
}

const ofAccount = (a: MaintenanceAccount, param: (v: unknown) => string) =>
  a.scope === "organization"
    ? `w.organization_id = ${param(a.id)}`
    : `w.user_id = ${param(a.id)} AND w.organization_id IS NULL`;

/**
 * A listed connection counts for its window only while it belongs to the window's account: one
 * moved to another organization (or made personal) since is neither covered nor listed, so a
 * window never reaches another account's connection.
 */
const STILL_OWNED = `(c.organization_id = w.organization_id
  OR (w.organization_id IS NULL AND c.organization_id IS NULL AND c.user_id = w.user_id))`;

const COLUMNS = `w.id, w.user_id, w.organization_id, w.covers_organization, w.starts_at, w.ends_at, w.rrule,
  w.dtstart, w.duration_minutes, w.timezone, w.created_at,
  COALESCE((SELECT array_agg(mc.connection_id ORDER BY mc.connection_id)
              FROM maintenance_window_connections mc JOIN connections c ON c.id = mc.connection_id
             WHERE mc.window_id = w.id AND ${STILL_OWNED}), ARRAY[]::text[]) AS connection_ids`;

/** The recurrence of a recurring window's row; null for a one-off window. */
export function recurrenceOf(w: {
  rrule: string | null;
  dtstart: string | null;
  timezone: string | null;
  duration_minutes: number | null;
}): Recurrence | null {
  if (w.rrule === null || w.dtstart === null || w.timezone === null || w.duration_minutes === null)
    return null;
  return { rrule: w.rrule, dtstart: w.dtstart, timezone: w.timezone, durationMinutes: w.duration_minutes };
}

type CoverRow = Pick<
  MaintenanceWindowRow,
  "id" | "starts_at" | "ends_at" | "rrule" | "dtstart" | "duration_minutes" | "timezone"
> & { connection_id: string };

/**
 * The windows covering any of the connections (listed, or through their organization; all
 * connections when `connectionIds` is null) whose bounds overlap [from, to): a one-off window's
 * bounds are its own start and end, a recurring one's its first start and last end, so only those
 * can have a stretch there.
 */
async function coveringWindows(
  db: Queryable,
  connectionIds: string[] | null,
  from: Date,
  to: Date,
): Promise<CoverRow[]> {
  const cols = "w.id, w.starts_at, w.ends_at, w.rrule, w.dtstart, w.duration_minutes, w.timezone";
  const bounds = "w.starts_at < $2 AND (w.ends_at IS NULL OR w.ends_at > $1)";
  const some = (col: string) => (connectionIds === null ? "" : ` AND ${col} = ANY($3::text[])`);
  const r = await db.query<CoverRow>(
    `SELECT c.id AS connection_id, ${cols}
       FROM maintenance_window_connections mc JOIN maintenance_windows w ON w.id = mc.window_id
       JOIN connections c ON c.id = mc.connection_id
      WHERE ${bounds} AND ${STILL_OWNED}${some("mc.connection_id")}
     UNION ALL
     SELECT c.id AS connection_id, ${cols}
       FROM maintenance_windows w JOIN connections c ON c.organization_id = w.organization_id
      WHERE w.covers_organization AND ${bounds}${some("c.id")}`,
    connectionIds === null ? [from, to] : [from, to, connectionIds],
  );
  return r.rows;
}

/**
 * True when a maintenance window covers the connection at `at` (start ≤ at < end). One indexed
 * query; a recurring window's rule is expanded in memory and its occurrences cached by week
 * (src/maintenance/schedule.ts), so this is cheap enough per incident and per sample batch.
 */
export async function underMaintenance(db: Queryable, connectionId: string, at: Date): Promise<boolean> {
  const rows = await coveringWindows(db, [connectionId], at, new Date(at.getTime() + 1));
  return rows.some((w) => {
    const rec = recurrenceOf(w);
    return rec === null || recurrenceCovers(rec, at);
  });
}

/**
 * The maintenance stretches of each connection overlapping [from, to), merged and sorted; a
 * connection without any is absent. One query, for a batch of samples (or, with null, for every
 * connection: the samples writer's snapshot, maintenance/lookup.ts).
 */
export async function maintenanceSpans(
  db: Queryable,
  /** Null: every connection under some window. */
  connectionIds: string[] | null,
  from: Date,
  to: Date,
): Promise<Map<string, Span[]>> {
  const out = new Map<string, Span[]>();
  if (connectionIds?.length === 0 || to <= from) return out;
  const rows = await coveringWindows(db, connectionIds && [...new Set(connectionIds)], from, to);
  for (const w of rows) {
    const rec = recurrenceOf(w);
    // a one-off window's ends_at is never null (the table's maintenance_windows_kind check)
    const spans =
      rec === null
        ? [{ start: w.starts_at, end: w.ends_at ?? new Date(8.64e15) }]
        : occurrences(rec, from, to);
    const list = out.get(w.connection_id) ?? [];
    list.push(...spans);
    out.set(w.connection_id, list);
  }
  for (const [id, list] of out) out.set(id, merge(list));
  return out;
}

/** Sorted, overlapping or touching spans joined. */
function merge(spans: Span[]): Span[] {
  const sorted = [...spans].sort((a, b) => a.start.getTime() - b.start.getTime());
  const out: Span[] = [];
  for (const s of sorted) {
    const last = out[out.length - 1];
    if (last && s.start.getTime() <= last.end.getTime()) {
      if (s.end > last.end) last.end = s.end;
    } else out.push({ start: s.start, end: s.end });
  }
  return out;
}

/** True when a span of the sorted list covers `at`. */
export function inSpans(spans: Span[] | undefined, at: Date): boolean {
  if (!spans) return false;
  const t = at.getTime();
  return spans.some((s) => s.start.getTime() <= t && t < s.end.getTime());
}

// ---- the windows themselves ----------------------------------------------------------------------

export async function insertMaintenanceWindow(
  tx: Queryable,
  w: {
    id: string;
    account: MaintenanceAccount;
    coversOrganization: boolean;
    startsAt: Date;
    endsAt: Date | null;
    recurrence: Recurrence | null;
    createdBy: string | null;
    createdAt: Date;
    connectionIds: string[];
  },
): Promise<void> {
  await tx.query(
    `INSERT INTO maintenance_windows (id, user_id, organization_id, covers_organization, starts_at, ends_at, rrule,
       dtstart, duration_minutes, timezone, created_by, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [
      w.id,
      w.account.scope === "user" ? w.account.id : null,
      w.account.scope === "organization" ? w.account.id : null,
      w.coversOrganization,
      w.startsAt,
      w.endsAt,
      w.recurrence?.rrule ?? null,
      w.recurrence?.dtstart ?? null,
      w.recurrence?.durationMinutes ?? null,
      w.recurrence?.timezone ?? null,
      w.createdBy,
      w.createdAt,
    ],
  );
  if (w.connectionIds.length > 0)
    await tx.query(
      `INSERT INTO maintenance_window_connections (window_id, connection_id)
       SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`,
      [w.id, w.connectionIds],
    );
}

/**
 * Who reads windows: a personal key (or signed-in user) sees its user's personal windows and those
 * of every organization the user belongs to; an organization key only its organization's.
 */
export type MaintenanceReader = { userId: string; organizationKey: string | null };

const visibleTo = (r: MaintenanceReader, param: (v: unknown) => string) =>
  r.organizationKey !== null
    ? `w.organization_id = ${param(r.organizationKey)}`
    : `((w.user_id = ${param(r.userId)} AND w.organization_id IS NULL)
        OR w.organization_id IN (SELECT m.organization_id FROM memberships m WHERE m.user_id = ${param(r.userId)}))`;

/** The windows the reader sees, oldest first. */
export async function selectVisibleWindows(
  db: Queryable,
  r: MaintenanceReader,
): Promise<MaintenanceWindowRow[]> {
  const { params, param } = binder();
  const q = await db.query<MaintenanceWindowRow>(
    `SELECT ${COLUMNS} FROM maintenance_windows w WHERE ${visibleTo(r, param)} ORDER BY w.created_at, w.id`,
    params,
  );
  return q.rows;
}

/** The window when the reader sees it; null otherwise (another account's is not told apart from none). */
export async function selectVisibleWindow(
  db: Queryable,
  r: MaintenanceReader,
  id: string,
): Promise<MaintenanceWindowRow | null> {
  const { params, param } = binder();
  const q = await db.query<MaintenanceWindowRow>(
    `SELECT ${COLUMNS} FROM maintenance_windows w WHERE w.id = ${param(id)} AND ${visibleTo(r, param)}`,
    params,
  );
  return q.rows[0] ?? null;
}

/** Deletes a window by id; false when it was gone. */
export async function deleteWindow(tx: Queryable, id: string): Promise<boolean> {
  const r = await tx.query("DELETE FROM maintenance_windows WHERE id = $1 RETURNING id", [id]);
  return r.rows.length > 0;
}

/** How many of the account's windows have not ended by `now` (the per-account cap). */
export async function countLiveWindows(tx: Queryable, a: MaintenanceAccount, now: Date): Promise<number> {
  const { params, param } = binder();
  const r = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM maintenance_windows w
      WHERE ${ofAccount(a, param)} AND (w.ends_at IS NULL OR w.ends_at > ${param(now)})`,
    params,
  );
  return r.rows[0]?.n ?? 0;
}

/** Owner of each existing connection among `ids`: its organization, or its user for a personal one. */
export async function selectConnectionOwners(
  db: Queryable,
  ids: string[],
): Promise<{ id: string; user_id: string; organization_id: string | null }[]> {
  const r = await db.query<{ id: string; user_id: string; organization_id: string | null }>(
    "SELECT id, user_id, organization_id FROM connections WHERE id = ANY($1::text[])",
    [ids],
  );
  return r.rows;
}

/** Locks the account's row for the rest of the transaction (the cap, counted one at a time). */
export async function lockAccount(tx: Queryable, a: MaintenanceAccount): Promise<boolean> {
  const r = await tx.query(
    a.scope === "organization"
      ? "SELECT 1 FROM organizations WHERE id = $1 FOR NO KEY UPDATE"
      : "SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE",
    [a.id],
  );
  return r.rows.length > 0;
}
