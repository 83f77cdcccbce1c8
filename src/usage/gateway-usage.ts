import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { invalidInput, ServiceError } from "../core/errors.js";
import { getConnection } from "../connections/get.js";
import { usageTotals } from "./totals.js";

const DAY_MS = 86_400_000;

export const USAGE_PERIODS = ["day", "week", "month"] as const;
export type UsagePeriod = (typeof USAGE_PERIODS)[number];

/** Each period is a rolling window up to now: `month` is PUT /v1/usage's default range. */
export const PERIOD_DAYS: Record<UsagePeriod, number> = { day: 1, week: 7, month: 30 };

/** One model's share of a gateway's usage. */
export interface GatewayModelUsage {
  model: string;
  inputTokens: number;
  outputTokens: number;
  /** US dollars, as the daemon reported it or as priced from the pricing table. */
  spendUsd: number;
  /**
   * Requests attributed to the model. The daemon reports a request count per heartbeat period,
   * not per model: with one model it is exact, with several the period's requests are shared
   * out by each model's share of the tokens (`requestsByModelEstimated`).
   */
  requests: number;
}

/** A gateway connection's spend over a rolling period, reconciled with PUT /v1/usage. */
export interface GatewayUsage {
  connection: { id: string; name: string };
  period: UsagePeriod;
  /** Start of the window (inclusive). */
  since: string;
  /** End of the window (inclusive): now. */
  until: string;
  /** PUT /v1/usage `totals.cost_usd` for the same window: heartbeat cost plus usage-entry cost. */
  totalSpendUsd: number;
  /** The same total in cents (PUT /v1/usage `totals.cost_cents`). */
  totalSpendCents: number;
  /** Per model reported by the gateway's heartbeats, highest spend first. */
  byModel: GatewayModelUsage[];
  heartbeats: number;
  /** Requests reported by the heartbeats in the window. */
  totalRequests: number;
  inputTokens: number;
  outputTokens: number;
  /**
   * Heartbeat cost not itemised per model: heartbeats without `byModel`, or whose period estimate
   * differs from the sum of their models' costs (negative when the estimate is lower).
   */
  unitemizedSpendUsd: number;
  /** Cost of usage entries recorded for this connection through POST /v1/usage (cents converted). */
  usageEntriesSpendUsd: number;
  /** True when several models share the requests, which are then apportioned (see `requests`). */
  requestsByModelEstimated: boolean;
  /** Models whose usage arrived without a cost and that the pricing table does not know (counted at 0). */
  unpricedModels: string[];
}

/** Cents (to a millionth) as dollars, the way PUT /v1/usage derives `cost_usd`. */
const usd = (cents: number) => Math.round(cents * 1e6) / 1e8;

/** Splits `total` into whole parts proportional to `weights` (largest remainder); equal parts without weights. */
export function apportion(total: number, weights: readonly number[]): number[] {
  if (weights.length === 0) return [];
  const sum = weights.reduce((s, w) => s + w, 0);
  const shares = weights.map((w) => (sum > 0 ? (total * w) / sum : total / weights.length));
  const parts = shares.map(Math.floor);
  let left = total - parts.reduce((s, p) => s + p, 0);
  const order = shares
    .map((s, i) => ({ i, rest: s - Math.floor(s) }))
    .sort((a, b) => b.rest - a.rest || a.i - b.i);
  for (const { i } of order) {
    if (left <= 0) break;
    parts[i] = (parts[i] ?? 0) + 1;
    left--;
  }
  return parts;
}

/**
 * The spend of one `gateway` connection over the last day, 7 days or 30 days (rolling, up to
 * now), by model. 404 when the connection does not exist, 403 when the caller may not see it,
 * invalid input naming its kind when it is not a gateway. The money comes from `usageTotals`
 * (PUT /v1/usage) over the same window, so `totalSpendUsd` equals its `totals.cost_usd`:
 * heartbeats carry US dollars and usage entries cents; both are summed in cents and converted
 * once. `totalSpendUsd` = Σ `byModel.spendUsd` + `unitemizedSpendUsd` + `usageEntriesSpendUsd`,
 * up to rounding to a millionth of a cent.
 */
export async function gatewayUsage(
  ctx: AppContext,
  actor: Actor,
  q: { connectionId: string; period?: UsagePeriod },
): Promise<GatewayUsage> {
  const period = q.period ?? "day";
  if (!USAGE_PERIODS.includes(period)) throw invalidInput("period", "must be day, week or month");
  const connection = await getConnection(ctx, actor, q.connectionId);
  if (connection.service_type !== "gateway")
    throw new ServiceError(
      "invalid_input",
      `Connection ${connection.id} ("${connection.service_name}") is a ${connection.service_type} connection; gateway usage exists only for gateway connections.`,
      {
        field: "connection_id",
        reason: "not_a_gateway",
        details: { field: "connection_id", service_type: connection.service_type },
      },
    );
  const until = ctx.now();
  const since = new Date(until.getTime() - PERIOD_DAYS[period] * DAY_MS);
  const t = await usageTotals(ctx, actor, { connectionId: connection.id, startDate: since, endDate: until });

  const gw = t.gateway;
  const models = gw?.by_model ?? [];
  const requests = apportion(
    gw?.requests ?? 0,
    models.map((m) => m.input_tokens + m.output_tokens),
  );
  const byModel = models
    .map((m, i) => ({
      model: m.model,
      inputTokens: m.input_tokens,
      outputTokens: m.output_tokens,
      spendUsd: usd(m.cost_cents),
      requests: requests[i] ?? 0,
    }))
    .sort((a, b) => b.spendUsd - a.spendUsd || (a.model < b.model ? -1 : a.model > b.model ? 1 : 0));
  const modelCents = models.reduce((s, m) => s + m.cost_cents, 0);
  const entryCents = t.by_entity.reduce((s, e) => s + e.cost_cents, 0);
  return {
    connection: { id: connection.id, name: connection.service_name },
    period,
    since: since.toISOString(),
    until: until.toISOString(),
    totalSpendUsd: t.totals.cost_usd,
    totalSpendCents: t.totals.cost_cents,
    byModel,
    heartbeats: gw?.heartbeats ?? 0,
    totalRequests: gw?.requests ?? 0,
    inputTokens: gw?.input_tokens ?? 0,
    outputTokens: gw?.output_tokens ?? 0,
    unitemizedSpendUsd: usd((gw?.cost_cents ?? 0) - modelCents),
    usageEntriesSpendUsd: usd(entryCents),
    requestsByModelEstimated: byModel.length > 1,
    unpricedModels: t.unpriced_models,
  };
}
