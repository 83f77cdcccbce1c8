import type { AppContext } from "../core/context.js";
import { availabilitySamples } from "../stores/series/tables.js";
import type { Measure } from "../stores/series/types.js";

/**
 * Burn rates and the multi-window, multi-burn-rate alert conditions of the Google SRE workbook
 * (chapter 5, "Alerting on SLOs"), for SLOs of any window (docs/api.md: SLOs).
 *
 * A burn rate is the failed share of a window's checks divided by (1 − objective): 1 spends the
 * error budget exactly over the SLO window. An alert condition holds when the burn rate is at or
 * above its threshold over both a long window (it has lasted) and a short one (it is still going
 * on: the short window is what resets the alert minutes after the failures stop, so it does not
 * stay open for hours nor flap).
 *
 * The workbook's thresholds are stated for a 30-day SLO as shares of the budget spent within the
 * long window: 2 % in 1 h (14.4×) and 5 % in 6 h (6×) page, 10 % in 3 days (1×) opens a ticket.
 * For a window of D days the same shares give threshold = share × D × 24 h / long window:
 * 13.44×, 5.6×, 0.933× at 28 days; 43.2×, 18×, 3× at 90 days. A threshold above the highest burn
 * rate the objective allows (every check failing: 1 / (1 − objective)) is lowered to it.
 */

const MINUTE = 60_000;

/** The burn-rate windows (GET …/slo answers each). */
export const BURN_WINDOWS = {
  "5m": 5 * MINUTE,
  "30m": 30 * MINUTE,
  "1h": 60 * MINUTE,
  "6h": 360 * MINUTE,
  "1d": 1440 * MINUTE,
  "3d": 4320 * MINUTE,
} as const;
export type BurnWindow = keyof typeof BURN_WINDOWS;
export type BurnRates = Record<BurnWindow, number | null>;
export type BurnCounts = Record<BurnWindow, { checks: number; failed: number }>;

export type BurnSeverity = "page" | "ticket";

export interface BurnAlert {
  severity: BurnSeverity;
  long: BurnWindow;
  short: BurnWindow;
  /** The share of the whole window's budget spent within `long` at the threshold. */
  budgetShare: number;
}

/** The workbook's three conditions, the pages first. */
export const BURN_ALERTS: readonly BurnAlert[] = [
  { severity: "page", long: "1h", short: "5m", budgetShare: 0.02 },
  { severity: "page", long: "6h", short: "30m", budgetShare: 0.05 },
  { severity: "ticket", long: "3d", short: "6h", budgetShare: 0.1 },
];

const round = (x: number) => Math.round(x * 1e6) / 1e6;

/** The burn-rate threshold of a condition for an SLO of `windowDays` and `objective`. */
export function burnThreshold(alert: BurnAlert, windowDays: number, objective: number): number {
  const scaled = (alert.budgetShare * windowDays * 1440 * MINUTE) / BURN_WINDOWS[alert.long];
  return round(Math.min(scaled, 1 / (1 - objective)));
}

/** Burn rates from counts: null where a window has no checks. */
export function burnRates(counts: BurnCounts, objective: number): BurnRates {
  const allowed = 1 - objective;
  const out = {} as BurnRates;
  for (const w of Object.keys(BURN_WINDOWS) as BurnWindow[]) {
    const c = counts[w];
    out[w] = c.checks > 0 ? round(c.failed / c.checks / allowed) : null;
  }
  return out;
}

export interface BurnVerdict {
  /** The most severe condition that holds, or null. */
  severity: BurnSeverity | null;
  /** The condition that decided it (the first of its severity that holds). */
  alert: BurnAlert | null;
  threshold: number | null;
  rates: BurnRates;
}

/** Which alert condition holds for these burn rates (the most severe), if any. */
export function judgeBurn(rates: BurnRates, windowDays: number, objective: number): BurnVerdict {
  for (const alert of BURN_ALERTS) {
    const threshold = burnThreshold(alert, windowDays, objective);
    const long = rates[alert.long];
    const short = rates[alert.short];
    // a tiny tolerance: 14.4 read back from a float division may be 14.399999…
    if (long !== null && short !== null && long >= threshold - 1e-9 && short >= threshold - 1e-9)
      return { severity: alert.severity, alert, threshold, rates };
  }
  return { severity: null, alert: null, threshold: null, rates };
}

/** Checks and available checks, samples under maintenance left out (as uptime counts them). */
const BURN_MEASURES = {
  checks: { fn: "count", unless: "maintenance" },
  available: { fn: "countTrue", column: "available", unless: "maintenance" },
} as const satisfies Record<string, Measure>;

/**
 * Checks and failures per connection over every burn window ending at `at`, from raw samples: one
 * statement per window for all the connections given (the job evaluates hundreds at once). A
 * connection without samples in a window has zero checks there.
 */
export async function burnCounts(
  ctx: AppContext,
  connectionIds: readonly string[],
  at: Date,
): Promise<Map<string, BurnCounts>> {
  const out = new Map<string, BurnCounts>();
  for (const id of connectionIds) {
    const empty = {} as BurnCounts;
    for (const w of Object.keys(BURN_WINDOWS) as BurnWindow[]) empty[w] = { checks: 0, failed: 0 };
    out.set(id, empty);
  }
  if (connectionIds.length === 0) return out;
  const windows = Object.entries(BURN_WINDOWS) as [BurnWindow, number][];
  const results = await Promise.all(
    windows.map(([, ms]) =>
      ctx.stores.series.aggregate(availabilitySamples, {
        bucket: "all",
        where: [{ column: "connection_id", op: "in", value: connectionIds }],
        since: new Date(at.getTime() - ms),
        until: at,
        groupBy: ["connection_id"],
        measures: BURN_MEASURES,
      }),
    ),
  );
  windows.forEach(([w], i) => {
    for (const r of results[i] ?? []) {
      const c = out.get(String(r.connection_id));
      if (!c) continue;
      const checks = Number(r.checks ?? 0);
      c[w] = { checks, failed: checks - Number(r.available ?? 0) };
    }
  });
  return out;
}
