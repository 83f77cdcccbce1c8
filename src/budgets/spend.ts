import pLimit from "p-limit";
import type { Actor } from "../core/actor.js";
import type { AppContext } from "../core/context.js";
import { usageTotals } from "../usage/totals.js";
import type { Month } from "./month.js";

/** Cents to a millionth, as PUT /v1/usage reports them. */
const roundCents = (c: number) => Math.round(c * 1e6) / 1e6;
/** Cents to US dollars, exactly as PUT /v1/usage's `cost_usd`. */
export const centsToUsd = (cents: number) => Math.round(cents * 1e6) / 1e8;

/** At most this many connections' totals are read at once. */
const CONCURRENCY = 4;

/**
 * The month's spend of each connection, in cents, up to `at` (inclusive): PUT /v1/usage's
 * `totals.cost_cents` for that range (usage entries' cents plus heartbeat US dollars converted),
 * so a budget counts spend exactly as the usage totals do. `cache` (connection id to cents)
 * lets one job run read each connection once.
 */
export async function spendByConnection(
  ctx: AppContext,
  actor: Actor,
  connectionIds: readonly string[],
  month: Month,
  at: Date,
  cache?: Map<string, number>,
): Promise<Map<string, number>> {
  const limit = pLimit(CONCURRENCY);
  const out = new Map<string, number>();
  await Promise.all(
    connectionIds.map((id) =>
      limit(async () => {
        const known = cache?.get(id);
        if (known !== undefined) return void out.set(id, known);
        const t = await usageTotals(ctx, actor, { connectionId: id, startDate: month.start, endDate: at });
        out.set(id, t.totals.cost_cents);
        cache?.set(id, t.totals.cost_cents);
      }),
    ),
  );
  return out;
}

/** The sum of several connections' spend, in cents rounded as the usage totals round them. */
export const totalCents = (spend: Map<string, number>) =>
  roundCents([...spend.values()].reduce((s, c) => s + c, 0));
