import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import type { Page, PageRequest, Window } from "../core/page.js";
import { dayStart } from "../retention/rollups.js";
import { availabilityByDay, availabilityTotals } from "./totals.js";
import { availabilitySamples } from "../stores/series/tables.js";
import { connectionWalk, idScope } from "../connections/scope.js";

const DAY_MS = 86_400_000;

export type SummaryWindow = "day" | "week" | "month";

/** One connection's availability over the window. */
export interface AvailabilitySummaryRow {
  connection_id: string;
  window: SummaryWindow;
  since: string;
  until: string;
  /** Checks in the window, those taken under maintenance left out. */
  checks: number;
  available_checks: number;
  /** Checks taken under a maintenance window (docs/maintenance.md): in no other figure. */
  maintenance_checks: number;
  /** Percent of checks available, to 3 decimals; null when every check was under maintenance. */
  uptime_percent: number | null;
  /** Milliseconds to 1 decimal; null when no check measured one. */
  avg_response_time_ms: number | null;
}

interface Tally {
  checks: number;
  up: number;
  rs: number;
  rn: number;
  /** checks under maintenance */
  mt: number;
}

/** Ids per series statement at most, when a page's connections turn out to have few checks. */
const CHUNK_MAX = 2000;

/**
 * Per connection (ordered by id; connections without checks left out): checks, available
 * checks, uptime percent and average response time over the window; checks taken under a
 * maintenance window are counted apart (`maintenance_checks`) and in no other figure. `day` is the last 24 hours,
 * from raw samples. `week` and `month` are the last 7 and 30 UTC days, today included so far:
 * days already rolled up from the daily rollup (kept 425 days, so the summary outlives raw
 * samples), the rest from raw samples.
 *
 * `since` and `until` narrow the window (never widen it): exactly for `day`; for `week` and
 * `month` at whole UTC days (each taken from the start of its day), as the rollup counts days.
 * Rows page by connection id: `limit` at a time, `after` the last connection of the previous page.
 * The page of visible connections drives the series statements (connections/scope.ts,
 * `connectionWalk`): the next `limit + 1` ids after the cursor, then more (in growing chunks)
 * only while connections without checks leave the page short.
 */
export async function availabilitySummary(
  ctx: AppContext,
  actor: Actor,
  q: PageRequest & Window & { connectionId?: string; window: SummaryWindow },
  /** Ids per series statement at most (tests make it small). */
  chunkMax = CHUNK_MAX,
): Promise<Page<AvailabilitySummaryRow>> {
  const walk = await connectionWalk(ctx, actor, "asc", q.connectionId);
  const now = ctx.now();
  let since: Date;
  let until: Date;
  if (q.window === "day") {
    // raw samples: every plan keeps at least 7 days, so no retention horizon applies
    since = new Date(Math.max(now.getTime() - DAY_MS, q.since?.getTime() ?? 0));
    until = new Date(Math.min(now.getTime(), q.until?.getTime() ?? now.getTime()));
  } else {
    const start = dayStart(now).getTime() - (q.window === "week" ? 6 : 29) * DAY_MS;
    since = new Date(Math.max(start, q.since ? dayStart(q.since).getTime() : 0));
    until = new Date(Math.min(now.getTime(), q.until ? dayStart(q.until).getTime() : now.getTime()));
  }
  if (!(since < until)) return { rows: [], next: null };
  const want = q.limit + 1;
  const found: [string, Tally][] = [];
  let after = q.after?.key[0];
  let ask = Math.min(chunkMax, want);
  for (;;) {
    const ids = await walk.page(after, ask);
    if (ids.length === 0) break;
    const scope = idScope(ids);
    const parts =
      q.window === "day"
        ? await availabilityTotals(ctx, availabilitySamples, scope, since, until, "all")
        : await availabilityByDay(ctx, scope, since, until, "all");
    const totals = new Map<string, Tally>();
    for (const r of parts) {
      const e = totals.get(r.connection_id) ?? { checks: 0, up: 0, rs: 0, rn: 0, mt: 0 };
      e.checks += r.checks;
      e.up += r.available;
      e.rs += r.response_ms_sum;
      e.rn += r.response_ms_count;
      e.mt += r.maintenance;
      totals.set(r.connection_id, e);
    }
    // the page's order is the ids' (byte order, as PostgreSQL gave them)
    for (const id of ids) {
      const e = totals.get(id);
      if (e && (e.checks > 0 || e.mt > 0)) found.push([id, e]);
    }
    if (found.length >= want || ids.length < ask) break;
    after = ids[ids.length - 1];
    ask = Math.min(chunkMax, Math.max(want - found.length, ask * 2));
  }
  const page = found.slice(0, q.limit);
  const last = page[page.length - 1];
  const rows = page.map(([connection_id, e]) => ({
    connection_id,
    window: q.window,
    since: since.toISOString(),
    until: until.toISOString(),
    checks: e.checks,
    available_checks: e.up,
    maintenance_checks: e.mt,
    uptime_percent: e.checks ? Math.round((e.up / e.checks) * 100_000) / 1000 : null,
    avg_response_time_ms: e.rn ? Math.round((e.rs / e.rn) * 10) / 10 : null,
  }));
  return { rows, next: found.length > page.length && last ? { ts: new Date(0), key: [last[0]] } : null };
}
