import { availabilityByDay } from "../availability/totals.js";
import { requireAccess } from "../connections/access.js";
import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { asManager } from "../identity/visibility.js";
import { dayStart } from "../retention/rollups.js";
import { type BurnCounts, burnCounts, type BurnRates, burnRates } from "./burn.js";
import { deleteSlo, selectSlo, type SloRow, upsertSlo } from "./repository.js";
import type { SloBody } from "./schema.js";

/**
 * Service level objectives (docs/api.md: SLOs): per connection, the share of checks that must
 * succeed over a rolling window of whole UTC days. The SLI is Vigil's own samples (checks and
 * heartbeats), taken as uptime takes them: samples under maintenance are left out.
 *
 * - error budget: `total` 1 is the window's allowed failures, (1 − objective) of its checks;
 *   `consumed` is the failed checks as a fraction of that, `remaining` = 1 − consumed (below 0
 *   once the objective is missed);
 * - burn rates: per window, the failed share of its checks divided by (1 − objective): 1 spends
 *   the budget exactly over the SLO window, 14.4 spends a 30-day budget's 2 % in an hour.
 */

const MINUTE = 60_000;
export { BURN_WINDOWS, type BurnWindow } from "./burn.js";

export interface SloStatus {
  connection_id: string;
  objective: number | null;
  window_days: number | null;
  window_start: string | null;
  created_at: string | null;
  updated_at: string | null;
  sli: { checks: number; failed: number; availability: number | null } | null;
  error_budget: { total: number; consumed: number; remaining: number } | null;
  burn_rates: BurnRates | null;
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;

/** The status of an SLO at `at`: the window's budget (rollups and raw samples) and every burn rate (raw samples). */
export async function sloStatus(ctx: AppContext, slo: SloRow, at: Date): Promise<SloStatus> {
  const allowed = 1 - slo.objective;
  const windowStart = new Date(dayStart(at).getTime() - (slo.window_days - 1) * 1440 * MINUTE);
  const scope = { column: "connection_id", op: "eq" as const, value: slo.connection_id };
  await ctx.stores.series.waitVisible();
  const [days, counts] = await Promise.all([
    availabilityByDay(ctx, scope, windowStart, at, "all"),
    burnCounts(ctx, [slo.connection_id], at),
  ]);
  let checks = 0;
  let available = 0;
  for (const d of days) {
    checks += d.checks;
    available += d.available;
  }
  const failed = checks - available;
  const consumed = checks > 0 ? failed / (allowed * checks) : 0;
  const rates = burnRates(counts.get(slo.connection_id) as BurnCounts, slo.objective);
  return {
    connection_id: slo.connection_id,
    objective: slo.objective,
    window_days: slo.window_days,
    window_start: windowStart.toISOString(),
    created_at: new Date(slo.created_at).toISOString(),
    updated_at: new Date(slo.updated_at).toISOString(),
    sli: { checks, failed, availability: checks > 0 ? round(available / checks) : null },
    error_budget: { total: 1, consumed: round(consumed), remaining: round(1 - consumed) },
    burn_rates: rates,
  };
}

const none = (connectionId: string): SloStatus => ({
  connection_id: connectionId,
  objective: null,
  window_days: null,
  window_start: null,
  created_at: null,
  updated_at: null,
  sli: null,
  error_budget: null,
  burn_rates: null,
});

/** GET /v1/connections/{id}/slo: the SLO and its status; every field null when none is set. */
export async function getSlo(ctx: AppContext, actor: Actor, connectionId: string): Promise<SloStatus> {
  await requireAccess(ctx.stores.db, actor, connectionId);
  const slo = await selectSlo(ctx.stores.db, connectionId);
  return slo ? sloStatus(ctx, slo, ctx.now()) : none(connectionId);
}

/** PUT /v1/connections/{id}/slo: anyone who may manage the connection sets or replaces its SLO. */
export async function putSlo(
  ctx: AppContext,
  actor: Actor,
  connectionId: string,
  body: SloBody,
): Promise<SloStatus> {
  await requireAccess(ctx.stores.db, asManager(actor), connectionId);
  const slo = await upsertSlo(ctx.stores.db, {
    connectionId,
    objective: body.objective,
    windowDays: body.window_days,
    at: ctx.now(),
  });
  return sloStatus(ctx, slo, ctx.now());
}

/** DELETE /v1/connections/{id}/slo: removes the SLO; removing one that is not set is not an error. */
export async function removeSlo(
  ctx: AppContext,
  actor: Actor,
  connectionId: string,
): Promise<{ message: string; connection_id: string; removed: boolean }> {
  await requireAccess(ctx.stores.db, asManager(actor), connectionId);
  const removed = await deleteSlo(ctx.stores.db, connectionId);
  return {
    message: removed ? "SLO removed" : "The connection had no SLO",
    connection_id: connectionId,
    removed,
  };
}
